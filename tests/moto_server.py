"""A real S3-compatible server (moto's) on 127.0.0.1 for tests and benchmarks: one process on a free port with one
bucket, and the `--set` overrides a user types to put an index there (credentials as `env:NAME` references)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import free_port, stop_process, wait_until_serving

BUCKET = "sy-index"
KEY_ID_VAR, SECRET_VAR = "SY_TEST_S3_KEY_ID", "SY_TEST_S3_SECRET"
SECRET = "sy-test-secret-5f0c9e"  # moto accepts any credentials; a distinctive value we can look for in outputs
CREDENTIALS = {KEY_ID_VAR: "test", SECRET_VAR: SECRET}  # the environment the overrides' env: references read


def s3_overrides(endpoint: str, collection: str = "default", secret_var: str = SECRET_VAR) -> list[str]:
    """The `--set` overrides a user types to put the index on S3."""
    return [
        f"store.uri=s3://{BUCKET}/index",
        f"store.collection={collection}",
        f"store.storage_options.endpoint={endpoint}",
        "store.storage_options.region=us-east-1",
        "store.storage_options.allow_http=true",
        f"store.storage_options.aws_access_key_id=env:{KEY_ID_VAR}",
        f"store.storage_options.aws_secret_access_key=env:{secret_var}",
    ]


class MotoS3:
    """`python -m moto.server` on a free port, its output to `log`, with BUCKET made; `close()` stops it."""

    def __init__(self, log: Path):
        import boto3

        self.endpoint = f"http://127.0.0.1:{free_port()}"
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", self.endpoint.rsplit(":", 1)[1]],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_until_serving(self.endpoint, self.proc, "moto server", timeout=30, log=log.read_text)
            boto3.client(
                "s3",
                endpoint_url=self.endpoint,
                aws_access_key_id="test",
                aws_secret_access_key=SECRET,
                region_name="us-east-1",
            ).create_bucket(Bucket=BUCKET)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        stop_process(self.proc, timeout=10)
