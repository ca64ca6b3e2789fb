"""Shadow harness workloads: ``shadow_compare`` (identity/digest fast path vs a whole-output
deepdiff on identical inputs) and ``shadow_run`` (whole-corpus replay throughput)."""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
Run = Callable[[], object]
Extra = Callable[[], dict[str, Any]]


def _pairs(n_fixtures: int) -> list[tuple[Any, Any, Any]]:
    """(candidate projection, its identical copy, the native legacy output) per comparison
    of the first ``n_fixtures`` fixtures."""
    from shadow.candidate import KernelCandidate
    from shadow.canonical import canonicalize
    from shadow.fixtures import load_corpus

    candidate = KernelCandidate()
    out = []
    for scenario in load_corpus(ROOT / "fixtures").scenarios[:n_fixtures]:
        canon = canonicalize(scenario.name, scenario.input)
        siblings = {c.name: c for c in scenario.captures}
        for cap in scenario.captures:
            a = candidate.project(canon, cap, siblings)
            out.append((a, copy.deepcopy(a), cap.output))
    return out


def build_compare(n: int) -> tuple[Run, Extra]:
    from deepdiff import DeepDiff

    from shadow.divergence.compare import compare

    pairs = _pairs(n)

    def run() -> object:
        return [compare(a, b, (), ()) for a, b, _ in pairs]

    def extra() -> dict[str, Any]:
        twins = [(native, copy.deepcopy(native)) for _, _, native in pairs]
        times = []
        for _ in range(3):
            t = time.perf_counter()
            for x, y in twins:
                DeepDiff(x, y)
            times.append((time.perf_counter() - t) * 1000)
        deep = statistics.median(times)
        fast = []
        for _ in range(5):
            t = time.perf_counter()
            run()
            fast.append((time.perf_counter() - t) * 1000)
        fast_ms = statistics.median(fast)
        return {"comparisons": len(pairs), "deepdiff_ms": round(deep, 3),
                "speedup_vs_deepdiff": round(deep / fast_ms, 1) if fast_ms else None,
                "divergences_on_identical": sum(len(r) for r in run())}  # type: ignore[arg-type]

    return run, extra


def build_run(n: int) -> tuple[Run, Extra]:
    from shadow.candidate import KernelCandidate
    from shadow.fixtures import load_corpus
    from shadow.replay import reduce_results, replay_all

    scenarios = load_corpus(ROOT / "fixtures").scenarios
    scenarios = scenarios[:n]
    candidate = KernelCandidate()

    def run() -> object:
        return reduce_results(replay_all(scenarios, candidate))

    def extra() -> dict[str, Any]:
        times, comparisons = [], 0
        for _ in range(3):
            t = time.perf_counter()
            _, _, comparisons, _ = run()  # type: ignore[misc]
            times.append(time.perf_counter() - t)
        return {"fixtures": len(scenarios), "comparisons": comparisons,
                "comparisons_per_s": round(comparisons / statistics.median(times), 1)}

    return run, extra
