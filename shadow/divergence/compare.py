"""Pairwise comparison of two projections of the same (fixture, job).

Order of work:

1. **identity fast path** — equal ``output_digest`` (identities, content digests,
   drops, provider outcome, memory effects all equal): no divergence;
2. outcome — one side failed: ``outcome.error_mismatch`` (items are not compared);
3. identities — ``item.missing_in_candidate`` / ``item.missing_in_baseline`` grouped by
   the other side's drop reason, ``drop_reason.mismatch``, ``item.order`` (items outside
   the longest common subsequence), ``digest.mismatch`` (whitespace-only changes are
   ``noise.volatile_field``), ``tool_pair.mismatch`` (binding differs),
   ``task_state.mismatch`` (tool outcome differs);
4. derived items — kind / count / covered identities (``item.derived_mismatch``); same
   coverage but different structured content is ``summary.text_only``;
5. provider outcome and memory effects;
6. noise shared by both sides (token estimates, timings) — ``info`` only, with the
   structured detail from deepdiff.

Attribution: the side whose own invariant violations (``invariants.check``) involve the
items of a difference is to blame — ``candidate``, ``baseline``, ``both`` — else
``none`` (a policy difference no invariant decides).  Twin comparisons (two legacy
surfaces) are always ``baseline``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from shadow.divergence import Divergence, Violation, make
from shadow.divergence.memory import compare_memory
from shadow.projection import PItem, Projection


class _Blame:
    def __init__(self, va: Sequence[Violation], vb: Sequence[Violation], twin: bool) -> None:
        self.a = {i for v in va for i in v.item_ids}
        self.b = {i for v in vb for i in v.item_ids}
        self.codes_a = {v.code for v in va}
        self.codes_b = {v.code for v in vb}
        self.twin = twin

    def of(self, ids: Iterable[str], codes: Iterable[str] = ()) -> str:
        if self.twin:
            return "baseline"
        ids = set(ids)
        cs = set(codes)
        in_a = bool(ids & self.a) or bool(cs & self.codes_a)
        in_b = bool(ids & self.b) or bool(cs & self.codes_b)
        return "both" if in_a and in_b else "candidate" if in_a else "baseline" if in_b \
            else "none"


def _lcs_keep(a: Sequence[str], b: Sequence[str]) -> set[str]:
    """Ids of ``a`` on a longest common subsequence with ``b`` (both hold the same ids)."""
    n, m = len(a), len(b)
    if n * m > 4_000_000:  # pathological sizes: fall back to the common prefix order
        return {x for x, y in zip(a, b, strict=False) if x == y}
    dp = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        ai, row, nxt = a[i], dp[i], dp[i + 1]
        for j in range(m - 1, -1, -1):
            row[j] = nxt[j + 1] + 1 if ai == b[j] else max(nxt[j], row[j + 1])
    keep, i, j = set(), 0, 0
    while i < n and j < m:
        if a[i] == b[j]:
            keep.add(a[i])
            i += 1
            j += 1
        elif dp[i + 1][j] >= dp[i][j + 1]:
            i += 1
        else:
            j += 1
    return keep


def compare(a: Projection, b: Projection, va: Sequence[Violation], vb: Sequence[Violation],
            *, surface: str | None = None, twin: bool = False) -> list[Divergence]:
    """Divergences of ``a`` (candidate, or first twin) against ``b`` (baseline)."""
    fx, sf = b.fixture, surface or b.surface
    if a.output_digest == b.output_digest:
        return _noise(a, b, fx, sf, twin)
    blame = _Blame(va, vb, twin)
    out: list[Divergence] = []

    def add(code: str, ids: Iterable[str], detail: Mapping[str, Any], codes: Iterable[str] = (),
            severity: str | None = None) -> None:
        ids = tuple(ids)
        out.append(make(fx, sf, code, blame.of(ids, codes), ids, detail, severity=severity))

    if a.status != b.status:
        who = blame.of((), _OUTCOME_CODES)
        if who == "none" and not twin:  # nothing else explains it: the side that failed
            who = "candidate" if a.status != "ok" else "baseline"
        out.append(make(fx, sf, "outcome.error_mismatch", who, (), {
            "candidate": a.status, "baseline": b.status, "candidate_error": a.error,
            "baseline_error": b.error}))
    if a.status == "ok" and b.status == "ok":
        _items(a, b, add)
        _derived(a, b, add)
    _provider(a, b, add)
    for code, ids, detail, sev in compare_memory(a, b):
        if code == "memory.scope_expanded":
            wider = "candidate" if detail.get("wider_side") == "a" else "baseline"
            attribution = "baseline" if twin else wider
            out.append(make(fx, sf, code, attribution, ids, detail, severity=sev))
        else:
            add(code, ids, detail, codes=_MEMORY_CODES | {code}, severity=sev)
    return out + _noise(a, b, fx, sf, twin)


_OUTCOME_CODES = frozenset({"protected.dropped", "pending.lost", "provider.cancel_swallowed",
                            "provider.degraded_masked", "shadow.side_effect"})
_MEMORY_CODES = frozenset({"memory.recall_mismatch", "deletion.overbroad", "deletion.backfill",
                           "memory.scope_expanded"})


def _items(a: Projection, b: Projection, add: Any) -> None:
    ai = [it for it in a.items if it.origin == "input"]
    bi = [it for it in b.items if it.origin == "input"]
    amap, bmap = {it.id: it for it in ai}, {it.id: it for it in bi}
    adrop, bdrop = {d.id: d for d in a.dropped}, {d.id: d for d in b.dropped}
    offered = set(a.input_ids) & set(b.input_ids) if a.input_ids and b.input_ids else None

    def group(ids: list[str], drops: Mapping[str, Any]) -> dict[tuple[str, str], list[str]]:
        g: dict[tuple[str, str], list[str]] = {}
        for i in ids:
            d = drops.get(i)
            key = (d.reason, d.legacy_reason or "") if d else ("absent", "")
            g.setdefault(key, []).append(i)
        return g

    miss_a = [i for i in bmap if i not in amap and (offered is None or i in offered)]
    miss_b = [i for i in amap if i not in bmap and (offered is None or i in offered)]
    for (reason, _legacy), ids in sorted(group(miss_a, adrop).items()):
        add("item.missing_in_candidate", ids, {"count": len(ids), "candidate_reason": reason})
    for (reason, legacy), ids in sorted(group(miss_b, bdrop).items()):
        detail = {"count": len(ids), "baseline_reason": reason}
        if legacy:
            detail["legacy_reason"] = legacy
        add("item.missing_in_baseline", ids, detail)
    mism: dict[tuple[str, str, str], list[str]] = {}
    for i in sorted(set(adrop) & set(bdrop)):
        if adrop[i].reason != bdrop[i].reason:
            key = (adrop[i].reason, bdrop[i].reason, bdrop[i].legacy_reason or "")
            mism.setdefault(key, []).append(i)
    for (ra, rb, legacy), ids in sorted(mism.items()):
        add("drop_reason.mismatch", ids, {"count": len(ids), "candidate_reason": ra,
                                          "baseline_reason": rb, "legacy_reason": legacy},
            severity=None)
    common_a = [it.id for it in ai if it.id in bmap]
    common_b = [it.id for it in bi if it.id in amap]
    if common_a != common_b:
        keep = _lcs_keep(common_a, common_b)
        moved = [i for i in common_a if i not in keep]
        if moved:
            add("item.order", moved, {"moved": len(moved), "common": len(common_a)})
    digest, ws, binding, outcome = [], [], [], []
    alter_kinds: dict[str, int] = {}
    for i in common_a:
        x, y = amap[i], bmap[i]
        if x.digest != y.digest:
            if "whitespace" in (x.altered, y.altered):
                ws.append(i)
            else:
                digest.append(i)
                k = y.altered or x.altered or "content"
                alter_kinds[k] = alter_kinds.get(k, 0) + 1
        if (x.tool_call_id or None) != (y.tool_call_id or None) or \
                bool(x.detail.get("binding_lost")) != bool(y.detail.get("binding_lost")):
            binding.append(i)
        if x.tool_outcome != y.tool_outcome:
            outcome.append(i)
    if digest:
        add("digest.mismatch", digest, {"count": len(digest), "altered": alter_kinds})
    if ws:
        add("noise.volatile_field", ws, {"field": "whitespace", "count": len(ws)})
    if binding:
        add("tool_pair.mismatch", binding, {"binding_differs": len(binding)})
    if outcome:
        add("task_state.mismatch", outcome, {"tool_outcome_differs": len(outcome)})


def _derived(a: Projection, b: Projection, add: Any) -> None:
    da = [it for it in a.items if it.origin == "derived"]
    db = [it for it in b.items if it.origin == "derived"]
    kinds = sorted({it.kind for it in da} | {it.kind for it in db})
    for kind in kinds:
        xa = [it for it in da if it.kind == kind]
        xb = [it for it in db if it.kind == kind]
        if len(xa) != len(xb):
            add("item.derived_mismatch", [it.id for it in xa + xb],
                {"kind": kind, "candidate": len(xa), "baseline": len(xb)})
        for x, y in zip(xa, xb, strict=False):
            _pair(x, y, add)


def _pair(x: PItem, y: PItem, add: Any) -> None:
    if set(x.covers) != set(y.covers):
        add("item.derived_mismatch", [x.id], {
            "kind": x.kind, "covers_candidate": len(x.covers), "covers_baseline": len(y.covers),
            "covers_differ": len(set(x.covers) ^ set(y.covers))})
        return
    if x.digest == y.digest:
        return
    fx, fy = x.detail.get("fields"), y.detail.get("fields")
    if fx is not None and fx == fy:
        add("noise.volatile_field", [x.id], {"field": "summary-rendering"})
    else:
        add("summary.text_only", [x.id], _field_diff(x.detail, y.detail))


def _field_diff(dx: Mapping[str, Any], dy: Mapping[str, Any]) -> dict[str, Any]:
    fx = dx.get("fields") if isinstance(dx.get("fields"), Mapping) else {}
    fy = dy.get("fields") if isinstance(dy.get("fields"), Mapping) else {}
    return {"format_candidate": dx.get("format"), "format_baseline": dy.get("format"),
            "fields_differ": sorted(k for k in set(fx) | set(fy) if fx.get(k) != fy.get(k))}


def _provider(a: Projection, b: Projection, add: Any) -> None:
    pa, pb = a.provider, b.provider
    if pa is None or pb is None:
        return
    # a field one side does not report (None) is not compared
    same_deg = None in (pa.degraded, pb.degraded) or pa.degraded == pb.degraded
    same_use = None in (pa.usage, pb.usage) or pa.usage == pb.usage
    if pa.status == pb.status and pa.cancelled == pb.cancelled and same_deg and same_use:
        return
    statuses = {pa.status, pb.status}
    detail = {"candidate": pa.status, "baseline": pb.status}
    if pa.cancelled != pb.cancelled or ("aborted" in statuses and pa.status != pb.status):
        code = "provider.cancel_swallowed"
    elif ("reconciliation_required" in statuses and pa.status != pb.status) or (
            (pa.usage == "unknown") != (pb.usage == "unknown") and None not in (pa.usage,
                                                                                pb.usage)):
        code = "provider.usage_unknown_masked"
        detail.update(usage_candidate=pa.usage, usage_baseline=pb.usage)
    elif ("degraded" in statuses and pa.status != pb.status) or (
            None not in (pa.degraded, pb.degraded) and pa.degraded != pb.degraded):
        code = "provider.degraded_masked"
    elif pa.status != pb.status:
        add("item.derived_mismatch", (), {**detail, "kind": "summary-request"})
        return
    else:
        code = "unclassified"
        detail["fields"] = "provider outcome"
    add(code, (), detail, codes=(code,))


def _noise(a: Projection, b: Projection, fx: str, sf: str, twin: bool) -> list[Divergence]:
    """Info-level divergences for noise fields both sides report (one per field)."""
    from deepdiff import DeepDiff

    out = []
    for key in sorted(set(a.noise) & set(b.noise)):
        left, right = a.noise[key], b.noise[key]
        if left == right:
            continue
        diff = DeepDiff({key: left}, {key: right}, ignore_order=False, verbose_level=1)
        paths = sorted(str(p) for group in diff.values() for p in group)
        changed = diff.get("values_changed", {})
        separators_only = set(diff) == {"values_changed"} and all(
            isinstance(c.get("old_value"), str) and isinstance(c.get("new_value"), str)
            and c["old_value"].replace("\\", "/") == c["new_value"].replace("\\", "/")
            for c in changed.values())
        token_like = any(t in key.lower() for t in ("token", "allocated", "ratio", "saved"))
        code = "noise.path_format" if separators_only else \
            "noise.token_estimate" if token_like else "noise.volatile_field"
        out.append(make(fx, sf, code, "baseline" if twin else "none", (),
                        {"field": key, "paths": paths[:20], "changed": len(paths)}))
    return out


def _ids(items: Iterable[PItem]) -> list[str]:
    return [it.id for it in items]
