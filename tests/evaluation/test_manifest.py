"""Run manifests: what they record, how two are compared, and resuming an evaluation under a different setup."""

import copy
import json
import os
import subprocess
import sys

import pytest

from switchyard.configs.loader import load_config
from switchyard.errors import ManifestMismatch
from switchyard.evaluation import manifest as run_manifest
from switchyard.evaluation.manifest import changes, file_sha256, resume
from switchyard.llm import prompts
from switchyard.retrievers.embedder import Embedder
from switchyard.retrievers.vector_recording import build_embedder
from tests.conftest import FIXTURES, ROOT, SAMPLES

DATASET = FIXTURES / "tiny_qa" / "questions.jsonl"


@pytest.fixture(autouse=True)
def own_hash_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


@pytest.fixture
def base(tmp_path):
    configs = {
        "fixed": load_config(ROOT / "configs" / "fixed.yaml", [f"store.uri={tmp_path}/index"]),
        "no-llm": load_config(ROOT / "configs" / "no-llm.yaml", [f"store.uri={tmp_path}/index"]),
    }
    return run_manifest.build(configs, DATASET, runs=1, limit=None)


class TestBuild:
    def test_records_what_produced_the_results(self, base):
        assert set(base["packages"]) == {"langgraph", "lancedb", "llama-cpp-python", "sentence-transformers", "openai"}
        assert base["packages"]["lancedb"]  # installed here
        roles = {m["role"] for m in base["models"]}
        assert roles == {"embedding", "llm"}  # no-llm loads no GGUF; fixed does
        gguf = next(m for m in base["models"] if m["role"] == "llm")
        assert gguf["path"].endswith(".gguf") and len(gguf["sha256"]) == 64
        assert set(base["llm"]) == {"fixed"} and base["llm"]["fixed"]["backend"] == "local"
        assert base["prompts"].keys() == prompts.templates().keys() and "ANSWER_SYSTEM" in base["prompts"]
        assert base["dataset"]["sha256"] == file_sha256(DATASET)
        assert base["seeds"] == {"fixed": 0, "no-llm": 0}
        assert base["configs"]["fixed"]["graph"]["mode"] == "fixed"
        assert "cache_dir" not in base["configs"]["fixed"]["llm"]  # how replies were obtained: under llm_cache
        assert base["code"]["commit"] is None or len(base["code"]["commit"]) == 40
        assert base["host"]["cores"] == os.cpu_count() and base["host"]["cpu"]
        assert f"- host: {base['host']['cpu']}, {os.cpu_count()} cores" in run_manifest.markdown(base)

    @pytest.mark.slow  # loads the model to learn its precision
    def test_a_config_records_the_precision_its_embedder_computes_in(self, base):
        runtime = Embedder("minilm", backend="torch").runtime
        assert runtime == {"backend": "torch", "precision": "f32"}
        bf16 = {"backend": "openvino", "precision": "bf16"}
        recorded = run_manifest.with_embedding(run_manifest.with_embedding(base, "fixed", bf16), "no-llm", runtime)
        assert recorded["embedding"] == {"fixed": bf16, "no-llm": runtime} and "embedding" not in base
        shown = run_manifest.markdown(recorded)
        assert "- embedding: openvino in bf16 (fixed)" in shown and "- embedding: torch in f32 (no-llm)" in shown

    def test_a_vector_recording_is_recorded_beside_the_configs_not_in_them(self, tmp_path):
        overrides = [
            f"store.uri={tmp_path}/index",
            f"embedding.vector_cache={tmp_path}/vectors",
            "embedding.replay=true",
        ]
        built = run_manifest.build(
            {"fixed": load_config(ROOT / "configs" / "fixed.yaml", overrides)}, DATASET, runs=1, limit=None
        )
        assert built["vector_cache"] == {"dir": f"{tmp_path}/vectors", "mode": "replay"}
        assert not {"vector_cache", "replay"} & built["configs"]["fixed"]["embedding"].keys()

    @pytest.mark.slow  # records with the real model first
    def test_a_replayed_recording_reports_the_runtime_that_recorded_it(self, tmp_path):
        recording = build_embedder("minilm", backend="torch", vector_cache=str(tmp_path))
        recording.run(["a text"])
        recording.recording.flush()
        replaying = build_embedder(
            "minilm", backend="openvino", precision="auto", vector_cache=str(tmp_path), replay=True
        )
        assert replaying.runtime == {"backend": "torch", "precision": "f32"}

    def test_file_hashes_are_remembered_until_the_file_changes(self, tmp_path):
        model = tmp_path / "weights.bin"
        model.write_bytes(b"weights v1")
        real = file_sha256(model)
        cache_file = tmp_path / "xdg" / "switchyard" / "file-sha256.json"
        cache = json.loads(cache_file.read_text())
        cache[str(model.resolve())]["sha256"] = "remembered"
        cache_file.write_text(json.dumps(cache))
        assert file_sha256(model) == "remembered"  # not read again
        model.write_bytes(b"weights v2, longer")
        assert file_sha256(model) not in ("remembered", real)

    def test_a_cross_encoder_file_is_recorded_with_its_digest(self, tmp_path):
        from switchyard.retrievers.rerankers import SHIPPED_CROSS_ENCODER

        model = tmp_path / "ce.onnx"
        model.write_bytes(b"not really a model")
        config = load_config(None, ["rerank.method=cross_encoder", f"rerank.model={model}"])
        rerankers = [f for f in run_manifest.model_files(config) if f["role"] == "reranker"]
        assert rerankers == [{"path": str(model), "sha256": file_sha256(model), "role": "reranker"}]
        shipped = [
            f
            for f in run_manifest.model_files(load_config(None, ["rerank.method=cross_encoder"]))
            if f["role"] == "reranker"
        ]
        assert [f["path"] for f in shipped] == [str(SHIPPED_CROSS_ENCODER)]

    def test_code_state_ignores_the_evaluations_own_folder(self, tmp_path, monkeypatch):
        repo = tmp_path / "repo"
        (repo / "out").mkdir(parents=True)
        (repo / "code.py").write_text("x = 1\n")
        (repo / "out" / "report.md").write_text("old\n")
        git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-qm", "init"], check=True)
        monkeypatch.setattr(run_manifest, "REPO_ROOT", repo.resolve())
        assert run_manifest.code_state()["dirty"] is False
        (repo / "out" / "report.md").write_text("new results\n")
        assert run_manifest.code_state((repo / "out",))["dirty"] is False
        (repo / "code.py").write_text("x = 2\n")
        state = run_manifest.code_state((repo / "out",))
        assert state["dirty"] is True and len(state["diff_sha256"]) == 64


class TestCompare:
    def test_timing_scope_and_dataset_path_are_not_changes(self, base):
        later = {
            **copy.deepcopy(base),
            "created": "2030-01-01",
            "updated": "2030-01-02",
            "scope": {"runs": 5, "limit": 10},
            "llm_cache": {"dir": "x", "mode": "replay"},
            "vector_cache": {"dir": "v", "mode": "replay"},
        }
        later["dataset"]["path"] = "elsewhere/questions.jsonl"
        later["host"] = {"cpu": "another CPU", "cores": 64}
        assert changes(base, later) == []

    def test_the_cluster_is_recorded_and_is_not_a_change(self, base):
        cluster = {"ray": "2.60.0", "nodes": 2, "resources": {"CPU": 3.0, "memory": 1e9}}
        on_ray = run_manifest.with_cluster(base, cluster)
        assert on_ray["cluster"] == cluster and "cluster" not in base
        assert changes(base, on_ray) == [] and changes(on_ray, base) == []
        assert changes(on_ray, run_manifest.with_cluster(base, {**cluster, "nodes": 5})) == []
        assert "- asked on a Ray cluster: Ray 2.60.0, 2 node(s), CPU 3" in run_manifest.markdown(on_ray)
        assert "Ray" not in run_manifest.markdown(base)

    @pytest.mark.parametrize(
        "edit, named",
        [
            (
                lambda m: m["configs"]["fixed"]["llm"].update(temperature=0.7),
                "configs.fixed.llm.temperature: 0.0 -> 0.7",
            ),
            (lambda m: m["prompts"].update(ANSWER_SYSTEM="0" * 64), "prompts.ANSWER_SYSTEM"),
            (lambda m: m["models"][0].update(sha256="f" * 64), ".sha256"),
            (lambda m: m["code"].update(commit="abc"), "code.commit"),
            (lambda m: m["packages"].update(lancedb="0.1"), "packages.lancedb"),
            (lambda m: m["dataset"].update(sha256="0" * 64), "dataset.sha256"),
            (
                lambda m: m["collections"].append({"name": "c", "rows": 9, "version": 4}),
                "collections.c.version: 3 -> 4",
            ),
            # another machine's OpenVINO `auto` (bf16 where the CPU has it) can reorder near-tied passages
            (lambda m: m["embedding"]["fixed"].update(precision="f32"), "embedding.fixed.precision: bf16 -> f32"),
        ],
    )
    def test_a_change_is_named(self, base, edit, named):
        old = copy.deepcopy(base)
        old["collections"] = [{"name": "c", "rows": 9, "version": 3}]
        old["embedding"] = {"fixed": {"backend": "openvino", "precision": "bf16"}}
        new = copy.deepcopy(old)
        new["collections"] = []
        edit(new)
        found = changes(old, new)
        assert len(found) == 1 and named in found[0]

    def test_configs_and_collections_in_one_manifest_only_are_not_changes(self, base):
        fewer = copy.deepcopy(base)
        del fewer["configs"]["no-llm"]
        more = run_manifest.with_collection(base, {"name": "new", "rows": 1, "version": 1})
        assert changes(base, fewer) == [] and changes(fewer, more) == []
        # a folder recorded before configs named their embedding runtime resumes: the runtime is new, not changed
        runtime = {"backend": "openvino", "precision": "bf16"}
        assert changes(base, run_manifest.with_embedding(base, "fixed", runtime)) == []
        # and two configs embedding differently (torch and openvino on one collection) are not a change either
        both = run_manifest.with_embedding(
            run_manifest.with_embedding(base, "fixed", runtime), "no-llm", {"backend": "torch", "precision": "f32"}
        )
        assert changes(run_manifest.with_embedding(base, "fixed", runtime), both) == []


class TestResume:
    def test_first_run_writes_and_same_setup_resumes(self, tmp_path, base):
        assert resume(tmp_path, base) == base
        again = resume(tmp_path, {**base, "created": "later"})
        assert again["created"] == base["created"] and "mixed" not in again

    def test_a_different_setup_is_refused_naming_the_change(self, tmp_path, base):
        resume(tmp_path, base)
        changed = copy.deepcopy(base)
        changed["configs"]["fixed"]["retrieve"]["top_k"] = 7
        with pytest.raises(ManifestMismatch, match=r"configs\.fixed\.retrieve\.top_k: 20 -> 7.*--allow-mixed"):
            resume(tmp_path, changed)
        assert run_manifest.read(tmp_path) == base  # untouched

    def test_allow_mixed_records_the_changes_and_keeps_earlier_entries(self, tmp_path, base):
        resume(tmp_path, run_manifest.with_collection(base, {"name": "c", "rows": 5, "version": 3}))
        changed = copy.deepcopy(base)
        changed["prompts"]["ANSWER_SYSTEM"] = "1" * 64
        merged = resume(tmp_path, changed, allow_mixed=True)
        assert merged["prompts"]["ANSWER_SYSTEM"] == "1" * 64
        assert merged["collections"] == [{"name": "c", "rows": 5, "version": 3}]  # kept from the first run
        [mixed] = merged["mixed"]
        assert mixed["changes"] == [f"prompts.ANSWER_SYSTEM: {base['prompts']['ANSWER_SYSTEM'][:12]} -> 111111111111"]
        assert run_manifest.read(tmp_path) == merged
        assert "mixed" in run_manifest.markdown(merged) and "prompts.ANSWER_SYSTEM" in run_manifest.markdown(merged)


def cli(*args, env=None):
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *map(str, args)], capture_output=True, text=True, timeout=900, env=env
    )


@pytest.mark.slow
def test_eval_records_the_manifest_and_refuses_a_mixed_resume(tmp_path):
    out = tmp_path / "out"
    args = [
        "eval",
        DATASET,
        "--corpus",
        SAMPLES,
        "--configs",
        ROOT / "configs" / "no-llm.yaml",
        "--out",
        out,
        "--index-dir",
        tmp_path / "index",
        "--no-progress",
    ]
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text())
    manifest = report["manifest"]
    assert manifest == json.loads((out / "manifest.json").read_text())
    [collection] = manifest["collections"]
    [(name, runtime)] = manifest["embedding"].items()
    assert name == "no-llm" and runtime["backend"] == "openvino" and runtime["precision"] in ("f32", "bf16")
    assert collection["rows"] > 0 and isinstance(collection["version"], int) and collection["name"].startswith("eval-")
    assert all(set(m) >= {"path", "sha256"} for m in manifest["models"])
    md = (out / "report.md").read_text()
    assert md.index("## Manifest") < md.index("## Side by side") and collection["name"] in md

    refused = cli(*args, "--runs", "2", "--set", "retrieve.top_k=7")  # more to ask, under another setup
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "configs.no-llm.retrieve.top_k: 20 -> 7" in refused.stderr and "--allow-mixed" in refused.stderr
    assert len((out / "questions.jsonl").read_text().splitlines()) == 4  # nothing was asked

    mixed = cli(*args, "--runs", "2", "--set", "retrieve.top_k=7", "--allow-mixed")
    assert mixed.returncode == 0, mixed.stderr
    manifest = json.loads((out / "report.json").read_text())["manifest"]
    assert manifest["configs"]["no-llm"]["retrieve"]["top_k"] == 7
    assert manifest["mixed"][0]["changes"] == ["configs.no-llm.retrieve.top_k: 20 -> 7"]
    assert len((out / "questions.jsonl").read_text().splitlines()) == 8


@pytest.mark.slow
def test_configs_embedding_differently_share_a_collection_in_one_evaluation(tmp_path):
    torch_config = tmp_path / "no-llm-torch.yaml"
    torch_config.write_text((ROOT / "configs" / "no-llm.yaml").read_text() + "embedding:\n  backend: torch\n")
    out = tmp_path / "out"
    done = cli(
        "eval",
        DATASET,
        "--corpus",
        SAMPLES,
        "--configs",
        ROOT / "configs" / "no-llm.yaml",
        torch_config,
        "--out",
        out,
        "--index-dir",
        tmp_path / "index",
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["collections"]) == 1  # the backend does not shape the index
    assert manifest["embedding"]["no-llm-torch"] == {"backend": "torch", "precision": "f32"}
    assert manifest["embedding"]["no-llm"]["backend"] == "openvino" and "mixed" not in manifest
