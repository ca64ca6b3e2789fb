"""Memory ports (design 108 §11): the kernel's view of the memory authority and of
every other copy a deletion must purge.

:class:`MemoryPort` — the **authority** for memory records.  Values crossing it
are normalized MemoryRecord wire dicts (``kernel.normalize.normalize_memory_record``
output, digest included), memory events and deletion operations as plain JSON
mappings.  Adapters: ``kernel/adapters/memory_store_memory.py`` (the in-memory
model), ``kernel/adapters/sqlite_memory.py`` (SQLite, WAL); both pass
``tests/conformance/test_memory_ports.py``.  Semantics every adapter keeps:

``name``
    the store name written into deletion receipts (``in-memory-authority``, …).
``read(memory_id)``
    the current record or ``None`` (tombstones are records: ``deleted``/``purged``).
``commit(MemoryCommit(record, event, reconciliation?), expected_revision)``
    compare-and-swap on the record's revision: it writes only when the stored
    revision (0 for an absent record) equals ``expected_revision``; then it stores
    the record, appends the event, stores the reconciliation (deletion operation,
    keyed by ``requestId``) **in the same transaction**, and advances the store
    revision by one.  A failed CAS writes nothing and answers ``ok=False`` with the
    current record revision and store revision.  A committed record's ``revision``
    must be ``expected_revision + 1`` (``invalid_argument`` otherwise: an adapter
    never accepts a revision jump).
``store_revision()``
    the number of commits (seeded records count one each); it only grows.  It is the
    ``memoryRevision`` a context plan binds (§11).
``list_scope(scope, scope_id, states=None)``
    records of exactly one admitted scope (never a cross-scope scan), ordered by
    memoryId; ``states`` filters.
``records()``
    every record, ordered by memoryId — for rebuilding projections (indexes) and
    for conformance checks only; recall never uses it as a fallback.
``changes(since)``
    ``(store_revision, record)`` for every commit after store revision ``since``,
    oldest first: the change feed a rebuildable index follows.
``events(memory_id=None)``
    committed events, oldest first.
``get_reconciliation(request_id)`` / ``put_reconciliation(operation)`` / ``reconciliations()``
    deletion operations awaiting (or recording) convergence; ``put`` replaces.
``put_conflict(conflict)`` / ``conflicts_of(memory_ids)`` / ``conflicts()``
    the conflict relation (:mod:`kernel.memory_conflicts`): unresolved supersessions,
    stored beside the records, never inside them.  ``put`` is append-only and
    idempotent by ``conflictId``: it stores the entry and answers ``True``, or keeps
    the entry already stored under that id and answers ``False``.  ``conflicts_of``
    returns every entry whose ``memoryIds`` hold one of the ids (each entry once,
    ordered by ``conflictId``) by an index on the member ids — never a scan;
    ``conflicts()`` every entry, ordered by ``conflictId`` (snapshots and conformance).
    Recording a conflict changes no record: it does not advance the store revision
    and is not on the change feed (docs/adr/0007-memory-conflict-relation.md).

:class:`PurgePort` — any projection, index, embedding store, cache or replica
holding a copy.  ``purge(request)`` receives ``{memoryId, fence, subject,
selector, scope, scopeId?, evidenceRefs}`` and answers a receipt mapping whose
``status`` is ``"purged"`` when the copy is gone; anything else (another status,
a non-mapping, or an exception — its ``code`` is recorded) leaves the store
``pending`` and the deletion ``partial``.  Purging an absent copy is a success
(idempotent): ``reconcile`` re-runs every target.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple, Protocol, TypeVar, cast, runtime_checkable

__all__ = ("CommitResult", "MemoryCommit", "MemoryPort", "PurgePort", "json_copy")


_T = TypeVar("_T")


def json_copy(value: _T) -> _T:
    """``copy.deepcopy`` specialised for the JSON values crossing the ports (about 4x
    faster); anything that is not a dict, list or JSON scalar falls back to deepcopy."""
    return cast(_T, _copy(value))


_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _SCALARS else _copy(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SCALARS else _copy(v) for v in value]
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value)


class MemoryCommit(NamedTuple):
    """One atomic write: the record's new version, its event, and optionally the
    deletion operation (reconciliation) that must be durable with it.

    A ``NamedTuple`` (immutable, as a frozen dataclass; two are made per deletion), built
    by its own constructor like any other value."""

    record: Mapping[str, Any]
    event: Mapping[str, Any]
    reconciliation: Mapping[str, Any] | None = None


class CommitResult(NamedTuple):
    """``ok``: committed (``revision`` is the record's, ``store_revision`` the store's
    after the commit).  Not ``ok``: CAS lost, nothing written; ``current_revision``
    is the stored record's revision (0 when absent)."""

    ok: bool
    store_revision: int
    revision: int | None = None
    current_revision: int | None = None


@runtime_checkable
class MemoryPort(Protocol):
    @property
    def name(self) -> str: ...

    def read(self, memory_id: str) -> dict[str, Any] | None: ...

    def commit(self, commit: MemoryCommit, expected_revision: int) -> CommitResult: ...

    def store_revision(self) -> int: ...

    def list_scope(
        self, scope: str, scope_id: str | None, states: frozenset[str] | None = None
    ) -> list[dict[str, Any]]: ...

    def records(self) -> list[dict[str, Any]]: ...

    def changes(self, since: int = 0) -> list[tuple[int, dict[str, Any]]]: ...

    def events(self, memory_id: str | None = None) -> list[dict[str, Any]]: ...

    def get_reconciliation(self, request_id: str) -> dict[str, Any] | None: ...

    def put_reconciliation(self, operation: Mapping[str, Any]) -> None: ...

    def reconciliations(self) -> dict[str, dict[str, Any]]: ...

    def put_conflict(self, conflict: Mapping[str, Any]) -> bool: ...

    def conflicts_of(self, memory_ids: Iterable[str]) -> list[dict[str, Any]]: ...

    def conflicts(self) -> list[dict[str, Any]]: ...


@runtime_checkable
class PurgePort(Protocol):
    @property
    def name(self) -> str: ...

    def purge(self, request: Mapping[str, Any]) -> Any: ...
