"""Crash safety: a child compacting in a loop is killed at random points of a commit.

Each trial starts a child that commits compactions (and conversation turns) as
fast as it can into one JSONL and one SQLite session, kills it with
``Process.kill()`` (``SIGKILL``; ``TerminateProcess`` on Windows) after a random
delay, then reopens both stores and checks: the chain verifies, every visible
compaction event is complete (its digest recomputes), no partial event is
visible, and the store accepts the next commit (a torn JSONL tail is dropped).
A targeted trial tears a line in half on purpose.  The quick set runs a few
trials; the ``slow`` set runs 100+.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kernel.adapters.jsonl import chain as jsonl_chain
from kernel.adapters.jsonl.session import JsonlSessionPort
from kernel.adapters.sqlite.session import SqliteSessionPort
from kernel.canonical.digest import digest
from kernel.compaction.service import CompactionKernel
from tests.conformance.session_harness import conversation, items_for
from tests.test_race import REQUEST, SID

KINDS = ("jsonl", "sqlite")


def _context() -> Any:
    if sys.platform != "win32" and "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["kernel.compaction.service", "tests.test_crash"])
        return ctx
    return mp.get_context("spawn")  # pragma: no cover - Windows


def open_port(kind: str, root: Path) -> Any:
    return (
        SqliteSessionPort(root / "crash.db")
        if kind == "sqlite"
        else JsonlSessionPort(root / "jsonl")
    )


def seed(root: Path) -> None:
    sqlite = SqliteSessionPort(root / "crash.db")
    sqlite.seed(SID, head="head:crash", items=items_for(SID, conversation(12)))
    sqlite.close()
    jsonl = JsonlSessionPort(root / "jsonl")
    jsonl.start_session(SID, title="crash")
    for i, message in enumerate(conversation(12)):
        jsonl.append_message(SID, message["role"], message["content"], timestamp=1_000 + i)


def kernel_for(port: Any) -> CompactionKernel:
    return CompactionKernel(
        port, clock=lambda: int(time.time() * 1000), new_id=lambda: uuid.uuid4().hex
    )


def child(kind: str, root: str, ready: Any, tear: bool) -> None:
    port = open_port(kind, Path(root))
    kernel = kernel_for(port)
    if tear:  # write half of the next line, then die mid-write
        real = jsonl_chain.append_durably

        def torn(path: Path, data: bytes, *, keep: int | None = None) -> None:
            real(path, data[: len(data) // 2], keep=keep)
            os.kill(os.getpid(), signal.SIGKILL)

        jsonl_chain.append_durably = torn  # type: ignore[assignment]
        import kernel.adapters.jsonl.session as js

        js.append_durably = torn  # type: ignore[assignment]
    n = 0
    while True:
        n += 1
        if n % 3 == 0:
            if kind == "sqlite":
                port.append_items(
                    SID,
                    items_for(SID, [{"role": "assistant", "content": f"t{n}"}], start=10**6 + n),
                )
            else:
                port.append_message(SID, "assistant", f"t{n}")
        else:
            kernel.compact_context({**REQUEST, "operationId": f"crash-{uuid.uuid4().hex}"})
        if n == 1:
            ready.set()


def check_store(kind: str, root: Path) -> dict[str, int]:
    """Reopen after the crash; everything visible must be whole and verifiable."""
    port = open_port(kind, root)
    try:
        torn = 0
        if kind == "jsonl":
            report = port.verify(SID)
            assert report.status == "verified", report.reason
            torn = int(report.truncated_tail)
        else:
            assert port.verify(SID)
            assert port._query("PRAGMA integrity_check") == [("ok",)]
        events = port.compaction_events(SID)
        for event in events:
            body = {k: v for k, v in event.items() if k != "digest"}
            assert digest(body, "chainlesschain.compaction-event/v1", "peer") == event["digest"]
        assert len({e["operationId"] for e in events}) == len(events)
        snapshot = port.read_snapshot(SID)
        assert snapshot is not None and snapshot.epoch >= len(events) - 0
        receipt = kernel_for(port).compact_context(
            {**REQUEST, "operationId": f"after-{uuid.uuid4().hex}"}
        )
        assert receipt["status"] == "committed"  # the store accepts the next commit
        if kind == "jsonl":
            after = port.verify(SID)
            assert after.status == "verified" and not after.truncated_tail
        else:
            assert port.verify(SID)
        return {"events": len(events), "torn": torn}
    finally:
        if hasattr(port, "close"):
            port.close()


def run_trials(root: Path, trials: int, seed_value: int) -> dict[str, int]:
    root.mkdir(parents=True, exist_ok=True)
    seed(root)
    ctx = _context()
    rng = random.Random(seed_value)
    totals = {"trials": 0, "torn": 0}
    for trial in range(trials):
        kind = KINDS[trial % 2]
        tear = kind == "jsonl" and trial % 10 == 4
        ready = ctx.Event()
        proc = ctx.Process(target=child, args=(kind, str(root), ready, tear))
        proc.start()
        try:
            if not tear:
                assert ready.wait(timeout=60), "child never committed"
                time.sleep(rng.uniform(0.0, 0.08))
                proc.kill()
            proc.join(timeout=60)
        finally:
            if proc.is_alive():  # pragma: no cover
                proc.kill()
                proc.join()
        result = check_store(kind, root)
        totals["trials"] += 1
        totals["torn"] += result["torn"]
    return totals


def test_crash_quick(tmp_path: Path) -> None:
    totals = run_trials(tmp_path, trials=6, seed_value=108)
    assert totals["trials"] == 6
    assert totals["torn"] >= 1  # the targeted trial really tore a line


@pytest.mark.slow
def test_crash_hundred_trials(tmp_path: Path) -> None:
    totals = run_trials(tmp_path, trials=120, seed_value=int(time.time()))
    assert totals["trials"] == 120 and totals["torn"] >= 6
