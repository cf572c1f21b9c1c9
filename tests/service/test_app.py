"""The HTTP service as a client meets it: a real `cli.py serve` on 127.0.0.1, real models, real index, httpx and
the openai client."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

from switchyard.run_context import ALL
from tests.conftest import ROOT
from tests.service.conftest import running_server, wait_for_job

QUESTION = "Who patented the knuckle coupler?"


def sse_events(response: httpx.Response):
    """Parsed `event:`/`data:` pairs of a text/event-stream response, as they arrive."""
    kind, data = None, []
    for line in response.iter_lines():
        if line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield kind, "\n".join(data)
            kind, data = None, []


def metric(text: str, name: str, **labels) -> float:
    """The value of one Prometheus sample (0 if absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


@pytest.mark.slow
class TestAsk:
    def test_answer_with_citations(self, server):
        with server.client() as c:
            r = c.post("/v1/ask", json={"question": QUESTION})
        assert r.status_code == 200, r.text
        body = r.json()
        assert "Janney" in body["answer"] and body["citations"][0]["title"] == "Railway couplers"
        assert set(body) >= {"answer", "abstained", "citations", "trace", "usage", "config", "run_id", "steps"}

    def test_pipelines_side_by_side_on_one_question(self, server):
        with server.client() as c:
            fixed = c.post("/v1/ask", json={"question": QUESTION, "pipeline": "fixed"}).json()
            no_llm = c.post("/v1/ask", json={"question": QUESTION, "pipeline": "no-llm"}).json()
            listed = c.get("/v1/pipelines").json()
        assert fixed["usage"]["llm_calls"] >= 1 and no_llm["usage"]["llm_calls"] == 0
        assert fixed["config"]["resolved"]["answer"]["method"] == "llm"
        assert [p["name"] for p in listed] == ["no-llm", "fixed"]
        assert all(p["mermaid"].lstrip().startswith(("graph", "---", "%%")) for p in listed)

    @pytest.mark.parametrize(
        "body, status, said",
        [
            ({"question": QUESTION, "pipeline": "nope"}, 404, "known pipelines: no-llm, fixed"),
            ({"question": "   "}, 400, "the question is empty"),
            ({"question": "x" * 2001}, 413, "longer than 2000"),
            ({"question": QUESTION, "collection": "../etc"}, 400, "invalid collection name"),
            ({"question": QUESTION, "collection": "missing"}, 404, "does not exist"),
            ({"question": QUESTION, "where": "color=="}, 400, ""),
            ({"nothing": 1}, 422, ""),
        ],
    )
    def test_bad_requests_are_json_4xx(self, server, body, status, said):
        with server.client() as c:
            r = c.post("/v1/ask", json=body)
        assert r.status_code == status, r.text
        assert said in json.dumps(r.json()["detail"])

    def test_health_and_docs(self, server):
        with server.client() as c:
            assert c.get("/healthz").json() == {
                "status": "ok",
                "pipelines": ["no-llm", "fixed"],
                "state": {"backend": "local", "ok": True, "detail": None},
            }
            assert "/v1/ask/stream" in c.get("/openapi.json").json()["paths"]
            assert c.get("/docs").status_code == 200


@pytest.mark.slow
class TestStream:
    def test_event_order_and_final_answer(self, server):
        with (
            server.client() as c,
            c.stream("POST", "/v1/ask/stream", json={"question": QUESTION, "pipeline": "fixed"}) as r,
        ):
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            events = [(kind, json.loads(data)) for kind, data in sse_events(r)]
        kinds = [k for k, _ in events]
        assert kinds[0] == "run_start" and kinds[-1] in ("answer", "error")
        assert all(k == e["event"] for k, e in events)
        nodes = [e["node"] for k, e in events if k == "node_end"]
        assert nodes[:4] == ["rewrite", "retrieve", "rerank", "grade"]
        final = events[-1][1]
        assert final["event"] == "answer", final
        assert final["result"]["run_id"] == events[0][1]["run_id"]
        first_token = kinds.index("token") if "token" in kinds else None
        if first_token is not None:  # answer tokens only, inside the answer node
            assert kinds[first_token - 1] == "node_start" and events[first_token - 1][1]["node"] == "answer"

    def test_a_client_that_disconnects_frees_its_run(self, server):
        with server.client() as c:
            with c.stream("POST", "/v1/ask/stream", json={"question": QUESTION, "pipeline": "fixed"}) as r:
                for kind, _data in sse_events(r):
                    if kind == "node_start":
                        break  # walk away mid-run
            deadline = time.time() + 60
            while metric(c.get("/metrics").text, "switchyard_runs_in_flight") != 0:
                assert time.time() < deadline, "the cancelled run still holds its place"
                time.sleep(0.2)
            assert c.post("/v1/ask", json={"question": QUESTION}).status_code == 200  # still serving


@pytest.mark.slow
class TestOpenAICompatible:
    def test_openai_client_plain_and_streamed(self, server):
        from openai import OpenAI

        client = OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=300)
        done = client.chat.completions.create(
            model="no-llm", messages=[{"role": "system", "content": "ignored"}, {"role": "user", "content": QUESTION}]
        )
        content = done.choices[0].message.content
        assert "Janney" in content and "Sources:\n[1] Railway couplers" in content
        assert done.model_extra["sources"][0]["title"] == "Railway couplers"
        pieces, last = [], None
        for chunk in client.chat.completions.create(
            model="fixed", stream=True, messages=[{"role": "user", "content": QUESTION}]
        ):
            if chunk.choices:
                pieces.append(chunk.choices[0].delta.content or "")
                last = chunk
        assert last.choices[0].finish_reason == "stop"
        text = "".join(pieces)
        assert "Sources:" in text or "Not found" in text
        assert "sources" in last.model_extra

    def test_unknown_model_is_an_openai_style_404(self, server):
        import openai

        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.NotFoundError) as info:
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": QUESTION}])
        assert "known pipelines: no-llm, fixed" in str(info.value)


@pytest.mark.slow
class TestCollections:
    def test_upload_good_and_bad_files_then_list_and_delete(self, tmp_path, index_copy):
        with running_server(tmp_path, index_copy, "--config", "no-llm") as srv, srv.client() as c:
            before = {d["doc_id"] for d in c.get("/v1/collections/default/documents").json()}
            files = [
                (
                    "files",
                    (
                        "../../escape/turntables.txt",
                        b"A turntable turns locomotives around in a roundhouse "
                        b"yard. Turntables date from the steam era.",
                    ),
                ),
                ("files", ("broken.pdf", b"%PDF-1.4 this is not really a pdf")),
                ("files", ("notes.xyz", b"unsupported format")),
            ]
            r = c.post("/v1/collections/default/documents", files=files)
            assert r.status_code == 202, r.text
            assert r.json()["files"] == ["turntables.txt", "broken.pdf", "notes.xyz"]
            job = wait_for_job(c, r.json()["job_id"])
            status = {f["name"]: f for f in job["files"]}
            assert job["state"] == "done" and job["progress"] == {"files_done": 3, "files_total": 3}
            assert status["turntables.txt"]["status"] == "indexed"
            assert status["broken.pdf"]["status"] == "error" and status["broken.pdf"]["error"]
            assert status["notes.xyz"]["status"] == "error"
            assert not (tmp_path / "escape").exists() and (tmp_path / "uploads" / "default" / "turntables.txt").exists()
            docs = {d["doc_id"]: d for d in c.get("/v1/collections/default/documents").json()}
            new = set(docs) - before
            assert len(new) == 1 and before <= set(docs)  # the bad files changed nothing
            answer = c.post("/v1/ask", json={"question": "What turns locomotives around?"}).json()
            assert "turntable" in answer["answer"].lower()
            (doc_id,) = new
            assert c.delete(f"/v1/collections/default/documents/{doc_id}").json()["deleted"] == doc_id
            assert c.delete(f"/v1/collections/default/documents/{doc_id}").status_code == 404
            assert doc_id not in {d["doc_id"] for d in c.get("/v1/collections/default/documents").json()}
            # a new collection by upload, then asked by name
            r = c.post("/v1/collections/yard2/documents", files=[("files", ("a.txt", b"Retarders slow cars."))])
            assert wait_for_job(c, r.json()["job_id"])["state"] == "done"
            assert {"name": "yard2", "chunks": 1} in c.get("/v1/collections").json()
            asked = c.post("/v1/ask", json={"question": "What slows cars?", "collection": "yard2"}).json()
            assert [d["doc_id"] for d in c.get("/v1/collections/yard2/documents").json()] == asked[
                "retrieved_doc_ids"
            ]  # searched that collection alone
            assert c.get("/v1/jobs/nope").status_code == 404
            assert c.get("/v1/collections/none/documents").status_code == 404

    def test_upload_limits(self, tmp_path, index_copy):
        with (
            running_server(
                tmp_path, index_copy, "--config", "no-llm", "--max-upload-files", "2", "--max-upload-mb", "0.001"
            ) as srv,
            srv.client() as c,
        ):
            too_many = [("files", (f"f{i}.txt", b"x")) for i in range(3)]
            assert c.post("/v1/collections/default/documents", files=too_many).status_code == 413
            big = [("files", ("big.txt", b"x" * 5000))]
            r = c.post("/v1/collections/default/documents", files=big)
            assert r.status_code == 413 and "larger than" in r.json()["detail"]
            assert c.post("/v1/collections/bad name/documents", files=big).status_code == 400

    def test_questions_during_an_ingest_see_whole_documents(self, tmp_path, index_copy):
        """A document replaced while questions run: every answer cites the old text or the new, never a mix."""
        old = " ".join(f"Sentence {i} says the ferry yard uses old rules." for i in range(60)).encode()
        new = " ".join(f"Sentence {i} says the ferry yard uses new rules." for i in range(60)).encode()
        with (
            running_server(tmp_path, index_copy, "--config", "no-llm", "--max-in-flight", "8") as srv,
            srv.client() as c,
        ):
            r = c.post("/v1/collections/default/documents", files=[("files", ("ferry.txt", old))])
            assert wait_for_job(c, r.json()["job_id"])["state"] == "done"
            seen, stop = [], threading.Event()

            def ask():
                with srv.client() as client:
                    while not stop.is_set():
                        body = client.post(
                            "/v1/ask",
                            json={"question": "Which rules does the ferry yard use?", "where": "source~ferry"},
                        ).json()
                        texts = {c["text"] for c in body.get("citations", [])}
                        seen.append(("old" in " ".join(texts), "new" in " ".join(texts)))

            threads = [threading.Thread(target=ask) for _ in range(3)]
            for t in threads:
                t.start()
            r = c.post("/v1/collections/default/documents", files=[("files", ("ferry.txt", new))])
            job = wait_for_job(c, r.json()["job_id"])
            time.sleep(1)
            stop.set()
            for t in threads:
                t.join(timeout=60)
        assert job["files"][0]["status"] == "indexed" and job["files"][0]["updated"] == 1
        assert seen and all(not (has_old and has_new) for has_old, has_new in seen)
        assert seen[-1] == (False, True)


@pytest.mark.slow
class TestAuth:
    def test_token_required_everywhere_but_health_and_page(self, tmp_path, index_copy):
        with running_server(tmp_path, index_copy, "--config", "no-llm", token="s3cret-token") as srv:
            with srv.client(token=None) as anonymous:
                assert anonymous.get("/healthz").status_code == 200
                assert anonymous.get("/").status_code == 200
                for method, path in (
                    ("GET", "/v1/pipelines"),
                    ("GET", "/metrics"),
                    ("POST", "/v1/ask"),
                    ("GET", "/docs"),
                    ("GET", "/v1/collections"),
                ):
                    r = anonymous.request(method, path, json={"question": QUESTION})
                    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", path
            with srv.client(token="wrong") as wrong:
                assert wrong.post("/v1/ask", json={"question": QUESTION}).status_code == 401
            with srv.client() as good:
                assert good.post("/v1/ask", json={"question": QUESTION}).status_code == 200
                assert (
                    metric(
                        good.get("/metrics").text,
                        "switchyard_requests_total",
                        route="/v1/ask",
                        method="POST",
                        status="401",
                    )
                    == 2
                )
            assert "s3cret-token" not in srv.output()
            assert "credentials: shared token on (opens everything); 0 API key(s), 0 admin" in srv.output()

    def test_serve_names_its_credentials_and_refuses_an_open_key_file(self, tmp_path, index_copy):
        from switchyard.service.keys import FileKeyStore, keys_path

        store = FileKeyStore(keys_path(str(index_copy), tmp_path / "uploads"))
        key = store.create("reader", "default")
        store.create("root", admin=True)
        with running_server(tmp_path, index_copy, "--config", "no-llm", token="s3cret-token") as srv:
            assert "credentials: shared token refused while keys exist; 2 API key(s), 1 admin" in srv.output()
            with srv.client() as shared:
                assert shared.get("/v1/collections").status_code == 401
            with srv.client(token=key) as reader:
                assert reader.get("/v1/collections").status_code == 200
        args = ("--config", "no-llm", "--allow-token-with-keys")
        with running_server(tmp_path, index_copy, *args, token="s3cret-token") as srv:
            assert "credentials: shared token on (opens everything); 2 API key(s), 1 admin" in srv.output()
            with srv.client() as shared:
                assert shared.get("/v1/collections").status_code == 200
        store.path.chmod(0o640)
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "cli.py"),
                "serve",
                "--index-dir",
                str(index_copy),
                "--port",
                "1",
                "--upload-dir",
                str(tmp_path / "uploads"),
                "--config",
                "no-llm",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert done.stderr.strip().splitlines()[-1].endswith("(mode 0640); run chmod 600 on it")


@pytest.mark.slow
class TestBackPressureAndShutdown:
    def test_runs_beyond_the_bound_get_429_then_sigterm_finishes_cleanly(self, tmp_path, index_copy):
        with (
            running_server(tmp_path, index_copy, "--config", "fixed", "--max-in-flight", "1") as srv,
            srv.client() as c,
        ):
            with c.stream("POST", "/v1/ask/stream", json={"question": QUESTION}) as held:
                events = sse_events(held)  # kept: closing it would close the connection, i.e. walk away
                for kind, _ in events:
                    if kind == "node_start":
                        break
                assert metric(c.get("/metrics").text, "switchyard_runs_in_flight") == 1
                r = c.post("/v1/ask", json={"question": QUESTION})
                assert r.status_code == 429 and r.headers["retry-after"] == "1" and "in flight" in r.json()["detail"]
                chat = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": QUESTION}]})
                assert chat.status_code == 429 and chat.json()["error"]["code"] == 429
            assert metric(c.get("/metrics").text, "switchyard_rejected_total", reason="in_flight") == 2
            # SIGTERM with a run in flight: the server stops by itself and the index stays readable
            done = []
            streamer = threading.Thread(
                target=lambda: done.append(c.post("/v1/ask", json={"question": "What is standard gauge?"}).status_code)
            )
            streamer.start()
            time.sleep(1.0)
            srv.proc.send_signal(signal.SIGTERM)
            assert srv.proc.wait(timeout=150) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once done
            streamer.join(timeout=30)
            assert done == [200]  # the run in flight was finished, not dropped
            assert "Traceback" not in srv.output()
        from switchyard.configs.loader import load_config
        from switchyard.retrievers.store import IndexStore

        store = IndexStore(str(index_copy), load_config().store.collection)
        assert len(store.list_documents(ALL)) == 5

    def test_a_run_past_the_timeout_is_cancelled(self, tmp_path, index_copy):
        with running_server(tmp_path, index_copy, "--config", "fixed", "--timeout", "0.5") as srv, srv.client() as c:
            r = c.post("/v1/ask", json={"question": QUESTION})
            assert r.status_code == 504 and "timed out after 0.5s" in r.json()["detail"]
            with c.stream("POST", "/v1/ask/stream", json={"question": QUESTION}) as held:
                events = [(kind, json.loads(data)) for kind, data in sse_events(held)]
            assert events[-1] == ("error", {"event": "error", "message": "the run timed out after 0.5s"})
            assert not [k for k, _ in events if k == "answer"]
            deadline = time.time() + 60
            while metric(c.get("/metrics").text, "switchyard_runs_in_flight") != 0:
                assert time.time() < deadline
                time.sleep(0.2)
