"""``recall_lexical`` (issue 5): the peer's recall workload against the kernel path.

``n`` active records — every 4th in project scope ``benchmark-project``, the others spread
over 8 user scopes; every 97th contains "needle"; 16 categories — in the in-memory
MemoryPort; the recall index (``kernel.memory.recall.RecordIndex``, canonical analyzer) is built
once, untimed.  Timed: ``recall_memory(port, request, index=…)`` for the query "needle",
limit 20, token budget 8192, admitting ``benchmark-project`` and one user scope — the full
kernel path: index search over the admitted partitions, every hit re-read from the port and
checked against its indexed digest, governance, ranking, selection and the result digest.

Extra fields: ``build_ms`` (index build over the port's records, median of 3),
``rebuild_ms`` (``RecordIndex.rebuild`` including the port's record copies),
``index_bytes`` (tracemalloc growth while building), ``all_scopes_p50_ms`` (the same
query admitting all 9 scopes), ``scan_ms`` (the index-free admitted-scope scan, median of
3), ``hits``/``results`` and ``peer_scan_ms`` (this machine's ``rank_memory_records`` on all
records, the peer's algorithm; one run, 10k and below only).
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

T0 = "2026-08-29T00:00:00.000Z"
PROJECT = "benchmark-project"
USERS = [f"benchmark-user-{k}" for k in range(8)]
VOCABULARY = [
    "deploy",
    "release",
    "rollback",
    "canary",
    "cache",
    "index",
    "schema",
    "migration",
    "backup",
    "restore",
    "verify",
    "session",
    "context",
    "budget",
    "token",
    "window",
    "router",
    "handler",
    "queue",
    "worker",
    "retry",
    "timeout",
    "latency",
    "audit",
    "policy",
    "review",
    "branch",
    "commit",
    "config",
    "env",
    "sandbox",
    "pipeline",
    "artifact",
]


def bench_records(n: int) -> list[dict[str, Any]]:
    records = []
    user_slot = 0
    for i in range(n):
        if i % 4 == 0:
            scope_id = PROJECT
            scope = "project"
        else:
            scope_id = USERS[user_slot % 8]
            scope = "user"
            user_slot += 1
        words = [VOCABULARY[(i * 7 + k * 13) % len(VOCABULARY)] for k in range(8 + i % 9)]
        if i % 97 == 0:
            words.insert(len(words) // 2, "needle")
        records.append(
            {
                "schemaVersion": 1,
                "memoryId": f"mem-{i:07d}",
                "scope": scope,
                "scopeId": scope_id,
                "category": f"category-{i % 16:02d}",
                "content": f"memory {i}: " + " ".join(words),
                "provenance": {"source": "bench", "observedAt": T0},
                "evidenceRefs": [{"store": "bench", "id": f"ev-{i}"}],
                "confidence": round(0.5 + (i % 50) / 100, 2),
                "importance": round((i % 37) / 37, 4),
                "tags": [],
                "sensitivity": "internal",
                "allowedSinks": ["provider"],
                "state": "active",
                "retentionPolicy": {"mode": "durable"},
                "createdAt": T0,
                "updatedAt": T0,
                "accessCount": 0,
                "revision": 1,
            }
        )
    return records


def request(all_scopes: bool = False) -> dict[str, Any]:
    users = USERS if all_scopes else USERS[:1]
    return {
        "query": "needle",
        "sink": "provider",
        "scopeAdmissions": [
            {"scope": "project", "scopeId": PROJECT},
            *({"scope": "user", "scopeId": u} for u in users),
        ],
        "limit": 20,
        "tokenBudget": 8192,
        "now": "2026-09-01T00:00:00.000Z",
    }


def _median_ms(fn: Callable[[], object], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 3)


def recall_lexical(n: int) -> tuple[Callable[[], object], Callable[[], dict[str, Any]]]:
    from kernel.adapters.in_memory.memory_store import InMemoryMemoryPort
    from kernel.memory.recall import RecordIndex, build_index, rank_memory_records, recall_memory

    raw = bench_records(n)
    port = InMemoryMemoryPort(raw)
    records = port.records()
    holder = RecordIndex("canonical", build_index(records, "canonical", port.store_revision()))
    req = request()

    def run() -> object:
        outcome = recall_memory(port, req, index=holder)
        assert outcome.path == "index" and outcome.degraded is None
        return outcome

    def extra() -> dict[str, Any]:
        out: dict[str, Any] = {"records": n}
        out["build_ms"] = _median_ms(
            lambda: build_index(records, "canonical", port.store_revision())
        )
        out["rebuild_ms"] = _median_ms(lambda: RecordIndex("canonical").rebuild(port), 1)
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        kept = build_index(records, "canonical", port.store_revision())
        out["index_bytes"] = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        del kept
        wide = request(all_scopes=True)
        samples = []
        for _ in range(7):
            t = time.perf_counter()
            recall_memory(port, wide, index=holder)
            samples.append((time.perf_counter() - t) * 1000)
        out["all_scopes_p50_ms"] = round(statistics.median(samples), 3)
        out["scan_ms"] = _median_ms(lambda: recall_memory(port, req))
        result = recall_memory(port, req, index=holder).result
        out["results"] = len(result["results"])
        out["hits"] = result["totalCandidates"]
        assert recall_memory(port, req).result == result  # index path = admitted-scope scan
        if n <= 10_000:
            peer = {**req, "scopeAdmissions": req["scopeAdmissions"]}
            out["peer_scan_ms"] = _median_ms(lambda: rank_memory_records(raw, peer), 1)
        return out

    return run, extra
