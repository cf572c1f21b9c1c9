"""Vector fields named in config (retrieve.retrievers): a second dense model is configuration, not code. The e5 field
is `retrieve.retrievers.e5`; any other is `retrieve.retrievers.vector_fields.<name>`, stored in the column
`<name>_vector`, searched by its own dense retriever and fused by name."""

from __future__ import annotations

import json

import lancedb
import numpy as np
import pyarrow as pa
import pytest

from switchyard.configs.loader import config_hash, config_to_dict, load_config
from switchyard.errors import ConfigError, StoreError
from switchyard.retrievers.documents import search_text
from switchyard.retrievers.stack import RetrievalStack, corpus_collection_for
from switchyard.retrievers.store import ROW_COLUMNS, IndexStore, VectorSearch
from switchyard.retrievers.store.schema import CHUNK_FIELDS, META_KEY
from switchyard.run_context import ALL
from tests.conftest import SAMPLES
from tests.retrievers.helpers import make_chunk, unit

MINI = """
retrieve:
  retrievers:
    vector_fields:
      mini:
        enabled: true
        model: minilm
        query_prefix: "question: "
        passage_prefix: "document: "
        top_k: 50
  fusion:
    weights: {bm25: 0.4, dense: 0.3, mini: 0.3}
"""


@pytest.fixture
def mini_config(tmp_path):
    path = tmp_path / "mini.yaml"
    path.write_text(MINI)
    return path


class TestConfig:
    def test_a_field_is_configuration_and_its_dump_round_trips(self, mini_config):
        cfg = load_config(mini_config)
        field = cfg.retrieve.retrievers.vector_fields["mini"]
        assert field.enabled and field.model == "minilm" and field.query_prefix == "question: "
        assert list(cfg.retrieve.retrievers.fields()) == ["e5", "mini"]
        dumped = config_to_dict(cfg)
        assert dumped["retrieve"]["retrievers"]["vector_fields"]["mini"]["passage_prefix"] == "document: "
        assert config_hash(load_config(None, [f"retrieve={json.dumps(dumped['retrieve'])}"])) == config_hash(cfg)

    def test_new_settings_at_their_default_stay_out_of_the_dump(self):
        retrievers = config_to_dict(load_config(None))["retrieve"]["retrievers"]
        assert "vector_fields" not in retrievers and retrievers["e5"] == {"enabled": True, "top_k": 100}
        assert "e5" not in config_to_dict(load_config("bm25-only"))["retrieve"]["retrievers"]  # e5 off, as added
        e5 = config_to_dict(load_config("e5"))["retrieve"]["retrievers"]["e5"]
        assert e5 == {"enabled": True, "top_k": 100}  # model, prefixes and batch size at e5's defaults: not dumped
        changed = load_config("e5", ["retrieve.retrievers.e5.batch_size=8"])
        assert config_to_dict(changed)["retrieve"]["retrievers"]["e5"]["batch_size"] == 8
        assert config_hash(changed) != config_hash(load_config("e5"))

    def test_checks(self, mini_config):
        with pytest.raises(ConfigError, match="give its list a fusion weight, retrieve.fusion.weights.mini"):
            load_config(mini_config, ["retrieve.fusion.weights.mini=0"])
        with pytest.raises(ConfigError, match="vector_fields.mini is off but retrieve.fusion.weights.mini is"):
            load_config(mini_config, ["retrieve.retrievers.vector_fields.mini.enabled=false"])
        with pytest.raises(ConfigError, match="unknown retriever.*other"):
            load_config(mini_config, ["retrieve.fusion.weights.other=0.2"])
        with pytest.raises(ConfigError, match="model"):
            load_config(None, ["retrieve.retrievers.vector_fields.x.enabled=false"])
        for name in ("e5", "dense", "Big", "a-b"):
            with pytest.raises(ConfigError, match="vector field name"):
                load_config(None, [f"retrieve.retrievers.vector_fields.{name}.model=minilm"])

    def test_the_field_and_its_model_key_the_cached_benchmark_collection(self, mini_config, tmp_path):
        corpus = tmp_path / "c.jsonl"
        corpus.write_text('{"_id": "1", "text": "x"}\n')
        plain, e5, mini = (corpus_collection_for(load_config(c), [corpus]) for c in (None, "e5", mini_config))
        assert len({plain, e5, mini}) == 3
        other = load_config(mini_config, ["retrieve.retrievers.vector_fields.mini.model=e5-small"])
        assert corpus_collection_for(other, [corpus]) != mini


class TestStore:
    def test_fields_are_columns_with_their_dimension(self, tmp_path):
        store = IndexStore(str(tmp_path / "ix"), "c", dim=3, vector_fields={"e5": 2, "mini": 4})
        chunks = [make_chunk("a::0", "alpha"), make_chunk("b::0", "beta")]
        store.write_documents(
            ["a", "b"],
            chunks,
            np.stack([unit(1, 0, 0), unit(0, 1, 0)]),
            field_vectors={
                "e5": np.stack([unit(0, 1), unit(1, 0)]),
                "mini": np.stack([unit(0, 0, 0, 1), unit(0, 0, 1, 0)]),
            },
        )
        assert store.vector_fields == {"e5": 2, "mini": 4}
        assert {"e5_vector", "mini_vector"} <= set(store.table().schema.names)
        assert store.metadata()["mini_dim"] == 4
        assert [p.chunk_id for p in VectorSearch(store, field="mini").run(unit(0, 0, 1, 0), 2)] == ["b::0", "a::0"]
        with pytest.raises(ValueError, match="holds mini vectors: give one per chunk"):
            store.write_documents(
                ["c"], [make_chunk("c::0")], np.stack([unit(1, 0, 0)]), field_vectors={"e5": np.stack([unit(1, 0)])}
            )
        with pytest.raises(StoreError, match="holds no other vectors"):
            VectorSearch(store, field="other").run(unit(1, 0), 1)

    def test_an_e5_collection_of_the_earlier_layout_opens_unchanged(self, tmp_path):
        """A collection as the store wrote it before vector fields were configuration: an `e5_vector` column and
        `e5_dim` in the metadata. It is read as holding the e5 field and searched and extended as before."""
        meta = {"embedding_model": "minilm", "embedding_backend": "torch", "dim": 3, "e5_dim": 2}
        fields = CHUNK_FIELDS + [
            pa.field("acl", pa.string()),
            pa.field("search_text", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), 3)),
            pa.field("e5_vector", pa.list_(pa.float32(), 2)),
        ]
        schema = pa.schema(fields, metadata={META_KEY: json.dumps(meta).encode()})
        row = {
            **{c: None for c in ROW_COLUMNS},
            "chunk_id": "a::0",
            "doc_id": "a",
            "text": "alpha",
            "acl": None,
            "search_text": "alpha",
            "vector": [1.0, 0.0, 0.0],
            "e5_vector": [0.0, 1.0],
        }
        lancedb.connect(str(tmp_path / "ix")).create_table("old", pa.Table.from_pylist([row], schema=schema))
        store = IndexStore(str(tmp_path / "ix"), "old", dim=3)  # the config does not ask for e5
        assert store.vector_fields == {"e5": 2}
        assert VectorSearch(store, field="e5").run(unit(0, 1), 1)[0].chunk_id == "a::0"
        store.write_documents(
            ["b"], [make_chunk("b::0", "beta")], np.stack([unit(0, 1, 0)]), field_vectors={"e5": np.stack([unit(1, 0)])}
        )
        assert [p.chunk_id for p in VectorSearch(store, field="e5").run(unit(1, 0), 2)] == ["b::0", "a::0"]
        assert store.table().schema == schema


@pytest.mark.slow
class TestEndToEnd:
    def test_ingest_and_search_with_a_second_configured_field(self, mini_config, tmp_path, embedder):
        cfg = load_config(mini_config, [f"store.uri={tmp_path / 'index'}"])
        stack = RetrievalStack(cfg, embedder=embedder)
        report = stack.ingestor(progress=False).run([SAMPLES])
        assert report.added > 0 and not report.errors
        assert stack.store.vector_fields == {"mini": 384} and "mini_vector" in stack.store.table().schema.names
        # each chunk's field vector is the field's model on its passage prefix + the chunk's search text
        rows = stack.store.scan(["title", "text", "vector", "mini_vector"], scope=ALL).to_pylist()
        field_model = stack.field_embedder("mini")
        expected = field_model.run(["document: " + search_text(r["title"], r["text"]) for r in rows])
        assert np.allclose(np.asarray([r["mini_vector"] for r in rows], dtype=np.float32), expected, atol=1e-3)
        assert not np.allclose(np.asarray([r["vector"] for r in rows], dtype=np.float32), expected, atol=1e-3)
        # the field's list is fused with BM25 and MiniLM by name, with its own query prefix
        top = stack.search("Who patented the knuckle coupler?", top_k=3, rerank=False, groups=ALL).passages
        assert top[0].title == "Railway couplers" and {"bm25", "dense", "mini"} <= set(top[0].scores)
        alone = stack.field_retriever("mini").run("Who patented the knuckle coupler?")
        query = field_model.embed_query("question: Who patented the knuckle coupler?")
        assert alone[0].score == pytest.approx(float(np.max(expected @ query)), abs=1e-3)
        # the collection keeps the field when a later config turns it off; one built without it refuses it
        (tmp_path / "extra.md").write_text("# Turntables\n\nA turntable turns a locomotive around.\n")
        off = RetrievalStack(
            load_config(
                mini_config,
                [
                    f"store.uri={tmp_path / 'index'}",
                    "retrieve.retrievers.vector_fields.mini.enabled=false",
                    "retrieve.fusion.weights.mini=0",
                ],
            ),
            embedder=embedder,
        )
        assert off.ingestor(progress=False).run([tmp_path / "extra.md"]).added == 1
        assert all(r["mini_vector"] is not None for r in off.store.scan(["mini_vector"], scope=ALL).to_pylist())
        plain = RetrievalStack(load_config(None, [f"store.uri={tmp_path / 'plain'}"]), embedder=embedder)
        plain.ingestor(progress=False).run([SAMPLES / "couplers.html"])
        with pytest.raises(StoreError, match="holds no mini vectors"):
            RetrievalStack(load_config(mini_config, [f"store.uri={tmp_path / 'plain'}"]), embedder=embedder).search(
                "coupler", groups=ALL
            )
