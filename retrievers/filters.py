"""Metadata filters for search: a tiny, safe language compiled both to LanceDB SQL and to a Python predicate.

    FILTER  := CLAUSE ( ' and ' CLAUSE )*
    CLAUSE  := FIELD '=' VALUE     exact match
             | FIELD '!=' VALUE    not equal
             | FIELD '~' TEXT      case-insensitive "contains"
    FIELD   := doc_id | source | title | page

Example: `source~handbook and page=3`. Values may be quoted with '…' or "…".

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
            parts.append(f"{c.field} {'=' if c.op == '=' else '!='} {literal}")
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
