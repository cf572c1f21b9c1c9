import pytest

from configs.loader import CONFIG_DIR, config_hash, load_config, parse_override
from errors import ConfigError


class TestLoadConfig:
    def test_defaults(self):
        cfg = load_config()
        assert cfg.retrieve.mode == "hybrid" and cfg.store.collection == "default"

    def test_layering_defaults_file_overrides(self, tmp_path):
        f = tmp_path / "p.yaml"
        f.write_text("retrieve:\n  fusion: {method: rrf, rrf_k: 10}\n")
        cfg = load_config(f, ["retrieve.fusion.rrf_k=30", "rerank.top_k=7"])
        assert cfg.retrieve.fusion.method == "rrf"       # from the file
        assert cfg.retrieve.fusion.rrf_k == 30            # override beats file
        assert cfg.rerank.top_k == 7
        assert cfg.retrieve.retrievers.dense.top_k == 100  # default kept

    def test_unknown_key_names_file_and_key(self, tmp_path):
        f = tmp_path / "bad.yaml"
        f.write_text("retrieve:\n  fusion: {methd: rrf}\n")
        with pytest.raises(ConfigError, match=r"bad.yaml: retrieve.fusion.methd: unknown key"):
            load_config(f)

    def test_wrong_type_names_key(self, tmp_path):
        f = tmp_path / "bad.yaml"
        f.write_text("ingest: {chunk_size: many}\n")
        with pytest.raises(ConfigError, match=r"ingest.chunk_size"):
            load_config(f)

    def test_bad_override(self):
        with pytest.raises(ConfigError, match="KEY.PATH=VALUE"):
            load_config(None, ["nonsense"])
        with pytest.raises(ConfigError, match="retrieve.fusion.method"):
            load_config(None, ["retrieve.fusion.method=max"])

    def test_invalid_yaml_and_missing_file(self, tmp_path):
        f = tmp_path / "x.yaml"
        f.write_text("a: [1, 2\n")
        with pytest.raises(ConfigError, match="not valid YAML"):
            load_config(f)
        with pytest.raises(ConfigError, match="not found"):
            load_config(tmp_path / "missing.yaml")

    def test_overlap_must_be_below_size(self):
        with pytest.raises(ConfigError, match="chunk_overlap"):
            load_config(None, ["ingest.chunk_size=32", "ingest.chunk_overlap=32"])

    def test_parse_override_types(self):
        assert parse_override("a.b=3") == {"a": {"b": 3}}
        assert parse_override("a=true") == {"a": True}
        assert parse_override("a=x y") == {"a": "x y"}

    def test_hash_changes_with_config(self):
        assert config_hash(load_config()) != config_hash(load_config(None, ["rerank.top_k=9"]))

    @pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.name)
    def test_shipped_configs_validate(self, path):
        load_config(path)
