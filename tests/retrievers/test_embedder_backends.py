"""The compiled embedding backends (ONNX Runtime, OpenVINO) against the torch reference: same vectors, same order,
the on-disk export built once (also under concurrent first use) and reused, thread-safe encoding, and collections
searched and re-ingested across backends (allowed: see IndexStore)."""

import shutil
import threading

import numpy as np
import pytest

from switchyard.errors import EmbedderError
from switchyard.retrievers.embedder import Embedder, OnnxExport, bucketed_shape
from switchyard.retrievers.store import ChunkFetch
from switchyard.run_context import ALL
from tests.conftest import SAMPLES
from tests.together import on_one_barrier

pytestmark = pytest.mark.slow  # the embedding runtimes themselves: they load the model

LONG = " ".join(
    f"Sentence {i} of a long abstract: the coupler, the brake pipe and the buffer beam were inspected at "
    f"yard {i} before the train left for the junction."
    for i in range(30)
)  # ~700 tokens: truncated at 256
SENTENCES = [
    "",
    "a",
    "Who patented the knuckle coupler?",
    "Standard gauge is 1,435 mm.",
    "Classification yards sort freight wagons onto tracks by destination using a hump.",
    "Interlocking prevents conflicting signals and points from being set at the same time.",
    "The Janney coupler was patented in 1873 by Eli H. Janney, a Confederate veteran.",
    "Blue flag protection: no movement of equipment while workers are on or under it.",
    "Zebras graze on the savanna.",
    "¿Dónde está la estación de tren más cercana?",
    "Ünïcödé, emoji 🚂 and punctuation!!! ... ??",
    "1234 5678 90",
    "  Mitochondrial DNA variation was associated with increased risk of type 2 diabetes in 3,000 adults.  ",
    "The broad gauge of the Great Western Railway was 7 ft 1/4 in, abandoned in 1892.",
    "Semaphore signals were gradually replaced by colour-light signals during the twentieth century.",
    "In hump yards, retarders slow the wagons as they roll down into the classification bowl tracks.",
    " ".join(["track"] * 120),
    "A short one.",
    "Dense retrieval embeds questions and passages into the same vector space; " * 6,
    LONG,
]
QUERIES = [
    "Who patented the knuckle coupler?",
    "What is standard gauge?",
    "How do hump yards sort wagons?",
    "Why are signals interlocked?",
    "What must happen when a blue flag is displayed?",
]
COMPILED = ["onnx", "openvino"]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """One export for the whole module: both compiled backends share this cache."""
    return str(tmp_path_factory.mktemp("switchyard-cache"))


@pytest.fixture(scope="module")
def reference(embedder):
    return embedder.run(SENTENCES)


@pytest.fixture(scope="module")
def compiled(cache_dir):
    """backend name -> a loaded Embedder over the shared cache (2 threads; batch_size 4: several sorted batches)."""
    built = {}

    def get(backend: str, precision: str = "auto") -> Embedder:
        if (backend, precision) not in built:
            emb = Embedder("minilm", batch_size=4, backend=backend, threads=2, cache_dir=cache_dir, precision=precision)
            emb.warm_up()
            built[backend, precision] = emb
        return built[backend, precision]

    return get


@pytest.fixture(params=COMPILED)
def emb(request, compiled):
    return compiled(request.param)


NO_E5 = "retrieve.retrievers.e5.enabled=false"


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _stack(uri, embedder, *overrides):
    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack

    # MiniLM's backends are the subject: no e5 field (on by default), whose model would load beside
    return RetrievalStack(load_config(None, [f"store.uri={uri}", NO_E5, *overrides]), embedder=embedder)


# -- vectors ------------------------------------------------------------------------------------------------------
def test_vectors_agree_with_torch(emb, reference, embedder):
    vectors = emb.run(SENTENCES)
    assert vectors.shape == (len(SENTENCES), embedder.dim) and vectors.dtype == np.float32
    assert emb.dim == embedder.dim == 384
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cos = _cos(vectors, reference)
    assert cos.min() > 0.999, dict(zip(SENTENCES, cos))
    assert len(emb.model.tokenizer.encode([LONG])[0]) == 256  # truncated at max_seq_length, as sentence-transformers


@pytest.mark.parametrize("backend", COMPILED)
def test_f32_matches_torch_to_five_nines(backend, compiled, reference):
    emb = compiled(backend, "f32")
    assert emb.inference_precision == "f32"
    assert _cos(emb.run(SENTENCES), reference).min() > 0.99999


def test_openvino_auto_precision_is_bf16_only_where_the_cpu_has_it(compiled):
    import openvino as ov

    native_bf16 = "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    emb = compiled("openvino")
    assert emb.inference_precision == ("bf16" if native_bf16 else "f32")
    assert int(emb.model.session.get_compiled_model().get_property("INFERENCE_NUM_THREADS")) == 2


def test_onnx_runtime_threads(compiled):
    assert compiled("onnx").model.session.get_session_options().intra_op_num_threads == 2
    assert compiled("onnx").inference_precision == "f32"


def test_batch_order_is_preserved(emb):
    forward = emb.run(SENTENCES)
    backward = emb.run(SENTENCES[::-1])[::-1]
    singles = np.stack([emb.run([s])[0] for s in SENTENCES[:6]])
    assert _cos(forward, backward).min() > 0.9999
    assert _cos(forward[:6], singles).min() > 0.9999
    assert _cos(forward[2:3], forward[3:4])[0] < 0.99  # different texts really differ


def test_bucketed_shapes():
    assert bucketed_shape([13], 256, 32) == (1, 13)  # a query runs at its own length
    assert bucketed_shape([40, 3, 7], 256, 32) == (4, 64)
    assert bucketed_shape([32, 32], 256, 32) == (2, 32)
    assert bucketed_shape([256] * 5, 256, 32) == (8, 256)
    assert bucketed_shape([290, 2], 300, 32) == (2, 300)  # never wider than the model reads
    assert bucketed_shape([5] * 20, 256, 20) == (20, 32)  # never more rows than a batch holds


@pytest.mark.parametrize("backend", COMPILED)
def test_batches_run_in_bucketed_shapes_with_the_vectors_they_had(backend, compiled, monkeypatch):
    """Padding a batch to a bucketed shape (rows repeated, mask 0 past each text) leaves every vector as it was
    (f32: to float precision); the runtime sees a handful of shapes instead of one per batch."""
    emb = compiled(backend, "f32")
    texts = SENTENCES[2:9] + [LONG]  # sorted longest first: batches of 4 and 4
    alone = np.stack([emb.run([t])[0] for t in texts])
    shapes = []
    forward = emb._backend._forward

    def spy(session, input_ids, mask):
        shapes.append(input_ids.shape)
        return forward(session, input_ids, mask)

    monkeypatch.setattr(emb._backend, "_forward", spy)
    batched = emb.run(texts)
    three = emb.run(texts[:3])
    assert shapes == [(4, 256), (4, 32), (4, 32)]  # 3 texts run as 4 rows, the last one repeated
    assert _cos(batched, alone).min() > 0.99999
    assert _cos(three, alone[:3]).min() > 0.99999
    assert emb.run([texts[0]]).shape == (1, 384) and shapes[-1] == (1, len(emb.model.tokenizer.encode([texts[0]])[0]))


def test_empty_input(emb):
    out = emb.run([])
    assert out.shape == (0, 384) and out.dtype == np.float32
    assert emb.embed_query("").shape == (384,)


def test_concurrent_encoding_matches_serial(emb):
    """Threads share one Embedder (one OpenVINO infer request / ORT session): the encode lock keeps each call whole."""
    groups = [SENTENCES[i::4] for i in range(4)]
    serial = [emb.run(g) for g in groups]
    emb.clear_cache()
    results = on_one_barrier(lambda group: (emb.run(group), emb.embed_query(group[0])), groups)
    for i, _group in enumerate(groups):
        vectors, query = results[i]
        assert _cos(vectors, serial[i]).min() > 0.9999
        assert _cos(query[None], serial[i][:1])[0] > 0.9999


# -- the export ---------------------------------------------------------------------------------------------------
def test_export_is_built_once_and_shared_by_both_backends(compiled, cache_dir):
    first, second = compiled("onnx"), compiled("openvino")
    path = first._backend.export.path()
    assert path.is_file() and path.parent.parent == OnnxExport(first.model_dir, cache_dir).cache_root / "onnx"
    assert second._backend.export.path() == path
    assert first._backend.export.exported != second._backend.export.exported  # exactly one of them built it
    mtime = path.stat().st_mtime_ns
    again = Embedder("minilm", backend="onnx", cache_dir=cache_dir)
    again.warm_up()
    assert again._backend.export.path() == path
    assert not again._backend.export.exported and path.stat().st_mtime_ns == mtime
    assert not list(path.parent.glob("*.tmp"))  # nothing half-written left behind


def test_concurrent_first_use_exports_once(tmp_path, monkeypatch, embedder):
    """Four threads (separate OnnxExport objects, as separate processes would have) ask for a missing export at
    once: one builds it under the lock file, the others wait and reuse it."""
    calls = []

    def fake_export(self, target):
        calls.append(threading.get_ident())
        threading.Event().wait(0.3)  # long enough for the others to reach the lock
        target.write_text("exported once")

    monkeypatch.setattr(OnnxExport, "_export", fake_export)
    exports = [OnnxExport(embedder.model_dir, tmp_path) for _ in range(4)]
    for e in exports:
        e.model_hash()  # hash before the barrier: the threads then race for the build itself
    paths = on_one_barrier(lambda export: export.path(), exports)
    assert len(calls) == 1 and sum(e.exported for e in exports) == 1
    assert len(set(paths)) == 1 and paths[0].read_text() == "exported once"


def test_failed_export_is_a_clear_error_and_a_later_one_retries(tmp_path, monkeypatch, embedder):
    def broken(self, target):
        raise RuntimeError("unsupported operator")

    export = OnnxExport(embedder.model_dir, tmp_path)
    monkeypatch.setattr(OnnxExport, "_export", broken)
    with pytest.raises(EmbedderError, match="exporting .* to ONNX failed .*unsupported operator.*backend=torch"):
        export.path()
    assert not export.exported and not list((tmp_path / "onnx" / export.model_hash()).glob("*.onnx*"))
    monkeypatch.setattr(OnnxExport, "_export", lambda self, target: target.write_text("second try"))
    assert export.path().read_text() == "second try" and export.exported


def test_unwritable_cache_is_a_clear_error(tmp_path, embedder):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(EmbedderError, match="cache_dir"):
        OnnxExport(embedder.model_dir, blocker).path()


def test_missing_runtime_is_a_clear_error(monkeypatch, cache_dir):
    emb = Embedder("minilm", backend="openvino", cache_dir=cache_dir)
    monkeypatch.setattr(emb._backend, "module", "no_such_runtime")
    with pytest.raises(EmbedderError, match="needs the 'no_such_runtime' package"):
        emb.warm_up()


def test_unsupported_pooling_is_a_clear_error(tmp_path):
    import json

    from switchyard.retrievers.embedder import SentenceModelSpec, resolve_model_dir

    src = resolve_model_dir("minilm")
    for name in ("modules.json", "config.json", "sentence_bert_config.json"):
        shutil.copy(src / name, tmp_path / name)
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    with pytest.raises(EmbedderError, match="not mean pooling"):
        SentenceModelSpec(tmp_path)


# -- collections across backends ----------------------------------------------------------------------------------
def test_searching_a_torch_collection_through_a_compiled_backend_gives_the_same_results(sample_index, embedder, emb):
    torch_stack = _stack(sample_index, embedder, "retrieve.mode=dense")
    other_stack = _stack(sample_index, emb, "retrieve.mode=dense")
    assert other_stack.store.metadata()["embedding_backend"] == "torch"  # recorded, and not refused
    for query in QUERIES:
        want = [p.chunk_id for p in torch_stack.search(query, top_k=5, rerank=False, groups=ALL).passages]
        got = [p.chunk_id for p in other_stack.search(query, top_k=5, rerank=False, groups=ALL).passages]
        assert got == want, query


def test_reingest_through_another_backend_is_incremental(tmp_path, embedder, emb):
    """Built with torch, re-ingested through a compiled backend: unchanged documents are not re-embedded, a changed
    one is, and the collection keeps recording the backend that created it."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("track-gauge.txt", "railway-signalling.md", "classification-yards.md"):
        shutil.copy(SAMPLES / name, corpus / name)
    uri = tmp_path / "index"
    first = _stack(uri, embedder).ingestor(progress=False).run([corpus])
    assert first.added == 3 and first.chunks_written >= 3

    compiled_stack = _stack(uri, emb)
    again = compiled_stack.ingestor(progress=False).run([corpus])
    assert (again.added, again.updated, again.unchanged, again.chunks_written) == (0, 0, 3, 0)

    gauge = corpus / "track-gauge.txt"
    gauge.write_text(gauge.read_text() + "\nMetre gauge lines are common in South-East Asia.\n")
    changed = compiled_stack.ingestor(progress=False).run([corpus])
    assert (changed.added, changed.updated, changed.unchanged) == (0, 1, 2)
    assert compiled_stack.store.metadata() == {
        "embedding_model": "minilm",
        "embedding_backend": "torch",
        "dim": 384,
    }

    rows = compiled_stack.store.scan(["chunk_id", "title", "text", "source"], scope=ALL).to_pylist()
    from switchyard.retrievers.documents import search_text

    stored = ChunkFetch(compiled_stack.store).vectors([r["chunk_id"] for r in rows])
    ids = [r["chunk_id"] for r in rows]
    torch_vectors = embedder.run([search_text(r["title"], r["text"]) for r in rows])
    assert _cos(np.stack([stored[i] for i in ids]), torch_vectors).min() > 0.999
    top = compiled_stack.search("metre gauge South-East Asia", top_k=1, rerank=False, groups=ALL).passages[0]
    assert top.source.endswith("track-gauge.txt")


@pytest.mark.parametrize("backend", COMPILED)
def test_new_collection_records_its_backend_and_torch_reuses_it(backend, tmp_path, cache_dir, embedder):
    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack

    cfg = load_config(
        None,
        [
            f"store.uri={tmp_path / 'index'}",
            f"embedding.backend={backend}",
            f"embedding.cache_dir={cache_dir}",
            "embedding.threads=2",
            NO_E5,
        ],
    )
    stack = RetrievalStack(cfg)
    assert (stack.embedder.backend, stack.embedder.threads) == (backend, 2)
    stack.ingestor(progress=False).run([SAMPLES / "track-gauge.txt"])
    assert stack.store.metadata() == {
        "embedding_model": "minilm",
        "embedding_backend": backend,
        "dim": 384,
    }
    assert (
        stack.search("standard gauge", top_k=1, rerank=False, groups=ALL).passages[0].source.endswith("track-gauge.txt")
    )

    torch_stack = _stack(tmp_path / "index", embedder)
    report = torch_stack.ingestor(progress=False).run([SAMPLES / "track-gauge.txt"])
    assert (report.unchanged, report.chunks_written) == (1, 0)
    assert (
        torch_stack.search("standard gauge", top_k=1, rerank=False, groups=ALL)
        .passages[0]
        .source.endswith("track-gauge.txt")
    )


# -- configuration ------------------------------------------------------------------------------------------------
def test_config_defaults_and_round_trip(compiled, cache_dir):
    from switchyard.configs.loader import load_config

    e = load_config(None, []).embedding
    assert (e.backend, e.threads, e.precision, e.cache_dir) == ("openvino", None, "auto", None)
    e = compiled("openvino")
    data = {
        "model": e.model_name,
        "batch_size": e.batch_size,
        "device": e.device,
        "backend": e.backend,
        "threads": e.threads,
        "cache_dir": e.cache_dir,
        "precision": e.precision,
    }
    assert data == {
        "model": "minilm",
        "batch_size": 4,
        "device": "cpu",
        "backend": "openvino",
        "threads": 2,
        "cache_dir": cache_dir,
        "precision": "auto",
    }
    clone = Embedder(**data)
    assert (clone.backend, clone._backend.threads, clone._backend.export.cache_root) == (
        "openvino",
        2,
        compiled("openvino")._backend.export.cache_root,
    )


def test_bad_backend_settings_are_clear_errors():
    from switchyard.configs.loader import load_config
    from switchyard.errors import ConfigError

    with pytest.raises(ConfigError, match="embedding.backend: Input should be 'torch', 'onnx' or 'openvino'"):
        load_config(None, ["embedding.backend=tensorrt"])
    with pytest.raises(ConfigError, match="embedding.precision"):
        load_config(None, ["embedding.precision=int4"])
    with pytest.raises(ConfigError, match="CPU only"):
        load_config(None, ["embedding.backend=onnx", "embedding.device=cuda"])


def test_cli_reports_a_bad_backend_without_a_traceback(capsys):
    from switchyard import cli

    assert cli.main(["config", "show", "--set", "embedding.backend=tensorrt"]) != 0
    err = capsys.readouterr().err
    assert "embedding.backend" in err and "Traceback" not in err


def test_openvino_loads_together_compile_into_one_model_cache_entry(tmp_path):
    """Four OpenVINO embedders (separate objects, as separate processes or stacks would have) loading at once over
    an empty cache: they compile one at a time under the lock file into OpenVINO's model cache, and their vectors are
    those of one that loads from the cache afterwards."""

    def load(_):
        emb = Embedder("minilm", backend="openvino", threads=2, cache_dir=tmp_path)
        return emb.run(SENTENCES[:6])

    together = on_one_barrier(load, range(4))
    later = load(None)
    for vectors in together:
        np.testing.assert_allclose(vectors, later, atol=1e-6)
    (folder,) = (tmp_path / "onnx").iterdir()
    assert len([p for p in (folder / "openvino").iterdir() if p.suffix == ".blob"]) == 1
