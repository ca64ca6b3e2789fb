"""Scale-out benchmark: ``shadow run`` on synthetic corpora, per executor (docs/scale.md).

For each size N (default 1000 and 10000; ``--sizes 1000 10000 100000`` for the release
figures) a synthetic corpus is written once with ``shadow synth --seed 1`` (kept under
``reports/bench/corpora/`` and reused when its ``SYNTHETIC.json`` matches), then the real
command a user runs is timed on it, one executor after the other, in this one run:

    shadow run --fixtures CORPUS --no-recordings --skip-determinism --out TMP
               --executor serial | process --jobs 2 | dask --jobs 2

Each figure is one whole run (a 100k run takes tens of minutes: medians of repeats are
not affordable there; ``--repeat K`` gives the median of K for small sizes).  Reported:
wall seconds, sessions/s, and peak RSS sampled every 0.1 s with psutil over the process
tree — the driver's own peak, the largest worker's, and the tree's sum.  Ratios are
against baselines measured in the same run: process/serial and dask/process at each
size, and each executor's driver and tree peaks at the largest size over the smallest.

The determinism rerun is skipped so the figures are the map and reduce alone: it adds the
replay of at most ~500 sampled fixtures (a constant, docs/scale.md).

    python -m benchmarks.scale_bench [--sizes N ...] [--stage run|map] [--out FILE]

``--stage map`` times the map stage alone (:mod:`benchmarks.scale_map`: the corpus
stream, the executor, the batches and the shard writer — no reduce, no reports), the part
whose memory must not grow with the corpus.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXECUTORS = (("serial", 1), ("process", 2), ("dask", 2))
SEED = 1


def corpus(n: int, base: Path) -> Path:
    """The synthetic corpus of ``n`` sessions (seed 1), written once and reused."""
    out = base / f"synth-{n}-{SEED}"
    meta = out / "SYNTHETIC.json"
    if meta.is_file():
        doc = json.loads(meta.read_text(encoding="utf-8"))
        if doc.get("sessions") == n and doc.get("seed") == SEED:
            return out
    base.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "shadow", "synth", "--sessions", str(n),
                    "--seed", str(SEED), "--out", str(out)], check=True, cwd=ROOT)
    return out


def _sample(proc: Any) -> tuple[int, int, int]:
    """(driver RSS, largest descendant RSS, tree total) right now, in bytes."""
    import psutil

    try:
        own = proc.memory_info().rss
        kids = []
        for c in proc.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                kids.append(c.memory_info().rss)
    except psutil.Error:
        return 0, 0, 0
    return own, max(kids, default=0), own + sum(kids)


def measure(fixtures: Path, executor: str, jobs: int, stage: str = "run") -> dict[str, Any]:
    """One whole ``shadow run`` (or its map stage alone, :mod:`benchmarks.scale_map`):
    wall time and peak RSS of the process tree."""
    import psutil

    out = Path(tempfile.mkdtemp(prefix="shadow-scale-"))
    cmd = [sys.executable, "-m", "shadow", "run", "--fixtures", str(fixtures),
           "--no-recordings", "--skip-determinism", "--out", str(out / "run"),
           "--executor", executor, "--jobs", str(jobs)] if stage == "run" else \
        [sys.executable, "-m", "benchmarks.scale_map", str(fixtures), executor, str(jobs)]
    t0 = time.perf_counter()
    with (out / "stdout").open("wb") as so, (out / "stderr").open("wb") as se:
        child = subprocess.Popen(cmd, cwd=ROOT, stdout=so, stderr=se)  # files: never a full pipe
        proc = psutil.Process(child.pid)
        peak = [0, 0, 0]
        while child.poll() is None:
            peak = [max(a, b) for a, b in zip(peak, _sample(proc), strict=True)]
            time.sleep(0.1)
    wall = time.perf_counter() - t0
    stdout, stderr = (out / "stdout").read_bytes(), (out / "stderr").read_bytes()
    shutil.rmtree(out, ignore_errors=True)
    if child.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} exited {child.returncode}: "
                           f"{stderr.decode('utf-8', 'replace')[-2000:]}")
    lines = stdout.decode("utf-8", "replace").splitlines()
    verdict = next((ln for ln in lines if ln.startswith("verdict:")), "")
    # the banner's counts (report.json of 100,000 sessions is ~2 GB: never loaded here)
    head = next((re.match(r"fixtures: (\d+) .*comparisons: (\d+)", ln) for ln in lines
                 if ln.startswith("fixtures: ")), None)
    totals = {"fixtures": int(head.group(1)), "comparisons": int(head.group(2))} if head \
        else {}
    if stage == "map":
        totals = {"fixtures": json.loads(lines[-1])["mapped"]}
    return {"stage": stage, "executor": executor, "jobs": jobs, "wall_s": round(wall, 2),
            "driver_peak_rss_bytes": peak[0], "worker_peak_rss_bytes": peak[1],
            "tree_peak_rss_bytes": peak[2], "fixtures": totals.get("fixtures"),
            "comparisons": totals.get("comparisons"), "verdict": verdict}


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scale_bench")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000], metavar="N")
    ap.add_argument("--stage", choices=("run", "map"), default="run",
                    help="run: the whole shadow run (default); map: the map stage alone "
                         "(stream, executor, shards; no reduce, no reports)")
    ap.add_argument("--executors", nargs="+", default=[e for e, _ in EXECUTORS],
                    choices=[e for e, _ in EXECUTORS], metavar="E",
                    help="which executors (default all three; ratios need their baseline)")
    ap.add_argument("--repeat", type=int, default=1, metavar="K",
                    help="runs per figure (median of K); default 1")
    ap.add_argument("--corpora", default=str(ROOT / "reports" / "bench" / "corpora"))
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "scale.json"))
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for n in sorted(args.sizes):
        fixtures = corpus(n, Path(args.corpora))
        for executor, jobs in EXECUTORS:
            if executor not in args.executors:
                continue
            runs = [measure(fixtures, executor, jobs, args.stage)
                    for _ in range(max(1, args.repeat))]
            best = dict(runs[0])
            best["wall_s"] = round(statistics.median(r["wall_s"] for r in runs), 2)
            for k in ("driver_peak_rss_bytes", "worker_peak_rss_bytes", "tree_peak_rss_bytes"):
                best[k] = int(statistics.median(r[k] for r in runs))
            best.update(n=n, runs=len(runs), sessions_per_s=round(n / best["wall_s"], 1),
                        ms_per_session=round(1000 * best["wall_s"] / n, 2))
            rows.append(best)
            print(json.dumps(best), flush=True)
    by = {(r["n"], r["executor"]): r for r in rows}
    sizes = sorted(args.sizes)
    ratios: dict[str, Any] = {}
    def rate(n: int, e: str) -> float | None:
        return by[(n, e)]["sessions_per_s"] if (n, e) in by else None

    for n in sizes:
        ratios[str(n)] = {"process_over_serial": _ratio(rate(n, "process"), rate(n, "serial")),
                          "dask_over_process": _ratio(rate(n, "dask"), rate(n, "process"))}
    if len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        ratios["rss_largest_over_smallest"] = {
            e: {k: _ratio(by[(hi, e)][f"{k}_peak_rss_bytes"], by[(lo, e)][f"{k}_peak_rss_bytes"])
                for k in ("driver", "tree", "worker")}
            for e, _ in EXECUTORS if (hi, e) in by and (lo, e) in by}
    doc = {"schema": "shadow-scale-bench/v1",
           "machine": {"python": platform.python_version(), "platform": platform.platform(),
                       "cpus": __import__("os").cpu_count()},
           "stage": args.stage, "seed": SEED, "results": rows, "ratios": ratios}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(ratios, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
