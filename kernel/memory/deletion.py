"""Memory deletion and its reconciliation (design 108 §9.4, §12.3).

A deletion request binds subject, scope, selector, authority, request id and fence
(:func:`parse_deletion_request`).  The operation then walks one table,
:data:`OPERATION_MACHINE` (a :class:`kernel.machine.Machine`; a step its stored state
does not allow raises :class:`~kernel.errors.IllegalTransition`)::

    prepared ──tombstone committed──► tombstoned ──all copies purged + purge committed──► purged
                                           │                                                ▲
                                           ├─some copy pending──► purge_pending ──reconcile─┤
                                           └─purge commit lost──► commit_pending ─reconcile─┘

1. the tombstone (state ``deleted``, revision + 1, the fence) is committed to the
   memory authority **first**, together with the operation record, so an offline
   replica can never write the body back (:func:`kernel.memory.lifecycle.merge_replica_record`);
2. then every copy is purged: the content object (when the record had a
   ``contentRef``), then each :class:`~kernel.ports.PurgePort` (indexes,
   embeddings, caches, replicas) in order;
3. only when every copy answers ``purged`` is the ``purge`` transition committed,
   together with the sealed operation (its receipt) in the same transaction.

The purge step (step 2: the purge requests, the ports, each store's settled entry) lives
in :mod:`kernel.memory.purge`.

Each record is verified once: when it is read (the reducer verifies what the store hands
back, in full: a store's bytes are never trusted).  What the reducer then produces — the
tombstone, the purged version — is a :class:`~kernel.canonical.records.VerifiedRecord`, which
the purge step and the stores take without checking it again; nothing else is trusted
(``docs/adr/0011-purity-by-type.md``).

The receipt lists every store — the authority first (``tombstoned`` / ``purged``),
then one entry per copy — and its status is ``purged`` only when all of them are;
otherwise ``partial`` (a copy is pending) or ``reconciliation_required`` (the purge
commit lost its CAS), never a global success.  :func:`reconcile_deletion` resumes
from the stored operation (re-running every purge target, re-applying the tombstone
when an external restore brought the old version back), and reports
``tombstone_missing`` / ``tombstone_fence_mismatch`` instead of guessing.  The
selector must be exactly ``memory:<memoryId>``: a deletion never reaches beyond the
one record it names.  A reused request id must repeat memoryId, fence, authority,
subject and selector (``revision_conflict`` otherwise) and then replays.

Compaction, archiving (``decideMemory`` ``archive``), index deletion (a
:class:`PurgePort`'s own API) and memory deletion are four different operations;
only this module deletes memory.  Byte-compatible with the peer's ``deleteMemory``
/ ``reconcile`` (``tests/peer/test_peer_deletion.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from kernel.canonical.checks import (
    assert_scope,
    bounded_integer,
    bounded_string,
    js_falsy,
    known_fields,
    object_value,
)
from kernel.canonical.items import kernel_digest, proven_keys
from kernel.canonical.records import (
    fast_identifier,
    verified_fields,
)
from kernel.errors import InvalidArgument, KernelError, RevisionConflict, ScopeDenied
from kernel.machine import Machine
from kernel.memory.lifecycle import Transition, clock_iso, transition_memory
from kernel.memory.purge import DeletionContext, port_names, run_targets
from kernel.ports import MemoryCommit
from kernel.vocabulary import MAX_SAFE_INTEGER, SCOPE_ID_REQUIRED

__all__ = (
    "OPERATION_MACHINE",
    "OPERATION_TRANSITIONS",
    "DeletionContext",
    "delete_memories",
    "delete_memory",
    "parse_deletion_request",
    "reconcile_deletion",
)

RECEIPT_SCHEMA: Final = "chainlesschain.memory-deletion-receipt/v1"
RECEIPT_DOMAIN: Final = "chainlesschain.memory-deletion-receipt/v1"

#: After the tombstone: a copy still pending, the purge commit lost, or every copy purged
#: and the purge committed.
_PURGE_OUTCOMES: Final = MappingProxyType({
    "copy_pending": "purge_pending",
    "purge_commit_lost": "commit_pending",
    "purge_committed": "purged",
})
#: A deletion operation's states; events are what the deletion learnt.  The operation
#: enters ``tombstoned`` in the transaction that commits the tombstone (a lost commit
#: discards it); a reconciliation resumes from whichever pending state was stored.
OPERATION_MACHINE: Final[Machine[str, str, object]] = Machine(
    name="deletion",
    initial="prepared",
    table={
        "prepared": {"tombstone_committed": "tombstoned"},
        "tombstoned": _PURGE_OUTCOMES,
        "purge_pending": _PURGE_OUTCOMES,
        "commit_pending": _PURGE_OUTCOMES,
        "purged": {},
    },
)
#: The table as ``from -> allowed targets``.
OPERATION_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = MappingProxyType({
    state: OPERATION_MACHINE.targets(state) for state in OPERATION_MACHINE.states
})
_REQUEST_FIELDS: Final = frozenset(
    {
        "requestId",
        "subject",
        "scope",
        "scopeId",
        "selector",
        "memoryId",
        "expectedRevision",
        "fence",
        "authority",
        "reason",
    }
)
_BINDING: Final = ("memoryId", "fence", "authority", "subject", "selector")

#: Called with ``(target name, request)`` before each purge target runs (observability).


def _advance(operation: dict[str, Any], event: str) -> None:
    """Step the operation's state by :data:`OPERATION_MACHINE` (``IllegalTransition`` for an
    event its stored state does not allow)."""
    operation["state"] = OPERATION_MACHINE.step(operation["state"], event)[0]


def parse_deletion_request(raw: Any) -> dict[str, Any]:
    """Validate a ``MemoryDeletionRequest`` in the peer's order; returns the binding."""
    request = raw if type(raw) is dict else object_value(raw, "DeletionRequest")
    if not _REQUEST_FIELDS.issuperset(request):
        known_fields(request, _REQUEST_FIELDS, "DeletionRequest")
    memory_id = fast_identifier(request.get("memoryId"), "memoryId")
    out: dict[str, Any] = {
        "requestId": fast_identifier(request.get("requestId"), "requestId"),
        "subject": fast_identifier(request.get("subject"), "subject"),
    }
    selector = request.get("selector")
    if type(selector) is not str or not 0 < len(selector) <= 256:  # ≤ 512 UTF-16 units
        selector = bounded_string(selector, "selector", 1, 512)
    out["selector"] = selector
    if selector != f"memory:{memory_id}":
        raise InvalidArgument("deletion selector must exactly bind the target memory ID")
    scope = request.get("scope")
    if type(scope) is str and scope in SCOPE_ID_REQUIRED:  # ``assert_scope`` of a scope with an id
        out["scope"] = scope
        out["scopeId"] = fast_identifier(request.get("scopeId"), "scopeId")
    else:
        out.update(assert_scope(scope, request.get("scopeId")))
    out["memoryId"] = memory_id
    out["fence"] = fast_identifier(request.get("fence"), "fence")
    expected = request.get("expectedRevision")
    if type(expected) is not int or not 1 <= expected <= MAX_SAFE_INTEGER:
        expected = bounded_integer(expected, "expectedRevision", 1)
    out["expectedRevision"] = expected
    out["authority"] = fast_identifier(request.get("authority"), "authority")
    reason = request.get("reason")
    if reason is not None and not js_falsy(reason):
        out["reason"] = reason
    return out


def deletion_receipt(
    ctx: DeletionContext,
    operation: Mapping[str, Any],
    status: str,
    record: Mapping[str, Any],
    stores: Sequence[Mapping[str, Any]],
    completed_at: str | None = None,
) -> dict[str, Any]:
    """The ``DeletionReceipt``; ``completed_at`` is read from the clock when not given.
    ``stores`` entries are taken as they are (the caller's own, never a port's)."""
    revision = record["revision"]
    authority = {
        "store": ctx.memory.name,
        "status": "purged" if status == "purged" else "tombstoned",
        "revision": revision,
    }
    if completed_at is None:
        completed_at = clock_iso(ctx.clock)
    receipt: dict[str, Any] = {
        "schema": RECEIPT_SCHEMA,
        "schemaVersion": 1,
        "requestId": operation["requestId"],
        "subject": operation["subject"],
        "selector": operation["selector"],
        "scope": operation["scope"],
        "scopeId": operation.get("scopeId"),
        "memoryId": operation["memoryId"],
        "fence": operation["fence"],
        "authority": operation["authority"],
        "status": status,
        "revision": revision,
        "recordState": record["state"],
        "recordDigest": record["digest"],
        "stores": [authority, *stores],
        "startedAt": operation["startedAt"],
        "completedAt": completed_at,
    }
    if not receipt["scopeId"]:  # present only when the operation has one
        del receipt["scopeId"]
    receipt["digest"] = _receipt_digest(receipt)
    return receipt


def _receipt_digest(receipt: Mapping[str, Any]) -> str:
    """The receipt digest: the fast canonical path when the receipt itself passes its gate
    (:func:`kernel.canonical.items.proven_keys`: exact-string keys sorting canonically,
    plain scalars — the stores' answers and entries read back from a store included), else
    the general peer canonicalisation."""
    return kernel_digest(receipt, RECEIPT_DOMAIN, "peer", proven_keys(receipt))


def _sealed(operation: Mapping[str, Any], receipt: Mapping[str, Any]) -> dict[str, Any]:
    """The operation as stored once purged (the store copies it, with the receipt): the
    ``purge_committed`` step of its stored state, taken before anything is written."""
    sealed = dict(operation)
    sealed.pop("contentRef", None)
    sealed.pop("evidenceRefs", None)
    _advance(sealed, "purge_committed")
    sealed["receipt"] = receipt
    return sealed


def _command(operation: Mapping[str, Any], kind: str, revision: int) -> dict[str, Any]:
    command: dict[str, Any] = {
        "type": kind,
        "expectedRevision": revision,
        "deletionFence": operation["fence"],
        "authority": operation["authority"],
    }
    if kind == "delete":
        reason = operation.get("reason")
        if reason is not None and not js_falsy(reason):
            command["reason"] = reason
    return command


def _purge_and_seal(
    ctx: DeletionContext,
    operation: dict[str, Any],
    committed_tombstone: Transition | Mapping[str, Any],
) -> dict[str, Any]:
    """Steps 2 and 3 over a committed tombstone — the reducer's own :class:`Transition`
    (delete: its record is a ``VerifiedRecord``, taken as it is), or a record read back from
    the store (reconcile: verified in full by the reducer); shared by delete and reconcile.

    The purge commit stores the record's last version, its event and the sealed operation
    (with its receipt) in one transaction.  The receipt's ``completedAt`` is read once,
    after the purge transition, whichever receipt it ends up in (the clock is called as
    often, and in the same order, as when the receipt was written after the commit)."""
    tombstone = (  # read-only here
        verified_fields(committed_tombstone.record)
        if isinstance(committed_tombstone, Transition)
        else committed_tombstone
    )
    stores = run_targets(ctx, operation)
    operation["stores"] = stores
    for entry in stores:
        if entry["status"] != "purged":
            _advance(operation, "copy_pending")
            ctx.memory.put_reconciliation(operation)
            return deletion_receipt(ctx, operation, "partial", tombstone, stores)
    purged, event = transition_memory(
        committed_tombstone,
        _command(operation, "purge", tombstone["revision"]),
        clock=ctx.clock,
        new_id=ctx.new_id,
    )
    completed_at = clock_iso(ctx.clock)
    receipt = deletion_receipt(
        ctx, operation, "purged", verified_fields(purged), stores, completed_at
    )
    sealed = _sealed(operation, receipt)
    committed = ctx.memory.commit(MemoryCommit(purged, event, sealed), tombstone["revision"])
    if not committed.ok:
        _advance(operation, "purge_commit_lost")
        ctx.memory.put_reconciliation(operation)
        return deletion_receipt(
            ctx, operation, "reconciliation_required", tombstone, stores, completed_at
        )
    operation["state"] = sealed["state"]
    return receipt


def delete_memory(ctx: DeletionContext, raw: Any) -> dict[str, Any]:
    """``deleteMemory``: tombstone first, then purge every copy; returns the receipt."""
    binding = parse_deletion_request(raw)
    request_id, memory_id = binding["requestId"], binding["memoryId"]
    existing = ctx.memory.get_reconciliation(request_id)
    if existing is not None:
        if any(existing.get(key) != binding[key] for key in _BINDING):
            raise RevisionConflict(
                "deletion request ID was reused with different authority binding",
                details={"requestId": request_id},
            )
        if existing.get("receipt"):
            return dict(existing["receipt"])  # the port's own copy
        return reconcile_deletion(ctx, request_id)
    # one path for every adapter: the MemoryPort protocol's read (no undeclared capability)
    current = ctx.memory.read(memory_id)
    if current is None:
        raise InvalidArgument("memory record does not exist", details={"memoryId": memory_id})
    if current["scope"] != binding["scope"] or current.get("scopeId") != binding.get("scopeId"):
        raise ScopeDenied(
            "deletion scope does not match memory authority", details={"memoryId": memory_id}
        )
    retention = current["retentionPolicy"]
    if retention["mode"] == "legal_hold":
        raise ScopeDenied(
            "memory is under legal hold",
            details={"memoryId": memory_id, "legalHoldId": retention.get("legalHoldId")},
        )
    operation: dict[str, Any] = {
        **binding,
        # ``current`` is the port's fresh copy, read-only here; the port copies on write
        "contentRef": current.get("contentRef"),
        "evidenceRefs": current["evidenceRefs"],
        "state": "prepared",
        "stores": [],
        "startedAt": clock_iso(ctx.clock),
    }
    command = _command(operation, "delete", binding["expectedRevision"])
    deletion = transition_memory(current, command, clock=ctx.clock, new_id=ctx.new_id)
    # the operation is stored with the tombstone, in the same transaction (the port keeps
    # its own copy); a lost commit discards it
    _advance(operation, "tombstone_committed")
    operation["tombstoneRevision"] = verified_fields(deletion.record)["revision"]
    committed = ctx.memory.commit(
        MemoryCommit(deletion.record, deletion.event, operation),
        current["revision"],
    )
    if not committed.ok:
        raise RevisionConflict(
            "memory changed before deletion tombstone commit",
            details={
                "memoryId": memory_id,
                "expectedRevision": current["revision"],
                "currentRevision": committed.current_revision,
            },
        )
    return _purge_and_seal(ctx, operation, deletion)


MAX_BATCH: Final = 100_000


def rejection(raw: Any, error: KernelError) -> dict[str, Any]:
    """A batch entry for a request that was refused before or while tombstoning: nothing
    of that request was deleted (``status: rejected``); ``requestId`` is the caller's when
    it was a string, else ``None``."""
    request_id = raw.get("requestId") if isinstance(raw, Mapping) else None
    return {
        "requestId": request_id if type(request_id) is str else None,
        "status": "rejected",
        "error": error.to_wire(),
    }


def delete_memories(
    ctx: DeletionContext,
    requests: Sequence[Any],
    before_each: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """``deleteMemory`` for each request, in order: entry ``i`` is request ``i``'s own
    ``DeletionReceipt`` (``purged`` / ``partial`` / ``reconciliation_required``, or the
    replayed one), or — when that request was refused with a :class:`KernelError`
    (validation, scope, legal hold, revision conflict, a reused request id) — a
    :func:`rejection`.  Every request is validated, bound, fenced, tombstoned first,
    purged from every store and receipted exactly as by :func:`delete_memory`; one
    request's failure never changes another's receipt, and nothing is deleted beyond the
    record each selector names.  ``before_each`` runs before each request (the kernel's
    authority gate) and refuses that request alone when it raises a :class:`KernelError`.
    Any other exception is a defect and propagates; the deletions already done are
    durable and their request ids replay their receipts."""
    if not isinstance(requests, list | tuple) or len(requests) > MAX_BATCH:
        raise InvalidArgument(
            f"deletion requests must be an array of at most {MAX_BATCH}",
            details={"field": "requests"},
        )
    if ctx.purge_names is None and ctx.purge_ports:  # the stores' names, read once
        ctx = dataclasses.replace(ctx, purge_names=port_names(ctx.purge_ports))
    out: list[dict[str, Any]] = []
    append = out.append
    for raw in requests:
        try:
            if before_each is not None:
                before_each()
            append(delete_memory(ctx, raw))
        except KernelError as error:
            append(rejection(raw, error))
    return out


def _report(request_id: str, status: str, reason: str | None = None) -> dict[str, Any]:
    report: dict[str, Any] = {"operationId": request_id, "status": status}
    if reason is not None:
        report["reason"] = reason
    return report


def reconcile_deletion(ctx: DeletionContext, request_id: str) -> dict[str, Any]:
    """Resume a deletion: its receipt if sealed, else re-run what is still pending.

    Returns a ``DeletionReceipt`` or a ``ReconciliationReport`` wire dict
    (``not_found``; ``reconciliation_required`` with ``tombstone_missing``,
    ``tombstone_commit_conflict`` or ``tombstone_fence_mismatch``).
    """
    operation = ctx.memory.get_reconciliation(request_id)
    if operation is None:
        return _report(request_id, "not_found")
    if operation.get("receipt"):
        return dict(operation["receipt"])  # the port's own copy
    current = ctx.memory.read(operation["memoryId"])
    if current is None:
        return _report(request_id, "reconciliation_required", "tombstone_missing")
    if current["state"] == "purged":
        receipt = deletion_receipt(ctx, operation, "purged", current, operation.get("stores") or [])
        ctx.memory.put_reconciliation(_sealed(operation, receipt))
        return receipt
    if current["state"] != "deleted" and current["revision"] == operation["expectedRevision"]:
        # an external restore brought the deleted version back: tombstone it again
        deletion = transition_memory(
            current,
            _command(operation, "delete", operation["expectedRevision"]),
            clock=ctx.clock,
            new_id=ctx.new_id,
        )
        committed = ctx.memory.commit(
            MemoryCommit(deletion.record, deletion.event, {**operation, "state": "tombstoned"}),
            current["revision"],
        )
        if not committed.ok:
            return _report(request_id, "reconciliation_required", "tombstone_commit_conflict")
        if deletion.record.get("deletionFence") != operation["fence"]:  # pragma: no cover
            return _report(request_id, "reconciliation_required", "tombstone_fence_mismatch")
        return _purge_and_seal(ctx, operation, deletion)
    if current["state"] != "deleted" or current.get("deletionFence") != operation["fence"]:
        return _report(request_id, "reconciliation_required", "tombstone_fence_mismatch")
    return _purge_and_seal(ctx, operation, current)
