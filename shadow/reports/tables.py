"""Report tables: ``report.json`` (+ evidence, + an older report) -> pandas frames -> the
plain records the jinja2 templates iterate over.

Every table is sorted explicitly (never by dict or hash order), counts are integers and
rates are pre-formatted strings, so the rendered bytes are a function of the inputs.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from shadow import codes
from shadow.reports.diff import diff_reports

SEVERITIES = codes.SEVERITIES
FAILING = ("blocking", "major")  # JUnit: a case fails on these (unwaived)
_CODE_ORDER = {c.code: i for i, c in enumerate(codes.codes())}


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def fixture_anchor(fixture: str) -> str:
    return f"fx-{slug(fixture)}"


def case_anchor(fixture: str, surface: str) -> str:
    return f"c-{slug(fixture)}--{slug(surface)}"


def code_anchor(code: str) -> str:
    return f"code-{slug(code)}"


def _detail(d: Mapping[str, Any]) -> str:
    return json.dumps(d.get("detail", {}), sort_keys=True, ensure_ascii=False,
                      separators=(", ", ": "))


def divergence_frame(divs: list[Mapping[str, Any]], prefix: str = "d") -> pd.DataFrame:
    cols = ["id", "fixture", "surface", "reason_code", "severity", "attribution", "items",
            "item_ids", "detail", "fixture_anchor", "case_anchor", "code_anchor", "rank"]
    rows = [{"id": str(d.get("id") or f"{prefix}-{i}"), "fixture": d["fixture"],
             "surface": d["surface"],
             "reason_code": d["reason_code"], "severity": d["severity"],
             "attribution": d.get("attribution", "none"),
             "items": len(d.get("item_ids", [])), "item_ids": list(d.get("item_ids", [])),
             "detail": _detail(d), "fixture_anchor": fixture_anchor(d["fixture"]),
             "case_anchor": case_anchor(d["fixture"], d["surface"]),
             "code_anchor": code_anchor(d["reason_code"]),
             "rank": codes.severity_rank(d["severity"])}
            for i, d in enumerate(divs, 1)]
    return pd.DataFrame(rows, columns=cols)


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    out = df.to_dict("records")
    return [{str(k): (int(v) if hasattr(v, "item") and not isinstance(v, str) else v)
             for k, v in r.items()} for r in out]


def cases_frame(report: Mapping[str, Any], df: pd.DataFrame) -> pd.DataFrame:
    cases = pd.DataFrame(report.get("cases", []), columns=["fixture", "surface"])
    extra = df[["fixture", "surface"]].drop_duplicates()
    cases = pd.concat([cases, extra]).drop_duplicates().reset_index(drop=True)
    counts = (df.groupby(["fixture", "surface", "severity"]).size().unstack(fill_value=0)
              .reindex(columns=list(SEVERITIES), fill_value=0).reset_index())
    cases = cases.merge(counts, on=["fixture", "surface"], how="left")
    for s in SEVERITIES:
        cases[s] = cases[s].fillna(0).astype(int)
    # the one failure rule (shadow.gates.rule), as the run judged it at its phase; a report
    # written before the rule carried outcomes falls back to codes.fails at "major"
    judged = {(c["fixture"], c["surface"]): c for c in report.get("cases", [])
              if "outcome" in c}
    failing = ({(d["fixture"], d["surface"]) for d in _records(df)
                if codes.fails(d)} if not df.empty else set())
    noted = {(f, s) for f, s in zip(df["fixture"], df["surface"], strict=True)} \
        if not df.empty else set()
    keys = list(zip(cases["fixture"], cases["surface"], strict=True))
    cases["status"] = [str(judged[k]["outcome"]) if k in judged
                       else "fail" if k in failing else "note" if k in noted else "pass"
                       for k in keys]
    cases["failing_ids"] = [list(judged[k].get("failing", [])) if k in judged else []
                            for k in keys]
    cases["anchor"] = [case_anchor(f, s) for f, s in zip(cases["fixture"], cases["surface"],
                                                         strict=True)]
    return cases.sort_values(["fixture", "surface"]).reset_index(drop=True)


def surface_summary(cases: pd.DataFrame, df: pd.DataFrame) -> list[dict[str, Any]]:
    if cases.empty:
        return []
    g = cases.groupby("surface")
    summ = pd.DataFrame({"cases": g.size(),
                         "failing": g["status"].apply(lambda s: int((s == "fail").sum()))})
    summ = summ.join(g[list(SEVERITIES)].sum()).reset_index()
    top = (df.groupby(["surface", "reason_code"]).size().rename("n").reset_index()
           if not df.empty else pd.DataFrame(columns=["surface", "reason_code", "n"]))
    tops = {}
    for surface, part in top.groupby("surface"):
        part = part.assign(order=part["reason_code"].map(_CODE_ORDER))
        part = part.sort_values(["n", "order"], ascending=[False, True]).head(3)
        tops[surface] = ", ".join(f"{c} ×{n}" for c, n in zip(part["reason_code"], part["n"],
                                                                 strict=True))
    summ["top_codes"] = summ["surface"].map(tops).fillna("")
    # the attribution split: candidate (with both), baseline, intended, none
    for col, whom in (("by_candidate", ("candidate", "both")), ("by_baseline", ("baseline",)),
                      ("by_intended", ("intended",)), ("by_none", ("none",))):
        counts = (df[df["attribution"].isin(whom)].groupby("surface").size()
                  if not df.empty else pd.Series(dtype=int))
        summ[col] = summ["surface"].map(counts).fillna(0).astype(int)
    return _records(summ.sort_values("surface"))


def matrix(df: pd.DataFrame) -> dict[str, Any]:
    """The surface × reason-code table (counts of unwaived divergences)."""
    if df.empty:
        return {"surfaces": [], "codes": [], "rows": [], "totals": []}
    tab = pd.crosstab(df["surface"], df["reason_code"])
    code_cols = sorted(tab.columns, key=lambda c: _CODE_ORDER.get(c, 10**6))
    tab = tab.reindex(columns=code_cols).sort_index()
    rows = [{"surface": s, "anchor": f"s-{slug(s)}",
             "counts": [int(x) for x in tab.loc[s].tolist()], "total": int(tab.loc[s].sum())}
            for s in tab.index]
    return {"surfaces": list(tab.index), "codes": [
        {"code": c, "severity": codes.get(c).severity, "anchor": code_anchor(c)}
        for c in code_cols], "rows": rows,
        "totals": [int(x) for x in tab.sum(axis=0).tolist()]}


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
