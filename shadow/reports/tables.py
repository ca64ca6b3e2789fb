"""Report tables: the small tables of ``report.json`` (+ evidence, + an older report) as
the plain records the jinja2 templates iterate over (the long lists and their counts are
:mod:`shadow.reports.views`).

Every table is sorted explicitly (never by dict or hash order), counts are integers and
rates are pre-formatted strings, so the rendered bytes are a function of the inputs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import pandas as pd

from shadow import codes
from shadow.reports.diff import diff_reports
from shadow.reports.views import case_anchor, fixture_anchor

SEVERITIES = codes.SEVERITIES
def attribution_table(report: Mapping[str, Any]) -> dict[str, Any]:
    """Who is wrong, per surface: divergences by attribution, the stated reasons of the
    unexplained ones, and the intended-difference rules (applied, unused, overdue)."""
    from shadow.codes import ATTRIBUTIONS

    per: dict[str, dict[str, int]] = {}
    for d in report.get("divergences", []):
        row = per.setdefault(str(d["surface"]), dict.fromkeys(ATTRIBUTIONS, 0))
        a = str(d.get("attribution", "none"))
        row[a] = row.get(a, 0) + 1
    counts = {sf: [row[a] for a in ATTRIBUTIONS] for sf, row in sorted(per.items())}
    rows = [{"surface": sf, "counts": c, "total": sum(c)} for sf, c in counts.items()]
    totals = [sum(c[i] for c in counts.values()) for i in range(len(ATTRIBUTIONS))]
    total = sum(totals)
    att = report.get("attribution", {}) or {}
    intended = report.get("intended", {}) or {}
    return {"columns": list(ATTRIBUTIONS), "rows": rows, "totals": totals, "total": total,
            "none_share": f"{100 * totals[ATTRIBUTIONS.index('none')] / total:.1f}%"
            if total else "0.0%",
            "none_reasons": sorted((att.get("none_reasons") or {}).items()),
            "applied": list(intended.get("applied", [])),
            "unused": list(intended.get("unused", [])),
            "overdue": list(intended.get("overdue", []))}


def waiver_tables(report: Mapping[str, Any], warn_days: int = 30) -> dict[str, Any]:
    w = report.get("waivers", {}) or {}
    try:
        today = dt.date.fromisoformat(str(report.get("generated_at", ""))[:10])
    except ValueError:
        today = None
    applied = []
    for a in w.get("applied", []):
        left = ((dt.date.fromisoformat(a["expires"]) - today).days
                if today is not None else None)
        applied.append({**a, "days_left": left,
                        "expiring": left is not None and left <= warn_days})
    return {"applied": applied, "expiring": [a for a in applied if a["expiring"]],
            "expired": list(w.get("expired", [])), "unused": list(w.get("unused", [])),
            "refused": list(w.get("refused", [])), "warn_days": warn_days}


def trend(previous: Mapping[str, Any] | None, report: Mapping[str, Any]) -> dict[str, Any] | None:
    if previous is None:
        return None
    d = diff_reports(previous, report)
    present = {(c["fixture"], c["surface"]) for c in report.get("cases", [])}
    present |= {(x["fixture"], x["surface"]) for x in report.get("divergences", [])}
    prev_sev = pd.Series([x["severity"] for x in previous.get("divergences", [])],
                         dtype=object).value_counts()
    cur_sev = pd.Series([x["severity"] for x in report.get("divergences", [])],
                        dtype=object).value_counts()
    sev_rows: list[dict[str, Any]] = [
        {"name": s, "old": int(prev_sev.get(s, 0)), "new": int(cur_sev.get(s, 0))}
        for s in SEVERITIES]
    tot_rows: list[dict[str, Any]] = [{"name": k, "old": a, "new": b}
                                      for k, (a, b) in d.totals.items()
                if k not in SEVERITIES]  # severities are the rows above
    for r in (*sev_rows, *tot_rows):
        r["delta"] = f"{r['new'] - r['old']:+d}" if r["new"] != r["old"] else "="

    def rec(x: Mapping[str, Any], extra: str = "") -> dict[str, Any]:
        return {"fixture": x["fixture"], "surface": x["surface"],
                "reason_code": x["reason_code"], "severity": x["severity"],
                "attribution": x.get("attribution", ""), "extra": extra,
                "case_anchor": case_anchor(x["fixture"], x["surface"]),
                "fixture_anchor": fixture_anchor(x["fixture"]),
                "linked": (x["fixture"], x["surface"]) in present}  # fixed: maybe gone

    return {"verdict_old": d.verdict[0], "verdict_new": d.verdict[1],
            "previous_generated_at": previous.get("generated_at", "?"),
            "severity": sev_rows, "totals": tot_rows,
            "new": [rec(x) for x in d.new], "fixed": [rec(x) for x in d.fixed],
            "waived": [rec(x, f"waived by {x.get('waiver', '?')}") for x in d.waived],
            "changed": [rec(c.new, f"was {c.old['severity']}; {', '.join(c.what)}")
                        for c in d.changed],
            "unchanged": d.unchanged}


def evidence_view(evidence: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not evidence:
        return None
    ident = evidence.get("identity", {})
    env = evidence.get("environment", {})
    checks = [{"name": k, "status": v.get("status", "?"),
               "detail": v.get("detail", "")} for k, v in sorted(
                   (evidence.get("checks") or {}).items())]
    return {"identity": sorted(ident.items()), "identity_digest":
            evidence.get("identity_digest", ""), "platform": env.get("platform", "?"),
            "python": env.get("python", "?"), "checks": checks}
