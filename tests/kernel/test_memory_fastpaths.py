"""The memory hot paths are proved equal to the slow, obviously-correct ones.

* the secret-material prefilter never skips a pattern that would match
  (``kernel.canonical.records.contains_secret_material``);
* the MemoryRecord digest fast path equals the general peer canonicalisation;
* the reducer's directly-built tombstone / purged records equal normalising the slow
  construction (``kernel.memory.lifecycle.tombstone`` + ``normalize_memory_record``), key order
  included;
* a :class:`~kernel.canonical.records.VerifiedRecord` is trusted by its type alone: only
  the normaliser makes one, it cannot be changed through any view of it, and any other
  value (equal bytes included) takes the full path;
* event, receipt and deletion-receipt digests equal the general peer digest;
* the in-memory MemoryPort's deep copies give back what was stored.

(docs/adr/0005-verified-record-memo.md, docs/adr/0011-purity-by-type.md)
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import pickle
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.adapters.in_memory.memory_store import InMemoryMemoryPort
from kernel.adapters.in_memory.projection import InMemoryProjectionStore
from kernel.canonical import digest as kdigest
from kernel.canonical.items import MEMORY_RECORD_DOMAIN
from kernel.canonical.records import (
    _FOLD_TO_ASCII,
    _SECRET_PATTERNS,
    VerifiedRecord,
    _normalize,
    contains_secret_material,
    memory_record_blob,
    normalize_memory_record,
    parse_stored_record,
    purged_record,
    tombstone_record,
    verified_memory_record,
    verified_stored_record,
)
from kernel.canonical.timestamps import (
    MAX_EPOCH_MS,
    _parse,
    epoch_ms_to_iso,
    format_epoch_ms,
    parse_timestamp,
)
from kernel.errors import DigestMismatch, InvalidArgument
from kernel.memory.deletion import RECEIPT_DOMAIN, _receipt_digest
from kernel.memory.lifecycle import (
    EVENT_DOMAIN,
    Transition,
    memory_event,
    memory_receipt,
    tombstone,
    transition_memory,
)
from kernel.memory.lifecycle import (
    RECEIPT_DOMAIN as MEMORY_RECEIPT_DOMAIN,
)
from kernel.ports import MemoryCommit
from tests.kernel.test_memory_session_copies import mutable_ids, same_types

AT = "2026-09-01T12:00:00.000Z"


def record(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "schemaVersion": 1,
        "memoryId": "mem-1",
        "scope": "project",
        "scopeId": "project-1",
        "category": "decision",
        "content": "Use pnpm for the monorepo",
        "provenance": {"source": "explicit-user-memory", "observedAt": "2026-08-28T00:00:00Z"},
        "evidenceRefs": [{"store": "session-log", "id": "ev-1", "eventSequence": 3}],
        "confidence": 0.5,
        "importance": 0.4,
        "tags": ["build", "pnpm"],
        "sensitivity": "internal",
        "allowedSinks": ["cli", "provider.local"],
        "state": "active",
        "retentionPolicy": {"mode": "durable"},
        "createdAt": "2026-08-28T00:00:00Z",
        "updatedAt": "2026-08-28T00:00:00Z",
        "accessCount": 2,
        "revision": 1,
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def general_digest(value: dict[str, Any], domain: str) -> str:
    return kdigest.digest({k: v for k, v in value.items() if k != "digest"}, domain, "peer")


# --------------------------------------------------------------------------- secret scan


def test_the_fold_table_lists_every_non_ascii_letter_match() -> None:
    """Every code point Python's ``re.IGNORECASE`` matches against an ASCII letter, beyond
    the letter's two cases, is folded by the prefilter (so it cannot hide a keyword)."""
    letter = re.compile("[a-z]", re.IGNORECASE)
    found = {
        cp: chr(cp).lower() if chr(cp).lower().isascii() else None
        for cp in range(0x80, 0x110000)
        if not 0xD800 <= cp <= 0xDFFF and letter.fullmatch(chr(cp))
    }
    assert set(found) == set(_FOLD_TO_ASCII)
    for cp, folded in _FOLD_TO_ASCII.items():
        assert re.fullmatch(folded, chr(cp), re.IGNORECASE)


def _unfiltered(text: str) -> bool:
    return any(p.search(text) is not None for p in _SECRET_PATTERNS)


PIECES = [
    "-----BEGIN ", "RSA ", "PRIVATE KEY-----", "Bearer ", "bearer\t", "api_key", "API-KEY",
    "access_token", "client-secret", "recovery code", "Backup Code", "session", "ſession",
    "auth", "AUTH_TOKEN", "sessionid", "=", ":", " = ", "'", '"', "abcdefghijklmnopqrstuvwxyz",
    "0123456789ABCDEF", "K", "İ", "ı", "ſ", "\u3000", "x", " ", "-", "_", "é", "密钥",
]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=12).map("".join))
def test_prefiltered_scan_equals_running_every_pattern(text: str) -> None:
    assert contains_secret_material(text) == _unfiltered(text)


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer abcdefghijklmnop1234",
        "ſession=abcdefghijklmnopqrstu",
        "clİent_secret: abcdefghijklmnop",
        "API_KEY = 'abcdefghijklmnopqrstuvwx'",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "recovery code: 1234-5678-9999",
        "auth_token=abcdefghijklmnopqrstuvwxyz",
    ],
)
def test_known_secrets_are_still_found(text: str) -> None:
    assert contains_secret_material(text) == _unfiltered(text)
    assert contains_secret_material(text) or text.startswith("clİent")


# --------------------------------------------------------------------------- record digest

SCORES = st.one_of(
    st.sampled_from([0, 1, 0.0, 1.0, 0.5, 1e-4, 9.99e-5, 5e-7, 0.1 + 0.2, 0.9500000000000001]),
    st.floats(min_value=0, max_value=1, allow_nan=False),
)


@settings(max_examples=300, deadline=None)
@given(confidence=SCORES, importance=SCORES, content=st.text(min_size=1, max_size=40))
def test_record_digest_fast_path_equals_the_general_canonicalisation(
    confidence: float, importance: float, content: str
) -> None:
    raw = record(confidence=confidence, importance=importance, content=content)
    try:
        out = _normalize(raw, "peer")
    except InvalidArgument:
        return  # secret-like or a lone surrogate: refused on both paths
    assert out["digest"] == general_digest(out, MEMORY_RECORD_DOMAIN)


# --------------------------------------------------------------------------- derived records

VARIANTS = [
    {},
    {"scope": "global", "scopeId": None},
    {"summary": "pnpm", "supersedes": ["mem-0"], "lastAccessedAt": "2026-08-30T00:00:00Z"},
    {"contentRef": {"store": "blobs", "objectId": "obj-1", "digest": "sha256:" + "a" * 64,
                    "byteLength": 12, "summary": "a file", "recoverable": True}},
    {"retentionPolicy": {"mode": "until_expired", "expiresAt": "2027-01-01T00:00:00Z"}},
    {"state": "reinforced", "revision": 7, "confidence": 1, "importance": 0},
    {"state": "candidate", "deletionFence": "old-fence", "confidence": 0.00005},
    {"provenance": {"source": "llm-summary", "actor": "agent-1",
                    "observedAt": "2026-08-28T00:00:00Z",
                    "parentDigests": ["sha256:" + "b" * 64], "degraded": True}},
]


def slow_tombstone(current: dict[str, Any], at: str, fence: str) -> dict[str, Any]:
    nxt = {**current, "state": "deleted", "updatedAt": at, "revision": current["revision"] + 1}
    nxt = tombstone(nxt, at, fence)
    nxt.update(state="deleted", updatedAt=at)
    nxt.pop("digest", None)
    return _normalize(nxt, "peer")


def slow_purged(current: dict[str, Any], at: str) -> dict[str, Any]:
    nxt = {**current, "state": "purged", "updatedAt": at, "revision": current["revision"] + 1}
    nxt["content"] = ""
    for key in ("summary", "contentRef", "digest"):
        nxt.pop(key, None)
    return _normalize(nxt, "peer")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("at", [AT, "2026-09-01T12:00:00.5+02:00"])
def test_tombstone_and_purged_records_equal_the_slow_construction(
    variant: dict[str, Any], at: str
) -> None:
    current = _normalize(record(**variant), "peer")
    canonical_at = normalize_memory_record(record(updatedAt=at))["updatedAt"]
    fast = tombstone_record(verified_memory_record(current), at=canonical_at, fence="fence-1")
    slow = slow_tombstone(current, canonical_at, "fence-1")
    assert fast.to_wire() == slow and list(fast) == list(slow)
    assert list(fast["provenance"]) == list(slow["provenance"])
    assert fast["digest"] == general_digest(fast.to_wire(), MEMORY_RECORD_DOMAIN)
    assert fast.blob == memory_record_blob(slow)[0]  # the bytes a store keeps, too
    fast_purged = purged_record(fast, at=canonical_at)
    slow_purged_record = slow_purged(slow, canonical_at)
    assert fast_purged.to_wire() == slow_purged_record
    assert list(fast_purged) == list(slow_purged_record)
    assert fast.to_wire() == slow  # purging did not touch the tombstone it was derived from
    # what the derivations seal is what the normaliser produces from it
    assert _normalize(fast.to_wire(), "peer") == fast.to_wire()
    assert _normalize(fast_purged.to_wire(), "peer") == fast_purged.to_wire()


def test_derived_records_keep_the_normalizer_checks() -> None:
    current = _normalize(record(revision=2**53 - 1), "peer")
    with pytest.raises(InvalidArgument) as caught:
        tombstone_record(current, at=AT, fence="fence-1")
    assert caught.value.details == {"field": "revision"}
    with pytest.raises(InvalidArgument):
        tombstone_record(_normalize(record(), "peer"), at=AT, fence="../x")
    with pytest.raises(InvalidArgument):
        tombstone_record(_normalize(record(), "peer"), at="yesterday", fence="fence-1")
    with pytest.raises(InvalidArgument):  # only a tombstone has a purged version
        purged_record(verified_memory_record(record()), at=AT)
    with pytest.raises(InvalidArgument):  # a plain mapping is verified first
        tombstone_record({**current, "scope": "galaxy"}, at=AT, fence="fence-1")


def test_a_transition_continues_from_its_own_record_only() -> None:
    current = normalize_memory_record(record())
    delete = {"type": "delete", "expectedRevision": 1, "deletionFence": "f-1"}
    first = transition_memory(current, delete, clock=lambda: 1_788_000_000_000, new_id=lambda: "1")
    assert isinstance(first, Transition)
    purge = {"type": "purge", "expectedRevision": 2, "deletionFence": "f-1"}
    kept = transition_memory(first, purge, clock=lambda: 1_788_000_000_000, new_id=lambda: "2")
    again = transition_memory(
        dict(first.record), purge, clock=lambda: 1_788_000_000_000, new_id=lambda: "2"
    )
    assert kept == again
    assert type(first.record) is VerifiedRecord and type(kept.record) is VerifiedRecord
    tampered = {**first.record, "category": "other"}
    with pytest.raises(DigestMismatch):  # a plain mapping is verified again
        transition_memory(tampered, purge, clock=lambda: 1_788_000_000_000, new_id=lambda: "2")
    with pytest.raises(DigestMismatch):  # and so is a hand-made Transition's
        transition_memory(
            Transition(tampered, first.event),  # type: ignore[arg-type]
            purge,
            clock=lambda: 1_788_000_000_000,
            new_id=lambda: "2",
        )


# --------------------------------------------------------------------------- verified records


class Text(str):
    pass


def test_only_the_normaliser_makes_a_verified_record() -> None:
    verified = verified_memory_record(record())
    assert type(verified) is VerifiedRecord and verified_memory_record(verified) is verified
    with pytest.raises(TypeError):
        VerifiedRecord({**verified})  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        dataclasses.replace(verified, _record={**verified, "scope": "galaxy"})
    with pytest.raises(TypeError):
        type("Forged", (VerifiedRecord,), {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        verified._record = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        verified["scope"] = "galaxy"  # type: ignore[index]
    assert copy.copy(verified) is verified and copy.deepcopy(verified) is verified
    again = pickle.loads(pickle.dumps(verified))  # unpickling verifies again
    assert type(again) is VerifiedRecord and again == verified
    forged = pickle.dumps(verified).replace(b"project-1", b"project-2")
    with pytest.raises(DigestMismatch):
        pickle.loads(forged)


def test_no_view_of_a_verified_record_changes_it() -> None:
    verified = verified_memory_record(record())
    wire = verified.to_wire()
    verified["tags"].append("edited")
    verified.get("provenance")["source"] = "edited"
    verified["evidenceRefs"][0]["id"] = "edited"
    for _, value in verified.items():
        if isinstance(value, list):
            value.clear()
    verified.to_wire()["retentionPolicy"]["mode"] = "legal_hold"
    {**verified}["allowedSinks"].append("edited")
    assert verified.to_wire() == wire == normalize_memory_record(record())
    assert verified.blob == memory_record_blob(record())[0]


def test_equal_bytes_are_no_proof_only_the_type_is() -> None:
    """A plain dict equal to a verified record takes the full path every time (a new
    object, the full path's outcome); a VerifiedRecord is taken as it is."""
    verified = verified_memory_record(record())
    wire = verified.to_wire()
    again = normalize_memory_record(wire)
    assert again == wire and again is not wire  # always a new object
    assert normalize_memory_record(verified) == wire  # its copy
    blob, fields = memory_record_blob(verified)
    assert fields is verified and blob == verified.blob
    blob, fields = memory_record_blob(wire)
    assert fields is not wire and fields == wire and blob == verified.blob
    # every variation takes the full path, with the full path's outcome
    with pytest.raises(DigestMismatch):
        normalize_memory_record({**wire, "content": "Use npm for the monorepo"})
    with pytest.raises(InvalidArgument):
        normalize_memory_record({**wire, "confidence": math.nan})
    with pytest.raises(InvalidArgument):
        normalize_memory_record({**wire, "content": "api_key = abcdefghijklmnop"})
    floats = normalize_memory_record({**wire, "revision": 1.0, "accessCount": 2.0})
    assert type(floats["revision"]) is int and type(floats["accessCount"]) is int
    subclass = normalize_memory_record({**wire, "category": Text("decision")})
    assert type(subclass["category"]) is str and subclass == wire
    tupled = normalize_memory_record({**wire, "tags": ("build", "pnpm")})
    assert tupled == wire and isinstance(tupled["tags"], list)
    reordered = normalize_memory_record(dict(reversed(list(wire.items()))))
    assert reordered == wire and list(reordered) == list(wire)


def test_a_derived_record_is_committed_as_it_is_and_nothing_else_is_trusted() -> None:
    current = verified_memory_record(record())
    tombstone = tombstone_record(current, at=AT, fence="fence-1")
    blob, fields = memory_record_blob(tombstone)  # the store's commit of it: no check
    assert fields is tombstone and parse_stored_record(blob) == tombstone.to_wire()
    with pytest.raises(DigestMismatch):  # any change is verified in full
        memory_record_blob({**tombstone, "category": "other"})
    with pytest.raises(InvalidArgument):
        memory_record_blob({**tombstone, "content": "the body came back"})
    purged = purged_record(tombstone, at=AT)
    assert memory_record_blob(purged)[1] is purged
    # the tombstone's bytes as a plain dict: verified in full (same outcome, a new mapping)
    again_blob, again = memory_record_blob(tombstone.to_wire())
    assert again is not tombstone and again == tombstone and again_blob == blob


def test_a_stored_record_is_verified_in_full_from_its_bytes() -> None:
    blob = memory_record_blob(record())[0]
    raw = parse_stored_record(blob)
    assert raw is not None
    first = verified_stored_record(blob, raw)
    assert type(first) is VerifiedRecord and first == raw and first.blob == blob
    tampered = blob.replace(b'"internal"', b'"secret"')
    tampered_raw = parse_stored_record(tampered)
    assert tampered_raw is not None
    with pytest.raises(DigestMismatch):
        verified_stored_record(tampered, tampered_raw)
    odd = parse_stored_record(blob.replace(b'"revision":1', b'"revision":1.0'))
    assert odd is not None  # a valid, non-normal form: verified, its own bytes re-encoded
    assert verified_stored_record(blob, odd).blob == blob


def test_a_supplied_digest_is_checked_for_form_before_it_is_compared() -> None:
    verified = normalize_memory_record(record())
    with pytest.raises(InvalidArgument) as caught:  # malformed: the form error, first
        _normalize({**verified, "digest": "sha256:XYZ"}, "peer")
    assert caught.value.details == {"field": "digest"}
    with pytest.raises(DigestMismatch):  # well-formed, wrong
        _normalize({**verified, "digest": "sha256:" + "0" * 64}, "peer")
    assert _normalize(dict(verified), "peer") == verified


# --------------------------------------------------------------------------- digests


def test_event_and_receipt_digests_equal_the_general_path() -> None:
    rec = normalize_memory_record(record())
    for extra in ({}, {"reason": "user asked", "authority": "user-1"},
                  {"successorMemoryId": "mem-2", "reason": "caf\u00e9 \ud83d\ude00"}):
        event = memory_event(rec, from_state="active", previous_revision=1, at=AT,
                             event_id="memory-event-1", type_="memory.deleted", extra=extra)
        assert event["digest"] == general_digest(event, EVENT_DOMAIN)
    event = memory_event(rec, from_state=None, previous_revision=0, at=AT,
                         event_id="memory-event-2", type_="memory.scope.promoted",
                         fields={"fromScope": "session", "toScope": "project"})
    assert event["digest"] == general_digest(event, EVENT_DOMAIN)
    receipt = memory_receipt("delete", rec, event, previous_revision=1, at=AT, store_revision=9)
    assert receipt["digest"] == general_digest(receipt, MEMORY_RECEIPT_DOMAIN)


@pytest.mark.parametrize(
    "port_receipt",
    [
        {"store": "index", "status": "purged", "memoryId": "mem-1", "fence": "f", "existed": True},
        {"status": "purged"},
        {"status": "purged", "weight": 0.25},
        {"status": "purged", "nested": {"b": 1, "a": [1, 2]}},
        {"status": "purged", "Z": 1, "a": 2, "_x": None, "10": "ten", "2": "two"},
        {"status": "purged", "big": 2**60},
    ],
)
def test_deletion_receipt_digest_equals_the_general_path(port_receipt: dict[str, Any]) -> None:
    receipt = {
        "schema": RECEIPT_DOMAIN, "schemaVersion": 1, "requestId": "del-1", "subject": "u",
        "selector": "memory:mem-1", "scope": "project", "scopeId": "p", "memoryId": "mem-1",
        "fence": "f", "authority": "a", "status": "purged", "revision": 3,
        "recordState": "purged", "recordDigest": "sha256:" + "c" * 64,
        "stores": [{"store": "auth", "status": "purged", "revision": 3},
                   {"store": "index", "status": "purged", "receipt": port_receipt},
                   {"store": "cache", "status": "pending", "error": {"code": "offline"}}],
        "startedAt": AT, "completedAt": AT,
    }
    assert _receipt_digest(receipt) == general_digest(receipt, RECEIPT_DOMAIN)


# --------------------------------------------------------------------------- stores


def test_the_in_memory_port_gives_back_exactly_what_it_stored() -> None:
    port = InMemoryMemoryPort([record()])
    current = port.read("mem-1")
    assert current is not None
    odd = {"requestId": "r-1", "pair": (1, 2), "none": None}
    changed = {**current, "state": "archived", "revision": 2, "updatedAt": AT}
    del changed["digest"]
    nxt = normalize_memory_record(changed)
    port.commit(MemoryCommit(nxt, {"memoryId": "mem-1", "value": 1.5}, odd), 1)
    stored = port.get_reconciliation("r-1")
    assert stored == {"requestId": "r-1", "pair": [1, 2], "none": None}  # JSON, as SQLite
    assert port.events()[0]["value"] == 1.5
    port.put_reconciliation({"requestId": "r-2", "list": (3, 4)})
    assert port.get_reconciliation("r-2") == {"requestId": "r-2", "list": [3, 4]}  # a deep copy
    assert port.read("mem-1") == nxt
    assert port.list_scope("project", "project-1") == [nxt]
    assert port.list_scope("project", "project-2") == []


def test_a_projection_purges_exactly_the_named_record() -> None:
    store = InMemoryProjectionStore("search-index")
    store.put(record(memoryId="mem-1"), ("pnpm",))
    store.put(record(memoryId="mem-2"), ("npm",))
    request = {"memoryId": "mem-1", "fence": "f-1", "scope": "project", "scopeId": "project-1"}
    assert store.purge(request)["existed"] is True
    assert "mem-1" not in store and "mem-2" in store and len(store) == 1
    assert store.purge(request) == {"store": "search-index", "status": "purged",
                                    "memoryId": "mem-1", "fence": "f-1", "existed": False}
    wrong_scope = {**request, "memoryId": "mem-2", "scopeId": "project-9"}
    with pytest.raises(Exception) as caught:
        store.purge(wrong_scope)
    assert getattr(caught.value, "code", None) == "projection_scope_mismatch"
    assert "mem-2" in store  # never beyond the request's own scope
    store.fail_next("offline", "index_offline")
    with pytest.raises(Exception) as failed:
        store.purge({**request, "memoryId": "mem-2"})
    assert getattr(failed.value, "code", None) == "index_offline" and "mem-2" in store


def test_clock_iso_reads_the_clock_once_per_call() -> None:
    from kernel.memory.lifecycle import clock_iso

    reads: list[int] = []

    def clock() -> int:
        reads.append(1)
        return -1 if len(reads) < 3 else 0

    assert [clock_iso(clock) for _ in range(3)] == [
        "1969-12-31T23:59:59.999Z", "1969-12-31T23:59:59.999Z", "1970-01-01T00:00:00.000Z"
    ]
    assert len(reads) == 3
    with pytest.raises(InvalidArgument):
        clock_iso(lambda: True)


def test_the_deletion_workload_converges() -> None:
    """``benchmarks/deletion_bench.py`` (no timing here): every receipt purged, every
    copy gone, two events per record — cold and warm alike."""
    from benchmarks.deletion_bench import deletion

    run, extra = deletion(5)
    run.setup()  # type: ignore[attr-defined]
    receipts = run()
    assert isinstance(receipts, list) and len(receipts) == 5
    assert all(len(r["stores"]) == 4 for r in receipts)
    out = extra()
    assert (out["receipts_purged"], out["authority_purged"]) == (5, 5)
    assert (out["projection_entries_left"], out["events"], out["stores"]) == (0, 10, 4)


# --------------------------------------------------------------------------- time


@settings(max_examples=2000, deadline=None)
@given(st.integers(min_value=-MAX_EPOCH_MS, max_value=MAX_EPOCH_MS))
def test_a_formatted_time_parses_back_to_itself(ms: int) -> None:
    """Parsing what the reducer formats gives ``(ms, iso)`` back — the parser's own answer
    (``_parse``: no cache) and the cached one alike."""
    iso = format_epoch_ms(ms)
    assert _parse(iso, "t") == (ms, iso) == parse_timestamp(iso)
    assert format_epoch_ms(ms) == epoch_ms_to_iso(ms) == iso


def test_time_edges_parse_back_to_themselves() -> None:
    for ms in (-MAX_EPOCH_MS, -62_167_219_200_001, -62_167_219_200_000, -1, 0, 1,
               253_402_300_799_999, 253_402_300_800_000, MAX_EPOCH_MS):
        iso = epoch_ms_to_iso(ms)
        assert _parse(iso, "t") == (ms, iso) == parse_timestamp(iso)


def test_the_clock_conversion_refuses_what_it_refused_before() -> None:
    from kernel.memory.lifecycle import clock_iso

    with pytest.raises(InvalidArgument):
        clock_iso(lambda: True)
    with pytest.raises(InvalidArgument):
        clock_iso(lambda: 1.5)
    assert clock_iso(lambda: 0) == "1970-01-01T00:00:00.000Z"
    assert clock_iso(lambda: MAX_EPOCH_MS + 1) == epoch_ms_to_iso(MAX_EPOCH_MS + 1)


# --------------------------------------------------------------------------- store copies

_JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(["null", "x-null", "", "value"]),
    lambda inner: st.lists(inner, max_size=3)
    | st.tuples(inner, inner)
    | st.dictionaries(st.sampled_from(["a", "b", "null", "c"]), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.sampled_from(["requestId", "null", "x", "y", "z"]), _JSONISH, max_size=5))
def test_the_store_gives_back_a_private_deep_copy_of_what_it_was_given(
    value: dict[str, Any],
) -> None:
    """What the store gives back is what the SQLite store would: the JSON of what it was
    given (``json.dumps(allow_nan=False)`` then ``json.loads``: tuples as lists), a new
    copy each time; what JSON cannot hold (NaN, infinities) is refused, nothing stored."""
    port = InMemoryMemoryPort()
    operation = {**value, "requestId": "r-1"}
    try:
        expected = json.loads(json.dumps(operation, allow_nan=False))
    except ValueError:
        with pytest.raises(InvalidArgument):
            port.put_reconciliation(operation)
        assert port.get_reconciliation("r-1") is None
        return
    port.put_reconciliation(operation)
    first, second = port.get_reconciliation("r-1"), port.get_reconciliation("r-1")
    assert same_types(first, expected) and same_types(second, expected)
    assert not mutable_ids(first) & (mutable_ids(operation) | mutable_ids(second))
    assert same_types(port.reconciliations()["r-1"], expected)


def test_the_instruction_count_harness_runs_and_restores_the_clock() -> None:
    import time

    from benchmarks.deletion_instructions import main

    wall_clock = time.time_ns
    assert main(["call", "--n", "3"]) == 0
    assert main(["setup", "--n", "3"]) == 0
    assert time.time_ns is wall_clock
