"""Memory policy rules beside the lifecycle table (design 108 §6.3, §9.1–§9.3).

The peer's reducer (:mod:`kernel.memory.lifecycle`) enforces the table; these pure rules
decide *which* command is justified:

* **Source authority** (:func:`source_authority`): a rank per ``provenance.source``
  (user correction > explicit user memory > project file / verified > tool
  evidence / consolidation > automatic extraction / legacy import).
* **Supersession** (:func:`decide_supersession`, §9.3): never last write wins.  In
  order: records in different scopes never supersede each other; a user
  correction wins; then the higher source authority; then, at equal authority,
  the later *observation* of the evidence (``provenance.observedAt``, not the
  write time); otherwise the conflict is unresolved — both stay and recall shows
  the conflict (:class:`SupersessionDecision` ``outcome="conflict"``).
* **Bounded reinforcement** (:func:`reinforcement_ceiling`, §9.2): repeated
  evidence raises confidence by a bounded delta up to 1, and never lifts a record
  above a live conflicting record of equal or higher authority.
* **Scope promotion** (:func:`promote_scope`, §6.3): widening session → agent →
  project → user → global is its own audited command (authority and reason
  required, expected revision checked, ``global`` only when explicitly allowed).
  It creates a new *candidate* in the wider scope whose evidence and provenance
  point at the source by digest; the source record is unchanged.  Recall and
  consolidation never call it.
* **Inherited data policy** (:func:`inherited_policy`, §9.1): a derived
  candidate is at least as sensitive as its most sensitive source and allowed
  only the sinks every source allows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal

from kernel.canonical.checks import (
    assert_scope,
    boolean_value,
    bounded_integer,
    bounded_string,
    identifier,
    iso_now,
    known_fields,
    object_value,
    timestamp,
)
from kernel.canonical.records import normalize_memory_record
from kernel.errors import InvalidArgument, RevisionConflict, ScopeDenied
from kernel.memory.lifecycle import (
    RECALLABLE_STATES,
    MemoryMutation,
    memory_event,
    memory_receipt,
)
from kernel.ports import Clock, NewId
from kernel.vocabulary import SCOPE_ORDER, SENSITIVITY_ORDER

__all__ = (
    "SCOPE_ORDER",
    "SENSITIVITY_ORDER",
    "SupersessionDecision",
    "decide_supersession",
    "inherited_policy",
    "promote_scope",
    "reinforcement_ceiling",
    "source_authority",
)

USER_CORRECTION: Final = "user-correction"
PROMOTION_SOURCE: Final = "scope-promotion"

#: ``provenance.source`` → authority rank (unknown sources rank 0).
SOURCE_AUTHORITY: Final[Mapping[str, int]] = MappingProxyType({
    USER_CORRECTION: 5,
    "explicit-user-memory": 4,
    "user": 4,
    "project-file": 3,
    "project-rule": 3,
    "verified": 3,
    "host": 3,
    "tool-evidence": 2,
    "session-consolidation": 2,
    PROMOTION_SOURCE: 2,
    "auto-extract": 1,
    "rule-extract": 1,
    "llm-summary": 1,
    "import": 1,
})


def source_authority(record: Mapping[str, Any]) -> int:
    """Rank of a record's ``provenance.source`` (``import.legacy`` ranks as ``import``)."""
    source = str(record.get("provenance", {}).get("source", ""))
    if source in SOURCE_AUTHORITY:
        return SOURCE_AUTHORITY[source]
    return SOURCE_AUTHORITY.get(source.split(".", 1)[0], 0)


# --------------------------------------------------------------------------- supersession

Outcome = Literal["supersede", "conflict", "independent"]


@dataclass(frozen=True, slots=True)
class SupersessionDecision:
    """``supersede``: ``loser`` should receive ``supersede`` with ``winner`` as successor;
    ``conflict``: keep both and surface the conflict; ``independent``: no relation."""

    outcome: Outcome
    rule: str
    winner: str | None = None
    loser: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"outcome": self.outcome, "rule": self.rule}
        if self.winner is not None:
            out.update(winner=self.winner, loser=self.loser)
        return out


def _observed(record: Mapping[str, Any]) -> str:
    return str(record["provenance"]["observedAt"])  # normalized ISO: sorts as time


def decide_supersession(
    first: Mapping[str, Any], second: Mapping[str, Any], *, corrected_by_user: str | None = None
) -> SupersessionDecision:
    """Which of two conflicting records supersedes the other (§9.3), never by write order.

    ``corrected_by_user`` names the memoryId the user confirmed as the correction.
    """
    a, b = normalize_memory_record(first), normalize_memory_record(second)
    if a["memoryId"] == b["memoryId"]:
        raise InvalidArgument(
            "a record cannot supersede itself", details={"memoryId": a["memoryId"]}
        )
    for record in (a, b):
        if record["state"] not in RECALLABLE_STATES | {"candidate"}:
            raise InvalidArgument(
                "only live records take part in supersession",
                details={"memoryId": record["memoryId"], "state": record["state"]},
            )
    if (a["scope"], a.get("scopeId")) != (b["scope"], b.get("scopeId")):
        return SupersessionDecision("independent", "different_scope")

    def won(winner: Mapping[str, Any], loser: Mapping[str, Any], rule: str) -> SupersessionDecision:
        return SupersessionDecision("supersede", rule, winner["memoryId"], loser["memoryId"])

    by_user = [r for r in (a, b) if r["memoryId"] == corrected_by_user]
    by_user = by_user or [r for r in (a, b) if r["provenance"]["source"] == USER_CORRECTION]
    if len(by_user) == 1:
        winner = by_user[0]
        return won(winner, b if winner is a else a, "user_correction")
    rank_a, rank_b = source_authority(a), source_authority(b)
    if rank_a != rank_b:
        return won(a, b, "source_authority") if rank_a > rank_b else won(b, a, "source_authority")
    seen_a, seen_b = _observed(a), _observed(b)
    if seen_a != seen_b:
        return won(a, b, "observed_later") if seen_a > seen_b else won(b, a, "observed_later")
    return SupersessionDecision("conflict", "unresolved")


def reinforcement_ceiling(
    record: Mapping[str, Any], conflicting: Iterable[Mapping[str, Any]]
) -> float | None:
    """The most a ``reinforce`` may raise ``record``'s confidence to (``None``: 1).

    Live conflicting records of equal or higher source authority in the same scope
    cap it at their lowest confidence: repetition cannot override a conflicting
    source; only a supersession decision can.
    """
    rank = source_authority(record)
    caps = [
        float(other["confidence"])
        for other in conflicting
        if other.get("memoryId") != record.get("memoryId")
        and other.get("state") in RECALLABLE_STATES
        and (other.get("scope"), other.get("scopeId"))
        == (record.get("scope"), record.get("scopeId"))
        and source_authority(other) >= rank
    ]
    return min(caps) if caps else None


# --------------------------------------------------------------------------- inherited policy


def inherited_policy(
    sources: Sequence[Mapping[str, Any]], default_sinks: Sequence[str] = ("*",)
) -> tuple[str, list[str]]:
    """(most sensitive source sensitivity, sinks every source allows); ``*`` is universal."""
    if not sources:
        return "internal", list(default_sinks)
    rank = max(SENSITIVITY_ORDER.index(str(s.get("sensitivity", "restricted"))) for s in sources)
    allowed: set[str] | None = None
    for source in sources:
        sinks = set(source.get("allowedSinks") or ())
        if "*" in sinks:
            continue
        allowed = sinks if allowed is None else allowed & sinks
    sinks_out = ["*"] if allowed is None else sorted(allowed)
    return SENSITIVITY_ORDER[rank], sinks_out


# --------------------------------------------------------------------------- scope promotion

_PROMOTION_FIELDS: Final = frozenset(
    {
        "memoryId",
        "expectedRevision",
        "targetScope",
        "targetScopeId",
        "authority",
        "reason",
        "newMemoryId",
        "allowGlobal",
        "at",
    }
)
PROMOTION_EVENT: Final = "memory.scope.promoted"


def promote_scope(source: Any, command: Any, *, clock: Clock, new_id: NewId) -> MemoryMutation:
    """The audited scope-widening command: a new candidate in a strictly wider scope.

    Command: ``{memoryId, expectedRevision, targetScope, targetScopeId?, authority,
    reason, newMemoryId?, allowGlobal?, at?}``.  The source must be live (active or
    reinforced) at ``expectedRevision``.
    """
    record = normalize_memory_record(source)
    cmd = object_value(command, "ScopePromotion")
    known_fields(cmd, _PROMOTION_FIELDS, "ScopePromotion")
    if identifier(cmd.get("memoryId"), "memoryId") != record["memoryId"]:
        raise InvalidArgument(
            "promotion must name the source memory", details={"field": "memoryId"}
        )
    expected = bounded_integer(cmd.get("expectedRevision"), "expectedRevision", 1)
    if expected != record["revision"]:
        raise RevisionConflict(
            "memory revision does not match",
            details={
                "memoryId": record["memoryId"],
                "expectedRevision": expected,
                "actualRevision": record["revision"],
            },
        )
    if record["state"] not in RECALLABLE_STATES:
        raise InvalidArgument(
            "only active memories can be promoted",
            details={"memoryId": record["memoryId"], "state": record["state"]},
        )
    target = assert_scope(cmd.get("targetScope"), cmd.get("targetScopeId"), "targetScope")
    if SCOPE_ORDER.index(target["scope"]) <= SCOPE_ORDER.index(record["scope"]):
        raise ScopeDenied(
            "scope promotion must widen the scope",
            details={
                "memoryId": record["memoryId"],
                "from": record["scope"],
                "to": target["scope"],
            },
        )
    allow_global = "allowGlobal" in cmd and boolean_value(cmd["allowGlobal"], "allowGlobal")
    if target["scope"] == "global" and not allow_global:
        raise ScopeDenied(
            "global is never a default promotion target", details={"memoryId": record["memoryId"]}
        )
    authority = identifier(cmd.get("authority"), "authority")
    reason = bounded_string(cmd.get("reason"), "reason", 1, 2048)
    at = iso_now(clock) if "at" not in cmd else timestamp(cmd["at"], "at")
    new_memory_id = (
        identifier(cmd["newMemoryId"], "newMemoryId") if "newMemoryId" in cmd else f"mem-{new_id()}"
    )
    raw = {
        key: value
        for key, value in record.items()
        if key not in ("digest", "supersedes", "lastAccessedAt", "scopeId", "deletionFence")
    }
    raw.update(target)
    raw.update(
        memoryId=new_memory_id,
        state="candidate",
        provenance={
            "source": PROMOTION_SOURCE,
            "actor": authority,
            "observedAt": at,
            "parentDigests": [record["digest"]],
        },
        evidenceRefs=[
            {
                "store": "memory",
                "id": record["memoryId"],
                "revision": record["revision"],
                "digest": record["digest"],
            }
        ],
        createdAt=at,
        updatedAt=at,
        accessCount=0,
        revision=1,
    )
    promoted = normalize_memory_record(raw)
    scope_fields = {
        "sourceMemoryId": record["memoryId"],
        "sourceRevision": record["revision"],
        "fromScope": record["scope"],
        "toScope": target["scope"],
    }
    event = memory_event(
        promoted,
        from_state=None,
        previous_revision=0,
        at=at,
        event_id=f"memory-event-{new_id()}",
        type_=PROMOTION_EVENT,
        extra={"reason": reason, "authority": authority},
        fields=scope_fields,
    )
    receipt = memory_receipt("promote", promoted, event, previous_revision=0, at=at)
    return MemoryMutation(promoted, event, receipt)
