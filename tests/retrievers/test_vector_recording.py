"""Recorded embedding vectors (retrievers/vector_recording.py) and the Embedder that records and replays them."""

import numpy as np
import pytest

from switchyard.configs.loader import load_config
from switchyard.errors import EmbedderError, VectorCacheMiss
from switchyard.retrievers.embedder import Embedder, TextEmbedder
from switchyard.retrievers.stack import corpus_collection_for
from switchyard.retrievers.vector_recording import (
    BASES,
    RecordingEmbedder,
    VectorRecording,
    build_embedder,
    vector_key,
    write_packed_vectors,
)
from tests.together import on_one_barrier

TORCH_F32 = {"backend": "torch", "precision": "f32"}


def vectors(n: int, dim: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def recorded_files(root) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in [*root.glob("*.npz"), *root.glob("*.vlog")]}


class TestVectorRecording:
    def test_recorded_vectors_come_back_bit_for_bit_from_a_new_reader(self, tmp_path):
        texts, values = ["a", "b", "c"], vectors(3)
        recording = VectorRecording(tmp_path, "minilm")
        recording.add(texts, values, TORCH_F32)
        recording.flush()
        reader = VectorRecording(tmp_path, "minilm", replay=True)
        found = reader.lookup(["c", "a"])
        assert np.array_equal(np.stack(found), values[[2, 0]])
        assert reader.runtime() == {"backend": "torch", "precision": "f32", "dim": 4}
        assert (recording.recorded, reader.replayed) == (3, 2)

    def test_vectors_are_keyed_by_model_and_text(self, tmp_path):
        recording = VectorRecording(tmp_path, "minilm")
        recording.add(["a"], vectors(1), TORCH_F32)
        recording.flush()
        assert VectorRecording(tmp_path, "minilm").lookup(["a", "A"])[1] is None
        assert VectorRecording(tmp_path, "e5").lookup(["a"]) == [None]

    def test_pending_vectors_are_appended_to_the_recordings_log_and_nothing_written_changes(self, tmp_path):
        recording = VectorRecording(tmp_path, "minilm", flush_every=2)
        recording.add(["a"], vectors(1), TORCH_F32)
        assert recorded_files(tmp_path) == {}  # below flush_every: pending in memory
        recording.add(["b"], vectors(1, seed=1), TORCH_F32)
        [(name, first)] = recorded_files(tmp_path).items()
        assert name.startswith("minilm-") and name.endswith(".vlog")
        recording.add(["c", "a"], vectors(2, seed=2), TORCH_F32)  # "a" is recorded already: not again
        recording.flush()
        after = recorded_files(tmp_path)
        assert list(after) == [name] and after[name].startswith(first) and len(after[name]) > len(first)
        assert recording.recorded == 3
        assert np.array_equal(VectorRecording(tmp_path, "minilm").lookup(["a"])[0], vectors(1)[0])
        # another recording of the folder (another process) writes a log of its own
        other = VectorRecording(tmp_path, "minilm")
        other.add(["d"], vectors(1, seed=3), TORCH_F32)
        other.flush()
        assert len(recorded_files(tmp_path)) == 2 and recorded_files(tmp_path)[name] == after[name]

    def test_a_log_torn_by_a_death_mid_write_keeps_its_whole_records(self, tmp_path):
        values = vectors(3)
        record(tmp_path, ["a", "b", "c"], values)
        [log] = tmp_path.glob("*.vlog")
        log.write_bytes(log.read_bytes()[:-5])  # the last record cut short
        found = VectorRecording(tmp_path, "minilm").lookup(["a", "b", "c"])
        assert np.array_equal(np.stack(found[:2]), values[:2]) and found[2] is None
        log.write_bytes(b'{"backend": "torch", "di')  # the first write cut inside the header: nothing recorded
        assert VectorRecording(tmp_path, "minilm").lookup(["a"]) == [None]
        again = VectorRecording(tmp_path, "minilm")  # and the folder is recorded into again
        again.add(["a"], values[:1], TORCH_F32)
        again.flush()
        assert np.array_equal(VectorRecording(tmp_path, "minilm", replay=True).lookup(["a"])[0], values[0])

    def test_segments_of_runs_recorded_before_the_log_still_load(self, tmp_path):
        values = vectors(2)
        write_packed_vectors(tmp_path / "minilm-20260101T000000-0.npz", {"model": "minilm", **TORCH_F32, "dim": 4},
                             {vector_key("minilm", t): v for t, v in zip("ab", values)})  # fmt: skip
        record(tmp_path, ["c"], vectors(1, seed=1))
        found = VectorRecording(tmp_path, "minilm", replay=True).lookup(["a", "b", "c"])
        assert np.array_equal(np.stack(found[:2]), values)

    def test_a_replay_miss_names_the_folder_and_the_text(self, tmp_path):
        recording = VectorRecording(tmp_path, "minilm")
        recording.add(["a"], vectors(1), TORCH_F32)
        recording.flush()
        with pytest.raises(VectorCacheMiss) as err:
            VectorRecording(tmp_path, "minilm", replay=True).lookup(["a", "who wrote the knuckle coupler patent"])
        assert str(err.value).startswith(f"1 of 2 text(s) have no recorded minilm vector in {tmp_path} ")
        assert "'who wrote the knuckle coupler patent'" in str(err.value)
        with pytest.raises(EmbedderError, match="records nothing"):
            VectorRecording(tmp_path, "minilm", replay=True).add(["b"], vectors(1), TORCH_F32)

    def test_a_folder_holds_one_runtime_per_model(self, tmp_path):
        recording = VectorRecording(tmp_path, "minilm")
        recording.add(["a"], vectors(1), {"backend": "openvino", "precision": "bf16"})
        recording.flush()
        other = VectorRecording(tmp_path, "minilm")
        with pytest.raises(
            EmbedderError,
            match="computed by openvino in bf16 .*this machine computes them by openvino in f32 .*: replay them",
        ):
            other.add(["b"], vectors(1), {"backend": "openvino", "precision": "f32"})
        with pytest.raises(EmbedderError, match="this machine computes them by torch in f32"):
            other.check_runtime({"backend": "torch", "precision": "f32", "dim": 4})
        VectorRecording(tmp_path, "e5").add(["b"], vectors(1), TORCH_F32)  # another model: its own runtime

    def test_a_foreign_segment_is_refused_by_name(self, tmp_path):
        for runtime, seed in ((TORCH_F32, 0), ({"backend": "onnx", "precision": "f32"}, 1)):
            recording = VectorRecording(tmp_path / f"r{seed}", "minilm")
            recording.add([str(seed)], vectors(1, seed=seed), runtime)
            recording.flush()
        [moved] = (tmp_path / "r1").glob("*.vlog")
        moved.rename(tmp_path / "r0" / moved.name)
        with pytest.raises(EmbedderError, match="one recording holds one runtime; move that segment") as err:
            VectorRecording(tmp_path / "r0", "minilm").lookup(["0"])
        # segments load in name order: whichever comes second is named as the odd one
        assert "by torch in f32" in str(err.value) and "by onnx in f32" in str(err.value)
        assert any(p.name in str(err.value) for p in (tmp_path / "r0").glob("*.vlog"))

    @pytest.mark.parametrize("name", ["minilm-20260101T000000-0.npz", "minilm-20260101T000000-0.vlog"])
    def test_a_damaged_segment_is_a_clear_error(self, tmp_path, name):
        (tmp_path / name).write_bytes(b"not a segment\n")
        with pytest.raises(EmbedderError, match="is not a vector recording segment .*delete it"):
            VectorRecording(tmp_path, "minilm").lookup(["a"])

    def test_threads_and_writers_recording_at_once_keep_every_vector_once(self, tmp_path):
        texts = [f"text {i}" for i in range(200)]
        values = vectors(200)
        shared = VectorRecording(tmp_path, "minilm", flush_every=16)
        other_writer = VectorRecording(tmp_path, "minilm", flush_every=16)  # as another process would

        def record(worker: int):
            recording = shared if worker % 2 else other_writer
            for start in range(worker, 200, 10):  # overlapping slices: the same texts from several threads
                recording.add(texts[start : start + 10], values[start : start + 10], TORCH_F32)

        on_one_barrier(record, range(8))
        shared.flush()
        other_writer.flush()
        assert shared.recorded <= 200 and other_writer.recorded <= 200
        assert not list(tmp_path.glob(".*.tmp"))
        found = VectorRecording(tmp_path, "minilm", replay=True).lookup(texts)
        assert np.array_equal(np.stack(found), values)


def record(root, texts, values, runtime=TORCH_F32):
    recording = VectorRecording(root, "minilm")
    recording.add(texts, values, runtime)
    recording.flush()
    return recording


class TestBases:
    """A folder extends others named in its bases.txt: runs over one corpus share its vectors."""

    def test_a_folder_answers_from_its_bases_and_records_only_what_they_lack(self, tmp_path):
        corpus, values = [f"passage {i}" for i in range(4)], vectors(4)
        record(tmp_path / "corpus", corpus, values)
        run = tmp_path / "runs" / "one"
        run.mkdir(parents=True)
        (run / BASES).write_text("# the corpus, shared\n../../corpus\n")
        recording = VectorRecording(run, "minilm")
        assert np.array_equal(np.stack(recording.lookup(corpus[:2])), values[:2])
        recording.add([*corpus, "a question"], np.vstack([vectors(4, seed=9), vectors(1, seed=1)]), TORCH_F32)
        recording.flush()
        assert recording.recorded == 1  # the corpus's vectors are the base's, kept as recorded there
        replayed = VectorRecording(run, "minilm", replay=True)
        assert np.array_equal(
            np.stack(replayed.lookup([corpus[3], "a question"])), np.vstack([values[3], vectors(1, seed=1)[0]])
        )
        runtime, own = replayed.entries(bases=False)
        assert runtime == {"backend": "torch", "precision": "f32", "dim": 4} and len(own) == 1
        assert len(replayed.entries()[1]) == 5
        assert len(VectorRecording(tmp_path / "corpus", "minilm").entries()[1]) == 4  # the base is never written

    def test_bases_of_bases_load_and_a_circle_is_refused(self, tmp_path):
        record(tmp_path / "a", ["x"], vectors(1))
        record(tmp_path / "b", ["y"], vectors(1, seed=1))
        (tmp_path / "b" / BASES).write_text("../a\n")
        (tmp_path / "c").mkdir()
        (tmp_path / "c" / BASES).write_text("../b\n")
        assert all(v is not None for v in VectorRecording(tmp_path / "c", "minilm", replay=True).lookup(["x", "y"]))
        (tmp_path / "a" / BASES).write_text("../c\n")
        with pytest.raises(EmbedderError, match="leads back to .*in a circle"):
            VectorRecording(tmp_path / "c", "minilm").lookup(["x"])

    def test_a_missing_base_or_one_of_another_runtime_is_refused(self, tmp_path):
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / BASES).write_text("../gone\n")
        with pytest.raises(EmbedderError, match=r"bases.txt: ../gone: no such folder of recorded vectors"):
            VectorRecording(tmp_path / "run", "minilm").lookup(["x"])
        record(tmp_path / "gone", ["x"], vectors(1), {"backend": "onnx", "precision": "f32"})
        with pytest.raises(EmbedderError, match="this machine computes them by torch in f32"):
            VectorRecording(tmp_path / "run", "minilm").add(["y"], vectors(1), TORCH_F32)
        with pytest.raises(VectorCacheMiss, match=r"in .*run \(or its bases\)"):
            VectorRecording(tmp_path / "run", "minilm", replay=True).lookup(["y"])


@pytest.mark.slow  # a recording around the real model: computes what is not recorded
class TestEmbedderRecording:
    TEXTS = ["The knuckle coupler was patented by Eli Janney.", "Who patented the knuckle coupler?"]

    def test_a_replay_returns_the_recorded_vectors_without_loading_any_runtime(self, tmp_path, embedder):
        recording = build_embedder("minilm", backend="torch", vector_cache=str(tmp_path))
        recorded = recording.run(self.TEXTS)
        recording.recording.flush()
        assert np.allclose(recorded, embedder.run(self.TEXTS), atol=1e-5)
        replaying = build_embedder("minilm", backend="openvino", vector_cache=str(tmp_path), replay=True)
        assert np.array_equal(replaying.run(self.TEXTS[::-1]), recorded[::-1])
        assert np.array_equal(replaying.embed_query(self.TEXTS[1]), recorded[1])
        assert replaying.runtime == {"backend": "torch", "precision": "f32"}  # the vectors', not openvino's
        assert replaying.dim == 384
        assert not replaying._model.built
        with pytest.raises(VectorCacheMiss):
            replaying.run(["never recorded"])

    def test_recording_answers_known_texts_and_computes_the_rest(self, tmp_path):
        first = build_embedder("minilm", backend="torch", vector_cache=str(tmp_path))
        known = first.run(self.TEXTS[:1])
        first.recording.flush()
        second = build_embedder("minilm", backend="torch", vector_cache=str(tmp_path))
        both = second.run(self.TEXTS)
        assert np.array_equal(both[0], known[0])
        assert (second.recording.replayed, second.recording.recorded) == (1, 1)

    def test_recording_with_another_runtime_is_refused(self, tmp_path):
        first = build_embedder("minilm", backend="torch", vector_cache=str(tmp_path))
        first.run(self.TEXTS)
        first.recording.flush()
        onnx = build_embedder("minilm", backend="onnx", vector_cache=str(tmp_path))
        with pytest.raises(EmbedderError, match="computed by torch in f32 .*this machine computes them by onnx"):
            onnx.run(self.TEXTS)

    def test_replay_needs_a_folder(self):
        with pytest.raises(ValueError, match="replay needs vector_cache"):
            build_embedder("minilm", replay=True)


class TestCollectionsOfARecording:
    def test_an_index_built_from_a_recording_is_never_one_embedded_here(self, tmp_path):
        (tmp_path / "doc.txt").write_text("Eli Janney patented the knuckle coupler.")
        corpus = [tmp_path / "doc.txt"]
        plain = corpus_collection_for(load_config(), corpus)
        record = corpus_collection_for(load_config(None, [f"embedding.vector_cache={tmp_path}/v"]), corpus)
        replay = corpus_collection_for(
            load_config(None, [f"embedding.vector_cache={tmp_path}/v", "embedding.replay=true"]), corpus
        )
        other = corpus_collection_for(load_config(None, [f"embedding.vector_cache={tmp_path}/w"]), corpus)
        assert record == replay and len({plain, record, other}) == 3


@pytest.mark.slow  # builds the real embedder from config settings
class TestBuildEmbedder:
    def test_without_a_recording_it_is_the_embedder_itself(self):
        built = build_embedder("minilm", backend="torch")
        assert type(built) is Embedder and isinstance(built, TextEmbedder)

    def test_a_recording_wraps_the_embedder_and_a_replay_loads_nothing(self, tmp_path):
        recording = build_embedder("minilm", backend="torch", vector_cache=str(tmp_path))
        assert isinstance(recording, RecordingEmbedder) and isinstance(recording, TextEmbedder)
        assert type(recording.inner) is Embedder and not recording.replay
        vector = recording.embed_query("a text")
        recording.recording.flush()
        replaying = build_embedder("minilm", backend="onnx", vector_cache=str(tmp_path), replay=True)
        replaying.warm_up()  # nothing to load
        assert np.array_equal(replaying.embed_query("a text"), vector)
        assert not replaying.inner._model.built and replaying.tokenizer_file == recording.tokenizer_file

    def test_a_packed_recording_replays_bit_for_bit(self, tmp_path):
        recording = VectorRecording(tmp_path, "minilm")
        recording.add(["a", "b"], vectors(2), TORCH_F32)
        recording.flush()
        runtime, entries = VectorRecording(tmp_path, "minilm").entries()
        [segment] = tmp_path.glob("minilm-*.vlog")
        segment.unlink()
        write_packed_vectors(tmp_path / "minilm.npz", {"model": "minilm", **runtime}, entries)
        found = VectorRecording(tmp_path, "minilm", replay=True).lookup(["b", "a"])
        assert np.stack(found).tobytes() == vectors(2)[[1, 0]].tobytes()
        assert VectorRecording(tmp_path, "e5").lookup(["a"]) == [None]  # the file is minilm's alone
