"""Benchmark runner: each workload runs in a fresh interpreter so peak RSS is its own.

Writes ``reports/bench/latest.json``::

    {"schema": "cmk-bench/v1", "machine": {...}, "calibration": {...},
     "results": [{"workload", "n", "p50_ms", "p95_ms", "peak_rss_bytes", "samples", ...}]}

The peer implementation's npm package is not published, so its published figures
(measured on this machine kind) are the default reference (``ratio_to_peer``);
``calibration`` records a fixed pure-Python + hashlib workload measured in the same run
so results from noisy or different machines can be put side by side.  Medians only; the
machine is noisy.

``--peer DIR`` (a checkout of the peer package; nothing of it is bundled) also runs the
peer's own release benchmark once before and once after our workloads
(:mod:`benchmarks.peer_run`) and adds ``ratio_to_peer_run`` to each comparable result and
a ``peer_run`` section to the output.
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

from benchmarks import peer_run
from benchmarks.workloads import MAX_SAMPLES, PEER_FIGURES, WORKLOADS

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
    ap.add_argument(
        "--only", action="append", default=[],
        help=f"workload name (repeatable; every size of it runs): {', '.join(WORKLOADS)}",
    )
    ap.add_argument("--samples", type=int, default=7, help="timed calls per workload (7)")
    ap.add_argument(
        "--out", default=str(ROOT / "reports" / "bench" / "latest.json"),
        help="result file (default reports/bench/latest.json)",
    )
    ap.add_argument(
        "--peer", metavar="DIR",
        help="a checkout of the peer package (@chainlesschain/context-memory-kernel, the folder "
        "with package.json and scripts/context-memory-benchmark.mjs): run its release "
        "benchmark once before and once after ours and report ours/peer from this run",
    )
    ap.add_argument(
        "--node", default="node", help="the Node.js executable for --peer (default: node on PATH)"
    )
    ap.add_argument(
        "--peer-timeout", type=float, default=peer_run.DEFAULT_TIMEOUT_S, metavar="SECONDS",
        help=f"time limit of one peer run (default {peer_run.DEFAULT_TIMEOUT_S:g})",
    )
    args = ap.parse_args(argv)
    unknown = [w for w in args.only if w not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workload {', '.join(unknown)} (known: {', '.join(WORKLOADS)})")

    from benchmarks.worker import calibrate

    peer_runs: dict[str, dict[str, Any]] = {}
    peer_section: dict[str, Any] | None = None
    if args.peer is not None:
        try:
            script, node = peer_run.check(args.peer, args.node)
            print(f"[peer] before: {node} {script} --profile {peer_run.PEER_PROFILE} …",
                  flush=True)
            peer_runs["before"] = peer_run.run_peer(script, node, args.peer, args.peer_timeout)
        except peer_run.PeerError as exc:
            print(f"error: --peer {args.peer}: {exc}", file=sys.stderr)
            return 2
        print(f"    peer run {peer_runs['before']['wall_s']} s", flush=True)
        package = peer_run.peer_package(args.peer)
        peer_section = {
            "peer_name": package["name"],
            "peer_version": package["version"],
            "profile": peer_run.PEER_PROFILE,
            "before": peer_runs["before"],
        }

    results: list[dict[str, Any]] = []
    plan = [(w, n) for w, ns in WORKLOADS.items() for n in ns if not args.only or w in args.only]
    started = time.perf_counter()
    for i, (name, n) in enumerate(plan, start=1):
        print(f"[{i}/{len(plan)}] {name} n={n} …", flush=True)
        res = _run_worker(name, n, min(args.samples, MAX_SAMPLES.get(name, args.samples)))
        peer = PEER_FIGURES.get((name, n))
        if peer is not None and "p50_ms" in res:
            res["peer_p50_ms"] = peer
            res["ratio_to_peer"] = round(res["p50_ms"] / peer, 4)
        results.append(res)
        print("    " + json.dumps({k: v for k, v in res.items() if k != "workload"}), flush=True)
    wall_s = round(time.perf_counter() - started, 2)  # our workloads only

    peer_failed = False
    if peer_section is not None:
        print("[peer] after …", flush=True)
        try:
            peer_runs["after"] = peer_run.run_peer(script, node, args.peer, args.peer_timeout)
            peer_section["after"] = peer_runs["after"]
        except peer_run.PeerError as exc:
            print(f"error: --peer {args.peer} (after our workloads): {exc}", file=sys.stderr)
            peer_section["after"] = {"error": str(exc)}
            peer_failed = True
        ratios = peer_run.ratios(results, peer_runs)
        peer_section["ratios"] = ratios
        for res in results:
            entry = ratios.get(peer_run.key(str(res["workload"]), int(res["n"])))
            if entry is not None:
                res["peer_run_ms"] = entry["peer_ms"]
                res["ratio_to_peer_run"] = entry["ratio"]
        for k, entry in ratios.items():
            mark = "" if entry["like_for_like"] else "  (not like-for-like)"
            print(f"[peer] {k}: ours {entry['ours_p50_ms']} ms / peer {entry['peer_ms']} ms "
                  f"= {entry['ratio']}{mark}", flush=True)
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
        "(issue texts): ratio_to_peer; with --peer, ratio_to_peer_run and peer_run are "
        "measured in this run",
        "results": results,
        "wall_s": wall_s,
    }
    if peer_section is not None:
        doc["peer_run"] = peer_section
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0 if all("error" not in r for r in results) and not peer_failed else 1
