"""The peer's normalizers, case by case: ``normalizeContextItem`` / ``normalizeMemoryRecord``.

Vectors: the normalizer groups of ``digest-vectors.json`` (``context-item``,
``context-item-timestamp``, ``context-item-invalid``, ``memory-record``,
``memory-record-invalid``).  Every case must give the peer's normalized object
(digest included) or the peer's error — code, message and details — unless a rule of
``tests/vectors/peer/KNOWN_DIFFERENCES.md`` applies; then the documented outcome
(``NonPortableValue``) is asserted instead, for exactly the cases its predicate selects.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from kernel.canonical.item_batch import normalize_context_items
from kernel.canonical.items import normalize_context_item
from kernel.canonical.records import normalize_memory_record
from kernel.canonical.timestamps import parse_timestamp
from kernel.errors import KernelError, NonPortableValue
from tests.conftest import peer_cases, require_case
from tests.peer.kd1 import non_portable_set

DIGESTS = "digest-vectors.json"
NORMALIZER_GROUPS = frozenset(
    {
        "context-item",
        "context-item-timestamp",
        "context-item-invalid",
        "memory-record",
        "memory-record-invalid",
    }
)
NORMALIZERS = {
    "normalizeContextItem": normalize_context_item,
    "normalizeMemoryRecord": normalize_memory_record,
}

pytestmark = pytest.mark.peer


def _normalizer_cases() -> list[Any]:
    out = []
    for param in peer_cases(DIGESTS):
        case = param.values[0]
        if case is None or case.get("group") in NORMALIZER_GROUPS:
            out.append(param)
    return out


# --- KNOWN_DIFFERENCES predicates (see tests/vectors/peer/KNOWN_DIFFERENCES.md) ------------

#: KD-1 — sets the normalizers sort with localeCompare("en").
_SORTED_SETS = {
    "normalizeContextItem": (("allowedSinks",), ("provenance", "parentDigests")),
    "normalizeMemoryRecord": (
        ("allowedSinks",),
        ("tags",),
        ("supersedes",),
        ("provenance", "parentDigests"),
    ),
}


def _get(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def kd1_non_portable_collation(case: dict[str, Any]) -> bool:
    """KD-1: a sorted set of two or more strings holds text outside the reproduced
    collation alphabet (:mod:`tests.peer.kd1`)."""
    return any(
        non_portable_set(_get(case["input"], path)) for path in _SORTED_SETS[case["normalizer"]]
    )


_DIGIT = re.compile(r"[0-9]")
_ES5 = re.compile(
    r"(?:\+\d{6}|-(?!000000)\d{6}|\d{4})(?:-\d\d(?:-\d\d)?)?"
    r"(?:[Tt].*)?"  # after a T separator the ES5 grammar decides (valid or invalid)
)
_YEAR_100_UP = r"(?:0[1-9]\d\d|[1-9]\d{3})"  # V8's legacy parser maps years < 100 to 19xx/20xx
_RFC3339_SPACE = re.compile(
    _YEAR_100_UP + r"-\d\d-\d\d "
    r"(?:(?!24)\d\d:\d\d:\d\d(?:\.\d+)?|24:00:00(?:\.0+)?)"
    r"(?:[Zz]|[+-](?:[01]\d|2[0-3]):\d\d)"
)
_IMF_FIXDATE = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (?:0[1-9]|[12]\d|3[01]) "
    r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) " + _YEAR_100_UP + " "
    r"(?:(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d|24:00:00) GMT"
)


def exact_timestamp_form(text: str) -> bool:
    """KD-2's complement: the timestamp forms reproduced exactly (kernel.canonical.timestamps)."""
    return bool(
        _DIGIT.search(text) is None
        or _ES5.fullmatch(text)
        or _RFC3339_SPACE.fullmatch(text)
        or _IMF_FIXDATE.fullmatch(text)
    )


def kd2_legacy_timestamp(case: dict[str, Any]) -> bool:
    """KD-2: a timestamp field (length 20..64) in a V8-legacy form outside the exact set."""
    raw = case["input"]
    fields = [
        raw.get("createdAt"),
        raw.get("expiresAt"),
        raw.get("updatedAt"),
        raw.get("lastAccessedAt"),
        _get(raw, ("provenance", "observedAt")),
    ]
    return any(
        isinstance(t, str) and 20 <= len(t) <= 64 and not exact_timestamp_form(t) for t in fields
    )


def known_difference(case: dict[str, Any]) -> str | None:
    if kd1_non_portable_collation(case):
        return "KD-1"
    if kd2_legacy_timestamp(case):
        return "KD-2"
    return None


# --- the cases --------------------------------------------------------------------------


@pytest.mark.parametrize("case", _normalizer_cases())
def test_normalizer_matches_peer(case: Any) -> None:
    case = require_case(case, DIGESTS)
    normalize = NORMALIZERS[case["normalizer"]]
    rule = known_difference(case)
    if rule is not None:
        with pytest.raises(NonPortableValue) as refused:
            normalize(case["input"])
        assert refused.value.code == "non_portable_value", rule
        return
    if case["rejected"]:
        with pytest.raises(KernelError) as raised:
            normalize(case["input"])
        assert raised.value.to_wire() == case["error"]
        return
    normalized = normalize(case["input"])
    assert normalized == case["normalized"]
    assert list(normalized) == list(case["normalized"])  # the peer's key order, too
    assert normalized["digest"] == case["digest"]
    assert {k: v for k, v in normalized.items() if k != "digest"} == case["value"]


def test_batch_normalizer_equals_exact_path() -> None:
    """``normalize_context_items`` (fast path) == per-item exact path on every portable,
    valid item of the vectors, alone and as one batch."""
    cases = [p.values[0] for p in _normalizer_cases()]
    items = [
        c["input"]
        for c in cases
        if c is not None
        and c["normalizer"] == "normalizeContextItem"
        and not c["rejected"]
        and known_difference(c) is None
    ]
    assert items, "no portable context items in the vectors"
    exact = [normalize_context_item(raw) for raw in items]
    assert normalize_context_items(items) == exact
    for raw, want in zip(items, exact, strict=True):
        assert normalize_context_items([raw]) == [want]


def test_counts_are_reported(capsys: pytest.CaptureFixture[str]) -> None:
    cases = [p.values[0] for p in _normalizer_cases() if p.values[0] is not None]
    rules: dict[str, int] = {}
    for c in cases:
        rule = known_difference(c) or "exact"
        rules[rule] = rules.get(rule, 0) + 1
    with capsys.disabled():
        print(f"\n[peer normalizers] {len(cases)} cases: {rules}")
    assert rules.get("exact", 0) >= 1


# --- timestamps: V8 results recorded from Node v20.20.2 (the peer's runtime) ---------------

V8_TIMESTAMPS = [
    ("2026-08-29T00:00:00Z", "2026-08-29T00:00:00.000Z"),
    ("2026-08-29t00:00:00z", "2026-08-29T00:00:00.000Z"),
    ("2026-08-29T08:00:00.000+08:00", "2026-08-29T00:00:00.000Z"),
    ("2026-08-29T00:00:00+0800", "2026-08-28T16:00:00.000Z"),
    ("2026-08-29T00:00+08:00", "2026-08-28T16:00:00.000Z"),
    ("2026-08-29T00:00:00.0001234567891Z", "2026-08-29T00:00:00.123Z"),
    ("2026-08-29T00:00:00.1234567891234Z", "2026-08-29T00:00:00.123Z"),
    ("2026-08-29T00:00:00.999999Z", "2026-08-29T00:00:00.999Z"),
    ("2026-08-29T24:00:00.000Z", "2026-08-30T00:00:00.000Z"),
    ("2026-08-29T24:00Z", "2026-08-30T00:00:00.000Z"),
    ("2026-02-30T00:00:00.000Z", "2026-03-02T00:00:00.000Z"),
    ("2026-04-31 00:00:00Z", "2026-05-01T00:00:00.000Z"),
    ("2026-08-29", "2026-08-29T00:00:00.000Z"),
    ("2026-08", "2026-08-01T00:00:00.000Z"),
    ("2026", "2026-01-01T00:00:00.000Z"),
    ("+002026-08-29T00:00:00.000Z", "2026-08-29T00:00:00.000Z"),
    ("-000001-01-01T00:00:00Z", "-000001-01-01T00:00:00.000Z"),
    ("+275760-09-13T00:00:00.000Z", "+275760-09-13T00:00:00.000Z"),
    ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00.000Z"),
    ("1969-12-31T23:59:59.999Z", "1969-12-31T23:59:59.999Z"),
    ("2026-08-29 00:00:00.123456+08:00", "2026-08-28T16:00:00.123Z"),
    ("2026-08-29 00:00:00.5-01:30", "2026-08-29T01:30:00.500Z"),
    ("2026-08-29 24:00:00Z", "2026-08-30T00:00:00.000Z"),
    ("Sat, 29 Aug 2026 07:10:38 GMT", "2026-08-29T07:10:38.000Z"),
    ("Mon, 29 Aug 2026 07:10:38 GMT", "2026-08-29T07:10:38.000Z"),  # weekday ignored
    ("Sat, 31 Feb 2026 07:10:38 GMT", "2026-03-03T07:10:38.000Z"),
    ("Sat, 29 Aug 2026 24:00:00 GMT", "2026-08-30T00:00:00.000Z"),
]
V8_NAN = [
    "yesterday",
    "",
    "Aug",
    "2026-08-29T24:00:00.0001Z",
    "2026-08-29T23:59:60Z",
    "+275760-09-13T00:00:00.001Z",
    "2026-08-29 23:59:60Z",
    "2026-08-29 00:60:00Z",
    "2026-08-29 25:00:00Z",
    "2026-08-29 00:00:00+23:60",
    "2026-13-01T00:00:00Z",
    "2026-00-01T00:00:00Z",
    "2026-01-00T00:00:00Z",
    "2026-01-32T00:00:00Z",
    "2026-01-01T25:00:00Z",
    "2026-01-01T00:00:00+24:00",
    "2026-13-01 00:00:00Z",
    "2026-01-32 00:00:00Z",
    "2026-08-29T00:00:00.Z",
    "2026-08-29T00:00:00,5Z",
    "2026-08-29T00:00:00.000+08",
    "2026-08-29T00:00:00.000Z ",
    "2026-08-29T00:00:00.000 GMT+0800",
]
NON_PORTABLE = [
    "August 29, 2026 00:00:00 UTC",
    "0099-01-01 00:00:00Z",
    "Sat, 29 Aug 2026 07:10:60 GMT",
    "2026-08-29 00:00:00+24:00",
    "  2026-08-29T00:00:00.000Z",
    "Aug 2026",
    "-000000-01-01T00:00:00Z",
]


@pytest.mark.parametrize(("text", "iso"), V8_TIMESTAMPS)
def test_timestamp_like_v8(text: str, iso: str) -> None:
    assert parse_timestamp(text)[1] == iso
    assert exact_timestamp_form(text)


@pytest.mark.parametrize("text", V8_NAN)
def test_timestamp_invalid_like_v8(text: str) -> None:
    with pytest.raises(KernelError) as raised:
        parse_timestamp(text, "createdAt")
    assert raised.value.code == "invalid_argument"


@pytest.mark.parametrize("text", NON_PORTABLE)
def test_timestamp_legacy_forms_refused(text: str) -> None:
    with pytest.raises(NonPortableValue):
        parse_timestamp(text, "createdAt")
    assert not exact_timestamp_form(text)
