"""Offline environment defaults shared by every entry point."""

import subprocess
import sys

from tests.conftest import ROOT


class TestRuntimeEnv:
    def run(self, env):
        code = (
            "from switchyard.configs import runtime_env; import os; runtime_env.apply(); "
            "print(os.environ['HF_HUB_OFFLINE'], os.environ['LANGSMITH_TRACING'])"
        )
        return subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        ).stdout.split()

    def test_sets_offline_defaults(self):
        assert self.run({"PATH": "/usr/bin:/bin"}) == ["1", "false"]

    def test_a_value_the_user_set_wins(self):
        assert self.run({"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "0", "LANGSMITH_TRACING": "true"}) == ["0", "true"]
