"""CompactionKernel behaviour beyond the peer vectors (kernel/compaction/service.py)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from kernel.adapters.in_memory.session import InMemorySessionPort
from kernel.compaction.machine import Announce
from kernel.compaction.service import CompactionKernel
from kernel.errors import LegacyWriterFenced, StoreFailure
from kernel.ports import CasResult, SummarizerFailure, SummaryCancelled
from tests.conformance.session_harness import T0, conversation, items_for

SID = "session-svc"
REQUEST: dict[str, Any] = {
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


def setup(
    events: list[Announce] | None = None, port: Any = None
) -> tuple[CompactionKernel, InMemorySessionPort]:
    port = port or InMemorySessionPort()
    port.seed(SID, head="head:1", items=items_for(SID, conversation(14)))
    ids = itertools.count(1)
    kernel = CompactionKernel(
        port,
        clock=lambda: T0,
        new_id=lambda: f"id-{next(ids):03d}",
        listener=events.append if events is not None else None,
    )
    return kernel, port


def summary_for(dropped: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    parents = [d["digest"] for d in dropped]
    item = {
        "schemaVersion": 1,
        "itemId": "summary-1",
        "kind": "message",
        "scope": "session",
        "scopeId": SID,
        "sourceRef": {"store": "compactor", "id": "summary-1"},
        "provenance": {
            "source": "summarizer",
            "observedAt": "2026-08-20T12:00:00.000Z",
            "parentDigests": parents,
        },
        "trust": "untrusted",
        "sensitivity": "personal",
        "allowedSinks": ["*"],
        "tokenEstimate": 10,
        "priority": 999_999,
        "pinned": False,
        "createdAt": "2026-08-20T12:00:00.000Z",
        "content": "summary of earlier turns",
    }
    return {"items": [item], "usageReceipt": {"outcome": "settled", "callId": "c1"}, **extra}


def test_commit_binds_the_atomic_commit_fields_and_announces() -> None:
    events: list[Announce] = []
    kernel, port = setup(events)
    receipt = kernel.compact_context({**REQUEST, "operationId": "op-1"})
    assert receipt["status"] == "committed"
    (event,) = port.compaction_events(SID)
    for key in (
        "sessionId",
        "inputHead",
        "inputDigest",
        "policyVersion",
        "modelProfile",
        "strategy",
        "outputDigest",
        "artifactRefs",
        "usageReceipt",
        "startedAt",
        "committedAt",
    ):
        assert key in event, key
    assert [e.name for e in events] == ["started", "committed"]


def test_same_inputs_give_byte_identical_receipts() -> None:
    first = setup()[0].compact_context({**REQUEST, "operationId": "op-1"})
    second = setup()[0].compact_context({**REQUEST, "operationId": "op-1"})
    assert first == second


def test_provider_summary_commits_provider_backed() -> None:
    kernel, port = setup()
    receipt = kernel.compact_context(
        {**REQUEST, "operationId": "op-s", "summarizer": lambda dropped, ctx: summary_for(dropped)}
    )
    assert receipt["status"] == "committed"
    (event,) = port.compaction_events(SID)
    assert event["strategy"] == "provider-backed" and "summary-1" in receipt["selectedItemIds"]
    assert event["usageReceipt"] == {"outcome": "settled", "callId": "c1"}


def test_fallback_is_degraded_never_a_semantic_summary() -> None:
    def failing(dropped: Any, ctx: Any) -> Any:
        raise SummarizerFailure("provider down", code="provider_error")

    kernel, port = setup()
    receipt = kernel.compact_context(
        {**REQUEST, "operationId": "op-f", "summarizer": failing, "allowFallback": True}
    )
    assert receipt["status"] == "degraded"
    assert port.compaction_events(SID)[0]["strategy"] == "deterministic-fallback"


def test_unknown_usage_requires_reconciliation_even_with_fallback() -> None:
    events: list[Announce] = []
    kernel, port = setup(events)
    output = lambda dropped, ctx: {**summary_for(dropped), "usageReceipt": {"outcome": "unknown"}}  # noqa: E731
    receipt = kernel.compact_context(
        {**REQUEST, "operationId": "op-u", "summarizer": output, "allowFallback": True}
    )
    assert receipt["status"] == "reconciliation_required"
    assert receipt["lifecycle"][-1]["details"] == {"code": "provider_usage_unsettled"}
    assert port.compaction_events(SID) == [] and port.reconciliations(SID) == [receipt]
    assert kernel.reconcile("op-u") == receipt
    assert kernel.compact_context({**REQUEST, "operationId": "op-u"}) == receipt  # never retried
    assert [e.name for e in events] == ["started", "reconciliation_required"]


def test_cancellation_aborts_and_never_falls_back() -> None:
    events: list[Announce] = []

    def cancelled(dropped: Any, ctx: Any) -> Any:
        raise SummaryCancelled("user pressed stop")

    kernel, port = setup(events)
    with pytest.raises(SummaryCancelled) as info:
        kernel.compact_context(
            {**REQUEST, "operationId": "op-c", "summarizer": cancelled, "allowFallback": True}
        )
    lifecycle = info.value.compaction_lifecycle  # type: ignore[attr-defined]
    assert lifecycle[-1]["state"] == "aborted" and lifecycle[-1]["details"] == {"code": "cancelled"}
    assert port.compaction_events(SID) == []
    assert [e.name for e in events] == ["started", "aborted"]


def test_store_failure_during_commit_is_an_unknown_outcome() -> None:
    class Flaky(InMemorySessionPort):
        def __init__(self, commit_then_fail: bool) -> None:
            super().__init__()
            self.commit_then_fail = commit_then_fail

        def append_compaction(self, event: Any, expected_head: str) -> CasResult:
            if self.commit_then_fail:
                super().append_compaction(event, expected_head)
            raise StoreFailure("disk went away")

    for committed in (False, True):
        events: list[Announce] = []
        kernel, port = setup(events, port=Flaky(committed))
        with pytest.raises(StoreFailure) as info:
            kernel.compact_context({**REQUEST, "operationId": "op-x"})
        lifecycle = info.value.compaction_lifecycle  # type: ignore[attr-defined]
        assert lifecycle[-1]["state"] == "reconciliation_required"
        assert lifecycle[-1]["details"] == {"code": "commit_outcome_unknown"}
        # announced, but nothing persisted: only reconcile can tell whether it landed
        assert [e.name for e in events] == ["started", "reconciliation_required"]
        assert port.reconciliations(SID) == []
        settled = kernel.reconcile("op-x")
        assert settled["status"] == ("committed" if committed else "not_found")


def test_concurrent_retry_of_the_same_operation_returns_the_stored_receipt() -> None:
    kernel, port = setup()
    original = kernel.compact_context({**REQUEST, "operationId": "op-1"})

    class Forgetful:
        """First lookup misses (as if read before the other process committed)."""

        def __init__(self) -> None:
            self.lookups = 0

        def __getattr__(self, name: str) -> Any:
            return getattr(port, name)

        def read_operation(self, operation_id: str) -> Any:
            self.lookups += 1
            return None if self.lookups == 1 else port.read_operation(operation_id)

    retry = CompactionKernel(Forgetful(), clock=lambda: T0 + 5, new_id=lambda: "zz")
    assert retry.compact_context({**REQUEST, "operationId": "op-1"}) == original


def test_the_loop_carries_out_the_machines_effects_in_order() -> None:
    """Every port call is an effect the machine asked for, in the machine's order."""
    calls: list[str] = []

    class Recording(InMemorySessionPort):
        def read_snapshot(self, session_id: str) -> Any:
            calls.append("ReadSnapshot")
            return super().read_snapshot(session_id)

        def append_compaction(self, event: Any, expected_head: str) -> CasResult:
            calls.append(f"AppendCompaction({expected_head})")
            return super().append_compaction(event, expected_head)

    def summarizer(dropped: Any, ctx: Any) -> Any:
        calls.append("InvokeSummarizer")
        return summary_for(dropped)

    class Announced(list[Announce]):
        def append(self, effect: Announce) -> None:
            calls.append(f"Announce({effect.name})")

    kernel, _ = setup(Announced(), port=Recording())
    receipt = kernel.compact_context({**REQUEST, "operationId": "op-o", "summarizer": summarizer})
    assert receipt["status"] == "committed"
    assert calls == [
        "Announce(started)",
        "ReadSnapshot",
        "InvokeSummarizer",
        "AppendCompaction(head:1)",
        "Announce(committed)",
    ]
    assert [e["state"] for e in receipt["lifecycle"]] == [
        "evaluating", "preparing", "summarizing", "verifying", "committing", "committed"
    ]


def test_a_lost_reconciliation_cas_returns_stale_not_the_pending_receipt() -> None:
    class Moved(InMemorySessionPort):
        def append_reconciliation(self, receipt: Any, expected_head: str) -> CasResult:
            return CasResult(False, current_head="head:moved")

    events: list[Announce] = []
    kernel, _ = setup(events, port=Moved())
    output = lambda dropped, ctx: {**summary_for(dropped), "usageReceipt": {"outcome": "unknown"}}  # noqa: E731
    receipt = kernel.compact_context({**REQUEST, "operationId": "op-m", "summarizer": output})
    assert (receipt["status"], receipt["currentHead"]) == ("stale", "head:moved")
    assert receipt["lifecycle"][-1]["state"] == "reconciliation_required"
    assert [e.name for e in events] == ["started", "reconciliation_required"]


def test_shadow_mode_cannot_mutate() -> None:
    port = InMemorySessionPort()
    kernel = CompactionKernel(port, clock=lambda: T0, new_id=lambda: "x", mode="shadow")
    with pytest.raises(LegacyWriterFenced):
        kernel.compact_context({**REQUEST})
    with pytest.raises(LegacyWriterFenced):
        kernel.reconcile("op-1")
