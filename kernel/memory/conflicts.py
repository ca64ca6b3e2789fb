"""The conflict relation (design 108 §9.3, §10): an unresolved supersession, kept beside
the records it concerns — never inside them.

§9.3: conflicting memories are never settled by "last write wins"; when source
authority, time, scope and user correction cannot decide
(:func:`kernel.memory.policy.decide_supersession` answers ``conflict`` / ``unresolved``)
*both records stay* and recall shows the conflict.  A :class:`MemoryConflict` is that
fact, persisted by the :class:`~kernel.ports.MemoryPort` (``put_conflict`` /
``conflicts_of``) as an append-only relation::

    {conflictId, memoryIds: [a, b] (sorted), scope, scopeId?, recordDigests: [da, db],
     rule: "unresolved", recordedAt, operationId, authority?, reason?, digest}

* ``conflictId`` is derived from the pair (:func:`conflict_id_for`), so recording the
  same pair twice is idempotent: the first entry stays.
* ``recordDigests`` are the digests of the two record versions that were compared.
* ``digest`` binds the entry (``cmk.memory-conflict/v1``, RFC 8785).

MemoryRecord stays untouched (its schema v1 is closed and its wire form peer-exact).
Resolution is *derived*, never written: a conflict is **live** only while both records
are recallable (``active`` / ``reinforced``); once either is superseded, archived,
expired, deleted or purged the entry no longer shows.  Recall lists a
hit's live partners the request may see (:func:`conflict_partners` with the caller's
governance predicate).  Pure: time and the operation id are passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kernel.canonical.checks import (
    assert_scope,
    bounded_string,
    digest_value,
    identifier,
    known_fields,
    object_value,
    timestamp,
)
from kernel.canonical.digest import digest as _digest
from kernel.errors import DigestMismatch, InvalidArgument

__all__ = (
    "CONFLICT_DOMAIN",
    "CONFLICT_RULE",
    "MemoryConflict",
    "conflict_id_for",
    "conflict_partners",
    "parse_conflict",
    "record_conflict",
)

CONFLICT_DOMAIN: Final = "cmk.memory-conflict/v1"
CONFLICT_ID_DOMAIN: Final = "cmk.memory-conflict-id/v1"
CONFLICT_RULE: Final = "unresolved"
_FIELDS: Final = frozenset(
    {
        "conflictId",
        "memoryIds",
        "scope",
        "scopeId",
        "recordDigests",
        "rule",
        "recordedAt",
        "operationId",
        "authority",
        "reason",
        "digest",
    }
)


def conflict_id_for(first: str, second: str) -> str:
    """The pair's identity, independent of order: ``conflict-<sha256 hex>``."""
    pair = sorted((first, second))
    return "conflict-" + _digest({"memoryIds": pair}, CONFLICT_ID_DOMAIN)[7:]


@dataclass(frozen=True, slots=True)
class MemoryConflict:
    """One unresolved conflict between two records of one scope (append-only)."""

    conflict_id: str
    memory_ids: tuple[str, str]
    scope: str
    scope_id: str | None
    record_digests: tuple[str, str]
    recorded_at: str
    operation_id: str
    authority: str | None = None
    reason: str | None = None
    rule: str = CONFLICT_RULE

    def __post_init__(self) -> None:
        first, second = self.memory_ids
        if not first < second:
            raise InvalidArgument(
                "a conflict names two distinct memories in sorted order",
                details={"memoryIds": list(self.memory_ids)},
            )
        if self.conflict_id != conflict_id_for(first, second):
            raise InvalidArgument(
                "conflictId does not belong to memoryIds", details={"conflictId": self.conflict_id}
            )
        if self.rule != CONFLICT_RULE:
            raise InvalidArgument("a stored conflict is unresolved", details={"rule": self.rule})

    def other(self, memory_id: str) -> str:
        """The partner of ``memory_id`` in this conflict."""
        first, second = self.memory_ids
        if memory_id not in self.memory_ids:
            raise InvalidArgument(
                "memory is not part of the conflict", details={"memoryId": memory_id}
            )
        return second if memory_id == first else first

    def body(self) -> dict[str, Any]:
        """The wire form without ``digest``."""
        out: dict[str, Any] = {
            "conflictId": self.conflict_id,
            "memoryIds": list(self.memory_ids),
            "scope": self.scope,
        }
        if self.scope_id is not None:
            out["scopeId"] = self.scope_id
        out.update(
            recordDigests=list(self.record_digests),
            rule=self.rule,
            recordedAt=self.recorded_at,
            operationId=self.operation_id,
        )
        if self.authority is not None:
            out["authority"] = self.authority
        if self.reason is not None:
            out["reason"] = self.reason
        return out

    @property
    def digest(self) -> str:
        return _digest(self.body(), CONFLICT_DOMAIN)

    def to_wire(self) -> dict[str, Any]:
        out = self.body()
        out["digest"] = _digest(out, CONFLICT_DOMAIN)
        return out


def record_conflict(
    first: Mapping[str, Any],
    second: Mapping[str, Any],
    *,
    at: str,
    operation_id: str,
    authority: str | None = None,
    reason: str | None = None,
) -> MemoryConflict:
    """The conflict between two records of one scope (normalized MemoryRecords), as
    observed at ``at`` by operation ``operation_id``."""
    if (first["scope"], first.get("scopeId")) != (second["scope"], second.get("scopeId")):
        raise InvalidArgument(
            "only records of one scope can conflict",
            details={"memoryIds": [first["memoryId"], second["memoryId"]]},
        )
    pair = sorted((first, second), key=lambda r: str(r["memoryId"]))
    a, b = str(pair[0]["memoryId"]), str(pair[1]["memoryId"])
    return MemoryConflict(
        conflict_id=conflict_id_for(a, b),
        memory_ids=(a, b),
        scope=str(first["scope"]),
        scope_id=first.get("scopeId"),
        record_digests=(str(pair[0]["digest"]), str(pair[1]["digest"])),
        recorded_at=timestamp(at, "at"),
        operation_id=identifier(operation_id, "operationId"),
        authority=None if authority is None else identifier(authority, "authority"),
        reason=None if reason is None else bounded_string(reason, "reason", 1, 2048),
    )


def parse_conflict(raw: Any) -> MemoryConflict:
    """A stored conflict entry, every field checked and its digest re-verified."""
    value = object_value(raw, "MemoryConflict")
    known_fields(value, _FIELDS, "MemoryConflict")
    ids = _pair(value.get("memoryIds"), "memoryIds", identifier)
    digests = _pair(value.get("recordDigests"), "recordDigests", digest_value)
    scope = assert_scope(value.get("scope"), value.get("scopeId"))
    conflict = MemoryConflict(
        conflict_id=identifier(value.get("conflictId"), "conflictId"),
        memory_ids=ids,
        scope=scope["scope"],
        scope_id=scope.get("scopeId"),
        record_digests=digests,
        recorded_at=timestamp(value.get("recordedAt"), "recordedAt"),
        operation_id=identifier(value.get("operationId"), "operationId"),
        authority=identifier(value["authority"], "authority") if "authority" in value else None,
        reason=bounded_string(value["reason"], "reason", 1, 2048) if "reason" in value else None,
        rule=bounded_string(value.get("rule"), "rule", 1, 64),
    )
    if digest_value(value.get("digest"), "digest") != conflict.digest:
        raise DigestMismatch(
            "MemoryConflict digest does not match its content",
            details={"conflictId": conflict.conflict_id},
        )
    return conflict


def _pair(value: Any, field: str, check: Callable[[Any, str], str]) -> tuple[str, str]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise InvalidArgument(f"{field} must hold exactly two entries", details={"field": field})
    return check(value[0], f"{field}[0]"), check(value[1], f"{field}[1]")


# --------------------------------------------------------------------------- derived views


def conflict_partners(
    conflicts: Iterable[MemoryConflict],
    memory_ids: Sequence[str],
    visible: Callable[[str], bool],
) -> dict[str, list[str]]:
    """For each of ``memory_ids``, the sorted partners it is in conflict with that pass
    ``visible`` (the caller's governance predicate: a partner the caller may not see is
    never named).  Ids without a visible partner are absent."""
    wanted = set(memory_ids)
    found: dict[str, set[str]] = {}
    for conflict in conflicts:
        for memory_id in conflict.memory_ids:
            if memory_id in wanted:
                found.setdefault(memory_id, set()).add(conflict.other(memory_id))
    out: dict[str, list[str]] = {}
    for memory_id in memory_ids:
        partners = sorted(p for p in found.get(memory_id, ()) if visible(p))
        if partners:
            out[memory_id] = partners
    return out
