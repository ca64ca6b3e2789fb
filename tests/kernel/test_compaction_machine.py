"""The compaction state machine (kernel/compaction/machine.py) against a simple model.

The model below is written from design 108 §8.1 independently of the table;
a ``RuleBasedStateMachine`` fires random events (legal or not) at both and
checks they agree, that illegal events raise ``IllegalTransition`` naming the
machine, state and event, and that the lifecycle only ever grows.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kernel.compaction import machine as c
from kernel.errors import IllegalTransition

S = c.State
AT = "2026-08-30T09:10:44.000Z"

# ----------------------------------------------------------------- the simple model
# state -> {event name -> next state}; written from the design text, not the table.
MODEL: dict[str, dict[str, str]] = {
    "idle": {"CompactionRequested": "evaluating"},
    "evaluating": {"SnapshotRead": "preparing"},
    "preparing": {"SummaryRequested": "summarizing", "CandidateBuilt": "verifying"},
    "summarizing": {
        "SummaryDegraded": "summarizing",
        "FallbackSelected": "summarizing",
        "CandidateBuilt": "verifying",
        "OutcomeUnknown": "reconciliation_required",
    },
    "verifying": {"CandidateVerified": "committing", "InvariantsViolated": "aborted"},
    "committing": {
        "CasCommitted": "committed",
        "CasLost": "stale",
        "OutcomeUnknown": "reconciliation_required",
    },
    "reconciliation_required": {"ReconciliationLost": "stale", "Reconciled": "aborted"},
    "stale": {"RetryRequested": "idle"},
    "committed": {},
    "aborted": {},
}
# every precondition failure and a cancellation abort an active operation
for _active in ("evaluating", "preparing", "summarizing", "verifying"):
    MODEL[_active]["CompactionFailed"] = "aborted"
    MODEL[_active]["Cancelled"] = "aborted"

EVENT_FACTORIES: dict[str, Any] = {
    "CompactionRequested": lambda: c.CompactionRequested("op-1", "session-1", AT),
    "SnapshotRead": lambda: c.SnapshotRead("head:1", "sha256:" + "a" * 64, AT),
    "SummaryRequested": lambda: c.SummaryRequested(AT),
    "SummaryDegraded": lambda: c.SummaryDegraded(AT, "provider_timeout"),
    "FallbackSelected": lambda: c.FallbackSelected("summarizer_failed"),
    "CandidateBuilt": lambda: c.CandidateBuilt(AT),
    "CandidateVerified": lambda: c.CandidateVerified(AT),
    "InvariantsViolated": lambda: c.InvariantsViolated(("tool_pair_split",)),
    "CasCommitted": lambda: c.CasCommitted(AT, "head:2"),
    "CasLost": lambda: c.CasLost(AT, "head:moved"),
    "OutcomeUnknown": lambda: c.OutcomeUnknown(AT, "provider_usage_unsettled"),
    "ReconciliationLost": lambda: c.ReconciliationLost("head:moved"),
    "Reconciled": lambda: c.Reconciled(AT, "settled"),
    "CompactionFailed": lambda: c.CompactionFailed("invalid_argument", AT),
    "Cancelled": lambda: c.Cancelled(AT),
    "RetryRequested": lambda: c.RetryRequested(),
}


def test_model_and_table_name_the_same_states_and_events() -> None:
    assert set(MODEL) == {s.value for s in S}
    table = {
        s.value: {e.__name__: t.value for e, t in row.items()} for s, row in c.TRANSITIONS.items()
    }
    assert table == MODEL
    assert set(EVENT_FACTORIES) == {e.__name__ for e in c.Event.__args__}  # type: ignore[attr-defined]


def _walk(names: list[str]) -> tuple[c.CompactionMachine, tuple[c.Effect, ...]]:
    return c.run([EVENT_FACTORIES[n]() for n in names])


def test_every_state_is_reachable_from_idle() -> None:
    seen = {S.IDLE}
    queue: deque[tuple[S, list[str]]] = deque([(S.IDLE, [])])
    paths: dict[S, list[str]] = {S.IDLE: []}
    while queue:
        state, path = queue.popleft()
        for event_type, target in c.TRANSITIONS[state].items():
            if target not in seen:
                seen.add(target)
                paths[target] = [*path, event_type.__name__]
                queue.append((target, paths[target]))
    assert seen == set(S)
    for state, path in paths.items():  # and the reducer really gets there
        assert _walk(path)[0].state is state


def test_terminal_states_have_no_exit() -> None:
    assert {S.COMMITTED, S.ABORTED} == c.TERMINAL


def test_happy_path_lifecycle_matches_peer_shape() -> None:
    machine, effects = _walk(
        ["CompactionRequested", "SnapshotRead", "CandidateBuilt", "CandidateVerified"]
    )
    machine, more = c.step(machine, c.CasCommitted(AT, "head:2"))
    assert [e["state"] for e in machine.lifecycle_wire()] == [
        "evaluating",
        "preparing",
        "verifying",
        "committing",
        "committed",
    ]
    assert machine.lifecycle_wire()[1]["details"] == {"inputDigest": "sha256:" + "a" * 64}
    kinds = [type(e).__name__ for e in effects + more]
    assert kinds == [
        "Announce",
        "ReadSnapshot",
        "BuildPlan",
        "VerifyCandidate",
        "AppendCompaction",
        "Announce",
        "ReturnReceipt",
    ]
    assert machine.status == "committed"
    assert c.AppendCompaction("head:1") in effects


def test_degraded_is_a_note_not_a_state() -> None:
    machine, _ = _walk(
        ["CompactionRequested", "SnapshotRead", "SummaryRequested", "SummaryDegraded"]
    )
    assert machine.state is S.SUMMARIZING and machine.degraded
    assert machine.lifecycle_wire()[-1] == {
        "state": "degraded",
        "at": AT,
        "details": {"code": "provider_timeout"},
    }
    machine, _ = _walk(
        [
            "CompactionRequested",
            "SnapshotRead",
            "SummaryRequested",
            "FallbackSelected",
            "CandidateBuilt",
            "CandidateVerified",
            "CasCommitted",
        ]
    )
    assert machine.status == "degraded"
    assert "degraded" not in [e["state"] for e in machine.lifecycle_wire()]


def test_cas_lost_is_stale_with_current_head_and_retry_resets() -> None:
    names = [
        "CompactionRequested",
        "SnapshotRead",
        "CandidateBuilt",
        "CandidateVerified",
        "CasLost",
    ]
    machine, effects = _walk(names)
    assert machine.state is S.STALE and machine.current_head == "head:moved"
    assert effects[-1] == c.ReturnReceipt("stale")
    machine, _ = c.step(machine, c.RetryRequested())
    assert machine == c.CompactionMachine(operation_id="op-1", session_id="session-1")


def test_reconciliation_persists_and_announces() -> None:
    names = ["CompactionRequested", "SnapshotRead", "SummaryRequested", "OutcomeUnknown"]
    machine, effects = _walk(names)
    assert machine.state is S.RECONCILIATION_REQUIRED
    assert c.PersistReconciliation("head:1") in effects
    assert c.Announce(
        "reconciliation_required", "op-1", "session-1", "provider_usage_unsettled"
    ) in (effects)
    stale, _ = c.step(machine, c.ReconciliationLost("head:x"))
    assert stale.status == "stale"
    assert stale.lifecycle == machine.lifecycle  # no entry: the receipt keeps its history


def test_illegal_transition_names_machine_state_and_event() -> None:
    with pytest.raises(IllegalTransition) as info:
        c.step(c.CompactionMachine(), c.CasCommitted(AT, "h"))
    err = info.value
    assert err.code == "illegal_transition"
    assert err.details == {"machine": "compaction", "state": "idle", "event": "CasCommitted"}


def test_an_unknown_commit_outcome_only_announces() -> None:
    """The store raised during the CAS: the caller gets the error, ``reconcile`` the truth;
    the machine asks for no reconciliation receipt (the provider path does)."""
    names = ["CompactionRequested", "SnapshotRead", "CandidateBuilt", "CandidateVerified"]
    machine, _ = _walk(names)
    rr, effects = c.step(machine, c.OutcomeUnknown(AT, "commit_outcome_unknown"))
    assert rr.state is S.RECONCILIATION_REQUIRED
    assert effects == (
        c.Announce("reconciliation_required", "op-1", "session-1", "commit_outcome_unknown"),
    )
    summarizing, _ = _walk(["CompactionRequested", "SnapshotRead", "SummaryRequested"])
    _, effects = c.step(summarizing, c.OutcomeUnknown(AT, "provider_usage_unsettled"))
    assert [type(e).__name__ for e in effects] == [
        "Announce",
        "PersistReconciliation",
        "ReturnReceipt",
    ]


@pytest.mark.parametrize(
    ("source", "event", "kinds"),
    [
        (s, e, c.MACHINE.effects.get((s, e), ()))
        for s, row in c.TRANSITIONS.items()
        for e in row
    ],
)
def test_every_edge_emits_what_the_table_says(source: S, event: type[Any], kinds: Any) -> None:
    target = c.TRANSITIONS[source][event]
    entered = c.EDGE_EFFECTS.get((source, event), c.ON_ENTER.get(target, ()))
    assert kinds == (() if target is source else entered)
    returns = target in (S.COMMITTED, S.STALE, S.RECONCILIATION_REQUIRED)
    if returns and (source, event) not in c.EDGE_EFFECTS:
        assert kinds[-1] is c.ReturnReceipt  # every path that ends in a receipt returns one
    if target is S.ABORTED:
        assert kinds == (c.Announce,)


def test_state_diagram_lists_every_transition() -> None:
    diagram = c.state_diagram()
    count = sum(len(row) for row in c.TRANSITIONS.values())
    assert diagram.count(" --> ") == count + 1 + len(c.TERMINAL)


class CompactionMachineVsModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.machine = c.CompactionMachine()
        self.model_state = "idle"
        self.lifecycle_len = 0
        self.started = 0

    @rule(name=st.sampled_from(sorted(EVENT_FACTORIES)))
    def fire(self, name: str) -> None:
        event = EVENT_FACTORIES[name]()
        expected = MODEL[self.model_state].get(name)
        if expected is None:
            with pytest.raises(IllegalTransition) as info:
                c.step(self.machine, event)
            assert info.value.details == {
                "machine": "compaction",
                "state": self.model_state,
                "event": name,
            }
            return
        before = self.machine
        self.machine, effects = c.step(self.machine, event)
        assert self.machine.state.value == expected
        if expected == self.model_state:
            assert effects == ()
        if name == "RetryRequested":
            self.lifecycle_len = 0
        else:
            assert self.machine.lifecycle[: len(before.lifecycle)] == before.lifecycle
        self.lifecycle_len = len(self.machine.lifecycle)
        self.started += sum(1 for e in effects if isinstance(e, c.Announce) and e.name == "started")
        self.model_state = expected

    @invariant()
    def agrees_with_model(self) -> None:
        assert self.machine.state.value == self.model_state
        assert len(self.machine.lifecycle) == self.lifecycle_len

    @invariant()
    def status_is_consistent(self) -> None:
        status = self.machine.status
        if self.machine.state is S.COMMITTED:
            assert status in ("committed", "degraded")
        else:
            assert status == self.machine.state.value


CompactionMachineVsModel.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCompactionMachineVsModel = CompactionMachineVsModel.TestCase


def test_docs_diagram_is_drawn_from_the_table() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "compaction.md").read_text("utf-8")
    assert c.state_diagram() in doc
