"""One index, many servers: the index on S3 (a real S3-compatible server, moto, on 127.0.0.1), shared by separately
constructed stacks and by separate CLI processes, with credentials given as `env:NAME` references."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from switchyard.retrievers.store import ChunkFetch, FullTextSearch, VectorSearch
from switchyard.run_context import ALL
from tests.conftest import ROOT, SAMPLES
from tests.moto_server import BUCKET, CREDENTIALS, KEY_ID_VAR, SECRET, SECRET_VAR, MotoS3, s3_overrides

QUESTION = "Who patented the knuckle coupler?"


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    """A moto S3 server on a free port with one bucket, and the credentials' env vars set; stopped at the end."""
    server = MotoS3(tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        with pytest.MonkeyPatch.context() as mp:
            for name, value in CREDENTIALS.items():
                mp.setenv(name, value)
            yield server.endpoint
    finally:
        server.close()


def make_stack(embedder, overrides: list[str]):
    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack

    return RetrievalStack(load_config(None, overrides), embedder=embedder)


@pytest.fixture(scope="module")
def shared_index(s3_endpoint, embedder):
    """The sample corpus ingested once into s3://sy-index/index (collection `default`) by one stack."""
    overrides = s3_overrides(s3_endpoint)
    report = make_stack(embedder, overrides).ingestor(progress=False).run([SAMPLES])
    assert report.added == 5 and not report.errors
    return overrides


def cli(*args, env=None):
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *map(str, args)], capture_output=True, text=True, timeout=600, env=env
    )


def _set_args(overrides: list[str]) -> list[str]:
    return [arg for o in overrides for arg in ("--set", o)]


class TestStorageOptionsConfig:
    def test_set_overrides_build_nested_options_as_strings(self):
        from switchyard.configs.loader import load_config

        config = load_config(None, s3_overrides("http://127.0.0.1:9000"))
        assert config.store.uri == f"s3://{BUCKET}/index"
        assert config.store.storage_options == {
            "endpoint": "http://127.0.0.1:9000",
            "region": "us-east-1",
            "allow_http": "true",
            "aws_access_key_id": f"env:{KEY_ID_VAR}",
            "aws_secret_access_key": f"env:{SECRET_VAR}",
        }

    def test_bad_env_reference_is_a_config_error(self):
        from switchyard.configs.loader import load_config
        from switchyard.errors import ConfigError

        with pytest.raises(ConfigError, match="aws_secret_access_key: 'env:1NAME' must be env:NAME"):
            load_config(None, ["store.storage_options.aws_secret_access_key=env:1NAME"])


class TestEnvSecrets:
    def test_missing_variable_is_a_clear_error_at_connect_time(self, s3_endpoint, embedder):
        from switchyard.errors import StoreError

        stack = make_stack(embedder, s3_overrides(s3_endpoint, secret_var="SY_TEST_NOT_SET"))
        store = stack.store  # constructing the store does not connect
        with pytest.raises(StoreError) as err:
            store.exists()
        assert str(err.value) == (
            "store.storage_options.aws_secret_access_key names $SY_TEST_NOT_SET, which is not set"
        )

    def test_secret_never_shown(self, shared_index, embedder):
        stack = make_stack(embedder, shared_index)
        assert stack.store.count(ALL) > 0  # connected, so the secret was resolved
        assert SECRET not in repr(stack.store) and f"env:{SECRET_VAR}" in repr(stack.store)
        out = cli("config", "show", "--json", *_set_args(shared_index))
        assert out.returncode == 0, out.stderr
        assert SECRET not in out.stdout
        options = json.loads(out.stdout)["store"]["storage_options"]
        assert options["aws_secret_access_key"] == f"env:{SECRET_VAR}" and options["allow_http"] == "true"


@pytest.mark.slow
class TestSharedIndex:
    def test_second_stack_finds_the_right_document(self, shared_index, embedder):
        reader = make_stack(embedder, shared_index)
        assert reader.config.retrieve.mode == "hybrid"
        top = reader.search(QUESTION, groups=ALL).passages[0]
        assert top.title == "Railway couplers"
        assert {"bm25", "dense"} <= set(top.scores)

    def test_every_store_operation_works_on_s3(self, shared_index, embedder):
        store = make_stack(embedder, shared_index).store
        docs = store.list_documents(ALL)
        assert len(docs) == 5 and store.has_text_index()
        chunk_id = FullTextSearch(store).run("knuckle coupler", 1)[0].chunk_id
        assert ChunkFetch(store).passages([chunk_id])[chunk_id].title == "Railway couplers"
        vector = ChunkFetch(store).vectors([chunk_id])[chunk_id]
        assert VectorSearch(store).run(vector, 1)[0].chunk_id == chunk_id
        version = store.version()
        store.refresh_indexes()  # the ingest ended with one: nothing left to do
        assert store.version() == version
        store.optimize()  # compaction, index update and old-version cleanup on the object store
        assert len(store.list_documents(ALL)) == 5 and store.has_text_index()

    def test_writes_and_deletes_are_seen_by_another_stack(self, s3_endpoint, embedder):
        overrides = s3_overrides(s3_endpoint, collection="scratch")
        writer, reader = make_stack(embedder, overrides), make_stack(embedder, overrides)
        writer.ingestor(progress=False).run([SAMPLES / "couplers.html", SAMPLES / "track-gauge.txt"])
        seen = {d["doc_id"]: d for d in reader.store.list_documents(ALL)}
        assert len(seen) == 2
        doc_id = next(d for d, doc in seen.items() if doc["title"] == "Railway couplers")
        assert reader.search(QUESTION, groups=ALL).passages[0].doc_id == doc_id
        assert reader.store.delete_documents([doc_id], ALL) >= 1
        assert doc_id not in {d["doc_id"] for d in writer.store.list_documents(ALL)}
        assert all(p.doc_id != doc_id for p in writer.search(QUESTION, groups=ALL).passages)


@pytest.mark.slow
class TestSecondProcess:
    def test_cli_ingest_then_cli_search(self, s3_endpoint, embedder):
        overrides = s3_overrides(s3_endpoint, collection="cli")
        env = {**os.environ, KEY_ID_VAR: "test", SECRET_VAR: SECRET}
        done = cli("ingest", SAMPLES, "--no-progress", *_set_args(overrides), env=env)
        assert done.returncode == 0, done.stderr
        assert "5 added" in done.stdout
        out = cli("search", QUESTION, "--json", "--k", "3", *_set_args(overrides), env=env)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data["collection"] == "cli" and data["results"][0]["title"] == "Railway couplers"
        assert SECRET not in out.stdout
        assert data["config"]["store"]["storage_options"]["aws_secret_access_key"] == f"env:{SECRET_VAR}"
        # and this process sees what the CLI process wrote
        assert len(make_stack(embedder, overrides).store.list_documents(ALL)) == 5


@pytest.mark.slow
def test_writers_in_several_processes_make_one_new_collection_at_once(s3_endpoint, embedder, tmp_path):
    """Six stacks (as six servers would hold) ingest into the same new collection on S3 at once: their index upkeep
    commits conflict ("Retryable commit conflict"), is retried, and every document lands once."""
    import time

    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack
    from tests.together import run_together

    uri = f"s3://{BUCKET}/race-{int(time.time() * 1000)}"
    overrides = [o for o in s3_overrides(s3_endpoint) if not o.startswith("store.uri=")] + [f"store.uri={uri}"]
    files = []
    for i in range(6):
        files.append(tmp_path / f"depot{i}.txt")
        files[-1].write_text(f"Depot {i} keeps shunter number {1000 + i}.")

    def ingest(i: int):
        stack = RetrievalStack(load_config(None, overrides), embedder=embedder)
        return stack.ingestor(progress=False).run([files[i]])

    reports = run_together(6, ingest)
    assert [r.added for r in reports] == [1] * 6 and not any(r.errors for r in reports)
    stack = RetrievalStack(load_config(None, overrides), embedder=embedder)
    assert sorted(d["title"] for d in stack.store.list_documents(ALL)) == [f"depot{i}" for i in range(6)]


@pytest.mark.slow
def test_writers_updating_one_collection_at_once_all_land(s3_endpoint, embedder, tmp_path):
    """Six stacks (six servers' upload jobs) update documents of one existing S3 collection at once, three rounds:
    every document ends at its last version, none twice (LanceDB resolves most of these commits itself; those it
    refuses as retryable conflicts are retried, `retrying_conflicts`; this passed before that retry too)."""
    import time

    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack
    from tests.together import run_together

    uri = f"s3://{BUCKET}/updates-{int(time.time() * 1000)}"
    overrides = [o for o in s3_overrides(s3_endpoint) if not o.startswith("store.uri=")] + [f"store.uri={uri}"]
    stacks = [RetrievalStack(load_config(None, overrides), embedder=embedder) for _ in range(6)]
    files = [tmp_path / f"yard{i}.txt" for i in range(6)]
    for i, path in enumerate(files):
        path.write_text(f"Yard {i} turns locomotive {100 + i}.")
    assert stacks[0].ingestor(progress=False).run(files).added == 6

    for round_ in range(1, 4):
        for i, path in enumerate(files):
            path.write_text(f"Yard {i} turns locomotive {100 + i} in round {round_}.")
        reports = run_together(6, lambda i: stacks[i].ingestor(progress=False).run([files[i]]))
        assert [r.updated for r in reports] == [1] * 6 and not any(r.errors for r in reports), reports
    reader = RetrievalStack(load_config(None, overrides), embedder=embedder).store
    rows = reader.scan(["title", "text"], scope=ALL).to_pylist()
    assert sorted((r["title"], r["text"]) for r in rows) == [
        (f"yard{i}", f"Yard {i} turns locomotive {100 + i} in round 3.") for i in range(6)
    ]
