"""The peer's own release benchmark, run beside ours (``python -m benchmarks --peer DIR``).

``DIR`` is a checkout of the peer package (``@chainlesschain/context-memory-kernel``, the
folder holding its ``package.json`` and ``scripts/context-memory-benchmark.mjs``); nothing
of it is bundled here.  The runner calls :func:`run_peer` once before and once after our
workloads; :func:`figures` maps the peer's receipt onto our ``(workload, n)`` pairs
(:data:`PAIRINGS`) and :func:`ratios` divides our medians by the median of the peer's two
runs.  Which pairs are like-for-like, and why the others are not, is in
``docs/benchmarks.md`` ("Side by side with the peer") and in each pairing's ``note``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The peer's benchmark, relative to its package folder.
PEER_SCRIPT = Path("scripts") / "context-memory-benchmark.mjs"
#: The receipt schema the peer script writes.
PEER_SCHEMA = "chainlesschain.context-memory-capacity-benchmark/v1"
#: The peer profile with our sizes (its default, ``quick``, has only the small ones).
PEER_PROFILE = "release"
#: A release run takes ≈ 16 s on the 2-vCPU benchmark machine; generous for a busy one.
DEFAULT_TIMEOUT_S = 900.0


class PeerError(Exception):
    """The peer benchmark cannot be run or its output cannot be read (exit 2)."""


@dataclass(frozen=True)
class Pairing:
    """Where the peer's receipt holds the figure for one of our workloads."""

    workload: str
    section: str  #: key under the receipt's ``measurements``
    size_key: str  #: the field of a section entry that holds n
    fields: tuple[str, ...]  #: summed into the peer's milliseconds
    like_for_like: bool
    note: str


PAIRINGS: tuple[Pairing, ...] = (
    Pairing(
        "plan", "contextPlan", "itemCount", ("p50Ms",), True,
        "planContext over n session messages, window 4096 (same request shape); peer: p50 of "
        "7 samples without warm-up, ours: median of 7 after one warm-up",
    ),
    Pairing(
        "compaction", "messageCompaction", "messageCount", ("durationMs",), True,
        "compactContext over the in-memory session port seeded untimed, window 2048; peer: "
        "ONE timed call per run (JIT partly warm from its plan workload), its messages are 32 "
        "tokens with priority i mod 40 (ours 8 + i mod 32, i mod 101), so of 1,001 items it keeps "
        "14 where ours keeps 23",
    ),
    Pairing(
        "cas_race", "compactionCas", "messageCount", ("raceMs", "recomputeMs"), True,
        "two contenders compact one 1,001-item session, one loses its CAS and the loser "
        "recomputes; peer: raceMs (both contenders, Promise.all) + recomputeMs (a fresh "
        "operation on the compacted session), ONE sample each; ours times the same three "
        "compactions in one call",
    ),
    Pairing(
        "content_put", "toolResultCompaction", "sizeMiB", ("contentStoreMs",), False,
        "NOT like-for-like: the peer's InMemoryContentPort.put (Buffer copy + SHA-256 in "
        "memory, constant 0x78 bytes, one sample) against our FsContentPort writing a file "
        "(durable=False); the goal is ours against hashlib, not against the peer",
    ),
    Pairing(
        "recall_lexical", "memoryRecall", "recordCount", ("lexicalRecallMs",), False,
        "NOT like-for-like by design: same records and query, but the peer's rankMemoryRecords "
        "normalizes and scans every record of an in-memory array (no port, one sample) where "
        "ours answers through the MemoryPort from an index built untimed (build_ms)",
    ),
    Pairing(
        "deletion", "deletionConvergence", "recordCount", ("convergenceMs",), True,
        "deletion convergence on in-memory ports on both sides (authority + 3 projections, "
        "every receipt purged); peer: deleteMemory 100 at a time under Promise.all, ONE "
        "sample; ours: one delete_memories call, cold memo, median of 7",
    ),
)
PAIRING_BY_WORKLOAD: Mapping[str, Pairing] = {p.workload: p for p in PAIRINGS}


def key(workload: str, n: int) -> str:
    """The key of a pair in ``peer_run``'s maps: ``"plan:10000"``."""
    return f"{workload}:{n}"


def check(peer_dir: str | os.PathLike[str], node: str = "node") -> tuple[Path, str]:
    """The peer script and the node executable, or :class:`PeerError` naming the missing one."""
    script = Path(peer_dir) / PEER_SCRIPT
    node_path = shutil.which(node)
    if node_path is None:
        raise PeerError(
            f"node not found: {node!r} (the peer benchmark is a Node.js script; install "
            "Node.js or pass --node PATH)"
        )
    if not script.is_file():
        raise PeerError(
            f"peer benchmark script not found: {script} (--peer takes the folder of the "
            "peer package, the one holding package.json and scripts/)"
        )
    return script.resolve(), node_path


def peer_package(peer_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``name`` and ``version`` from the peer's ``package.json`` (``None`` if unreadable)."""
    try:
        data = json.loads((Path(peer_dir) / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"name": None, "version": None}
    if not isinstance(data, dict):
        return {"name": None, "version": None}
    return {"name": data.get("name"), "version": data.get("version")}


def figures(receipt: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every (workload, n) of :data:`PAIRINGS` the receipt measured: ``{key: {"ms", "parts"}}``."""
    measurements = receipt.get("measurements")
    if not isinstance(measurements, Mapping):
        raise PeerError("peer receipt has no measurements object")
    out: dict[str, dict[str, Any]] = {}
    for pairing in PAIRINGS:
        section = measurements.get(pairing.section)
        entries = [section] if isinstance(section, Mapping) else section
        if not isinstance(entries, list):
            continue
        for entry in entries:
            if not isinstance(entry, Mapping):
                continue
            n = entry.get(pairing.size_key)
            raw = [entry.get(f) for f in pairing.fields]
            values = [
                float(v) for v in raw if isinstance(v, int | float) and not isinstance(v, bool)
            ]
            if not isinstance(n, int) or isinstance(n, bool) or len(values) != len(raw):
                continue
            parts = dict(zip(pairing.fields, values, strict=True))
            out[key(pairing.workload, n)] = {
                "ms": round(float(sum(values)), 3),
                "parts": parts,
            }
    return out


def run_peer(
    script: Path,
    node: str,
    peer_dir: str | os.PathLike[str],
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> dict[str, Any]:
    """One run of the peer's release benchmark; its figures and provenance.

    The script refuses to run outside a clean git checkout (it records the checkout's
    HEAD in its receipt), so it runs with ``peer_dir`` as its working directory; the
    environment's ``GITHUB_SHA`` (which the script would take as the candidate commit)
    is not passed on."""
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_SHA"}
    with tempfile.TemporaryDirectory(prefix="cmk-peer-bench-") as tmp:
        out = Path(tmp) / "receipt.json"
        cmd = [node, str(script), "--profile", PEER_PROFILE, "--output", str(out)]
        started = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd, cwd=peer_dir, env=env, capture_output=True, text=True,
                encoding="utf-8", errors="replace", timeout=timeout_s, check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise PeerError(f"peer benchmark timed out after {timeout_s:g} s: {script}") from exc
        except OSError as exc:
            raise PeerError(f"could not start {node}: {exc}") from exc
        wall_s = round(time.perf_counter() - started, 2)
        if proc.returncode != 0:
            last = [line for line in proc.stderr.strip().splitlines() if line.strip()][-3:]
            detail = " | ".join(last) or "no stderr"
            raise PeerError(f"peer benchmark failed (exit {proc.returncode}): {detail}")
        try:
            receipt = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PeerError(f"peer benchmark wrote no readable JSON receipt: {exc}") from exc
    if not isinstance(receipt, Mapping) or receipt.get("schema") != PEER_SCHEMA:
        got = receipt.get("schema") if isinstance(receipt, Mapping) else type(receipt).__name__
        raise PeerError(f"peer receipt schema is {got!r}, expected {PEER_SCHEMA!r}")
    if receipt.get("status") != "passed":
        raise PeerError(f"peer receipt status is {receipt.get('status')!r}, not 'passed'")
    return {
        "wall_s": wall_s,
        "started_at": receipt.get("startedAt"),
        "node_version": receipt.get("nodeVersion"),
        "profile": receipt.get("profile"),
        "candidate_sha": receipt.get("candidateSha"),
        "receipt_digest": receipt.get("digest"),
        "figures": figures(receipt),
    }


def ratios(
    results: Iterable[Mapping[str, Any]], runs: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """ours / peer for every result with a pairing and a peer figure in some run.

    ``runs`` are the peer runs of this invocation that succeeded, by label (``before``,
    ``after``); the peer's value is the median of their figures (the mean of two)."""
    out: dict[str, dict[str, Any]] = {}
    for res in results:
        pairing = PAIRING_BY_WORKLOAD.get(str(res.get("workload")))
        ours = res.get("p50_ms")
        n = res.get("n")
        if pairing is None or not isinstance(ours, int | float) or not isinstance(n, int):
            continue
        k = key(pairing.workload, n)
        found = {
            label: run["figures"][k] for label, run in runs.items() if k in run.get("figures", {})
        }
        if not found:
            continue
        peer_ms = statistics.median(f["ms"] for f in found.values())
        entry: dict[str, Any] = {
            "ours_p50_ms": ours,
            "peer_ms_by_run": {label: f["ms"] for label, f in found.items()},
            "peer_ms": round(peer_ms, 3),
            "ratio": round(ours / peer_ms, 4) if peer_ms > 0 else None,
            "like_for_like": pairing.like_for_like,
            "peer_fields": "+".join(pairing.fields),
            "note": pairing.note,
        }
        if pairing.workload == "cas_race":  # the peer's own race figure, without its recompute
            race = statistics.median(f["parts"]["raceMs"] for f in found.values())
            entry["peer_race_only_ms"] = round(race, 3)
            entry["ratio_race_only"] = round(ours / race, 4) if race > 0 else None
        out[k] = entry
    return out
