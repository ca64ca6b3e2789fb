"""The inline forms of the hot checks (ADR 0006) answer exactly as the full checks: the same
value (and type) for everything they accept, and for anything else the full check's own
error — including string subclasses, wrong types, bounds and non-ASCII text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kernel.canonical import items as N
from kernel.canonical import records as NM
from kernel.canonical.checks import identifier, source_ref, timestamp
from kernel.canonical.records import normalize_memory_record
from kernel.errors import KernelError
from tests.kernel.test_memory_lifecycle import make


class Text(str):
    """A ``str`` subclass: the full checks refuse or convert it, never pass it through."""


T0 = "2026-08-29T00:00:00.000Z"

IDENTIFIERS: list[Any] = [
    "mem-1",
    "a" * 160,
    "a" * 161,
    "",
    "-lead",
    "has space",
    "é",
    "ok:/._-9",
    Text("mem-1"),
    None,
    1,
    b"mem-1",
]
TIMESTAMPS: list[Any] = [T0, "2026-08-29T00:00:00Z", "x" * 25, "2026", Text(T0), None, 5]


def outcome(check: Callable[[], Any]) -> tuple[str, Any]:
    try:
        value = check()
    except KernelError as error:
        return "error", (type(error), error.code, error.message, error.details)
    return "value", (value, type(value))


@pytest.mark.parametrize("value", IDENTIFIERS)
def test_identifier(value: Any) -> None:
    for _ in range(2):  # the second time from the remembered set
        assert outcome(lambda: NM.fast_identifier(value, "f")) == outcome(
            lambda: identifier(value, "f")
        )


@pytest.mark.parametrize("value", TIMESTAMPS)
def test_timestamp(value: Any) -> None:
    for _ in range(2):  # the second time from the parser's cache
        assert outcome(lambda: NM._fast_timestamp(value, "createdAt")) == outcome(
            lambda: timestamp(value, "createdAt")
        )


@pytest.mark.parametrize("source", IDENTIFIERS)
@pytest.mark.parametrize("observed", TIMESTAMPS)
def test_provenance(source: Any, observed: Any) -> None:
    raw = {"source": source, "observedAt": observed}
    assert outcome(lambda: NM._fast_provenance(raw)) == outcome(lambda: N._provenance(raw))
    other = {"source": source, "actor": "a"}
    assert outcome(lambda: NM._fast_provenance(other)) == outcome(lambda: N._provenance(other))


@pytest.mark.parametrize("store", IDENTIFIERS)
def test_evidence_refs(store: Any) -> None:
    for refs in ([{"store": store, "id": "ev-1"}], [{"store": "s", "id": store}],
                 [{"store": "s", "id": "ev-1"}, {"store": store, "uri": "u"}]):
        full = outcome(
            lambda refs=refs: [source_ref(e, f"evidenceRefs[{i}]") for i, e in enumerate(refs)]
        )
        assert outcome(lambda refs=refs: NM._evidence_refs(refs)) == full


@pytest.mark.parametrize(
    "value",
    [[], ["provider"], ["x" * 64], ["x" * 65], [""], [Text("p")], [1], ("p",), ["b", "a"], None],
)
@pytest.mark.parametrize("lo", [0, 1])
def test_short_string_sets(value: Any, lo: int) -> None:
    assert outcome(lambda: NM._short_string_set(value, "tags", lo)) == outcome(
        lambda: N._string_set(value, "tags", lo, 128, 128)
    )


@pytest.mark.parametrize(
    "field, value",
    [
        ("retentionPolicy", {"mode": Text("durable")}),
        ("retentionPolicy", {"mode": "legal_hold"}),
        ("retentionPolicy", {"mode": "until_expired"}),
        ("retentionPolicy", {"mode": "nope"}),
        ("scope", Text("project")),
        ("scopeId", Text("project-1")),
        ("memoryId", Text("mem-1")),
        ("category", Text("fact")),
        ("category", "bad category"),
    ],
)
def test_record_fields_keep_their_full_checks(field: str, value: Any) -> None:
    record = make(memoryId="mem-1", scope="project", scopeId="project-1")
    record.pop("digest", None)
    record[field] = value
    result = outcome(lambda: normalize_memory_record(record))
    if result[0] == "value":  # a str subclass converted by the full check: a plain str
        out = result[1][0]
        assert type(out[field] if field != "retentionPolicy" else out[field]["mode"]) is str
    else:
        assert result[1][1] == "invalid_argument"
