import gzip
import json

import pytest
import yaml

from switchyard.configs.loader import CONFIG_DIR, config_hash, config_to_dict, load_config, parse_override
from switchyard.configs.schema import LocalLLMConfig, OpenAILLMConfig, SwitchyardConfig
from switchyard.errors import ConfigError
from tests.configs.make_config_hashes import SAVED_DUMPS


class TestLoadConfig:
    def test_defaults(self):
        cfg = load_config()
        assert cfg.retrieve.mode == "hybrid" and cfg.store.collection == "default"

    def test_layering_defaults_file_overrides(self, tmp_path):
        f = tmp_path / "p.yaml"
        f.write_text("retrieve:\n  fusion: {method: rrf, rrf_k: 10}\n")
        cfg = load_config(f, ["retrieve.fusion.rrf_k=30", "rerank.top_k=7"])
        assert cfg.retrieve.fusion.method == "rrf"  # from the file
        assert cfg.retrieve.fusion.rrf_k == 30  # override beats file
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


class TestLLMBackends:
    """`llm` is one section per backend, chosen by `llm.backend`; each holds its own keys and the shared ones."""

    def test_local_by_default_and_switched_by_set_or_file(self, tmp_path):
        assert type(load_config().llm) is LocalLLMConfig
        cfg = load_config(None, ["llm.backend=openai", "llm.base_url=http://127.0.0.1:1/v1"])
        assert type(cfg.llm) is OpenAILLMConfig and cfg.llm.base_url == "http://127.0.0.1:1/v1"
        assert cfg.llm.max_tokens == 256  # shared defaults stay
        f = tmp_path / "p.yaml"
        f.write_text("llm: {backend: local, n_ctx: 4096, temperature: 0.5}\n")
        with pytest.raises(ConfigError, match="llm.n_ctx is a setting of llm.backend=local"):
            load_config(f, ["llm.backend=openai"])  # the file's own local key is in the way
        f.write_text("llm: {backend: openai, model: m}\n")
        assert (load_config(f).llm.model, load_config(f, ["llm.temperature=0.5"]).llm.temperature) == ("m", 0.5)

    @pytest.mark.parametrize(
        "sets, key, owner, backend",
        [
            (["llm.backend=openai", "llm.n_ctx=4096"], "n_ctx", "local", "openai"),
            (["llm.model=qwen"], "model", "openai", "local"),
            (
                ["llm.backend=langchain", "llm.chat_model=a.B", "llm.base_url=http://x/v1"],
                "base_url",
                "openai",
                "langchain",
            ),
        ],
    )
    def test_a_key_of_another_backend_names_the_key_and_both_backends(self, sets, key, owner, backend):
        with pytest.raises(
            ConfigError,
            match=rf"llm\.{key} is a setting of llm\.backend={owner}, not of "
            rf"llm\.backend={backend}",
        ):
            load_config(None, sets)

    def test_errors_name_the_key_as_written(self):
        with pytest.raises(ConfigError, match=r"--set llm.n_ctx=10: llm.n_ctx: Input should be greater"):
            load_config(None, ["llm.n_ctx=10"])
        with pytest.raises(ConfigError, match=r"llm.backend: Input should be 'local', 'openai' or 'langchain'"):
            load_config(None, ["llm.backend=claude"])
        with pytest.raises(ConfigError, match=r"llm.colour: unknown key"):
            load_config(None, ["llm.colour=red"])

    @pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.name)
    def test_a_resolved_config_loads_back_unchanged(self, path, tmp_path):
        # the dump keeps the flat layout of before (every backend's keys), so saved configs and hashes stay
        cfg = load_config(path)
        data = config_to_dict(cfg)
        assert list(data["llm"]) == [
            "backend",
            "model_path",
            "n_ctx",
            "n_threads",
            "instances",
            "repeat_penalty",
            "chat_format",
            "base_url",
            "model",
            "api_key_env",
            "response_format",
            "chat_model",
            "chat_model_kwargs",
            "structured_method",
            "temperature",
            "max_tokens",
            "seed",
            "timeout_s",
            "max_retries",
            "cache_dir",
            "replay",
        ]
        saved = tmp_path / "resolved.yaml"
        saved.write_text(yaml.safe_dump(data))
        assert load_config(saved) == cfg and config_hash(load_config(saved)) == config_hash(cfg)

    def test_hashes_of_the_default_and_shipped_configs_are_unchanged(self):
        # recorded before LLM settings became one section per backend (eval manifests and resume compare them); the
        # configs as saved before e5 became the default (config layout 25) still read back to them
        saved = json.loads(gzip.decompress(SAVED_DUMPS.read_bytes()))
        for name, recorded in [
            ("(defaults)", "d5889a78a9d2"),
            ("fixed", "d5889a78a9d2"),
            ("agent-openai", "91a7d649f849"),
            ("fixed-openai", "d5d182250b8e"),
            ("agent-tools", "4ff3bcfa0eb5"),
        ]:
            assert config_hash(SwitchyardConfig.model_validate(saved[name]["none"]["dump"])) == recorded
        assert config_hash(load_config("fixed")) == config_hash(load_config())  # fixed.yaml spells out the default

    def test_the_ray_section_is_dumped_only_when_set(self):
        assert "ray" not in config_to_dict(load_config())
        cfg = load_config(None, ["ray.actors=4", "ray.cpus_per_actor=2"])
        assert config_to_dict(cfg)["ray"] == {"actors": 4, "cpus_per_actor": 2.0, "gpus_per_actor": 0.0}

    def test_gpu_actors_need_the_torch_backend(self):
        with pytest.raises(ConfigError, match="embedding.backend=torch"):
            load_config(None, ["ray.gpus_per_actor=1"])
        assert load_config(None, ["ray.gpus_per_actor=1", "embedding.backend=torch"]).ray.gpus_per_actor == 1

    def test_the_cli_reports_a_key_of_another_backend_with_exit_2(self, capsys):
        from switchyard import cli

        assert cli.main(["config", "show", "--set", "llm.backend=openai", "--set", "llm.n_ctx=4096"]) == 2
        err = capsys.readouterr().err
        assert "llm.n_ctx is a setting of llm.backend=local" in err and "Traceback" not in err
