"""One SessionContextPort conformance suite over the in-memory model, JSONL and SQLite.

Like hypothesis's own ``test_database_agreement.py``: every test runs against
every adapter, and a stateful test drives all three with the same random
operations and checks they agree with each other.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kernel.canonical.digest import digest
from kernel.canonical.items import normalize_context_item
from kernel.compaction.service import CompactionKernel
from kernel.planning.planner import is_protected
from kernel.ports import SessionContextPort, SessionSnapshot
from tests.conformance.session_harness import ADAPTERS, T0, Harness, harness, make_harness

SID = "session-conf"


@pytest.fixture(params=ADAPTERS)
def h(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    with harness(request.param, tmp_path / request.param) as value:
        yield value


def make_event(
    snapshot: SessionSnapshot, operation_id: str, keep: int | None = None
) -> dict[str, Any]:
    """A minimal committed compaction event keeping protected items and the newest ``keep``."""
    items = list(snapshot.items)
    protected = [i for i in items if is_protected(i)]
    rest = [i for i in items if not is_protected(i)]
    kept = protected + (rest[-keep:] if keep else rest)
    event: dict[str, Any] = {
        "schema": "chainlesschain.context-compaction/v1",
        "schemaVersion": 1,
        "eventId": f"compaction-event-{operation_id}",
        "operationId": operation_id,
        "sessionId": snapshot.session_id,
        "inputHead": snapshot.head,
        "strategy": "deterministic-selection",
        "status": "committed",
        "outputItems": kept,
        "retainedItemIds": [i["itemId"] for i in kept],
        "receiptTemplate": {"operationId": operation_id, "status": "committed"},
    }
    event["digest"] = digest(event, "chainlesschain.compaction-event/v1", "peer")
    return event


def test_adapters_satisfy_the_protocol(h: Harness) -> None:
    assert isinstance(h.port, SessionContextPort)


def test_unknown_session_reads_none(h: Harness) -> None:
    assert h.port.read_snapshot("session-missing") is None
    assert h.port.read_operation("op-missing") is None
    assert h.port.compaction_events("session-missing") == []


def test_snapshot_items_are_normalized(h: Harness) -> None:
    head = h.create(SID)
    snapshot = h.port.read_snapshot(SID)
    assert snapshot.head == head and snapshot.epoch == 0 and snapshot.items
    for item in snapshot.items:
        assert normalize_context_item(item) == item
    assert is_protected(snapshot.items[-1]) or snapshot.items[-1]["kind"] != "task-state"


def test_cas_commit_advances_head_and_starts_an_epoch(h: Harness) -> None:
    head = h.create(SID)
    before = h.port.read_snapshot(SID)
    event = make_event(before, "op-1", keep=2)
    result = h.port.append_compaction(event, head)
    assert result.ok and not result.idempotent and result.new_head and result.new_head != head
    after = h.port.read_snapshot(SID)
    assert after.head == result.new_head
    assert after.epoch == 1
    assert [i["itemId"] for i in after.items] == event["retainedItemIds"]
    events = h.port.compaction_events(SID)
    assert [e["operationId"] for e in events] == ["op-1"] and events[0]["digest"] == event["digest"]
    record = h.port.read_operation("op-1")
    assert record.kind == "compaction" and record.new_head == result.new_head
    assert record.payload["digest"] == event["digest"]
    assert h.verify(SID)


def test_lost_cas_never_overwrites(h: Harness) -> None:
    head = h.create(SID)
    snapshot = h.port.read_snapshot(SID)
    moved = h.add_turn(SID, "a concurrent turn")
    assert moved.ok and moved.new_head != head
    current = h.port.read_snapshot(SID)
    result = h.port.append_compaction(make_event(snapshot, "op-late"), head)
    assert not result.ok and result.current_head == current.head
    assert h.port.read_snapshot(SID) == current
    assert h.port.compaction_events(SID) == []
    assert h.port.read_operation("op-late") is None
    assert h.verify(SID)


def test_operation_ids_make_retries_idempotent(h: Harness) -> None:
    head = h.create(SID)
    event = make_event(h.port.read_snapshot(SID), "op-1", keep=1)
    first = h.port.append_compaction(event, head)
    again = h.port.append_compaction(event, head)  # stale head, same operation
    assert again.ok and again.idempotent and again.new_head == first.new_head
    assert len(h.port.compaction_events(SID)) == 1


def test_tail_window_follows_the_epoch_artifact(h: Harness) -> None:
    head = h.create(SID)
    event = make_event(h.port.read_snapshot(SID), "op-1", keep=1)
    committed = h.port.append_compaction(event, head)
    turn = h.add_turn(SID, "after compaction", expected_head=committed.new_head)
    assert turn.ok
    snapshot = h.port.read_snapshot(SID)
    assert snapshot.epoch == 1
    assert [i["itemId"] for i in snapshot.items[: len(event["outputItems"])]] == (
        event["retainedItemIds"]
    )
    assert len(snapshot.items) == len(event["outputItems"]) + 1
    assert h.add_turn(SID, "late writer", expected_head=head).ok is False


def test_raw_evidence_is_never_removed(h: Harness) -> None:
    head = h.create(SID)
    before = h.evidence(SID)
    h.port.append_compaction(make_event(h.port.read_snapshot(SID), "op-1", keep=0), head)
    after = h.evidence(SID)
    assert after[: len(before)] == before and len(after) >= len(before)


def test_reconciliation_receipts_are_recorded(h: Harness) -> None:
    head = h.create(SID)
    receipt = {
        "operationId": "op-r",
        "sessionId": SID,
        "status": "reconciliation_required",
        "startedAt": "2026-08-20T12:00:00.000Z",
        "digest": "sha256:" + "0" * 64,
    }
    assert not h.port.append_reconciliation(receipt, "head:wrong").ok
    assert h.port.append_reconciliation(receipt, head).ok
    record = h.port.read_operation("op-r")
    assert record.kind == "reconciliation" and record.payload == receipt
    assert h.port.reconciliations(SID) == [receipt]
    assert h.verify(SID)


def test_state_survives_reopen(h: Harness) -> None:
    head = h.create(SID)
    committed = h.port.append_compaction(
        make_event(h.port.read_snapshot(SID), "op-1", keep=2), head
    )
    before = h.port.read_snapshot(SID)
    port = h.reopen()
    assert port.read_snapshot(SID) == before
    assert port.read_operation("op-1").new_head == committed.new_head
    assert h.verify(SID)


# --------------------------------------------------------------------------- end to end


def kernel_for(port: Any, ids: itertools.count[int] | None = None) -> CompactionKernel:
    counter = ids or itertools.count(1)
    return CompactionKernel(port, clock=lambda: T0, new_id=lambda: f"u{next(counter):04d}")


REQUEST = {
    "sessionId": SID,
    "modelWindowTokens": 400,
    "reservedOutputTokens": 100,
    "safetyMarginTokens": 20,
    "recoveryReserveTokens": 20,
    "sink": "provider.local",
    "scopeAdmissions": [{"scope": "session", "scopeId": SID}],
    "policyVersion": "policy-1",
    "modelProfile": "model-1",
}


def test_kernel_compacts_through_every_adapter(h: Harness) -> None:
    h.create(SID, n=12)
    kernel = kernel_for(h.port)
    receipt = kernel.compact_context({**REQUEST, "operationId": "op-e2e-1"})
    assert receipt["status"] == "committed"
    snapshot = h.port.read_snapshot(SID)
    assert snapshot.head == receipt["newHead"]
    assert [i["itemId"] for i in snapshot.items] == receipt["selectedItemIds"]
    assert kernel.compact_context({**REQUEST, "operationId": "op-e2e-1"}) == receipt
    assert kernel.reconcile("op-e2e-1") == receipt
    second = kernel.compact_context({**REQUEST, "operationId": "op-e2e-2"})
    assert second["status"] == "committed" and second["inputHead"] == receipt["newHead"]
    assert h.port.read_snapshot(SID).epoch == 2
    assert h.verify(SID)


def test_kernel_lost_cas_is_stale_then_recomputes(h: Harness) -> None:
    h.create(SID, n=12)

    class Racing:
        """Delegates to the adapter; a concurrent turn lands right after the first read."""

        def __init__(self) -> None:
            self.reads = 0

        def __getattr__(self, name: str) -> Any:
            return getattr(h.port, name)

        def read_snapshot(self, session_id: str) -> Any:
            snapshot = h.port.read_snapshot(session_id)
            self.reads += 1
            if self.reads == 1:
                assert h.add_turn(session_id, "racing turn").ok
            return snapshot

    kernel = kernel_for(Racing())
    stale = kernel.compact_context({**REQUEST, "operationId": "op-race"})
    current = h.port.read_snapshot(SID)
    assert stale["status"] == "stale" and stale["currentHead"] == current.head
    assert h.port.compaction_events(SID) == []
    retry = kernel.compact_context({**REQUEST, "operationId": "op-race"})
    assert retry["status"] == "committed" and retry["inputHead"] == current.head
    assert h.verify(SID)


# --------------------------------------------------------------------------- agreement


class AdaptersAgree(RuleBasedStateMachine):
    """The same random operations on all three adapters give the same observable results."""

    def __init__(self) -> None:
        super().__init__()
        self._tmp = tempfile.TemporaryDirectory()
        root = Path(self._tmp.name)
        self.harnesses = [make_harness(name, root / name) for name in ADAPTERS]
        for hh in self.harnesses:
            hh.create(SID, n=4)
        self.ops = 0
        self.stale_heads: list[list[str]] = []

    def teardown(self) -> None:
        for hh in self.harnesses:
            hh.close()
        self._tmp.cleanup()

    def _heads(self) -> list[str]:
        return [hh.port.read_snapshot(SID).head for hh in self.harnesses]

    @rule(keep=st.integers(0, 3), reuse=st.booleans())
    def compact(self, keep: int, reuse: bool) -> None:
        if not reuse or self.ops == 0:
            self.ops += 1
        op = f"op-{self.ops}"
        outcomes = []
        for hh in self.harnesses:
            snapshot = hh.port.read_snapshot(SID)
            result = hh.port.append_compaction(make_event(snapshot, op, keep), snapshot.head)
            outcomes.append((result.ok, result.idempotent))
        assert len(set(outcomes)) == 1, outcomes

    @rule()
    def remember_heads(self) -> None:
        self.stale_heads.append(self._heads())

    @precondition(lambda self: bool(self.stale_heads))
    @rule(keep=st.integers(0, 3))
    def compact_with_old_head(self, keep: int) -> None:
        self.ops += 1
        old = self.stale_heads[-1]
        outcomes = []
        for hh, head in zip(self.harnesses, old, strict=True):
            event = make_event(hh.port.read_snapshot(SID), f"op-{self.ops}", keep)
            outcomes.append(hh.port.append_compaction(event, head).ok)
        assert len(set(outcomes)) == 1, outcomes

    @rule(text=st.text(alphabet="abc xyz", min_size=1, max_size=12))
    def add_turn(self, text: str) -> None:
        assert all(hh.add_turn(SID, text).ok for hh in self.harnesses)

    @invariant()
    def same_projection(self) -> None:
        snapshots = [hh.port.read_snapshot(SID) for hh in self.harnesses]
        assert len({s.epoch for s in snapshots}) == 1
        events = [
            [e["operationId"] for e in hh.port.compaction_events(SID)] for hh in self.harnesses
        ]
        assert all(e == events[0] for e in events)
        assert all(hh.verify(SID) for hh in self.harnesses)


AdaptersAgree.TestCase.settings = settings(
    max_examples=12,
    stateful_step_count=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAdaptersAgree = AdaptersAgree.TestCase
