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
     "waivers": {"applied", "refused", "expired", "expiring", "unused": [...]},
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
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from shadow import candidate as cand_mod
from shadow import codes as codes_mod
from shadow import evidence as evidence_mod
from shadow import intended as intended_mod
from shadow import noise_rules, outdir, reports, spill
from shadow import waivers as waiver_mod
from shadow.divergence import Divergence, make, with_ids
from shadow.divergence.ids import IdCheck
from shadow.errors import InputError, UsageError
from shadow.executors import DEFAULT_FIXTURE_TIMEOUT, MapOptions
from shadow.gates import policy as policy_mod
from shadow.gates import rule
from shadow.mapreduce import Group, Reduced, map_corpus
from shadow.mapstep import MapContext

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
    noise: str | None = None  # noise rules (default: the bundled shadow/policy/noise.v1.json)
    jobs: int = 1
    executor: str | None = None  # serial | process | dask (default: process when jobs > 1)
    scheduler: str | None = None  # a Dask scheduler address (default: a LocalCluster)
    fixture_timeout: float = DEFAULT_FIXTURE_TIMEOUT  # seconds one fixture may take
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


def default_recordings(base: Path | None = None) -> str | None:
    """``recordings/`` (of ``base``, default the current folder) when it exists: the one
    documented path, so ``nox -s shadow``, ``shadow run`` and ``pytest --shadow`` replay the
    same candidate."""
    p = (base or Path()) / "recordings"
    return str(p) if p.is_dir() else None


def _check_options(opts: RunOptions) -> None:
    """Every argument, before any replay: a bad one is exit 2 naming it."""
    if opts.phase not in PHASES:
        raise UsageError(f"--phase must be 0..5, got {opts.phase}")
    if not isinstance(opts.jobs, int) or opts.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {opts.jobs}")
    if not str(opts.fixtures).strip():
        raise UsageError("--fixtures: an empty path selects nothing")
    if not str(opts.out).strip():
        raise UsageError("--out: an empty path")
    if opts.recordings is not None and not Path(opts.recordings).is_dir():
        raise InputError(opts.recordings, "", "--recordings: a recordings folder",
                         "no such folder")
    fixtures, out = Path(opts.fixtures).resolve(), Path(opts.out).resolve()
    if out == fixtures or fixtures in out.parents:
        raise UsageError(f"--out {opts.out}: inside --fixtures (the captures are ground "
                         "truth: nothing is ever written there)")
    unknown = [p for p in opts.surfaces if not _may_select(p)]
    if unknown:  # read before the stream: a typo never costs a replay
        raise UsageError("--surface " + " ".join(unknown) + ": selects no capture any "
                         "surface adapter reads (shadow/surfaces)")
    if opts.record_candidate:
        rec = Path(opts.record_candidate).resolve()
        for other, name in ((fixtures, "--fixtures"), (out, "--out")):
            if rec == other or other in rec.parents or rec in other.parents:
                raise UsageError(f"--record-candidate {opts.record_candidate}: the same "
                                 f"folder as {name}, or inside or around it")
        outdir.check_target(rec, cand_mod.CANDIDATE_FILE, "--record-candidate",
                            "recorded candidate")
        outdir.ensure_dir(rec.parent, "--record-candidate")


def _may_select(pattern: str) -> bool:
    """Whether a ``--surface`` pattern can select any capture: it names a surface, or a
    capture kind a surface adapter reads (or a variant of one)."""
    import fnmatch

    from shadow.fixtures import SURFACES
    from shadow.served import SURFACES as SERVED
    from shadow.surfaces import ADAPTERS, adapter_for

    for served in SERVED:  # sdk, app-server, sdk.cli.compress ...
        if fnmatch.fnmatchcase(served, pattern) or pattern.startswith(served + "."):
            return True
    return (any(fnmatch.fnmatchcase(n, pattern) for n in (*ADAPTERS, *SURFACES))
            or adapter_for(pattern) is not None)


def _quarantine_lines(quarantined: Sequence[Any]) -> list[str]:
    return [f"quarantined: {q.source} at {q.pointer or '/'}: expected {q.expected}"
            + (f", got {q.got}" if getattr(q, "got", "") else "") for q in quarantined]


def map_options(opts: RunOptions) -> MapOptions:
    executor = opts.executor or ("process" if opts.jobs > 1 else "serial")
    return MapOptions(executor=executor, jobs=opts.jobs, scheduler=opts.scheduler,
                      fixture_timeout=opts.fixture_timeout)


def execute(opts: RunOptions) -> RunResult:
    """Run the whole shadow evaluation and write the report; returns the verdict.

    Order: every argument and every policy/rule/evidence input is checked before any
    replay; the corpus is then read as a stream and judged on the chosen executor
    (:mod:`shadow.mapreduce`; a scenario that does not parse is quarantined, never
    fatal); the reports are written into a staging folder and swapped into ``--out``
    complete (:mod:`shadow.outdir`); the verdict is the gate's own for ``--phase`` on this
    run's evidence (:func:`shadow.gates.rule.ladder`)."""
    from shadow import executors
    from shadow.corpus_source import open_source

    _check_options(opts)
    mopts = map_options(opts)
    executors.check(mopts)
    waiver_list = waiver_mod.load(opts.waivers) if opts.waivers else []
    rules = intended_mod.load(opts.intended)
    noise = noise_rules.load(opts.noise)  # a broken file: exit 2, before any replay
    policy = policy_mod.load(opts.policy)
    setup = evidence_mod.prepare(opts, policy)  # bad --inventory/--attach/--previous: exit 2
    candidate = cand_mod.make_candidate(opts.candidate, opts.recordings)
    now = opts.now or dt.datetime.now(dt.UTC)
    ctx = MapContext(candidate, tuple(opts.surfaces), noise, opts.recordings,
                     keep_projections=bool(opts.record_candidate),
                     served=bool(getattr(candidate, "serves", False)))
    with open_source(opts.fixtures) as source:
        empty = source.nothing_to_judge()
        if empty is not None:
            raise empty
        with outdir.staged(opts.out) as stage:
            red = map_corpus(source, ctx, mopts, stage.path / ".shards",
                             progress=opts.progress, determinism=opts.determinism)
            if opts.surfaces and red.scenarios and not red.cases:
                raise UsageError("--surface " + " ".join(opts.surfaces)
                                 + ": selects no capture of the corpus")
            # the long lists, in the system's temporary folder (TMPDIR) until the last
            # reader of the result lets go (docs/scale.md, "Memory")
            spills = spill.Folder()
            try:
                report, evidence = _judge(opts, red, candidate, rules, waiver_list, policy,
                                          setup, now, spills)
                shutil.rmtree(stage.path / ".shards")
                report["noise_rules"] = noise_rules.usage_report(noise, red.noise)
                if opts.record_candidate:  # staged and swapped in whole, as the run folder
                    with outdir.staged(opts.record_candidate, cand_mod.CANDIDATE_FILE,
                                       "--record-candidate", "recorded candidate"
                                       ) as rec_stage:
                        cand_mod.write_recorded(rec_stage.path, candidate.identity,
                                                red.projections)
                        rec_stage.commit()
                out = stage.path
                written = (write(out / "report.json", report),
                           evidence_mod.write(out / "evidence.json", evidence),
                           *reports.write(out, report, evidence=evidence,
                                          previous=setup.previous))
                final = stage.commit()
            except BaseException:  # a failed run leaves no spill behind
                spills.cleanup()
                raise
    paths = tuple(final / p.name for p in written)
    return RunResult(report["verdict"], final / "report.json", report,
                     (*banner(report, red.quarantined), *(f"report: {p}" for p in paths)),
                     paths, evidence)


@dataclass
class _Counts:
    """What the judgement keeps in memory while the lists stream to their spills: counts
    bounded by the vocabulary (attributions, reasons, codes)."""

    kept: int = 0
    blocking: int = 0
    blocking_codes: set[str] = field(default_factory=set)
    defects: int = 0
    failing: int = 0
    by_attribution: Counter[str] = field(default_factory=Counter)
    none_reasons: Counter[str] = field(default_factory=Counter)

    def add(self, kept: Sequence[Divergence]) -> None:
        self.kept += len(kept)
        for d in kept:
            self.by_attribution[d.attribution] += 1
            if d.attribution == "none":
                self.none_reasons[str(d.detail.get("attribution_reason", ""))] += 1
            if d.severity == "blocking":
                self.blocking += 1
                self.blocking_codes.add(d.reason_code)


def _fixtures(red: Reduced, quarantine: Mapping[str, list[Divergence]]
              ) -> Iterator[tuple[Group, list[Divergence]]]:
    """The judged fixtures in name order, each with the quarantine findings named after it
    (a quarantined file's fixture may have no rows at all: it comes in its place)."""
    pending = sorted(quarantine)
    i = 0
    for g in red.groups():
        while i < len(pending) and pending[i] < g.fixture:
            yield Group(pending[i], [], [], []), quarantine[pending[i]]
            i += 1
        extra: list[Divergence] = []
        if i < len(pending) and pending[i] == g.fixture:
            extra, i = quarantine[g.fixture], i + 1
        yield g, extra
    for name in pending[i:]:
        yield Group(name, [], [], []), quarantine[name]


def _unique(check: IdCheck, wires: Any, cases: Any, spills: Any) -> tuple[Any, Any]:
    """The ids the whole list would get, when two fixtures' divergences share a base id
    (:mod:`shadow.divergence.ids`; rare): both lists rewritten once, renamed."""
    shared = check.shared()
    if not shared:
        return wires, cases
    renamed = spills.spill(f"{check.prefix}-unique")
    renamed.extend(check.renumber(wires, shared))
    renamed.close()
    if cases is None:
        return renamed, None
    judged = spills.spill("cases-unique")
    judged.extend(check.rename_case(c) for c in cases)
    judged.close()
    return renamed, judged


def _judge(opts: RunOptions, red: Reduced, candidate: Any,
           rules: Sequence[intended_mod.Rule], waiver_list: Sequence[waiver_mod.Waiver],
           policy: policy_mod.Policy, setup: Any, now: dt.datetime, spills: Any
           ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Attribute, waive and judge fixture by fixture (the lists go to ``spills``), then
    let the gate judge every phase on the evidence."""
    quarantine: dict[str, list[Divergence]] = {}
    for d in _quarantine(red.quarantined):
        quarantine.setdefault(d.fixture, []).append(d)
    waiving = waiver_mod.Waiving(waiver_list, now.date(),
                                 warning_days=policy.waiver_warning_days)
    cases, wires_out, defects_out, rows = (spills.spill(n) for n in (
        "cases", "divergences", "legacy_defects", "evidence-cases"))
    n = _Counts()
    ids, defect_ids = IdCheck("d"), IdCheck("ld")
    for g, extra in _fixtures(red, quarantine):
        divs = sorted([*apply_intended(g.divergences, rules), *extra],
                      key=lambda d: d.sort_key)
        kept = waiving.split(divs)
        n.add(kept)
        wires = with_ids([d.to_wire() for d in kept])
        ids.add(wires)
        keys = sorted({(g.fixture, s) for s in g.surfaces}
                      | {(d.fixture, d.surface) for d in divs})
        judged = rule.judge_cases(policy, opts.phase, keys, wires)
        n.failing += sum(1 for c in judged if c["outcome"] == "fail")
        defects = with_ids([d.to_wire() for d in g.legacy_defects], "ld")
        defect_ids.add(defects)
        n.defects += len(defects)
        cases.extend(judged)
        wires_out.extend(wires)
        defects_out.extend(defects)
        rows.extend(evidence_mod.case_summaries({"cases": judged, "divergences": wires}))
    for sp in (cases, wires_out, defects_out, rows):
        sp.close()
    wires_out, cases = _unique(ids, wires_out, cases, spills)
    defects_out, _ = _unique(defect_ids, defects_out, None, spills)
    report: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "verdict": "NO-GO",  # until the ladder below has judged the evidence
        "phase": opts.phase,
        "candidate": {**dict(candidate.identity), "corpus_digest": red.digest,
                      "surfaces": sorted(opts.surfaces)},
        "totals": {"fixtures": red.scenarios + len(red.quarantined),
                   "comparisons": red.comparisons, "divergences": n.kept,
                   "blocking": n.blocking, "legacy_defects": n.defects,
                   "waived": waiving.waived, "quarantined": len(red.quarantined)},
        "blocking_reasons": sorted(n.blocking_codes),
        "cases": cases,
        "divergences": wires_out,
        "legacy_defects": defects_out,
        "waivers": waiving.report(),
        "intended": intended_mod.usage_report(rules, wires_out, now.date()),
        "attribution": _attribution(n.by_attribution, n.none_reasons),
        "generated_at": now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if red.synthetic:
        report["totals"]["synthetic"] = red.synthetic
    report["totals"]["failing_cases"] = n.failing
    evidence = evidence_mod.for_run(setup, report, red.determinism or None, cases=rows)
    steps = rule.ladder(policy, evidence_mod.seal(evidence), evidence["environment"]["platform"],
                        now.date())
    verdict = steps[opts.phase]["verdict"]
    report["verdict"], report["ladder"] = verdict, steps
    evidence["run"]["verdict"] = verdict
    return report, evidence_mod.seal(evidence)


def _noise_lines(n: Mapping[str, Any]) -> list[str]:
    """Applied and unreviewed noise rules (ids only): an unreviewed rule is not applied."""
    out = []
    for state, what in (("applied", "applied"), ("unreviewed", "unreviewed, not applied")):
        ids = [str(x.get("id")) for x in n.get(state, []) if isinstance(x, Mapping)]
        if ids:
            out.append(f"noise rules {what}: {len(ids)} ({', '.join(ids[:8])}"
                       f"{' …' if len(ids) > 8 else ''})")
    return out


def _waiver_lines(w: Mapping[str, Any]) -> list[str]:
    """One line per waiver state that holds any waiver (applied, refused, expired, expiring,
    unused); ids only, never a reason text."""
    out = []
    for state in ("applied", "refused", "expired", "expiring", "unused"):
        ids = [str(x.get("id")) for x in w.get(state, []) if isinstance(x, Mapping)]
        if ids:
            out.append(f"waivers {state}: {len(ids)} ({', '.join(ids[:8])}"
                       f"{' …' if len(ids) > 8 else ''})")
    return out


def banner(report: Mapping[str, Any], quarantined: Sequence[Any]) -> tuple[str, ...]:
    """The console summary: the same counts as the reports, from the same rule."""
    t, cases = report["totals"], report["cases"]
    by = report["attribution"]["by_attribution"]
    outcomes = Counter(c["outcome"] for c in cases)  # one pass over each long list
    sev = Counter(d["severity"] for d in report["divergences"])
    ladder = report.get("ladder", [])
    return (
        f"fixtures: {t['fixtures']} ({t['quarantined']} quarantined), "
        f"comparisons: {t['comparisons']}",
        *_quarantine_lines(quarantined),
        f"cases: {len(cases)}; at phase {report['phase']}: {outcomes['fail']} failing, "
        f"{outcomes['note']} with notes, {outcomes['pass']} clean, "
        f"{outcomes['info']} twin (informational)",
        f"divergences: {t['divergences']} ({t['blocking']} blocking), "
        f"legacy defects: {t['legacy_defects']}, waived: {t['waived']}",
        "by severity: " + ", ".join(f"{s} {sev[s]}" for s in codes_mod.SEVERITIES),
        f"by attribution: candidate {by.get('candidate', 0) + by.get('both', 0)}, "
        f"baseline {by.get('baseline', 0)}, intended {by.get('intended', 0)}, "
        f"none {by.get('none', 0)}",
        *(f"blocking: {c}" for c in report["blocking_reasons"]),
        *_waiver_lines(report.get("waivers", {})),
        *_noise_lines(report.get("noise_rules", {})),
        "phases: " + "  ".join(f"{s['phase']} {s['verdict']}" for s in ladder),
        *(f"to reach phase {s['phase']}: {a}" for s in ladder if s["verdict"] != "GO"
          and s["phase"] <= report["phase"] + 1 for a in s["to_reach_new"][:4]),
    )


def attribution_counts(divs: Iterable[Divergence]) -> dict[str, Any]:
    """Divergences per attribution, and the stated reasons of the unexplained ones."""
    n = _Counts()
    n.add(list(divs))
    return _attribution(n.by_attribution, n.none_reasons)


def _attribution(by: Mapping[str, int], reasons: Mapping[str, int]) -> dict[str, Any]:
    return {"by_attribution": {a: by.get(a, 0) for a in codes_mod.ATTRIBUTIONS},
            "none_reasons": dict(sorted(reasons.items()))}


def render(report: Mapping[str, Any]) -> str:
    """``report.json``'s text (a small report; the run streams it: :func:`write`)."""
    return spill.dumps_pretty(report) + "\n"


def write(path: Path, report: Mapping[str, Any]) -> Path:
    """``report.json``: exactly :func:`render`'s bytes, its long lists streamed from their
    spills (:mod:`shadow.spill`)."""
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        spill.write_pretty(report, fh)
        fh.write("\n")
    return path
