"""The memory lifecycle table and reducer (``kernel.memory.lifecycle``): unit tests that walk the
table, and a hypothesis ``RuleBasedStateMachine`` driving the reducer against a
ten-line model of the design's state machine (§9)."""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kernel.canonical.records import normalize_memory_record
from kernel.errors import InvalidArgument, KernelError, RevisionConflict
from kernel.memory.lifecycle import (
    COMMAND_TARGETS,
    STATES,
    TRANSITIONS,
    IllegalMemoryTransition,
    apply_memory_command,
    create_memory_candidate,
    merge_replica_record,
    next_state,
)

T0 = 1_788_000_000_000  # 2026-08-29T…


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        self.now += 1000
        return self.now


class Ids:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"id-{self.n:04d}"


def proposal(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "memoryId": "mem-1",
        "scope": "project",
        "scopeId": "project-1",
        "category": "decision",
        "content": "Use pnpm for the monorepo",
        "provenance": {"source": "explicit-user-memory", "observedAt": "2026-08-28T00:00:00Z"},
        "evidenceRefs": [{"store": "session-log", "id": "ev-1"}],
        "confidence": 0.5,
        "importance": 0.4,
        "tags": ["build", "pnpm"],
        "sensitivity": "internal",
        "allowedSinks": ["provider.local", "cli"],
        "retentionPolicy": {"mode": "durable"},
        "createdAt": "2026-08-28T00:00:00Z",
    }
    base.update(overrides)
    return base


def make(**overrides: Any) -> dict[str, Any]:
    return create_memory_candidate(proposal(**overrides), clock=Clock(), new_id=Ids())


def apply(record: dict[str, Any], **command: Any) -> Any:
    return apply_memory_command(record, command, clock=Clock(), new_id=Ids())


# --------------------------------------------------------------------------- the table


def test_table_covers_every_state_and_command() -> None:
    assert set(TRANSITIONS) == set(STATES)
    assert set(COMMAND_TARGETS.values()) <= set(STATES)
    for targets in TRANSITIONS.values():
        assert targets <= set(STATES)
    assert TRANSITIONS["purged"] == frozenset()  # terminal
    assert all("deleted" in TRANSITIONS[s] for s in STATES if s not in ("deleted", "purged"))


def test_every_state_is_reachable_from_candidate() -> None:
    seen, queue = {"candidate"}, deque(["candidate"])
    while queue:
        for target in TRANSITIONS[queue.popleft()]:
            if target not in seen:
                seen.add(target)
                queue.append(target)
    assert seen == set(STATES)


@pytest.mark.parametrize("state,kind", list(itertools.product(STATES, COMMAND_TARGETS)))
def test_next_state_is_the_table(state: str, kind: str) -> None:
    target = COMMAND_TARGETS[kind]
    if target in TRANSITIONS[state]:
        assert next_state(state, kind) == target
    else:
        with pytest.raises(IllegalMemoryTransition) as info:
            next_state(state, kind)
        assert info.value.code == "illegal_memory_transition"
        assert info.value.details == {"from": state, "to": target}
        assert (info.value.machine, info.value.state, info.value.event) == ("memory", state, kind)


def test_unknown_command_type() -> None:
    with pytest.raises(InvalidArgument, match="unsupported MemoryCommand type"):
        next_state("active", "restore")


#: One concrete command sequence reaching each state through the reducer.
WALKS: dict[str, list[dict[str, Any]]] = {
    "candidate": [],
    "active": [{"type": "activate"}],
    "reinforced": [{"type": "activate"}, {"type": "reinforce"}],
    "superseded": [{"type": "activate"}, {"type": "supersede", "successorMemoryId": "mem-2"}],
    "archived": [{"type": "activate"}, {"type": "archive"}],
    "expired": [{"type": "activate"}, {"type": "expire"}],
    "deleted": [{"type": "delete", "deletionFence": "f-1"}],
    "purged": [
        {"type": "delete", "deletionFence": "f-1"},
        {"type": "purge", "deletionFence": "f-1"},
    ],
}


@pytest.mark.parametrize("state", STATES)
def test_reducer_reaches_every_state(state: str) -> None:
    record = make()
    for revision, command in enumerate(WALKS[state], start=1):
        mutation = apply(record, expectedRevision=revision, **command)
        assert mutation.receipt["previousRevision"] == revision
        assert mutation.record["revision"] == revision + 1
        assert mutation.event["fromState"] == record["state"]
        record = mutation.record
    assert record["state"] == state


def test_expected_revision_is_checked_before_the_type() -> None:
    record = make()
    with pytest.raises(RevisionConflict) as info:
        apply(record, type="nonsense", expectedRevision=7)
    assert info.value.details == {"memoryId": "mem-1", "expectedRevision": 7, "actualRevision": 1}


def test_delete_leaves_a_body_free_tombstone() -> None:
    record = make(summary="a summary", supersedes=["mem-0"])
    record = apply(record, type="activate", expectedRevision=1).record
    tomb = apply(record, type="delete", expectedRevision=2, deletionFence="f-9").record
    assert tomb["content"] == "" and "summary" not in tomb and "supersedes" not in tomb
    assert tomb["tags"] == [] and tomb["allowedSinks"] == ["kernel.tombstone"]
    assert tomb["evidenceRefs"] == [
        {"store": "memory-tombstone", "id": "mem-1", "digest": record["digest"]}
    ]
    assert tomb["deletionFence"] == "f-9" and tomb["sensitivity"] == record["sensitivity"]
    with pytest.raises(RevisionConflict, match="purge fence"):
        apply(tomb, type="purge", expectedRevision=3, deletionFence="F-9")


def test_reinforcement_is_bounded() -> None:
    record = apply(make(confidence=0.9), type="activate", expectedRevision=1).record
    for revision in range(2, 6):
        record = apply(record, type="reinforce", expectedRevision=revision).record
    assert record["confidence"] == 1
    with pytest.raises(InvalidArgument, match="confidenceDelta"):
        apply(record, type="reinforce", expectedRevision=6, confidenceDelta=1.5)


def test_reinforcement_ceiling_keeps_a_conflicting_source_on_top() -> None:
    record = apply(make(confidence=0.5), type="activate", expectedRevision=1).record
    capped = apply_memory_command(
        record,
        {"type": "reinforce", "expectedRevision": 2, "confidenceDelta": 0.4},
        clock=Clock(),
        new_id=Ids(),
        confidence_ceiling=0.6,
    ).record
    assert capped["confidence"] == 0.6
    higher = apply_memory_command(
        apply(make(confidence=0.8), type="activate", expectedRevision=1).record,
        {"type": "reinforce", "expectedRevision": 2},
        clock=Clock(),
        new_id=Ids(),
        confidence_ceiling=0.6,
    ).record
    assert higher["confidence"] == 0.8  # never lowered, never raised past the ceiling


def test_confidence_importance_relevance_stay_separate() -> None:
    record = apply(make(confidence=0.3, importance=0.9), type="activate", expectedRevision=1).record
    reinforced = apply(record, type="reinforce", expectedRevision=2, importance=0.2).record
    assert (reinforced["confidence"], reinforced["importance"]) == (0.35, 0.2)
    assert "relevance" not in reinforced


@pytest.mark.parametrize(
    "content",
    [
        "-----BEGIN OPENSSH PRIVATE KEY-----\nabc",
        "use Bearer abcdefghijklmnopqrstuvwxyz012345 for the API",
        "api_key = sk_live_0123456789abcdef",
        "recovery code: 1234-5678-9012",
        "cookie sessionid=abcdefghijklmnop1234",
    ],
)
def test_secret_material_is_rejected(content: str) -> None:
    with pytest.raises(InvalidArgument, match="secret material"):
        make(content=content)


def test_secret_store_probe_rejects_known_values() -> None:
    stored = {"hunter2-very-secret"}
    with pytest.raises(InvalidArgument, match="secret material"):
        create_memory_candidate(
            proposal(content="the db password is hunter2-very-secret"),
            clock=Clock(),
            new_id=Ids(),
            secret_probe=lambda text: any(s in text for s in stored),
        )


def test_candidate_requires_evidence() -> None:
    with pytest.raises(InvalidArgument, match="evidenceRefs"):
        make(evidenceRefs=[])


def test_merge_never_revives_a_tombstone() -> None:
    live = apply(make(), type="activate", expectedRevision=1).record
    tomb = apply(live, type="delete", expectedRevision=2, deletionFence="f-1").record
    newer_live = live
    for revision in range(2, 6):
        newer_live = apply(newer_live, type="reinforce", expectedRevision=revision).record
    for incoming in (live, newer_live):
        with pytest.raises(KernelError) as info:
            merge_replica_record(tomb, incoming)
        assert info.value.code == "replica_tombstone_fenced"
    # the peer's rule: a live copy never takes a tombstone by merge either (its sinks
    # differ); deletion reaches replicas through the purge ports, not through merge
    with pytest.raises(KernelError) as info:
        merge_replica_record(live, tomb)
    assert info.value.code == "scope_denied"


# --------------------------------------------------------------------------- stateful model

KINDS = list(COMMAND_TARGETS)


class LifecycleMachine(RuleBasedStateMachine):
    """The reducer against a model: (state, revision, fence) and the table."""

    @initialize(activate=st.booleans())
    def start(self, activate: bool) -> None:
        self.record = make(activate=activate)
        self.state = "active" if activate else "candidate"
        self.revision = 1
        self.fence: str | None = None
        self.confidence = self.record["confidence"]

    @rule(
        kind=st.sampled_from(KINDS),
        stale=st.sampled_from([0, 0, 0, 1, -1]),
        fence=st.sampled_from(["f-1", "f-2"]),
    )
    def command(self, kind: str, stale: int, fence: str) -> None:
        command: dict[str, Any] = {"type": kind, "expectedRevision": max(1, self.revision + stale)}
        if kind == "supersede":
            command["successorMemoryId"] = "mem-2"
        if kind in ("delete", "purge"):
            command["deletionFence"] = fence
        target = COMMAND_TARGETS[kind]
        expected_error: str | None = None
        if command["expectedRevision"] != self.revision:
            expected_error = "revision_conflict"
        elif target not in TRANSITIONS[self.state]:
            expected_error = "illegal_memory_transition"
        elif kind == "purge" and fence != self.fence:
            expected_error = "revision_conflict"
        try:
            mutation = apply(self.record, **command)
        except KernelError as exc:
            assert exc.code == expected_error, (exc.code, expected_error)
            return
        assert expected_error is None
        self.record = mutation.record
        self.state, self.revision = target, self.revision + 1
        if kind == "delete":
            self.fence, self.confidence = fence, 0
        if kind == "reinforce":
            assert self.record["confidence"] >= self.confidence
            self.confidence = self.record["confidence"]
        assert mutation.event["toState"] == target
        assert mutation.receipt["recordDigest"] == self.record["digest"]

    @invariant()
    def agrees_with_model(self) -> None:
        assert self.record["state"] == self.state
        assert self.record["revision"] == self.revision
        assert self.record.get("deletionFence") == self.fence
        assert normalize_memory_record(self.record) == self.record  # digest re-verifies
        if self.state in ("deleted", "purged"):
            assert self.record["content"] == "" and "summary" not in self.record
        assert 0 <= self.record["confidence"] <= 1


LifecycleMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLifecycleMachine = LifecycleMachine.TestCase


def test_docs_show_the_generated_diagram() -> None:
    from pathlib import Path

    from kernel.memory.lifecycle import state_diagram

    doc = (Path(__file__).resolve().parents[2] / "docs" / "memory.md").read_text(encoding="utf-8")
    assert state_diagram() in doc
