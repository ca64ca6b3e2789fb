"""A producer's own claims, checked against the input before they are believed.

Every item a projection dropped carries a reason — the legacy's (inferred from the
pipeline step that removed it) or the candidate's — and every item it altered carries the
transformation it claims.  ``verify(p, canon)`` checks each claim on the canonical input:

``duplicate`` (legacy ``dedup``)
    a *surviving* item (kept, or dropped later by another step) has the same role, kind,
    tool-call identity (the legacy call id and tool name of a call, the call id a result
    answers) and content digest.  Tool-call messages with empty or null content and
    different calls are therefore never duplicates.
``duplicate`` (legacy ``dedup-similar``, a similarity merge)
    as above, but the contents need only be equal after whitespace collapse and
    casefolding — the kernel's identity rules otherwise: texts that differ in numbers,
    paths or identifiers are different items.
``input_budget`` / ``partition_ceiling`` (``truncate``, ``snip``, ``budget-exhausted``,
``candidate-cap``, the kernel's budget and partition ceilings)
    the input was over the producer's stated limit at that point (``facts.limits``: a
    message count — the messages present when the cut was made — a token budget the
    item would not fit, the ceiling of the item's partition (``limits.partitions``: what
    was kept there plus the item exceeds it), or a candidate cap the item lies beyond),
    and, for a recency cut
    (``limits.order == "recency"``, legacy ``truncate``), no newer unprotected item was
    dropped while an older one was kept.  A ``snip`` is justified only while the input
    is over a stated limit.
``tool_pair_repair``
    the removed half was orphaned in the input, or its partner was dropped by a justified
    drop of the same producer; a partner that is still kept, or that the producer dropped
    without justification, falsifies the repair ("orphaned by its own drop").
``collapsed`` / ``summarized``
    a kept collapse marker / summary replaces it; a marker's declared count (``[Collapsed
    N tool messages…]``, ``detail.declared``) must equal the messages it covers.
``user_removed`` / ``invalid`` / ``not_persisted`` / ``sink_denied`` /
``untrusted_system_policy``
    the item is in the user's removed set / of an unknown kind / host policy a session
    store does not persist / secret or restricted / low-trust text offered as policy.
``unknown``
    the producer names the steps it ran (``facts.strategy``) and none of them can have
    removed the item: unjustified (``no_stated_step_drops_it``).

Alterations: a kept input item whose digest differs from the input carries the
adapter's verdict on the transformation it claims (``detail.claim``: ``verified`` or
``falsified`` with ``detail.why`` — e.g. a ``trimmed`` chip that is not a prefix of its
input, or a ``cleaned`` prompt that changed more than volatile fields).  Content changed
with no documented transformation (the matcher's ``rewritten``) is unjustified
(``no_claimed_transformation``), and a candidate claims no transformation at all: any
input item it altered is unjustified.  Order: kept input
items must follow their source order unless the producer documents another
(``facts.order``: ``priority`` for the IDE chip ranking; ``pinned_block`` for the CLI's
sticky pinned block).

A false claim is a :class:`~shadow.divergence.Violation` of the producer —
``drop_reason.unjustified``, ``alteration.unjustified``, ``system_policy.altered`` or
``item.reordered`` — whose detail names the claim, why it is false and the evidence
items.  Claims the input cannot decide (no stated limit, a reason of ``unknown``) are
``unverifiable``, never false.  Protected drops are judged by ``protected.dropped``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kernel.planning.partitions import KIND_PARTITION
from shadow.canonical import Canon, CanonItem, headless_persisted
from shadow.divergence import Violation
from shadow.projection import Drop, Projection

_WS: Final = re.compile(r"\s+")
VERIFIED: Final = "verified"
FALSIFIED: Final = "falsified"
UNVERIFIABLE: Final = "unverifiable"
BUDGET: Final = frozenset({"input_budget", "partition_ceiling"})
RECENCY_STEPS: Final = frozenset({"truncate", "truncation"})
TOKEN_STEPS: Final = frozenset({"budget-exhausted", "excluded-budget"})


@dataclass(frozen=True, slots=True)
class Verdict:
    item_id: str
    claim: str  # canonical reason or alteration category
    legacy: str | None
    status: str  # verified | falsified | unverifiable
    why: str = ""
    evidence: tuple[str, ...] = ()


@dataclass(slots=True)
class ClaimReport:
    """Verdicts per dropped/altered item and the violations of the false ones."""

    verdicts: dict[str, Verdict] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    refusal: str | None = None  # verdict on a context_over_budget refusal

    def status(self, item_id: str) -> str | None:
        v = self.verdicts.get(item_id)
        return v.status if v else None


def _dup_key(ci: CanonItem) -> tuple[Any, ...]:
    if ci.tool_role == "call":
        return (ci.role, ci.kind, "call", ci.legacy_tool_id, ci.tool_name)
    if ci.tool_role == "result" or ci.role == "tool":
        return (ci.role, ci.kind, "result", ci.legacy_tool_id)
    return (ci.role, ci.kind)


def _similar(text: str) -> str:
    return _WS.sub(" ", text).strip().casefold()


class _Ctx:
    def __init__(self, p: Projection, canon: Canon, cis: Mapping[str, CanonItem]) -> None:
        self.p = p
        self.cis = cis
        self.offered = [i for i in (p.input_ids or tuple(cis)) if i in cis]
        self.kept = {it.id: it for it in p.items if it.origin == "input"}
        self.derived = [it for it in p.items if it.origin == "derived"]
        self.drops = {d.id: d for d in p.dropped}
        limits = p.facts.get("limits") if isinstance(p.facts, Mapping) else None
        self.limits: Mapping[str, Any] = limits if isinstance(limits, Mapping) else {}
        self.ide = canon.ide
        self.candidate = p.producer == "candidate"
        self._persisted: set[str] | None = None

    def persisted(self) -> set[str]:
        """The offered items a JSONL store keeps as messages without a compact event."""
        if self._persisted is None:
            self._persisted = headless_persisted([self.cis[i] for i in self.offered])
        return self._persisted

    def msg(self, item_id: str) -> Any:
        ci = self.cis.get(item_id)
        return ("m", ci.seq) if ci is not None else ("d", item_id)


def verify(p: Projection, canon: Canon, cis: Mapping[str, CanonItem]) -> ClaimReport:
    """Check every drop, alteration and order claim of ``p`` (see the module docstring)."""
    rep = ClaimReport()
    if p.status == "error" and p.error == "context_over_budget" and cis:
        rep.refusal, why, ids = _refusal(p, cis)
        if rep.refusal == FALSIFIED or (rep.refusal == UNVERIFIABLE
                                        and p.producer == "candidate"):
            # the candidate's refusal must name protected items that alone exceed its
            # (anchored) budget; a refusal it cannot justify left nothing to judge
            code = "candidate.unavailable" if p.producer == "candidate" else \
                "outcome.error_mismatch"
            rep.violations.append(Violation(code, ids, {
                "claim": "context_over_budget", "error": "context_over_budget",
                "problem": "refusal_not_justified", "why": why}))
    if p.status != "ok" or not cis:
        return rep
    ctx = _Ctx(p, canon, cis)
    repairs: list[Drop] = []
    for d in sorted(ctx.drops.values(), key=lambda d: d.id):
        if d.id not in cis:
            continue
        if d.reason == "tool_pair_repair":
            repairs.append(d)
            continue
        rep.verdicts[d.id] = _drop(ctx, d)
    for d in repairs:  # after every other drop: a repair is judged by its partner's drop
        rep.verdicts[d.id] = _repair(ctx, d, rep)
    _alterations(ctx, rep)
    _group(rep)
    _order(ctx, rep)
    return rep


def _refusal(p: Projection, cis: Mapping[str, CanonItem]
             ) -> tuple[str, str, tuple[str, ...]]:
    """``context_over_budget`` is justified when the protected items it names really
    exceed the stated budget on their own (token estimates of the input).  A candidate is
    held to its anchored limit (``facts.limits.tokens``), never to a budget it states; a
    baseline's adapter-derived detail may state the legacy's own budget.

    Returns (verdict, why, the named ids that are input items)."""
    detail = p.facts.get("error_detail") if isinstance(p.facts, Mapping) else None
    limits = p.facts.get("limits") if isinstance(p.facts, Mapping) else None
    raw = detail.get("protectedItemIds") if isinstance(detail, Mapping) else None
    ids = [i for i in raw if isinstance(i, str)] if isinstance(raw, list) else []
    named = sorted({i for i in ids if i in cis})
    budget = None
    if p.producer != "candidate" and isinstance(detail, Mapping):
        budget = _int(detail.get("selectableBudget"))
    if budget is None and isinstance(limits, Mapping):
        budget = _int(limits.get("tokens"))
    if not ids:
        return UNVERIFIABLE, "names_no_protected_item", ()
    if budget is None:
        return UNVERIFIABLE, "no_stated_budget", tuple(named)
    if len(named) != len(set(ids)) or not all(cis[i].shielded for i in named):
        return FALSIFIED, "names_unprotected_or_unknown_items", tuple(named)
    need = sum(max(1, cis[i].token_estimate) for i in named)
    if need > budget:
        return VERIFIED, "", tuple(named)
    return FALSIFIED, "protected_items_fit_the_budget", tuple(named)


#: surfaces that persist a session (they do not persist host policy: §7, rebuilt from
#: authoritative configuration on load)
SESSION_STORES: Final = ("cli.jsonl-session",)


def _v(d: Drop, status: str, why: str = "", evidence: Sequence[str] = ()) -> Verdict:
    return Verdict(d.id, d.reason, d.legacy_reason, status, why, tuple(sorted(evidence)))


def _drop(ctx: _Ctx, d: Drop) -> Verdict:
    ci = ctx.cis[d.id]
    reason = d.reason
    if reason == "duplicate":
        return _duplicate(ctx, d, ci)
    if reason in BUDGET:
        return _budget(ctx, d, ci)
    if reason in ("collapsed", "summarized"):
        kind = "collapse-marker" if reason == "collapsed" else "summary"
        marks = [it for it in ctx.derived if it.kind == kind]
        if not marks:
            return _v(d, FALSIFIED, f"no_{kind.replace('-', '_')}")
        covering = [m.id for m in marks if d.id in m.covers]
        if covering:
            return _v(d, VERIFIED, "", covering)
        # an earlier call's summary (dropped since, covered by this one) covered it
        chained = [m.id for m in marks if any(c.startswith("~") and c in ctx.drops
                                              for c in m.covers)]
        if chained:
            return _v(d, VERIFIED, "covered_through_earlier_summary", chained)
        if ctx.candidate or any(m.covers for m in marks):  # the markers say what they cover
            return _v(d, FALSIFIED, f"no_{kind.replace('-', '_')}_covers_it",
                      [m.id for m in marks])
        return _v(d, VERIFIED, "", [m.id for m in marks])
    if reason == "user_removed":
        if ctx.ide is None:  # a candidate states only what an input fact supports
            return _v(d, FALSIFIED if ctx.candidate else UNVERIFIABLE, "no_removal_in_input")
        return _v(d, VERIFIED if d.id in ctx.ide.removed else FALSIFIED, "not_removed_by_user")
    if reason == "invalid":
        if ctx.ide is None:
            return _v(d, FALSIFIED if ctx.candidate else UNVERIFIABLE, "no_rejection_in_input")
        return _v(d, VERIFIED if d.id in ctx.ide.rejected else FALSIFIED, "valid_kind")
    if reason == "not_persisted":  # only a session store rebuilds host policy itself
        if not ctx.p.surface.startswith(SESSION_STORES):
            return _v(d, FALSIFIED, "not_a_session_store")
        ok = ci.role == "system" and ci.trust in ("host", "verified")
        if not ok:  # never a message in the store's turn projection (tool calls, results…)
            ok = d.id not in ctx.persisted()
        return _v(d, VERIFIED if ok else FALSIFIED, "not_host_policy")
    if reason == "sink_denied":
        ok = ci.sensitivity in ("secret", "restricted")
        return _v(d, VERIFIED if ok else FALSIFIED, "sink_allowed")
    if reason == "untrusted_system_policy":
        ok = ci.kind == "system-policy" and ci.trust not in ("host", "verified")
        return _v(d, VERIFIED if ok else FALSIFIED, "trusted_policy")
    steps = ctx.p.facts.get("strategy") if isinstance(ctx.p.facts, Mapping) else None
    if reason == "unknown" and isinstance(steps, list) and steps:
        # the producer names the steps it ran, and none of them removes this item
        return _v(d, FALSIFIED, "no_stated_step_drops_it")
    if ctx.candidate:  # expired, scope_denied, unknown: no input fact the harness reads
        return _v(d, FALSIFIED, "no_input_fact_supports_it")  # supports them
    return _v(d, UNVERIFIABLE)


def _duplicate(ctx: _Ctx, d: Drop, ci: CanonItem) -> Verdict:
    similar = "similar" in (d.legacy_reason or "")
    key = _dup_key(ci)
    mine = _similar(ci.content) if similar else ci.digest
    for oid in ctx.offered:
        if oid == d.id:
            continue
        od = ctx.drops.get(oid)
        if od is not None and od.reason == "duplicate":
            continue  # not a survivor of the dedup step
        o = ctx.cis[oid]
        if _dup_key(o) != key:
            continue
        if (_similar(o.content) if similar else o.digest) == mine:
            return _v(d, VERIFIED, "", [oid])
    return _v(d, FALSIFIED, "no_equal_survivor")


def _present_messages(ctx: _Ctx) -> int:
    """Messages present when the cut was made: kept, cut, and removed later by repair."""
    ids = [*ctx.kept, *(i for i, x in ctx.drops.items()
                        if x.reason in BUDGET or x.reason == "tool_pair_repair")]
    return len({ctx.msg(i) for i in ids} | {it.id for it in ctx.derived})


def _dropped_before(ctx: _Ctx) -> int:
    """Messages removed by steps that run before a cut (snip, dedup, collapse)."""
    return len({ctx.msg(i) for i, x in ctx.drops.items()
                if x.reason in ("duplicate", "collapsed") or x.legacy_reason == "snip"})


def _tokens(ctx: _Ctx, ids: Sequence[str]) -> int:
    return sum(max(1, ctx.cis[i].token_estimate) for i in ids if i in ctx.cis)


def _budget(ctx: _Ctx, d: Drop, ci: CanonItem) -> Verdict:
    lim = ctx.limits
    if ci.shielded:
        return _v(d, UNVERIFIABLE, "protected")  # judged by protected.dropped
    legacy = d.legacy_reason
    max_msgs, max_tokens = _int(lim.get("messages")), _int(lim.get("tokens"))
    if legacy in RECENCY_STEPS and max_msgs is not None:
        if _present_messages(ctx) <= max_msgs:
            return _v(d, FALSIFIED, "under_stated_limit")
        if lim.get("order") == "recency":
            older_kept = [k for k, it in ctx.kept.items()
                          if ctx.cis[k].seq < ci.seq and not ctx.cis[k].shielded
                          and ctx.cis[k].role != "system" and not it.pinned]
            if older_kept:
                return _v(d, FALSIFIED, "not_lowest_priority", older_kept[:5])
        return _v(d, VERIFIED)
    if legacy == "candidate-cap" and _int(lim.get("candidates")) is not None:
        cap = int(lim["candidates"])
        return _v(d, VERIFIED) if ci.seq >= cap else _v(d, FALSIFIED, "under_candidate_cap")
    if legacy == "snip" and (max_msgs is not None or max_tokens is not None):
        over_msgs = max_msgs is not None and _present_messages(ctx) + _dropped_before(ctx) \
            > max_msgs
        over_tokens = max_tokens is not None and _tokens(ctx, ctx.offered) > max_tokens
        return _v(d, VERIFIED) if over_msgs or over_tokens else \
            _v(d, FALSIFIED, "under_stated_limit")
    group = [d.id]  # a tool call and its result are selected together (§8.3)
    if ci.tool_call_id:
        group = [o for o in ctx.offered if ctx.cis[o].tool_call_id == ci.tool_call_id
                 and o in ctx.drops and ctx.drops[o].reason in BUDGET]
    if d.reason == "input_budget" and max_tokens is not None and \
            (legacy in TOKEN_STEPS or (legacy is None and ctx.candidate)):
        used = _tokens(ctx, [k for k in ctx.kept if k in ctx.cis])
        if used + _tokens(ctx, group) <= max_tokens:
            return _v(d, FALSIFIED, "fits_stated_budget")
        return _v(d, VERIFIED)
    ceilings = lim.get("partitions")
    if d.reason == "partition_ceiling" and isinstance(ceilings, Mapping):
        used_in: dict[str, int] = {}
        for k in ctx.kept:
            if k in ctx.cis:
                part = KIND_PARTITION.get(ctx.cis[k].kind, "conversation")
                used_in[part] = used_in.get(part, 0) + max(1, ctx.cis[k].token_estimate)
        need: dict[str, int] = {}
        for g in group:
            part = KIND_PARTITION.get(ctx.cis[g].kind, "conversation")
            need[part] = need.get(part, 0) + max(1, ctx.cis[g].token_estimate)
        over = [p for p, amount in need.items()
                if isinstance(ceilings.get(p), int) and used_in.get(p, 0) + amount > ceilings[p]]
        return _v(d, VERIFIED) if over else _v(d, FALSIFIED, "fits_partition_ceiling")
    return _v(d, UNVERIFIABLE, "no_stated_limit")


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _repair(ctx: _Ctx, d: Drop, rep: ClaimReport) -> Verdict:
    ci = ctx.cis[d.id]
    tcid = ci.tool_call_id
    if ci.detail.get("orphan") or not tcid:
        return _v(d, VERIFIED, "orphaned_in_input")
    partners = [o for o in ctx.offered if o != d.id and ctx.cis[o].tool_call_id == tcid]
    if not partners:
        return _v(d, VERIFIED, "orphaned_in_input")
    kept = [o for o in partners if o in ctx.kept]
    if kept:
        return _v(d, FALSIFIED, "partner_kept", kept)
    bad = [o for o in partners if rep.status(o) == FALSIFIED]
    if bad:
        return _v(d, FALSIFIED, "orphaned_by_unjustified_drop", bad)
    if all(ctx.drops[o].reason == "tool_pair_repair" for o in partners if o in ctx.drops):
        # repair only removes a half whose partner something else removed first
        return _v(d, FALSIFIED, "no_orphaning_drop", partners)
    return _v(d, VERIFIED, "partner_dropped", partners)


def _alterations(ctx: _Ctx, rep: ClaimReport) -> None:
    policy, other = [], []
    for iid, it in ctx.kept.items():
        ci = ctx.cis.get(iid)
        if ci is None or it.digest == ci.digest or (it.altered == "whitespace"
                                                     and not ctx.candidate):
            continue
        claim = it.detail.get("claim")
        if ctx.candidate:
            status, why = FALSIFIED, "candidate_alters_input"
        elif claim in (VERIFIED, FALSIFIED):
            status, why = str(claim), str(it.detail.get("why") or "")
        else:  # content changed and no documented transformation claims it
            status, why = FALSIFIED, "no_claimed_transformation"
        rep.verdicts[iid] = Verdict(iid, it.altered or "content", it.altered, status, why)
        is_policy = ci.kind == "system-policy" and ci.trust in ("host", "verified")
        if is_policy and status != VERIFIED:
            policy.append(iid)
        elif status == FALSIFIED and not ci.pinned:  # pinned: pinned.altered
            other.append(iid)
    if policy:
        rep.violations.append(Violation("system_policy.altered", tuple(policy),
                                        {"count": len(policy)}))
    if other:
        whys = sorted({rep.verdicts[i].why for i in other})
        rep.violations.append(Violation("alteration.unjustified", tuple(other),
                                        {"count": len(other), "why": whys}))


def _group(rep: ClaimReport) -> None:
    """One ``drop_reason.unjustified`` violation per (claim, legacy step, why)."""
    groups: dict[tuple[str, str, str], list[Verdict]] = {}
    for v in rep.verdicts.values():
        if v.status == FALSIFIED and v.claim in _DROP_CLAIMS:
            groups.setdefault((v.claim, v.legacy or "", v.why), []).append(v)
    for (claim, legacy, why), vs in sorted(groups.items()):
        detail: dict[str, Any] = {"claim": claim, "why": why, "count": len(vs)}
        if legacy:
            detail["legacy_reason"] = legacy
        ev = sorted({e for v in vs for e in v.evidence})
        if ev:
            detail["evidence"] = ev[:20]
        rep.violations.append(Violation("drop_reason.unjustified",
                                        tuple(sorted(v.item_id for v in vs)), detail))


_DROP_CLAIMS: Final = frozenset({
    "duplicate", "input_budget", "partition_ceiling", "tool_pair_repair", "collapsed",
    "summarized", "user_removed", "invalid", "not_persisted", "sink_denied",
    "untrusted_system_policy", "unknown"})


def _order(ctx: _Ctx, rep: ClaimReport) -> None:
    mode = ctx.p.facts.get("order") if isinstance(ctx.p.facts, Mapping) else None
    if mode == "priority" and not ctx.candidate:
        return  # the legacy's own documented ranking (the IDE chip order)
    if mode == "priority":  # the kernel's selection order: protected first, then priority
        seq = [(0 if ctx.cis[it.id].pinned else 1, ctx.cis[it.id].seq, it.id)
               for it in ctx.p.items if it.origin == "input" and it.id in ctx.cis]
    else:
        seq = [(ctx.cis[it.id].seq, _sub(it.id), it.id) for it in ctx.p.items
               if it.origin == "input" and it.id in ctx.cis
               and not (mode == "pinned_block" and it.pinned)]
    moved = _out_of_order(seq)
    if moved:
        rep.violations.append(Violation("item.reordered", tuple(moved), {"moved": len(moved)}))


def _sub(item_id: str) -> int:
    tail = item_id.rsplit(":", 1)[-1]
    return int(tail.rsplit(".c", 1)[1]) if ".c" in tail else 0


def longest_increasing(keys: Sequence[Any]) -> set[int]:
    """Indexes of one longest strictly increasing subsequence of ``keys`` (O(n log n))."""
    import bisect

    tails: list[Any] = []
    tail_idx: list[int] = []
    prev = [-1] * len(keys)
    for i, k in enumerate(keys):
        j = bisect.bisect_left(tails, k)
        if j == len(tails):
            tails.append(k)
            tail_idx.append(i)
        else:
            tails[j] = k
            tail_idx[j] = i
        prev[i] = tail_idx[j - 1] if j else -1
    on: set[int] = set()
    i = tail_idx[-1] if tail_idx else -1
    while i >= 0:
        on.add(i)
        i = prev[i]
    return on


def _out_of_order(seq: Sequence[tuple[Any, ...]]) -> list[str]:
    """Ids not on a longest increasing subsequence of source positions."""
    on = longest_increasing([t[:-1] for t in seq])
    return sorted(seq[i][-1] for i in range(len(seq)) if i not in on)


def canon_items(canon: Canon) -> dict[str, CanonItem]:
    if canon.session is not None:
        return canon.session.by_id
    if canon.ide is not None:
        return {it.item_id: it for it in canon.ide.items}
    return {}


__all__ = ["FALSIFIED", "UNVERIFIABLE", "VERIFIED", "ClaimReport", "Verdict", "canon_items",
           "verify"]
