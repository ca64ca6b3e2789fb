"""IDE Context Center (VS Code ``buildContextCenter`` in JavaScript, JetBrains
``ContextCenter.build`` in Java — meant to be twins) → projection.

Native output: schema ``cc-context-center/v1`` with ``chips``.  A chip maps back to the
candidate it came from by its id — ``ctx_`` + 16 hex of sha256(kind, source, identity);
both the ``identity`` and the ``scope`` variant are tried (the twins disagree on which)
and a candidate's own ``id`` wins — and, for duplicate identities, by content digest
then occurrence.  Status ``included`` / ``trimmed`` → kept (``trimmed`` is
``altered: "trimmed"``); ``excluded-budget`` → dropped ``input_budget`` (legacy
``budget-exhausted``); ``removed`` → ``user_removed``; a candidate with no chip →
``invalid`` (unknown kind), ``input_budget`` (legacy ``candidate-cap``: beyond the first
64 candidates), ``duplicate`` (legacy ``dedup``: another candidate with the same chip id
got the chip) or ``unknown``.  Stated limits: the clamped token budget and the candidate
cap; the chip order is the Context Center's own ranking (``facts.order: priority``).  Token
estimates (``estimatedTokens``, ``allocatedTokens``), labels, freshness timestamps and
path separators are noise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shadow.boundary import mapping_at
from shadow.canonical import IDE_MAX_CANDIDATES, Canon, CanonItem
from shadow.fixtures import Capture
from shadow.projection import Drop, PItem, Projection, content_digest
from shadow.surfaces import alterations
from shadow.surfaces.cli_compress import error_category

_STATUS_REASON = {"excluded-budget": "budget-exhausted", "removed": "removed-by-user"}
_LEGACY_TO_CANON = {"budget-exhausted": "input_budget", "removed-by-user": "user_removed",
                    "candidate-cap": "input_budget", "invalid-kind": "invalid",
                    "dedup": "duplicate", "unknown": "unknown"}


def adapt(canon: Canon, capture: Capture, siblings: Mapping[str, Capture] | None = None
          ) -> Projection:
    ide = canon.ide
    assert ide is not None
    out = capture.output
    if capture.error is not None or not isinstance(out, Mapping):
        return Projection(canon.name, capture.name, "baseline", status="error",
                          error=error_category(capture.error), input_ids=ide.all_ids)
    by_variant: dict[str, list[str]] = {}
    for iid in ide.all_ids:
        for v in ide.chip_ids.get(iid, ()):
            by_variant.setdefault(v, []).append(iid)
    items_by_id: dict[str, CanonItem] = {ci.item_id: ci for ci in ide.items}
    used: set[str] = set()
    kept: list[PItem] = []
    drops: list[Drop] = []
    est: dict[str, Any] = {}
    scopes: dict[str, str] = {}
    unmatched = 0
    for chip in out.get("chips") or ():
        if not isinstance(chip, Mapping):
            continue
        raw_content = chip.get("content")
        content: str = raw_content if isinstance(raw_content, str) else ""
        digest = content_digest(content)
        cands = [i for i in by_variant.get(str(chip.get("id")), ()) if i not in used]
        exact = [i for i in cands if i in items_by_id and items_by_id[i].digest == digest]
        picked = exact or cands
        if not picked:
            unmatched += 1
            kept.append(PItem(id=f"~rewrite.{unmatched}", kind="rewrite", origin="derived",
                              digest=digest, length=len(content)))
            continue
        iid = picked[0]
        used.add(iid)
        ci = items_by_id.get(iid)
        status = str(chip.get("status"))
        est[iid] = [chip.get("estimatedTokens"), chip.get("allocatedTokens")]
        scopes[iid] = str(chip.get("scope"))
        if status in ("included", "trimmed") and ci is not None:
            detail: dict[str, Any] = {"ide_kind": str(chip.get("kind"))}
            altered = None
            if digest != ci.digest:
                altered = "trimmed" if status == "trimmed" else "rewritten"
                verdict = alterations.check(altered, ci.content, content)
                if verdict is not None:
                    detail["claim"], why = verdict
                    if why:
                        detail["why"] = why
            kept.append(PItem(
                id=iid, kind=ci.kind, origin="input", digest=digest, length=len(content),
                pinned=chip.get("pinned") is True, trust=ci.trust, sensitivity=ci.sensitivity,
                altered=altered, detail=detail))
        else:
            legacy = _STATUS_REASON.get(status) or str(chip.get("reason") or status)
            pinned = chip.get("pinned") is True or bool(ci and ci.pinned)
            drops.append(Drop(iid, _LEGACY_TO_CANON.get(legacy, "unknown"), legacy, pinned))
    chipped = {v for i in used for v in ide.chip_ids.get(i, ())}
    for n, iid in enumerate(ide.all_ids):
        if iid in used:
            continue
        if iid in ide.rejected:
            legacy = "invalid-kind"
        elif n >= IDE_MAX_CANDIDATES:
            legacy = "candidate-cap"
        elif chipped.intersection(ide.chip_ids.get(iid, ())):
            legacy = "dedup"  # another candidate with the same chip id got the chip
        else:
            legacy = "unknown"
        ci = items_by_id.get(iid)
        drops.append(Drop(iid, _LEGACY_TO_CANON[legacy], legacy, bool(ci and ci.pinned)))
    budget = mapping_at(out, "budget")
    return Projection(
        canon.name, capture.name, "baseline", input_ids=ide.all_ids, items=tuple(kept),
        dropped=tuple(sorted(drops, key=lambda d: d.id)),
        facts={"schema": str(out.get("schema")), "algorithm": str(out.get("selectionAlgorithm")),
               "budget_limit": budget.get("limitTokens"), "order": "priority",
               "limits": {"tokens": ide.budget, "candidates": IDE_MAX_CANDIDATES}},
        noise={"tokens": est, "allocated": budget.get("allocatedTokens"), "scopes": scopes},
    )
