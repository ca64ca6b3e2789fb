"""``thread/compact/start`` notifications (kernel/compaction/thread.py)."""

from __future__ import annotations

import pytest

from kernel.compaction import thread as lc
from kernel.errors import InvalidArgument


def test_params_are_exactly_thread_id_and_the_answer_is_empty() -> None:
    assert lc.accept_thread_compact_start({"threadId": "thread-1"}) == ("thread-1", {})
    for bad in ({}, {"threadId": ""}, {"threadId": 3}, {"threadId": "t", "sessionId": "s"}, []):
        with pytest.raises(InvalidArgument):
            lc.accept_thread_compact_start(bad)


def test_committed_turn_emits_four_notifications_in_order() -> None:
    receipt = {
        "operationId": "op-1",
        "status": "committed",
        "inputHead": "head:1",
        "newHead": "head:2",
        "selectedItemIds": ["secret-bearing-id"],
        "lifecycle": [],
    }
    notes = lc.compaction_turn("thread-1", "turn-1", "item-1", receipt)
    assert [n.method for n in notes] == [
        "turn/started",
        "item/started",
        "item/completed",
        "turn/completed",
    ]
    started, item_started, item_done, turn_done = (n.to_wire() for n in notes)
    assert started["params"]["turn"]["status"] == "inProgress"
    assert item_started["params"]["item"] == {
        "type": "contextCompaction",
        "id": "item-1",
        "status": "inProgress",
    }
    assert item_done["params"]["item"]["compaction"] == {
        "operationId": "op-1",
        "status": "committed",
        "inputHead": "head:1",
        "newHead": "head:2",
    }
    assert turn_done["params"]["turn"] == {"id": "turn-1", "status": "completed", "items": []}
    assert "method" in turn_done and "id" not in turn_done  # notifications, not responses


@pytest.mark.parametrize(
    ("status", "item", "turn"),
    [
        ("degraded", "completed", "completed"),
        ("stale", "failed", "failed"),
        ("reconciliation_required", "failed", "failed"),
    ],
)
def test_outcomes_map_to_item_and_turn_status(status: str, item: str, turn: str) -> None:
    notes = lc.compaction_turn("t", "u", "i", {"operationId": "op", "status": status})
    assert notes[2].params["item"]["status"] == item
    assert notes[3].params["turn"]["status"] == turn
    if turn != "completed":
        assert notes[3].params["turn"]["error"] == {"code": status}


def test_errors_and_cancellation_end_the_turn() -> None:
    failed = lc.compaction_turn_failed("t", "u", "i", "context_over_budget")
    assert failed[3].params["turn"] == {
        "id": "u",
        "status": "failed",
        "items": [],
        "error": {"code": "context_over_budget"},
    }
    cancelled = lc.compaction_turn_failed("t", "u", "i", None, cancelled=True)
    assert cancelled[3].params["turn"]["status"] == "interrupted"
    with pytest.raises(InvalidArgument):
        lc.compaction_completed("t", "u", "i", "bogus")
