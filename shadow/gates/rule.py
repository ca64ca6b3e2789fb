"""The one failure rule, phase-aware, and the phase ladder.

Everything that calls something "failing" — the run's verdict and exit code, the JUnit
testcases, ``pytest --shadow``, the banner's counts and the reports' case tables — asks
this module, so they can never disagree with each other or with ``shadow gate``:

* :func:`case_outcome` judges one fixture × surface at one phase: ``fail`` when it holds a
  quarantined file, a §16 NO-GO class attributed to the candidate, or an unwaived divergence
  counting against the candidate at or above the severity the phase requires for that
  surface (``divergences.no_blocking`` ⇒ ``blocking``; a rate rule's ``fail_at``); ``info``
  for a twin (legacy-vs-legacy) comparison, which never fails; ``note`` when it only holds
  divergences that do not fail it; ``pass`` when it holds none.
* :func:`ladder` runs the gate itself (:func:`shadow.gates.evaluate.evaluate`) on one run's
  evidence for every phase 0–5 and turns each phase's reasons into a "to reach phase N"
  list.  ``shadow run --phase N`` exits with the ladder's verdict for N, which is by
  construction what ``shadow gate --phase N --platforms <this platform>`` answers on the
  same evidence.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any

from shadow import codes
from shadow.evidence import top_surface
from shadow.gates.evaluate import GateResult, evaluate
from shadow.gates.merge import parse
from shadow.gates.policy import Policy

TOP_REASONS = 5
NAMES = 8  # case names kept per list by the ladder's merge (messages show 5, actions 3)


def informational(policy: Policy, surface: str) -> bool:
    """A twin (legacy-vs-legacy) or otherwise excluded comparison: never fails."""
    return any(fnmatch.fnmatchcase(surface, p) for p in policy.exclude_surfaces)


def fail_at(policy: Policy, phase: int, surface: str) -> str | None:
    """The least severe severity that fails a case of ``surface`` at ``phase`` (None: only a
    quarantined file or a NO-GO class can fail it at this phase)."""
    levels: list[str] = []
    for ph in policy.chain(phase):
        if "divergences.no_blocking" in ph.checks:
            levels.append("blocking")
        levels += [r.fail_at for r in ph.rates if top_surface(surface) in r.surfaces]
    return max(levels, key=codes.severity_rank) if levels else None


def failing(policy: Policy, phase: int, surface: str,
            divergences: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The divergences that make this case fail at ``phase`` (empty: it does not fail)."""
    if informational(policy, surface):
        return []
    level = fail_at(policy, phase, surface)
    return [d for d in divergences
            if d.get("reason_code") in ("fixture.invalid", "replay.crashed")
            or (d.get("reason_code") in codes.NOGO_CODES and d.get("severity") == "blocking"
                and d.get("attribution") in ("candidate", "both"))
            or (level is not None and codes.fails(d, level))]


def case_outcome(policy: Policy, phase: int, surface: str,
                 divergences: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"outcome": fail|note|pass|info, "fail_at": severity|None, "failing": [ids]}``."""
    bad = failing(policy, phase, surface, divergences)
    if informational(policy, surface):
        outcome = "info"
    elif bad:
        outcome = "fail"
    else:
        outcome = "note" if divergences else "pass"
    return {"outcome": outcome, "fail_at": fail_at(policy, phase, surface),
            "failing": sorted(str(d.get("id", "")) for d in bad)}


def judge_cases(policy: Policy, phase: int, cases: Sequence[tuple[str, str]],
                divergences: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every fixture × surface with its outcome at ``phase`` (sorted)."""
    by: dict[tuple[str, str], list[Mapping[str, Any]]] = {c: [] for c in cases}
    for d in divergences:
        by.setdefault((str(d["fixture"]), str(d["surface"])), []).append(d)
    return [{"fixture": fx, "surface": sf, **case_outcome(policy, phase, sf, divs)}
            for (fx, sf), divs in sorted(by.items())]


# --- the ladder --------------------------------------------------------------------------


def _action(reason: Mapping[str, Any], policy: Policy) -> str:
    """What to do about one gate reason, in a release manager's words."""
    code, req, detail = reason["code"], reason["requirement"], reason.get("detail", {})
    if req in policy.attachments and code == "evidence.missing":
        spec = policy.attachments[req]
        return (f"attach JUnit XML of {spec.description} (`--attach`, testcases matching "
                f"{', '.join(f'`{g}`' for g in spec.testcases)})")
    if code == "evidence.insufficient" and "fixtures" in detail:
        ph = policy.phases.get(reason.get("phase"))  # type: ignore[arg-type]
        rule_min = next((r.min_fixtures for r in (ph.rates if ph else ())
                         if detail.get("surface") in r.surfaces), 0)
        n = int(detail.get("fixtures", 0))
        if n < rule_min:
            return (f"add {rule_min - n} more {detail.get('surface')} fixture(s) "
                    f"({n} of {rule_min})")
        return (f"{detail.get('surface')}: more fixtures to bring the failure rate's upper "
                f"bound {detail.get('upper_bound')} under the limit")
    if code in ("policy.divergence_threshold", "policy.check_failed", "policy.nogo_class") \
            and (detail.get("cases") or detail.get("failing")):
        where = detail.get("cases") or []
        shown = ", ".join(where[:3]) + (" …" if len(where) > 3 else "")
        return f"fix {req}: {reason['message'] if not where else shown}"
    if code == "evidence.missing_platform":
        return f"run on {detail.get('platform')} and gate the evidence together"
    return f"{req}: {reason['message']}"


def ladder(policy: Policy, evidence: Mapping[str, Any], platform: str,
           today: dt.date, src: str = "<this run>") -> list[dict[str, Any]]:
    """The gate's verdict for every phase on this run's evidence alone (this platform)."""
    files = [parse(evidence, src)]
    out: list[dict[str, Any]] = []
    for n in sorted(policy.phases):
        # the ladder shows a reason's message and a few of its cases (_action): the merge
        # keeps the first NAMES of each list of cases, so a candidate failing everywhere
        # costs no memory per case
        res: GateResult = evaluate(policy, files, n, platforms=(platform,), today=today,
                                   names=NAMES)
        reasons = [r.to_wire() for r in res.reasons]
        actions: list[str] = []
        for r in reasons:
            a = _action(r, policy)
            if a not in actions:
                actions.append(a)
        codes_by_req = {r["requirement"]: r["code"] for r in reasons}
        out.append({"phase": n, "title": res.title, "verdict": res.verdict,
                    "reasons": [{"code": r["code"], "requirement": r["requirement"],
                                 "message": r["message"]} for r in reasons[:TOP_REASONS]],
                    "more_reasons": max(0, len(reasons) - TOP_REASONS),
                    "to_reach": actions,
                    # what this phase asks beyond the phase below it
                    "to_reach_new": [a for a in actions
                                     if not out or a not in out[-1]["to_reach"]],
                    "requirements": [{"phase": q.phase, "name": q.name, "status": q.status,
                                      "message": q.message,
                                      "code": codes_by_req.get(q.name, "")}
                                     for q in res.requirements]})
    return out
