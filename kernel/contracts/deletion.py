"""Deletion (design 108 §12.3) and reconciliation (§15) contracts.

A deletion binds subject, scope, selector, authority, request id and fence; the
kernel answers with one receipt entry per store, index, cache and replica, and
reports ``partial`` / ``reconciliation_required`` rather than a global success
while any required copy is pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from kernel.contracts._base import (
    Code,
    Constraint,
    Digest,
    Identifier,
    JsonObject,
    Reason,
    Revision,
    SchemaVersion,
    Scope,
    Selector,
    Timestamp,
    WireContract,
    check_scope_id,
)

DeletionStatus = Literal["partial", "reconciliation_required", "purged"]
TombstoneState = Literal["deleted", "purged"]
StoreStatus = Literal["purged", "tombstoned", "pending"]
ReconciliationStatus = Literal["not_found", "reconciliation_required"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryDeletionRequest(WireContract):
    """``deleteMemory``: writes a fenced tombstone, then purges every copy."""

    request_id: Identifier
    subject: Identifier
    scope: Scope
    scope_id: Identifier | None = None
    selector: Selector
    memory_id: Identifier
    expected_revision: Revision
    fence: Identifier
    authority: Identifier
    reason: Reason | None = None

    def __post_init__(self) -> None:
        check_scope_id(self.scope, self.scope_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryReconcileRequest(WireContract):
    """``reconcile(operationId)`` for a compaction or a deletion."""

    operation_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreError(WireContract):
    """Why a store's purge is pending (the thrown or returned code, at most 128 chars)."""

    code: Code


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreReceipt(WireContract):
    """One store / index / cache / replica entry of a deletion receipt."""

    store: Identifier
    status: StoreStatus
    revision: Revision | None = None
    receipt: JsonObject | None = None
    error: StoreError | None = None


StoreReceipts = Annotated[tuple[StoreReceipt, ...], Constraint(max_length=129)]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletionReceipt(WireContract):
    """The peer's ``MemoryDeletionReceipt``: per-store entries; never a false global success."""

    schema: Literal["chainlesschain.memory-deletion-receipt/v1"] = (
        "chainlesschain.memory-deletion-receipt/v1"
    )
    schema_version: SchemaVersion = 1
    request_id: Identifier
    subject: Identifier
    selector: Selector
    scope: Scope
    scope_id: Identifier | None = None
    memory_id: Identifier
    fence: Identifier
    authority: Identifier
    status: DeletionStatus
    revision: Revision
    record_state: TombstoneState
    record_digest: Digest
    stores: StoreReceipts
    started_at: Timestamp
    completed_at: Timestamp
    digest: Digest

    def __post_init__(self) -> None:
        check_scope_id(self.scope, self.scope_id)

    @property
    def pending(self) -> tuple[StoreReceipt, ...]:
        """Store entries still pending (non-empty whenever ``status`` is ``partial``)."""
        return tuple(s for s in self.stores if s.status == "pending")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconciliationReport(WireContract):
    """``reconcile`` when there is no receipt to return.

    ``reconcile`` answers with the operation's ``CompactionReceipt`` or
    ``DeletionReceipt`` when it can, and with this report otherwise
    (``not_found``; or ``reconciliation_required`` with a reason code such as
    ``tombstone_missing``).
    """

    operation_id: Identifier
    status: ReconciliationStatus
    reason: Code | None = None
