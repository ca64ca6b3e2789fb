"""``deletion`` (issue 5): deletion convergence over the authority and three projections.

``n`` active records (the recall workload's: every 4th in project ``benchmark-project``,
the others over 8 user scopes, 16 categories) in the in-memory MemoryPort (the
authority), each also projected into three in-memory projection stores
(:class:`kernel.adapters.in_memory.projection.InMemoryProjectionStore`): ``search-index``
(its tokens), ``embeddings-cache`` (a small vector) and ``replica`` (the record's
JSON).  Every record gets its own deletion request — subject, scope/scopeId, selector
``memory:<id>``, authority, requestId, fence, expectedRevision — and all of them go in one
call of ``MemoryKernel.delete_memories`` (the batch entry point: each request validated,
bound, fenced, tombstoned first, purged from every store and receipted on its own, exactly
as ``delete_memory`` does it; ``tests/kernel/test_deletion_batch.py`` holds the two
equal).  Timed: from the first request to the last receipt, every
receipt ``purged`` (tombstone committed, all three copies purged, purge committed).  Each
sample runs on a fresh, untimed store.

Each deletion verifies the record it reads in full (field checks, secret scan, canonical
digest), as a store loaded from disk requires: there is no process-wide memo (ADR 0011).
The clock is the wall clock.

Extra fields: ``per_record_us`` (one more run / n), and, from that run: ``records``, ``stores``
(authority + 3), ``receipts_purged``, ``authority_purged`` (records in state ``purged``),
``projection_entries_left`` (must be 0), ``events`` (2 per record).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from benchmarks.recall_bench import bench_records

AUTHORITY = "benchmark-privacy-officer"
PROJECTIONS = ("search-index", "embeddings-cache", "replica")


def deletion_requests(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    requests = []
    for i, record in enumerate(records):
        memory_id = record["memoryId"]
        requests.append(
            {
                "requestId": f"del-{i:07d}",
                "subject": record["scopeId"],
                "scope": record["scope"],
                "scopeId": record["scopeId"],
                "selector": f"memory:{memory_id}",
                "memoryId": memory_id,
                "expectedRevision": record["revision"],
                "fence": f"fence-{i:07d}",
                "authority": AUTHORITY,
            }
        )
    return requests


class _Stores:
    """One sample's authority, projections and kernel."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        from kernel.adapters.in_memory.memory_store import InMemoryMemoryPort
        from kernel.adapters.in_memory.projection import InMemoryProjectionStore
        from kernel.memory.service import MemoryKernel

        self.authority = InMemoryMemoryPort(records)
        self.projections = [InMemoryProjectionStore(name) for name in PROJECTIONS]
        index, embeddings, replica = self.projections
        for record in self.authority.records():  # derived copies, immutable as stored
            index.put(record, tuple(record["content"].split()))
            embeddings.put(record, (float(len(record["content"]) % 7), record["confidence"]))
            replica.put(record, json.dumps(record, separators=(",", ":")).encode("utf-8"))
        counter = iter(range(1, 1 << 40))
        self.kernel = MemoryKernel(
            memory_port=self.authority,
            clock=lambda: time.time_ns() // 1_000_000,  # the wall clock, as a real shell
            new_id=lambda: f"bench-{next(counter)}",
            purge_ports=self.projections,
        )


def deletion(n: int) -> tuple[Callable[[], object], Callable[[], dict[str, Any]]]:
    records = bench_records(n)
    requests = deletion_requests(records)
    state: dict[str, _Stores] = {}

    def setup() -> None:
        state["stores"] = _Stores(records)

    def call() -> object:
        receipts = state["stores"].kernel.delete_memories(requests)
        for receipt in receipts:
            if receipt["status"] != "purged":
                raise AssertionError(f"deletion did not converge: {receipt['status']}")
        return receipts

    def extra() -> dict[str, Any]:
        setup()
        started = time.perf_counter()
        receipts = call()
        cold_ms = (time.perf_counter() - started) * 1000
        assert isinstance(receipts, list)
        stores = state["stores"]
        authority = stores.authority.records()
        return {
            "records": n,
            "stores": 1 + len(stores.projections),
            "per_record_us": round(cold_ms * 1000 / n, 2),
            "receipts_purged": sum(r["status"] == "purged" for r in receipts),
            "authority_purged": sum(r["state"] == "purged" for r in authority),
            "projection_entries_left": sum(len(p) for p in stores.projections),
            "events": len(stores.authority.events()),
        }

    from benchmarks.workloads import Timed

    return Timed(call, setup), extra
