"""What the harness decides about a candidate projection, whatever the projection says.

A recorded candidate is judged on what it did, but not on what it *claims about its
circumstances*.  Before a candidate projection is checked, :func:`anchor` replaces:

* ``input_ids`` — the identities the surface was offered — with the baseline's, which the
  adapter derives from the input and the capture (a candidate cannot hide an item it
  dropped by leaving it out of what it was offered);
* ``facts.limits`` with the candidate policy of the surface (docs/surfaces.md,
  "Candidate policy"): the selectable token budget and the partition ceilings the kernel
  plans with — the candidate's budget claims are checked against those;
* ``provider.truth`` / ``provider.recorded`` with what the recording says about the
  candidate's last provider request, and each memory operation's ``summarizer.truth`` with
  what the baseline read from the same recording;
* each memory operation's name, ``selector``, ``source_scope`` and ``target`` (the record
  a removal names) — what the fixture's command asked for — with the baseline's;
  operations are judged in index order and records in the order their operations created
  them, whatever order the file lists.

The live kernel's projections already hold these values; anchoring them changes nothing
there (a test holds that), so the live and a recorded run of the kernel agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from kernel.planning.partitions import derive_ceilings
from shadow.canonical import Canon
from shadow.divergence.claims import canon_items
from shadow.fixtures import Capture
from shadow.projection import MemOp, MemoryProjection, Projection
from shadow.recorded_provider import exchanges, truth_of


def candidate_limits(canon: Canon, capture: Capture,
                     siblings: Mapping[str, Capture] | None = None) -> dict[str, Any]:
    """The stated limits of the candidate policy for this surface (a session store is
    judged by the policy of the compaction whose result it persists)."""
    from shadow.candidate import surface_policy
    from shadow.fixtures import compaction_source

    if canon.kind == "memory":
        return {}
    if canon.kind == "ide":
        assert canon.ide is not None
        budget = max(1, canon.ide.budget)
        return {"tokens": budget, "partitions": derive_ceilings(budget, {}, {})}
    source = compaction_source(capture, siblings or {})
    policy = surface_policy(canon, source or capture)
    selectable = max(0, policy.window - policy.reserved - policy.safety)
    return {"tokens": selectable,
            "partitions": derive_ceilings(selectable, dict(policy.ceilings or {}), {})}


def provider_entry(capture: Capture, siblings: Mapping[str, Capture] | None = None
                   ) -> tuple[str, str] | None:
    """(surface, legacy entry) of the provider calls a capture's compaction makes — a
    session store's are its compaction source's — or None for a surface without any."""
    from shadow.candidate import PROVIDER_ENTRIES, base_name
    from shadow.fixtures import compaction_source

    source = compaction_source(capture, siblings or {}) or capture
    name = base_name(source.name)
    entry = PROVIDER_ENTRIES.get(name)
    if entry is None:
        return None
    return ("desktop" if name.startswith("desktop") else "cli"), entry


def _provider_truth(p: Projection, canon: Canon, capture: Capture,
                    siblings: Mapping[str, Capture] | None) -> Projection:
    pr = p.provider
    if pr is None:
        return p
    where = provider_entry(capture, siblings)
    if where is None:  # nothing was recorded for this surface: every request is unrecorded
        return replace(p, provider=replace(pr, truth=None, recorded=0))
    surface, entry = where
    n = len(exchanges(canon.doc, surface, entry))
    truth = truth_of(canon.doc, surface, entry, pr.requests) if pr.requests else None
    return replace(p, provider=replace(pr, truth=truth, recorded=min(pr.requests, n)))


#: what a memory operation was asked to do: the fixture's command, as the baseline read it
_ASKED: Final = ("selector", "source_scope", "target")


def _memory_truth(p: Projection, baseline: Projection) -> Projection:
    """Each operation's name, selector, source scope and summariser truth from the
    baseline (what the fixture asked and what the recording answered), operations in
    index order and records in the order their operations created them."""
    if p.memory is None or baseline.memory is None:
        return p
    asked = {o.index: o for o in baseline.memory.ops}
    ops: list[MemOp] = []
    for o in sorted(p.memory.ops, key=lambda o: o.index):
        b = asked.get(o.index)
        if b is not None:
            detail = {k: v for k, v in o.detail.items() if k not in _ASKED}
            detail.update({k: b.detail[k] for k in _ASKED if k in b.detail})
            s = o.detail.get("summarizer")
            if isinstance(s, Mapping):
                truth = (b.detail.get("summarizer") or {}).get("truth")
                detail["summarizer"] = {**s, "truth": truth}
            o = replace(o, op=b.op, detail=detail)
        ops.append(o)
    born = {rid: (o.index, n) for o in ops for n, rid in enumerate(o.created)}
    last = (max((o.index for o in ops), default=0) + 1, 0)
    records = tuple(sorted(p.memory.records, key=lambda r: born.get(r.id, last)))
    return replace(p, memory=MemoryProjection(records, tuple(ops)))


def anchor(p: Projection, baseline: Projection, canon: Canon, capture: Capture,
           siblings: Mapping[str, Capture] | None = None) -> Projection:
    """``p`` with the offered ids, stated limits and recorded truths the harness decides."""
    facts = dict(p.facts)
    limits = candidate_limits(canon, capture, siblings)
    if limits:
        facts["limits"] = limits
    else:
        facts.pop("limits", None)
    offered = baseline.input_ids or tuple(canon_items(canon))  # never the candidate's word
    out = replace(p, input_ids=offered or p.input_ids, facts=facts)
    out = _provider_truth(out, canon, capture, siblings)
    return _memory_truth(out, baseline)
