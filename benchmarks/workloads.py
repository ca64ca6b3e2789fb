"""Workload registry.  ``build(name, n)`` returns (run, extra) where ``run`` is the timed
call and ``extra()`` returns additional result fields measured outside the timer.  A ``run``
with a ``setup`` attribute gets ``setup()`` called, untimed, before every sample (a fresh
session or store, so every sample does the same work).  Workloads are described in
``docs/benchmarks.md``."""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Run = Callable[[], object]
Extra = Callable[[], dict[str, Any]]

WORKLOADS: dict[str, list[int]] = {
    "shadow_compare": [42],  # n = fixtures of the bundled corpus
    "shadow_run": [42],
    "plan": [1_000, 10_000],
    "compaction": [100, 1_000],
    "content_put": [1, 10, 100],
    "cas_race": [1_000],
    "recall_lexical": [1_000, 10_000, 100_000],
    "deletion": [1, 100, 10_000],
    # the default real adapters (benchmarks/store_bench.py); no peer figure: reported
    "deletion_sqlite": [1, 100, 10_000],
    "compaction_sqlite": [100, 1_000],
    "compaction_jsonl": [100, 1_000],
    "recall_lexical_sqlite": [1_000, 10_000, 100_000],
}

#: Timed samples at most, for workloads whose largest size takes tens of seconds a call
#: (``--samples`` above it is lowered to this; the warm-up call still runs).
MAX_SAMPLES: dict[str, int] = {"deletion_sqlite": 3}

# Peer P50 figures (ms) from the issue texts, measured on this machine kind.
PEER_FIGURES: dict[tuple[str, int], float] = {
    ("plan", 1_000): 21.7,
    ("plan", 10_000): 196.0,
    ("compaction", 100): 9.9,
    ("compaction", 1_000): 64.6,
    ("content_put", 1): 1.0,
    ("content_put", 10): 10.4,
    ("content_put", 100): 107.0,
    ("cas_race", 1_000): 121.0,
    ("recall_lexical", 1_000): 38.0,
    ("recall_lexical", 10_000): 210.0,
    ("recall_lexical", 100_000): 2_225.0,
    ("deletion", 1): 2.2,
    ("deletion", 100): 49.0,
    ("deletion", 10_000): 3_568.0,
}


def plan_request(n: int) -> dict[str, Any]:
    """The peer's plan workload: n session messages, window 4096 (issue 3 Benchmark)."""
    now = "2026-08-29T00:00:00.000Z"
    items = [
        {
            "schemaVersion": 1,
            "itemId": f"msg-{i:06d}",
            "kind": "message",
            "scope": "session",
            "scopeId": "bench-session",
            "sourceRef": {"store": "session", "id": f"evt-{i}", "eventSequence": i},
            "provenance": {"source": "bench", "observedAt": now},
            "trust": "user",
            "sensitivity": "internal",
            "allowedSinks": ["provider"],
            "tokenEstimate": 8 + i % 32,
            "priority": i % 101,
            "pinned": False,
            "createdAt": now,
            "content": f"message {i}",
        }
        for i in range(n)
    ]
    return {
        "modelWindowTokens": 4096,
        "reservedOutputTokens": 512,
        "safetyMarginTokens": 256,
        "recoveryReserveTokens": 256,
        "items": items,
        "sink": "provider",
        "scopeAdmissions": [{"scope": "session", "scopeId": "bench-session"}],
        "policyVersion": "bench-policy-1",
        "modelProfile": "bench-model",
        "sessionHead": "head-1",
        "memoryRevision": 0,
        "now": now,
    }


def _plan(n: int) -> tuple[Run, Extra]:
    from kernel.planning.planner import plan_context

    request = plan_request(n)

    def run() -> object:
        return plan_context(request)

    def extra() -> dict[str, Any]:
        plan = plan_context(request)
        return {"selected": len(plan["selectedItemIds"]), "dropped": len(plan["dropped"])}

    return run, extra


class Timed:
    """A timed call with an untimed per-sample ``setup``."""

    def __init__(self, call: Callable[[], object], setup: Callable[[], None]) -> None:
        self.call = call
        self.setup = setup

    def __call__(self) -> object:
        return self.call()


# --- compaction (issue 4) -------------------------------------------------------------------

COMPACTION_SESSION = "bench-session"
COMPACTION_REQUEST: dict[str, Any] = {
    "sessionId": COMPACTION_SESSION,
    "modelWindowTokens": 2048,
    "reservedOutputTokens": 256,
    "safetyMarginTokens": 128,
    "recoveryReserveTokens": 128,
    "sink": "provider",
    "scopeAdmissions": [{"scope": "session", "scopeId": COMPACTION_SESSION}],
    "policyVersion": "bench-policy-1",
    "modelProfile": "bench-model",
}
_T0 = "2026-08-29T00:00:00.000Z"


def compaction_items(n: int) -> list[dict[str, Any]]:
    """``n`` session messages (as the plan workload) plus one protected, pinned task-state
    goal."""
    base = {
        "schemaVersion": 1,
        "scope": "session",
        "scopeId": COMPACTION_SESSION,
        "provenance": {"source": "bench", "observedAt": _T0},
        "trust": "user",
        "sensitivity": "internal",
        "allowedSinks": ["provider"],
        "createdAt": _T0,
    }
    goal = {
        **base,
        "itemId": "goal-000000",
        "kind": "task-state",
        "sourceRef": {"store": "session", "id": "evt-goal", "eventSequence": 0},
        "tokenEstimate": 64,
        "priority": 100,
        "pinned": True,
        "binding": {"taskState": "running"},
        "content": "goal: keep the benchmark session's task state across compaction",
    }
    messages = [
        {
            **base,
            "itemId": f"msg-{i:06d}",
            "kind": "message",
            "sourceRef": {"store": "session", "id": f"evt-{i}", "eventSequence": i + 1},
            "tokenEstimate": 8 + i % 32,
            "priority": i % 101,
            "pinned": False,
            "content": f"message {i}",
        }
        for i in range(n)
    ]
    return [goal, *messages]


def _session_port(items: list[dict[str, Any]]) -> Any:
    """The peer's in-memory session port (normalizing on seed), seeded with ``items``."""
    from kernel.adapters.in_memory.session import InMemorySessionPort
    from kernel.canonical.items import normalize_context_item

    port = InMemorySessionPort(
        profile="peer", normalize=lambda i: normalize_context_item(i, profile="peer")
    )
    port.seed(COMPACTION_SESSION, head="head:bench", memory_revision=1, items=items)
    return port


def _kernel(port: Any, prefix: str) -> Any:
    from kernel.compaction.service import CompactionKernel

    counter = iter(range(1, 1 << 30))
    return CompactionKernel(
        port,
        clock=lambda: 1_787_961_600_000,
        new_id=lambda: f"{prefix}-{next(counter)}",
    )


def _compaction(n: int) -> tuple[Run, Extra]:
    items = compaction_items(n)
    state: dict[str, Any] = {}

    def setup() -> None:
        state["port"] = _session_port(items)

    def call() -> object:
        receipt = _kernel(state["port"], "c").compact_context(dict(COMPACTION_REQUEST))
        assert receipt["status"] == "committed", receipt["status"]
        return receipt

    def extra() -> dict[str, Any]:
        setup()
        receipt = call()
        assert isinstance(receipt, dict)
        return {"selected": len(receipt["selectedItemIds"]), "items": n + 1}

    return Timed(call, setup), extra


def _cas_race(n: int) -> tuple[Run, Extra]:
    """Contenders A and B read the same head; B commits first (run from inside A's read,
    as the peer's ``advanceHeadAfterRead`` double), A's CAS is lost (``stale``) and A
    recomputes on the new head.  Timed: the whole race; ``recompute_ms``: A's retry."""
    from kernel.ports import SessionSnapshot

    items = compaction_items(n)
    state: dict[str, Any] = {}
    recompute: list[float] = []

    def setup() -> None:
        port = _session_port(items)
        read = port.read_snapshot
        reads = [0]

        def racing_read(session_id: str) -> SessionSnapshot | None:
            snapshot = read(session_id)
            reads[0] += 1
            if reads[0] == 1:  # A holds its snapshot; B wins the race meanwhile
                won = _kernel(port, "b").compact_context(
                    {**COMPACTION_REQUEST, "operationId": "op-b"}
                )
                assert won["status"] == "committed", won["status"]
            return snapshot

        port.read_snapshot = racing_read  # type: ignore[method-assign]
        state["port"] = port

    def call() -> object:
        kernel = _kernel(state["port"], "a")
        request = {**COMPACTION_REQUEST, "operationId": "op-a"}
        lost = kernel.compact_context(request)
        assert lost["status"] == "stale", lost["status"]
        t = time.perf_counter()
        retried = kernel.compact_context(request)
        recompute.append((time.perf_counter() - t) * 1000)
        assert retried["status"] == "committed", retried["status"]
        return retried

    def extra() -> dict[str, Any]:
        samples = recompute[1:] or recompute  # drop the warm-up
        return {"recompute_ms": round(statistics.median(samples), 3), "items": n + 1}

    return Timed(call, setup), extra


# --- content put (issue 4) ------------------------------------------------------------------

MIB = 1024 * 1024


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak_rss() -> bool:
    """Linux: writing 5 to clear_refs resets VmHWM (the peak RSS) to the current RSS."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


#: Small objects stored (untimed) in the long-lived store of the headline figure, so it
#: looks like a store in use: (almost) every top-level shard directory exists.
CONTENT_SEED_OBJECTS = 1024


def _content_put(n: int) -> tuple[Run, Extra]:
    """Store an ``n`` MiB tool result through the filesystem ContentPort.

    Headline (``p50_ms``): a long-lived store, as a session uses — seeded with
    ``CONTENT_SEED_OBJECTS`` small objects, each sample storing distinct bytes (first
    8 bytes = a counter, set untimed).  Untimed before each sample the previous
    sample's object is purged and ``os.sync()`` runs: kept 10–100 MiB objects would
    stay dirty and the kernel's writeback throttling would land on the next put, and
    the purge's deferred filesystem work likewise.  ``cold_p50_ms``: the former setup,
    a fresh temp store per sample (the previous one removed just before, untimed), so
    every put also makes its four shard directories — and, on this VM, intermittently
    pays for the journal work of that removal.  Timed with ``durable=False`` (no fsync:
    what the peer and bare hashlib pay); ``durable_p50_ms`` / ``cold_durable_p50_ms``
    are the default, fsynced store."""
    from kernel.adapters.fs.content import FsContentPort
    from kernel.ports import ContentPolicy, ContentRef

    data = bytearray(os.urandom(n * MIB))
    policy = ContentPolicy(scope="session", scope_id=COMPACTION_SESSION, mime_type="text/plain",
                           summary="bench tool result")
    parent = Path(tempfile.mkdtemp(prefix="cmk-bench-content-"))
    state: dict[str, Any] = {"count": 0, "last": None}

    def distinct() -> None:  # every sample stores new bytes (a real put, never a dedup hit)
        state["count"] += 1
        data[:8] = state["count"].to_bytes(8, "little")

    def open_warm(durable: bool) -> None:
        shutil.rmtree(parent / "warm", ignore_errors=True)
        port = FsContentPort(parent / "warm", durable=durable)
        for i in range(CONTENT_SEED_OBJECTS):
            port.put(b"seed object %d" % i, policy)
        state["port"], state["last"] = port, None

    def setup() -> None:  # long-lived store: the previous sample purged, the disk settled
        last: ContentRef | None = state["last"]
        if last is not None:
            state["port"].purge(last, "bench")
            state["last"] = None
        getattr(os, "sync", lambda: None)()  # POSIX only; Windows has no os.sync
        distinct()

    def cold_setup(durable: bool) -> Callable[[], None]:
        def prepare() -> None:  # a fresh store per sample
            shutil.rmtree(parent / "cold", ignore_errors=True)
            state["port"], state["last"] = FsContentPort(parent / "cold", durable=durable), None
            distinct()

        return prepare

    def call() -> object:
        state["last"] = ref = state["port"].put(data, policy)
        return ref

    def median_ms(fn: Callable[[], object], prepare: Callable[[], None] | None = None) -> float:
        times = []
        for _ in range(7):
            if prepare is not None:
                prepare()
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1000)
        return round(statistics.median(times), 3)

    open_warm(durable=False)

    def extra() -> dict[str, Any]:
        out: dict[str, Any] = {"bytes": len(data), "seed_objects": CONTENT_SEED_OBJECTS}
        out["hashlib_ms"] = median_ms(lambda: hashlib.sha256(data).hexdigest())
        out["cold_p50_ms"] = median_ms(call, cold_setup(durable=False))
        out["cold_durable_p50_ms"] = median_ms(call, cold_setup(durable=True))
        shutil.rmtree(parent / "cold", ignore_errors=True)
        open_warm(durable=True)
        out["durable_p50_ms"] = median_ms(call, setup)
        open_warm(durable=False)
        setup()
        if _reset_peak_rss() and (before := _status_kib("VmRSS")) is not None:
            call()
            peak = _status_kib("VmHWM")
            out["peak_rss_growth_bytes"] = None if peak is None else (peak - before) * 1024
        else:  # no resettable peak: growth of the process maximum (an upper bound)
            before_max = _ru_maxrss()
            call()
            out["peak_rss_growth_bytes"] = _ru_maxrss() - before_max
        out["chunk_bytes"] = state["port"].chunk_size
        setup()
        ref = call()
        out["compact_after_put_ms"] = _compact_with_ref(ref)
        shutil.rmtree(parent, ignore_errors=True)
        return out

    return Timed(call, setup), extra


def _ru_maxrss() -> int:
    import resource
    import sys

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def _compact_with_ref(ref: Any) -> float:
    """'Stored then compacted': a 100-message session whose tool evidence is the stored
    ContentRef, compacted once (median of 5, ms)."""
    evidence = {
        **compaction_items(0)[0],
        "itemId": "tool-result-000000",
        "kind": "tool-evidence",
        "pinned": False,
        "binding": {"toolCallId": "call-1", "toolOutcome": "succeeded"},
        "sourceRef": {"store": "session", "id": "evt-tool", "eventSequence": 1_000_000},
        "tokenEstimate": 48,
        "priority": 50,
        "contentRef": ref.to_wire(),
    }
    del evidence["content"]
    items = [*compaction_items(100), evidence]
    times = []
    for _ in range(5):
        port = _session_port(items)
        t = time.perf_counter()
        receipt = _kernel(port, "r").compact_context(dict(COMPACTION_REQUEST))
        times.append((time.perf_counter() - t) * 1000)
        assert receipt["status"] == "committed", receipt["status"]
    return round(statistics.median(times), 3)


def _recall_lexical(n: int) -> tuple[Run, Extra]:
    """Issue 5 lexical recall (see ``benchmarks/recall_bench.py``)."""
    from benchmarks.recall_bench import recall_lexical

    return recall_lexical(n)


def _deletion(n: int) -> tuple[Run, Extra]:
    """Issue 5 deletion convergence (see ``benchmarks/deletion_bench.py``)."""
    from benchmarks.deletion_bench import deletion

    return deletion(n)


def _store(name: str) -> Callable[[int], tuple[Run, Extra]]:
    """A workload on a real adapter (see ``benchmarks/store_bench.py``)."""

    def build_store(n: int) -> tuple[Run, Extra]:
        from benchmarks import store_bench

        builder: Callable[[int], tuple[Run, Extra]] = getattr(store_bench, name)
        return builder(n)

    return build_store


def _shadow_compare(n: int) -> tuple[Run, Extra]:
    from benchmarks.shadow_bench import build_compare

    return build_compare(n)


def _shadow_run(n: int) -> tuple[Run, Extra]:
    from benchmarks.shadow_bench import build_run

    return build_run(n)


BUILDERS: dict[str, Callable[[int], tuple[Run, Extra]]] = {
    "shadow_compare": _shadow_compare,
    "shadow_run": _shadow_run,
    "plan": _plan,
    "compaction": _compaction,
    "content_put": _content_put,
    "cas_race": _cas_race,
    "recall_lexical": _recall_lexical,
    "deletion": _deletion,
    "deletion_sqlite": _store("deletion_sqlite"),
    "compaction_sqlite": _store("compaction_sqlite"),
    "compaction_jsonl": _store("compaction_jsonl"),
    "recall_lexical_sqlite": _store("recall_lexical_sqlite"),
}


def build(name: str, n: int) -> tuple[Run, Extra]:
    return BUILDERS[name](n)
