"""Benchmark runner: each workload runs in a fresh interpreter so peak RSS is its own.

Writes ``reports/bench/latest.json``::

    {"schema": "cmk-bench/v1", "machine": {...}, "calibration": {...},
     "results": [{"workload", "n", "p50_ms", "p95_ms", "peak_rss_bytes", "samples", ...}]}

The peer implementation is not installable here (its npm package is not
published), so its published figures (measured on this machine kind) are the
reference; ``calibration`` records a fixed pure-Python + hashlib workload
measured in the same run so results from noisy or different machines can be
put side by side.  Medians only; the machine is noisy.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.workloads import PEER_FIGURES, WORKLOADS

ROOT = Path(__file__).resolve().parent.parent


def _run_worker(name: str, n: int, samples: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.worker", name, str(n), str(samples)]
    proc = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", cwd=ROOT)
    if proc.returncode != 0:
        return {"workload": name, "n": n, "error": proc.stderr.strip().splitlines()[-1:]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks")
    ap.add_argument("--only", action="append", default=[], help="workload name (repeatable)")
    ap.add_argument("--samples", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "latest.json"))
    args = ap.parse_args(argv)

    from benchmarks.worker import calibrate

    results: list[dict[str, Any]] = []
    plan = [(w, n) for w, ns in WORKLOADS.items() for n in ns if not args.only or w in args.only]
    started = time.perf_counter()
    for i, (name, n) in enumerate(plan, start=1):
        print(f"[{i}/{len(plan)}] {name} n={n} …", flush=True)
        res = _run_worker(name, n, args.samples)
        peer = PEER_FIGURES.get((name, n))
        if peer is not None and "p50_ms" in res:
            res["peer_p50_ms"] = peer
            res["ratio_to_peer"] = round(res["p50_ms"] / peer, 4)
        results.append(res)
        print("    " + json.dumps({k: v for k, v in res.items() if k != "workload"}), flush=True)
    doc = {
        "schema": "cmk-bench/v1",
        "machine": {
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "system": platform.system(),
            "machine": platform.machine(),
        },
        "calibration": calibrate(),
        "peer_reference": "published figures of @chainlesschain/context-memory-kernel 0.1.1 "
        "(issue texts); the package is not installable here, so not re-measured",
        "results": results,
        "wall_s": round(time.perf_counter() - started, 2),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0 if all("error" not in r for r in results) else 1
