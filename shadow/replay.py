"""Replay as map and reduce (ARCHITECTURE.md).

``replay_fixture`` is the map step: a picklable, side-effect-free function of one
scenario and a candidate.  For every capture it builds the baseline projection (the
surface adapter), the candidate projection, checks each alone against the invariants,
and compares them; then it compares surfaces that consumed the same input with each
other (``surfaces.TWINS``).  It returns a :class:`FixtureResult`; nothing is written.

``reduce_results`` is order-independent: it sorts everything by value, so a reversed
folder listing or another executor (:mod:`shadow.executors`) gives byte-identical output.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shadow import served as served_mod
from shadow.anchor import anchor
from shadow.candidate import Candidate, KernelCandidate, PlanCall
from shadow.canonical import Canon, canonicalize
from shadow.divergence import Divergence, Violation, consistency, make
from shadow.divergence.claims import canon_items
from shadow.divergence.compare import compare
from shadow.divergence.invariants import Assessment, assess, source_index
from shadow.errors import InputError
from shadow.fixtures import Capture, Scenario
from shadow.projection import Projection, to_wire
from shadow.served import Served
from shadow.surfaces import TWINS, Adapter, adapter_for


@dataclass(frozen=True, slots=True)
class FixtureResult:
    fixture: str
    comparisons: int
    divergences: tuple[Divergence, ...]
    legacy_defects: tuple[Divergence, ...]
    candidate_projections: tuple[Projection, ...] = field(default=(), repr=False)
    cases: tuple[str, ...] = ()  # surfaces judged for this fixture (captures and twins)


#: ``progress(done, total, fixture)`` after each fixture of the map (a UI hook, never I/O
#: in the core: the caller decides what to draw).
Progress = Callable[[int, int, str], None]


def selected(capture_name: str, surface: str, patterns: Sequence[str]) -> bool:
    if not patterns:
        return True
    return any(fnmatch.fnmatchcase(capture_name, p) or fnmatch.fnmatchcase(surface, p)
               for p in patterns)


def _as_divs(fx: str, sf: str, vs: Iterable[Violation], who: str) -> list[Divergence]:
    return [make(fx, sf, v.code, who, v.item_ids, v.detail) for v in vs]


def learned_noise(cap: Capture, judged: Projection, adapter: Adapter, canon: Canon,
                  siblings: Mapping[str, Capture]) -> list[Divergence]:
    """``noise.learned_field`` (info) when the values the reviewed noise rules neutralised
    in ``cap`` would have changed its projection ``judged`` (the capture as its file holds
    it, adapted again): a difference that lies only on learned volatile fields.  The
    detail names the rules, their paths, the values replaced and the projection fields
    that would have differed — never a value.  Nothing when they change nothing."""
    if cap.original is None:
        return []
    mine = to_wire(judged)
    try:
        raw = adapter(canon, cap.original, siblings)
        changed = sorted(k for k, v in to_wire(raw).items() if mine.get(k) != v)
    except Exception as exc:  # the raw values break the adapter: the rules made it judgeable
        changed = [f"adapter ({type(exc).__name__})"]
    if not changed:
        return []
    return [make(judged.fixture, cap.name, "noise.learned_field", "none", (),
                 {"rules": {rid: n for rid, _path, n in cap.noise},
                  "fields": sorted({path for _rid, path, _n in cap.noise}),
                  "values": sum(n for _rid, _path, n in cap.noise), "changed": changed,
                  "attribution_reason": "noise"})]


def replay_fixture(scenario: Scenario, candidate: Candidate,
                   surfaces: Sequence[str] = (), served: Served | None = None) -> FixtureResult:
    """Map step for one fixture (see module docstring).  With ``served`` (``shadow run``
    with the live kernel), every capture the kernel plans is judged again through the
    server and the SDK (:mod:`shadow.served`)."""
    fx = scenario.name
    canon = canonicalize(fx, scenario.input)
    siblings = {c.name: c for c in scenario.captures}
    acc = _Fixture(fx, canon, siblings, source_index(canon))
    kernel = candidate if isinstance(candidate, KernelCandidate) and candidate.serves else None
    serve = served is not None and canon.kind != "memory" and kernel is not None
    for cap in scenario.captures:
        want = served_mod.wanted(cap.name, surfaces) if serve else ()
        cand: Candidate = candidate
        calls: list[PlanCall] = []
        if want and kernel is not None:  # the in-process planner's calls, to send again
            cand, calls = kernel.recording()
        if selected(cap.name, cap.surface, surfaces):
            local = acc.capture(cap, bool(want), cand)
        else:
            local = acc.local(cap, cand) if want else None
        if want and local is not None:
            assert served is not None
            cases, divs = served_mod.judge(candidate, served, canon, cap, siblings, local,
                                           calls, want)
            acc.cases += cases
            acc.divs += divs
            acc.comparisons += len(cases)
    for x, y in TWINS:
        if x in acc.baselines and y in acc.baselines:
            (bx, sx), (by, sy) = acc.baselines[x], acc.baselines[y]
            acc.divs += compare(bx, by, sx.violations, sy.violations, surface=f"{x}~{y}",
                                twin=True, claims_a=sx.claims, claims_b=sy.claims)
            acc.comparisons += 1
            acc.cases.append(f"{x}~{y}")
    return FixtureResult(fx, acc.comparisons, tuple(sorted(acc.divs, key=lambda d: d.sort_key)),
                         tuple(sorted(acc.defects, key=lambda d: d.sort_key)),
                         tuple(acc.cand_out), tuple(sorted(acc.cases)))


@dataclass
class _Fixture:
    """What the judgement of one fixture's captures accumulates."""

    fx: str
    canon: Canon
    siblings: Mapping[str, Capture]
    index: Any
    divs: list[Divergence] = field(default_factory=list)
    defects: list[Divergence] = field(default_factory=list)
    cand_out: list[Projection] = field(default_factory=list)
    baselines: dict[str, tuple[Projection, Assessment]] = field(default_factory=dict)
    comparisons: int = 0
    cases: list[str] = field(default_factory=list)

    def local(self, cap: Capture, cand: Candidate) -> Projection | None:
        """The in-process candidate's projection of ``cap`` alone (not judged: for a
        served surface selected without its capture)."""
        try:
            return cand.project(self.canon, cap, self.siblings)
        except InputError:
            raise
        except Exception:  # judged where the capture itself is selected
            return None

    def capture(self, cap: Capture, need: bool, cand: Candidate) -> Projection | None:
        """Judge one capture against the candidate; the candidate's raw projection (None
        when it gave none, or when no adapter judged the capture and ``need`` is false)."""
        fx, canon, siblings = self.fx, self.canon, self.siblings
        self.cases.append(cap.name)
        adapter = adapter_for(cap.name)
        if adapter is None:
            self.divs.append(make(fx, cap.name, "unclassified", "none", (),
                                  {"problem": "no surface adapter for this capture",
                                   "attribution_reason": "no adapter reads this capture"}))
            return self.local(cap, cand) if need else None
        try:
            b = adapter(canon, cap, siblings)
        except Exception as exc:  # an output shape no adapter rule explains: a finding
            self.divs.append(make(fx, cap.name, "unclassified", "none", (),
                                  {"problem": "surface adapter failed",
                                   "error": type(exc).__name__,
                                   "attribution_reason": "the capture's shape is unexplained"}))
            return self.local(cap, cand) if need else None
        if cap.noise:
            self.divs += learned_noise(cap, b, adapter, canon, siblings)
        sb = assess(b, canon, self.index)
        self.baselines[cap.name] = (b, sb)
        self.defects += _as_divs(fx, cap.name, sb.violations, "baseline")
        try:
            a = cand.project(canon, cap, siblings)
        except InputError:
            raise  # a malformed or incomplete recorded candidate: refused (exit 2)
        except Exception as exc:  # a candidate crash is a finding, never a harness crash
            self.divs.append(make(fx, cap.name, "candidate.unavailable", "candidate", (),
                                  {"error": type(exc).__name__}))
            return None
        self.cand_out.append(a)
        if a.status == "error" and a.error == "not_recorded":
            self.divs.append(make(fx, cap.name, "candidate.unavailable", "candidate", (),
                                  {"error": "not_recorded"}))
            return None
        raw = a
        a = anchor(a, b, canon, cap, siblings)  # offered ids, limits, recorded truths
        sa = assess(a, canon, self.index, candidate=True)
        sa.violations.extend(consistency.check(a, b, canon_items(canon)))  # about its input?
        self.divs += _as_divs(fx, cap.name, sa.violations, "candidate")
        self.divs += compare(a, b, sa.violations, sb.violations, claims_a=sa.claims,
                             claims_b=sb.claims)
        self.comparisons += 1
        return raw


def replay_all(scenarios: Sequence[Scenario], candidate: Candidate,
               surfaces: Sequence[str] = (),
               progress: Progress | None = None) -> list[FixtureResult]:
    """Run the map over every scenario in this process (``shadow run`` runs it on any
    executor through :func:`shadow.executors.run_map`)."""
    out = []
    for i, s in enumerate(scenarios, 1):
        out.append(replay_fixture(s, candidate, surfaces))
        if progress is not None:
            progress(i, len(scenarios), s.name)
    return out


def reduce_results(results: Iterable[FixtureResult]) -> tuple[
        list[Divergence], list[Divergence], int, list[Projection]]:
    """Order-independent reduce: (divergences, legacy defects, comparisons, projections)."""
    divs: list[Divergence] = []
    defects: list[Divergence] = []
    projections: list[Projection] = []
    comparisons = 0
    for r in results:
        divs.extend(r.divergences)
        defects.extend(r.legacy_defects)
        projections.extend(r.candidate_projections)
        comparisons += r.comparisons
    divs.sort(key=lambda d: d.sort_key)
    defects.sort(key=lambda d: d.sort_key)
    projections.sort(key=lambda p: (p.fixture, p.surface))
    return divs, defects, comparisons, projections
