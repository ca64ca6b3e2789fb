"""The memory use cases over ports: ``proposeMemory``, ``decideMemory``,
``deleteMemory``, ``reconcile`` and ``recallMemory`` (design 108 §15).

:class:`MemoryKernel` is the peer's ``ContextMemoryKernel`` for memory: it owns no
state beyond its ports and injected values (``clock`` epoch ms, ``new_id`` ids) and
does no I/O of its own.  Every mutation passes the authority gate first:

* ``mode="shadow"`` — the kernel runs beside the legacy writers and may not mutate
  (``legacy_writer_fenced``, §16 phase 1);
* with an :class:`AuthorityRegistry`, the kernel's ``writer`` must be the current
  canonical binding of its scope key, with an unexpired lease (``legacy_writer_fenced``
  otherwise; a missing writer is ``invalid_argument``).

``propose_memory`` commits a revision-1 record (CAS on revision 0: a duplicate
memoryId is ``revision_conflict``); ``decide_memory`` reads, applies one lifecycle
command (:func:`kernel.memory.lifecycle.apply_memory_command`) and commits it with CAS on the
revision it read; both return ``{record, event, receipt}`` with the port's
``storeRevision`` in the receipt.  Kernel extensions of ``decideMemory`` (absent from
the peer, ignored by it): ``conflictsWith`` (memoryIds whose conflict caps a
``reinforce``, :func:`kernel.memory.policy.reinforcement_ceiling`) and
``userCorrection`` (the user resolved a ``supersede``); a ``supersede`` whose
successor is in the same store must be justified by
:func:`kernel.memory.policy.decide_supersession`.  ``resolve_supersession`` applies that
rule to two stored records: it supersedes the loser, or keeps both and records the
unresolved conflict beside them (:mod:`kernel.memory.conflicts`), whose partners also cap
a ``reinforce``.  ``promote_memory_scope`` is the audited scope-widening command.
Deletion and reconciliation are :mod:`kernel.memory.deletion`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from kernel.canonical.checks import (
    bounded_integer,
    identifier,
    iso_now,
    known_fields,
    object_value,
    timestamp,
)
from kernel.canonical.timestamps import iso_to_epoch_ms
from kernel.errors import (
    IllegalTransition,
    InvalidArgument,
    LegacyWriterFenced,
    RevisionConflict,
    StoreFailure,
)
from kernel.machine import Machine
from kernel.memory.conflicts import parse_conflict, record_conflict
from kernel.memory.consolidation import ConsolidationSummarizer, consolidate_session
from kernel.memory.deletion import (
    DeletionContext,
    delete_memories,
    delete_memory,
    reconcile_deletion,
)
from kernel.memory.lifecycle import (
    RECALLABLE_STATES,
    TRANSITIONS,
    SecretProbe,
    apply_verified_command,
    memory_event,
    memory_receipt,
    verified_memory_candidate,
)
from kernel.memory.policy import decide_supersession, promote_scope, reinforcement_ceiling
from kernel.memory.recall import recall_memory
from kernel.ports import Clock, ContentPort, MemoryCommit, MemoryPort, NewId, PurgePort

__all__ = ("CUTOVER_MACHINE", "AuthorityRegistry", "IllegalCutover", "MemoryKernel", "RecallFn")

#: ``recall(port, request) -> result`` (the recall pipeline, :mod:`kernel.memory.recall`).
RecallFn = Callable[[MemoryPort, Mapping[str, Any]], Mapping[str, Any]]

# --------------------------------------------------------------------------- authority

MODES: Final = ("legacy", "shadow", "canonical")
STAGES: Final = (
    "inventory",
    "shadow",
    "internal_canary",
    "opt_in_canary",
    "canonical_default",
    "legacy_read_only",
    "retired",
)
STAGE_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = MappingProxyType({
    "inventory": frozenset({"shadow"}),
    "shadow": frozenset({"inventory", "internal_canary"}),
    "internal_canary": frozenset({"shadow", "opt_in_canary"}),
    "opt_in_canary": frozenset({"internal_canary", "canonical_default"}),
    "canonical_default": frozenset({"opt_in_canary", "legacy_read_only"}),
    "legacy_read_only": frozenset({"canonical_default", "retired"}),
    "retired": frozenset(),
})


class IllegalCutover(IllegalTransition, InvalidArgument):
    """A binding that moves its scope key to a stage :data:`STAGE_TRANSITIONS` does not
    allow from the current one.  On the wire it stays what the peer sends (code
    ``invalid_argument``, ``illegal cutover transition from <stage> to <stage>``, no
    details); it is also an :class:`IllegalTransition` naming machine, state and event
    (the requested stage)."""

    default_code = "invalid_argument"

    def __init__(self, machine: str, state: str, event: str) -> None:
        super().__init__(
            machine,
            state,
            event,
            message=f"illegal cutover transition from {state} to {event}",
            details={},
        )


#: The cut-over stages as a :class:`kernel.machine.Machine`: an event is the stage a new
#: binding names (a binding that keeps its stage is no transition).
CUTOVER_MACHINE: Final[Machine[str, str, object]] = Machine(
    name="cutover",
    initial="inventory",
    table={
        stage: {target: target for target in STAGES if target in targets}
        for stage, targets in STAGE_TRANSITIONS.items()
    },
    refusal=IllegalCutover,
)
_BINDING_FIELDS: Final = frozenset(
    {"scopeKey", "surface", "mode", "stage", "writerId", "generation", "leaseExpiresAt"}
)


def normalize_binding(raw: Any) -> dict[str, Any]:
    """A writer-authority binding (cut-over stage, mode, writer, generation, lease)."""
    value = object_value(raw, "ContextMemoryAuthorityBinding")
    known_fields(value, _BINDING_FIELDS, "ContextMemoryAuthorityBinding")
    mode, stage = value.get("mode"), value.get("stage")
    if mode not in MODES:
        raise InvalidArgument("authority mode is invalid", details={"mode": mode})
    if stage not in STAGES:
        raise InvalidArgument("cutover stage is invalid", details={"stage": stage})
    if stage in ("inventory", "shadow") and mode != "legacy":
        raise InvalidArgument(f"{stage} stage must retain legacy mutation authority")
    if stage in ("internal_canary", "opt_in_canary") and mode not in ("legacy", "canonical"):
        raise InvalidArgument(
            f"{stage} stage requires an explicit legacy/canonical cohort decision"
        )
    if stage in ("canonical_default", "legacy_read_only", "retired") and mode != "canonical":
        raise InvalidArgument(f"{stage} stage requires canonical authority")
    binding: dict[str, Any] = {
        "scopeKey": identifier(value.get("scopeKey"), "scopeKey"),
        "surface": identifier(value.get("surface"), "surface"),
        "mode": mode,
        "stage": stage,
        "writerId": identifier(value.get("writerId"), "writerId"),
        "generation": bounded_integer(value.get("generation"), "generation", 1),
    }
    if "leaseExpiresAt" in value:
        binding["leaseExpiresAt"] = timestamp(value["leaseExpiresAt"], "leaseExpiresAt")
    if mode == "canonical" and "leaseExpiresAt" not in binding:
        raise InvalidArgument("canonical authority requires an expiring writer lease")
    return binding


class AuthorityRegistry:
    """Which writer holds mutation authority per scope key (§16: one writer at a time)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._bindings: dict[str, dict[str, Any]] = {}

    def bind(self, raw: Any) -> dict[str, Any]:
        nxt = normalize_binding(raw)
        previous = self._bindings.get(nxt["scopeKey"])
        if previous is not None:
            if nxt["generation"] < previous["generation"]:
                raise InvalidArgument("authority generation cannot move backwards")
            if nxt["generation"] == previous["generation"] and nxt != previous:
                raise InvalidArgument("authority binding cannot change without a new generation")
            if nxt["stage"] != previous["stage"]:
                CUTOVER_MACHINE.step(previous["stage"], nxt["stage"])
        self._bindings[nxt["scopeKey"]] = nxt
        return dict(nxt)

    def get(self, scope_key: str) -> dict[str, Any] | None:
        binding = self._bindings.get(scope_key)
        return dict(binding) if binding is not None else None

    def assert_writer(self, writer: Mapping[str, Any]) -> dict[str, Any]:
        scope_key = writer.get("scopeKey")
        current = self._bindings.get(str(scope_key))
        if current is None:
            raise LegacyWriterFenced(
                "no context/memory writer authority is registered", details={"scopeKey": scope_key}
            )
        requested = {k: writer.get(k) for k in ("surface", "writerId", "generation", "mode")}
        if any(current[k] != v for k, v in requested.items()) or requested["mode"] != "canonical":
            raise LegacyWriterFenced(
                "context/memory writer is fenced",
                details={"scopeKey": scope_key, "requested": requested, "current": dict(current)},
            )
        if iso_to_epoch_ms(current["leaseExpiresAt"]) <= self._clock():
            raise LegacyWriterFenced(
                "canonical writer lease expired",
                details={"scopeKey": scope_key, "current": dict(current)},
            )
        return dict(current)


# --------------------------------------------------------------------------- the kernel

_EXTENSIONS: Final = ("conflictsWith", "userCorrection")
_RESOLVE_FIELDS: Final = frozenset(
    {"memoryIds", "userCorrection", "operationId", "at", "reason", "authority"}
)


class MemoryKernel:
    def __init__(
        self,
        *,
        memory_port: MemoryPort | None,
        clock: Clock,
        new_id: NewId,
        content_port: ContentPort | None = None,
        purge_ports: Sequence[PurgePort] = (),
        authority_registry: AuthorityRegistry | None = None,
        writer: Mapping[str, Any] | None = None,
        mode: str = "canonical",
        recall: RecallFn | None = None,
        secret_probe: SecretProbe | None = None,
    ) -> None:
        if mode not in ("shadow", "canonical"):
            raise InvalidArgument("Kernel mode must be shadow or canonical")
        if len(purge_ports) > 128:
            raise InvalidArgument("purgePorts must be a bounded array")
        self.memory_port = memory_port
        self.clock = clock
        self.new_id = new_id
        self.content_port = content_port
        self.purge_ports = tuple(purge_ports)
        self.authority_registry = authority_registry
        self.writer = writer
        self.mode = mode
        self.recall = recall
        self.secret_probe = secret_probe

    # ----------------------------------------------------------------- gates
    def _assert_mutation_authority(self) -> None:
        if self.mode != "canonical":
            raise LegacyWriterFenced("shadow Context/Memory Kernel cannot mutate authority state")
        if self.authority_registry is not None:
            if not self.writer:
                raise InvalidArgument(
                    "writer identity is required when authorityRegistry is configured"
                )
            self.authority_registry.assert_writer(self.writer)

    def _port(self) -> MemoryPort:
        if self.memory_port is None:
            raise InvalidArgument("MemoryPort must provide read, query, commit, and getRevision")
        return self.memory_port

    def _deletion(self) -> DeletionContext:
        return DeletionContext(
            self._port(), self.clock, self.new_id, self.content_port, self.purge_ports
        )

    # ----------------------------------------------------------------- use cases
    def propose_memory(self, request: Any) -> dict[str, Any]:
        """A new candidate (or an explicitly activated user memory) at revision 1."""
        self._assert_mutation_authority()
        port = self._port()
        # a VerifiedRecord: the port commits it without checking it again
        record = verified_memory_candidate(
            request, clock=self.clock, new_id=self.new_id, secret_probe=self.secret_probe
        )
        at = record["createdAt"]
        event = memory_event(
            record,
            from_state=None,
            previous_revision=0,
            at=at,
            event_id=f"memory-event-{self.new_id()}",
            type_="memory.activated" if record["state"] == "active" else "memory.candidate.created",
        )
        committed = port.commit(MemoryCommit(record, event), 0)
        if not committed.ok:
            raise RevisionConflict(
                "memory ID already exists",
                details={
                    "memoryId": record["memoryId"],
                    "currentRevision": committed.current_revision,
                },
            )
        receipt = memory_receipt(
            "propose",
            record,
            event,
            previous_revision=0,
            at=at,
            store_revision=committed.store_revision,
        )
        return {"record": record.to_wire(), "event": event, "receipt": receipt}

    def decide_memory(self, request: Any) -> dict[str, Any]:
        """One lifecycle command (``activate`` … ``purge``) against an expected revision."""
        self._assert_mutation_authority()
        value = object_value(request, "MemoryDecisionCommand")
        memory_id = identifier(value.get("memoryId"), "memoryId")
        command = {k: v for k, v in value.items() if k != "memoryId" and k not in _EXTENSIONS}
        port = self._port()
        current = port.read(memory_id)
        if current is None:
            raise InvalidArgument("memory record does not exist", details={"memoryId": memory_id})
        ceiling = self._policy_checks(port, current, command, value)
        record, event, applied = apply_verified_command(
            current, command, clock=self.clock, new_id=self.new_id, confidence_ceiling=ceiling
        )
        committed = port.commit(MemoryCommit(record, event), current["revision"])
        if not committed.ok:
            raise RevisionConflict(
                "memory changed before command commit",
                details={
                    "memoryId": memory_id,
                    "expectedRevision": current["revision"],
                    "currentRevision": committed.current_revision,
                },
            )
        receipt = memory_receipt(
            applied["operation"],
            record,
            event,
            previous_revision=current["revision"],
            at=applied["at"],
            store_revision=committed.store_revision,
        )
        return {"record": record.to_wire(), "event": event, "receipt": receipt}

    def _policy_checks(
        self,
        port: MemoryPort,
        current: Mapping[str, Any],
        command: Mapping[str, Any],
        value: Mapping[str, Any],
    ) -> float | None:
        """Kernel policy beyond the peer's table (§9.2, §9.3); ``None`` when not engaged."""
        kind = command.get("type")
        if kind == "reinforce":
            ids: list[Any] = []
            if "conflictsWith" in value:
                ids = value["conflictsWith"]
                if not isinstance(ids, list) or len(ids) > 128:
                    raise InvalidArgument(
                        "conflictsWith must be a bounded array", details={"field": "conflictsWith"}
                    )
                ids = [identifier(i, "conflictsWith") for i in ids]
            memory_id = current["memoryId"]
            recorded = [parse_conflict(c).other(memory_id) for c in port.conflicts_of([memory_id])]
            if not ids and not recorded:
                return None
            others = [port.read(i) for i in dict.fromkeys([*ids, *recorded])]
            return reinforcement_ceiling(current, [o for o in others if o is not None])
        if (
            kind == "supersede"
            and isinstance(command.get("successorMemoryId"), str)
            and command.get("expectedRevision") == current["revision"]
            and "superseded" in TRANSITIONS[current["state"]]
        ):  # only a command the reducer would accept; its own errors come first
            successor = port.read(command["successorMemoryId"])
            if successor is None or successor.get("state") not in ("active", "reinforced"):
                return None  # successor lives elsewhere (the peer's rule: id only)
            by_user = command["successorMemoryId"] if value.get("userCorrection") is True else None
            decision = decide_supersession(current, successor, corrected_by_user=by_user)
            if decision.outcome != "supersede" or decision.loser != current["memoryId"]:
                raise InvalidArgument(
                    "supersession is not justified by authority, time, scope or user correction",
                    details={
                        "memoryId": current["memoryId"],
                        "successorMemoryId": successor["memoryId"],
                        "decision": decision.to_wire(),
                    },
                )
        return None

    def resolve_supersession(self, request: Any) -> dict[str, Any]:
        """Decide two live records of one store by §9.3 and act on the decision.

        Request ``{memoryIds: [a, b], userCorrection?, operationId?, at?, reason?,
        authority?}`` (``userCorrection`` names the one of the two the user confirmed;
        ``operationId`` defaults to ``resolve-<new id>``).  Both records must exist and be
        ``active`` / ``reinforced``.  :func:`kernel.memory.policy.decide_supersession`
        then answers:

        * ``supersede`` — the loser receives ``supersede`` with the winner as successor,
          through :meth:`decide_memory` (every check of that path runs; CAS on the
          revision read); the result's ``superseded`` is its ``{record, event, receipt}``;
        * ``conflict`` — both stay; the conflict entry is stored beside the records
          (:mod:`kernel.memory.conflicts`, idempotent by pair): ``conflict`` is the stored
          entry, ``recorded`` says whether this call stored it;
        * ``independent`` (different scopes) — nothing is written.

        Result: ``{operationId, decision: {outcome, rule, winner?, loser?}, …}``.
        """
        self._assert_mutation_authority()
        value = object_value(request, "MemoryConflictResolution")
        known_fields(value, _RESOLVE_FIELDS, "MemoryConflictResolution")
        ids = value.get("memoryIds")
        if not isinstance(ids, list) or len(ids) != 2:
            raise InvalidArgument(
                "memoryIds must name exactly two memories", details={"field": "memoryIds"}
            )
        pair = [identifier(ids[0], "memoryIds[0]"), identifier(ids[1], "memoryIds[1]")]
        corrected = None
        if "userCorrection" in value:
            corrected = identifier(value["userCorrection"], "userCorrection")
            if corrected not in pair:
                raise InvalidArgument(
                    "userCorrection must name one of memoryIds", details={"field": "userCorrection"}
                )
        at = timestamp(value["at"], "at") if "at" in value else None
        operation_id = (
            identifier(value["operationId"], "operationId")
            if "operationId" in value
            else f"resolve-{self.new_id()}"
        )
        port = self._port()
        records = []
        for memory_id in pair:
            record = port.read(memory_id)
            if record is None:
                raise InvalidArgument(
                    "memory record does not exist", details={"memoryId": memory_id}
                )
            if record["state"] not in RECALLABLE_STATES:
                raise InvalidArgument(
                    "only active memories take part in conflict resolution",
                    details={"memoryId": memory_id, "state": record["state"]},
                )
            records.append(record)
        decision = decide_supersession(records[0], records[1], corrected_by_user=corrected)
        out: dict[str, Any] = {"operationId": operation_id, "decision": decision.to_wire()}
        if decision.outcome == "supersede":
            loser = records[0] if records[0]["memoryId"] == decision.loser else records[1]
            command: dict[str, Any] = {
                "memoryId": loser["memoryId"],
                "type": "supersede",
                "expectedRevision": loser["revision"],
                "successorMemoryId": decision.winner,
            }
            if decision.rule == "user_correction" and corrected == decision.winner:
                command["userCorrection"] = True
            if at is not None:
                command["at"] = at
            command.update({k: value[k] for k in ("reason", "authority") if k in value})
            out["superseded"] = self.decide_memory(command)
        elif decision.outcome == "conflict":
            conflict = record_conflict(
                records[0],
                records[1],
                at=iso_now(self.clock) if at is None else at,
                operation_id=operation_id,
                authority=value.get("authority"),
                reason=value.get("reason"),
            )
            recorded = port.put_conflict(conflict.to_wire())
            stored = [
                parse_conflict(c)
                for c in port.conflicts_of([conflict.memory_ids[0]])
                if c.get("conflictId") == conflict.conflict_id
            ]
            if len(stored) != 1:
                raise StoreFailure(
                    "the conflict relation did not keep the entry",
                    details={"conflictId": conflict.conflict_id},
                )
            out["conflict"] = stored[0].to_wire()
            out["recorded"] = recorded
        return out

    def promote_memory_scope(self, request: Any) -> dict[str, Any]:
        """The audited scope-widening command (:func:`kernel.memory.policy.promote_scope`)."""
        self._assert_mutation_authority()
        value = object_value(request, "ScopePromotion")
        port = self._port()
        memory_id = identifier(value.get("memoryId"), "memoryId")
        source = port.read(memory_id)
        if source is None:
            raise InvalidArgument("memory record does not exist", details={"memoryId": memory_id})
        mutation = promote_scope(source, value, clock=self.clock, new_id=self.new_id)
        committed = port.commit(MemoryCommit(mutation.record, mutation.event), 0)
        if not committed.ok:
            raise RevisionConflict(
                "memory ID already exists",
                details={
                    "memoryId": mutation.record["memoryId"],
                    "currentRevision": committed.current_revision,
                },
            )
        receipt = memory_receipt(
            "promote",
            mutation.record,
            mutation.event,
            previous_revision=0,
            at=mutation.receipt["at"],
            store_revision=committed.store_revision,
        )
        return {"record": mutation.record, "event": mutation.event, "receipt": receipt}

    def consolidate_session(
        self, request: Any, summarizer: ConsolidationSummarizer | None = None
    ) -> dict[str, Any]:
        """Consolidate a session into candidates (:mod:`kernel.memory.consolidation`) and
        commit each new one (``memory.candidate.created``); ids already present are
        reported as ``duplicate`` and left alone."""
        self._assert_mutation_authority()
        port = self._port()
        result = consolidate_session(request, summarizer=summarizer, secret_probe=self.secret_probe)
        receipts, duplicates = [], []
        for record in result.candidates:
            event = memory_event(
                record,
                from_state=None,
                previous_revision=0,
                at=record["createdAt"],
                event_id=f"memory-event-{self.new_id()}",
                type_="memory.candidate.created",
            )
            committed = port.commit(MemoryCommit(record, event), 0)
            if not committed.ok:
                duplicates.append(record["memoryId"])
                continue
            receipts.append(
                memory_receipt(
                    "propose",
                    record,
                    event,
                    previous_revision=0,
                    at=record["createdAt"],
                    store_revision=committed.store_revision,
                )
            )
        return {**result.to_wire(), "receipts": receipts, "duplicates": duplicates}

    def delete_memory(self, request: Any) -> dict[str, Any]:
        self._assert_mutation_authority()
        return delete_memory(self._deletion(), request)

    def delete_memories(self, requests: Any) -> list[dict[str, Any]]:
        """:meth:`delete_memory` for each request (:func:`kernel.memory.deletion.delete_memories`):
        one receipt — or one ``rejected`` entry — per request, in order.  The mutation
        authority is checked before every request, as the single-request API does."""
        return delete_memories(self._deletion(), requests, self._assert_mutation_authority)

    def reconcile(self, operation_id: Any) -> dict[str, Any]:
        self._assert_mutation_authority()
        request_id = identifier(operation_id, "operationId")
        return reconcile_deletion(self._deletion(), request_id)

    def recall_memory(self, request: Any) -> dict[str, Any]:
        """The recall pipeline over the port, bound to the store revision it read
        (default: :func:`kernel.memory.recall.recall_memory`, canonical profile, no index)."""
        port = self._port()
        revision = port.store_revision()
        if self.recall is not None:
            result = dict(self.recall(port, request))
        else:
            result = dict(recall_memory(port, request).result)
        result["memoryRevision"] = revision
        return result
