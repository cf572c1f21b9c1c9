"""The cross-encoder file format (retrievers/cross_encoder_onnx.py) and the cross_encoder reranker that reads it.

A tiny BERT cross-encoder (2 layers, hidden size 32, the MiniLM tokenizer, seeded random weights) is built and
exported once per session: its scores mean nothing, but the file must reproduce them exactly."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from switchyard.errors import RerankerError
from switchyard.retrievers import rerankers
from switchyard.retrievers.cross_encoder_onnx import FORMAT, OnnxCrossEncoder, export_cross_encoder, file_sha256
from switchyard.retrievers.documents import Passage
from switchyard.retrievers.rerankers import CrossEncoderReranker
from tests.conftest import ROOT
from tests.together import on_one_barrier

pytestmark = pytest.mark.slow  # builds, exports and loads cross-encoder models

MAX_LENGTH = 64
QUERY = "Which coupler joins railway cars automatically?"
TEXTS = [
    "The Janney knuckle coupler joins railway cars automatically when they are pushed together.",
    "Track gauge is the distance between the inner faces of the two rails.",
    "Signals protect trains by keeping a safe distance between them.",
    "A buffer-and-chain coupler needs a worker between the cars to link them.",
    "Bananas are rich in potassium.",
    # longer than MAX_LENGTH tokens with the query: the passage is truncated
    " ".join(["The history of couplers spans many decades of railway engineering and patents."] * 12),
]
PAIRS = [(QUERY, t) for t in TEXTS] + [
    ("gauge", "Standard gauge is 1,435 mm."),
    ("What keeps trains apart?", "Block signals keep trains apart."),
]


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory):
    """A saved sentence-transformers CrossEncoder folder: a 2-layer BERT with the MiniLM tokenizer, seeded."""
    import torch
    from sentence_transformers import CrossEncoder
    from transformers import BertConfig, BertForSequenceClassification

    from switchyard.retrievers.embedder import resolve_model_dir

    minilm = resolve_model_dir("minilm")
    folder = tmp_path_factory.mktemp("tiny-ce") / "model"
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=1,
        initializer_range=0.5,  # wide weights: scores that differ clearly between pairs
    )
    BertForSequenceClassification(config).save_pretrained(str(folder))
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(minilm / name, folder / name)
    model = CrossEncoder(str(folder), device="cpu", max_length=MAX_LENGTH, activation_fn=torch.nn.Identity())
    model.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="session")
def torch_scores(tiny_cross_encoder):
    import torch
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(
        str(tiny_cross_encoder), device="cpu", max_length=MAX_LENGTH, activation_fn=torch.nn.Identity()
    )
    return np.asarray(model.predict(PAIRS, show_progress_bar=False), dtype=np.float32)


@pytest.fixture(scope="session")
def exported(tiny_cross_encoder, tmp_path_factory):
    """{"fp32" | "int8" | "dynamic": (path, sha256)} of the tiny model's exports (int8: weight-only, the default)."""
    out = tmp_path_factory.mktemp("ce-onnx")
    training = {"data": "none (random weights)", "steps": 0, "seed": 0}
    files = {}
    for kind, quantize in (("fp32", False), ("int8", True), ("dynamic", "dynamic")):
        path = out / f"tiny-{kind}.onnx"
        digest = export_cross_encoder(
            str(tiny_cross_encoder),
            path,
            max_length=MAX_LENGTH,
            quantize=quantize,
            base_model="tiny-bert (test)",
            training=training,
        )
        files[kind] = (path, digest)
    return files


def _passages(texts, title=""):
    return [
        Passage(chunk_id=f"c{i}", doc_id=f"d{i}", source="s.txt", title=title, text=t, score=1.0 / (i + 1))
        for i, t in enumerate(texts)
    ]


class TestExport:
    def test_fp32_file_scores_as_the_torch_model(self, exported, torch_scores):
        path, _ = exported["fp32"]
        scores = OnnxCrossEncoder(path, batch_size=3).predict(PAIRS)
        assert scores.dtype == np.float32 and scores.shape == (len(PAIRS),)
        assert np.ptp(torch_scores) > 0.5  # the pairs' scores differ: agreement is not trivial
        np.testing.assert_allclose(scores, torch_scores, atol=1e-4, rtol=1e-4)

    def test_int8_file_is_smaller_and_scores_close_to_fp32(self, exported):
        fp32 = OnnxCrossEncoder(exported["fp32"][0]).predict(PAIRS)
        int8 = OnnxCrossEncoder(exported["int8"][0]).predict(PAIRS)
        assert exported["int8"][0].stat().st_size < 0.5 * exported["fp32"][0].stat().st_size
        # weight-only int8, float32 arithmetic: a small error (on this tiny model with wide random weights, 10% of
        # the spread; a third of what int8 activations add)
        error = np.std(int8 - fp32)
        assert error < 0.15 * np.std(fp32)
        assert error < 0.5 * np.std(OnnxCrossEncoder(exported["dynamic"][0]).predict(PAIRS) - fp32)
        assert list(np.argsort(-fp32)[:3]) == list(np.argsort(-int8)[:3])

    def test_dynamic_int8_file_ranks_mostly_like_fp32(self, exported):
        fp32 = OnnxCrossEncoder(exported["fp32"][0]).predict(PAIRS)
        dynamic = OnnxCrossEncoder(exported["dynamic"][0]).predict(PAIRS)
        assert exported["dynamic"][0].stat().st_size < 0.5 * exported["fp32"][0].stat().st_size
        # int8 activations on a tiny model with wide random weights: noisier, mostly the same order
        from scipy.stats import spearmanr

        assert spearmanr(fp32, dynamic).statistic > 0.85
        assert len(set(np.argsort(-fp32)[:3]) & set(np.argsort(-dynamic)[:3])) >= 2

    def test_a_bad_quantize_mode_is_refused(self, tiny_cross_encoder, tmp_path):
        with pytest.raises(ValueError, match="quantize must be"):
            export_cross_encoder(str(tiny_cross_encoder), tmp_path / "x.onnx", quantize="int4")  # type: ignore[arg-type]

    def test_the_file_carries_its_format_tokenizer_and_summary(self, exported):
        import onnx

        path, digest = exported["int8"]
        assert digest == file_sha256(path)
        model = onnx.load(str(path))
        meta = {p.key: p.value for p in model.metadata_props}
        assert meta["switchyard.format"] == FORMAT
        assert meta["switchyard.max_length"] == str(MAX_LENGTH)
        assert meta["switchyard.base_model"] == "tiny-bert (test)"
        assert json.loads(meta["switchyard.training"]) == {
            "data": "none (random weights)",
            "steps": 0,
            "seed": 0,
            "quantized": "weights",
        }
        assert json.loads(meta["switchyard.tokenizer"])["model"]["type"] == "WordPiece"
        assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask", "token_type_ids"]
        assert [o.name for o in model.graph.output] == ["logits"]
        assert OnnxCrossEncoder(path).metadata == meta

    def test_export_of_a_model_with_several_labels_is_refused(self, tmp_path):
        from sentence_transformers import CrossEncoder

        from switchyard.retrievers.embedder import resolve_model_dir

        model = CrossEncoder(str(resolve_model_dir("minilm")), num_labels=3, device="cpu")
        with pytest.raises(ValueError, match="1 label"):
            export_cross_encoder(model, tmp_path / "x.onnx")
        assert not (tmp_path / "x.onnx").exists()


class TestRuntime:
    def test_passage_is_truncated_not_the_query(self, exported):
        model = OnnxCrossEncoder(exported["fp32"][0])
        model.warm_up()
        long = TEXTS[-1]
        enc = model._loaded.get().pair.encode(QUERY, long)
        assert len(enc.ids) == MAX_LENGTH
        assert enc.ids[: len(model._loaded.get().pair.encode(QUERY).ids)] == model._loaded.get().pair.encode(QUERY).ids
        # the same pair with more text after the cut scores the same: only the first MAX_LENGTH tokens count
        assert model.predict([(QUERY, long)])[0] == pytest.approx(model.predict([(QUERY, long + " more")])[0], abs=1e-5)

    def test_a_query_longer_than_max_length_still_scores(self, exported):
        model = OnnxCrossEncoder(exported["fp32"][0])
        scores = model.predict([(" ".join(["coupler"] * 200), "A short passage."), (QUERY, TEXTS[0])])
        assert np.isfinite(scores).all() and scores.shape == (2,)

    def test_batches_and_order_do_not_change_scores(self, exported):
        path = exported["fp32"][0]
        one = OnnxCrossEncoder(path, batch_size=1).predict(PAIRS)
        many = OnnxCrossEncoder(path, batch_size=32).predict(PAIRS)
        reversed_ = OnnxCrossEncoder(path, batch_size=4).predict(PAIRS[::-1])[::-1]
        np.testing.assert_allclose(one, many, atol=1e-5)
        np.testing.assert_allclose(one, reversed_, atol=1e-5)
        assert OnnxCrossEncoder(path).predict([]).shape == (0,)

    def test_eight_threads_on_one_barrier_score_as_sequential(self, exported):
        model = OnnxCrossEncoder(exported["int8"][0], batch_size=2, threads=1)
        work = [[PAIRS[(i + j) % len(PAIRS)] for j in range(3 + i)] for i in range(8)]  # different pairs each
        sequential = [model.predict(pairs) for pairs in work]
        fresh = OnnxCrossEncoder(exported["int8"][0], batch_size=2, threads=1)  # loads under the race too
        results = on_one_barrier(fresh.predict, work)
        for got, want in zip(results, sequential):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)

    def test_bad_arguments_are_refused_before_loading(self, tmp_path):
        with pytest.raises(ValueError, match="batch_size"):
            OnnxCrossEncoder(tmp_path / "x.onnx", batch_size=0)
        with pytest.raises(ValueError, match="threads"):
            OnnxCrossEncoder(tmp_path / "x.onnx", threads=0)
        with pytest.raises(ValueError, match="64 hex digits"):
            OnnxCrossEncoder(tmp_path / "x.onnx", sha256="abc")


class TestClearErrors:
    def test_checksum_mismatch_names_the_file_and_both_digests(self, exported):
        path, digest = exported["int8"]
        wrong = "0" * 64
        model = OnnxCrossEncoder(path, sha256=wrong)
        for _ in range(2):  # a failed load stays failed, with the same message
            with pytest.raises(RerankerError) as err:
                model.predict(PAIRS[:1])
            message = str(err.value)
            assert str(path) in message and digest in message and wrong in message and "\n" not in message
        assert OnnxCrossEncoder(path, sha256=digest.upper()).predict(PAIRS[:1]).shape == (1,)

    def test_checksum_mismatch_through_the_reranker(self, exported):
        path, digest = exported["int8"]
        reranker = CrossEncoderReranker(str(path), sha256="f" * 64)
        with pytest.raises(RerankerError, match=f"has sha256 {digest}, expected f{{64}}"):
            reranker.warm_up()

    def test_missing_file(self, tmp_path):
        reranker = CrossEncoderReranker(str(tmp_path / "gone.onnx"))
        with pytest.raises(RerankerError, match=r"cross-encoder file .*gone\.onnx does not exist"):
            reranker.run("q", _passages(["a"]))

    def test_a_file_that_is_not_onnx(self, tmp_path):
        junk = tmp_path / "junk.onnx"
        junk.write_bytes(b"not a model at all" * 100)
        with pytest.raises(RerankerError, match="is not a Switchyard cross-encoder file.*ONNX Runtime cannot load"):
            OnnxCrossEncoder(junk).warm_up()

    def test_an_onnx_model_of_another_format(self, exported, tmp_path):
        import onnx

        model = onnx.load(str(exported["fp32"][0]))
        del model.metadata_props[:]
        plain = tmp_path / "plain.onnx"
        onnx.save(model, str(plain))
        with pytest.raises(RerankerError, match="is not a Switchyard cross-encoder file"):
            OnnxCrossEncoder(plain).warm_up()
        model.metadata_props.add(key="switchyard.format", value="cross-encoder-onnx/99")
        onnx.save(model, str(plain))
        with pytest.raises(RerankerError, match="'cross-encoder-onnx/99'"):
            OnnxCrossEncoder(plain).warm_up()

    def test_unset_model_when_the_shipped_file_is_missing(self, monkeypatch, tmp_path):
        # an installation without the file (a trimmed copy): one clear error, whatever the config says
        monkeypatch.setattr(rerankers, "SHIPPED_CROSS_ENCODER", tmp_path / "cross-encoder.onnx")
        for model in (None, ""):
            with pytest.raises(RerankerError, match="shipped with Switchyard, which is not in this installation"):
                CrossEncoderReranker(model)

    def test_unset_model_through_the_config_when_missing(self, make_stack, monkeypatch, tmp_path):
        monkeypatch.setattr(rerankers, "SHIPPED_CROSS_ENCODER", tmp_path / "cross-encoder.onnx")
        stack = make_stack("rerank.method=cross_encoder")
        with pytest.raises(RerankerError, match="set rerank.model to a cross-encoder .onnx file"):
            stack.reranker  # noqa: B018


class TestReranker:
    def test_reranks_by_the_file_scores(self, exported, torch_scores):
        path, digest = exported["fp32"]
        reranker = CrossEncoderReranker(str(path), top_k=4, sha256=digest)
        out = reranker.run(QUERY, _passages(TEXTS))
        expected = np.argsort(-torch_scores[: len(TEXTS)], kind="stable")[:4]
        assert [p.chunk_id for p in out] == [f"c{i}" for i in expected]
        assert [p.ranks["cross_encoder"] for p in out] == [1, 2, 3, 4]
        assert [p.score for p in out] == pytest.approx([float(torch_scores[i]) for i in expected], abs=1e-4)

    def test_fused_weight_blends_the_min_max_normalised_scores(self, exported, torch_scores):
        path, _ = exported["fp32"]
        passages = _passages(TEXTS)  # fused scores 1, 1/2, 1/3, ...: the fused order is c0, c1, c2, ...
        logits = torch_scores[: len(TEXTS)].astype(np.float64)
        fused = np.array([p.score for p in passages])
        for weight in (0.3, 0.7):
            out = CrossEncoderReranker(str(path), top_k=len(TEXTS), fused_weight=weight).run(QUERY, _passages(TEXTS))
            norm = lambda x: (x - x.min()) / (x.max() - x.min())  # noqa: E731
            expected = (1 - weight) * norm(logits) + weight * norm(fused)
            assert [p.chunk_id for p in out] == [f"c{i}" for i in np.argsort(-expected, kind="stable")]
            assert [p.score for p in out] == pytest.approx(sorted(expected, reverse=True), abs=1e-4)
            by_id = {p.chunk_id: p for p in out}
            assert [by_id[f"c{i}"].scores["cross_encoder_logit"] for i in range(len(TEXTS))] == pytest.approx(
                logits, abs=1e-4
            )
        only_fused = CrossEncoderReranker(str(path), top_k=len(TEXTS), fused_weight=1.0).run(QUERY, _passages(TEXTS))
        assert [p.chunk_id for p in only_fused] == [f"c{i}" for i in range(len(TEXTS))]
        with pytest.raises(ValueError, match="fused_weight"):
            CrossEncoderReranker(str(path), fused_weight=1.5)

    def test_the_config_key_reaches_the_reranker(self, exported, make_stack):
        path, _ = exported["fp32"]
        stack = make_stack("rerank.method=cross_encoder", f"rerank.model={path}", "rerank.fused_weight=0.25")
        assert stack.reranker.fused_weight == 0.25

    def test_the_title_is_scored_with_the_text(self, exported):
        # what BM25 and the embedder see (search_text): the title, then the text
        path, _ = exported["fp32"]
        out = CrossEncoderReranker(str(path), top_k=1).run(QUERY, _passages(TEXTS[1:2], title="Railway couplers"))
        with_title = OnnxCrossEncoder(path).predict([(QUERY, "Railway couplers\n" + TEXTS[1]), (QUERY, TEXTS[1])])
        assert out[0].score == pytest.approx(float(with_title[0]), abs=1e-5)
        assert abs(with_title[0] - with_title[1]) > 1e-3

    def test_sentence_transformers_folder_scores_the_same_logits(self, tiny_cross_encoder, exported):
        by_folder = CrossEncoderReranker(str(tiny_cross_encoder), top_k=len(TEXTS)).run(QUERY, _passages(TEXTS))
        by_file = CrossEncoderReranker(str(exported["fp32"][0]), top_k=len(TEXTS)).run(QUERY, _passages(TEXTS))
        assert [p.chunk_id for p in by_folder] == [p.chunk_id for p in by_file]
        assert [p.score for p in by_folder] == pytest.approx([p.score for p in by_file], abs=1e-4)

    def test_the_shipped_model_is_used_once_its_file_and_digest_are_set(self, exported, monkeypatch):
        # what shipping it takes: the file at SHIPPED_CROSS_ENCODER and its digest in SHIPPED_CROSS_ENCODER_SHA256
        path, digest = exported["int8"]
        monkeypatch.setattr(rerankers, "SHIPPED_CROSS_ENCODER", path)
        monkeypatch.setattr(rerankers, "SHIPPED_CROSS_ENCODER_SHA256", digest)
        out = CrossEncoderReranker(None, top_k=2).run(QUERY, _passages(TEXTS))
        assert len(out) == 2 and all("cross_encoder" in p.scores for p in out)
        monkeypatch.setattr(rerankers, "SHIPPED_CROSS_ENCODER_SHA256", "0" * 64)
        with pytest.raises(RerankerError, match="expected 0{64}"):
            CrossEncoderReranker(None).warm_up()


needs_shipped = pytest.mark.skipif(
    rerankers.SHIPPED_CROSS_ENCODER_SHA256 is None, reason="no cross-encoder is shipped in this checkout yet"
)


@needs_shipped
class TestShippedModel:
    """The committed cross-encoder (bench/train_reranker.py; docs/reranker-data-card.md) as a user gets it."""

    def test_it_is_one_checked_file_of_at_most_25_mb(self):
        path = rerankers.SHIPPED_CROSS_ENCODER
        assert path.is_file() and path.stat().st_size <= 25_000_000
        assert file_sha256(path) == rerankers.SHIPPED_CROSS_ENCODER_SHA256

    def test_unset_model_loads_it_and_ranks_the_answer_first(self):
        reranker = CrossEncoderReranker(None, top_k=len(TEXTS))
        reranker.warm_up()
        assert reranker.model_name == str(rerankers.SHIPPED_CROSS_ENCODER)
        ranked = reranker.run(QUERY, _passages(TEXTS))
        order = [p.chunk_id for p in ranked]
        assert order[0] == "c0", order  # the Janney coupler: the answer
        assert set(order[:3]) == {"c0", "c3", "c5"}, order  # the passages about couplers before gauge, signals, bananas

    def test_a_changed_file_is_refused(self, monkeypatch, tmp_path):
        copy = tmp_path / "cross-encoder.onnx"
        data = bytearray(rerankers.SHIPPED_CROSS_ENCODER.read_bytes())
        data[-1] ^= 1
        copy.write_bytes(bytes(data))
        monkeypatch.setattr(rerankers, "SHIPPED_CROSS_ENCODER", copy)
        with pytest.raises(RerankerError, match=f"expected {rerankers.SHIPPED_CROSS_ENCODER_SHA256}"):
            CrossEncoderReranker(None).warm_up()

    def test_eight_threads_on_one_barrier_score_as_sequential(self):
        reranker = CrossEncoderReranker(None, top_k=len(TEXTS), threads=1)
        work = [TEXTS[i % len(TEXTS) :] + TEXTS[: i % len(TEXTS)] for i in range(8)]  # other orders each
        sequential = [[(p.chunk_id, p.score) for p in reranker.run(QUERY, _passages(texts))] for texts in work]
        fresh = CrossEncoderReranker(None, top_k=len(TEXTS), threads=1)  # loads under the race too
        results = on_one_barrier(
            lambda texts: [(p.chunk_id, p.score) for p in fresh.run(QUERY, _passages(texts))], work
        )
        assert results == sequential


@pytest.mark.slow
def test_cli_search_reranks_with_the_file_without_importing_torch(exported, sample_index):
    path, _ = exported["int8"]
    script = (
        "import sys\n"
        "from switchyard.cli import main\n"
        "code = main()\n"
        "print('TORCH_IMPORTED' if 'torch' in sys.modules else 'NO_TORCH', file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    args = ["search", "railway coupler", "--index-dir", str(sample_index), "--json", "--k", "3"]
    sets = ["--set", "rerank.method=cross_encoder", "--set", f"rerank.model={path}"]
    out = subprocess.run(
        [sys.executable, "-c", script, *args, *sets], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines()[-1] == "NO_TORCH"
    data = json.loads(out.stdout)
    hits = data["results"]
    assert data["config"]["rerank"]["model"] == str(path)
    assert len(hits) == 3
    assert all("cross_encoder" in h["scores"] for h in hits)
    scores = [h["scores"]["cross_encoder"] for h in hits]
    assert scores == sorted(scores, reverse=True)
