"""In-memory SessionContextPort: the naive reference model the conformance suite trusts.

Plain dicts and lists; every value is deep-copied (:func:`kernel.ports.json_copy`, a
``copy.deepcopy`` for JSON values) on the way in and on the way out, so a caller never
shares state with the port.

Semantics every adapter must share (``tests/conformance/test_session_ports.py``):

* ``append_compaction(event, expected_head)`` commits only when the head still
  equals ``expected_head``; it never overwrites.  A lost CAS answers
  ``CasResult(ok=False, current_head=...)`` and changes nothing.
* An ``operationId`` that already committed answers ``ok`` with
  ``idempotent=True`` and its original new head; nothing is appended twice.
* A commit starts a new context epoch: the snapshot's items become the event's
  ``outputItems``; the log (``evidence``) keeps every item ever seen.
* ``append_items`` adds to the tail window (a conversation turn) and advances
  the head; it is what a concurrent writer looks like to a compaction.
* ``append_reconciliation`` records a receipt under its operation id; it does
  not move the head.

The head after a commit is ``session_head(previous, event_digest)``, the
peer's ``canonicalDigest({previous, event}, "chainlesschain.session-head/v1")``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kernel.canonical.digest import Profile, digest
from kernel.ports import CasResult, OperationRecord, SessionSnapshot, json_copy

HEAD_DOMAIN = "chainlesschain.session-head/v1"

HeadFn = Callable[[str, str], str]


def session_head(previous: str, event_digest: str, profile: Profile = "peer") -> str:
    return digest({"previous": previous, "event": event_digest}, HEAD_DOMAIN, profile)


@dataclass
class _Session:
    session_id: str
    head: str
    memory_revision: int
    items: list[dict[str, Any]]
    epoch: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    reconciliations: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)


class InMemorySessionPort:
    """Dict-backed SessionContextPort (single process, no persistence)."""

    def __init__(
        self,
        *,
        profile: Profile = "peer",
        head_fn: HeadFn | None = None,
        normalize: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self._sessions: dict[str, _Session] = {}
        self._compactions: dict[str, OperationRecord] = {}
        self._reconciliations: dict[str, OperationRecord] = {}
        self._profile: Profile = profile
        self._head_fn: HeadFn = head_fn or (lambda prev, d: session_head(prev, d, profile))
        self._normalize = normalize

    # ----------------------------------------------------------------- seeding
    def seed(
        self,
        session_id: str,
        *,
        head: str = "head:0",
        memory_revision: int = 0,
        items: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        normalized = [self._item(i) for i in items]
        self._sessions[session_id] = _Session(
            session_id, head, memory_revision, normalized, evidence=json_copy(normalized)
        )

    def _item(self, item: Mapping[str, Any]) -> dict[str, Any]:
        return self._normalize(item) if self._normalize else json_copy(dict(item))

    # ----------------------------------------------------------------- port
    def read_snapshot(self, session_id: str) -> SessionSnapshot | None:
        state = self._sessions.get(session_id)
        if state is None:
            return None
        return SessionSnapshot(
            session_id=state.session_id,
            head=state.head,
            memory_revision=state.memory_revision,
            items=tuple(json_copy(state.items)),
            epoch=state.epoch,
        )

    def append_compaction(self, event: Mapping[str, Any], expected_head: str) -> CasResult:
        operation_id = str(event.get("operationId"))
        done = self._compactions.get(operation_id)
        if done is not None:
            return CasResult(ok=True, new_head=done.new_head, idempotent=True)
        state = self._sessions.get(str(event.get("sessionId")))
        if state is None or state.head != expected_head:
            return CasResult(ok=False, current_head=state.head if state else None)
        stored = json_copy(dict(event))
        state.events.append(stored)
        outputs = event.get("outputItems")
        if isinstance(outputs, list):
            state.items = [self._item(i) for i in outputs]
            state.evidence.extend(json_copy(state.items))
        state.epoch += 1
        state.head = self._head_fn(expected_head, str(event.get("digest")))
        self._compactions[operation_id] = OperationRecord("compaction", stored, state.head)
        return CasResult(ok=True, new_head=state.head)

    def append_reconciliation(self, receipt: Mapping[str, Any], expected_head: str) -> CasResult:
        state = self._sessions.get(str(receipt.get("sessionId")))
        if state is None or state.head != expected_head:
            return CasResult(ok=False, current_head=state.head if state else None)
        stored = json_copy(dict(receipt))
        state.reconciliations.append(stored)
        self._reconciliations[str(receipt.get("operationId"))] = OperationRecord(
            "reconciliation", stored, None
        )
        return CasResult(ok=True, new_head=state.head)

    def read_operation(self, operation_id: str) -> OperationRecord | None:
        record = self._compactions.get(operation_id) or self._reconciliations.get(operation_id)
        return json_copy(record) if record is not None else None

    def compaction_events(self, session_id: str) -> list[dict[str, Any]]:
        state = self._sessions.get(session_id)
        return json_copy(state.events) if state else []

    def reconciliations(self, session_id: str) -> list[dict[str, Any]]:
        state = self._sessions.get(session_id)
        return json_copy(state.reconciliations) if state else []

    # ----------------------------------------------------------------- tail window
    def append_items(
        self, session_id: str, items: Iterable[Mapping[str, Any]], expected_head: str | None = None
    ) -> CasResult:
        """Append conversation items to the tail window (advances the head)."""
        state = self._sessions.get(session_id)
        if state is None:
            return CasResult(ok=False, current_head=None)
        if expected_head is not None and state.head != expected_head:
            return CasResult(ok=False, current_head=state.head)
        for raw in items:
            item = self._item(raw)
            state.items.append(item)
            state.evidence.append(json_copy(item))
            state.head = self._head_fn(state.head, str(item.get("digest")))
        return CasResult(ok=True, new_head=state.head)

    def evidence(self, session_id: str) -> list[dict[str, Any]]:
        """Every item the session ever held, oldest first (raw evidence is kept)."""
        state = self._sessions.get(session_id)
        return json_copy(state.evidence) if state else []

    def set_head(self, session_id: str, head: str) -> None:
        """Test double: a concurrent writer replaced the head."""
        self._sessions[session_id].head = head

    def restore(
        self,
        session_id: str,
        events: Iterable[Mapping[str, Any]],
        reconciliations: Iterable[Mapping[str, Any]],
    ) -> None:
        """Re-attach committed events and reconciliation receipts to a seeded session
        (the operation records that make retries idempotent and ``reconcile`` answer): how
        a replay harness rebuilds a recorded session.

        An event committed at head ``inputHead`` produced ``head_fn(inputHead, digest)``,
        so the record's new head is recomputed, never trusted from the caller.
        """
        state = self._sessions[session_id]
        for raw in events:
            event = json_copy(dict(raw))
            new_head = self._head_fn(str(event.get("inputHead")), str(event.get("digest")))
            state.events.append(event)
            state.epoch += 1
            self._compactions[str(event.get("operationId"))] = OperationRecord(
                "compaction", event, new_head
            )
        for raw in reconciliations:
            receipt = json_copy(dict(raw))
            state.reconciliations.append(receipt)
            self._reconciliations[str(receipt.get("operationId"))] = OperationRecord(
                "reconciliation", receipt, None
            )
