"""Property tests (Hypothesis) for what users type: the filter language, `--set` overrides, document ids and upload
names. Whatever the input, a parse either succeeds or raises the documented one-line error, and what parses comes
back unchanged through its written form. Bounded: a fixed number of examples per property, no deadline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from switchyard.configs.loader import config_hash, config_to_dict, load_config
from switchyard.configs.schema import SwitchyardConfig
from switchyard.errors import ConfigError, FilterError
from switchyard.retrievers.filters import FIELDS, Clause, format_filter, parse_filter, to_predicate, to_sql
from switchyard.run_context import ALL
from switchyard.service.jobs import safe_name

BOUNDED = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# what people put in values: words, spaces, both quotes, SQL and LIKE specials, the word "and", a few non-ASCII letters
VALUE_CHARS = st.sampled_from(list("abcXYZ019 '\"%_\\-.,;=~!()") + ["and", " and ", "é", "ß", "Ω", "\n", "\t"])
VALUES = st.lists(VALUE_CHARS, max_size=12).map("".join)


def clauses():
    text = st.builds(Clause, st.sampled_from([f for f, t in FIELDS.items() if t is str]), st.sampled_from("=~"), VALUES)
    text_ne = st.builds(Clause, st.sampled_from([f for f, t in FIELDS.items() if t is str]), st.just("!="), VALUES)
    page = st.builds(Clause, st.just("page"), st.sampled_from(["=", "!="]), st.integers(-(10**6), 10**6))
    return st.lists(st.one_of(text, text_ne, page), min_size=1, max_size=4)


class TestFilterLanguage:
    @BOUNDED
    @given(st.text(max_size=80))
    @example('title="Pride and Prejudice" and page=3')
    @example("title='unclosed")
    def test_any_text_parses_or_is_a_filter_error(self, text):
        try:
            parsed = parse_filter(text)
        except FilterError as exc:
            assert "\n" not in str(exc).strip() or "\n" in text  # one line, unless it quotes the input
            return
        assert all(c.field in FIELDS and c.op in ("=", "!=", "~") for c in parsed)
        to_sql(parsed)

    @BOUNDED
    @given(clauses())
    def test_what_is_written_reads_back_the_same(self, written):
        both_quotes = any(isinstance(c.value, str) and '"' in c.value and "'" in c.value for c in written)
        if both_quotes:
            with pytest.raises(FilterError, match="both kinds of quote"):
                format_filter(written)
            return
        assert parse_filter(format_filter(written)) == written

    def test_a_quoted_value_may_hold_and(self):
        assert parse_filter('title="Pride and Prejudice" and page=3') == [
            Clause("title", "=", "Pride and Prejudice"),
            Clause("page", "=", 3),
        ]
        for bad, message in (("title='open", "unclosed quote"), ("title='a' b", "after the quoted value")):
            with pytest.raises(FilterError, match=message):
                parse_filter(bad)


@pytest.fixture(scope="module")
def store(tmp_path_factory, embedder):
    """A small real LanceDB collection whose ids, titles and texts hold quotes, LIKE specials and 'and'."""
    from switchyard.retrievers.stack import RetrievalStack

    root = tmp_path_factory.mktemp("properties")
    records = [
        {"_id": "plain", "title": "Plain", "text": "Standard gauge is 1435 mm."},
        {"_id": "O'Brien", "title": "O'Brien's 50% note", "text": "A note_with underscores and quotes."},
        {"_id": 'say "hi"', "title": "Pride and Prejudice", "text": "Backslash \\ and percent % here."},
        {"_id": "x' OR '1'='1", "title": "Injection", "text": "An id that looks like SQL."},
        {"_id": "Ωmega é", "title": "Ωmega", "text": "Non-ASCII text, ß and é."},
    ]
    corpus = root / "docs.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    stack = RetrievalStack(load_config(None, [f"store.uri={root / 'index'}"]), embedder=embedder)
    assert stack.ingestor(progress=False).run([corpus]).added == len(records)
    return stack.store


class TestDocumentIds:
    ROW_COLUMNS = ["doc_id", "source", "title", "page", "chunk_id"]

    @BOUNDED
    @given(st.one_of(VALUES, st.sampled_from(["plain", "O'Brien", 'say "hi"', "x' OR '1'='1", "Ωmega é"])))
    def test_any_id_reads_its_own_chunks_or_none(self, store, doc_id):
        ids = {row["doc_id"] for row in store.scan(["doc_id"], scope=ALL).to_pylist()}
        chunks = store.document_chunks(doc_id, ALL)
        assert {c.doc_id for c in chunks} == ({doc_id} if doc_id in ids else set())
        if doc_id not in ids:
            before = store.count(ALL)
            assert store.delete_documents([doc_id], ALL) == 0 and store.count(ALL) == before

    @BOUNDED
    @given(clauses())
    def test_sql_and_the_python_predicate_admit_the_same_rows(self, store, where):
        rows = store.scan(self.ROW_COLUMNS, scope=ALL).to_pylist()
        by_sql = {r["chunk_id"] for r in store.scan(self.ROW_COLUMNS, where=to_sql(where), scope=ALL).to_pylist()}
        by_python = {r["chunk_id"] for r in rows if to_predicate(where)(r)}
        assert by_sql == by_python


class TestOverrides:
    @BOUNDED
    @given(st.text(max_size=60))
    @example("retrieve.top_k=[[[[[[")
    @example("llm.backend=openai")
    @example("a..b=1")
    def test_any_override_loads_or_is_a_config_error(self, text):
        try:
            config = load_config(None, [text])
        except ConfigError as exc:
            assert str(exc).strip()
            return
        assert SwitchyardConfig.model_validate(config_to_dict(config)) == config

    @staticmethod
    def scalar_keys() -> list[tuple[str, type]]:
        out = []

        def walk(node, prefix):
            for key, value in node.items():
                if isinstance(value, dict):
                    walk(value, f"{prefix}{key}.")
                elif isinstance(value, bool | int | float | str):
                    out.append((f"{prefix}{key}", type(value)))

        walk(config_to_dict(load_config()), "")
        return out

    @BOUNDED
    @given(st.data())
    def test_what_loads_reads_back_the_same_from_its_written_form(self, tmp_path_factory, data):
        key, kind = data.draw(st.sampled_from(self.scalar_keys()))
        values = {
            bool: st.booleans(),
            int: st.integers(-5, 10**6),
            float: st.floats(-2, 1e4, allow_nan=False),
            str: VALUES,
        }[kind]
        value = data.draw(values)
        override = f"{key}={yaml.safe_dump(value, default_flow_style=True).removesuffix(chr(10) + '...' + chr(10))}"
        override = override.rstrip("\n")
        try:
            config = load_config(None, [override])
        except ConfigError:
            return  # out of range or not allowed for this key: a one-line error, checked above
        resolved = config_to_dict(config)
        node = config  # read from the config: a dump leaves a key out at the default it was added with
        for part in key.split("."):
            node = node[part] if isinstance(node, dict) else getattr(node, part)
        assert node == value or (kind is float and node == pytest.approx(value))
        written = tmp_path_factory.mktemp("cfg") / "config.yaml"
        written.write_text(yaml.safe_dump(resolved), encoding="utf-8")
        again = load_config(written)
        assert again == config and config_hash(again) == config_hash(config)


class TestUploadNames:
    @BOUNDED
    @given(st.one_of(st.none(), st.text(max_size=200)))
    @example("../../etc/passwd")
    @example("..\\..\\windows\\system32")
    @example(".hidden")
    def test_an_upload_name_stays_in_its_folder(self, name):
        stored = safe_name(name)
        assert stored and len(stored) <= 120 and "/" not in stored and "\\" not in stored
        assert not stored.startswith(".") and stored == safe_name(stored)
        home = Path("/srv/uploads/acme")
        assert (home / stored).resolve().parent == home
