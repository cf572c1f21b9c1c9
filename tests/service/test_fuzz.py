"""Every route fuzzed from its own OpenAPI document (Schemathesis) against a live `cli.py serve`: two tenants (acme,
globex), each with a read key and a write key, and an admin key. Each operation gets valid (positive) and invalid
(negative) requests from each key, a bounded number of examples, and every response is checked: never >= 500, the
documented schema (status code, content type, body), and no body that names or quotes the other tenant.

Bounded: FUZZ_EXAMPLES examples per operation, mode and key; the figures (cases, failures by check) are printed."""

from __future__ import annotations

import collections
import json
import time

import pytest

pytest.importorskip("schemathesis")

import schemathesis  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from switchyard.service.keys import FileKeyStore, keys_path  # noqa: E402
from tests.service.conftest import running_server, two_tenant_index  # noqa: E402

pytestmark = pytest.mark.slow

FUZZ_EXAMPLES = 12
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
TENANT_WORDS = {
    "acme": ("acme", "Zanzibar", "77431"),  # acme's collection name and its documents' words
    "globex": ("globex", "Bluebird", "Globex"),
}


@pytest.fixture(scope="module")
def fuzzed_server(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("fuzz")
    index, _ = two_tenant_index(root, embedder)
    store = FileKeyStore(keys_path(str(index), root / "uploads"))
    keys = {
        "acme-read": store.create("acme-read", "acme"),
        "acme-write": store.create("acme-write", "acme", write=True),
        "globex-read": store.create("globex-read", "globex"),
        "globex-write": store.create("globex-write", "globex", write=True),
        "admin": store.create("admin", admin=True),
    }
    with running_server(root, index, "--config", "no-llm", "--max-in-flight", "8") as srv:
        yield srv, keys


def other_tenant_leaks(key_name: str, body: str) -> list[str]:
    if key_name == "admin":
        return []
    tenant = key_name.split("-")[0]
    return [w for other, words in TENANT_WORDS.items() if other != tenant for w in words if w in body]


def _route_and_status(item: str) -> str:
    """'GET /x [mode, key] -> 404: ...' as 'GET /x -> 404: ...' (one line per route and status)."""
    head, _, rest = item.partition(" [")
    return f"{head} ->{rest.partition('] ->')[2]}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def fuzz_operation(url, operation, mode, key_name, key, cases, failures) -> None:
    """FUZZ_EXAMPLES requests of one kind (mode) to one operation with one key, each response checked."""
    headers = {"Authorization": f"Bearer {key}"}

    @settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case):
        response = case.call(base_url=url, headers=headers, timeout=120)
        cases[operation.label] += 1
        where = f"{operation.label} [{mode.value}, {key_name}] -> {response.status_code}"
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except BaseExceptionGroup as group:  # Schemathesis's FailureGroup: one per failed check
            for exc in group.exceptions:
                failures[type(exc).__name__].append(f"{where}: {_first_line(exc)}")
        except AssertionError as exc:
            failures[type(exc).__name__].append(f"{where}: {_first_line(exc)}")
        leaked = other_tenant_leaks(key_name, response.text)
        if leaked:
            failures["leak"].append(f"{where}: {leaked}")

    try:
        run()
    except Unsatisfiable:  # nothing to make invalid (an operation without parameters or body)
        assert mode is GenerationMode.NEGATIVE, operation.label


def test_every_route_from_its_schema(fuzzed_server):
    srv, keys = fuzzed_server
    schema = schemathesis.openapi.from_url(
        f"{srv.url}/openapi.json", headers={"Authorization": f"Bearer {keys['admin']}"}
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    cases: collections.Counter = collections.Counter()
    failures: dict[str, list[str]] = collections.defaultdict(list)
    started = time.monotonic()
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            for key_name, key in keys.items():
                fuzz_operation(srv.url, operation, mode, key_name, key, cases, failures)
    total = sum(cases.values())
    print(
        json.dumps(
            {
                "operations": len(operations),
                "cases": total,
                "seconds": round(time.monotonic() - started, 1),
                "failures": {kind: len(items) for kind, items in failures.items()},
            }
        )
    )
    for kind, items in failures.items():
        for item in sorted({_route_and_status(i) for i in items}):
            print(kind, item)
    assert total >= len(operations) * 10
    assert not failures, {kind: sorted(set(items))[:5] for kind, items in failures.items()}
    assert "Traceback" not in srv.output()
