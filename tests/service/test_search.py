"""`POST /v1/search`: the passages `cli.py search --json` prints, over HTTP, with the same filters and the limits
and error replies of the other routes. Access labels and other tenants' collections: tests/service/test_access.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from switchyard.retrievers.documents import PASSAGE_FIELDS
from switchyard.service.app import create_app
from switchyard.service.keys import LOCAL
from switchyard.service.settings import ServiceSettings
from tests.conftest import ROOT

QUERY = "knuckle coupler"


@pytest.fixture(scope="module")
def index(tmp_path_factory, sample_index):
    """A copy of the sample index: the service keeps its job store beside it."""
    uri = tmp_path_factory.mktemp("search") / "index"
    shutil.copytree(sample_index, uri)
    return uri


def served(index, tmp_path_factory, **settings) -> TestClient:
    # bm25-only rewrites with the LLM by default; PRF instead, so that no model is needed
    return TestClient(
        create_app(
            ServiceSettings(
                configs=("no-llm", "bm25-only"),
                overrides=(f"store.uri={index}", "rewrite.method=prf"),
                warm_up=False,
                max_in_flight=2,
                upload_dir=str(tmp_path_factory.mktemp("uploads")),
                **{"api_token": None, **settings},
            )
        )
    )


@pytest.fixture(scope="module")
def client(index, tmp_path_factory):
    with served(index, tmp_path_factory) as c:
        yield c


class TestSearch:
    def test_ranked_passages_as_search_json(self, client):
        r = client.post("/v1/search", json={"query": QUERY, "k": 3})
        assert r.status_code == 200, r.text
        body = r.json()
        assert list(body) == ["query", "collection", "results", "timings_ms", "config"]
        assert body["query"] == QUERY and body["collection"] == "default"
        assert len(body["results"]) == 3
        first = body["results"][0]
        assert list(first) == [*PASSAGE_FIELDS, "score", "scores", "ranks"]
        assert first["title"] == "Railway couplers" and "Janney" in first["text"]
        scores = [p["score"] for p in body["results"]]
        assert scores == sorted(scores, reverse=True)
        assert body["config"]["answer"]["method"] == "extractive"  # the default pipeline: no-llm
        assert body["timings_ms"]

    def test_k_defaults_to_the_pipelines_rerank_top_k(self, client):
        body = client.post("/v1/search", json={"query": "railway"}).json()
        assert len(body["results"]) == body["config"]["rerank"]["top_k"] == 5

    def test_where_filters_and_the_pipeline_is_chosen_by_name(self, client):
        handbook = client.post("/v1/search", json={"query": "blue flag", "where": "source~handbook", "k": 5}).json()
        assert handbook["results"] and all("handbook" in p["source"] for p in handbook["results"])
        bm25 = client.post("/v1/search", json={"query": QUERY, "pipeline": "bm25-only", "k": 2}).json()
        assert bm25["config"]["retrieve"]["mode"] == "bm25"
        assert bm25["results"][0]["title"] == "Railway couplers"
        assert all(
            set(p["scores"]) <= {"bm25", "fused", "rerank"} and "dense" not in p["scores"] for p in bm25["results"]
        ), bm25["results"]

    @pytest.mark.parametrize(
        "body, status, said",
        [
            ({"query": "   "}, 400, "the query is empty"),
            ({"query": "x" * 2001}, 413, "the query is longer than 2000 characters"),
            ({"query": QUERY, "k": 0}, 422, "greater than or equal to 1"),
            ({"query": QUERY, "k": 51}, 422, "less than or equal to 50"),
            ({"k": 3}, 422, "Field required"),
            ({"query": QUERY, "pipeline": "nope"}, 404, "known pipelines: no-llm, bm25-only"),
            ({"query": QUERY, "collection": "../etc"}, 400, "invalid collection name"),
            ({"query": QUERY, "collection": "missing"}, 404, "collection 'missing' does not exist"),
            ({"query": QUERY, "where": "color=="}, 400, "color"),
        ],
    )
    def test_bad_requests_are_json_4xx(self, client, body, status, said):
        r = client.post("/v1/search", json=body)
        assert r.status_code == status, r.text
        assert said in json.dumps(r.json()["detail"])

    def test_a_search_takes_a_run_slot(self, client):
        service = client.app.state.service
        held = [service.acquire(LOCAL) for _ in range(service.slots.limit)]
        try:
            r = client.post("/v1/search", json={"query": QUERY})
            assert r.status_code == 429 and r.headers["retry-after"] == "1" and "in flight" in r.json()["detail"]
        finally:
            for slot in held:
                slot.release()
        assert client.post("/v1/search", json={"query": QUERY}).status_code == 200
        assert service.slots.active == 0

    def test_a_token_is_needed_when_the_server_has_one(self, index, tmp_path_factory):
        with served(index, tmp_path_factory, api_token="s3cret") as c:
            anonymous = c.post("/v1/search", json={"query": QUERY})
            assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"] == "Bearer"
            wrong = c.post("/v1/search", json={"query": QUERY}, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            good = c.post("/v1/search", json={"query": QUERY}, headers={"Authorization": "Bearer s3cret"})
            assert good.status_code == 200 and good.json()["results"]


@pytest.mark.slow
def test_the_same_passages_as_the_cli(client, index):
    """`cli.py search --json` and `POST /v1/search` over the same index, config and query: the same object but the
    timings."""
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "cli.py"),
            "search",
            QUERY,
            "--config",
            "no-llm",
            "--set",
            f"store.uri={index}",
            "--set",
            "rewrite.method=prf",
            "--k",
            "4",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    cli = json.loads(done.stdout)
    http = client.post("/v1/search", json={"query": QUERY, "k": 4}).json()
    cli.pop("timings_ms"), http.pop("timings_ms")
    assert http == cli and len(http["results"]) == 4
