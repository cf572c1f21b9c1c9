import pytest

from switchyard.errors import FilterError
from switchyard.retrievers.filters import parse_filter, to_predicate, to_sql


class TestFilters:
    def test_parse_and_compile(self):
        clauses = parse_filter("source~Manual and page=3 and doc_id!='x'")
        assert to_sql(clauses) == (
            "lower(source) LIKE '%manual%' ESCAPE '\\' AND page = 3 AND (doc_id IS NULL OR doc_id != 'x')"
        )
        keep = to_predicate(clauses)
        assert keep({"source": "/a/MANUAL.pdf", "page": 3, "doc_id": "y"})
        assert not keep({"source": "/a/MANUAL.pdf", "page": 4, "doc_id": "y"})
        assert not keep({"source": "/a/MANUAL.pdf", "page": 3, "doc_id": "x"})

    def test_quotes_are_escaped(self):
        assert to_sql(parse_filter("title=O'Brien")) == "title = 'O''Brien'"
        assert to_sql(parse_filter("title~50%")) == "lower(title) LIKE '%50\\%%' ESCAPE '\\'"

    def test_empty_filter(self):
        assert parse_filter("") == [] and parse_filter(None) == []
        assert to_sql([]) is None

    @pytest.mark.parametrize(
        "text, message",
        [
            ("colour=red", "unknown filter field"),
            ("page=three", "whole number"),
            ("page~3", "numeric"),
            ("just words", "bad filter clause"),
        ],
    )
    def test_bad_filters_are_clear_errors(self, text, message):
        with pytest.raises(FilterError, match=message):
            parse_filter(text)
