"""One index, many servers: two `serve` processes over one index on S3 (moto's S3-compatible server on 127.0.0.1).
A document uploaded through one server is answered from by the other."""

import os
import time

import pytest

from tests.retrievers.test_object_store import BUCKET, KEY_ID_VAR, SECRET, SECRET_VAR, s3_endpoint, s3_overrides
from tests.service.conftest import running_server
from tests.service.test_app import wait_for_job

__all__ = ["s3_endpoint"]  # the module-scoped moto fixture, used here too


@pytest.mark.slow
def test_upload_through_one_server_then_ask_another(tmp_path, s3_endpoint):
    uri = f"s3://{BUCKET}/shared-{int(time.time() * 1000)}"
    overrides = [a for o in s3_overrides(s3_endpoint) if not o.startswith("store.uri=") for a in ("--set", o)]
    env = {KEY_ID_VAR: "test", SECRET_VAR: SECRET}
    assert os.environ.get(SECRET_VAR) == SECRET  # set by the fixture for this process; servers get it explicitly
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        running_server(tmp_path / "a", uri, "--config", "no-llm", "--no-warm-up", *overrides, env=env) as first,
        running_server(tmp_path / "b", uri, "--config", "no-llm", "--no-warm-up", *overrides, env=env) as second,
    ):
        with first.client() as a:
            r = a.post(
                "/v1/collections/default/documents",
                files=[
                    (
                        "files",
                        (
                            "turntables.txt",
                            b"A turntable turns steam locomotives around in a "
                            b"roundhouse yard. Turntables date from the steam era.",
                        ),
                    )
                ],
            )
            assert r.status_code == 202, r.text
            assert wait_for_job(a, r.json()["job_id"])["files"][0]["status"] == "indexed"
        with second.client() as b:
            docs = b.get("/v1/collections/default/documents").json()
            assert [d["title"] for d in docs] == ["turntables"]
            answer = b.post("/v1/ask", json={"question": "What turns steam locomotives around?"}).json()
            assert "turntable" in answer["answer"].lower() and answer["citations"]
        assert SECRET not in first.output() + second.output()
