"""One workload in a fresh interpreter; prints one JSON result line."""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import time
from typing import Any

from benchmarks.workloads import build


def peak_rss_bytes() -> int | None:
    try:
        import resource
    except ImportError:  # Windows
        return None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def calibrate() -> dict[str, float]:
    """A fixed workload: json.dumps + sha256 of 10,000 small dicts (median of 5)."""
    data = [{"itemId": f"i{i}", "n": i, "s": "x" * (i % 64)} for i in range(10_000)]
    times = []
    for _ in range(5):
        t = time.perf_counter()
        for d in data:
            hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()
        times.append((time.perf_counter() - t) * 1000)
    return {"json_sha256_10k_ms": round(statistics.median(times), 3)}


def main() -> int:
    name, n, samples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    run, extra = build(name, n)
    setup = getattr(run, "setup", None)  # optional untimed per-sample preparation
    if setup is not None:
        setup()
    run()  # warm-up (imports, caches)
    times: list[float] = []
    for _ in range(samples):
        if setup is not None:
            setup()
        t = time.perf_counter()
        run()
        times.append((time.perf_counter() - t) * 1000)
    result: dict[str, Any] = {
        "workload": name,
        "n": n,
        "samples": samples,
        "p50_ms": round(statistics.median(times), 3),
        "p95_ms": round(percentile(times, 0.95), 3),
        "peak_rss_bytes": peak_rss_bytes(),
    }
    result.update(extra())
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
