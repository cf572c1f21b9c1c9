"""Layered config: built-in defaults < YAML file < `--set a.b=c` overrides, validated by the schema."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from switchyard.configs.schema import LLM_SECTIONS, SwitchyardConfig
from switchyard.errors import ConfigError

CONFIG_DIR = Path(__file__).resolve().parent


def _deep_merge(base: dict, update: dict) -> dict:
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path) -> dict:
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(data).__name__}")
    return data


def parse_override(text: str) -> dict:
    """`a.b=c` -> {"a": {"b": c}}, with c parsed as a YAML scalar (so 3 is an int, true a bool)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip() or any(not part for part in key.strip().split(".")):
        raise ConfigError(f"--set {text!r}: expected KEY.PATH=VALUE, e.g. retrieve.fusion.rrf_k=30")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    node: Any = value
    for part in reversed(key.strip().split(".")):
        node = {part: node}
    return node


def _key_path(loc: tuple) -> list[str]:
    """The dotted key a user writes: pydantic puts the chosen section's tag in the location of an error inside the
    `llm` union (llm.local.n_ctx), which is not part of the key (llm.n_ctx)."""
    return [str(part) for i, part in enumerate(loc) if not (i > 0 and loc[i - 1] == "llm" and part in LLM_SECTIONS)]


def _describe(exc: ValidationError, source: str) -> str:
    lines = []
    for err in exc.errors():
        path = _key_path(err["loc"])
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        if err["type"] == "union_tag_invalid":  # the key that chooses a section has a value no section takes
            path.append(err["ctx"]["discriminator"].strip("'"))
            *others, last = err["ctx"]["expected_tags"].split(", ")
            msg = f"Input should be {', '.join(others)} or {last}" if others else f"Input should be {last}"
        lines.append(f"{source}: {'.'.join(path) or '(top level)'}: {msg}")
    return "; ".join(lines)


def resolve_config_path(path: str | Path) -> Path:
    """A config file: the path as given, else a config shipped with Switchyard by its name (`agent`,
    `no-llm.yaml`), so the installed command finds them from any folder."""
    given = Path(path)
    if given.is_file() or given.parent != Path("."):
        return given
    for candidate in (CONFIG_DIR / given.name, CONFIG_DIR / f"{given.name}.yaml"):
        if candidate.is_file():
            return candidate
    shipped = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))
    raise ConfigError(f"config file not found: {path} (shipped configs: {shipped})")


def load_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> SwitchyardConfig:
    data: dict = {}
    sources = ["defaults"]
    if path is not None:
        path = resolve_config_path(path)
        data = _read_yaml(path)
        sources.append(str(path))
        try:  # validate the file alone first so errors name the file, not the overrides
            SwitchyardConfig.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(_describe(exc, str(path))) from None
    overrides = list(overrides)
    for text in overrides:
        data = _deep_merge(data, parse_override(text))
    try:
        return SwitchyardConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, "--set " + " ".join(overrides))) from None


def config_to_dict(config: SwitchyardConfig) -> dict:
    return config.model_dump(mode="json")


def config_hash(config: SwitchyardConfig) -> str:
    blob = json.dumps(config_to_dict(config), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]
