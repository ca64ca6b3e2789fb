"""``compact_context`` and ``reconcile``: the compaction use case over the ports.

:class:`CompactionKernel` drives the pure machine of :mod:`kernel.compaction.machine`
and carries out its effects through injected ports; it reads no clock, draws
no ids and does no I/O of its own (``clock`` and ``new_id`` are injected
values, the session store is a :class:`kernel.ports.SessionContextPort`).

The atomic commit (design 108 §8.2): read one fixed head → plan the candidate
(``kernel.planning.planner.plan_context``) → optionally summarize what was dropped →
verify the invariants (``kernel.compaction.invariants``) → compare-and-swap
append one event binding session id, input head and digest, policy version,
model profile, strategy, output digest, artifact refs, usage receipt and
started/committed times → the store advances the head.  A lost CAS returns a
``stale`` receipt with the current head and changes nothing; the caller
recomputes (the same operation id may then commit).  An operation id that
already committed (or is awaiting reconciliation) returns its stored receipt,
so retries are idempotent.

Receipts and events are wire dicts, byte-compatible with the JavaScript peer
under the ``peer`` digest profile (``tests/peer/test_peer_compaction.py``).
Errors raised after the operation started carry ``compaction_lifecycle``
(the peer's ``compactionLifecycle``) when the peer attaches one.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kernel.canonical.checks import bounded_string, identifier, known_fields, object_value
from kernel.canonical.digest import Profile, digest
from kernel.canonical.item_batch import normalize_context_items
from kernel.canonical.timestamps import epoch_ms_to_iso, now_from_value
from kernel.compaction import machine as m
from kernel.compaction.invariants import verify_compaction
from kernel.compaction.summary import (
    PROVIDER_USAGE_UNSETTLED,
    json_byte_length,
    normalize_summary_output,
)
from kernel.errors import IllegalTransition, InvalidArgument, LegacyWriterFenced, NonPortableValue
from kernel.planning.planner import PLAN_POLICY_FIELDS, item_order_key, plan_context
from kernel.ports import (
    CasResult,
    Clock,
    NewId,
    OperationRecord,
    SessionContextPort,
    SessionSnapshot,
    SummaryCancelled,
)

SCHEMA: Final = "chainlesschain.context-compaction/v1"
RECEIPT_DOMAIN: Final = "chainlesschain.compaction-receipt/v1"
EVENT_DOMAIN: Final = "chainlesschain.compaction-event/v1"
INPUT_DOMAIN: Final = "chainlesschain.compaction-input/v1"
OUTPUT_DOMAIN: Final = "chainlesschain.compaction-output/v1"
REQUEST_FIELDS: Final = frozenset(PLAN_POLICY_FIELDS) | {
    "operationId", "sessionId", "memoryRevision", "summarizer", "allowFallback", "now",
    "metadata",
}
#: Passed through to the plan compaction asks for.
_PLAN_FIELDS: Final = PLAN_POLICY_FIELDS
_RECONCILE_CODES: Final = frozenset({"reconciliation_required", PROVIDER_USAGE_UNSETTLED})
MAX_METADATA_BYTES: Final = 64 * 1024

Listener = Callable[[m.Announce], None]


def receipt_from_record(record: OperationRecord, profile: Profile) -> dict[str, Any]:
    """The receipt of an operation a store remembers (idempotent replay)."""
    payload = copy.deepcopy(dict(record.payload))
    if record.kind != "compaction":
        return payload
    receipt = dict(payload.get("receiptTemplate") or {})
    receipt["newHead"] = record.new_head
    receipt["eventDigest"] = payload.get("digest")
    receipt["digest"] = digest(receipt, RECEIPT_DOMAIN, profile)
    return receipt


def _attach(error: BaseException, machine: m.CompactionMachine) -> None:
    with contextlib.suppress(AttributeError):  # exceptions with __slots__ cannot carry it
        error.compaction_lifecycle = machine.lifecycle_wire()  # type: ignore[attr-defined]


class CompactionKernel:
    """The compaction surface of the kernel (peer: ``ContextMemoryKernel``)."""

    def __init__(
        self,
        session_port: SessionContextPort,
        *,
        clock: Clock,
        new_id: NewId,
        mode: str = "canonical",
        profile: Profile = "peer",
        listener: Listener | None = None,
    ) -> None:
        if mode not in ("canonical", "shadow"):
            raise InvalidArgument("Kernel mode must be shadow or canonical")
        self.port = session_port
        self.mode = mode
        self.profile: Profile = profile
        self._clock = clock
        self._new_id = new_id
        self._listener = listener

    # ----------------------------------------------------------------- helpers
    def _authority(self) -> None:
        if self.mode != "canonical":
            raise LegacyWriterFenced("shadow Context/Memory Kernel cannot mutate authority state")

    def _now(self) -> str:
        value = self._clock()
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise InvalidArgument("clock returned an invalid timestamp")
        return epoch_ms_to_iso(math.trunc(value))

    def _digest(self, value: Any, domain: str) -> str:
        return digest(value, domain, self.profile)

    def _plan(
        self, request: Mapping[str, Any], snapshot: SessionSnapshot, items: list[Any], now: str
    ) -> dict[str, Any]:
        plan_request: dict[str, Any] = {k: request[k] for k in _PLAN_FIELDS if k in request}
        plan_request["items"] = items
        plan_request["sessionHead"] = snapshot.head
        revision = request.get("memoryRevision")
        plan_request["memoryRevision"] = (
            revision if revision is not None else snapshot.memory_revision or 0
        )
        plan_request["now"] = now
        return plan_context(plan_request, profile=self.profile)

    def _started_at(self, request: Mapping[str, Any]) -> str:
        if "now" not in request:
            return self._now()
        value = request["now"]
        try:
            return epoch_ms_to_iso(0) if value is None else now_from_value(value, "now")[1]
        except NonPortableValue:
            raise
        except InvalidArgument:
            raise InvalidArgument(
                "now must be a valid timestamp", details={"field": "now"}
            ) from None

    # ----------------------------------------------------------------- use cases
    def reconcile(self, operation_id: Any) -> dict[str, Any]:
        """The stored receipt of an operation, or ``{operationId, status: not_found}``."""
        self._authority()
        op = identifier(operation_id, "operationId")
        record = self.port.read_operation(op)
        if record is None:
            return {"operationId": op, "status": "not_found"}
        return receipt_from_record(record, self.profile)

    def compact_context(self, raw_request: Any) -> dict[str, Any]:
        """Run one compaction; returns its receipt (see the module docstring).

        After the request checks this is one loop: step the machine, carry out the
        effects it returns in order (:meth:`_carry_out`), step it with the events they
        report.  Effects still pending when the machine moves on belong to the state it
        left and are dropped.  The loop ends at a ``ReturnReceipt`` effect, or — when an
        effect failed — once the failure's effects are done, by raising the error."""
        self._authority()
        request = object_value(raw_request, "CompactionRequest")
        known_fields(request, REQUEST_FIELDS, "CompactionRequest")
        operation_id = identifier(
            request.get("operationId") or f"compact-{self._new_id()}", "operationId"
        )
        session_id = bounded_string(request.get("sessionId"), "sessionId", 1, 160)
        existing = self.port.read_operation(operation_id)
        if existing is not None:
            return receipt_from_record(existing, self.profile)
        started_at = self._started_at(request)
        if "metadata" in request:
            json_byte_length(request["metadata"], "metadata", MAX_METADATA_BYTES, self.profile)
        flow = _Flow(request, started_at)
        machine, effects = m.step(
            m.CompactionMachine(), m.CompactionRequested(operation_id, session_id, started_at)
        )
        pending = deque(effects)
        error: BaseException | None = None
        while pending:
            effect = pending.popleft()
            if isinstance(effect, m.Announce):
                if self._listener is not None:
                    self._listener(effect)
                continue
            if isinstance(effect, m.ReturnReceipt):
                return self._receipt(flow, machine, effect)
            outcome = self._carry_out(flow, machine, effect)
            if outcome.events:
                pending.clear()
                for event in outcome.events:
                    machine, effects = m.step(machine, event)
                    pending.extend(effects)
            if outcome.error is not None:
                error = outcome.error
                if outcome.attach:
                    _attach(error, machine)
        if error is None:  # pragma: no cover - every edge that returns no receipt fails
            raise IllegalTransition(m.MACHINE_NAME, machine.state, "EffectsDone")
        raise error

    # ----------------------------------------------------------------- effects
    def _carry_out(
        self, flow: _Flow, machine: m.CompactionMachine, effect: m.Effect
    ) -> _Outcome:
        """One effect through the ports; returns the events it reports."""
        match effect:
            case m.ReadSnapshot(session_id=session_id):
                return self._read_snapshot(flow, session_id)
            case m.BuildPlan():
                return self._build_plan(flow)
            case m.InvokeSummarizer():
                return self._summarize(flow, machine)
            case m.VerifyCandidate():
                return self._verify(flow)
            case m.AppendCompaction(expected_head=head):
                return self._append(flow, machine, head)
            case m.PersistReconciliation(expected_head=head):
                return self._persist_reconciliation(flow, machine, head)
        raise TypeError(f"not an effect the kernel carries out: {type(effect).__name__}")

    def _read_snapshot(self, flow: _Flow, session_id: str) -> _Outcome:
        snapshot = self.port.read_snapshot(session_id)
        if not isinstance(snapshot, SessionSnapshot) or not snapshot.head:
            return _Outcome(
                (m.CompactionFailed("invalid_argument"),),
                InvalidArgument(
                    "SessionContextPort returned an invalid snapshot",
                    details={"sessionId": session_id},
                ),
            )
        flow.snapshot = snapshot
        flow.originals = normalize_context_items(list(snapshot.items), profile=self.profile)
        flow.input_digest = self._digest(
            {
                "sessionId": session_id,
                "head": snapshot.head,
                "items": [i["digest"] for i in flow.originals],
            },
            INPUT_DOMAIN,
        )
        return _Outcome((m.SnapshotRead(snapshot.head, flow.input_digest, self._now()),))

    def _build_plan(self, flow: _Flow) -> _Outcome:
        try:
            plan = self._plan(flow.request, flow.head_snapshot, flow.originals, flow.started_at)
        except Exception as error:
            code = getattr(error, "code", None) or "planning_failed"
            return _Outcome((m.CompactionFailed(str(code), self._now()),), error, attach=True)
        flow.plan = plan
        flow.outputs = list(plan["selected"])
        flow.plan_digest = plan["digest"]
        if callable(flow.request.get("summarizer")) and plan["dropped"]:
            return _Outcome((m.SummaryRequested(self._now()),))
        return _Outcome((self._candidate_built(flow),))

    def _candidate_built(self, flow: _Flow) -> m.CandidateBuilt:
        flow.candidate = sorted(
            normalize_context_items(flow.outputs, profile=self.profile), key=item_order_key
        )
        return m.CandidateBuilt(self._now())

    def _summarize(self, flow: _Flow, machine: m.CompactionMachine) -> _Outcome:
        request, snapshot, plan = flow.request, flow.head_snapshot, flow.plan
        originals = flow.originals
        dropped_ids = {entry["itemId"] for entry in plan["dropped"]}
        parents = [i for i in originals if i["itemId"] in dropped_ids]
        context: dict[str, Any] = {
            "operationId": machine.operation_id,
            "sessionId": machine.session_id,
            "inputHead": snapshot.head,
            "inputDigest": flow.input_digest,
            "contextPlanDigest": flow.plan_digest,
            "memoryRevision": plan["memoryRevision"],
        }
        for key in ("policyVersion", "modelProfile"):
            if key in request:
                context[key] = request[key]
        events: list[m.Event] = []
        try:
            summary = normalize_summary_output(
                request["summarizer"](copy.deepcopy(parents), context),
                parents,
                frozenset(i["itemId"] for i in originals),
                self.profile,
            )
            flow.usage = summary.usage_receipt
            if summary.degraded:
                flow.strategy = "deterministic-fallback"
                reason = summary.degraded_reason or "summarizer_degraded"
                events.append(m.SummaryDegraded(self._now(), reason))
            else:
                flow.strategy = "provider-backed"
            final = self._plan(
                request, snapshot, [*plan["selected"], *summary.items], flow.started_at
            )
            flow.plan_digest = final["digest"]
            flow.outputs = list(final["selected"])
            summary_ids = {i["itemId"] for i in summary.items}
            flow.summary_dropped = [e for e in final["dropped"] if e["itemId"] in summary_ids]
        except Exception as error:
            code = getattr(error, "code", None)
            if getattr(error, "outcome_unknown", False) or code in _RECONCILE_CODES:
                reason = str(code or "provider_outcome_unknown")
                return _Outcome((*events, m.OutcomeUnknown(self._now(), reason)))
            if isinstance(error, SummaryCancelled):
                return _Outcome((*events, m.Cancelled(self._now())), error, attach=True)
            if request.get("allowFallback") is not True:
                failed = m.CompactionFailed(str(code or "summarizer_failed"), self._now())
                return _Outcome((*events, failed), error, attach=True)
            flow.strategy = "deterministic-fallback"
            events.append(m.FallbackSelected(str(code or "summarizer_failed")))
        return _Outcome((*events, self._candidate_built(flow)))

    def _verify(self, flow: _Flow) -> _Outcome:
        verification = verify_compaction(flow.originals, flow.candidate)
        if not verification.ok:
            return _Outcome(
                (m.InvariantsViolated(verification.codes),),
                InvalidArgument(
                    "compaction candidate violates recovery invariants",
                    details=verification.to_wire(),
                ),
            )
        flow.output_digest = self._digest([i["digest"] for i in flow.candidate], OUTPUT_DOMAIN)
        flow.committed_at = self._now()
        return _Outcome((m.CandidateVerified(flow.committed_at),))

    def _append(self, flow: _Flow, machine: m.CompactionMachine, expected_head: str) -> _Outcome:
        request, plan, candidate = flow.request, flow.plan, flow.candidate
        prospective, _ = m.step(machine, m.CasCommitted(flow.committed_at, ""))
        status = "degraded" if machine.degraded else "committed"
        selected_ids = [i["itemId"] for i in candidate]
        flow.template = {
            "schema": SCHEMA,
            "schemaVersion": 1,
            "operationId": machine.operation_id,
            "sessionId": machine.session_id,
            "status": status,
            "inputHead": expected_head,
            "inputDigest": flow.input_digest,
            "outputDigest": flow.output_digest,
            "contextPlanDigest": flow.plan_digest,
            "memoryRevision": plan["memoryRevision"],
            "selectedItemIds": selected_ids,
            "lifecycle": prospective.lifecycle_wire(),
        }
        event: dict[str, Any] = {
            "schema": SCHEMA,
            "schemaVersion": 1,
            "eventId": f"compaction-event-{self._new_id()}",
            "operationId": machine.operation_id,
            "sessionId": machine.session_id,
            "inputHead": expected_head,
            "inputDigest": flow.input_digest,
            "contextPlanDigest": flow.plan_digest,
            "memoryRevision": plan["memoryRevision"],
            "strategy": flow.strategy,
            "status": status,
            "outputDigest": flow.output_digest,
            "outputItems": candidate,
            "retainedItemIds": list(selected_ids),
            "dropped": [*plan["dropped"], *flow.summary_dropped],
            "artifactRefs": [i["contentRef"] for i in candidate if "contentRef" in i],
            "usageReceipt": flow.usage,
            "startedAt": flow.started_at,
            "committedAt": flow.committed_at,
            "receiptTemplate": flow.template,
        }
        for key in ("policyVersion", "modelProfile"):
            if key in request:
                event[key] = request[key]
        if "metadata" in request:
            event["metadata"] = copy.deepcopy(request["metadata"])
        event["digest"] = flow.event_digest = self._digest(event, EVENT_DOMAIN)
        try:
            flow.cas = cas = self.port.append_compaction(event, expected_head)
        except Exception as error:
            unknown = m.OutcomeUnknown(self._now(), "commit_outcome_unknown")
            return _Outcome((unknown,), error, attach=True)
        if not cas.ok:
            return _Outcome((m.CasLost(self._now(), cas.current_head),))
        return _Outcome((m.CasCommitted(flow.committed_at, str(cas.new_head)),))

    def _persist_reconciliation(
        self, flow: _Flow, machine: m.CompactionMachine, expected_head: str
    ) -> _Outcome:
        receipt: dict[str, Any] = {
            "schema": SCHEMA,
            "schemaVersion": 1,
            "operationId": machine.operation_id,
            "sessionId": machine.session_id,
            "status": "reconciliation_required",
            "inputHead": expected_head,
            "inputDigest": flow.input_digest,
        }
        for key in ("policyVersion", "modelProfile"):
            if key in flow.request:
                receipt[key] = flow.request[key]
        receipt["startedAt"] = flow.started_at
        receipt["lifecycle"] = machine.lifecycle_wire()
        receipt["digest"] = self._digest(receipt, RECEIPT_DOMAIN)
        flow.reconciliation = receipt
        persisted = self.port.append_reconciliation(receipt, expected_head)
        if not persisted.ok:
            return _Outcome((m.ReconciliationLost(persisted.current_head),))
        return _Outcome(())

    def _receipt(
        self, flow: _Flow, machine: m.CompactionMachine, effect: m.ReturnReceipt
    ) -> dict[str, Any]:
        """The receipt of the state the operation ended in (``effect.status``)."""
        if flow.reconciliation is not None:  # reconciliation_required, or stale when lost
            receipt = flow.reconciliation
            if effect.status == "stale":
                del receipt["digest"]
                receipt["status"] = "stale"
                receipt["currentHead"] = machine.current_head
                receipt["digest"] = self._digest(receipt, RECEIPT_DOMAIN)
            return receipt
        if effect.status == "stale":
            stale = {
                "schema": SCHEMA,
                "schemaVersion": 1,
                "operationId": machine.operation_id,
                "sessionId": machine.session_id,
                "status": "stale",
                "inputHead": machine.input_head,
                "currentHead": machine.current_head,
                "inputDigest": flow.input_digest,
                "outputDigest": flow.output_digest,
                "contextPlanDigest": flow.plan_digest,
                "memoryRevision": flow.plan["memoryRevision"],
                "lifecycle": machine.lifecycle_wire(),
            }
            stale["digest"] = self._digest(stale, RECEIPT_DOMAIN)
            return stale
        if flow.cas is not None and flow.cas.idempotent:  # a concurrent retry committed first
            record = self.port.read_operation(machine.operation_id)
            if record is not None:
                return receipt_from_record(record, self.profile)
        new_head = None if flow.cas is None else flow.cas.new_head
        receipt = {**flow.template, "newHead": new_head, "eventDigest": flow.event_digest}
        receipt["digest"] = self._digest(receipt, RECEIPT_DOMAIN)
        return receipt


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What carrying out one effect reported: the events to step the machine with, in
    order, and the error to raise once their effects are done (``attach``: with the
    machine's lifecycle on it, where the peer attaches one)."""

    events: tuple[m.Event, ...]
    error: BaseException | None = None
    attach: bool = False


class _Flow:
    """What one ``compact_context`` call has learnt so far (the machine holds the rest):
    filled in by the effects, in the order the machine asks for them."""

    def __init__(self, request: Mapping[str, Any], started_at: str) -> None:
        self.request = request
        self.started_at = started_at
        self.snapshot: SessionSnapshot | None = None
        self.originals: list[Any] = []
        self.input_digest = ""
        self.plan: dict[str, Any] = {}
        self.plan_digest = ""
        self.outputs: list[dict[str, Any]] = []
        self.usage: dict[str, Any] | None = None
        self.strategy = "deterministic-selection"
        self.summary_dropped: list[dict[str, Any]] = []
        self.candidate: list[Any] = []
        self.output_digest = ""
        self.committed_at = ""
        self.template: dict[str, Any] = {}
        self.event_digest = ""
        self.cas: CasResult | None = None
        self.reconciliation: dict[str, Any] | None = None

    @property
    def head_snapshot(self) -> SessionSnapshot:
        if self.snapshot is None:  # pragma: no cover - ReadSnapshot comes first
            raise InvalidArgument("no snapshot read yet")
        return self.snapshot
