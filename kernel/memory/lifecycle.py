"""Memory lifecycle (design 108 §9): one transition table and the reducer over it.

The whole lifecycle is :data:`TRANSITIONS` (from → allowed targets) and
:data:`COMMAND_TARGETS` (command type → target state); :data:`MACHINE` is the two as a
:class:`kernel.machine.Machine` whose events are the command types::

    candidate ──activate──► active ──reinforce──► reinforced ─┐ (reinforce again)
        │                     │  ◄────────────────────────────┘
        │                     ├──supersede──► superseded ──archive/expire──► …
        │                     ├──archive────► archived ◄──archive── expired
        │                     └──expire─────► expired  ──activate──► active
        │                                     archived ──activate──► active
        └──────── delete (from every live state) ──► deleted ──purge──► purged

:func:`apply_memory_command` is the reducer: ``(record, command) -> (record,
event, receipt)``, pure, byte-compatible with the peer's ``applyMemoryCommand``
(``tests/peer/test_peer_memory.py``).  Every command carries the expected
revision (``revision_conflict`` otherwise) and yields revision + 1; a state
change outside the table raises :class:`IllegalMemoryTransition` (an
:class:`~kernel.errors.IllegalTransition`, code ``illegal_memory_transition``, naming
machine, state and event).  ``delete``
turns the record into a tombstone (body, summary, content ref, tags, evidence
and sinks stripped; the fence recorded); ``purge`` needs the same fence.

:func:`create_memory_candidate` (the peer's ``createMemoryCandidate``) builds a
revision-1 record from a proposal: evidence refs required, secret-like content
rejected (``kernel.canonical.records.contains_secret_material`` plus an optional
secret-store probe).  :func:`merge_replica_record` merges a replica copy: a
tombstone never revives, scope never changes, data policy never weakens.

The policy rules of §9.2, §9.3 and §6.3 (bounded reinforcement against a
conflicting source, supersession by authority/time/scope/user correction, scope
promotion as its own audited command) are in :mod:`kernel.memory.policy`.
Clock and ids are injected callables, called only when the peer calls them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal, NamedTuple

from kernel.canonical.checks import (
    MISSING,
    assert_scope,
    boolean_value,
    bounded_integer,
    bounded_number,
    bounded_string,
    identifier,
    iso_now,
    js_falsy,
    known_fields,
    object_value,
    provenance,
    retention_policy,
    source_ref,
    string_set,
    timestamp,
)
from kernel.canonical.digest import digest
from kernel.canonical.items import canonical_keys, kernel_digest
from kernel.canonical.records import (
    LIFECYCLE_FIELDS,
    MEMORY_FIELDS,
    TOMBSTONE_SINK,
    TOMBSTONE_SOURCE,
    VerifiedRecord,
    contains_secret_material,
    fast_identifier,
    normalize_memory_record,
    purged_record,
    tombstone_record,
    verified_fields,
    verified_memory_record,
)
from kernel.canonical.timestamps import MAX_EPOCH_MS, format_epoch_ms
from kernel.errors import IllegalTransition, InvalidArgument, RevisionConflict, ScopeDenied
from kernel.errors import ReplicaTombstoneFenced as TombstoneFenced
from kernel.machine import Machine
from kernel.ports import Clock, NewId
from kernel.vocabulary import MAX_CONTENT_CHARS, MAX_SAFE_INTEGER

__all__ = (
    "COMMAND_TARGETS",
    "MACHINE",
    "TRANSITIONS",
    "IllegalMemoryTransition",
    "MemoryMutation",
    "MergeResult",
    "Transition",
    "apply_memory_command",
    "apply_verified_command",
    "create_memory_candidate",
    "merge_replica_record",
    "next_state",
    "state_diagram",
    "transition_memory",
    "verified_memory_candidate",
)

MACHINE_NAME: Final = "memory"
MemoryState = Literal[
    "candidate", "active", "reinforced", "superseded", "archived", "expired", "deleted", "purged"
]

# --------------------------------------------------------------------------- the table

TRANSITIONS: Final[Mapping[str, frozenset[str]]] = MappingProxyType({
    "candidate": frozenset({"active", "deleted"}),
    "active": frozenset({"reinforced", "superseded", "archived", "expired", "deleted"}),
    "reinforced": frozenset({"reinforced", "superseded", "archived", "expired", "deleted"}),
    "superseded": frozenset({"archived", "expired", "deleted"}),
    "archived": frozenset({"active", "expired", "deleted"}),
    "expired": frozenset({"archived", "active", "deleted"}),
    "deleted": frozenset({"purged"}),
    "purged": frozenset(),
})
COMMAND_TARGETS: Final[Mapping[str, str]] = MappingProxyType({
    "activate": "active",
    "reinforce": "reinforced",
    "supersede": "superseded",
    "archive": "archived",
    "expire": "expired",
    "delete": "deleted",
    "purge": "purged",
})
STATES: Final = tuple(TRANSITIONS)
TOMBSTONE_STATES: Final = frozenset({"deleted", "purged"})
#: Events and receipts hold only these keys (plus an event's caller ``fields``) and only
#: strings, safe integers and ``null``: their keys are proven to sort canonically, so their
#: canonical JSON is the fast encoder's sorted-keys output (``kernel_digest``).
_EVENT_KEYS: Final = canonical_keys(
    (
        frozenset(
            {"schema", "eventId", "type", "memoryId", "fromState", "toState",
             "previousRevision", "revision", "recordDigest", "at", "reason", "authority",
             "successorMemoryId"}
        ),
    )
)
_RECEIPT_KEYS: Final = canonical_keys(
    (
        frozenset(
            {"schema", "operation", "status", "memoryId", "previousRevision", "revision",
             "storeRevision", "recordDigest", "eventDigest", "at"}
        ),
    )
)
#: States default recall may return (§9.4: expired/archived stop taking part).
RECALLABLE_STATES: Final = frozenset({"active", "reinforced"})
DEFAULT_CONFIDENCE_DELTA: Final = 0.05

EVENT_SCHEMA: Final = "chainlesschain.memory-event/v1"
EVENT_DOMAIN: Final = "chainlesschain.memory-event/v1"
RECEIPT_SCHEMA: Final = "chainlesschain.memory-receipt/v1"
RECEIPT_DOMAIN: Final = "chainlesschain.memory-receipt/v1"

#: A proposal sets a record's own fields (not those the lifecycle owns) and may ask to
#: activate it at once.
_PROPOSAL_FIELDS: Final = (MEMORY_FIELDS - LIFECYCLE_FIELDS) | {"activate"}
_COMMAND_FIELDS: Final = frozenset(
    {
        "type",
        "expectedRevision",
        "confidenceDelta",
        "importance",
        "evidenceRefs",
        "tags",
        "summary",
        "successorMemoryId",
        "deletionFence",
        "reason",
        "authority",
        "at",
    }
)


class IllegalMemoryTransition(IllegalTransition):
    """A command whose target the table does not allow from the record's state.

    The peer's wire contract: code ``illegal_memory_transition``, details ``{from, to}``;
    ``machine``, ``state`` and ``event`` (the command type) as on every
    :class:`IllegalTransition`, and ``target``."""

    default_code = "illegal_memory_transition"

    def __init__(self, machine: str, state: str, event: str) -> None:
        target = COMMAND_TARGETS.get(event, event)
        super().__init__(
            machine,
            state,
            event,
            message=f"memory cannot transition from {state} to {target}",
            details={"from": state, "to": target},
        )
        self.target = target


#: The lifecycle as a :class:`kernel.machine.Machine`: events are command types, each
#: edge of :data:`TRANSITIONS` labelled with the command that leads to its target.
MACHINE: Final[Machine[str, str, object]] = Machine(
    name=MACHINE_NAME,
    initial="candidate",
    table={
        state: {kind: target for kind, target in COMMAND_TARGETS.items() if target in targets}
        for state, targets in TRANSITIONS.items()
    },
    refusal=IllegalMemoryTransition,
)


def next_state(state: str, command_type: str) -> str:
    """The table as a function: the state ``command_type`` leads to from ``state``."""
    if command_type not in COMMAND_TARGETS:
        raise InvalidArgument("unsupported MemoryCommand type", details={"type": command_type})
    return MACHINE.step(state, command_type)[0]


def state_diagram() -> str:
    """Mermaid state diagram drawn from :data:`MACHINE` (used by docs/memory.md)."""
    return MACHINE.diagram((("candidate", None), ("active", "propose(activate)")))


# --------------------------------------------------------------------------- time


def clock_iso(clock: Clock) -> str:
    """``iso_now(clock)`` — ``new Date(clock()).toISOString()``, one clock call.  An exact
    ``int`` in range is converted by :func:`kernel.canonical.timestamps.format_epoch_ms` (an
    ``lru_cache`` of the pure conversion: a deletion reads the clock four times, usually
    in the same millisecond); anything else is validated and converted (or refused) by
    ``iso_now``."""
    epoch = clock()
    if type(epoch) is not int or not -MAX_EPOCH_MS <= epoch <= MAX_EPOCH_MS:
        return iso_now(lambda: epoch)
    return format_epoch_ms(epoch)


# --------------------------------------------------------------------------- candidates

#: Probes content for a known secret-store value (§12.2); ``None`` means none configured.
SecretProbe = Callable[[str], bool]


def reject_secret_material(content: str, probe: SecretProbe | None = None) -> None:
    """The secret filter every candidate path passes (proposals and consolidation)."""
    if contains_secret_material(content) or (probe is not None and probe(content)):
        raise InvalidArgument(
            "MemoryRecord content appears to contain secret material", details={"field": "content"}
        )


def _or_empty(value: Any) -> Any:
    """JavaScript ``value || []``."""
    return [] if js_falsy(value) else value


def create_memory_candidate(
    proposal: Any, *, clock: Clock, new_id: NewId, secret_probe: SecretProbe | None = None
) -> dict[str, Any]:
    """The peer's ``createMemoryCandidate``: a normalized revision-1 record.

    ``activate: true`` creates it ``active`` (explicit user writes, §9.2), otherwise
    ``candidate``.  ``clock`` runs only without ``createdAt``; ``new_id`` only
    without ``memoryId`` (``mem-<id>``).
    """
    return normalize_memory_record(_candidate(proposal, clock, new_id, secret_probe))


def verified_memory_candidate(
    proposal: Any, *, clock: Clock, new_id: NewId, secret_probe: SecretProbe | None = None
) -> VerifiedRecord:
    """:func:`create_memory_candidate` as a :class:`VerifiedRecord` (what a port commits
    without checking it again)."""
    return verified_memory_record(_candidate(proposal, clock, new_id, secret_probe))


def _candidate(
    proposal: Any, clock: Clock, new_id: NewId, secret_probe: SecretProbe | None
) -> dict[str, Any]:
    """The raw revision-1 record of a proposal (normalized by the caller)."""
    value = object_value(proposal, "MemoryProposal")
    known_fields(value, _PROPOSAL_FIELDS, "MemoryProposal")
    get = value.get
    now = iso_now(clock) if "createdAt" not in value else timestamp(value["createdAt"], "createdAt")
    memory_id = get("memoryId")
    if js_falsy(memory_id):
        memory_id = f"mem-{new_id()}"
    raw: dict[str, Any] = {"schemaVersion": 1, "memoryId": memory_id}
    raw.update(assert_scope(get("scope"), get("scopeId", MISSING)))
    raw["category"] = identifier(get("category"), "category")
    raw["content"] = bounded_string(get("content"), "content", 1, MAX_CONTENT_CHARS)
    if "contentRef" in value:
        raw["contentRef"] = value["contentRef"]
    if "summary" in value:
        raw["summary"] = bounded_string(value["summary"], "summary", 1, 16 * 1024)
    raw["provenance"] = provenance(get("provenance"))
    evidence = get("evidenceRefs")
    if not isinstance(evidence, list | tuple) or not 1 <= len(evidence) <= 128:
        raise InvalidArgument(
            "evidenceRefs must contain 1-128 entries", details={"field": "evidenceRefs"}
        )
    raw["evidenceRefs"] = [source_ref(e, f"evidenceRefs[{i}]") for i, e in enumerate(evidence)]
    raw["confidence"] = bounded_number(get("confidence"), "confidence")
    raw["importance"] = bounded_number(get("importance"), "importance")
    raw["tags"] = string_set(_or_empty(get("tags")), "tags", 0, 128, 128)
    raw["sensitivity"] = get("sensitivity")
    raw["allowedSinks"] = string_set(_or_empty(get("allowedSinks")), "allowedSinks", 1, 128, 128)
    activate = "activate" in value and boolean_value(value["activate"], "activate")
    raw["state"] = "active" if activate else "candidate"
    raw["retentionPolicy"] = retention_policy(get("retentionPolicy"))
    raw.update(createdAt=now, updatedAt=now, accessCount=0)
    if "supersedes" in value:
        raw["supersedes"] = value["supersedes"]
    raw["revision"] = 1
    if secret_probe is not None:
        reject_secret_material(raw["content"], secret_probe)
    return raw


# --------------------------------------------------------------------------- the reducer


@dataclass(frozen=True, slots=True)
class MemoryMutation:
    """What one committed command produces (wire dicts, digests included)."""

    record: dict[str, Any]
    event: dict[str, Any]
    receipt: dict[str, Any]


def tombstone(record: Mapping[str, Any], at: str, fence: str) -> dict[str, Any]:
    """The body-free record a deletion leaves: it keeps identity, scope, sensitivity,
    retention and revision history, and points at the deleted version by digest.

    The reference construction: the reducer builds the same record directly in normal form
    (:func:`kernel.canonical.records.tombstone_record`), and a property test holds
    ``normalize_memory_record`` of this function's output equal to it."""
    out = {
        key: value
        for key, value in record.items()
        if key not in ("summary", "contentRef", "supersedes", "lastAccessedAt", "digest")
    }
    out.update(
        category="deleted",
        content="",
        provenance={"source": TOMBSTONE_SOURCE, "observedAt": at},
        evidenceRefs=[
            {"store": TOMBSTONE_SOURCE, "id": record["memoryId"], "digest": record["digest"]}
        ],
        confidence=0,
        importance=0,
        tags=[],
        allowedSinks=[TOMBSTONE_SINK],
        accessCount=0,
        deletionFence=fence,
    )
    return out


def _reinforce(
    current: Mapping[str, Any],
    command: Mapping[str, Any],
    nxt: dict[str, Any],
    ceiling: float | None,
) -> None:
    delta = command.get("confidenceDelta")
    delta = bounded_number(DEFAULT_CONFIDENCE_DELTA if delta is None else delta, "confidenceDelta")
    confidence = min(1, current["confidence"] + delta)
    if ceiling is not None:  # §9.2: repetition cannot override a conflicting source
        confidence = max(current["confidence"], min(confidence, ceiling))
    nxt["confidence"] = confidence
    if "importance" in command:
        nxt["importance"] = bounded_number(command["importance"], "importance")
    if "summary" in command:
        nxt["summary"] = bounded_string(command["summary"], "summary", 1, 16 * 1024)
    if "tags" in command:
        extra = string_set(command["tags"], "tags", 0, 128, 128)
        merged = list(dict.fromkeys([*current["tags"], *extra]))
        nxt["tags"] = string_set(merged, "tags", 0, 128, 128)
    if "evidenceRefs" in command:
        refs = command["evidenceRefs"]
        if not isinstance(refs, list | tuple) or len(refs) > 128:
            raise InvalidArgument(
                "evidenceRefs must be a bounded array", details={"field": "evidenceRefs"}
            )
        combined = [
            *current["evidenceRefs"],
            *(source_ref(e, f"evidenceRefs[{i}]") for i, e in enumerate(refs)),
        ]
        unique = {tuple(sorted(ref.items())): ref for ref in combined}
        if len(unique) > 128:
            raise InvalidArgument("combined evidenceRefs exceeds 128 entries")
        nxt["evidenceRefs"] = list(unique.values())


def apply_memory_command(
    record: Any,
    command: Any,
    *,
    clock: Clock,
    new_id: NewId,
    confidence_ceiling: float | None = None,
) -> MemoryMutation:
    """The peer's ``applyMemoryCommand``: validate, transition, re-digest, emit.

    ``confidence_ceiling`` (kernel policy, :func:`kernel.memory.policy.reinforcement_ceiling`)
    caps what a ``reinforce`` may raise confidence to; ``None`` is the peer's cap of 1.
    """
    new, event, receipt = apply_verified_command(
        record, command, clock=clock, new_id=new_id, confidence_ceiling=confidence_ceiling
    )
    return MemoryMutation(new.to_wire(), event, receipt)


def apply_verified_command(
    record: Any,
    command: Any,
    *,
    clock: Clock,
    new_id: NewId,
    confidence_ceiling: float | None = None,
) -> tuple[VerifiedRecord, dict[str, Any], dict[str, Any]]:
    """:func:`apply_memory_command` with the new record as a :class:`VerifiedRecord`
    (what a port commits without checking it again): ``(record, event, receipt)``."""
    current = verified_memory_record(record)
    new, event, kind, at = _transition(current, command, clock, new_id, confidence_ceiling)
    receipt = memory_receipt(
        kind,
        verified_fields(new),
        event,
        previous_revision=verified_fields(current)["revision"],
        at=at,
    )
    return new, event, receipt




class Transition(NamedTuple):
    """What :func:`transition_memory` produced: the new record (a
    :class:`~kernel.canonical.records.VerifiedRecord`: normal form, digest computed) and its
    event."""

    record: VerifiedRecord
    event: dict[str, Any]


def transition_memory(
    record: Transition | Mapping[str, Any],
    command: Any,
    *,
    clock: Clock,
    new_id: NewId,
) -> Transition:
    """:func:`apply_memory_command` without the ``MemoryReceipt``, for callers that write
    their own receipt (deletion).  Same checks, same clock and id calls.

    ``record`` (or a previous :class:`Transition`'s record) is taken as it is when it is a
    :class:`~kernel.canonical.records.VerifiedRecord` — the normaliser made it, so nothing
    is checked twice — and verified in full otherwise, as :func:`apply_memory_command`
    verifies it: a plain mapping is never trusted, whoever built it."""
    current = verified_memory_record(record.record if isinstance(record, Transition) else record)
    new, event, _, _ = _transition(current, command, clock, new_id, None)
    return Transition(new, event)


def _transition(
    current: VerifiedRecord,
    command: Any,
    clock: Clock,
    new_id: NewId,
    confidence_ceiling: float | None,
) -> tuple[VerifiedRecord, dict[str, Any], str, str]:
    """The reducer over a verified record: ``(record, event, command type, at)``."""
    fields = verified_fields(current)  # read-only here
    cmd = command if type(command) is dict else object_value(command, "MemoryCommand")
    if not _COMMAND_FIELDS.issuperset(cmd):
        known_fields(cmd, _COMMAND_FIELDS, "MemoryCommand")
    expected = cmd.get("expectedRevision")
    if type(expected) is not int or not 1 <= expected <= MAX_SAFE_INTEGER:
        expected = bounded_integer(expected, "expectedRevision", 1)
    if expected != fields["revision"]:
        raise RevisionConflict(
            "memory revision does not match",
            details={
                "memoryId": fields["memoryId"],
                "expectedRevision": expected,
                "actualRevision": fields["revision"],
            },
        )
    kind = cmd.get("type")
    if type(kind) is not str or not 0 < len(kind) <= 32:  # ≤ 32 code points: ≤ 64 UTF-16 units
        kind = bounded_string(kind, "type", 1, 64)
    target = next_state(fields["state"], kind)
    at = clock_iso(clock) if "at" not in cmd else timestamp(cmd["at"], "at")
    if kind == "delete":  # built in normal form (kernel.canonical.records), digest computed
        new = tombstone_record(
            current, at=at, fence=fast_identifier(cmd.get("deletionFence"), "deletionFence")
        )
    elif kind == "purge":
        fence = fast_identifier(cmd.get("deletionFence"), "deletionFence")
        if fence != fields.get("deletionFence"):
            raise RevisionConflict(
                "purge fence does not match deletion tombstone",
                details={"memoryId": fields["memoryId"]},
            )
        new = purged_record(current, at=at)
    else:
        nxt = current.to_wire()
        nxt.update(state=target, updatedAt=at, revision=fields["revision"] + 1)
        if kind == "reinforce":
            _reinforce(fields, cmd, nxt, confidence_ceiling)
        elif kind == "supersede":
            identifier(cmd.get("successorMemoryId"), "successorMemoryId")
        nxt.pop("digest", None)
        new = verified_memory_record(nxt)
    event = memory_event(
        verified_fields(new),
        from_state=fields["state"],
        previous_revision=fields["revision"],
        at=at,
        event_id=f"memory-event-{new_id()}",
        type_=f"memory.{target}",
        extra=cmd,
    )
    return new, event, kind, at


def memory_event(
    record: Mapping[str, Any],
    *,
    from_state: str | None,
    previous_revision: int,
    at: str,
    event_id: str,
    type_: str,
    extra: Mapping[str, Any] | None = None,
    fields: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A lifecycle event; ``reason``/``authority``/``successorMemoryId`` come from ``extra``
    (validated), further kernel fields from ``fields`` (already valid)."""
    event: dict[str, Any] = {
        "schema": EVENT_SCHEMA,
        "eventId": event_id,
        "type": type_,
        "memoryId": record["memoryId"],
        "fromState": from_state,
        "toState": record["state"],
        "previousRevision": previous_revision,
        "revision": record["revision"],
        "recordDigest": record["digest"],
        "at": at,
    }
    extra = extra or {}
    if "reason" in extra:
        event["reason"] = bounded_string(extra["reason"], "reason", 1, 2048)
    if "authority" in extra:
        event["authority"] = fast_identifier(extra["authority"], "authority")
    if "successorMemoryId" in extra:
        event["successorMemoryId"] = identifier(extra["successorMemoryId"], "successorMemoryId")
    if fields:
        event.update(fields)
        event["digest"] = digest(event, EVENT_DOMAIN, "peer")
    else:  # kernel-built keys and str / int / None values: the fast canonical path
        event["digest"] = kernel_digest(event, EVENT_DOMAIN, "peer", _EVENT_KEYS)
    return event


def memory_receipt(
    operation: str,
    record: Mapping[str, Any],
    event: Mapping[str, Any],
    *,
    previous_revision: int,
    at: str,
    store_revision: int | None = None,
) -> dict[str, Any]:
    """A ``MemoryReceipt``; the kernel API adds the port's ``storeRevision``."""
    receipt: dict[str, Any] = {
        "schema": RECEIPT_SCHEMA,
        "operation": operation,
        "status": "committed",
        "memoryId": record["memoryId"],
        "previousRevision": previous_revision,
        "revision": record["revision"],
    }
    if store_revision is not None:
        receipt["storeRevision"] = store_revision
    receipt.update(recordDigest=record["digest"], eventDigest=event["digest"], at=at)
    receipt["digest"] = kernel_digest(receipt, RECEIPT_DOMAIN, "peer", _RECEIPT_KEYS)
    return receipt


# --------------------------------------------------------------------------- replicas


@dataclass(frozen=True, slots=True)
class MergeResult:
    """``kept`` says which copy survives (``local`` also when both are identical)."""

    record: dict[str, Any]
    kept: Literal["local", "incoming"]


def merge_replica_record(local: Any, incoming: Any) -> MergeResult:
    """The peer's ``mergeReplicaRecord``: the higher revision wins, except that a
    tombstone never revives (``replica_tombstone_fenced``), scope never changes and
    sensitivity / allowed sinks never change at a higher revision (``scope_denied``);
    equal revisions must have equal digests (``revision_conflict``)."""
    mine = normalize_memory_record(local)
    theirs = normalize_memory_record(incoming)
    memory_id = mine["memoryId"]
    if memory_id != theirs["memoryId"]:
        raise InvalidArgument("replica records must have the same memoryId")
    if mine["scope"] != theirs["scope"] or mine.get("scopeId") != theirs.get("scopeId"):
        raise ScopeDenied(
            "replica merge cannot change memory scope", details={"memoryId": memory_id}
        )
    fence = mine.get("deletionFence")
    if mine["state"] == "purged":
        if theirs["state"] == "purged" and theirs.get("deletionFence") == fence:
            return MergeResult(mine, "local")
        raise TombstoneFenced(
            "purged memory cannot be restored by a replica",
            details={"memoryId": memory_id, "deletionFence": fence},
        )
    if mine["state"] == "deleted" and theirs["state"] not in TOMBSTONE_STATES:
        raise TombstoneFenced(
            "deleted memory cannot be restored by a replica",
            details={"memoryId": memory_id, "deletionFence": fence},
        )
    if mine["state"] in TOMBSTONE_STATES and theirs.get("deletionFence") != fence:
        raise TombstoneFenced(
            "replica deletion fence does not match authority", details={"memoryId": memory_id}
        )
    if theirs["revision"] < mine["revision"]:
        return MergeResult(mine, "local")
    if theirs["revision"] == mine["revision"]:
        if theirs["digest"] != mine["digest"]:
            raise RevisionConflict(
                "equal replica revisions have different digests",
                details={"memoryId": memory_id, "revision": mine["revision"]},
            )
        return MergeResult(mine, "local")
    if (
        theirs["sensitivity"] != mine["sensitivity"]
        or theirs["allowedSinks"] != mine["allowedSinks"]
    ):
        raise ScopeDenied(
            "replica merge cannot weaken data policy", details={"memoryId": memory_id}
        )
    return MergeResult(theirs, "incoming")
