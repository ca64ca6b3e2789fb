"""Memory invariants and memory comparison (design 108 §6.3, §9, §10, §12.3).

Single projection (``check_memory``):

* ``memory.scope_expanded``  a record's scope is wider than the selector that created it,
                             a consolidation wrote wider than the traced session, or an
                             update moved a record to another scope;
* ``deletion.backfill``      a record deleted by an operation is returned, updated or
                             active afterwards;
* ``deletion.overbroad``     a deletion removed a record outside its (scope, scopeId);
* ``deletion.receipt_mismatch`` the returned receipt disagrees with the records removed;
* ``memory.recall_mismatch`` a read returned records outside the admitted scope (or read
                             without any admission).

Pairwise (``compare_memory``): per operation status, created / deleted / returned sets
and final record scope / state / sensitivity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shadow.canonical import SCOPE_WIDTH
from shadow.divergence import Violation
from shadow.projection import MemOp, Projection

_SENS = ("public", "internal", "personal", "secret", "restricted")


def _width(scope: Any) -> int:
    return SCOPE_WIDTH.get(str(scope), 99)


def _selector(op: MemOp) -> Mapping[str, Any] | None:
    sel = op.detail.get("selector") if isinstance(op.detail, Mapping) else None
    return sel if isinstance(sel, Mapping) else None


def check_memory(p: Projection) -> list[Violation]:
    mem = p.memory
    if mem is None:
        return []
    recs = {r.id: r for r in mem.records}
    out: list[Violation] = []
    widened, backfill, overbroad, receipts, unadmitted = [], [], [], [], []
    deleted_at: dict[str, int] = {}
    for op in mem.ops:
        sel = _selector(op)
        for rid in op.created:
            r = recs.get(rid)
            if r is None:
                continue
            if sel and sel.get("scope") and _width(r.scope) > _width(sel.get("scope")):
                widened.append(rid)
            src = op.detail.get("source_scope")
            if src and _width(r.scope) > _width(src):
                widened.append(rid)
        if op.status == "ok":
            for rid in (*op.updated, *(op.returned or ())):
                if rid in deleted_at:
                    backfill.append(rid)
        for rid in op.deleted:
            deleted_at.setdefault(rid, op.index)
            r = recs.get(rid)
            if r is not None and sel and op.op in ("clearScope", "clear_scope") and (
                    r.scope != sel.get("scope") or (
                        sel.get("scope_id") is not None and r.scope_id != sel.get("scope_id"))):
                overbroad.append(rid)
        receipt = op.detail.get("receipt")
        if isinstance(receipt, bool):
            if receipt != bool(op.deleted):
                receipts.append(str(op.index))
        elif isinstance(receipt, int) and receipt != len(op.deleted):
            receipts.append(str(op.index))
        if op.returned is not None and op.op in ("recall", "list") and op.status == "ok":
            scope = sel.get("scope") if sel else None
            sid = sel.get("scope_id") if sel else None
            for rid in op.returned:
                r = recs.get(rid)
                if r is None or scope is None or r.scope != scope or (
                        scope != "global" and r.scope_id != sid):
                    unadmitted.append(rid)
    for rid, r in recs.items():
        if rid in deleted_at and r.state not in ("deleted", "purged"):
            backfill.append(rid)
    history = p.facts.get("scope_history") if isinstance(p.facts, Mapping) else None
    if isinstance(history, Mapping):
        for rid, scopes in history.items():
            if len({str(s) for s in scopes}) > 1:
                widened.append(str(rid))
    if widened:
        out.append(Violation("memory.scope_expanded", tuple(sorted(set(widened))),
                             {"count": len(set(widened))}))
    if backfill:
        out.append(Violation("deletion.backfill", tuple(sorted(set(backfill))),
                             {"count": len(set(backfill))}))
    if overbroad:
        out.append(Violation("deletion.overbroad", tuple(sorted(set(overbroad))),
                             {"count": len(set(overbroad))}))
    if receipts:
        out.append(Violation("deletion.receipt_mismatch", (), {"ops": sorted(receipts)}))
    if unadmitted:
        out.append(Violation("memory.recall_mismatch", tuple(sorted(set(unadmitted))),
                             {"unadmitted_reads": len(unadmitted)}))
    return out


def compare_memory(a: Projection, b: Projection) -> list[tuple[str, tuple[str, ...],
                                                                dict[str, Any], str | None]]:
    """Differences between two memory projections: (code, item ids, detail, severity)."""
    ma, mb = a.memory, b.memory
    if ma is None or mb is None:
        return []
    out: list[tuple[str, tuple[str, ...], dict[str, Any], str | None]] = []
    ops_b = {o.index: o for o in mb.ops}
    status_diff, created_diff, deleted_diff, recall_diff, order_diff = [], [], [], [], []
    ids_s: set[str] = set()
    ids_d: set[str] = set()
    ids_r: set[str] = set()
    for oa in ma.ops:
        ob = ops_b.get(oa.index)
        if ob is None:
            continue
        if oa.status != ob.status:
            status_diff.append({"index": oa.index, "op": oa.op, "candidate": oa.status,
                                "baseline": ob.status})
        if set(oa.created) != set(ob.created) or set(oa.updated) != set(ob.updated):
            created_diff.append(oa.index)
            ids_s |= set(oa.created) ^ set(ob.created)
        if set(oa.deleted) != set(ob.deleted):
            deleted_diff.append(oa.index)
            ids_d |= set(oa.deleted) ^ set(ob.deleted)
        if oa.returned is not None and ob.returned is not None:
            if set(oa.returned) != set(ob.returned):
                recall_diff.append(oa.index)
                ids_r |= set(oa.returned) ^ set(ob.returned)
            elif list(oa.returned) != list(ob.returned):
                order_diff.append(oa.index)
    if status_diff or created_diff:
        out.append(("memory.state_mismatch", tuple(sorted(ids_s)),
                    {"status": status_diff, "effect_ops": created_diff}, None))
    if deleted_diff:
        out.append(("deletion.receipt_mismatch", tuple(sorted(ids_d)),
                    {"ops": deleted_diff}, None))
    if recall_diff:
        out.append(("memory.recall_mismatch", tuple(sorted(ids_r)), {"ops": recall_diff}, None))
    if order_diff:
        out.append(("memory.recall_mismatch", (), {"order_only_ops": order_diff}, "minor"))
    ra = {r.id: r for r in ma.records}
    rb = {r.id: r for r in mb.records}
    wider, narrower, state, lowered = [], [], [], []
    for rid in sorted(set(ra) & set(rb)):
        x, y = ra[rid], rb[rid]
        if _width(x.scope) > _width(y.scope):
            wider.append(rid)
        elif _width(x.scope) < _width(y.scope):
            narrower.append(rid)
        if x.state != y.state:
            state.append(rid)
        if x.sensitivity in _SENS and y.sensitivity in _SENS and \
                _SENS.index(x.sensitivity) < _SENS.index(y.sensitivity):
            lowered.append(rid)
    only = sorted(set(ra) ^ set(rb))
    if wider:
        out.append(("memory.scope_expanded", tuple(wider), {"wider_side": "a"}, None))
    if narrower:
        out.append(("memory.scope_expanded", tuple(narrower), {"wider_side": "b"}, None))
    if state or only:
        out.append(("memory.state_mismatch", tuple(state + only),
                    {"state_differs": len(state), "one_side_only": len(only)}, None))
    if lowered:
        out.append(("memory.sensitivity_lowered", tuple(lowered), {"count": len(lowered)}, None))
    return out
