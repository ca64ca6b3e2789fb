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
  what the baseline read from the same recording.

The live kernel's projections already hold these values; anchoring them changes nothing
there (a test holds that), so the live and a recorded run of the kernel agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kernel.partitions import derive_ceilings
from shadow.canonical import Canon
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


def _provider_truth(p: Projection, canon: Canon, capture: Capture) -> Projection:
    from shadow.candidate import PROVIDER_ENTRIES, base_name

    pr = p.provider
    entry = PROVIDER_ENTRIES.get(base_name(capture.name))
    if pr is None or entry is None:
        return p
    surface = "desktop" if base_name(capture.name).startswith("desktop") else "cli"
    n = len(exchanges(canon.doc, surface, entry))
    truth = truth_of(canon.doc, surface, entry, pr.requests) if pr.requests else None
    return replace(p, provider=replace(pr, truth=truth, recorded=min(pr.requests, n)))


def _memory_truth(p: Projection, baseline: Projection) -> Projection:
    if p.memory is None or baseline.memory is None:
        return p
    recorded = {o.index: (o.detail.get("summarizer") if isinstance(o.detail, Mapping)
                          else None) for o in baseline.memory.ops}
    ops: list[MemOp] = []
    for o in p.memory.ops:
        s = o.detail.get("summarizer") if isinstance(o.detail, Mapping) else None
        if isinstance(s, Mapping):
            truth = (recorded.get(o.index) or {}).get("truth")
            o = replace(o, detail={**o.detail, "summarizer": {**s, "truth": truth}})
        ops.append(o)
    return replace(p, memory=MemoryProjection(p.memory.records, tuple(ops)))


def anchor(p: Projection, baseline: Projection, canon: Canon, capture: Capture,
           siblings: Mapping[str, Capture] | None = None) -> Projection:
    """``p`` with the offered ids, stated limits and recorded truths the harness decides."""
    facts = dict(p.facts)
    limits = candidate_limits(canon, capture, siblings)
    if limits:
        facts["limits"] = limits
    else:
        facts.pop("limits", None)
    out = replace(p, input_ids=baseline.input_ids or p.input_ids, facts=facts)
    out = _provider_truth(out, canon, capture)
    return _memory_truth(out, baseline)
