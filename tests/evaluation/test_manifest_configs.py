"""The configs recorded in every committed run manifest load with today's schema and dump to exactly what was
recorded (configs/versions.py keeps the keys added since out of their dumps); a manifest records the version of the
config layout, and one without it (version 1) still resumes."""

import json

import pytest
from pydantic import ValidationError

from switchyard.configs.loader import load_config
from switchyard.configs.schema import SwitchyardConfig
from switchyard.configs.versions import CONFIG_VERSION
from switchyard.evaluation import manifest as run_manifest
from switchyard.evaluation.manifest import changes, resolved_config, resume
from tests.conftest import FIXTURES, ROOT

MANIFESTS = sorted([*(ROOT / "bench" / "eval").glob("*/manifest.json"), *FIXTURES.glob("**/manifest.json")])
# keys added before version 1 (2026-11-24: sentence windows, query adapters), when no table kept them out of dumps:
# configs recorded before lack them and load with today's defaults
BEFORE_VERSION_1 = {"ingest.window_tokens", "ingest.window_overlap", "retrieve.retrievers.dense.query_adapter"}
VERSION_1 = "2026-11-24"  # every manifest created since records its configs in a layout the table reproduces


def _differences(a, b, prefix: str = "") -> set[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        found: set[str] = set()
        for key in a.keys() | b.keys():
            path = f"{prefix}{key}"
            found |= _differences(a[key], b[key], path + ".") if key in a and key in b else {path}
        return found
    return set() if a == b else {prefix.rstrip(".")}


def test_every_recorded_config_loads_and_dumps_to_what_was_recorded():
    assert len(MANIFESTS) >= 16
    identical, before_version_1, failed = 0, [], []
    for path in MANIFESTS:
        manifest = json.loads(path.read_text())
        for name, recorded in manifest["configs"].items():
            where = f"{path.relative_to(ROOT)}: {name}"
            try:
                config = SwitchyardConfig.model_validate(recorded)
            except ValidationError as exc:
                failed.append(f"{where}: does not load ({exc.error_count()} errors)")
                continue
            differ = _differences(resolved_config(config), recorded)
            if not differ:
                identical += 1
            elif differ <= BEFORE_VERSION_1 and manifest["created"] < VERSION_1:
                before_version_1.append(where)
            else:
                failed.append(f"{where}: dumps differently at {sorted(differ)}")
    print(f"{identical} identical, {len(before_version_1)} recorded before version 1: {before_version_1}")
    assert not failed, failed
    # every config of the manifests created since version 1 dumps identically (112 of 11 manifests when this was
    # written); the 24 of the six earlier ones differ only by the three keys added before version 1
    assert identical >= 90 and identical > 2 * len(before_version_1)


@pytest.fixture
def built(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    configs = {"no-llm": load_config(ROOT / "configs" / "no-llm.yaml", [f"store.uri={tmp_path}/index"])}
    return run_manifest.build(configs, FIXTURES / "tiny_qa" / "questions.jsonl", runs=1, limit=None)


def test_a_manifest_records_the_config_version(built):
    assert built["config_version"] == CONFIG_VERSION
    assert "ray" not in built["configs"]["no-llm"]  # an added key at the default it was added with


def test_a_folder_recorded_before_config_versions_resumes(tmp_path, built):
    version_1 = {k: v for k, v in built.items() if k != "config_version"}
    assert changes(version_1, built) == [] and changes(built, version_1) == []
    assert changes(built, {**built, "config_version": CONFIG_VERSION + 1}) == []  # a later layout: not a change
    resume(tmp_path, version_1)
    merged = resume(tmp_path, built)  # no ManifestMismatch
    assert merged["config_version"] == CONFIG_VERSION and "mixed" not in merged
    # a config that does change is still named
    answer = {**built["configs"]["no-llm"]["answer"], "max_passages": 9}
    other = {**built, "configs": {"no-llm": {**built["configs"]["no-llm"], "answer": answer}}}
    assert changes(version_1, other) == ["configs.no-llm.answer.max_passages: 4 -> 9"]


def test_an_old_manifests_configs_rebuild_into_the_same_resolved_configs(tmp_path):
    # a resume of a committed folder compares the configs built now with those it recorded: no change
    old = json.loads((FIXTURES / "manifest_before_versions.json").read_text())  # recorded_run's, until 2026-12-07
    rebuilt = {name: resolved_config(SwitchyardConfig.model_validate(c)) for name, c in old["configs"].items()}
    assert changes({"configs": old["configs"]}, {"configs": rebuilt}) == []
    assert "config_version" not in old  # recorded before config versions
