"""Validation does not depend on call history (issue 14 item 2, "purity by type").

Each probe makes the same call twice — once before, once after calls that a process-wide
memo would have remembered — and requires the same outcome.  The first probe is the bug
that motivated the change: the tombstone of an *invalid* record (scope ``galaxy``,
sensitivity ``ultra``) was built by ``tombstone_record``, its bytes entered the
verified-record memo, and ``normalize_memory_record`` then accepted a record it refuses in
a fresh process.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from kernel.canonical import digest as kdigest
from kernel.canonical.items import MEMORY_RECORD_DOMAIN
from kernel.canonical.records import (
    TOMBSTONE_SINK,
    TOMBSTONE_SOURCE,
    memory_record_blob,
    normalize_memory_record,
    purged_record,
    tombstone_record,
    verified_memory_record,
)
from kernel.errors import KernelError
from kernel.memory.lifecycle import Transition, apply_memory_command, transition_memory

AT = "2026-09-01T12:00:00.000Z"
FENCE = "fence-probe-1"
CLOCK = 1_788_264_000_000  # AT as epoch milliseconds


def _valid() -> dict[str, Any]:
    return normalize_memory_record(
        {
            "schemaVersion": 1,
            "memoryId": "mem-probe",
            "scope": "project",
            "scopeId": "project-1",
            "category": "decision",
            "content": "Use pnpm for the monorepo",
            "provenance": {"source": "explicit-user-memory", "observedAt": "2026-08-28T00:00:00Z"},
            "evidenceRefs": [{"store": "session-log", "id": "ev-1"}],
            "confidence": 0.5,
            "importance": 0.4,
            "tags": ["build"],
            "sensitivity": "internal",
            "allowedSinks": ["cli"],
            "state": "active",
            "retentionPolicy": {"mode": "durable"},
            "createdAt": "2026-08-28T00:00:00.000Z",
            "updatedAt": "2026-08-28T00:00:00.000Z",
            "accessCount": 0,
            "revision": 1,
        }
    )


def _invalid() -> dict[str, Any]:
    """A record no normaliser accepts: an unknown scope and an unknown sensitivity."""
    return {**_valid(), "scope": "galaxy", "sensitivity": "ultra"}


def _forged_tombstone(current: dict[str, Any]) -> dict[str, Any]:
    """The tombstone of ``current`` exactly as the reducer builds it (same keys, same
    order, digest over the canonical content): byte for byte what a memo of the
    reducer's outputs would have remembered."""
    out: dict[str, Any] = {
        "schemaVersion": 1,
        "memoryId": current["memoryId"],
        "scope": current["scope"],
        "scopeId": current["scopeId"],
        "category": "deleted",
        "content": "",
        "provenance": {"source": TOMBSTONE_SOURCE, "observedAt": AT},
        "evidenceRefs": [
            {"store": TOMBSTONE_SOURCE, "id": current["memoryId"], "digest": current["digest"]}
        ],
        "confidence": 0,
        "importance": 0,
        "tags": [],
        "sensitivity": current["sensitivity"],
        "allowedSinks": [TOMBSTONE_SINK],
        "state": "deleted",
        "retentionPolicy": dict(current["retentionPolicy"]),
        "createdAt": current["createdAt"],
        "updatedAt": AT,
        "accessCount": 0,
        "revision": current["revision"] + 1,
        "deletionFence": FENCE,
    }
    out["digest"] = kdigest.digest(out, MEMORY_RECORD_DOMAIN, "peer")
    return out


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        value = call()
    except KernelError as error:
        return "refused", (error.code, str(error))
    except TypeError as error:
        return "refused", ("type_error", str(error))
    return "accepted", value if isinstance(value, dict) else None


def _derive_from(bad: dict[str, Any]) -> None:
    """Every call through which the reducer could derive a record from ``bad``; each may
    refuse (it should), none may leave anything behind that changes a later answer."""
    with contextlib.suppress(KernelError, TypeError):
        tombstone_record(bad, at=AT, fence=FENCE)
    with contextlib.suppress(KernelError, TypeError):
        purged_record({**_forged_tombstone(bad)}, at=AT)
    delete = {"type": "delete", "expectedRevision": 1, "deletionFence": FENCE}
    for record in (bad, Transition(bad, {})):  # type: ignore[arg-type]
        with contextlib.suppress(KernelError, TypeError):
            transition_memory(record, delete, clock=lambda: CLOCK, new_id=lambda: "1")


def test_the_tombstone_of_an_invalid_record_is_refused_whatever_ran_before() -> None:
    """The reported bug: building the tombstone of an invalid record made
    ``normalize_memory_record`` accept it afterwards."""
    bad = _invalid()
    forged = _forged_tombstone(bad)
    before = _outcome(lambda: normalize_memory_record(dict(forged)))
    assert before[0] == "refused"
    _derive_from(bad)
    assert _outcome(lambda: normalize_memory_record(dict(forged))) == before
    assert _outcome(lambda: verified_memory_record(dict(forged)))[0] == "refused"
    assert _outcome(lambda: memory_record_blob(dict(forged)))[0] == "refused"
    purge = {"type": "purge", "expectedRevision": 2, "deletionFence": FENCE}
    assert _outcome(
        lambda: apply_memory_command(dict(forged), purge, clock=lambda: CLOCK, new_id=lambda: "2")
    )[0] == "refused"


def test_the_reducer_refuses_to_derive_from_an_unverified_record() -> None:
    """Only a record the normaliser produced is trusted without a check: a plain mapping
    handed to the derivations is verified first (and this one is refused)."""
    bad = _invalid()
    with pytest.raises((KernelError, TypeError)):
        tombstone_record(bad, at=AT, fence=FENCE)
    with pytest.raises((KernelError, TypeError)):
        purged_record(_forged_tombstone(bad), at=AT)
    delete = {"type": "delete", "expectedRevision": 1, "deletionFence": FENCE}
    with pytest.raises(KernelError):
        transition_memory(bad, delete, clock=lambda: CLOCK, new_id=lambda: "1")
    with pytest.raises(KernelError):  # a hand-made Transition is no proof either
        transition_memory(
            Transition(bad, {}), delete, clock=lambda: CLOCK, new_id=lambda: "1"  # type: ignore[arg-type]
        )
    with pytest.raises(TypeError):  # nor is a caller's word: there is no such flag
        transition_memory(
            bad, delete, clock=lambda: CLOCK, new_id=lambda: "1", verified=True  # type: ignore[call-arg]
        )


def test_a_valid_records_answers_do_not_change_with_history() -> None:
    """The same calls over a valid record answer the same before and after the process has
    seen it, its tombstone and its purged version."""
    good = _valid()
    calls: dict[str, Callable[[], Any]] = {
        "normalize": lambda: normalize_memory_record(dict(good)),
        "tombstone_normalize": lambda: normalize_memory_record(
            {**_forged_tombstone(good), "scope": "galaxy"}
        ),
        "blob": lambda: memory_record_blob(dict(good))[0],
    }
    before = {name: _outcome(call) for name, call in calls.items()}
    _derive_from(good)
    for _ in range(2):
        assert {name: _outcome(call) for name, call in calls.items()} == before



def _liar(text: str, equal_to: str) -> str:
    """A ``str`` subclass holding ``text`` that claims to equal (and hashes as) ``equal_to``."""

    class Liar(str):
        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return hash(equal_to)

    return Liar(text)


def test_a_cache_never_answers_for_an_object_that_only_compares_equal() -> None:
    """The kernel's caches take exact strings only: an object equal to a cached key (a
    ``str`` subclass with its own ``__eq__``) is answered by the uncached rule, so what
    ran before cannot change its answer."""
    from kernel.canonical.digest import canonical_json
    from kernel.canonical.items import proven_keys
    from kernel.canonical.timestamps import parse_timestamp

    liar = _liar("zzz", "status")
    before = (proven_keys({liar: "purged"}), canonical_json({liar: 1}, "peer"))
    assert proven_keys({"status": "purged"}) is not None  # cached now
    assert canonical_json({"status": 1}, "peer") == '{"status":1}'  # cached now
    assert proven_keys({liar: "purged"}) is before[0] is None
    assert canonical_json({liar: 1}, "peer") == before[1] == '{"zzz":1}'
    assert parse_timestamp(AT)[1] == AT  # cached now
    with pytest.raises(KernelError):
        parse_timestamp(_liar("not a time", AT))


def test_recall_numbers_do_not_depend_on_the_ambient_decimal_context() -> None:
    import decimal

    from kernel.memory.recall import js_to_fixed

    values = [i / 7 for i in range(50)] + [0.1 + 0.2, 1 - 1e-9, 123456.0000005]
    expected = [js_to_fixed(v) for v in values]
    with decimal.localcontext() as ctx:
        ctx.clear_flags()
        ctx.prec = 3
        ctx.rounding = decimal.ROUND_FLOOR
        ctx.traps[decimal.Inexact] = ctx.traps[decimal.FloatOperation] = True
        assert [js_to_fixed(v) for v in values] == expected
        assert not any(ctx.flags.values())  # the caller's context is not touched either
