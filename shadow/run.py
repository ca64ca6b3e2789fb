"""The ``shadow run`` service: load the corpus, replay, reduce, write ``OUT/report.json``.

``report.json`` (``shadow-report/v1``)::

    {"schema": "shadow-report/v1", "verdict": "GO" | "NO-GO", "phase": int,
     "candidate": {identity…, "corpus_digest", "fixtures_root"},
     "totals": {"fixtures", "comparisons", "divergences", "blocking"},
     "blocking_reasons": [code…],
     "cases": [{"fixture", "surface"}],   # every fixture × surface judged (JUnit testcases)
     "divergences": [{"fixture", "surface", "reason_code", "severity", "attribution",
                      "item_ids", "detail"}],
     "legacy_defects": [...same shape...],
     "waivers": {"applied": [...], "expired": [...], "unused": [...]},
     "intended": {"applied": [...], "unused": [...], "overdue": [...]},
     "attribution": {"by_attribution": {attribution: n}, "none_reasons": {reason: n}},
     "generated_at": ISO-8601 UTC}

Beside it the run writes ``evidence.json`` (:mod:`shadow.evidence`) and the rendered
``report.md``, ``report.html`` and ``junit.xml`` (:mod:`shadow.reports`).

Verdict: ``NO-GO`` when any unwaived divergence is ``blocking`` (a NO-GO-class
invariant broken by the candidate, a shadow side effect, a quarantined fixture, a
secret leaked by the candidate), else ``GO``.  Everything but ``generated_at`` is a
function of the inputs: keys are sorted, lists are sorted by value, and the fixture
folder's listing order does not matter.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from shadow import candidate as cand_mod
from shadow import codes as codes_mod
from shadow import evidence as evidence_mod
from shadow import intended as intended_mod
from shadow import reports
from shadow import waivers as waiver_mod
from shadow.divergence import Divergence, make
from shadow.errors import InputError, UsageError
from shadow.fixtures import load_corpus
from shadow.gates import policy as policy_mod
from shadow.replay import reduce_results, replay_all

REPORT_SCHEMA: Final = "shadow-report/v1"
PHASES: Final = range(0, 6)


@dataclass(frozen=True, slots=True)
class RunOptions:
    fixtures: str = "fixtures"
    out: str = "reports/latest"
    recordings: str | None = None
    phase: int = 1
    surfaces: tuple[str, ...] = ()
    candidate: str = "kernel"
    record_candidate: str | None = None
    waivers: str | None = None
    intended: str | None = None  # intended-difference rules (default: the bundled file)
    jobs: int = 1
    now: dt.datetime | None = None  # injectable clock (tests)
    policy: str | None = None  # gate policy file (default: the bundled one)
    inventory: str | None = None  # writer inventory (default: the policy's)
    attach: tuple[str, ...] = ()  # JUnit XML results recorded in evidence.json
    previous: str | None = None  # an older report.json: the trend in report.md/html
    determinism: bool = True  # replay again in reverse order and compare
    progress: Callable[[int, int, str], None] | None = None  # UI hook (never prints here)


@dataclass(frozen=True, slots=True)
class RunResult:
    verdict: str
    report_path: Path
    report: dict[str, Any] = field(repr=False)
    lines: tuple[str, ...] = ()
    paths: tuple[Path, ...] = ()
    evidence: dict[str, Any] = field(default_factory=dict, repr=False)


def _fixtures_root(path: str) -> Path:
    root = Path(path)
    if not root.is_dir():
        raise InputError(root, "", "a fixture folder in the legacy-capture/v1 layout",
                         "no such folder")
    nested = root / "legacy-captures"
    if not any(p.is_dir() and (p / "input.json").is_file() for p in root.iterdir()) and \
            nested.is_dir():
        return nested
    return root


def _quarantine(errors: Sequence[Any]) -> list[Divergence]:
    out = []
    for e in errors:
        src = str(getattr(e, "source", "?"))
        fixture, _, file = src.partition("/")
        out.append(make(fixture, file or src, "fixture.invalid", "none", (),
                        {"pointer": getattr(e, "pointer", ""),
                         "expected": getattr(e, "expected", ""), "got": getattr(e, "got", ""),
                         "attribution_reason": "the fixture is quarantined: nothing to judge"}))
    return out


def apply_intended(divs: Sequence[Divergence], rules: Sequence[intended_mod.Rule]
                   ) -> list[Divergence]:
    """Turn an unexplained (``none``) divergence a reviewed rule covers into ``intended``."""
    from dataclasses import replace

    out = []
    for d in divs:
        rule = None if d.attribution != "none" else intended_mod.match(
            rules, d.reason_code, d.fixture, d.surface, d.detail, d.severity)
        if rule is None:
            out.append(d)
            continue
        detail = {k: v for k, v in d.detail.items() if k != "attribution_reason"}
        detail.update(intended_rule=rule.id, attribution_basis=[f"intended:{rule.id}"],
                      design=rule.design)
        out.append(replace(d, attribution="intended", detail=detail))
    return out


def execute(opts: RunOptions) -> RunResult:
    """Run the whole shadow evaluation and write the report; returns the verdict."""
    if opts.phase not in PHASES:
        raise UsageError(f"--phase must be 0..5, got {opts.phase}")
    if opts.recordings is not None and not Path(opts.recordings).is_dir():
        raise InputError(opts.recordings, "", "a recordings folder", "no such folder")
    waiver_list = waiver_mod.load(opts.waivers) if opts.waivers else []
    rules = intended_mod.load(opts.intended)
    policy = policy_mod.load(opts.policy)
    setup = evidence_mod.prepare(opts, policy)  # bad --inventory/--attach/--previous: exit 2
    root = _fixtures_root(opts.fixtures)
    corpus = load_corpus(root)
    candidate = cand_mod.make_candidate(opts.candidate, opts.recordings)
    results = replay_all(corpus.scenarios, candidate, opts.surfaces, opts.jobs, opts.progress)
    divs, defects, comparisons, projections = reduce_results(results)
    divs = apply_intended(divs, rules)
    divs = sorted([*divs, *_quarantine(corpus.quarantined)], key=lambda d: d.sort_key)
    now = opts.now or dt.datetime.now(dt.UTC)
    outcome = waiver_mod.apply(divs, waiver_list, now.date())
    kept = list(outcome.kept)
    blocking = [d for d in kept if d.severity == "blocking"]
    verdict = "NO-GO" if blocking else "GO"
    if opts.record_candidate:
        cand_mod.write_recorded(opts.record_candidate, candidate.identity, projections)
    report = {
        "schema": REPORT_SCHEMA,
        "verdict": verdict,
        "phase": opts.phase,
        "candidate": {**dict(candidate.identity), "corpus_digest": corpus.digest,
                      "surfaces": sorted(opts.surfaces)},
        "totals": {"fixtures": len(corpus.scenarios) + len(corpus.quarantined),
                   "comparisons": comparisons, "divergences": len(kept),
                   "blocking": len(blocking), "legacy_defects": len(defects),
                   "waived": len(outcome.waived), "quarantined": len(corpus.quarantined)},
        "blocking_reasons": sorted({d.reason_code for d in blocking}),
        "cases": [{"fixture": f, "surface": s} for f, s in sorted(
            {(r.fixture, c) for r in results for c in r.cases}
            | {(d.fixture, d.surface) for d in divs})],
        "divergences": [d.to_wire() for d in kept],
        "legacy_defects": [d.to_wire() for d in defects],
        "waivers": dict(outcome.report),
        "intended": intended_mod.usage_report(rules, [d.to_wire() for d in kept], now.date()),
        "attribution": attribution_counts(kept),
        "generated_at": now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.json"
    path.write_text(render(report), encoding="utf-8")
    evidence = evidence_mod.for_run(
        setup, report, results,
        rerun=(lambda: replay_all(corpus.scenarios[::-1], candidate, opts.surfaces, opts.jobs))
        if opts.determinism else None)
    paths = (path, evidence_mod.write(out / "evidence.json", evidence),
             *reports.write(out, report, evidence=evidence, previous=setup.previous))
    lines = (
        f"fixtures: {report['totals']['fixtures']} ({len(corpus.quarantined)} quarantined), "
        f"comparisons: {comparisons}",
        f"divergences: {len(kept)} ({len(blocking)} blocking), legacy defects: {len(defects)}",
        "by severity: " + ", ".join(f"{s} {n}" for s, n in evidence["run"]["by_severity"].items()),
        *(f"blocking: {c}" for c in report["blocking_reasons"]),
        *(f"report: {p}" for p in paths),
    )
    return RunResult(verdict, path, report, lines, paths, evidence)


def attribution_counts(divs: Sequence[Divergence]) -> dict[str, Any]:
    """Divergences per attribution, and the stated reasons of the unexplained ones."""
    from collections import Counter

    by = Counter(d.attribution for d in divs)
    reasons = Counter(str(d.detail.get("attribution_reason", "")) for d in divs
                      if d.attribution == "none")
    return {"by_attribution": {a: by.get(a, 0) for a in codes_mod.ATTRIBUTIONS},
            "none_reasons": dict(sorted(reasons.items()))}


def render(report: dict[str, Any]) -> str:
    return json.dumps(report, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
