"""A real PostgreSQL server on 127.0.0.1 for tests: `initdb` into a temporary folder, `pg_ctl start` on a free port,
one fresh database per test (`database()`), `stop()` / `start()` to take it down and bring it back (outage tests).

PostgreSQL refuses to run as root: as root (CI) every server command runs as the `postgres` user through
`runuser`, in a folder that user owns; otherwise as the current user. The binaries are Debian's (`postgresql`
package, /usr/lib/postgresql/<version>/bin; .ci/run installs it) or whatever `pg_config --bindir` names.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from tests.conftest import free_port


def bindir() -> Path | None:
    """The folder of initdb and pg_ctl, None where PostgreSQL's server is not installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    if shutil.which("pg_config"):
        folder = Path(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip())
        if (folder / "initdb").is_file():
            return folder
    return None


class PostgresServer:
    def __init__(self):
        self.bin = bindir()
        if self.bin is None:
            raise RuntimeError("PostgreSQL's server is not installed (Debian: apt-get install postgresql)")
        self.root = os.geteuid() == 0
        # under /tmp, not pytest's tmp_path: the postgres user must reach it (pytest's folders are root's, 0700)
        self.folder = Path(tempfile.mkdtemp(prefix="sy-pg-", dir="/tmp"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.user = "postgres" if self.root else os.environ.get("USER") or "postgres"
        if self.root:  # the postgres user must own (and reach) its folder
            shutil.chown(self.folder, "postgres", "postgres")
            self.folder.chmod(0o700)
        self._run("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-sync")

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(self.bin / tool), *args]
        if self.root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.folder, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
        return done

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.folder / "log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new empty database's URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()
