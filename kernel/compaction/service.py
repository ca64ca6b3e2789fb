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
from collections.abc import Callable, Mapping
from typing import Any, Final

from kernel.canonical.checks import bounded_string, known_fields, object_value
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
from kernel.errors import InvalidArgument, LegacyWriterFenced, NonPortableValue
from kernel.planning.planner import item_order_key, plan_context
from kernel.ports import (
    Clock,
    NewId,
    OperationRecord,
    SessionContextPort,
    SessionSnapshot,
    SummaryCancelled,
)
from kernel.vocabulary import IDENTIFIER

SCHEMA: Final = "chainlesschain.context-compaction/v1"
RECEIPT_DOMAIN: Final = "chainlesschain.compaction-receipt/v1"
EVENT_DOMAIN: Final = "chainlesschain.compaction-event/v1"
INPUT_DOMAIN: Final = "chainlesschain.compaction-input/v1"
OUTPUT_DOMAIN: Final = "chainlesschain.compaction-output/v1"
REQUEST_FIELDS: Final = frozenset(
    {
        "operationId",
        "sessionId",
        "modelWindowTokens",
        "reservedOutputTokens",
        "safetyMarginTokens",
        "recoveryReserveTokens",
        "sink",
        "scopeAdmissions",
        "partitionCeilings",
        "partitionMinimums",
        "policyVersion",
        "modelProfile",
        "memoryRevision",
        "summarizer",
        "allowFallback",
        "now",
        "metadata",
    }
)
_PLAN_FIELDS: Final = (
    "modelWindowTokens",
    "reservedOutputTokens",
    "safetyMarginTokens",
    "recoveryReserveTokens",
    "sink",
    "scopeAdmissions",
    "partitionCeilings",
    "partitionMinimums",
    "policyVersion",
    "modelProfile",
)
_RECONCILE_CODES: Final = frozenset({"reconciliation_required", PROVIDER_USAGE_UNSETTLED})
MAX_METADATA_BYTES: Final = 64 * 1024

Listener = Callable[[m.Announce], None]


def identifier(value: Any, field: str) -> str:
    text = bounded_string(value, field, 1, 160)
    if IDENTIFIER.fullmatch(text) is None:
        raise InvalidArgument(f"{field} is not a safe identifier", details={"field": field})
    return text


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

    def _step(self, machine: m.CompactionMachine, event: m.Event) -> m.CompactionMachine:
        machine, effects = m.step(machine, event)
        if self._listener is not None:
            for effect in effects:
                if isinstance(effect, m.Announce):
                    self._listener(effect)
        return machine

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
        """Run one compaction; returns its receipt (see the module docstring)."""
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
        machine = self._step(
            m.CompactionMachine(), m.CompactionRequested(operation_id, session_id, started_at)
        )

        snapshot = self.port.read_snapshot(session_id)
        if not isinstance(snapshot, SessionSnapshot) or not snapshot.head:
            self._step(machine, m.CompactionFailed("invalid_argument"))
            raise InvalidArgument(
                "SessionContextPort returned an invalid snapshot", details={"sessionId": session_id}
            )
        originals = normalize_context_items(list(snapshot.items), profile=self.profile)
        input_digest = self._digest(
            {
                "sessionId": session_id,
                "head": snapshot.head,
                "items": [i["digest"] for i in originals],
            },
            INPUT_DOMAIN,
        )
        machine = self._step(machine, m.SnapshotRead(snapshot.head, input_digest, self._now()))

        try:
            plan = self._plan(request, snapshot, originals, started_at)
        except Exception as error:
            code = getattr(error, "code", None) or "planning_failed"
            machine = self._step(machine, m.CompactionFailed(str(code), self._now()))
            _attach(error, machine)
            raise

        outputs: list[dict[str, Any]] = list(plan["selected"])
        plan_digest: str = plan["digest"]
        usage: dict[str, Any] | None = None
        strategy = "deterministic-selection"
        summary_dropped: list[dict[str, Any]] = []
        summarizer = request.get("summarizer")
        if callable(summarizer) and plan["dropped"]:
            machine = self._step(machine, m.SummaryRequested(self._now()))
            dropped_ids = {entry["itemId"] for entry in plan["dropped"]}
            parents = [i for i in originals if i["itemId"] in dropped_ids]
            context: dict[str, Any] = {
                "operationId": operation_id,
                "sessionId": session_id,
                "inputHead": snapshot.head,
                "inputDigest": input_digest,
                "contextPlanDigest": plan_digest,
                "memoryRevision": plan["memoryRevision"],
            }
            for key in ("policyVersion", "modelProfile"):
                if key in request:
                    context[key] = request[key]
            try:
                summary = normalize_summary_output(
                    summarizer(copy.deepcopy(parents), context),
                    parents,
                    frozenset(i["itemId"] for i in originals),
                    self.profile,
                )
                usage = summary.usage_receipt
                if summary.degraded:
                    strategy = "deterministic-fallback"
                    reason = summary.degraded_reason or "summarizer_degraded"
                    machine = self._step(machine, m.SummaryDegraded(self._now(), reason))
                else:
                    strategy = "provider-backed"
                final = self._plan(
                    request, snapshot, [*plan["selected"], *summary.items], started_at
                )
                plan_digest = final["digest"]
                outputs = list(final["selected"])
                summary_ids = {i["itemId"] for i in summary.items}
                summary_dropped = [e for e in final["dropped"] if e["itemId"] in summary_ids]
            except Exception as error:
                code = getattr(error, "code", None)
                if getattr(error, "outcome_unknown", False) or code in _RECONCILE_CODES:
                    return self._reconciliation_required(
                        machine, request, snapshot, input_digest, started_at, code
                    )
                if isinstance(error, SummaryCancelled):
                    machine = self._step(machine, m.Cancelled(self._now()))
                    _attach(error, machine)
                    raise
                if request.get("allowFallback") is not True:
                    failed = m.CompactionFailed(str(code or "summarizer_failed"), self._now())
                    machine = self._step(machine, failed)
                    _attach(error, machine)
                    raise
                strategy = "deterministic-fallback"
                machine = self._step(machine, m.FallbackSelected(str(code or "summarizer_failed")))

        candidate = sorted(
            normalize_context_items(outputs, profile=self.profile), key=item_order_key
        )
        machine = self._step(machine, m.CandidateBuilt(self._now()))
        verification = verify_compaction(originals, candidate)
        if not verification.ok:
            self._step(machine, m.InvariantsViolated(verification.codes))
            raise InvalidArgument(
                "compaction candidate violates recovery invariants",
                details=verification.to_wire(),
            )
        output_digest = self._digest([i["digest"] for i in candidate], OUTPUT_DOMAIN)
        committed_at = self._now()
        machine = self._step(machine, m.CandidateVerified(committed_at))
        prospective, _ = m.step(machine, m.CasCommitted(committed_at, ""))
        status = "degraded" if machine.degraded else "committed"
        selected_ids = [i["itemId"] for i in candidate]
        template = {
            "schema": SCHEMA,
            "schemaVersion": 1,
            "operationId": operation_id,
            "sessionId": session_id,
            "status": status,
            "inputHead": snapshot.head,
            "inputDigest": input_digest,
            "outputDigest": output_digest,
            "contextPlanDigest": plan_digest,
            "memoryRevision": plan["memoryRevision"],
            "selectedItemIds": selected_ids,
            "lifecycle": prospective.lifecycle_wire(),
        }
        event: dict[str, Any] = {
            "schema": SCHEMA,
            "schemaVersion": 1,
            "eventId": f"compaction-event-{self._new_id()}",
            "operationId": operation_id,
            "sessionId": session_id,
            "inputHead": snapshot.head,
            "inputDigest": input_digest,
            "contextPlanDigest": plan_digest,
            "memoryRevision": plan["memoryRevision"],
            "strategy": strategy,
            "status": status,
            "outputDigest": output_digest,
            "outputItems": candidate,
            "retainedItemIds": list(selected_ids),
            "dropped": [*plan["dropped"], *summary_dropped],
            "artifactRefs": [i["contentRef"] for i in candidate if "contentRef" in i],
            "usageReceipt": usage,
            "startedAt": started_at,
            "committedAt": committed_at,
            "receiptTemplate": template,
        }
        for key in ("policyVersion", "modelProfile"):
            if key in request:
                event[key] = request[key]
        if "metadata" in request:
            event["metadata"] = copy.deepcopy(request["metadata"])
        event["digest"] = self._digest(event, EVENT_DOMAIN)

        try:
            cas = self.port.append_compaction(event, snapshot.head)
        except Exception as error:
            machine = self._step(machine, m.OutcomeUnknown(self._now(), "commit_outcome_unknown"))
            _attach(error, machine)
            raise
        if not cas.ok:
            machine = self._step(machine, m.CasLost(self._now(), cas.current_head))
            stale = {
                "schema": SCHEMA,
                "schemaVersion": 1,
                "operationId": operation_id,
                "sessionId": session_id,
                "status": "stale",
                "inputHead": snapshot.head,
                "currentHead": cas.current_head,
                "inputDigest": input_digest,
                "outputDigest": output_digest,
                "contextPlanDigest": plan_digest,
                "memoryRevision": plan["memoryRevision"],
                "lifecycle": machine.lifecycle_wire(),
            }
            stale["digest"] = self._digest(stale, RECEIPT_DOMAIN)
            return stale
        self._step(machine, m.CasCommitted(committed_at, str(cas.new_head)))
        if cas.idempotent:  # a concurrent retry of this operation committed first
            record = self.port.read_operation(operation_id)
            if record is not None:
                return receipt_from_record(record, self.profile)
        receipt = {**template, "newHead": cas.new_head, "eventDigest": event["digest"]}
        receipt["digest"] = self._digest(receipt, RECEIPT_DOMAIN)
        return receipt

    def _reconciliation_required(
        self,
        machine: m.CompactionMachine,
        request: Mapping[str, Any],
        snapshot: SessionSnapshot,
        input_digest: str,
        started_at: str,
        code: Any,
    ) -> dict[str, Any]:
        reason = str(code or "provider_outcome_unknown")
        machine = self._step(machine, m.OutcomeUnknown(self._now(), reason))
        receipt: dict[str, Any] = {
            "schema": SCHEMA,
            "schemaVersion": 1,
            "operationId": machine.operation_id,
            "sessionId": machine.session_id,
            "status": "reconciliation_required",
            "inputHead": snapshot.head,
            "inputDigest": input_digest,
        }
        for key in ("policyVersion", "modelProfile"):
            if key in request:
                receipt[key] = request[key]
        receipt["startedAt"] = started_at
        receipt["lifecycle"] = machine.lifecycle_wire()
        receipt["digest"] = self._digest(receipt, RECEIPT_DOMAIN)
        persisted = self.port.append_reconciliation(receipt, snapshot.head)
        if not persisted.ok:
            self._step(machine, m.ReconciliationLost(persisted.current_head))
            del receipt["digest"]
            receipt["status"] = "stale"
            receipt["currentHead"] = persisted.current_head
            receipt["digest"] = self._digest(receipt, RECEIPT_DOMAIN)
        return receipt
