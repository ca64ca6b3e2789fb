"""Phase gates: policy (:mod:`.policy`) + evidence from several runs (:mod:`.merge`) ->
a GO / NO-GO verdict per cutover phase (:mod:`.evaluate`), with Wilson bounds on
divergence rates (:mod:`.stats`).

:func:`gate` is the ``shadow gate`` service: load the policy, load and merge the
evidence files, judge one phase, and optionally write ``gate.json`` and ``gate.md``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path

from shadow.boundary import load_path
from shadow.errors import UsageError
from shadow.gates import merge as merge_mod
from shadow.gates import policy as policy_mod
from shadow.gates.evaluate import GateResult, Reason, evaluate
from shadow.gates.policy import PLATFORMS, Policy
from shadow.gates.stats import wilson_upper

__all__ = ["PLATFORMS", "GateResult", "Policy", "Reason", "evaluate", "gate", "render_text",
           "wilson_upper", "write"]


def parse_platforms(values: Sequence[str]) -> tuple[str, ...]:
    """``--platforms linux,windows`` (repeatable) -> validated tuple."""
    out: list[str] = []
    for v in values:
        for p in v.split(","):
            p = p.strip()
            if not p:
                continue
            if p not in PLATFORMS:
                raise UsageError(f"--platforms: {p!r} is not one of {', '.join(PLATFORMS)}")
            if p not in out:
                out.append(p)
    if values and not out:
        raise UsageError("--platforms: no platform given (one or more of "
                         f"{', '.join(PLATFORMS)})")
    return tuple(out)


def gate(evidence: Sequence[str], phase: int, *, policy: str | None = None,
         platforms: Sequence[str] = (), release_matrix: str | None = None,
         today: str | None = None) -> GateResult:
    if phase not in range(6):
        raise UsageError(f"--phase must be 0..5, got {phase}")
    pol = policy_mod.load(policy)
    plats = parse_platforms(platforms)
    if release_matrix and not plats:
        plats = policy_mod.platforms_from_release_matrix(load_path(Path(release_matrix)),
                                                         release_matrix)
    try:
        day = dt.date.fromisoformat(today) if today else None
    except ValueError:
        raise UsageError(f"--today must be YYYY-MM-DD, got {today!r}") from None
    files = merge_mod.load(evidence)
    return evaluate(pol, files, phase, platforms=plats or None, today=day)


def render_text(result: GateResult) -> str:
    lines = [f"phase {result.phase} ({result.title}): {result.verdict}",
             f"policy {result.policy_version}; platforms required "
             f"{', '.join(result.platforms_required)}; present "
             f"{', '.join(result.platforms_present) or 'none'}"]
    if result.identity is not None:
        lines.append(f"candidate: commit {str(result.identity.get('commit'))[:12]}, "
                     f"corpus {str(result.identity.get('corpus_digest'))[:19]}")
    for r in result.reasons:
        where = "every phase" if r.phase is None else f"phase {r.phase}"
        lines.append(f"NO-GO {r.code} ({where}): {r.message}")
    for w in result.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def write(out: str | Path, result: GateResult) -> list[Path]:
    from shadow.outdir import ensure_dir
    from shadow.reports import render_gate_md

    d = ensure_dir(out, "--out")
    j = d / "gate.json"
    j.write_text(json.dumps(result.to_wire(), sort_keys=True, indent=1, ensure_ascii=False)
                 + "\n", encoding="utf-8", newline="\n")
    m = d / "gate.md"
    m.write_text(render_gate_md(result.to_wire()), encoding="utf-8", newline="\n")
    return [j, m]
