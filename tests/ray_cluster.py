"""A real local Ray cluster on 127.0.0.1 for tests and benchmarks: a head node and a second node joining it.

Each `ray start --block` runs in its own session; stopping kills the processes it started (GCS, raylet, and the
workers and actors, which Ray puts in process groups of their own) by their ids, found as its descendants, never
with `ray stop`, which would stop every cluster of the machine, other people's too. Every process runs on this
machine; clients connect to 127.0.0.1:PORT (Ray itself records the node under the machine's own address: it replaces
a loopback --node-ip-address with it).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.conftest import free_port

RAY = str(Path(sys.executable).with_name("ray"))


class LocalCluster:
    """`ray start --head` with `head_cpus`, plus a node with `worker_cpus` joining it (0: none)."""

    def __init__(self, head_cpus: int = 2, worker_cpus: int = 1, object_store_mb: int = 200):
        self.head_cpus, self.worker_cpus, self.object_store_mb = head_cpus, worker_cpus, object_store_mb
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # short: Ray's socket paths must fit in 107 bytes
        self.temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
        self.procs: list[subprocess.Popen] = []
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}

    def _start(self, *args: str) -> None:
        cmd = [
            RAY,
            "start",
            "--block",
            "--disable-usage-stats",
            "--node-ip-address",
            "127.0.0.1",
            "--object-store-memory",
            str(self.object_store_mb * 2**20),
            # free ports for what would bind a fixed default (10001, 52365): two test workers each start a cluster
            "--dashboard-agent-listen-port",
            str(free_port()),
            *args,
        ]
        log = open(Path(self.temp_dir) / f"start-{len(self.procs)}.log", "w")
        self.procs.append(
            subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        )

    def start(self) -> LocalCluster:
        try:
            self._start(
                "--head",
                "--port",
                str(self.port),
                "--num-cpus",
                str(self.head_cpus),
                "--temp-dir",
                self.temp_dir,
                "--include-dashboard=false",
                "--ray-client-server-port",
                str(free_port()),
            )
            self._wait_for_cpus(self.head_cpus)
            if self.worker_cpus:
                self._start("--address", self.address, "--num-cpus", str(self.worker_cpus))
                self._wait_for_cpus(self.head_cpus + self.worker_cpus)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for_cpus(self, cpus: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        probe = (
            f"import ray; ray.init(address={self.address!r}, logging_level='ERROR', log_to_driver=False); "
            "print(int(ray.cluster_resources().get('CPU', 0)))"
        )
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"ray start exited; logs in {self.temp_dir}")
            out = subprocess.run(
                [sys.executable, "-c", probe], capture_output=True, text=True, env=self.env, timeout=60
            )
            if out.returncode == 0 and out.stdout.strip().splitlines()[-1:] == [str(cpus)]:
                return
            time.sleep(1)
        raise RuntimeError(f"the cluster did not reach {cpus} CPUs in {timeout:.0f} s; logs in {self.temp_dir}")

    def pids(self) -> list[int]:
        """The `ray start` processes and every live process descended from them."""
        children: dict[int, list[int]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        found, todo = [], [p.pid for p in self.procs if p.poll() is None]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    def actor_pids(self, class_name: str = "BatchPreparer") -> list[int]:
        """The cluster's actors of one class (Ray names an actor's process after its class): the embedding actors of
        an ingest by default."""
        found = []
        for pid in self.pids():
            try:
                if class_name.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
            except OSError:
                pass
        return found

    def stop(self) -> None:
        """Kill every process of the cluster by id (TERM, then KILL what is left), then remove its files."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in reversed(self.pids()):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            if sig == signal.SIGTERM:
                time.sleep(2)
        for p in self.procs:
            p.wait(timeout=30)
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
