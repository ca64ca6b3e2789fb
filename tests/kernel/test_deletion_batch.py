"""The batch deletion entry point (``MemoryKernel.delete_memories``): every request is
deleted exactly as ``delete_memory`` deletes it — same receipts, same stored records,
events and operations, same clock and id calls — and a refused request yields its own
``rejected`` entry without touching any other request's receipt."""

from __future__ import annotations

from typing import Any

import pytest

from kernel.adapters.in_memory.memory_store import InMemoryMemoryPort
from kernel.adapters.in_memory.projection import InMemoryProjectionStore
from kernel.errors import KernelError
from kernel.memory.service import MemoryKernel
from tests.kernel.test_deletion import request, seeded
from tests.kernel.test_memory_lifecycle import Clock, Ids, apply, make

IDS = ("mem-1", "mem-2", "mem-3", "mem-4", "mem-5")


def _records() -> list[Any]:
    records = seeded(*IDS)
    held = make(
        memoryId="mem-held",
        scope="project",
        scopeId="project-1",
        retentionPolicy={"mode": "legal_hold", "legalHoldId": "hold-1"},
    )
    records.append(apply(held, type="activate", expectedRevision=1).record)
    return records


def _world(*, mode: str = "canonical") -> tuple[MemoryKernel, InMemoryMemoryPort, list[Any]]:
    memory = InMemoryMemoryPort(_records())
    projections = [InMemoryProjectionStore(name) for name in ("index", "cache", "replica")]
    for record in memory.records():
        for projection in projections:
            projection.put(record, record["memoryId"])
    projections[1].fail_next("cache down", "cache_down")  # the first purge of "cache"
    kernel = MemoryKernel(
        memory_port=memory, clock=Clock(), new_id=Ids(), purge_ports=projections, mode=mode
    )
    return kernel, memory, projections


def _requests() -> list[Any]:
    return [
        request("mem-1", "del-1"),  # partial: the cache fails once
        request("mem-2", "del-2", fence="fence-2"),
        request("mem-missing", "del-3"),  # no such record
        request("mem-3", "del-4", scopeId="project-2"),  # scope mismatch
        request("mem-held", "del-5"),  # legal hold
        request("mem-4", "del-6", selector="memory:mem-5"),  # selector beyond its record
        request("mem-4", "del-7", expectedRevision=9),  # revision conflict
        request("mem-4", "del-8", fence="fence-8"),
        request("mem-2", "del-2", fence="fence-2"),  # replay of del-2
        request("mem-5", "del-2", fence="fence-2"),  # reused id, other binding
        "not an object",
        request("mem-5", "del-9", reason=""),
        request("mem-5", "del-10", fence="fence-10"),  # already deleted by del-9
    ]


def _state(memory: InMemoryMemoryPort, projections: list[Any]) -> dict[str, Any]:
    return {
        **memory.snapshot(),
        "projections": [sorted(p._entries) for p in projections],
    }


def _one_by_one(kernel: MemoryKernel, requests: list[Any]) -> list[dict[str, Any]]:
    out = []
    for raw in requests:
        try:
            out.append(kernel.delete_memory(raw))
        except KernelError as error:
            request_id = raw.get("requestId") if isinstance(raw, dict) else None
            out.append({"requestId": request_id, "status": "rejected", "error": error.to_wire()})
    return out


@pytest.mark.parametrize("batch_first", [False, True])
def test_batch_equals_one_request_at_a_time(batch_first: bool) -> None:
    """Whichever runs first, the answers are the same (no call depends on what the process
    did before it)."""
    single, single_memory, single_projections = _world()
    batch, batch_memory, batch_projections = _world()
    if batch_first:
        batched = batch.delete_memories(_requests())
        expected = _one_by_one(single, _requests())
    else:
        expected = _one_by_one(single, _requests())
        batched = batch.delete_memories(_requests())
    assert batched == expected
    assert _state(batch_memory, batch_projections) == _state(single_memory, single_projections)
    assert [entry["status"] for entry in expected] == [
        "partial",
        "purged",
        "rejected",
        "rejected",
        "rejected",
        "rejected",
        "rejected",
        "purged",
        "purged",
        "rejected",
        "rejected",
        "purged",
        "rejected",
    ]
    codes = [entry["error"]["code"] for entry in expected if entry["status"] == "rejected"]
    assert codes == [
        "invalid_argument",
        "scope_denied",
        "scope_denied",
        "invalid_argument",
        "revision_conflict",
        "revision_conflict",
        "invalid_argument",
        "revision_conflict",
    ]


def test_a_refused_request_never_changes_another_receipt() -> None:
    alone, _, _ = _world()
    mixed, memory, _ = _world()
    receipts = alone.delete_memories([request("mem-1", "del-1"), request("mem-2", "del-2")])
    with_failures = mixed.delete_memories(
        [
            request("mem-1", "del-1"),
            request("mem-missing", "del-x"),
            request("mem-3", "del-y", scope="user", scopeId="user-1"),
            request("mem-2", "del-2"),
        ]
    )
    assert with_failures[0] == receipts[0]
    assert with_failures[3]["status"] == "purged"
    assert with_failures[1]["requestId"] == "del-x"
    assert with_failures[1]["status"] == "rejected"
    # nothing beyond the named records: mem-3 untouched
    assert memory.read("mem-3")["state"] == "active"  # type: ignore[index]
    every = [s["store"] for s in with_failures[3]["stores"]]
    assert every == ["in-memory-authority", "index", "cache", "replica"]


def test_every_request_passes_the_authority_gate() -> None:
    kernel, memory, _ = _world(mode="shadow")
    out = kernel.delete_memories([request("mem-1", "del-1"), request("mem-2", "del-2")])
    assert [entry["error"]["code"] for entry in out] == ["legacy_writer_fenced"] * 2
    assert memory.read("mem-1")["state"] == "active"  # type: ignore[index]


@pytest.mark.parametrize("requests", [None, "del-1", {"requestId": "del-1"}])
def test_requests_must_be_an_array(requests: Any) -> None:
    kernel, _, _ = _world()
    with pytest.raises(KernelError) as caught:
        kernel.delete_memories(requests)
    assert caught.value.code == "invalid_argument"


def test_an_empty_batch_deletes_nothing() -> None:
    kernel, memory, _ = _world()
    before = memory.store_revision()
    assert kernel.delete_memories([]) == []
    assert memory.store_revision() == before
