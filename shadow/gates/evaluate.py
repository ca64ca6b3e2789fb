"""Judge merged evidence against one phase of the policy -> :class:`GateResult`.

Order of judgement (every reason is collected; the verdict is NO-GO if any exists):

1. candidate binding — one identity across all files (``evidence.mixed_candidate``),
   the policy version the gate applies (``policy.version_mismatch``), every required
   platform present (``evidence.missing_platform``), identical results across platforms
   (``evidence.platform_mismatch``, when the policy asks for it);
2. every phase — a §16 NO-GO class attributed to the candidate (``policy.nogo_class``) and
   waivers expired by the gate date (``policy.waiver_expired``);
3. the phase and every phase it inherits — its checks (``policy.check_failed`` /
   ``evidence.missing``) and its surface rate rules: enough fixtures, at most
   ``max_failing`` failing ones (``policy.divergence_threshold``), and a Wilson upper
   bound of the failure rate at most ``max_upper_bound`` (``evidence.insufficient``).
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shadow import codes
from shadow.gates.merge import EvidenceFile, Merged, merge
from shadow.gates.policy import Phase, Policy, RateRule
from shadow.gates.stats import wilson_upper

GATE_SCHEMA = "shadow-gate/v1"
_IDENTITY_FIELDS = ("commit", "package_version", "corpus_digest", "recordings_digest",
                    "policy_version", "policy_digest", "candidate_digest", "waivers_digest",
                    "intended_digest", "noise_digest", "surfaces")


@dataclass(frozen=True, slots=True)
class Reason:
    code: str
    requirement: str
    message: str
    phase: int | None = None  # None: the candidate binding or an every-phase rule
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        return {"code": self.code, "severity": codes.get(self.code).severity,
                "requirement": self.requirement, "phase": self.phase,
                "message": self.message, "detail": dict(self.detail)}


@dataclass(frozen=True, slots=True)
class Requirement:
    phase: int | None
    name: str
    status: str  # pass | fail | missing | insufficient
    message: str


@dataclass(frozen=True, slots=True)
class SurfaceRow:
    phase: int
    surface: str
    fail_at: str
    fixtures: int
    failing: int
    upper: float
    min_fixtures: int
    max_failing: int
    max_upper_bound: float
    status: str

    def to_wire(self) -> dict[str, Any]:
        return {"phase": self.phase, "surface": self.surface, "fail_at": self.fail_at,
                "fixtures": self.fixtures, "failing": self.failing,
                "upper_bound": round(self.upper, 4), "min_fixtures": self.min_fixtures,
                "max_failing": self.max_failing, "max_upper_bound": self.max_upper_bound,
                "status": self.status}


@dataclass(frozen=True, slots=True)
class GateResult:
    phase: int
    title: str
    verdict: str
    policy_version: str
    today: dt.date
    platforms_required: tuple[str, ...]
    platforms_present: tuple[str, ...]
    identity: Mapping[str, Any] | None
    reasons: tuple[Reason, ...]
    requirements: tuple[Requirement, ...]
    surfaces: tuple[SurfaceRow, ...]
    warnings: tuple[str, ...]
    files: tuple[str, ...]

    def to_wire(self) -> dict[str, Any]:
        return {"schema": GATE_SCHEMA, "phase": self.phase, "title": self.title,
                "verdict": self.verdict, "policy_version": self.policy_version,
                "today": self.today.isoformat(),
                "platforms": {"required": list(self.platforms_required),
                              "present": list(self.platforms_present)},
                "identity": dict(self.identity) if self.identity is not None else None,
                "evidence": list(self.files),
                "reasons": [r.to_wire() for r in self.reasons],
                "requirements": [{"phase": q.phase, "name": q.name, "status": q.status,
                                  "message": q.message} for q in self.requirements],
                "surfaces": [s.to_wire() for s in self.surfaces],
                "warnings": list(self.warnings)}


class _Judge:
    def __init__(self, policy: Policy, merged: Merged, platforms: Sequence[str],
                 today: dt.date) -> None:
        self.policy, self.m, self.platforms, self.today = policy, merged, platforms, today
        self.reasons: list[Reason] = []
        self.reqs: list[Requirement] = []
        self.rows: list[SurfaceRow] = []
        self.warnings: list[str] = []

    def add(self, phase: int | None, name: str, status: str, message: str,
            code: str | None = None, detail: Mapping[str, Any] | None = None) -> None:
        self.reqs.append(Requirement(phase, name, status, message))
        if code is not None:
            self.reasons.append(Reason(code, name, message, phase, dict(detail or {})))

    def synthetic(self, files: Sequence[EvidenceFile]) -> None:
        """A run on a ``shadow synth`` corpus is a scale test, never release evidence."""
        marked = {f.path: f.doc.get("run", {}).get("totals", {}).get("synthetic", 0)
                  for f in files}
        bad = {p: n for p, n in marked.items() if n}
        if bad:
            total = sum(n if isinstance(n, int) else 1 for n in bad.values())
            self.add(None, "corpus", "fail", f"{total} synthetic fixture(s) in the evidence "
                     "(shadow synth): a scale test is never release evidence",
                     "evidence.synthetic", {"files": bad})

    # -- 1. candidate binding --------------------------------------------------------------
    def binding(self) -> Mapping[str, Any] | None:
        ids = self.m.identities()
        files = self.m.files
        if not files:
            self.add(None, "evidence", "missing", "no evidence file given", "evidence.missing")
            return None
        if len(ids) > 1:
            differ = {k: sorted({str(f.identity.get(k)) for f in files})
                      for k in _IDENTITY_FIELDS
                      if len({str(f.identity.get(k)) for f in files}) > 1}
            by = {f"{f.platform} ({f.path})": f.identity_digest for f in files}
            self.add(None, "candidate", "fail",
                     f"{len(ids)} different candidate identities; differing: "
                     + ", ".join(sorted(differ)), "evidence.mixed_candidate",
                     {"differing": differ, "files": by})
        else:
            self.add(None, "candidate", "pass", "one candidate identity")
        identity = files[0].identity if len(ids) == 1 else None
        self.synthetic(files)
        versions = sorted({str(f.identity.get("policy_version")) for f in files})
        policy_digests = sorted({str(f.identity.get("policy_digest")) for f in files})
        if versions != [self.policy.version]:
            self.add(None, "policy", "fail",
                     f"evidence under {', '.join(versions)}; the gate applies "
                     f"{self.policy.version}", "policy.version_mismatch",
                     {"evidence": versions, "gate": self.policy.version})
        elif policy_digests != [self.policy.digest]:
            self.add(None, "policy", "fail",
                     f"evidence judged under other rules labelled {self.policy.version} "
                     f"(policy digest {', '.join(d[:19] for d in policy_digests)}); the gate "
                     f"applies {self.policy.digest[:19]}", "policy.version_mismatch",
                     {"evidence": policy_digests, "gate": self.policy.digest})
        present = set(self.m.platforms)
        for p in self.platforms:
            if p in present:
                self.add(None, f"platform:{p}", "pass", f"{p} evidence present")
            else:
                self.add(None, f"platform:{p}", "missing", f"no evidence from {p}",
                         "evidence.missing_platform", {"platform": p,
                                                       "present": sorted(present)})
        if self.policy.cross_platform_identical and len(ids) == 1:
            digests: dict[str, list[str]] = {}
            for f in files:
                digests.setdefault(f.results_digest, []).append(f.platform)
            if len(digests) > 1:
                self.add(None, "cross-platform", "fail",
                         "the same candidate produced different results on "
                         + " vs ".join("/".join(sorted(set(v))) for v in digests.values()),
                         "evidence.platform_mismatch",
                         {"results_digests": {k: sorted(set(v)) for k, v in digests.items()}})
        return identity

    # -- 2. every phase --------------------------------------------------------------------
    def every_phase(self) -> None:
        stats = self.m.stats
        nogo = {code: list(where) for code, where in stats.nogo.items()}
        for code, where in sorted(nogo.items()):
            n = stats.count(f"nogo:{code}", where)
            self.add(None, f"nogo:{code}", "fail",
                     f"§16 NO-GO class {code} attributed to the candidate in {n} "
                     f"case(s): {', '.join(where[:5])}{' …' if n > 5 else ''}",
                     "policy.nogo_class", {"reason_code": code, "cases": where})
        if not nogo:
            self.add(None, "nogo", "pass", "no §16 NO-GO class attributed to the candidate")
        warn = dt.timedelta(days=self.policy.waiver_warning_days)
        for w in self.m.waivers_applied:
            try:
                expires = dt.date.fromisoformat(str(w.get("expires")))
            except ValueError:
                expires = dt.date.min
            if expires <= self.today:
                self.add(None, f"waiver:{w.get('id')}", "fail",
                         f"waiver {w.get('id')} expired {expires.isoformat()}; the "
                         f"{w.get('divergences', '?')} divergence(s) it covered count again",
                         "policy.waiver_expired", {"waiver": dict(w)})
            elif expires - self.today <= warn:
                self.warnings.append(f"waiver {w.get('id')} expires {expires.isoformat()} "
                                     f"({(expires - self.today).days} days)")

    # -- 3. phases ------------------------------------------------------------------------
    def check(self, ph: Phase, name: str) -> None:
        m = self.m
        if name in ("inventory.valid", "schemas.frozen", "replay.deterministic"):
            c = m.checks.get(name)
            status = c["status"] if c else "missing"
            absent = [p for p in m.platforms if c is None or p not in c["by_platform"]]
            if status == "pass" and not absent:
                self.add(ph.phase, name, "pass", "passed on " + ", ".join(m.platforms))
            elif status == "fail":
                why = "; ".join(c["detail"]) if c and c["detail"] else "see evidence.json"
                self.add(ph.phase, name, "fail", f"{name} failed: {why}",
                         "policy.check_failed", {"by_platform": c["by_platform"] if c else {}})
            else:
                self.add(ph.phase, name, "missing", f"{name} was not measured"
                         + (f" on {', '.join(absent)}" if absent else ""), "evidence.missing",
                         {"by_platform": c["by_platform"] if c else {}})
        elif name == "baseline.captures":
            missing = [s for s in self.policy.baseline_surfaces if not m.stats.judged(s)]
            if missing:
                self.add(ph.phase, name, "missing", "no baseline capture for "
                         + ", ".join(missing), "evidence.missing", {"surfaces": missing})
            elif m.quarantined:
                self.add(ph.phase, name, "fail", f"{m.quarantined} fixture(s) quarantined",
                         "policy.check_failed", {"quarantined": m.quarantined})
            else:
                self.add(ph.phase, name, "pass", "a valid baseline capture for "
                         + ", ".join(self.policy.baseline_surfaces))
        elif name in ("divergences.classified", "replay.side_effect_free"):
            code = "unclassified" if name == "divergences.classified" else "shadow.side_effect"
            where = list(m.stats.cases_with(code))
            if where:
                self.add(ph.phase, name, "fail", f"{code} in "
                         f"{m.stats.count(f'code:{code}', where)} case(s): "
                         + ", ".join(where[:5]), "policy.check_failed", {"cases": where})
            else:
                self.add(ph.phase, name, "pass", f"no {code} divergence")
        elif name == "divergences.no_blocking":
            where = list(m.stats.blocking)
            if where:
                self.add(ph.phase, name, "fail", f"unwaived blocking divergences in "
                         f"{m.stats.count('blocking', where)} case(s): " + ", ".join(where[:5]),
                         "policy.check_failed", {"cases": where})
            else:
                self.add(ph.phase, name, "pass", "no unwaived blocking divergence")
        elif name == "inventory.no_active_legacy_writer":
            c = m.checks.get("inventory.valid")
            if c is None or c["status"] != "pass":
                self.add(ph.phase, name, "missing", "no valid writer inventory",
                         "evidence.missing")
            elif c.get("active_legacy_writers"):
                active = sorted(c["active_legacy_writers"])
                self.add(ph.phase, name, "fail", "active legacy writers: " + ", ".join(active),
                         "policy.check_failed", {"writers": active})
            else:
                self.add(ph.phase, name, "pass", "no active legacy writer in the inventory")
        else:
            self.attachment(ph, name)

    def attachment(self, ph: Phase, name: str) -> None:
        spec = self.policy.attachments[name]
        missing, failed, counted = [], [], 0
        judged = [p for p in self.platforms if p in self.m.platforms] or self.m.platforms
        for p in judged:
            hits = [t for t in self.m.testcases(p)
                    if any(fnmatch.fnmatchcase(t["id"], g) for g in spec.testcases)
                    and t.get("outcome") != "skipped"]
            if not hits:
                missing.append(p)
            failed += [f"{p}: {t['id']}" for t in hits if t.get("outcome") != "passed"]
            counted += len(hits)
        if failed:
            self.add(ph.phase, name, "fail", f"{len(failed)} failing test(s): "
                     + ", ".join(failed[:5]), "policy.check_failed", {"failed": failed})
        elif missing:
            self.add(ph.phase, name, "missing", f"no attached test results matching "
                     f"{', '.join(spec.testcases)} from {', '.join(missing)}",
                     "evidence.missing", {"platforms": missing})
        else:
            self.add(ph.phase, name, "pass", f"{counted} attached tests passed")

    def rate(self, ph: Phase, rule: RateRule) -> None:
        for s in rule.surfaces:
            # judged fixtures of top surface s, and those with a case at or above fail_at
            n, k = self.m.stats.judged(s), self.m.stats.failing_at(s, rule.fail_at)
            upper = wilson_upper(k, n, self.policy.confidence)
            name = f"rate:{s}"
            base = (f"{s}: {k} of {n} fixtures with an unwaived divergence at or above "
                    f"{rule.fail_at}; upper bound {upper:.3f}")
            detail = {"surface": s, "fixtures": n, "failing": k, "upper_bound": round(upper, 4),
                      "fail_at": rule.fail_at}
            if k > rule.max_failing:
                status, code = "fail", "policy.divergence_threshold"
                msg = f"{base} (at most {rule.max_failing} allowed)"
            elif n < rule.min_fixtures:
                status, code = "insufficient", "evidence.insufficient"
                msg = f"{s}: {n} fixtures, at least {rule.min_fixtures} needed"
            elif upper > rule.max_upper_bound:
                status, code = "insufficient", "evidence.insufficient"
                msg = f"{base} > {rule.max_upper_bound}"
            else:
                status, code, msg = "pass", None, base
            self.rows.append(SurfaceRow(ph.phase, s, rule.fail_at, n, k, upper,
                                        rule.min_fixtures, rule.max_failing,
                                        rule.max_upper_bound, status))
            self.add(ph.phase, name, status, msg, code, detail)


def evaluate(policy: Policy, files: Sequence[EvidenceFile], phase: int, *,
             platforms: Sequence[str] | None = None, today: dt.date | None = None,
             names: int | None = None) -> GateResult:
    """Judge ``files`` for ``phase`` (and every phase it inherits); ``names`` caps the case
    names each reason's detail lists (its message and counts are the same)."""
    if phase not in policy.phases:
        raise ValueError(f"phase must be one of {sorted(policy.phases)}")
    required = tuple(platforms) if platforms else policy.platforms
    merged = merge(files, exclude_surfaces=policy.exclude_surfaces, names=names)
    judge = _Judge(policy, merged, required, today or dt.datetime.now(dt.UTC).date())
    identity = judge.binding()
    judge.every_phase()
    for ph in policy.chain(phase):
        for name in ph.checks:
            judge.check(ph, name)
        for rule in ph.rates:
            judge.rate(ph, rule)
    return GateResult(
        phase=phase, title=policy.phases[phase].title,
        verdict="NO-GO" if judge.reasons else "GO", policy_version=policy.version,
        today=judge.today, platforms_required=required,
        platforms_present=tuple(judge.m.platforms), identity=identity,
        reasons=tuple(judge.reasons), requirements=tuple(judge.reqs),
        surfaces=tuple(judge.rows), warnings=tuple(judge.warnings),
        files=tuple(f.path for f in files))
