"""Run manifests: what produced an evaluation's results, so two reports can be told apart and a resumed evaluation
never mixes setups unnoticed.

A manifest records the code (git commit, dirty flag and a hash of the uncommitted diff), the versions of the
packages that shape results, the sha256 of every model file used (GGUF, embedding and reranker weights), each
config's LLM (backend, base_url, model), every collection asked ({name, rows, version}: LanceDB's table version),
each retrieving config's embedding runtime (`embedding`: backend and the precision it computes in), a hash of every
prompt template (llm/prompts.py), the dataset's hash, seeds and the resolved configs, with the version of the config
layout they are written in (`config_version`, configs/versions.py; a manifest without it is of version 1). It is kept
as `manifest.json` in the evaluation's folder and copied into report.json and report.md.

The embedding precision is the one the runtime resolved, not the config's setting: OpenVINO's `precision: auto`
computes in bf16 on a CPU with native bf16 and in f32 elsewhere. The two agree to cosine >= 0.9999, but that is
enough to swap near-tied passages, and a different passage order is a different prompt, which a reply cache has not
recorded. So a resume on a machine that embeds in another precision is a change. It is recorded per config, not per
collection: configs with different embedding backends share a collection. The CPU itself is recorded under `host`.
A run replaying recorded vectors (eval --vector-cache DIR --replay) records the runtime that recorded them, since
those are the vectors it uses, so it resumes on any machine.

`created`/`updated` (timing), `scope` (runs, limit), `llm_cache` and `vector_cache` (recording or replaying),
`judge`, `mixed`, `host`, `config_version` and the dataset's path describe a run without changing what its rows mean
and are never compared. A resumed evaluation compares everything else (`changes`): a value present in both manifests
that differs is a change; configs, collections and models present in only one are not (adding a config to an
evaluation is a resume too).

File hashes are cached by path, size and modification time (in $XDG_CACHE_HOME/switchyard), so re-runs do not
read the model files again.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import tempfile
import threading
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from switchyard.configs.loader import config_to_dict
from switchyard.configs.schema import LangChainLLMConfig, LLMConfig, LocalLLMConfig, OpenAILLMConfig, SwitchyardConfig
from switchyard.configs.versions import CONFIG_VERSION
from switchyard.errors import LLMError, ManifestMismatch, ModelNotFoundError
from switchyard.llm.factory import llm_identity
from switchyard.llm.llamacpp import packaged_gguf
from switchyard.llm.prompts import templates
from switchyard.retrievers.cross_encoder_onnx import is_onnx_file
from switchyard.retrievers.embedder import resolve_model_dir
from switchyard.retrievers.rerankers import SHIPPED_CROSS_ENCODER
from switchyard.run_context import ALL

MANIFEST = "manifest.json"
PACKAGES = ("langgraph", "lancedb", "llama-cpp-python", "sentence-transformers", "openai")
# `cluster`: where the questions were asked (eval --ray) changes no row, so a run may resume elsewhere
# `host`: the CPU is provenance; what it changes in the rows (the embedding precision) is compared per config
# `config_version`: the layout the configs are written in (configs/versions.py); a config dumps alike in every
# version after its own, and the configs themselves are compared (a manifest without it is of version 1)
NOT_COMPARED = (
    "created",
    "updated",
    "scope",
    "llm_cache",
    "vector_cache",
    "judge",
    "mixed",
    "dataset.path",
    "cluster",
    "host",
    "config_version",
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx", ".gguf", ".pt", ".pth")
REPO_ROOT = Path(__file__).resolve().parents[1]

_hash_lock = threading.Lock()


# -- pieces ----------------------------------------------------------------------------------------------------
def _hash_cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "switchyard" / "file-sha256.json"


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: dict) -> None:
    """Write to a temporary file and rename it over `path`: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}-", suffix=".tmp", delete=False
    ) as tmp:
        json.dump(data, tmp, indent=2, ensure_ascii=False)
    os.replace(tmp.name, path)


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, remembered across runs while its size and mtime stay the same."""
    path = Path(path).resolve()
    st = path.stat()
    stamp = [st.st_size, st.st_mtime_ns]
    cache_file = _hash_cache_file()
    known = _read_json(cache_file).get(str(path))
    if isinstance(known, dict) and known.get("stamp") == stamp:
        return known["sha256"]
    with path.open("rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    with _hash_lock:  # other processes may write too: at worst one entry is lost and computed again
        cache = _read_json(cache_file)
        cache[str(path)] = {"stamp": stamp, "sha256": digest}
        try:
            _write_json(cache_file, cache)
        except OSError:
            pass  # a read-only home: the hash is still right, only not remembered
    return digest


def tree_sha256(path: str | Path, only: tuple[str, ...] | None = None) -> str:
    """A file's sha256, or for a folder the sha256 of its files' relative paths and hashes (of the files named in
    `only`, relative to it, when given)."""
    path = Path(path)
    if path.is_file():
        return file_sha256(path)
    files = sorted(path.rglob("*")) if only is None else [path / name for name in sorted(only)]
    lines = [f"{f.relative_to(path).as_posix()} {file_sha256(f)}\n" for f in files if f.is_file()]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def code_state(exclude: tuple[Path, ...] = ()) -> dict:
    """The commit, whether tracked files differ from it, and a hash of that difference (None outside a checkout).
    Changes under `exclude` (an evaluation's own folder, committed with its results) do not count."""
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None, "diff_sha256": None}
    skip = []
    for path in exclude:
        try:
            skip.append(f":(exclude){Path(path).resolve().relative_to(REPO_ROOT).as_posix()}")
        except ValueError:  # outside the checkout
            continue
    diff = _git("diff", "HEAD", "--", ".", *skip) or ""
    return {
        "commit": commit.strip(),
        "dirty": bool(diff),
        "diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if diff else None,
    }


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def prompt_hashes() -> dict[str, str]:
    return {name: hashlib.sha256(text.encode()).hexdigest() for name, text in sorted(templates().items())}


def _model_entry(path: Path | str, role: str) -> dict:
    path = Path(path)
    return {"path": str(path), "sha256": file_sha256(path) if path.is_file() else None, "role": role}


def _weights(folder: Path, role: str) -> list[dict]:
    files = sorted(f for f in folder.rglob("*") if f.is_file() and f.suffix in WEIGHT_SUFFIXES)
    return [_model_entry(f, role) for f in files] or [{"path": str(folder), "sha256": None, "role": role}]


def _gguf(llm: LLMConfig) -> list[dict]:
    if not isinstance(llm, LocalLLMConfig):
        return []
    try:
        path = Path(llm.model_path).expanduser() if llm.model_path else packaged_gguf()
    except LLMError:  # not installed here (a replay needs no model): named, not hashed
        path = Path(llm_identity(llm)["model"])
    return [_model_entry(path, "llm")]


def _embedding(name: str, role: str) -> list[dict]:
    try:
        return _weights(resolve_model_dir(name), role)
    except ModelNotFoundError:
        return [{"path": name, "sha256": None, "role": role}]


def _cross_encoder(name: str | None) -> list[dict]:
    if not name:  # the shipped file (named, not hashed, where this installation lacks it)
        return [_model_entry(SHIPPED_CROSS_ENCODER, "reranker")]
    if is_onnx_file(name):
        return [_model_entry(Path(name).expanduser(), "reranker")]
    local = Path(name).expanduser()
    if not local.is_dir():
        try:
            from huggingface_hub import snapshot_download

            local = Path(snapshot_download(name, local_files_only=True))
        except Exception:  # not in the local hub cache either: the reranker will say so when it loads
            return [{"path": name, "sha256": None, "role": "reranker"}]
    return _weights(local, "reranker")


def model_files(config: SwitchyardConfig) -> list[dict]:
    """Every model file a config uses, as {path, sha256, role}."""
    files = _embedding(config.embedding.model, "embedding")
    if config.uses_llm():
        files += _gguf(config.llm)
    if config.rerank.method == "cross_encoder":
        files += _cross_encoder(config.rerank.model)
    elif config.rerank.method == "dense_rescore" and config.rerank.model:
        files += _embedding(config.rerank.model, "reranker")
    return files


def llm_description(llm: LLMConfig) -> dict:
    base_url = None
    if isinstance(llm, OpenAILLMConfig):
        base_url = llm.base_url
    elif isinstance(llm, LangChainLLMConfig):
        base_url = llm.chat_model_kwargs.get("base_url")
    return {"backend": llm.backend, "base_url": base_url, "model": llm_identity(llm)["model"]}


def collection_entry(store) -> dict:
    """{name, rows, version} of an `IndexStore`'s collection as it is now."""
    return {"name": store.collection, "rows": store.count(ALL), "version": store.version()}


def host_description() -> dict:
    """The machine's CPU model and core count (Linux's /proc/cpuinfo; the platform's processor name elsewhere)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count()}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# -- the manifest ----------------------------------------------------------------------------------------------
def resolved_config(config: SwitchyardConfig) -> dict:
    """A config as the manifest records it: its dump (configs/versions.py: keys added since version 1 at the default
    they were added with are left out) without how replies and vectors were obtained."""
    data = config_to_dict(config)
    data["llm"].pop("cache_dir", None)  # how replies were obtained, recorded under llm_cache
    data["llm"].pop("replay", None)
    data["embedding"].pop("vector_cache", None)  # recorded under vector_cache
    data["embedding"].pop("replay", None)
    return data


def build(
    configs: dict[str, SwitchyardConfig],
    dataset_path: str | Path | None,
    runs: int,
    limit: int | None,
    out_dir: Path | None = None,
) -> dict:
    """The manifest of an evaluation of `configs` (resolved, by name) on the dataset at `dataset_path`, written to
    `out_dir`, before any collection is asked (see `with_collection`)."""
    models: dict[str, dict] = {}
    for config in configs.values():
        for entry in model_files(config):
            models.setdefault(entry["path"], entry)
    first = next(iter(configs.values()), None)
    cache = first.llm if first is not None and first.llm.cache_dir else None
    vectors = first.embedding if first is not None and first.embedding.vector_cache else None
    own = tuple(
        Path(p) for p in (out_dir, cache.cache_dir if cache else None, vectors.vector_cache if vectors else None) if p
    )
    resolved = {name: resolved_config(config) for name, config in configs.items()}
    now = _now()
    return {
        "created": now,
        "updated": now,
        "code": code_state(own),
        "host": host_description(),
        "packages": package_versions(),
        "models": list(models.values()),
        "llm": {name: llm_description(c.llm) for name, c in configs.items() if c.uses_llm()},
        "collections": [],
        "prompts": prompt_hashes(),
        "dataset": _dataset_entry(dataset_path),
        "seeds": {name: c.llm.seed for name, c in configs.items()},  # run r of a config uses seed + r
        "configs": resolved,
        "config_version": CONFIG_VERSION,
        "scope": {"runs": runs, "limit": limit},
        "llm_cache": {"dir": cache.cache_dir, "mode": "replay" if cache.replay else "record"} if cache else None,
        "vector_cache": {"dir": vectors.vector_cache, "mode": "replay" if vectors.replay else "record"}
        if vectors
        else None,
    }


def _dataset_entry(dataset_path: str | Path | None) -> dict:
    """Path and content hash; for a set of `switchyard eval generate`, also where it came from and its review, and the
    hash covers only the files its questions are read from (rerunning the generator rewrites its manifest, not them)."""
    from switchyard.evaluation.review import SCORED_FILES, set_summary

    path = Path(dataset_path) if dataset_path else None
    generated = set_summary(path) if path and path.is_dir() else None
    entry: dict = {
        "path": str(dataset_path) if dataset_path else None,
        "sha256": tree_sha256(path, SCORED_FILES if generated else None) if path and path.exists() else None,
    }
    if generated:
        entry["generated"] = generated
    return entry


def with_collection(manifest: dict, entry: dict) -> dict:
    others = [c for c in manifest.get("collections", []) if c["name"] != entry["name"]]
    return {**manifest, "collections": others + [entry]}


def with_embedding(manifest: dict, config_name: str, runtime: dict) -> dict:
    """The embedding runtime (`Embedder.runtime`: {backend, precision}) a config retrieved with."""
    return {**manifest, "embedding": {**manifest.get("embedding", {}), config_name: runtime}}


def with_cluster(manifest: dict, cluster: dict) -> dict:
    """The Ray cluster the questions were asked on (Ray version, nodes, resources); absent from local runs."""
    return {**manifest, "cluster": cluster}


def with_judge(manifest: dict, judge: LLMConfig) -> dict:
    return {**manifest, "judge": {**llm_description(judge), "models": _gguf(judge)}}


def _keyed(items: list) -> dict | list:
    """Lists of models / collections become dicts keyed by path / name, so entries are compared one by one."""
    if items and all(isinstance(i, dict) for i in items):
        for key in ("path", "name"):
            if all(key in i for i in items):
                return {i[key]: i for i in items}
    return items


def _flatten(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, list):
        value = _keyed(value)
    if isinstance(value, dict) and value:
        flat: dict[str, object] = {}
        for key, sub in value.items():
            flat.update(_flatten(sub, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def _compared(manifest: dict) -> dict[str, object]:
    return {
        k: v
        for k, v in _flatten(manifest).items()
        if not any(k == skip or k.startswith(skip + ".") for skip in NOT_COMPARED)
    }


def _short(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text[:12] if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text[:60]


def changes(old: dict, new: dict) -> list[str]:
    """What differs between two manifests, one `key: old -> new` line per value present in both."""
    a, b = _compared(old), _compared(new)
    return [f"{k}: {_short(a[k])} -> {_short(b[k])}" for k in sorted(a.keys() & b.keys()) if a[k] != b[k]]


def _merge(old, new):
    """`new` over `old`, keeping what only `old` has (configs and collections of earlier runs of the folder)."""
    if isinstance(old, list) and isinstance(new, list):
        before, after = _keyed(old), _keyed(new)
        if isinstance(before, dict) and (isinstance(after, dict) or not new):
            return list({**before, **(after or {})}.values())
        return new
    if isinstance(old, dict) and isinstance(new, dict):
        return {**old, **{k: _merge(old[k], v) if k in old else v for k, v in new.items()}}
    return new


def read(out_dir: Path) -> dict | None:
    path = Path(out_dir) / MANIFEST
    return _read_json(path) or None if path.exists() else None


def resume(out_dir: Path, manifest: dict, allow_mixed: bool = False) -> dict:
    """The folder's manifest once `manifest`'s run joins it, written to `out_dir`. A folder with results from a
    setup that differs raises `ManifestMismatch` naming the changes, unless `allow_mixed` (then they are recorded
    under `mixed`)."""
    out_dir = Path(out_dir)
    old = read(out_dir)
    if old is None:
        _write_json(out_dir / MANIFEST, manifest)
        return manifest
    found = changes(old, manifest)
    if found and not allow_mixed:
        shown = "; ".join(found[:6]) + (f"; and {len(found) - 6} more" if len(found) > 6 else "")
        raise ManifestMismatch(
            f"{out_dir} holds results of a different setup ({shown}); use another --out, or "
            "--allow-mixed to add to it anyway"
        )
    merged = _merge(old, manifest)
    merged["created"] = old.get("created", manifest["created"])
    merged["updated"] = _now()
    if found:
        merged["mixed"] = old.get("mixed", []) + [{"at": merged["updated"], "changes": found}]
    _write_json(out_dir / MANIFEST, merged)
    return merged


# -- report.md -------------------------------------------------------------------------------------------------
def markdown(manifest: dict | None) -> str:
    """The manifest as a short report.md section."""
    if not manifest:
        return "## Manifest\n\nNone: these results predate run manifests.\n"
    code = manifest.get("code", {})
    commit = (code.get("commit") or "unknown")[:12] + (" (dirty)" if code.get("dirty") else "")
    packages = ", ".join(f"{k} {v or '-'}" for k, v in manifest.get("packages", {}).items())
    lines = [
        "## Manifest",
        "",
        f"- code: {commit}; created {manifest.get('created')}, updated {manifest.get('updated')}",
        f"- packages: {packages}",
    ]
    for name, llm in manifest.get("llm", {}).items():
        where = f" at {llm['base_url']}" if llm.get("base_url") else ""
        lines.append(f"- LLM of {name}: {llm['backend']} {llm['model']}{where}, seed {manifest['seeds'].get(name)}")
    for m in manifest.get("models", []):
        lines.append(f"- model ({m.get('role', '-')}): `{m['path']}` sha256 {(m['sha256'] or 'not found')[:16]}")
    for c in manifest.get("collections", []):
        lines.append(f"- collection {c['name']}: {c['rows']} rows, version {c['version']}")
    runtimes: dict[str, list[str]] = {}  # absent from manifests written before it was recorded
    for name, runtime in manifest.get("embedding", {}).items():
        runtimes.setdefault(f"{runtime['backend']} in {runtime['precision']}", []).append(name)
    for runtime, names in runtimes.items():
        lines.append(f"- embedding: {runtime} ({', '.join(names)})")
    dataset = manifest.get("dataset", {})
    lines.append(f"- dataset: `{dataset.get('path')}` sha256 {(dataset.get('sha256') or '-')[:16]}")
    if dataset.get("generated"):
        from switchyard.evaluation.review import describe_set

        lines.append(f"- question set: {describe_set(dataset['generated'])}")
    prompts = hashlib.sha256(json.dumps(manifest.get("prompts", {}), sort_keys=True).encode()).hexdigest()
    lines.append(f"- prompts: {len(manifest.get('prompts', {}))} templates, combined sha256 {prompts[:16]}")
    if manifest.get("host"):
        lines.append(f"- host: {manifest['host']['cpu']}, {manifest['host']['cores']} cores")
    if manifest.get("llm_cache"):
        lines.append(f"- LLM replies: {manifest['llm_cache']['mode']} with `{manifest['llm_cache']['dir']}`")
    if manifest.get("cluster"):
        cluster = manifest["cluster"]
        resources = ", ".join(f"{k} {v:g}" for k, v in cluster["resources"].items() if k in ("CPU", "GPU"))
        lines.append(f"- asked on a Ray cluster: Ray {cluster['ray']}, {cluster['nodes']} node(s), {resources}")
    if manifest.get("judge"):
        judge = manifest["judge"]
        lines.append(f"- faithfulness judge: {judge['backend']} {judge['model']}")
    for mixed in manifest.get("mixed", []):
        lines.append(f"- **mixed** (--allow-mixed, {mixed['at']}): {'; '.join(mixed['changes'])}")
    lines.append("- resolved configs: manifest.json (and configs/)")
    return "\n".join(lines) + "\n"
