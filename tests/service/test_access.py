"""Tenants, keys and access rules across every route: two tenants (acme, globex) and a group-restricted acme document,
each route tried across the boundary (other collection, filter tricks, guessed ids, the other tenant's job, MCP
tools and resources); the key file and the audit log never hold a key; the shared key store and rate limiter under
concurrent use."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from switchyard.configs.loader import load_config
from switchyard.retrievers.stack import RetrievalStack
from switchyard.run_context import ALL
from switchyard.service.keys import FileKeyStore, LocalKeyRuns, LocalRateLimiter, keys_path
from tests.service.conftest import two_tenant_index

SECRET_WORDS = ("77431", "runs monthly")  # only in acme's hr-labelled payroll document (not in the question)
GLOBEX_WORDS = ("Bluebird",)  # only in globex's collection
QUESTION = "What is the Zanzibar payroll code?"
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture(scope="module")
def tenants(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("tenants")
    uri, docs = two_tenant_index(root, embedder)
    acme = RetrievalStack(load_config(None, [f"store.uri={uri}"]), collection="acme", embedder=embedder)
    payroll = next(d["doc_id"] for d in acme.store.list_documents(ALL) if d["doc_id"].startswith("payroll"))
    store = FileKeyStore(keys_path(str(uri), root / "uploads"))
    keys = {
        "acme": store.create("acme", "acme"),
        "acme-writer": store.create("acme-writer", "acme", write=True),
        "acme-hr": store.create("acme-hr", "acme", groups="hr"),
        "globex": store.create("globex", "globex", write=True),
        "admin": store.create("admin", admin=True),
        "slow": store.create("slow", "acme", rpm=3),
    }
    return {"root": root, "uri": uri, "docs": docs, "keys": keys, "store": store, "payroll": payroll}


def served(tenants, **settings) -> TestClient:
    from switchyard.service.app import create_app
    from switchyard.service.settings import ServiceSettings

    settings = ServiceSettings(
        configs=("no-llm",),
        overrides=(f"store.uri={tenants['uri']}",),
        warm_up=False,
        upload_dir=tenants["root"] / "uploads",
        audit_log=tenants["root"] / "audit.jsonl",
        **{"api_token": None, **settings},
    )
    return TestClient(create_app(settings))


@pytest.fixture(scope="module")
def client(tenants):
    with served(tenants) as c:
        yield c


def as_key(tenants, name):
    return {"Authorization": f"Bearer {tenants['keys'][name]}"}


def leaks(text: str, words=SECRET_WORDS + GLOBEX_WORDS) -> list[str]:
    return [w for w in words if w in text]


def mcp(client, headers, method, params, rid=1):
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    r = client.post("/mcp", headers={**MCP_HEADERS, **headers}, json=body)
    assert r.status_code == 200, r.text
    return r.json()


class TestKeys:
    def test_auth_is_on_once_keys_exist(self, client, tenants):
        assert client.get("/v1/collections").status_code == 401
        assert (
            client.get("/v1/collections", headers={"Authorization": "Bearer sy_000000000000_" + "x" * 43}).status_code
            == 401
        )
        assert client.get("/healthz").status_code == 200

    def test_key_file_never_holds_a_key(self, tenants):
        text = tenants["store"].path.read_text()
        for key in tenants["keys"].values():
            assert key not in text and key.split("_", 2)[2] not in text
        assert oct(tenants["store"].path.stat().st_mode & 0o777) == "0o600"

    def test_revoked_key_stops_at_once(self, client, tenants):
        key = tenants["store"].create("temp", "acme")
        headers = {"Authorization": f"Bearer {key}"}
        assert client.get("/v1/collections", headers=headers).status_code == 200
        FileKeyStore(tenants["store"].path).revoke("temp")  # as `cli.py keys revoke` from another process
        assert client.get("/v1/collections", headers=headers).status_code == 401

    @pytest.mark.parametrize("opted_in", [False, True])
    def test_the_shared_token_is_refused_while_keys_exist_unless_opted_in(self, tenants, opted_in):
        from switchyard.service.auth import TOKEN_REFUSED

        settings = dict(api_token="shared-s3cret", token_with_keys=opted_in)
        with served(tenants, **settings) as c:
            r = c.get("/v1/collections", headers={"Authorization": "Bearer shared-s3cret"})
            if opted_in:
                assert r.status_code == 200 and {"acme", "globex"} <= {x["name"] for x in r.json()}
            else:
                assert (r.status_code, r.json()["detail"]) == (401, TOKEN_REFUSED)
            assert c.get("/v1/collections", headers=as_key(tenants, "acme")).status_code == 200
            assert c.get("/v1/collections", headers={"Authorization": "Bearer wrong"}).status_code == 401

    def test_a_key_file_open_to_others_refuses_every_request_until_fixed(self, client, tenants, caplog):
        from switchyard.errors import AccessError

        path = tenants["store"].path
        headers = as_key(tenants, "acme")
        try:
            path.chmod(0o644)
            r = client.get("/v1/collections", headers=headers)
            assert r.status_code == 503 and str(path) not in r.text
            assert "mode 0644" in caplog.text and "chmod 600" in caplog.text
            assert client.get("/healthz").status_code == 200
            with pytest.raises(AccessError, match="open to other users"):
                served(tenants).__enter__()
        finally:
            path.chmod(0o600)
        assert client.get("/v1/collections", headers=headers).status_code == 200

    def test_the_credentials_line(self, tenants, tmp_path):
        from switchyard.service.auth import describe_credentials

        store = tenants["store"]
        admins = sum(k["admin"] for k in store.list())
        assert (
            describe_credentials(None, store)
            == f"credentials: shared token off; {len(store.list())} API key(s), {admins} admin"
        )
        assert "shared token refused while keys exist" in describe_credentials("t", store)
        assert "shared token on (opens everything)" in describe_credentials("t", store, token_with_keys=True)
        empty = FileKeyStore(tmp_path / "none.json")
        assert describe_credentials(None, empty) == "credentials: none, the server is open to anyone who can reach it"
        assert (
            describe_credentials("t", empty) == "credentials: shared token on (opens everything); 0 API key(s), 0 admin"
        )


class TestCollectionsAcrossTenants:
    def test_listing_shows_only_own_collections_and_readable_chunks(self, client, tenants):
        mine = client.get("/v1/collections", headers=as_key(tenants, "acme")).json()
        assert [c["name"] for c in mine] == ["acme"]
        hr = client.get("/v1/collections", headers=as_key(tenants, "acme-hr")).json()
        assert hr[0]["chunks"] > mine[0]["chunks"]
        admin = client.get("/v1/collections", headers=as_key(tenants, "admin")).json()
        assert {c["name"] for c in admin} == {"acme", "globex"}

    @pytest.mark.parametrize("route", ["/v1/ask", "/v1/ask/stream"])
    def test_another_tenants_collection_reads_like_a_missing_one(self, client, tenants, route):
        headers = as_key(tenants, "acme")
        other = client.post(route, headers=headers, json={"question": "codename?", "collection": "globex"})
        missing = client.post(route, headers=headers, json={"question": "codename?", "collection": "nope"})
        assert other.status_code == missing.status_code == 404
        assert other.json()["detail"].replace("globex", "X") == missing.json()["detail"].replace("nope", "X")
        # the pipeline's own collection ('default') is not acme's either
        assert client.post(route, headers=headers, json={"question": "codename?"}).status_code == 404

    def test_search_reads_another_tenants_collection_like_a_missing_one(self, client, tenants):
        headers = as_key(tenants, "acme")
        other = client.post("/v1/search", headers=headers, json={"query": "codename?", "collection": "globex"})
        missing = client.post("/v1/search", headers=headers, json={"query": "codename?", "collection": "nope"})
        assert other.status_code == missing.status_code == 404 and not leaks(other.text)
        assert other.json()["detail"].replace("globex", "X") == missing.json()["detail"].replace("nope", "X")
        assert client.post("/v1/search", headers=headers, json={"query": "codename?"}).status_code == 404

    def test_chat_completions_and_documents_across_tenants(self, client, tenants):
        headers = as_key(tenants, "acme")
        r = client.post(
            "/v1/chat/completions",
            headers=headers,
            json={"messages": [{"role": "user", "content": "codename?"}], "collection": "globex"},
        )
        assert r.status_code == 404 and not leaks(r.text)
        assert client.get("/v1/collections/globex/documents", headers=headers).status_code == 404
        globex_doc = client.get("/v1/collections/globex/documents", headers=as_key(tenants, "admin")).json()[0]
        r = client.delete(
            f"/v1/collections/globex/documents/{globex_doc['doc_id']}", headers=as_key(tenants, "acme-writer")
        )
        assert r.status_code == 404
        assert client.get("/metrics", headers=headers).status_code == 403
        assert client.get("/metrics", headers=as_key(tenants, "admin")).status_code == 200


class TestDocumentLabels:
    @pytest.mark.parametrize(
        "where",
        [
            None,
            "source~payroll",
            "doc_id={payroll}",
            "doc_id!=x",
            "title=Payroll",
            "source=x' OR '1'='1",
            "doc_id={payroll} or acl=hr",
        ],
    )
    def test_ask_and_stream_never_read_the_labelled_document(self, client, tenants, where):
        where = where.format(payroll=tenants["payroll"]) if where else None
        body = {"question": QUESTION, "collection": "acme", "where": where}
        for route in ("/v1/ask", "/v1/ask/stream"):
            r = client.post(route, headers=as_key(tenants, "acme"), json=body)
            assert r.status_code in (200, 400), r.text
            assert not leaks(r.text) and tenants["payroll"] not in r.text
        r = client.post(
            "/v1/chat/completions",
            headers=as_key(tenants, "acme"),
            json={"messages": [{"role": "user", "content": QUESTION}], "collection": "acme"},
        )
        assert r.status_code == 200 and not leaks(r.text)
        # the same question with the group retrieves it
        r = client.post("/v1/ask", headers=as_key(tenants, "acme-hr"), json={**body, "where": None})
        assert r.json()["retrieved_doc_ids"][0] == tenants["payroll"]

    @pytest.mark.parametrize(
        "where",
        [
            None,
            "source~payroll",
            "doc_id={payroll}",
            "title=Payroll",
            "source=x' OR '1'='1",
            "doc_id={payroll} or acl=hr",
        ],
    )
    def test_search_never_returns_the_labelled_document(self, client, tenants, where):
        where = where.format(payroll=tenants["payroll"]) if where else None
        body = {"query": QUESTION, "collection": "acme", "where": where, "k": 50}
        r = client.post("/v1/search", headers=as_key(tenants, "acme"), json=body)
        assert r.status_code in (200, 400), r.text
        if r.status_code == 200:
            passages = r.json()["results"]
            assert passages or where is not None
            # the passages' own words and ids (not the scores and timings, whose digits may hold anything)
            seen = " ".join(p[k] for p in passages for k in ("doc_id", "title", "source", "text"))
            assert not leaks(seen) and tenants["payroll"] not in seen
        # the key with the group finds it first
        r = client.post("/v1/search", headers=as_key(tenants, "acme-hr"), json={**body, "where": None})
        assert r.json()["results"][0]["doc_id"] == tenants["payroll"]

    def test_a_filter_naming_acl_is_a_400(self, client, tenants):
        r = client.post(
            "/v1/ask",
            headers=as_key(tenants, "acme"),
            json={"question": QUESTION, "collection": "acme", "where": "acl=hr"},
        )
        assert r.status_code == 400 and "unknown filter field" in r.json()["detail"]

    def test_a_search_filter_naming_acl_is_a_400(self, client, tenants):
        r = client.post(
            "/v1/search",
            headers=as_key(tenants, "acme"),
            json={"query": QUESTION, "collection": "acme", "where": "acl=hr"},
        )
        assert r.status_code == 400 and "unknown filter field" in r.json()["detail"]

    def test_documents_listing_and_guessed_ids(self, client, tenants):
        listed = client.get("/v1/collections/acme/documents", headers=as_key(tenants, "acme")).text
        assert tenants["payroll"] not in listed
        assert (
            tenants["payroll"] in client.get("/v1/collections/acme/documents", headers=as_key(tenants, "acme-hr")).text
        )
        path = f"/v1/collections/acme/documents/{tenants['payroll']}"
        assert client.delete(path, headers=as_key(tenants, "acme")).status_code == 403  # no --write
        assert client.delete(path, headers=as_key(tenants, "acme-writer")).status_code == 404  # not readable
        assert tenants["payroll"] in client.get("/v1/collections/acme/documents", headers=as_key(tenants, "admin")).text


class TestUploadsAndJobs:
    def test_uploads_need_write_creating_needs_admin_and_jobs_stay_with_their_tenant(self, client, tenants):
        files = {"files": ("memo.md", b"# Memo\n\nThe Globex memo says Bluebird again.\n", "text/markdown")}
        assert (
            client.post("/v1/collections/globex/documents", headers=as_key(tenants, "acme"), files=files).status_code
            == 404
        )
        assert (
            client.post("/v1/collections/acme/documents", headers=as_key(tenants, "acme"), files=files).status_code
            == 403
        )
        assert (
            client.post("/v1/collections/newco/documents", headers=as_key(tenants, "globex"), files=files).status_code
            == 404
        )
        assert (
            client.post(
                "/v1/collections/globex/documents",
                headers=as_key(tenants, "globex"),
                files=files,
                data={"acl": "bad label"},
            ).status_code
            == 400
        )
        r = client.post(
            "/v1/collections/globex/documents", headers=as_key(tenants, "globex"), files=files, data={"acl": "board"}
        )
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        for _ in range(600):
            job = client.get(f"/v1/jobs/{job_id}", headers=as_key(tenants, "globex")).json()
            if job["state"] in ("done", "failed"):
                break
            time.sleep(0.2)
        assert job["state"] == "done" and job["files"][0]["status"] == "indexed", job
        # the other tenant's job id, and a guessed one, read alike
        other = client.get(f"/v1/jobs/{job_id}", headers=as_key(tenants, "acme"))
        guessed = client.get(f"/v1/jobs/{'0' * 32}", headers=as_key(tenants, "acme"))
        assert other.status_code == guessed.status_code == 404 and not leaks(other.text)
        # the uploaded document carries its label: globex without the group does not list it
        listed = client.get("/v1/collections/globex/documents", headers=as_key(tenants, "globex")).json()
        assert not any(d["source"].endswith("memo.md") for d in listed)
        r = client.post("/v1/collections/newco/documents", headers=as_key(tenants, "admin"), files=files)
        assert r.status_code == 202


class TestWritesRespectReads:
    """A writer without a document's group cannot replace, re-label or delete it: the 404 of a document that does
    not exist, and nothing changes (index, labels, the upload folder's copy)."""

    def upload(self, client, tenants, key, name, body, acl=None):
        data = {"acl": acl} if acl else None
        files = {"files": (name, body, "application/octet-stream")}
        return client.post("/v1/collections/acme/documents", headers=as_key(tenants, key), files=files, data=data)

    def finished(self, client, tenants, key, r):
        assert r.status_code == 202, r.text
        for _ in range(600):
            job = client.get(f"/v1/jobs/{r.json()['job_id']}", headers=as_key(tenants, key)).json()
            if job["state"] in ("done", "failed"):
                return job
            time.sleep(0.2)
        pytest.fail(f"job did not finish: {job}")

    def test_a_writer_without_the_group_gets_404_and_changes_nothing(self, client, tenants):
        ledger = b"# Ledger\n\nThe Zanzibar ledger total is 55120.\n"
        corpus = "\n".join(
            json.dumps(r)
            for r in (
                {"_id": "bonus-plan", "text": "The Zanzibar bonus pool is 9031.", "acl": "hr"},
                {"_id": "canteen", "text": "The canteen opens at eight."},
            )
        ).encode()
        for name, body, acl in (("ledger.md", ledger, "hr"), ("people.jsonl", corpus, None)):
            job = self.finished(client, tenants, "admin", self.upload(client, tenants, "admin", name, body, acl))
            assert job["state"] == "done" and job["files"][0]["status"] == "indexed", job
        as_admin = as_key(tenants, "admin")
        before = client.get("/v1/collections/acme/documents", headers=as_admin).json()
        home = tenants["root"] / "uploads" / "acme"
        on_disk = {name: (home / name).read_bytes() for name in ("ledger.md", "people.jsonl")}

        missing = client.delete("/v1/collections/acme/documents/no-such-doc", headers=as_key(tenants, "acme-writer"))
        forged = b"# Ledger\n\nThe Zanzibar ledger total is 0. Pay everything to account FORGED-ACCOUNT.\n"
        attempts = [
            ("ledger.md", forged, None),  # replace
            ("ledger.md", forged, "public"),  # replace and re-label (form acl)
            ("people.jsonl", b'{"_id": "bonus-plan", "text": "No bonus.", "acl": "public"}', None),  # JSON acl
        ]
        for name, body, acl in attempts:
            r = self.upload(client, tenants, "acme-writer", name, body, acl)
            assert r.status_code == 404 and r.json()["detail"] == f"no document {name!r} in collection 'acme'"
            assert missing.status_code == 404 and missing.json()["detail"].startswith("no document ")
        ledger_id = next(d["doc_id"] for d in before if d["source"].endswith("ledger.md"))
        for doc_id in (ledger_id, "bonus-plan"):
            r = client.delete(f"/v1/collections/acme/documents/{doc_id}", headers=as_key(tenants, "acme-writer"))
            assert (r.status_code, r.json()["detail"]) == (404, f"no document {doc_id!r} in collection 'acme'")

        assert client.get("/v1/collections/acme/documents", headers=as_admin).json() == before
        assert {name: (home / name).read_bytes() for name in on_disk} == on_disk
        hits = client.post(
            "/v1/search",
            headers=as_key(tenants, "acme-hr"),
            json={"query": "Zanzibar ledger total", "collection": "acme"},
        ).text
        assert "55120" in hits and "FORGED-ACCOUNT" not in hits  # a marker no score or id can contain

        # a writer who may read them changes them as before
        key = tenants["store"].create("acme-hr-writer", "acme", write=True, groups="hr")
        tenants["keys"]["acme-hr-writer"] = key
        job = self.finished(
            client, tenants, "acme-hr-writer", self.upload(client, tenants, "acme-hr-writer", "ledger.md", forged)
        )
        assert job["state"] == "done" and job["files"][0]["updated"] == 1, job
        assert (home / "ledger.md").read_bytes() == forged


class TestMCP:
    def test_tools_and_resources_across_tenants(self, client, tenants):
        headers = as_key(tenants, "acme")
        listed = mcp(client, headers, "tools/call", {"name": "list_collections", "arguments": {}})
        assert [c["name"] for c in listed["result"]["structuredContent"]["collections"]] == ["acme"]
        for name, args in [
            ("search", {"query": "codename", "collection": "globex"}),
            ("ask", {"question": "codename?", "collection": "globex"}),
        ]:
            out = mcp(client, headers, "tools/call", {"name": name, "arguments": args})
            assert out["result"]["isError"] and "does not exist" in json.dumps(out) and not leaks(json.dumps(out))
        for where in (None, f"doc_id={tenants['payroll']}", "source~payroll"):
            out = mcp(
                client,
                headers,
                "tools/call",
                {"name": "search", "arguments": {"query": QUESTION, "collection": "acme", "where": where, "k": 50}},
            )
            assert not leaks(json.dumps(out)) and tenants["payroll"] not in json.dumps(out)
        out = mcp(
            client, headers, "tools/call", {"name": "ask", "arguments": {"question": QUESTION, "collection": "acme"}}
        )
        assert not out["result"].get("isError") and not leaks(json.dumps(out))
        resources = json.dumps(mcp(client, headers, "resources/list", {}))
        assert "globex" not in resources and tenants["payroll"] not in resources
        for uri in (f"switchyard://acme/documents/{tenants['payroll']}", "switchyard://globex/documents/x"):
            out = mcp(client, headers, "resources/read", {"uri": uri})
            assert "error" in out and not leaks(json.dumps(out))
        hr = mcp(
            client,
            as_key(tenants, "acme-hr"),
            "resources/read",
            {"uri": f"switchyard://acme/documents/{tenants['payroll']}"},
        )
        assert "77431" in json.dumps(hr)


class TestLimitsAndAudit:
    def test_requests_per_minute_then_429_with_retry_after(self, client, tenants):
        codes = [client.get("/v1/collections", headers=as_key(tenants, "slow")) for _ in range(4)]
        assert [r.status_code for r in codes] == [200, 200, 200, 429]
        assert int(codes[-1].headers["retry-after"]) >= 1

    def test_audit_lines_name_the_key_never_the_key_itself(self, client, tenants):
        client.post("/v1/ask", headers=as_key(tenants, "acme"), json={"question": QUESTION, "collection": "acme"})
        client.post("/v1/ask", json={"question": QUESTION, "collection": "acme"})  # no key: its own 401 line
        lines = [json.loads(line) for line in (tenants["root"] / "audit.jsonl").read_text().splitlines()]
        asked = [r for r in lines if r["route"] == "/v1/ask" and r["key"] == "acme" and r["status"] == 200]
        assert asked and asked[-1]["collection"] == "acme" and asked[-1]["ms"] > 0 and "question" not in asked[-1]
        assert {"time", "key", "route", "collection", "status", "ms"} <= set(asked[-1])
        text = (tenants["root"] / "audit.jsonl").read_text()
        assert not any(key in text for key in tenants["keys"].values())
        assert any(r["status"] == 401 and r["key"] is None for r in lines)


class TestConcurrency:
    def test_keys_created_at_once_are_all_kept(self, tmp_path):
        n = 8
        barrier = threading.Barrier(n)
        made: dict[str, str] = {}

        def create(i):
            store = FileKeyStore(tmp_path / "keys.json")  # one store per thread, as separate processes would
            barrier.wait()
            made[f"k{i}"] = store.create(f"k{i}", "c")

        threads = [threading.Thread(target=create, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        store = FileKeyStore(tmp_path / "keys.json")
        assert sorted(k["name"] for k in store.list()) == sorted(made)
        assert all(store.verify(key).name == name for name, key in made.items())

    def test_rate_limiter_and_key_runs_admit_exactly_their_limit(self):
        n, limit = 16, 5
        barrier = threading.Barrier(n)
        limiter, runs = LocalRateLimiter(), LocalKeyRuns()
        allowed, acquired = [], []

        def hit():
            barrier.wait()
            allowed.append(limiter.hit("k", limit) is None)
            acquired.append(runs.try_acquire("k", 3))

        threads = [threading.Thread(target=hit) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(allowed) == limit and sum(acquired) == 3
        for _ in range(3):
            runs.release("k")
        assert runs.try_acquire("k", 3)


def test_cli_keys_create_list_revoke(tmp_path):
    from tests.test_cli import cli

    index = tmp_path / "index"
    done = cli(
        "keys", "create", "acme", "--collections", "acme,docs", "--write", "--groups", "hr", "--index-dir", str(index)
    )
    assert done.returncode == 0, done.stderr
    key = done.stdout.strip()
    assert key.startswith("sy_") and key not in Path(index / ".switchyard-keys.json").read_text()
    listed = cli("keys", "list", "--json", "--index-dir", str(index))
    assert json.loads(listed.stdout)[0]["collections"] == ["acme", "docs"] and key not in listed.stdout
    bad = cli("keys", "create", "x", "--index-dir", str(index))
    assert bad.returncode == 2 and "needs --collections" in bad.stderr and "Traceback" not in bad.stderr
    assert cli("keys", "revoke", "acme", "--index-dir", str(index)).returncode == 0
    assert cli("keys", "revoke", "acme", "--index-dir", str(index)).returncode == 2
