"""Pairwise comparison of two projections of the same (fixture, job).

Order of work:

1. **identity fast path** — equal ``output_digest`` (identities, content digests,
   drops, provider outcome, memory effects all equal): no divergence;
2. outcome — one side failed: ``outcome.error_mismatch`` (items are not compared);
3. identities — ``item.missing_in_candidate`` / ``item.missing_in_baseline`` grouped by
   the other side's drop reason and the verdict on that claim (``claim``: verified,
   falsified, unverifiable — ``shadow.divergence.claims``), ``drop_reason.mismatch``,
   ``item.order`` (items outside the longest common subsequence), ``digest.mismatch``
   (whitespace-only changes are ``noise.volatile_field``), ``tool_pair.mismatch``
   (binding differs), ``task_state.mismatch`` (tool outcome differs);
4. derived items — kind / count / covered identities (``item.derived_mismatch``); same
   coverage but different structured content is ``summary.text_only``;
5. provider outcome and memory effects;
6. noise shared by both sides (token estimates, timings) — ``info`` only, with the
   structured detail from deepdiff.

Attribution (``shadow.divergence.attribution``): the side whose own evidence — invariant
violations and falsified claims — explains a difference is to blame (``candidate``,
``baseline``, ``both``; ``twin`` for two legacy surfaces); otherwise ``none`` with the
reason stated, which the run's intended-difference rules may turn into ``intended``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from shadow.boundary import mapping_at
from shadow.divergence import Divergence, Violation, make
from shadow.divergence.attribution import Judge, op_indexes
from shadow.divergence.claims import UNVERIFIABLE, ClaimReport, longest_increasing
from shadow.divergence.memory import compare_memory
from shadow.projection import PItem, Projection
from shadow.projection_wire import code_word


class _Out:
    def __init__(self, fx: str, sf: str, judge: Judge) -> None:
        self.fx, self.sf, self.judge = fx, sf, judge
        self.items: list[Divergence] = []

    def add(self, code: str, ids: Iterable[str], detail: Mapping[str, Any], *,
            severity: str | None = None, reason: str = "", split: bool = True,
            evidence_ids: Sequence[str] | None = None,
            extra: tuple[Sequence[str], Sequence[str]] = ((), ())) -> None:
        ids = list(ids)
        probe = list(evidence_ids) if evidence_ids is not None else ids
        if split and evidence_ids is None and len(ids) > 1:
            for att, group in self.judge.split(code, ids, reason):
                d = dict(detail)
                if "count" in d:
                    d["count"] = len(group)
                self.items.append(make(self.fx, self.sf, code, att.who, group,
                                       {**d, **att.detail()}, severity=severity))
            return
        att = self.judge.of(code, probe, reason, extra, op_indexes(detail))
        self.items.append(make(self.fx, self.sf, code, att.who, ids,
                               {**dict(detail), **att.detail()}, severity=severity))


def _lcs_keep(a: Sequence[str], b: Sequence[str]) -> set[str]:
    """Ids of ``a`` on a longest common subsequence with ``b``.  Both hold the same ids
    once each, so that is a longest increasing run of their positions in ``b``."""
    where = {x: n for n, x in enumerate(b)}
    return {a[i] for i in longest_increasing([where[x] for x in a])}


def compare(a: Projection, b: Projection, va: Sequence[Violation], vb: Sequence[Violation],
            *, surface: str | None = None, twin: bool = False,
            claims_a: ClaimReport | None = None,
            claims_b: ClaimReport | None = None) -> list[Divergence]:
    """Divergences of ``a`` (candidate, or first twin) against ``b`` (baseline)."""
    fx, sf = b.fixture, surface or b.surface
    if a.output_digest == b.output_digest:
        return _noise(a, b, fx, sf, twin)
    out = _Out(fx, sf, Judge(va, vb, twin=twin))
    ca, cb = claims_a or ClaimReport(), claims_b or ClaimReport()
    if a.status != b.status:
        failed = "candidate" if a.status != "ok" else "baseline"
        detail: dict[str, Any] = {"candidate": a.status, "baseline": b.status,
                                  "candidate_error": error_code(a.error),
                                  "baseline_error": error_code(b.error)}
        for side, p in (("candidate", a), ("baseline", b)):
            err = p.facts.get("error_detail") if isinstance(p.facts, Mapping) else None
            if isinstance(err, Mapping):
                detail[f"{side}_error_detail"] = safe_error_detail(
                    err, set(b.input_ids) | set(a.input_ids))
        if ca.refusal is not None:
            detail["candidate_refusal"] = ca.refusal
        crash = [f"crashed ({p.error})" if _crashed(p.error) else "" for p in (a, b)]
        named = (detail.get("candidate_error_detail") or {}).get("protectedItemIds")
        who = ({"candidate": "first", "baseline": "second"}[failed] if twin else failed)
        out.add("outcome.error_mismatch", (), detail,
                reason=f"the {who} side failed where the other returned a result; nothing "
                       "decides which is right",
                evidence_ids=[str(i) for i in named] if isinstance(named, list) else [],
                extra=([c for c in crash[:1] if c], [c for c in crash[1:] if c]))
    if a.status == "ok" and b.status == "ok":
        _items(a, b, out, ca, cb)
        _derived(a, b, out)
    _provider(a, b, out)
    for code, ids, detail, sev in compare_memory(a, b):
        if code == "memory.scope_expanded" and not twin:
            wider = "candidate" if detail.get("wider_side") == "a" else "baseline"
            out.items.append(make(fx, sf, code, wider, ids,
                                  {**detail, "attribution_basis": [f"{wider}:wider scope"]},
                                  severity=sev))
        else:
            out.add(code, ids, detail, severity=sev, split=False)
    return out.items + _noise(a, b, fx, sf, twin)


#: error categories of a program that crashed (a runtime fault on an input the other side
#: accepted) rather than refused (a kernel outcome code such as ``context_over_budget``)
CRASHES = frozenset({"TypeError", "ReferenceError", "RangeError", "SyntaxError",
                     "InternalError", "NullPointerException", "ClassCastException",
                     "IndexOutOfBoundsException", "IllegalStateException", "AttributeError",
                     "KeyError", "IndexError", "ValueError"})


def _crashed(error: str | None) -> bool:
    return error in CRASHES


_DETAIL_KEYS = ("protectedItemIds", "requiredTokens", "selectableBudget", "inputBudget",
                "usedTokens")


def error_code(error: str | None) -> str | None:
    """An error category as a report may show it: a code-shaped word, never free text."""
    if error is None:
        return None
    return code_word(error)


def safe_error_detail(err: Mapping[str, Any], known: set[str] | None = None
                      ) -> dict[str, Any]:
    """Only the ids and counts of a refusal (a recorded file may hold anything): named ids
    that are not offered input items are counted, never shown."""
    out: dict[str, Any] = {}
    for key in _DETAIL_KEYS:
        v = err.get(key)
        if key == "protectedItemIds" and isinstance(v, list):
            named = sorted({x for x in v if isinstance(x, str)})
            shown = [x for x in named if known is None or x in known]
            out[key] = shown[:50]
            if len(shown) < len(named):
                out["unknownItemIds"] = len(named) - len(shown)
        elif isinstance(v, int) and not isinstance(v, bool):
            out[key] = v
    return out


def _status(rep: ClaimReport, item_id: str) -> str:
    return rep.status(item_id) or UNVERIFIABLE


def _items(a: Projection, b: Projection, out: _Out, ca: ClaimReport, cb: ClaimReport) -> None:
    ai = [it for it in a.items if it.origin == "input"]
    bi = [it for it in b.items if it.origin == "input"]
    amap, bmap = {it.id: it for it in ai}, {it.id: it for it in bi}
    adrop, bdrop = {d.id: d for d in a.dropped}, {d.id: d for d in b.dropped}
    offered = set(a.input_ids) & set(b.input_ids) if a.input_ids and b.input_ids else None

    def group(ids: list[str], drops: Mapping[str, Any], rep: ClaimReport
              ) -> dict[tuple[str, str, str], list[str]]:
        g: dict[tuple[str, str, str], list[str]] = {}
        for i in ids:
            d = drops.get(i)
            key = (d.reason, d.legacy_reason or "", _status(rep, i)) if d else \
                ("absent", "", UNVERIFIABLE)
            g.setdefault(key, []).append(i)
        return g

    miss_a = [i for i in bmap if i not in amap and (offered is None or i in offered)]
    miss_b = [i for i in amap if i not in bmap and (offered is None or i in offered)]
    for (reason, _legacy, claim), ids in sorted(group(miss_a, adrop, ca).items()):
        out.add("item.missing_in_candidate", ids,
                {"count": len(ids), "candidate_reason": reason, "claim": claim},
                reason=_why(claim, "candidate"))
    for (reason, legacy, claim), ids in sorted(group(miss_b, bdrop, cb).items()):
        detail = {"count": len(ids), "baseline_reason": reason, "claim": claim}
        if legacy:
            detail["legacy_reason"] = legacy
        out.add("item.missing_in_baseline", ids, detail, reason=_why(claim, "baseline"))
    mism: dict[tuple[str, str, str, str, str], list[str]] = {}
    for i in sorted(set(adrop) & set(bdrop)):
        if adrop[i].reason != bdrop[i].reason:
            key = (adrop[i].reason, bdrop[i].reason, bdrop[i].legacy_reason or "",
                   _status(ca, i), _status(cb, i))
            mism.setdefault(key, []).append(i)
    for (ra, rb, legacy, sa, sb), ids in sorted(mism.items()):
        out.add("drop_reason.mismatch", ids, {
            "count": len(ids), "candidate_reason": ra, "baseline_reason": rb,
            "legacy_reason": legacy, "candidate_claim": sa, "baseline_claim": sb},
            reason="both sides dropped it, for different reasons")
    common_a = [it.id for it in ai if it.id in bmap]
    common_b = [it.id for it in bi if it.id in amap]
    if common_a != common_b:
        keep = _lcs_keep(common_a, common_b)
        moved = [i for i in common_a if i not in keep]
        if moved:
            out.add("item.order", moved, {"moved": len(moved), "common": len(common_a)},
                    split=False)
    digest, ws, binding, outcome = [], [], [], []
    alter_kinds: dict[str, int] = {}
    for i in common_a:
        x, y = amap[i], bmap[i]
        if x.digest != y.digest:
            # a whitespace-only change is a label the baseline adapters verify; a candidate
            # saying so is just a candidate that changed an item (judged by its claims)
            if y.altered == "whitespace" or (x.altered == "whitespace"
                                             and a.producer != "candidate"):
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
        claims = sorted({_status(cb, i) for i in digest})
        out.add("digest.mismatch", digest, {"count": len(digest), "altered": alter_kinds,
                                            "baseline_claim": claims[0] if len(claims) == 1
                                            else "mixed"})
    if ws:
        out.add("noise.volatile_field", ws, {"field": "whitespace", "count": len(ws)},
                split=False, reason="noise")
    if binding:
        out.add("tool_pair.mismatch", binding, {"binding_differs": len(binding)})
    if outcome:
        out.add("task_state.mismatch", outcome, {"tool_outcome_differs": len(outcome)})


def _why(claim: str, side: str) -> str:
    if claim == UNVERIFIABLE:
        return f"the {side}'s drop claim cannot be verified on the input"
    return f"the {side}'s drop claim holds; the other side chose differently"


def _derived(a: Projection, b: Projection, out: _Out) -> None:
    da = [it for it in a.items if it.origin == "derived"]
    db = [it for it in b.items if it.origin == "derived"]
    kinds = sorted({it.kind for it in da} | {it.kind for it in db})
    for kind in kinds:
        xa = [it for it in da if it.kind == kind]
        xb = [it for it in db if it.kind == kind]
        if len(xa) != len(xb):
            ids = [it.id for it in xa + xb]
            out.add("item.derived_mismatch", ids,
                    {"kind": kind, "candidate": len(xa), "baseline": len(xb)},
                    evidence_ids=ids + [c for it in xa + xb for c in it.covers],
                    reason="one side replaced items with a derived item, the other did not")
        for x, y in zip(xa, xb, strict=False):
            _pair(x, y, out)


def _pair(x: PItem, y: PItem, out: _Out) -> None:
    if set(x.covers) != set(y.covers):
        diff = sorted(set(x.covers) ^ set(y.covers))
        out.add("item.derived_mismatch", [x.id], {
            "kind": x.kind, "covers_candidate": len(x.covers), "covers_baseline": len(y.covers),
            "covers_differ": len(diff)}, evidence_ids=[x.id, y.id, *diff],
            reason="the derived items replace different inputs")
        return
    if x.digest == y.digest:
        return
    fx, fy = x.detail.get("fields"), y.detail.get("fields")
    if fx is not None and fx == fy:
        out.add("noise.volatile_field", [x.id], {"field": "summary-rendering"}, reason="noise")
    else:
        out.add("summary.text_only", [x.id], _field_diff(x.detail, y.detail),
                evidence_ids=[x.id, y.id], reason="only the summary text differs")


def _field_diff(dx: Mapping[str, Any], dy: Mapping[str, Any]) -> dict[str, Any]:
    fx = mapping_at(dx, "fields")
    fy = mapping_at(dy, "fields")
    return {"format_candidate": dx.get("format"), "format_baseline": dy.get("format"),
            "fields_differ": sorted(k for k in set(fx) | set(fy) if fx.get(k) != fy.get(k))}


def _provider(a: Projection, b: Projection, out: _Out) -> None:
    pa, pb = a.provider, b.provider
    if pa is None or pb is None:
        return
    # a field one side does not report (None) is not compared
    same_deg = None in (pa.degraded, pb.degraded) or pa.degraded == pb.degraded
    same_use = None in (pa.usage, pb.usage) or pa.usage == pb.usage
    if pa.status == pb.status and pa.cancelled == pb.cancelled and same_deg and same_use:
        return
    statuses = {pa.status, pb.status}
    detail: dict[str, Any] = {"candidate": pa.status, "baseline": pb.status,
                              "truth": pb.truth or pa.truth,
                              "degraded_reason_candidate": pa.degraded_reason,
                              "degraded_reason_baseline": pb.degraded_reason}
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
        summaries = [it.id for p in (a, b) for it in p.items if it.kind == "summary"]
        out.add("item.derived_mismatch", (), {**detail, "kind": "summary-request"},
                evidence_ids=summaries,
                reason="one side asked for a summary, the other did not")
        return
    else:
        code = "unclassified"
        detail["fields"] = "provider outcome"
    out.add(code, (), detail, reason="the provider outcomes differ and neither contradicts "
                                     "the recording")


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
        detail: dict[str, Any] = {"field": key, "paths": paths[:20], "changed": len(paths)}
        if not twin:
            detail["attribution_reason"] = "noise"
        out.append(make(fx, sf, code, "twin" if twin else "none", (), detail))
    return out
