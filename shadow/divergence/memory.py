"""Memory invariants and memory comparison (design 108 §6.3, §9, §10, §12.3).

Single projection (``check_memory``):

* ``memory.scope_expanded``  a record's scope is wider than the selector that created it
                             (or is the selector's scope for another principal), an
                             update's successor sits in another scope than its predecessor,
                             a consolidation wrote wider than the traced session, or an
                             update moved a record to another scope;
* ``deletion.backfill``      a record deleted by an operation is returned, updated or
                             active afterwards;
* ``deletion.overbroad``     a deletion removed a record outside its (scope, scopeId);
* ``deletion.receipt_mismatch`` the returned receipt disagrees with the records removed,
                             a removal reports success and removed nothing, or leaves the
                             present record it was asked to remove (``detail.target``);
* ``memory.recall_mismatch`` a read returned records outside the admitted scope (or read
                             without any admission), or a recall returned a record its own
                             relevance rule does not match (``MemOp.detail.irrelevant``);
* ``memory.sensitivity_lowered`` a record is stored below the sensitivity of its own
                             content (``MemRecord.content_sensitivity``) or of the evidence
                             its text came from (sketch overlap, ``provenance.sources_of``);
* ``trust.escalated``        a record's text came from external or untrusted evidence (a
                             tool result, an error, a fetched page) while the record is
                             recalled at the trust of ordinary memory (``user``);
* summariser outcomes of a consolidation (``MemOp.detail.summarizer``: what the recording
  says, whether the producer marked the result degraded, whether the request carried
  secret material): ``provider.cancel_swallowed`` (a cancelled summariser turned into a
  normal result), ``provider.degraded_masked`` (a failed or schema-invalid answer stored
  without a degraded mark), ``secret.leaked`` (secret material sent to the summariser).

Pairwise (``compare_memory``): per operation status, created / deleted / returned sets
and final record scope / state / sensitivity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shadow.boundary import mapping_at
from shadow.canonical import SCOPE_WIDTH, Canon, has_secret, record_id
from shadow.divergence import Violation
from shadow.divergence import provenance as prov
from shadow.projection import MemOp, Projection

_SENS = ("public", "internal", "personal", "secret", "restricted")
#: operations that remove one named record: ``ok`` means it was removed (``noop``: absent)
REMOVALS = frozenset({"remove", "forget", "delete"})


def _width(scope: Any) -> int:
    return SCOPE_WIDTH.get(str(scope), 99)


def _selector(op: MemOp) -> Mapping[str, Any] | None:
    sel = op.detail.get("selector") if isinstance(op.detail, Mapping) else None
    return sel if isinstance(sel, Mapping) else None


def evidence_text(payload: Mapping[str, Any]) -> str:
    """The text a traced event contributes (every string of its payload but its role)."""
    return "\n".join(prov.string_leaves(payload, frozenset({"role", "type"})))


def evidence_trust(event_type: str, payload: Mapping[str, Any]) -> str:
    """Traced messages are user/model words (``user`` trust); every other event — tool
    results, errors, costs — is ``external`` data (kernel.packets.trust, as the candidate uses)."""
    if event_type == "message" and payload.get("role") in ("user", "assistant"):
        return "user"
    if event_type == "message" and payload.get("role") == "system":
        return "host"
    return "external"


def evidence_sources(canon: Canon) -> list[prov.Source]:
    """A memory scenario's inputs: traced events and explicit writes (``add``)."""
    out: list[prov.Source] = []
    for cmd in canon.memory or ():
        args = cmd.args if isinstance(cmd.args, Mapping) else {}
        if cmd.op == "trace_record":
            payload = mapping_at(args, "payload")
            text = evidence_text(payload)
            trust = evidence_trust(str(args.get("type")), payload)
        elif cmd.op == "propose":
            text = str(args.get("content") or "")
            trust = "user"
        else:
            continue
        out.append(prov.Source(record_id(canon.name, cmd.index), trust,
                               "secret" if has_secret(text) else "internal", text))
    return out


def _record_provenance(p: Projection, index: prov.SourceIndex | None) -> list[Violation]:
    mem = p.memory
    if mem is None:
        return []
    esc: list[Violation] = []
    lowered, sources = [], set()
    srcs = index.by_id() if index is not None else {}
    for r in mem.records:
        if r.state in ("deleted", "purged"):
            continue
        declared = r.sensitivity if r.sensitivity in _SENS else "internal"
        need = r.content_sensitivity if r.content_sensitivity in _SENS else declared
        if r.shingles and index is not None:
            der = prov.derived_from(list(r.shingles), index)
            rendered = r.trust if r.trust in prov.TRUST_ORDER else "user"
            if der.least_trust is not None and prov.TRUST_ORDER.index(rendered) < \
                    prov.TRUST_ORDER.index(der.least_trust):
                esc.append(Violation("trust.escalated", (r.id,), {
                    "fields": ["content"], "sources": list(der.sources),
                    "source_trust": der.least_trust, "rendered": rendered}))
            for sid in prov.sources_of(list(r.shingles), index):
                s = srcs.get(sid)
                if s is not None and _SENS.index(s.sensitivity) > _SENS.index(need):
                    need = s.sensitivity
                    sources.add(sid)
        if _SENS.index(need) > _SENS.index(declared):
            lowered.append(r.id)
    out = esc
    if lowered:
        out.append(Violation("memory.sensitivity_lowered", tuple(sorted(lowered)), {
            "count": len(lowered), "sources": sorted(sources)}))
    return out


def _summarizer(mem_ops: Sequence[MemOp]) -> list[Violation]:
    out: list[Violation] = []
    for op in mem_ops:
        s = op.detail.get("summarizer") if isinstance(op.detail, Mapping) else None
        if not isinstance(s, Mapping):
            continue
        truth, degraded = s.get("truth"), s.get("degraded")
        detail = {"op": op.index, "truth": truth, "status": op.status}
        if truth == "cancelled" and op.status == "ok":
            out.append(Violation("provider.cancel_swallowed", op.created, detail))
        elif truth in ("error", "invalid") and op.status == "ok" and degraded is not True:
            out.append(Violation("provider.degraded_masked", op.created, detail))
        if s.get("sent_secret") is True:
            out.append(Violation("secret.leaked", (), {"op": op.index,
                                                       "sink": "summarizer request"}))
    return out


def check_memory(p: Projection, index: prov.SourceIndex | None = None) -> list[Violation]:
    mem = p.memory
    if mem is None:
        return []
    recs = {r.id: r for r in mem.records}
    out: list[Violation] = _record_provenance(p, index) + _summarizer(mem.ops)
    widened: list[Any] = []
    backfill: list[Any] = []
    overbroad: list[Any] = []
    receipts: list[Any] = []
    unadmitted: list[Any] = []
    unmatched: list[str] = []
    at: dict[str, set[int]] = {}  # violation kind -> the operations that broke it
    deleted_at: dict[str, int] = {}

    def hit(kind: str, bucket: list[str], rid: str, index: int) -> None:
        bucket.append(rid)
        at.setdefault(kind, set()).add(index)

    lineage = _lineage(mem.ops)
    live: set[str] = set()  # records (lineage roots) present before each operation
    for op in mem.ops:
        sel = _selector(op)
        for rid in op.created:
            r = recs.get(rid)
            if r is None:
                continue
            if sel and sel.get("scope") and _width(r.scope) > _width(sel.get("scope")):
                hit("widened", widened, rid, op.index)
            elif sel and sel.get("scope_id") is not None and r.scope == sel.get("scope") \
                    and r.scope != "global" and r.scope_id != sel.get("scope_id"):
                hit("widened", widened, rid, op.index)  # another principal's scope
            src = op.detail.get("source_scope")
            if src and _width(r.scope) > _width(src):
                hit("widened", widened, rid, op.index)
            prev = recs.get(str(op.detail.get("supersedes")))
            if prev is not None and (r.scope, r.scope_id) != (prev.scope, prev.scope_id):
                hit("widened", widened, rid, op.index)  # an update never moves a record
        # whatever the status says, a record an operation returns is visible
        for rid in (*(op.updated if op.status == "ok" else ()), *(op.returned or ())):
            if rid in deleted_at:
                hit("backfill", backfill, rid, op.index)
        for rid in op.deleted:
            deleted_at.setdefault(rid, op.index)
            r = recs.get(rid)
            if r is not None and sel and op.op in ("clearScope", "clear_scope") and (
                    r.scope != sel.get("scope") or (
                        sel.get("scope_id") is not None and r.scope_id != sel.get("scope_id"))):
                hit("overbroad", overbroad, rid, op.index)
        receipt = op.detail.get("receipt")
        target = op.detail.get("target")
        if op.op in REMOVALS and not op.deleted and lineage.get(str(target), target) in live:
            receipts.append(str(op.index))  # a present record it was asked to remove stays
        elif op.op in REMOVALS and op.status == "ok" and not op.deleted and \
                receipt is not False and receipt != 0:
            receipts.append(str(op.index))  # success claimed, nothing removed
        elif isinstance(receipt, bool):
            if receipt != bool(op.deleted):
                receipts.append(str(op.index))
        elif isinstance(receipt, int) and receipt != len(op.deleted):
            receipts.append(str(op.index))
        live |= {lineage.get(c, c) for c in op.created}
        live -= {lineage.get(c, c) for c in op.deleted}
        irrelevant = op.detail.get("irrelevant") if isinstance(op.detail, Mapping) else None
        if isinstance(irrelevant, list) and op.status == "ok":
            for rid in irrelevant:
                hit("unmatched", unmatched, str(rid), op.index)
        if op.returned is not None and op.op in ("recall", "list") and op.status == "ok":
            scope = sel.get("scope") if sel else None
            sid = sel.get("scope_id") if sel else None
            if scope is None or (scope != "global" and sid is None):
                at.setdefault("unadmitted", set()).add(op.index)  # a cross-scope scan ran
            for rid in op.returned:
                r = recs.get(rid)
                if r is None or scope is None or r.scope != scope or (
                        scope != "global" and r.scope_id != sid):
                    hit("unadmitted", unadmitted, rid, op.index)
    for rid, r in recs.items():
        if rid in deleted_at and r.state not in ("deleted", "purged"):
            backfill.append(rid)
    history = p.facts.get("scope_history") if isinstance(p.facts, Mapping) else None
    if isinstance(history, Mapping):
        for rid, scopes in history.items():
            if len({str(s) for s in scopes}) > 1:
                widened.append(str(rid))
    def ops(kind: str) -> list[int]:
        return sorted(at.get(kind, ()))

    if widened:
        out.append(Violation("memory.scope_expanded", tuple(sorted(set(widened))),
                             {"count": len(set(widened)), "ops": ops("widened")}))
    if backfill:
        out.append(Violation("deletion.backfill", tuple(sorted(set(backfill))),
                             {"count": len(set(backfill)), "ops": ops("backfill")}))
    if overbroad:
        out.append(Violation("deletion.overbroad", tuple(sorted(set(overbroad))),
                             {"count": len(set(overbroad)), "ops": ops("overbroad")}))
    if receipts:
        out.append(Violation("deletion.receipt_mismatch", (),
                             {"ops": sorted(int(x) for x in receipts)}))
    if unadmitted or at.get("unadmitted"):
        out.append(Violation("memory.recall_mismatch", tuple(sorted(set(unadmitted))),
                             {"unadmitted_reads": len(unadmitted), "ops": ops("unadmitted")}))
    if unmatched:
        out.append(Violation("memory.recall_mismatch", tuple(sorted(set(unmatched))),
                             {"irrelevant_to_query": len(set(unmatched)),
                              "ops": ops("unmatched")}))
    return out


def _lineage(ops: Sequence[MemOp]) -> dict[str, str]:
    """version id -> the id of the record it descends from (design 108 §9.3: an update is
    a successor that ``supersedes`` the current version, so both stand for one record)."""
    root: dict[str, str] = {}
    for op in ops:
        sup = op.detail.get("supersedes") if isinstance(op.detail, Mapping) else None
        if isinstance(sup, str):
            for c in op.created:
                root[c] = root.get(sup, sup)
    return root


def compare_memory(a: Projection, b: Projection) -> list[tuple[str, tuple[str, ...],
                                                                dict[str, Any], str | None]]:
    """Differences between two memory projections: (code, item ids, detail, severity).

    Records are compared by lineage (a successor version stands for the record it
    supersedes), so an update the kernel makes as a supersession is not a different
    record."""
    ma, mb = a.memory, b.memory
    if ma is None or mb is None:
        return []
    la, lb = _lineage(ma.ops), _lineage(mb.ops)

    def rootset(ids: Sequence[str], lin: Mapping[str, str]) -> set[str]:
        return {lin.get(i, i) for i in ids}

    out: list[tuple[str, tuple[str, ...], dict[str, Any], str | None]] = []
    ops_b = {o.index: o for o in mb.ops}
    effect_diff, deleted_diff, recall_diff, order_diff = [], [], [], []
    ids_s: set[str] = set()
    ids_d: set[str] = set()
    ids_r: set[str] = set()
    ops_a = {o.index for o in ma.ops}
    for ob in mb.ops:  # an operation one side did not carry out (or does not report)
        if ob.index not in ops_a:
            out.append(("memory.state_mismatch", tuple(sorted(rootset(ob.created, lb))), {
                "index": ob.index, "op": ob.op, "candidate": "missing",
                "baseline": ob.status}, None))
    for oa in ma.ops:
        other = ops_b.get(oa.index)
        if other is None:
            out.append(("memory.state_mismatch", tuple(sorted(rootset(oa.created, la))), {
                "index": oa.index, "op": oa.op, "candidate": oa.status,
                "baseline": "missing"}, None))
            continue
        if oa.status != other.status:
            asked = other.detail.get("selector") if isinstance(other.detail, Mapping) else None
            scope = asked.get("scope") if isinstance(asked, Mapping) else None
            out.append(("memory.state_mismatch", tuple(sorted(rootset(oa.created, la)
                                                              | rootset(other.created, lb))), {
                "index": oa.index, "op": oa.op, "candidate": oa.status, "baseline": other.status,
                "candidate_error": oa.error, "baseline_error": other.error,
                **({"scope": scope} if isinstance(scope, str) else {})}, None))
            continue
        ea = rootset((*oa.created, *oa.updated), la)
        eb = rootset((*other.created, *other.updated), lb)
        if ea != eb:
            effect_diff.append(oa.index)
            ids_s |= ea ^ eb
        if rootset(oa.deleted, la) != rootset(other.deleted, lb):
            deleted_diff.append(oa.index)
            ids_d |= rootset(oa.deleted, la) ^ rootset(other.deleted, lb)
        if oa.returned is not None and other.returned is not None:
            ra_, rb_ = [la.get(i, i) for i in oa.returned], [lb.get(i, i) for i in other.returned]
            if set(ra_) != set(rb_):
                recall_diff.append(oa.index)
                ids_r |= set(ra_) ^ set(rb_)
            elif ra_ != rb_:
                order_diff.append(oa.index)
    if effect_diff:
        out.append(("memory.state_mismatch", tuple(sorted(ids_s)), {"effect_ops": effect_diff},
                    None))
    if deleted_diff:
        out.append(("deletion.receipt_mismatch", tuple(sorted(ids_d)),
                    {"ops": deleted_diff}, None))
    if recall_diff:
        out.append(("memory.recall_mismatch", tuple(sorted(ids_r)), {"ops": recall_diff}, None))
    if order_diff:
        out.append(("memory.recall_mismatch", (), {"order_only_ops": order_diff}, "minor"))
    ra = _heads(ma.records, la)
    rb = _heads(mb.records, lb)
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
        # the scopes of records only one side holds (what an intended rule can name)
        scopes = sorted({str(r.scope) for rid in only for r in (ra.get(rid) or rb.get(rid),)
                         if r is not None})
        holders = {"a" if rid in ra else "b" for rid in only}
        holder = {frozenset("a"): "a", frozenset("b"): "b"}.get(frozenset(holders), "both")
        out.append(("memory.state_mismatch", tuple(state + only),
                    {"state_differs": len(state), "one_side_only": len(only),
                     **({"one_side_scopes": ",".join(scopes),
                         "one_side_holder": holder} if only else {})}, None))
    if lowered:
        out.append(("memory.sensitivity_lowered", tuple(lowered), {"count": len(lowered)}, None))
    return out


def _heads(records: Sequence[Any], lineage: Mapping[str, str]) -> dict[str, Any]:
    """Each lineage's live head (the last version), keyed by the lineage's root id."""
    out: dict[str, Any] = {}
    for r in records:
        out[lineage.get(r.id, r.id)] = r  # records are listed in creation order
    return out
