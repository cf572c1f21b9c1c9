"""What the repository carries: a checkout of code, with each recorded run (bench/eval) stored compactly, one file
for its replies and one for its rows (bench/pack_run.py), so a clone stays small and code tools can walk it."""

import shutil
import subprocess

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout"
)


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
    return [name for name in out.decode().split("\0") if name]


SHIPPED_MODELS = ("retrievers/models/cross-encoder.onnx",)  # model files users install (issue 61: <= 25 MB each)


def test_the_checkout_stays_small():
    files = tracked()
    size = sum((ROOT / name).stat().st_size for name in files if (ROOT / name).is_file() and name not in SHIPPED_MODELS)
    assert len(files) <= 3000, f"{len(files)} tracked files"
    # runs over one corpus share its vectors (vectors/bases.txt) rather than each holding a copy; one still holds its
    # own: generated-phantomwiki-s11 (2.5 MB) was embedded in bf16 and its corpus's grid in f32, so they cannot share
    assert size <= 63_000_000, f"{size / 1e6:.1f} MB tracked besides the shipped models"
    for name in SHIPPED_MODELS:
        assert not (ROOT / name).exists() or (ROOT / name).stat().st_size <= 25_000_000, name


def test_every_recorded_run_is_packed():
    names = tracked()
    runs = sorted({name.split("/")[2] for name in names if name.startswith("bench/eval/")})
    assert len(runs) >= 10
    for run in runs:
        files = [name for name in names if name.startswith(f"bench/eval/{run}/")]
        assert f"bench/eval/{run}/questions.jsonl" not in files, f"{run}: rows not packed"
        assert not [name for name in files if name.endswith(".png")], f"{run}: plots are drawn again by a replay"
        replies = [name for name in files if "/llm-cache/" in name]
        assert replies in ([], [f"bench/eval/{run}/llm-cache/replies.jsonl.xz"]), f"{run}: {replies[:3]}"


def test_every_shared_vector_recording_is_in_the_checkout():
    names = tracked()
    listings = [name for name in names if name.endswith("/vectors/bases.txt")]
    assert listings, "no run shares another's vectors"
    for listing in listings:
        for line in (ROOT / listing).read_text().splitlines():
            base = ((ROOT / listing).parent / line.split("#", 1)[0].strip()).resolve().relative_to(ROOT).as_posix()
            assert any(n.startswith(f"{base}/") and n.endswith(".npz") for n in names), f"{listing}: {base}"
