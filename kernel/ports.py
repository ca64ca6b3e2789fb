"""Ports (design 108 §11): the kernel's view of storage and providers.

Adapters in ``kernel/adapters/`` (and in ``shadow/``) implement these
Protocols; one conformance suite per Protocol runs over every adapter
(``tests/conformance/``: ``test_session_ports.py``, ``test_content_port.py``,
``test_memory_ports.py``, ``test_purge_ports.py``).  Every method the kernel and the
shadow shell call on a port is declared here; an adapter's other methods (``seed``,
``close``, test hooks) are for its owner, never called through the Protocol.  Ports are
synchronous; values crossing them are plain JSON mappings (ContextItems,
compaction events, receipts) or the frozen values below.

SessionContextPort
    ``read_snapshot(session_id)`` → :class:`SessionSnapshot` or ``None``;
    ``append_compaction(event, expected_head)`` → :class:`CasResult` — a
    compare-and-swap append: it commits only when the session head still equals
    ``expected_head`` and never overwrites; an ``operationId`` already committed
    answers ``ok`` with ``idempotent=True`` and its original head;
    ``append_reconciliation(receipt, expected_head)`` → :class:`CasResult`;
    ``read_operation(operation_id)`` → :class:`OperationRecord` or ``None``;
    ``compaction_events(session_id)`` / ``reconciliations(session_id)`` → what
    was committed, oldest first.
ContentPort
    ``put(content, policy)`` → :class:`ContentRef` (content-addressed, streamed);
    ``get(ref, access)`` → bytes, digest re-verified (``digest_mismatch``), missing
    object ``content_unavailable``, scope/sensitivity/sinks re-checked;
    ``purge(ref, fence)`` → :class:`PurgeReceipt`.
Summarizer
    ``summarizer(dropped_items, context)`` → summary output mapping
    ``{items, usageReceipt, degraded?, degradedReason?}``; raises
    :class:`SummarizerFailure` (``code``, ``outcome_unknown``) or
    :class:`SummaryCancelled`.

Memory ports
------------


:class:`MemoryPort` — the **authority** for memory records.  Values crossing it
are normalized MemoryRecord wire dicts (``kernel.canonical.records.normalize_memory_record``
output, digest included), memory events and deletion operations as plain JSON
mappings.  Adapters: ``kernel/adapters/in_memory/memory_store.py`` (the in-memory
model), ``kernel/adapters/sqlite/memory_store.py`` (SQLite, WAL); both pass
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
    the conflict relation (:mod:`kernel.memory.conflicts`): unresolved supersessions,
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
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import (
    Any,
    BinaryIO,
    Final,
    NamedTuple,
    Protocol,
    TypeAlias,
    TypeVar,
    cast,
    runtime_checkable,
)

from kernel.errors import InvalidArgument

#: Epoch milliseconds; the only clock the kernel knows.
Clock: TypeAlias = Callable[[], int]
#: Returns a fresh unique id (a uuid in production; scripted in tests).
NewId: TypeAlias = Callable[[], str]


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """The session at one head: the current context epoch's items.

    ``items`` are the latest compaction's output (the epoch's artifact) followed
    by the tail window appended since; ``epoch`` counts committed compactions.
    Raw evidence is never removed from the store, only from this projection.
    """

    session_id: str
    head: str
    memory_revision: int
    items: tuple[Mapping[str, Any], ...]
    epoch: int = 0


@dataclass(frozen=True, slots=True)
class CasResult:
    ok: bool
    new_head: str | None = None
    current_head: str | None = None
    idempotent: bool = False


@dataclass(frozen=True, slots=True)
class OperationRecord:
    """What a store remembers about an operation id.

    ``kind`` is ``compaction`` (``payload`` is the committed event, ``new_head``
    the head it produced) or ``reconciliation`` (``payload`` is the receipt).
    """

    kind: str
    payload: Mapping[str, Any]
    new_head: str | None = None


@runtime_checkable
class SessionContextPort(Protocol):
    def read_snapshot(self, session_id: str) -> SessionSnapshot | None: ...

    def append_compaction(self, event: Mapping[str, Any], expected_head: str) -> CasResult: ...

    def append_reconciliation(
        self, receipt: Mapping[str, Any], expected_head: str
    ) -> CasResult: ...

    def read_operation(self, operation_id: str) -> OperationRecord | None: ...

    def compaction_events(self, session_id: str) -> list[dict[str, Any]]: ...

    def reconciliations(self, session_id: str) -> list[dict[str, Any]]: ...


# --------------------------------------------------------------------------- content


@dataclass(frozen=True, slots=True)
class ContentPolicy:
    """How stored content may be read back (§8.4, §12)."""

    scope: str = "session"
    scope_id: str | None = None
    sensitivity: str = "internal"
    allowed_sinks: tuple[str, ...] = ("*",)
    mime_type: str | None = None
    summary: str = "Stored content"
    truncated: bool = False
    expires_at: str | None = None
    requires_approval: bool = False
    access_policy: str | None = None


@dataclass(frozen=True, slots=True)
class AccessContext:
    scope: str
    scope_id: str | None
    sink: str
    clearance: str = "restricted"
    approved: bool = False
    now: str | None = None


@dataclass(frozen=True, slots=True)
class ContentRef:
    store: str
    object_id: str
    digest: str
    byte_length: int
    summary: str
    recoverable: bool = True
    mime_type: str | None = None
    access_policy: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "store": self.store,
            "objectId": self.object_id,
            "digest": self.digest,
            "byteLength": self.byte_length,
        }
        if self.mime_type is not None:
            out["mimeType"] = self.mime_type
        out["summary"] = self.summary
        out["recoverable"] = self.recoverable
        if self.access_policy is not None:
            out["accessPolicy"] = self.access_policy
        return out

    @classmethod
    def from_wire(cls, value: Mapping[str, Any]) -> ContentRef:
        return cls(
            store=str(value["store"]),
            object_id=str(value["objectId"]),
            digest=str(value["digest"]),
            byte_length=int(value["byteLength"]),
            summary=str(value["summary"]),
            recoverable=bool(value.get("recoverable", True)),
            mime_type=value.get("mimeType"),
            access_policy=value.get("accessPolicy"),
        )


@dataclass(frozen=True, slots=True)
class PurgeReceipt:
    store: str
    object_id: str
    fence: str
    status: str = "purged"
    existed: bool = True


#: What ``put`` accepts: bytes, a binary file object, or an iterable of chunks.
ContentSource: TypeAlias = bytes | bytearray | memoryview | BinaryIO | Iterable[bytes]


@runtime_checkable
class ContentPort(Protocol):
    def put(self, content: ContentSource, policy: ContentPolicy) -> ContentRef: ...

    def get(self, ref: ContentRef, access: AccessContext) -> bytes: ...

    def purge(self, ref: ContentRef, fence: str) -> PurgeReceipt: ...


# --------------------------------------------------------------------------- summarizer


class SummarizerFailure(Exception):
    """A summarizer failed; ``outcome_unknown`` means the provider may have run."""

    def __init__(self, message: str, *, code: str | None = None, outcome_unknown: bool = False):
        super().__init__(message)
        self.code = code
        self.outcome_unknown = outcome_unknown


class SummaryCancelled(Exception):
    """The caller cancelled the provider call; compaction aborts, never falls back."""


class Summarizer(Protocol):
    def __call__(
        self, dropped_items: Sequence[Mapping[str, Any]], context: Mapping[str, Any]
    ) -> Mapping[str, Any]: ...


# --------------------------------------------------------------------------- memory
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


_JSON_SCALARS: Final = frozenset({str, int, bool, type(None)})


def json_value(value: Any, label: str = "value") -> Any:
    """``value`` as a store holds it: a new JSON value (objects with string keys, arrays —
    a tuple becomes a list —, strings, integers, finite numbers, booleans, ``null``; a
    ``str`` or ``int`` subclass becomes its plain value).  Anything else is refused with
    ``invalid_argument`` naming its type, the same way by every memory store, before
    anything is written (what ``json.dumps(allow_nan=False)`` of the SQLite store accepts,
    with non-string keys refused instead of converted)."""
    kind = type(value)
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise InvalidArgument(
                    f"{label} holds a key that is not a string",
                    details={"type": type(key).__name__},
                )
            out[key] = item if type(item) in _JSON_SCALARS else json_value(item, label)
        return out
    if kind is list or kind is tuple:
        return [item if type(item) in _JSON_SCALARS else json_value(item, label) for item in value]
    if kind in _JSON_SCALARS:
        return value
    if kind is float:
        if math.isfinite(value):
            return value
        raise InvalidArgument(f"{label} holds a number that is not finite", details={})
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, Mapping):
        return json_value(dict(value), label)
    if isinstance(value, list | tuple):
        return json_value(list(value), label)
    raise InvalidArgument(f"{label} is not a JSON value", details={"type": kind.__name__})


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
