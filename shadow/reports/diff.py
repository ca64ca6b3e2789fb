"""``shadow diff OLD NEW``: new, fixed and changed divergences between two reports.

Divergences are matched within the same (fixture, surface, reason code): equal entries
are unchanged; the rest are paired in a stable order as *changed* (severity,
attribution, items or detail differ), and what is left over is *new* (only in NEW) or
*fixed* (only in OLD).  The result is a function of the two reports' contents only.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shadow import codes

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
                           "changed": len(self.changed), "unchanged": self.unchanged},
                "totals": {k: {"old": a, "new": b} for k, (a, b) in self.totals.items()},
                "new": [dict(d) for d in self.new], "fixed": [dict(d) for d in self.fixed],
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


def diff_reports(old: Mapping[str, Any], new: Mapping[str, Any]) -> ReportDiff:
    added, fixed, changed, same = diff_divergences(old.get("divergences", []),
                                                   new.get("divergences", []))
    ot, nt = old.get("totals", {}), new.get("totals", {})
    totals = {k: (int(ot.get(k, 0)), int(nt.get(k, 0))) for k in sorted(set(ot) | set(nt))}
    return ReportDiff(tuple(added), tuple(fixed), tuple(changed), same,
                      (str(old.get("verdict", "?")), str(new.get("verdict", "?"))), totals)


def render_text(d: ReportDiff, limit: int = 200) -> str:
    """Plain text for the terminal: counts first, then each list (capped)."""
    lines = [f"verdict: {d.verdict[0]} -> {d.verdict[1]}",
             f"new: {len(d.new)}, fixed: {len(d.fixed)}, changed: {len(d.changed)}, "
             f"unchanged: {d.unchanged}"]
    for k, (a, b) in d.totals.items():
        if a != b:
            lines.append(f"totals.{k}: {a} -> {b} ({b - a:+d})")

    def row(x: Mapping[str, Any]) -> str:
        return (f"{x['severity']:8s} {x['fixture']} / {x['surface']}: {x['reason_code']} "
                f"[{x['attribution']}, {len(x.get('item_ids', []))} items]")

    for title, items in (("new", d.new), ("fixed", d.fixed)):
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
