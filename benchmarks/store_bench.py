"""Workloads on the default real adapters (issue 14 item 7), beside the naive in-memory ports.

Each store is built once, untimed, in a temp folder and closed; before every sample a copy
of its file(s) goes into a fresh folder (untimed), so every sample does the same work on a
store of the same size, opened as a real caller opens it (durable writes: SQLite
``synchronous=FULL`` in WAL, JSONL ``fsync`` per appended line).

* ``deletion_sqlite`` — ``benchmarks/deletion_bench.py``'s workload with the authority in a
  :class:`~kernel.adapters.sqlite.memory_store.SqliteMemoryPort` (the three projections stay
  in memory).  The peer's own deletion figure is for an in-memory authority, so this one is
  reported, not held to the peer's.
* ``compaction_sqlite`` / ``compaction_jsonl`` — the ``compaction`` workload's request through
  a :class:`~kernel.adapters.sqlite.session.SqliteSessionPort` seeded with the same
  (normalized) items, or a :class:`~kernel.adapters.jsonl.session.JsonlSessionPort`
  transcript of ``n`` messages plus a system goal (the legacy CLI's shape; its items are the
  transcript's projection); the whole call: snapshot read, plan, compare-and-swap append.
* ``recall_lexical_sqlite`` — the ``recall_lexical`` workload over a read-only
  ``SqliteMemoryPort`` (what ``recall_memory`` opens): the index proposes, every hit is
  re-read from the database.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Run = Callable[[], object]
Extra = Callable[[], dict[str, Any]]


class _Copies:
    """A store built once in ``<tmp>/built``; ``fresh()`` gives a copy in a new folder."""

    def __init__(self, prefix: str, build: Callable[[Path], None]) -> None:
        self.parent = Path(tempfile.mkdtemp(prefix=prefix))
        self.built = self.parent / "built"
        self.built.mkdir()
        build(self.built)
        self.count = 0

    def fresh(self) -> Path:
        if self.count:
            shutil.rmtree(self.parent / f"run-{self.count}", ignore_errors=True)
        self.count += 1
        target = self.parent / f"run-{self.count}"
        shutil.copytree(self.built, target)
        return target

    def remove(self) -> None:
        shutil.rmtree(self.parent, ignore_errors=True)


def _memory_store(records: list[dict[str, Any]]) -> Callable[[Path], None]:
    """Builds ``memory.sqlite3`` holding ``records`` (seeded, then closed)."""
    from kernel.adapters.sqlite.memory_store import SqliteMemoryPort

    def build(folder: Path) -> None:
        writer = SqliteMemoryPort(folder / "memory.sqlite3")
        try:
            writer.seed(records)
        finally:
            writer.close()

    return build


# --- deletion over the SQLite memory store --------------------------------------------------


def deletion_sqlite(n: int) -> tuple[Run, Extra]:
    from benchmarks.deletion_bench import PROJECTIONS, deletion_requests
    from benchmarks.recall_bench import bench_records
    from benchmarks.workloads import Timed
    from kernel.adapters.in_memory.projection import InMemoryProjectionStore
    from kernel.adapters.sqlite.memory_store import SqliteMemoryPort
    from kernel.memory.service import MemoryKernel

    records = bench_records(n)
    requests = deletion_requests(records)
    copies = _Copies("cmk-bench-deletion-sqlite-", _memory_store(records))
    state: dict[str, Any] = {}

    def setup() -> None:
        if "authority" in state:
            state["authority"].close()
        authority = SqliteMemoryPort(copies.fresh() / "memory.sqlite3")
        projections = [InMemoryProjectionStore(name) for name in PROJECTIONS]
        for record in authority.records():
            for projection in projections:
                projection.put(record, record["content"])
        counter = iter(range(1, 1 << 40))
        state["authority"], state["projections"] = authority, projections
        state["kernel"] = MemoryKernel(
            memory_port=authority,
            clock=lambda: time.time_ns() // 1_000_000,
            new_id=lambda: f"bench-{next(counter)}",
            purge_ports=projections,
        )

    def call() -> object:
        started = time.perf_counter()
        receipts = state["kernel"].delete_memories(requests)
        state["last_ms"] = (time.perf_counter() - started) * 1000
        for receipt in receipts:
            if receipt["status"] != "purged":
                raise AssertionError(f"deletion did not converge: {receipt['status']}")
        state["receipts"] = receipts
        return receipts

    def extra() -> dict[str, Any]:  # from the last timed sample (a 10k sample takes ~30 s)
        authority, receipts = state["authority"], state["receipts"]
        out = {
            "records": n,
            "stores": 1 + len(state["projections"]),
            "last_per_record_us": round(state["last_ms"] * 1000 / n, 2),
            "receipts_purged": sum(r["status"] == "purged" for r in receipts),
            "authority_purged": sum(r["state"] == "purged" for r in authority.records()),
            "projection_entries_left": sum(len(p) for p in state["projections"]),
            "events": len(authority.events()),
            "store_revision": authority.store_revision(),
        }
        authority.close()
        copies.remove()
        return out

    return Timed(call, setup), extra


# --- compaction over the real session stores ------------------------------------------------


def _compaction_kernel(port: Any) -> Any:
    from kernel.compaction.service import CompactionKernel

    counter = iter(range(1, 1 << 30))
    return CompactionKernel(
        port, clock=lambda: 1_787_961_600_000, new_id=lambda: f"c-{next(counter)}"
    )


def _compaction_on(
    n: int, prefix: str, build: Callable[[Path], None], open_port: Callable[[Path], Any]
) -> tuple[Run, Extra]:
    from benchmarks.workloads import COMPACTION_REQUEST, Timed

    copies = _Copies(prefix, build)
    state: dict[str, Any] = {}

    def setup() -> None:
        if hasattr(state.get("port"), "close"):
            state["port"].close()
        state["port"] = open_port(copies.fresh())

    def call() -> object:
        receipt = _compaction_kernel(state["port"]).compact_context(dict(COMPACTION_REQUEST))
        assert receipt["status"] == "committed", receipt["status"]
        return receipt

    def extra() -> dict[str, Any]:
        setup()
        snapshot = state["port"].read_snapshot(COMPACTION_REQUEST["sessionId"])
        items = len(snapshot.items)
        times = []
        for _ in range(3):  # a read of the whole session alone (median of 3)
            t = time.perf_counter()
            state["port"].read_snapshot(COMPACTION_REQUEST["sessionId"])
            times.append((time.perf_counter() - t) * 1000)
        receipt = call()
        assert isinstance(receipt, dict)
        out = {"selected": len(receipt["selectedItemIds"]), "items": items,
               "read_snapshot_ms": round(statistics.median(times), 3)}  # fmt: skip
        if hasattr(state["port"], "close"):
            state["port"].close()
        copies.remove()
        return out

    return Timed(call, setup), extra


def compaction_sqlite(n: int) -> tuple[Run, Extra]:
    from benchmarks.workloads import COMPACTION_SESSION, compaction_items
    from kernel.adapters.sqlite.session import SqliteSessionPort
    from kernel.canonical.items import normalize_context_item

    items = [normalize_context_item(i, profile="peer") for i in compaction_items(n)]

    def build(folder: Path) -> None:
        port = SqliteSessionPort(folder / "sessions.db")
        try:
            port.seed(COMPACTION_SESSION, head="head:bench", memory_revision=1, items=items)
        finally:
            port.close()

    return _compaction_on(
        n, "cmk-bench-compaction-sqlite-", build,
        lambda folder: SqliteSessionPort(folder / "sessions.db"),
    )  # fmt: skip


def compaction_jsonl(n: int) -> tuple[Run, Extra]:
    from benchmarks.workloads import COMPACTION_SESSION
    from kernel.adapters.jsonl.session import JsonlSessionPort

    def build(folder: Path) -> None:
        port = JsonlSessionPort(folder / "sessions")
        port.start_session(COMPACTION_SESSION, title="bench")
        port.append_message(COMPACTION_SESSION, "system",
                            "goal: keep the benchmark session's task state across compaction",
                            timestamp=1_787_961_600_000)  # fmt: skip
        for i in range(n):
            role = "user" if i % 2 == 0 else "assistant"
            port.append_message(COMPACTION_SESSION, role, f"message {i}",
                                timestamp=1_787_961_600_001 + i)  # fmt: skip

    return _compaction_on(
        n, "cmk-bench-compaction-jsonl-", build,
        lambda folder: JsonlSessionPort(folder / "sessions"),
    )  # fmt: skip


# --- recall over the SQLite memory store ----------------------------------------------------


def recall_lexical_sqlite(n: int) -> tuple[Run, Extra]:
    from benchmarks.recall_bench import _median_ms, bench_records, request
    from kernel.adapters.sqlite.memory_store import SqliteMemoryPort
    from kernel.memory.recall import RecordIndex, recall_memory

    copies = _Copies("cmk-bench-recall-sqlite-", _memory_store(bench_records(n)))
    port = SqliteMemoryPort(copies.built / "memory.sqlite3", read_only=True)
    index = RecordIndex("canonical")
    index.rebuild(port)  # the projection recall follows (built untimed)
    req = request()

    def run() -> object:
        outcome = recall_memory(port, req, index=index)
        assert outcome.path == "index" and outcome.degraded is None
        return outcome

    def extra() -> dict[str, Any]:
        out: dict[str, Any] = {"records": n}
        out["rebuild_ms"] = _median_ms(lambda: RecordIndex("canonical").rebuild(port), 1)
        out["scan_ms"] = _median_ms(lambda: recall_memory(port, req))
        result = recall_memory(port, req, index=index).result
        out["results"] = len(result["results"])
        out["hits"] = result["totalCandidates"]
        assert recall_memory(port, req).result == result  # index path = admitted-scope scan
        port.close()
        copies.remove()
        return out

    return run, extra
