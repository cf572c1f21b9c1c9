"""Metadata filters for search: a tiny, safe language compiled both to LanceDB SQL and to a Python predicate.

    FILTER  := CLAUSE ( ' and ' CLAUSE )*
    CLAUSE  := FIELD '=' VALUE     exact match
             | FIELD '!=' VALUE    not equal
             | FIELD '~' TEXT      case-insensitive "contains"
    FIELD   := doc_id | source | title | page

Example: `source~handbook and page=3`. Values may be quoted with '…' or "…" (a quoted value may hold ' and ').
`format_filter` writes clauses back as text that parses to the same clauses.

Access: `readable_by(groups)` is a clause on the `acl` column (a document's access labels) that `parse_filter` never
produces (`acl` is no filter field), so a caller's filter can only be ANDed to it, never widen it. A chunk is
readable when it has no labels or shares one with the caller's groups. `scope_clauses(scope)` turns a caller's
scope (its groups, or `ALL`) into those clauses and refuses a missing one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from switchyard.errors import AccessError, FilterError
from switchyard.run_context import AllScope

FIELDS = {"doc_id": str, "source": str, "title": str, "page": int}
ACL_FIELD = "acl"
READABLE = "readable"  # the op of an access clause
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_HEAD = re.compile(r"\s*(\w+)\s*(!=|=|~)\s*")  # FIELD OP, then the value
_AND = re.compile(r"\s+and\s+", re.I)


@dataclass(frozen=True)
class Clause:
    field: str
    op: str
    value: Any


def parse_filter(text: str | None) -> list[Clause]:
    """The clauses of a filter. A value quoted right after its operator ('…' or "…") runs to the next quote of the
    same kind and may hold anything else, ' and ' included; an unquoted value runs to the next ' and '."""
    if text is None or not text.strip():
        return []
    clauses = []
    pos = 0
    while True:
        head = _HEAD.match(text, pos)
        if not head:
            part = text[pos : (m.start() if (m := _AND.search(text, pos)) else len(text))].strip()
            raise FilterError(f"bad filter clause {part!r}: use FIELD=VALUE, FIELD!=VALUE or FIELD~TEXT")
        field, op = head.groups()
        pos = head.end()
        if pos < len(text) and text[pos] in "'\"":
            close = text.find(text[pos], pos + 1)
            if close < 0:
                raise FilterError(f"unclosed quote in filter clause {text[head.start() :].strip()!r}")
            raw, pos = text[pos + 1 : close], close + 1
            after = _AND.match(text, pos)
            if after is None and text[pos:].strip():
                raise FilterError(f"unexpected {text[pos:].strip()!r} after the quoted value of {field!r}")
        else:
            after = _AND.search(text, pos)
            raw = text[pos : after.start() if after else len(text)].strip()
        clauses.append(_clause(field, op, raw))
        if after is None:
            return clauses
        pos = after.end()


def _clause(field: str, op: str, raw: str) -> Clause:
    if field not in FIELDS:
        raise FilterError(f"unknown filter field {field!r}; fields: {', '.join(FIELDS)}")
    if FIELDS[field] is not int:
        return Clause(field, op, raw)
    if op == "~":
        raise FilterError(f"'~' (contains) does not apply to the numeric field {field!r}")
    try:
        return Clause(field, op, int(raw))
    except ValueError:
        raise FilterError(f"filter field {field!r} needs a whole number, got {raw!r}") from None


def format_filter(clauses: Iterable[Clause]) -> str:
    """The filter text of clauses (what `parse_filter` reads back as the same clauses): each text value quoted with a
    quote it does not contain. A value holding both kinds of quote has no filter text (FilterError)."""
    parts = []
    for c in clauses:
        if c.field not in FIELDS or c.op not in ("=", "!=", "~"):
            raise FilterError(f"not a filter clause: {c}")
        if isinstance(c.value, int):
            parts.append(f"{c.field}{c.op}{c.value}")
            continue
        quote = next((q for q in "\"'" if q not in c.value), None)
        if quote is None:
            raise FilterError(f"the value of {c.field!r} holds both kinds of quote; it cannot be written as a filter")
        parts.append(f"{c.field}{c.op}{quote}{c.value}{quote}")
    return " and ".join(parts)


def parse_labels(labels: str | Iterable[str] | None) -> tuple[str, ...]:
    """Access labels or groups ('hr,finance' or a list) as a sorted tuple; each 1-64 letters, digits, '_', '.', '-'."""
    items = labels.split(",") if isinstance(labels, str) else list(labels or [])
    out = set()
    for item in items:
        if not isinstance(item, str):
            raise AccessError(f"access labels must be strings, got {item!r}")
        if item.strip():
            if not _LABEL.match(item.strip()):
                raise AccessError(
                    f"invalid access label {item.strip()!r} (1-64 letters, digits, '_', '.', '-', "
                    "starting with a letter or digit)"
                )
            out.add(item.strip())
    return tuple(sorted(out))


def encode_labels(labels: Iterable[str]) -> str | None:
    """How labels are stored in the `acl` column: ',hr,finance,' (so one LIKE finds one label); None: unlabelled."""
    labels = parse_labels(labels)
    return f",{','.join(labels)}," if labels else None


def readable_by(groups: Iterable[str]) -> Clause:
    return Clause(ACL_FIELD, READABLE, parse_labels(groups))


def scope_clauses(scope) -> list[Clause]:
    """The access clauses of a caller's scope: none for `ALL`, `readable_by(groups)` for its groups. A missing scope
    (None) is refused, never read as "everything": closed by default."""
    if scope is None:
        raise AccessError(
            "no access scope given: pass the caller's groups, or ALL (switchyard.run_context) for a "
            "caller that may read every document"
        )
    if isinstance(scope, AllScope):
        return []
    if isinstance(scope, str):
        raise AccessError(f"an access scope is a tuple of groups or ALL, not the string {scope!r}")
    return [readable_by(scope)]


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def to_sql(clauses: list[Clause]) -> str | None:
    parts = []
    for c in clauses:
        if c.op == READABLE:
            alternatives = [f"{ACL_FIELD} IS NULL", f"{ACL_FIELD} = ''"] + [
                f"{ACL_FIELD} LIKE {_sql_str('%,' + _like_escape(g) + ',%')} ESCAPE '\\'" for g in c.value
            ]
            parts.append("(" + " OR ".join(alternatives) + ")")
        elif c.op == "~":
            pattern = _like_escape(c.value.lower())
            parts.append(f"lower({c.field}) LIKE {_sql_str('%' + pattern + '%')} ESCAPE '\\'")
        else:
            literal = str(c.value) if isinstance(c.value, int) else _sql_str(c.value)
            if c.op == "=":
                parts.append(f"{c.field} = {literal}")
            else:  # a row without the field (no page) is not equal, as in to_predicate; SQL's NULL != x is not true
                parts.append(f"({c.field} IS NULL OR {c.field} != {literal})")
    return " AND ".join(parts) or None


def to_predicate(clauses: list[Clause]) -> Callable[[dict], bool]:
    def matches(row: dict) -> bool:
        for c in clauses:
            value = row.get(c.field)
            if c.op == READABLE:
                labels = set((value or "").split(",")) - {""}
                if labels and not labels & set(c.value):
                    return False
            elif c.op == "~":
                if value is None or c.value.lower() not in str(value).lower():
                    return False
            elif (value == c.value) != (c.op == "="):
                return False
        return True

    return matches
