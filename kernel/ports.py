"""Ports (design 108 §11): the kernel's view of storage and providers.

Adapters in ``kernel/adapters/`` (and in ``shadow/``) implement these
Protocols; one conformance suite runs over every adapter.  Ports are
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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol, TypeAlias, runtime_checkable

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
