"""Config versions (configs/versions.py): one table of the keys added since version 1 decides what a config's dump
leaves out, so the hash and the resolved dict of every config made before stay identical; another, of the defaults
that changed, says how configs saved before still read as they were."""

import ast
import gzip
import json

import pytest

from switchyard.configs.loader import CONFIG_DIR, config_hash, config_to_dict, load_config
from switchyard.configs.schema import SwitchyardConfig
from switchyard.configs.versions import ADDED_KEYS, CHANGED_DEFAULTS, CONFIG_VERSION, NO_E5_WEIGHTS, canonical_dump
from switchyard.errors import ConfigError
from tests.configs.make_config_hashes import FIXTURE, OVERRIDES, SAVED_DUMPS, entry, shipped

GOLDEN = json.loads(FIXTURE.read_text())

# per row of the table: a value other than the one the key was added with (sections: one of their keys changed)
OTHER_VALUES = {
    "graph.router.memory_tokens": 400,
    "graph.no_documents": {"detect": False},
    "graph.router.direct_reply": True,
    "graph.router.approve": True,
    "graph.router.approve_timeout_s": 60.0,
    "ray": {"actors": 4},
    "answer.fallback_coverage": 0.7,
    "retrieve.retrievers.e5": {"top_k": 50},
    "embedding.vector_cache": "/tmp/vectors",
    "embedding.replay": True,
    "retrieve.retrievers.vector_fields": {"alt": {"model": "minilm"}},
    "retrieve.retrievers.e5.model": "/tmp/e5",
    "retrieve.retrievers.e5.query_prefix": "q: ",
    "retrieve.retrievers.e5.passage_prefix": "p: ",
    "retrieve.retrievers.e5.batch_size": 8,
    "rerank.fused_weight": 0.3,
    "llm.context_window": 4096,
    "retrieve.injection_policy": "keep",
    "retrieve.injection_threshold": 0.8,
    "answer.spotlight": "datamark",
    "store.reindex_min_rows": 0,
    "conversation": {"method": "off"},
    "retrieve.fusion.adaptive_signal": "margin",
    "retrieve.fusion.adaptive_k": 1,
}
# what a key needs beside it to load (replay reads a vector recording; a server has a context window)
NEEDS = {
    "embedding.replay": ["embedding.vector_cache=/tmp/vectors"],
    "retrieve.retrievers.e5": ["retrieve.retrievers.e5.enabled=false"],  # the section as added: e5 off
    "llm.context_window": ["llm.backend=openai", "llm.base_url=http://127.0.0.1:1/v1"],  # a server's key
}


def _at(data: dict, path: str):
    for part in path.split("."):
        data = data[part]
    return data


def _has(data: dict, path: str) -> bool:
    *parents, key = path.split(".")
    for part in parents:
        if part not in data:
            return False
        data = data[part]
    return key in data


def _without(data: dict, path: str) -> dict:
    key, _, rest = path.partition(".")
    if rest:
        return {**data, key: _without(data[key], rest)}
    return {k: v for k, v in data.items() if k != key}


def _set(path: str, value) -> str:
    return f"{path}={json.dumps(value)}"


class TestHashesOfConfigsMadeBefore:
    """tests/fixtures/config_hashes.json was written by tests/configs/make_config_hashes.py with the per-section
    serializers the table replaced."""

    def test_the_golden_file_covers_every_shipped_config_and_override_set(self):
        assert set(GOLDEN) == {"(defaults)", *shipped()}
        assert all(set(sets) == set(OVERRIDES) for sets in GOLDEN.values())
        assert sum("hash" in e for sets in GOLDEN.values() for e in sets.values()) >= 400

    @pytest.mark.parametrize("name", ["(defaults)", *sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))])
    def test_hash_and_resolved_dict_are_identical(self, name):
        config = None if name == "(defaults)" else name
        now = {label: entry(config, overrides) for label, overrides in OVERRIDES.items()}
        differ = [label for label in OVERRIDES if now[label] != GOLDEN[name][label]]
        assert not differ, f"{name}: the hash or resolved dict changed under {differ}"

    @pytest.mark.parametrize("label", sorted(OVERRIDES))
    def test_a_saved_config_loads_back_to_the_same_config(self, label, tmp_path):
        for name in ("agent", "e5"):
            try:
                config = load_config(name, OVERRIDES[label])
            except Exception:  # an override set this config refuses (the golden file records the error)
                continue
            dump = config_to_dict(config)
            assert SwitchyardConfig.model_validate(dump) == config
            saved = tmp_path / f"{name}.json"  # JSON is YAML
            saved.write_text(json.dumps(dump))
            assert load_config(saved) == config and config_hash(load_config(saved)) == config_hash(config)


class TestTheTable:
    def test_one_version_per_row_in_order_and_config_version_is_the_last(self):
        assert [row.version for row in ADDED_KEYS] == list(range(2, len(ADDED_KEYS) + 2))
        changed = sorted({row.version for row in CHANGED_DEFAULTS})  # one version may change several defaults
        assert changed == list(range(len(ADDED_KEYS) + 2, CONFIG_VERSION + 1))
        assert len({row.path for row in ADDED_KEYS}) == len(ADDED_KEYS)
        assert set(OTHER_VALUES) == {row.path for row in ADDED_KEYS}  # this test covers every row

    @pytest.mark.parametrize("row", ADDED_KEYS, ids=lambda row: row.path)
    def test_each_key_was_added_with_todays_default(self, row):
        # the default config's sections dumped alone are complete (the table applies to the whole config only);
        # without the keys added to a section later, the default is the value the row records. A row keeps the
        # value its key was added with: changing a default later changes what configs that left the key out do,
        # which this flags for a deliberate decision
        defaults = SwitchyardConfig()
        full = {name: getattr(defaults, name).model_dump(mode="json") for name in SwitchyardConfig.model_fields}
        for changed in CHANGED_DEFAULTS:  # a default changed later: the row keeps the one it was added with
            *parents, key = changed.path.split(".")
            _at(full, ".".join(parents))[key] = changed.before
        value = _at(full, row.path)
        for later in ADDED_KEYS:
            if later.path.startswith(row.path + ".") and later.version > row.version:
                value = _without(value, later.path[len(row.path) + 1 :])
        assert value == row.default

    @pytest.mark.parametrize("row", ADDED_KEYS, ids=lambda row: row.path)
    def test_a_key_at_the_default_it_was_added_with_is_left_out_and_another_value_is_dumped(self, row):
        needs = NEEDS.get(row.path, [])
        at_default = load_config("agent", [*needs, _set(row.path, row.default)])
        assert not _has(config_to_dict(at_default), row.path)
        assert config_hash(at_default) == config_hash(load_config("agent", needs))
        changed = load_config("agent", [*needs, _set(row.path, OTHER_VALUES[row.path])])
        dump = config_to_dict(changed)
        assert _has(dump, row.path)
        assert config_hash(changed) != config_hash(at_default)
        assert SwitchyardConfig.model_validate(dump) == changed  # and it loads back
        # the same through model_dump (python mode), which recorded outputs and tests read
        assert _has(changed.model_dump(), row.path) and not _has(at_default.model_dump(), row.path)

    def test_a_section_is_left_out_only_when_every_key_in_it_is_at_its_default(self):
        e5_off = ["retrieve.retrievers.e5.enabled=false", "retrieve.retrievers.e5.batch_size=8"]
        e5 = config_to_dict(load_config(None, e5_off))["retrieve"]["retrievers"]
        assert e5["e5"] == {"enabled": False, "top_k": 100, "batch_size": 8}  # the section, less the later keys
        ray = config_to_dict(load_config(None, ["ray.gpus_per_actor=0.0", "ray.actors=2"]))
        assert "ray" not in ray

    def test_canonical_dump_leaves_its_argument_unchanged(self):
        full = {"graph": {"router": {"memory_tokens": 160, "max_steps": 8}}, "ray": {"actors": 2}}
        before = json.dumps(full)
        assert canonical_dump(full) == {"graph": {"router": {"max_steps": 8}}, "ray": {"actors": 2}}
        assert json.dumps(full) == before

    def test_no_section_carries_its_own_serializer_workaround(self):
        source = (CONFIG_DIR / "schema.py").read_text()
        serializers = [
            node.name
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef)
            and any("model_serializer" in ast.unparse(d) for d in node.decorator_list)
        ]
        # the whole config's (the table) and the LLM union's flat layout (a layout, not added keys)
        assert sorted(serializers) == ["_canonical", "_flat_layout"]
        assert "_omit_new_defaults" not in source and "_without_new_defaults" not in source


class TestChangedDefaults:
    """Layout 26 made e5 (with its weights) and no sentence windows the default (CHANGED_DEFAULTS)."""

    SAVED = json.loads(gzip.decompress(SAVED_DUMPS.read_bytes()))

    def test_every_config_saved_before_loads_back_to_the_same_config_and_hash(self):
        saved = [(name, label, e) for name, sets in self.SAVED.items() for label, e in sets.items()]
        assert len(saved) >= 100 and {"(defaults)", "fixed", "agent", "e5", "bm25-only"} <= set(self.SAVED)
        for name, label, e in saved:
            config = SwitchyardConfig.model_validate(e["dump"])
            assert (config_to_dict(config), config_hash(config)) == (e["dump"], e["hash"]), (name, label)
        before = SwitchyardConfig.model_validate(self.SAVED["(defaults)"]["none"]["dump"])
        assert not before.retrieve.retrievers.e5.enabled and before.ingest.window_tokens == 64

    def test_each_row_is_a_real_change(self):
        today = config_to_dict(SwitchyardConfig())
        for row in CHANGED_DEFAULTS:
            assert _at(today, row.path) != row.before and row.kept_by

    def test_a_config_that_does_not_say_gets_e5_with_its_weights_and_no_windows(self):
        for config in (load_config(None), load_config("fixed"), load_config("agent")):
            assert config.retrieve.retrievers.e5.enabled and config.ingest.window_tokens == 0
            assert config.retrieve.fusion.weights == {"bm25": 0.4, "dense": 0.25, "e5": 0.35}
        dump = config_to_dict(load_config(None))
        assert dump["retrieve"]["retrievers"]["e5"]["enabled"] is True  # so the dump reads back with e5 on

    @pytest.mark.parametrize(
        "overrides, weights",
        [
            (["retrieve.fusion.weights={bm25: 0.7, dense: 0.3}"], {"bm25": 0.7, "dense": 0.3}),
            (["retrieve.retrievers.e5.enabled=false"], NO_E5_WEIGHTS),
            (["retrieve.retrievers.e5={top_k: 50, enabled: false}"], NO_E5_WEIGHTS),
            (["retrieve.mode=bm25"], NO_E5_WEIGHTS),
            (["retrieve.mode=dense"], NO_E5_WEIGHTS),
        ],
    )
    def test_weights_without_e5_or_a_single_list_or_saying_so_keep_e5_off(self, overrides, weights):
        config = load_config(None, overrides)
        assert not config.retrieve.retrievers.e5.enabled and config.retrieve.fusion.weights == weights
        assert SwitchyardConfig.model_validate(config_to_dict(config)) == config  # its dump reads back with e5 off

    def test_e5_alone_or_named_in_the_weights_turns_it_on_and_e5_on_without_a_weight_is_an_error(self):
        assert load_config(None, ["retrieve.mode=e5"]).retrieve.retrievers.e5.enabled
        assert load_config(None, ["retrieve.fusion.weights={bm25: 0.5, e5: 0.5}"]).retrieve.retrievers.e5.enabled
        with pytest.raises(ConfigError, match="give its list a fusion weight"):
            load_config(None, ["retrieve.retrievers.e5.enabled=true", "retrieve.fusion.weights={bm25: 1, dense: 1}"])
