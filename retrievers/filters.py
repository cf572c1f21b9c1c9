"""Metadata filters for search: a tiny, safe language compiled both to LanceDB SQL and to a Python predicate.

    FILTER  := CLAUSE ( ' and ' CLAUSE )*
    CLAUSE  := FIELD '=' VALUE     exact match
             | FIELD '!=' VALUE    not equal
             | FIELD '~' TEXT      case-insensitive "contains"
    FIELD   := doc_id | source | title | page

Example: `source~handbook and page=3`. Values may be quoted with '…' or "…".
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable
from errors import FilterError

FIELDS = {"doc_id": str, "source": str, "title": str, "page": int}
_CLAUSE = re.compile(r"^\s*(\w+)\s*(!=|=|~)\s*(.*?)\s*$", re.S)


@dataclass(frozen=True)
class Clause:
    field: str
    op: str
    value: Any


def parse_filter(text: str | None) -> list[Clause]:
    if text is None or not text.strip():
        return []
    clauses = []
    for part in re.split(r"\s+and\s+", text.strip(), flags=re.I):
        match = _CLAUSE.match(part)
        if not match:
            raise FilterError(f"bad filter clause {part!r}: use FIELD=VALUE, FIELD!=VALUE or FIELD~TEXT")
        field, op, raw = match.groups()
        if field not in FIELDS:
            raise FilterError(f"unknown filter field {field!r}; fields: {', '.join(FIELDS)}")
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            raw = raw[1:-1]
        if FIELDS[field] is int:
            if op == "~":
                raise FilterError(f"'~' (contains) does not apply to the numeric field {field!r}")
            try:
                value: Any = int(raw)
            except ValueError:
                raise FilterError(f"filter field {field!r} needs a whole number, got {raw!r}") from None
        else:
            value = raw
        clauses.append(Clause(field, op, value))
    return clauses


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def to_sql(clauses: list[Clause]) -> str | None:
    parts = []
    for c in clauses:
        if c.op == "~":
            pattern = c.value.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            parts.append(f"lower({c.field}) LIKE {_sql_str('%' + pattern + '%')} ESCAPE '\\'")
        else:
            literal = str(c.value) if isinstance(c.value, int) else _sql_str(c.value)
            parts.append(f"{c.field} {'=' if c.op == '=' else '!='} {literal}")
    return " AND ".join(parts) or None


def to_predicate(clauses: list[Clause]) -> Callable[[dict], bool]:
    def matches(row: dict) -> bool:
        for c in clauses:
            value = row.get(c.field)
            if c.op == "~":
                if value is None or c.value.lower() not in str(value).lower():
                    return False
            elif (value == c.value) != (c.op == "="):
                return False
        return True

    return matches
