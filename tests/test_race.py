"""Multi-process CAS race: 8 processes (spawn) compacting one SQLite and one JSONL session.

Phase 1 (lock-step): every round, all workers read the same head (a barrier
inside ``read_snapshot``), then race their compare-and-swap: exactly one
commits per head, the seven others get ``stale`` with the winner's head.
Phase 2 (free-running): workers interleave compactions with conversation turns.
After each phase: the committed events form one linear history (each starts
from its predecessor's head), nothing committed is lost, no event is torn, the
JSONL hash chain and the SQLite head chain verify.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import queue
import time
from pathlib import Path
from typing import Any

import pytest

from kernel.adapters.jsonl.session import JsonlSessionPort
from kernel.adapters.sqlite.session import SqliteSessionPort
from kernel.compaction.service import CompactionKernel
from tests.conformance.session_harness import conversation, items_for

WORKERS = 8
ROUNDS = 6
FREE_ROUNDS = 6
SID = "session-race"
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


def open_port(kind: str, root: Path) -> Any:
    if kind == "sqlite":
        return SqliteSessionPort(root / "race.db")
    return JsonlSessionPort(root / "jsonl")


def setup_stores(root: Path) -> dict[str, str]:
    """Seed both stores; returns their initial heads."""
    root.mkdir(parents=True, exist_ok=True)
    heads = {}
    sqlite = SqliteSessionPort(root / "race.db")
    sqlite.seed(SID, head="head:race", items=items_for(SID, conversation(14)))
    heads["sqlite"] = sqlite.read_snapshot(SID).head
    sqlite.close()
    jsonl = JsonlSessionPort(root / "jsonl")
    jsonl.start_session(SID, title="race")
    for i, message in enumerate(conversation(14)):
        jsonl.append_message(SID, message["role"], message["content"], timestamp=1_000 + i)
    heads["jsonl"] = jsonl.read_snapshot(SID).head
    return heads


class BarrierPort:
    """All workers read the same head before any of them may commit."""

    def __init__(self, inner: Any, barrier: Any) -> None:
        self.inner = inner
        self.barrier = barrier

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def read_snapshot(self, session_id: str) -> Any:
        snapshot = self.inner.read_snapshot(session_id)
        self.barrier.wait(timeout=120)
        return snapshot


def worker(index: int, root: str, barrier: Any, out: Any) -> None:
    results: list[dict[str, Any]] = []
    try:
        for kind in ("sqlite", "jsonl"):
            port = open_port(kind, Path(root))
            counter = iter(range(1, 10_000))
            kernel = CompactionKernel(
                BarrierPort(port, barrier),
                clock=lambda: int(time.time() * 1000),
                new_id=lambda counter=counter: f"w{index}-{next(counter)}",
            )
            for r in range(ROUNDS):
                receipt = kernel.compact_context(
                    {**REQUEST, "operationId": f"{kind}-w{index}-r{r}"}
                )
                results.append({"kind": kind, "phase": 1, **receipt})
            barrier.wait(timeout=120)  # every lock-step CAS is done before phase 2 starts
            free = CompactionKernel(
                port,
                clock=lambda: int(time.time() * 1000),
                new_id=lambda counter=counter: f"f{index}-{next(counter)}",
            )
            for r in range(FREE_ROUNDS):
                if index % 2 and r % 2:
                    if kind == "sqlite":
                        port.append_items(
                            SID,
                            items_for(
                                SID,
                                [{"role": "assistant", "content": f"w{index} r{r}"}],
                                start=100_000 * (index + 1) + r,
                            ),
                        )
                    else:
                        port.append_message(SID, "assistant", f"w{index} r{r}")
                    continue
                receipt = free.compact_context(
                    {**REQUEST, "operationId": f"{kind}-free-w{index}-r{r}"}
                )
                results.append({"kind": kind, "phase": 2, **receipt})
            if hasattr(port, "close"):
                port.close()
        out.put(("ok", index, results))
    except BaseException as exc:  # report instead of hanging the parent
        barrier.abort()
        out.put(("error", index, repr(exc)))


def committed_at_input_head(kind: str, port: Any) -> list[bool]:
    """For every stored compaction: was the store's head, just before it, its input head?"""
    if kind == "sqlite":
        rows = port._query(
            "SELECT prev_head, body FROM log WHERE session_id = ? AND kind = 'compaction' "
            "ORDER BY seq",
            (SID,),
        )
        return [prev == json.loads(body)["inputHead"] for prev, body in rows]
    report = port.verify(SID)
    return [
        (e["prevHash"] or "genesis") == e["data"]["canonical"]["inputHead"]
        for e in report.events
        if e.get("type") == "compact"
    ]


def check_history(kind: str, port: Any, initial: str, receipts: list[dict[str, Any]]) -> None:
    events = port.compaction_events(SID)
    assert events[0]["inputHead"] == initial, f"{kind}: history does not start at the seed"
    committed = [r for r in receipts if r["status"] == "committed"]
    assert {r["operationId"] for r in committed} == {e["operationId"] for e in events}, kind
    assert len(events) == len(committed), f"{kind}: lost or duplicated events"
    checks = committed_at_input_head(kind, port)
    assert len(checks) == len(events) and all(checks), f"{kind}: a commit did not extend its head"
    by_head: dict[str, int] = {}
    for r in committed:
        by_head[r["inputHead"]] = by_head.get(r["inputHead"], 0) + 1
    assert max(by_head.values()) == 1, f"{kind}: two commits from one head"
    heads = {r["newHead"] for r in committed}
    for stale in (r for r in receipts if r["status"] == "stale"):
        assert stale["currentHead"] != stale["inputHead"]
        assert stale["operationId"] not in {r["operationId"] for r in committed}
    assert len(heads) == len(committed)


def test_eight_processes_race_one_commit_per_head(tmp_path: Path) -> None:
    heads = setup_stores(tmp_path)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(i, str(tmp_path), barrier, out)) for i in range(WORKERS)
    ]
    for p in procs:
        p.start()
    collected: list[dict[str, Any]] = []
    errors = []
    try:
        for _ in procs:
            status, index, payload = out.get(timeout=300)
            if status == "ok":
                collected.extend(payload)
            else:
                errors.append((index, payload))
    except queue.Empty:  # pragma: no cover - a hung worker
        errors.append((-1, "timeout"))
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():  # pragma: no cover
                p.kill()
    assert not errors, errors
    for kind in ("sqlite", "jsonl"):
        mine = [r for r in collected if r["kind"] == kind]
        lockstep = [r for r in mine if r["phase"] == 1]
        assert len(lockstep) == WORKERS * ROUNDS
        statuses = sorted(r["status"] for r in lockstep)
        assert statuses.count("committed") == ROUNDS, f"{kind}: {statuses}"
        assert statuses.count("stale") == (WORKERS - 1) * ROUNDS
        for r in range(ROUNDS):  # per round: one winner, seven stale at the winner's head
            winners = [
                x
                for x in lockstep
                if x["status"] == "committed" and x["operationId"].endswith(f"-r{r}")
            ]
            losers = [
                x
                for x in lockstep
                if x["status"] == "stale" and x["operationId"].endswith(f"-r{r}")
            ]
            assert len(winners) == 1 and len(losers) == WORKERS - 1
            assert {x["currentHead"] for x in losers} == {winners[0]["newHead"]}
        assert {r["status"] for r in mine} <= {"committed", "stale"}
        port = open_port(kind, tmp_path)
        check_history(kind, port, heads[kind], mine)
        if kind == "jsonl":
            report = port.verify(SID)
            assert report.status == "verified" and not report.truncated_tail
            assert report.malformed_lines == 0
        else:
            assert port.verify(SID)
            port.close()


@pytest.mark.slow
def test_race_repeated(tmp_path: Path) -> None:
    for attempt in range(5):
        test_eight_processes_race_one_commit_per_head(tmp_path / f"attempt-{attempt}")
