"""Invariants a single projection must satisfy (design 108 §7, §8.3, §12, §16).

``check(p, canon)`` returns :class:`Violation` values; whoever produced ``p`` is to
blame.  Checked, for message and IDE projections (only over identities the surface was
actually offered, ``p.input_ids``):

* ``tool_pair.split``     a settled call/result group is partly kept;
* ``tool_pair.mismatch``  a kept result lost its call binding, is bound to another call,
                          or precedes its call;
* ``pending.lost``        a pending call / question / approval offered was not kept, or
                          its outcome changed;
* ``protected.dropped``   a protected item (pinned, host policy, recovery-bound) was
                          dropped for a non-governance reason;
* ``pinned.altered``      a kept pinned item's digest differs from its input digest;
* ``trust.escalated``     external/untrusted content (or a summary of it) rendered with
                          the ``system`` role, or as ``system-policy``;
* ``secret.leaked``       a kept item, or a summary of items, classified secret reaches
                          the provider-bound output;
* provider outcome vs the recording: ``provider.cancel_swallowed``,
  ``provider.degraded_masked``, ``provider.usage_unknown_masked``;
* ``shadow.side_effect``  an unrecorded provider request, or a write by a shadow
                          candidate; ``writer.dual`` more than one writer;
* ``session.chain_invalid`` / ``session.replay_mismatch`` (session store facts);
* memory: see ``shadow.divergence.memory``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shadow.canonical import Canon, CanonItem
from shadow.divergence import Violation
from shadow.divergence.memory import check_memory
from shadow.projection import Projection

#: Drops a protected item may legitimately suffer: governance (design 108 §7), the user's
#: own removal, an invalid candidate, or host policy that a session store does not persist
#: (it is rebuilt from authoritative configuration).
GOVERNANCE = frozenset({"expired", "scope_denied", "sink_denied", "untrusted_system_policy",
                        "invalid", "user_removed", "not_persisted"})
LOW_TRUST = frozenset({"external", "untrusted"})
SECRET = frozenset({"secret", "restricted"})


def canon_items(canon: Canon) -> dict[str, CanonItem]:
    if canon.session is not None:
        return canon.session.by_id
    if canon.ide is not None:
        return {it.item_id: it for it in canon.ide.items}
    return {}


def is_protected(ci: CanonItem) -> bool:
    b = ci.binding
    return bool(ci.pinned or (ci.kind == "system-policy" and ci.trust in ("host", "verified"))
                or b.get("requiredForRecovery"))


def is_pending(ci: CanonItem) -> bool:
    b = ci.binding
    return bool(b.get("toolOutcome") in ("pending", "unknown") or b.get("questionId")
                or b.get("approvalId") or b.get("humanTaskId"))


def check(p: Projection, canon: Canon, *, candidate: bool = False) -> list[Violation]:
    out: list[Violation] = []
    out += _effects(p, candidate)
    if p.memory is not None:
        out += check_memory(p)
    if p.status != "ok":
        return out
    cis = canon_items(canon)
    if cis:
        out += _items(p, cis)
    out += _provider(p)
    return out


def _effects(p: Projection, candidate: bool) -> list[Violation]:
    out = []
    unrec = [s.target for s in p.side_effects if not s.recorded or s.kind == "write"]
    if unrec:
        out.append(Violation("shadow.side_effect", (), {"targets": sorted(unrec)}))
    if p.provider is not None and p.provider.requests > p.provider.recorded and candidate \
            and not unrec:
        out.append(Violation("shadow.side_effect", (), {
            "unrecorded_requests": p.provider.requests - p.provider.recorded}))
    if len(set(p.writers)) > 1:
        out.append(Violation("writer.dual", (), {"writers": sorted(set(p.writers))}))
    if candidate and p.writers:
        out.append(Violation("shadow.side_effect", (), {"writes": sorted(set(p.writers))}))
    chain = p.facts.get("chain")
    if chain not in (None, "verified"):
        out.append(Violation("session.chain_invalid", (), {"status": str(chain)}))
    if p.facts.get("replay") == "mismatch":
        out.append(Violation("session.replay_mismatch", (), {}))
    return out


def _items(p: Projection, cis: Mapping[str, CanonItem]) -> list[Violation]:
    out: list[Violation] = []
    offered = set(p.input_ids) if p.input_ids else set(cis)
    kept = {it.id: it for it in p.items if it.origin == "input"}
    pos = {it.id: n for n, it in enumerate(p.items)}
    dropped = {d.id: d for d in p.dropped}
    ids_seen: set[str] = set()
    dups = sorted({it.id for it in p.items if it.id in ids_seen or ids_seen.add(it.id)})
    if dups:
        out.append(Violation("unclassified", tuple(dups), {"duplicate_identity": len(dups)}))
    # tool groups
    groups: dict[str, list[CanonItem]] = {}
    for ci in cis.values():
        if ci.tool_call_id and ci.item_id in offered:
            groups.setdefault(ci.tool_call_id, []).append(ci)
    split, mismatch = [], []
    for tcid, members in sorted(groups.items()):
        roles = {m.tool_role for m in members}
        present = [m for m in members if m.item_id in kept]
        if roles == {"call", "result"} and 0 < len(present) < len(members):
            split.extend(m.item_id for m in members)
        for m in present:
            it = kept[m.item_id]
            if m.tool_role == "result" and (it.detail.get("binding_lost")
                                            or (it.tool_call_id and it.tool_call_id != tcid)):
                mismatch.append(m.item_id)
        calls = [m for m in present if m.tool_role == "call"]
        results = [m for m in present if m.tool_role == "result"]
        if calls and results and pos[results[0].item_id] < pos[calls[0].item_id]:
            mismatch.append(results[0].item_id)
    if split:
        out.append(Violation("tool_pair.split", tuple(sorted(set(split))),
                             {"groups": len({cis[i].tool_call_id for i in split})}))
    if mismatch:
        out.append(Violation("tool_pair.mismatch", tuple(sorted(set(mismatch))),
                             {"count": len(set(mismatch))}))
    # pending, protected, pinned
    lost, changed, prot, altered = [], [], [], []
    for iid in sorted(offered):
        ci = cis.get(iid)
        if ci is None:
            continue
        it = kept.get(iid)
        d = dropped.get(iid)
        governance = d is not None and d.reason in GOVERNANCE
        if is_pending(ci):
            if it is None and not governance:
                lost.append(iid)
            elif it is not None and it.tool_outcome != ci.tool_outcome:
                changed.append(iid)
        elif is_protected(ci) and it is None and not governance:
            prot.append(iid)
        if it is not None and ci.pinned and it.digest != ci.digest:
            altered.append(iid)
    if lost or changed:
        out.append(Violation("pending.lost", tuple(lost + changed),
                             {"lost": len(lost), "binding_changed": len(changed)}))
    if prot:
        reasons = sorted({(dropped[i].legacy_reason or dropped[i].reason) if i in dropped
                          else "absent" for i in prot})
        out.append(Violation("protected.dropped", tuple(prot), {"reasons": reasons}))
    if altered:
        out.append(Violation("pinned.altered", tuple(altered), {"count": len(altered)}))
    # trust and secrets
    esc, leak = [], []
    for it in p.items:
        trust = it.trust if it.origin == "derived" else (cis[it.id].trust if it.id in cis
                                                         else it.trust)
        if trust in LOW_TRUST and (it.role == "system" or it.kind == "system-policy"):
            esc.append(it.id)
        sens = cis[it.id].sensitivity if it.id in cis else it.sensitivity
        if sens in SECRET or any(cis[c].sensitivity in SECRET for c in it.covers if c in cis):
            leak.append(it.id)
    if esc:
        out.append(Violation("trust.escalated", tuple(esc), {"count": len(esc)}))
    if leak:
        out.append(Violation("secret.leaked", tuple(leak), {"count": len(leak)}))
    return out


def _provider(p: Projection) -> list[Violation]:
    pr = p.provider
    if pr is None or pr.truth is None:
        return []
    out = []
    detail: dict[str, Any] = {"truth": pr.truth, "status": pr.status}
    if pr.truth == "cancelled" and pr.status != "aborted" and p.status == "ok":
        out.append(Violation("provider.cancel_swallowed", (), detail))
    if pr.truth in ("error", "invalid") and pr.degraded is not True and \
            pr.status not in ("aborted", "failed", "degraded"):
        out.append(Violation("provider.degraded_masked", (), detail))
    if pr.truth == "no-usage" and pr.status in ("committed", "degraded"):
        out.append(Violation("provider.usage_unknown_masked", (),
                             {**detail, "usage": pr.usage}))
    return out
