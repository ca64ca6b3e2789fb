"""Invariants a single projection must satisfy (design 108 §7, §8.3, §12, §16, §17).

``assess(p, canon, index)`` returns an :class:`Assessment`: the :class:`Violation`
values of ``p`` — whoever produced ``p`` is to blame — and the verdicts on its own
claims (``shadow.divergence.claims``).  Checked, for message and IDE projections (only
over identities the surface was actually offered, ``p.input_ids``):

* ``tool_pair.split``     a settled call/result group is partly kept;
* ``tool_pair.mismatch``  a kept result lost its call binding, is bound to another call,
                          or precedes its call;
* ``pending.lost``        a pending call / question / approval offered was not kept, or
                          its outcome changed;
* ``protected.dropped``   a protected item (pinned, host policy, recovery-bound) was
                          dropped for a non-governance reason;
* ``pinned.altered``      a kept pinned item's digest differs from its input digest;
* ``trust.escalated``     low-trust input rendered with the ``system`` role or as
                          ``system-policy``, an input item claiming more trust than its
                          source, or a derived item / memory record whose text came from
                          external or untrusted input (``shadow.divergence.provenance``)
                          rendered at higher trust — with the source ids in the detail;
* ``secret.leaked``       a kept item, or a derived item of (or holding) secret material,
                          reaches the provider-bound output; or a recorded provider request
                          of the producer carried secret material (``facts.sent_secrets``),
                          or the candidate sent a secret item to its summarizer
                          (``facts.provider_inputs``);
* provider outcome vs the recording: ``provider.cancel_swallowed``,
  ``provider.degraded_masked``, ``provider.usage_unknown_masked`` (their item ids are
  the projection's summaries);
* ``shadow.side_effect``  an unrecorded provider request, or a write by a shadow
                          candidate; ``writer.dual`` more than one writer;
* ``session.chain_invalid`` / ``session.replay_mismatch`` (session store facts);
* claims: ``drop_reason.unjustified``, ``alteration.unjustified``,
  ``system_policy.altered``, ``item.reordered``;
* memory: see ``shadow.divergence.memory``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from shadow.canonical import Canon, CanonItem
from shadow.divergence import Violation
from shadow.divergence import claims as claims_mod
from shadow.divergence import provenance as prov
from shadow.divergence.memory import check_memory
from shadow.projection import PItem, Projection, provider_calls

#: Drops a protected item may legitimately suffer: governance (design 108 §7), the user's
#: own removal, an invalid candidate, or host policy that a session store does not persist
#: (it is rebuilt from authoritative configuration).
GOVERNANCE = frozenset({"expired", "scope_denied", "sink_denied", "untrusted_system_policy",
                        "invalid", "user_removed", "not_persisted"})
LOW_TRUST = prov.LOW_TRUST
SECRET = frozenset({"secret", "restricted"})
_TRUST: Final = prov.TRUST_ORDER


@dataclass(frozen=True, slots=True)
class Assessment:
    violations: list[Violation]
    claims: claims_mod.ClaimReport = field(default_factory=claims_mod.ClaimReport)


def source_index(canon: Canon) -> prov.SourceIndex:
    """The fixture's inputs as possible origins of derived text (built once per fixture).

    A prior compaction summary in the input is derived text of unknown origin: it is
    neither a trusted source nor a low-trust one."""
    out: list[prov.Source] = []
    if canon.session is not None:
        for ci in canon.session.items:
            trust = "derived" if ci.detail.get("prior") else ci.trust
            out.append(prov.Source(ci.item_id, trust, ci.sensitivity, ci.content))
    elif canon.ide is not None:
        out = [prov.Source(ci.item_id, ci.trust, ci.sensitivity, ci.content)
               for ci in canon.ide.items]
    elif canon.memory is not None:
        from shadow.divergence.memory import evidence_sources

        out = evidence_sources(canon)
    return prov.SourceIndex(out)


def assess(p: Projection, canon: Canon, index: prov.SourceIndex | None = None, *,
           candidate: bool = False) -> Assessment:
    index = index if index is not None else source_index(canon)
    out: list[Violation] = []
    out += _effects(p, candidate)
    if p.memory is not None:
        out += check_memory(p, index)
    cis = claims_mod.canon_items(canon)
    rep = claims_mod.verify(p, canon, cis)  # a refusal's claim too
    out += rep.violations
    out += _provider(p, cis)  # what was sent, and the recording, whatever the outcome
    if p.status != "ok":
        return Assessment(out, rep)
    if cis:
        out += _items(p, cis, rep)
        if candidate:
            out += _budget(p, cis)
        out += _derived(p, cis, index)
    return Assessment(out, rep)


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


def _rank(trust: str | None) -> int:
    return _TRUST.index(trust) if trust in _TRUST else len(_TRUST)


def _items(p: Projection, cis: Mapping[str, CanonItem],
           rep: claims_mod.ClaimReport | None = None) -> list[Violation]:
    out: list[Violation] = []
    candidate = p.producer == "candidate"

    def exempt(d: Any) -> bool:
        """A governance drop exempts a protected item only when its claim holds (a
        candidate's must be verified, a legacy's not falsified)."""
        if d is None or d.reason not in GOVERNANCE:
            return False
        status = rep.status(d.id) if rep is not None else None
        return status == claims_mod.VERIFIED or (
            not candidate and status != claims_mod.FALSIFIED)

    offered = set(p.input_ids) if p.input_ids else set(cis)
    kept = {it.id: it for it in p.items if it.origin == "input"}
    pos = {it.id: n for n, it in enumerate(p.items)}
    dropped = {d.id: d for d in p.dropped}
    counts = Counter(it.id for it in p.items)
    dups = sorted(i for i, n in counts.items() if n > 1)
    if dups:
        out.append(Violation("unclassified", tuple(dups), {"duplicate_identity": len(dups)}))
    # tool groups
    groups: dict[str, list[CanonItem]] = {}
    for ci in cis.values():
        if ci.tool_call_id and ci.item_id in offered:
            groups.setdefault(ci.tool_call_id, []).append(ci)
    split: list[str] = []
    mismatch: list[str] = []
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
            elif candidate and (it.tool_call_id != tcid or it.tool_role != m.tool_role):
                mismatch.append(m.item_id)  # a candidate renders the binding it was given
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
    lost: list[str] = []
    changed: list[str] = []
    prot: list[str] = []
    altered: list[str] = []
    for iid in sorted(offered):
        found = cis.get(iid)
        if found is None:
            continue
        ci = found
        kept_it = kept.get(iid)
        d = dropped.get(iid)
        governance = exempt(d)
        if ci.pending:
            if kept_it is None and not governance:
                lost.append(iid)
            elif kept_it is not None and (
                    kept_it.tool_outcome != ci.tool_outcome or (candidate and (
                        kept_it.tool_call_id != ci.tool_call_id
                        or kept_it.tool_role != ci.tool_role))):
                changed.append(iid)
        elif ci.protected and kept_it is None and not governance:
            prot.append(iid)
        if kept_it is not None and ci.pinned and kept_it.digest != ci.digest:
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
    # trust of input items, and secrets in the provider-bound output
    esc: list[str] = []
    leak: list[str] = []
    secret_text = {ci.digest for ci in cis.values() if ci.sensitivity in SECRET}
    for it in p.items:
        source = cis.get(it.id)
        if it.origin == "input" and source is not None and not source.detail.get("prior"):
            rendered_high = it.role == "system" or it.kind == "system-policy"
            source_high = source.role == "system" or source.kind == "system-policy"
            if (rendered_high and (source.trust in LOW_TRUST or (candidate and not source_high))) \
                    or (it.trust is not None and _rank(it.trust) < _rank(source.trust)):
                esc.append(it.id)  # low-trust text, or a candidate's user text, as policy
        sens = source.sensitivity if source is not None else it.sensitivity
        if sens in SECRET or it.digest in secret_text or any(
                cis[c].sensitivity in SECRET for c in it.covers if c in cis):
            leak.append(it.id)
    if esc:
        out.append(Violation("trust.escalated", tuple(esc), {
            "count": len(esc), "sources": sorted(esc), "rendered": "above its source"}))
    if leak:
        out.append(Violation("secret.leaked", tuple(leak), {"count": len(leak),
                                                            "sink": "model output"}))
    return out


#: characters per token of the length estimate of a derived item (the kernel's ASCII
#: rate; CJK text counts more with the kernel, so this never over-counts it)
CHARS_PER_TOKEN: Final = 4


def _budget(p: Projection, cis: Mapping[str, CanonItem]) -> list[Violation]:
    """``budget.exceeded``: a candidate's output over its (anchored) selectable budget.
    An uncommitted compaction (``reconciliation_required`` because the recording reports
    no usage, §17) keeps the history it had."""
    limits = p.facts.get("limits") if isinstance(p.facts, Mapping) else None
    budget = limits.get("tokens") if isinstance(limits, Mapping) else None
    if not isinstance(budget, int) or isinstance(budget, bool):
        return []
    pr = p.provider
    if pr is not None and pr.status == "reconciliation_required" and pr.truth == "no-usage":
        return []
    used = sum(max(1, cis[it.id].token_estimate) for it in p.items
               if it.origin == "input" and it.id in cis)
    used += sum(max(1, it.length // CHARS_PER_TOKEN) for it in p.items
                if it.origin != "input")
    if used <= budget:
        return []
    return [Violation("budget.exceeded", (), {"tokens": used, "budget": budget,
                                              "over": used - budget})]


def _rendered_trust(it: PItem, ci: CanonItem | None) -> str:
    if it.role == "system" or it.kind == "system-policy":
        return "host"
    if it.origin == "derived" and it.trust in _TRUST:
        return str(it.trust)
    if ci is not None and ci.detail.get("prior"):
        return "user" if it.role in ("user", "assistant") else "external"
    return "user" if it.role in (None, "user", "assistant") else "external"


def _derived(p: Projection, cis: Mapping[str, CanonItem],
             index: prov.SourceIndex) -> list[Violation]:
    """Trust by provenance for derived items, altered copies and kept prior summaries."""
    out: list[Violation] = []
    for it in p.items:
        ci = cis.get(it.id)
        units = dict(prov.iter_units(it.detail))
        if not units and ci is not None and ci.detail.get("prior") and it.digest == ci.digest:
            units = prov.text_sketches(ci.content)  # a kept prior summary: its input text
        if not units:
            continue
        secret = sorted({sid for hs in units.values() for sid in prov.sources_of(hs, index)
                         if sid != it.id and sid in cis and cis[sid].sensitivity in SECRET})
        if secret:  # secret text copied into a derived (model-bound) item
            out.append(Violation("secret.leaked", (it.id,), {
                "sources": secret, "sink": "derived item"}))
        der = prov.derived_from(units, index, exclude=(it.id,))
        if der.least_trust is None:
            continue
        rendered = _rendered_trust(it, ci)
        if _rank(rendered) < _rank(der.least_trust):
            out.append(Violation("trust.escalated", (it.id,), {
                "fields": der.fields, "sources": list(der.sources),
                "source_trust": der.least_trust, "rendered": rendered}))
    if p.producer == "candidate":  # a candidate's own covers are its claim: §12.1 inheritance
        summarized = {d.id for d in p.dropped if d.reason in ("summarized", "collapsed")}
        for it in p.items:
            if it.origin != "derived" or any(
                    v.item_ids == (it.id,) and v.code == "trust.escalated" for v in out):
                continue
            # what it covers, and what the candidate says it summarized into it
            claimed = set(it.covers) | (summarized if it.kind in ("summary", "collapse-marker")
                                        else set())
            low = sorted(c for c in claimed if c in cis and (
                cis[c].trust in LOW_TRUST or cis[c].detail.get("prior")))
            least = max((("external" if cis[c].detail.get("prior") else cis[c].trust)
                         for c in low), key=_rank, default=None)
            rendered = _rendered_trust(it, None)
            if least is not None and _rank(rendered) < _rank(least):
                out.append(Violation("trust.escalated", (it.id,), {
                    "fields": ["covers"], "sources": low, "source_trust": least,
                    "rendered": rendered}))
    return out


def _summary_ids(p: Projection) -> tuple[str, ...]:
    return tuple(it.id for it in p.items if it.kind == "summary")


def _provider(p: Projection, cis: Mapping[str, CanonItem]) -> list[Violation]:
    out: list[Violation] = []
    sent = p.facts.get("sent_secrets") if isinstance(p.facts, Mapping) else None
    if isinstance(sent, list) and sent:
        secret_ids = sorted(i for i, ci in cis.items() if ci.sensitivity in SECRET)
        out.append(Violation("secret.leaked", tuple(secret_ids),
                             {"sink": "summarizer request", "calls": sorted(sent)}))
    inputs = p.facts.get("provider_inputs") if isinstance(p.facts, Mapping) else None
    if isinstance(inputs, list):
        bad = sorted(i for i in inputs if i in cis and cis[i].sensitivity in SECRET)
        if bad:
            out.append(Violation("secret.leaked", tuple(bad),
                                 {"sink": "summarizer request", "count": len(bad)}))
    calls = provider_calls(p)
    # call numbers for the earlier calls; the last call (the projection's own) is None
    outcomes = [(n + 1 if n < len(calls) - 1 else None, pr)
                for n, pr in enumerate(calls) if pr is not None]
    ids = _summary_ids(p)
    for call, pr in outcomes:
        if pr.truth is None:
            continue
        detail: dict[str, Any] = {"truth": pr.truth, "status": pr.status}
        if call is not None:
            detail["call"] = call
        ok = p.status == "ok" or call is not None
        # a cancelled call either aborts, or (the last call) leaves an output that used
        # nothing of it — a summary or a summarized drop after it swallowed the cancel
        used = call is None and p.status == "ok" and (bool(ids) or any(
            d.reason in ("summarized", "collapsed") for d in p.dropped))
        if pr.truth == "cancelled" and ok and (pr.status != "aborted" or used):
            out.append(Violation("provider.cancel_swallowed", ids, detail))
        # an unsettled call left for reconciliation commits nothing: it masks no failure
        settled_as = ("aborted", "failed", "degraded") + (
            ("reconciliation_required",) if pr.truth == "error" else ())
        if pr.truth in ("error", "invalid") and pr.degraded is not True and \
                pr.status not in settled_as:
            out.append(Violation("provider.degraded_masked", ids, detail))
        if pr.truth == "no-usage" and pr.status in ("committed", "degraded"):
            out.append(Violation("provider.usage_unknown_masked", ids,
                                 {**detail, "usage": pr.usage}))
    return out



