"""``shadow diff OLD NEW``: new, fixed and changed divergences between two reports.

Divergences are matched within the same (fixture, surface, reason code): equal entries
are unchanged; the rest are paired in a stable order as *changed* (severity,
attribution, items or detail differ), and what is left over is *new* (only in NEW) or
gone from NEW.  A gone divergence that a waiver applied in NEW selects (its
``waivers.applied`` reason-code, fixture and surface globs) and that may be waived at all
(:func:`shadow.waivers.waivable`) is *waived*, never *fixed*: a waiver hides a
divergence, it does not fix it.  The rest is *fixed*.  The result is a function of the
two reports' contents only; both are checked first (:func:`validate_report`), so a wrong
document is an ``InputError`` naming it and the pointer.
"""

from __future__ import annotations

import fnmatch
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shadow import codes
from shadow.reports.validate import validate_report

Key = tuple[str, str, str]


def _key(d: Mapping[str, Any]) -> Key:
    return (d["fixture"], d["surface"], d["reason_code"])


def _canon(d: Mapping[str, Any]) -> str:
    return json.dumps(d, sort_keys=True, ensure_ascii=False)


def _order(d: Mapping[str, Any]) -> tuple[Any, ...]:
    return (*_key(d), codes.severity_rank(d["severity"]) if d["severity"] in codes.SEVERITIES
            else 9, _canon(d))


@dataclass(frozen=True, slots=True)
class Change:
    old: Mapping[str, Any]
    new: Mapping[str, Any]

    @property
    def what(self) -> list[str]:
        out = [k for k in ("severity", "attribution") if self.old.get(k) != self.new.get(k)]
        if self.old.get("item_ids") != self.new.get("item_ids"):
            out.append("items")
        if self.old.get("detail") != self.new.get("detail"):
            out.append("detail")
        return out

    def to_wire(self) -> dict[str, Any]:
        return {"fixture": self.new["fixture"], "surface": self.new["surface"],
                "reason_code": self.new["reason_code"], "changed": self.what,
                "old": dict(self.old), "new": dict(self.new)}


@dataclass(frozen=True, slots=True)
class ReportDiff:
    new: tuple[Mapping[str, Any], ...]
    fixed: tuple[Mapping[str, Any], ...]
    changed: tuple[Change, ...]
    unchanged: int
    verdict: tuple[str, str]
    totals: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    waived: tuple[Mapping[str, Any], ...] = ()  # gone from NEW because a waiver covers it

    @property
    def regressions(self) -> list[Mapping[str, Any]]:
        """New blocking divergences, and changes that made one blocking."""
        out = [d for d in self.new if d["severity"] == "blocking"]
        out += [c.new for c in self.changed
                if c.new["severity"] == "blocking" and c.old["severity"] != "blocking"]
        return out

    def to_wire(self) -> dict[str, Any]:
        return {"schema": "shadow-report-diff/v1",
                "verdict": {"old": self.verdict[0], "new": self.verdict[1]},
                "counts": {"new": len(self.new), "fixed": len(self.fixed),
                           "waived": len(self.waived), "changed": len(self.changed),
                           "unchanged": self.unchanged},
                "totals": {k: {"old": a, "new": b} for k, (a, b) in self.totals.items()},
                "new": [dict(d) for d in self.new], "fixed": [dict(d) for d in self.fixed],
                "waived": [dict(d) for d in self.waived],
                "changed": [c.to_wire() for c in self.changed]}


def diff_divergences(old: Sequence[Mapping[str, Any]],
                     new: Sequence[Mapping[str, Any]]) -> tuple[
        list[Mapping[str, Any]], list[Mapping[str, Any]], list[Change], int]:
    groups: dict[Key, tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]] = \
        defaultdict(lambda: ([], []))
    for d in old:
        groups[_key(d)][0].append(d)
    for d in new:
        groups[_key(d)][1].append(d)
    added: list[Mapping[str, Any]] = []
    fixed: list[Mapping[str, Any]] = []
    changed: list[Change] = []
    same = 0
    for key in sorted(groups):
        o, n = groups[key]
        o_left = sorted(o, key=_order)
        n_left = []
        for d in sorted(n, key=_order):
            c = _canon(d)
            hit = next((i for i, x in enumerate(o_left) if _canon(x) == c), None)
            if hit is None:
                n_left.append(d)
            else:
                o_left.pop(hit)
                same += 1
        pairs = min(len(o_left), len(n_left))
        changed += [Change(a, b) for a, b in zip(o_left[:pairs], n_left[:pairs], strict=True)]
        fixed += o_left[pairs:]
        added += n_left[pairs:]
    return added, fixed, changed, same


def _waivable(d: Mapping[str, Any]) -> bool:
    from shadow.waivers import NEVER_WAIVABLE_CODES

    if d["reason_code"] in NEVER_WAIVABLE_CODES:
        return False
    return not (d["reason_code"] == "secret.leaked"
                and d.get("attribution") in ("candidate", "both"))


def covering_waiver(d: Mapping[str, Any], applied: Sequence[Mapping[str, Any]]
                    ) -> Mapping[str, Any] | None:
    """The first applied waiver (``report.json`` ``waivers.applied``, which covered at least
    one divergence) whose globs select ``d``, when ``d`` may be waived at all."""
    if not _waivable(d):
        return None
    for w in applied:
        if w.get("divergences", 1) and all(
                fnmatch.fnmatchcase(str(d[k]), str(w[k]))
                for k in ("reason_code", "fixture", "surface")):
            return w
    return None


def split_waived(gone: Sequence[Mapping[str, Any]], new_report: Mapping[str, Any]
                 ) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(fixed, waived) of the divergences gone from ``new_report``."""
    applied = list((new_report.get("waivers") or {}).get("applied") or ())
    fixed: list[Mapping[str, Any]] = []
    waived: list[Mapping[str, Any]] = []
    for d in gone:
        w = covering_waiver(d, applied)
        (fixed if w is None else waived).append(d if w is None else {**d, "waiver": w["id"]})
    return fixed, waived


def diff_reports(old: Mapping[str, Any], new: Mapping[str, Any], *,
                 sources: tuple[str, str] = ("OLD", "NEW")) -> ReportDiff:
    """The diff of two reports; ``sources`` name them in errors (file paths, or the
    arguments)."""
    validate_report(old, sources[0], required=("divergences",))
    validate_report(new, sources[1], required=("divergences",))
    added, gone, changed, same = diff_divergences(old.get("divergences", []),
                                                  new.get("divergences", []))
    fixed, waived = split_waived(gone, new)
    ot, nt = old.get("totals", {}), new.get("totals", {})
    totals = {k: (int(ot.get(k, 0)), int(nt.get(k, 0))) for k in sorted(set(ot) | set(nt))}
    verdicts = (str(old.get("verdict", "?")), str(new.get("verdict", "?")))
    if old.get("phase") != new.get("phase"):  # the same results judged for another phase
        verdicts = (f"{verdicts[0]} (phase {old.get('phase', '?')})",
                    f"{verdicts[1]} (phase {new.get('phase', '?')})")
    return ReportDiff(tuple(added), tuple(fixed), tuple(changed), same, verdicts, totals,
                      tuple(waived))


def render_text(d: ReportDiff, limit: int = 200) -> str:
    """Plain text for the terminal: counts first, then each list (capped)."""
    lines = [f"verdict: {d.verdict[0]} -> {d.verdict[1]}",
             f"new: {len(d.new)}, fixed: {len(d.fixed)}, waived: {len(d.waived)}, "
             f"changed: {len(d.changed)}, unchanged: {d.unchanged}"]
    for k, (a, b) in d.totals.items():
        if a != b:
            lines.append(f"totals.{k}: {a} -> {b} ({b - a:+d})")

    def row(x: Mapping[str, Any]) -> str:
        ident = f"{x['id']} " if x.get("id") else ""
        return (f"{ident}{x['severity']:8s} {x['fixture']} / {x['surface']}: "
                f"{x['reason_code']} [{x['attribution']}, {len(x.get('item_ids', []))} items]")

    for title, items in (("new", d.new), ("fixed", d.fixed),
                         ("waived (gone from NEW because a waiver covers it)", d.waived)):
        if items:
            lines.append(f"-- {title} --")
            lines += [f"  {row(x)}" for x in items[:limit]]
            if len(items) > limit:
                lines.append(f"  … {len(items) - limit} more")
    if d.changed:
        lines.append("-- changed --")
        for c in d.changed[:limit]:
            lines.append(f"  {row(c.new)} (was {c.old['severity']}; "
                         f"changed: {', '.join(c.what)})")
        if len(d.changed) > limit:
            lines.append(f"  … {len(d.changed) - limit} more")
    return "\n".join(lines)
