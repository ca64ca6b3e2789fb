"""Which legacy pipeline step removed each source item a message surface did not keep.

The legacy compressors name the steps they ran (``stats.strategy``:
``snip+dedup+collapse+summarize+truncate``), not a reason per message, so the adapter
infers the step from the documented pipeline order and the output's shape
(docs/surfaces.md, "Drop reasons"); the divergence engine then checks each inferred claim
on the input (``shadow.divergence.claims``).  Per dropped item, first rule that holds:

1. ``tool-pair-repair`` — its own message is in the output with the calls stripped
   (only pair repair strips calls; ``unknown`` for a surface without it);
2. ``snip`` — the step ran and the message is one the documented snip removes (empty or
   whitespace content, a ``[PROCESSED]`` / ``[STALE]`` marker, a trivial tool result —
   ``ok``, ``{}``, ``null`` or under 3 characters — or an assistant text under 10
   characters), outside the first message and the last four;
3. ``dedup`` — a kept output message, or an earlier input message (dedup keeps a
   content's first copy, which a later step may still cut), has the same role and
   content;
4. ``collapse`` — it belongs to the run of tool-call and tool messages between the
   input messages kept on either side of a collapse marker;
5. ``summarize`` — a summary was produced (it replaces everything the earlier steps
   left but the system block and the last user request);
6. ``truncate`` — the step ran and the message is older than the oldest ordinary kept
   message (not system, not pinned, not the last user request): a recency cut;
7. ``tool-pair-repair`` — pair repair runs and the item is an orphan, or a result whose
   call is gone;
8. ``snip`` — it ran; ``truncate`` — it ran and kept no ordinary message (a message
   newer than the cut cannot have been cut);
9. ``dedup-similar`` — the (similarity-based) dedup ran;
10. ``unknown``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from shadow.canonical import CanonicalSession, CanonItem
from shadow.projection import Drop, PItem, content_digest
from shadow.surfaces._messages import Match, Source, text_of

#: legacy pipeline step -> canonical drop reason
LEGACY_TO_CANONICAL: Final[Mapping[str, str]] = {
    "dedup": "duplicate", "deduplication": "duplicate", "dedup-similar": "duplicate",
    "tool-pair-repair": "tool_pair_repair",
    "collapse": "collapsed", "summarize": "summarized", "summarization": "summarized",
    "truncate": "input_budget", "truncation": "input_budget", "snip": "input_budget",
    "budget-exhausted": "input_budget", "excluded-budget": "input_budget",
    "candidate-cap": "input_budget", "removed-by-user": "user_removed",
    "invalid-kind": "invalid", "not-persisted": "not_persisted", "unknown": "unknown",
}
DEDUP: Final = frozenset({"dedup", "deduplication"})
TRUNCATE: Final = frozenset({"truncate", "truncation"})
COVER_REASON: Final = {"summary": "summarized", "collapse-marker": "collapsed"}


def strategy_steps(strategy: Any) -> list[str]:
    if not isinstance(strategy, str):
        return []
    return [p.strip() for p in re.split(r"[+,]", strategy) if p.strip() and p.strip() != "none"]


def snipped(msg: Mapping[str, Any], pos: int, total: int) -> bool:
    """The documented snip rule (CLI ``CONTEXT_SNIP``) for the message at ``pos``."""
    if pos == 0 or pos >= total - 4:
        return False
    content = text_of(msg)
    if not content.strip() or "[PROCESSED]" in content or "[STALE]" in content:
        return True
    role = msg.get("role")
    if role == "tool" and (content in ("ok", "{}", "null") or len(content) < 3):
        return True
    return role == "assistant" and len(content) < 10


def _collapse_runs(sources: Sequence[Source], match: Match, canon: CanonicalSession,
                   snip_on: bool) -> set[int]:
    """Source indexes a collapse marker replaced (runs between kept input neighbours)."""
    out: set[int] = set()
    seq_of = {i: s.seq for i, s in enumerate(sources) if s.seq is not None}
    kept_pos = sorted(i for i in match.kept_sources if i in seq_of)
    markers = [n for n, it in enumerate(match.items) if it.kind == "collapse-marker"]
    if not markers:
        return out
    order = {it.id: n for n, it in enumerate(match.items)}
    by_id = canon.by_id
    pos_of_source: dict[int, int] = {}
    for i in kept_pos:
        ids = canon.message_items.get(sources[i].seq or 0, ())
        first = min((order[x] for x in ids if x in order), default=None)
        if first is not None:
            pos_of_source[i] = first
    for m in markers:
        before = [i for i, p in pos_of_source.items() if p < m]
        after = [i for i, p in pos_of_source.items() if p > m]
        lo = max(before, default=-1)
        hi = min(after, default=len(sources))
        for i in range(lo + 1, hi):
            s = sources[i]
            if s.seq is None or i in match.kept_sources:
                continue
            if snip_on and snipped(s.msg, i, len(sources)):
                continue
            role = s.msg.get("role")
            tool_msg = role == "tool" or (role == "assistant" and s.msg.get("tool_calls"))
            if tool_msg and all(x in by_id for x in canon.message_items.get(s.seq, ())):
                out.add(i)
    return out


def infer_drops(sources: Sequence[Source], match: Match, canon: CanonicalSession,
                strategy: Sequence[str], output: Sequence[Any], *,
                pair_repair: bool = True) -> list[Drop]:
    """Canonical drop reasons for source items the output does not hold (the rules in
    the module docstring; the legacy step is kept as ``legacy_reason``)."""
    kept_ids = {it.id for it in match.items}
    kept_texts = {(m.get("role"), content_digest(text_of(m)))
                  for m in output if isinstance(m, Mapping)}
    kinds = {it.kind for it in match.items if it.origin == "derived"}
    steps = set(strategy)
    by_id = canon.by_id
    kept_seqs = {sources[i].seq for i in match.kept_sources if sources[i].seq is not None}
    collapsed = _collapse_runs(sources, match, canon, "snip" in steps) \
        if "collapse-marker" in kinds else set()
    ordinary = [by_id[i].seq for i in kept_ids if i in by_id and by_id[i].role != "system"
                and not by_id[i].shielded]
    cut = min(ordinary) if steps & TRUNCATE and ordinary else None
    groups: dict[str, list[str]] = {}  # call id -> the call group's members
    for it in canon.items:
        if it.tool_call_id:
            groups.setdefault(it.tool_call_id, []).append(it.item_id)
    first: dict[tuple[Any, str], int] = {}  # the legacy dedup keeps a content's first copy
    for pos, s in enumerate(sources):
        if s.derived is None and s.msg.get("role") != "system":
            first.setdefault((s.msg.get("role"), content_digest(text_of(s.msg))), pos)
    drops: list[Drop] = []
    for pos, s in enumerate(sources):
        if s.derived is not None:
            if s.derived.id not in kept_ids:
                drops.append(Drop(s.derived.id, "summarized" if "summary" in kinds else "unknown",
                                  "summarize" if "summary" in kinds else None))
            continue
        own_kept = s.seq in kept_seqs
        for iid in canon.message_items.get(s.seq or 0, ()):
            if iid in kept_ids:
                continue
            ci = by_id[iid]
            text_key = (s.msg.get("role"), content_digest(text_of(s.msg)))
            if own_kept:
                legacy = "tool-pair-repair" if pair_repair else "unknown"
            elif "snip" in steps and snipped(s.msg, pos, len(sources)):
                legacy = "snip"
            elif (DEDUP & steps or not steps) and (
                    text_key in kept_texts or first.get(text_key, pos) < pos):
                legacy = "dedup"
            elif pos in collapsed:
                legacy = "collapse"
            elif "summary" in kinds:
                legacy = "summarize"
            elif cut is not None and ci.seq < cut:
                legacy = "truncate"
            elif pair_repair and (ci.detail.get("orphan") or (
                    ci.tool_role and _partner_gone(ci, kept_ids, groups))):
                legacy = "tool-pair-repair"
            elif "snip" in steps and not (steps & TRUNCATE and cut is None):
                legacy = "snip"
            elif steps & TRUNCATE and cut is None:  # nothing ordinary kept: all was cut
                legacy = "truncate"
            elif DEDUP & steps:  # newer than the cut: not a recency cut
                legacy = "dedup-similar"  # the legacy dedup is similarity-based
            else:
                legacy = "unknown"
            drops.append(Drop(iid, LEGACY_TO_CANONICAL[legacy], legacy, ci.shielded))
    return drops


def _partner_gone(ci: CanonItem, kept: set[str], groups: Mapping[str, list[str]]) -> bool:
    """A *result* whose call is gone: pair repair removes it.  A call whose result is also
    gone was removed by an earlier step (repair only strips calls from kept messages)."""
    if ci.tool_role != "result" or not ci.tool_call_id:
        return False
    return any(o != ci.item_id and o not in kept for o in groups.get(ci.tool_call_id, ()))


def with_covers(match: Match, drops: Sequence[Drop], trust_of: Mapping[str, str],
                sens_of: Mapping[str, str] | None = None) -> None:
    """Fill ``covers`` (and the least trust / highest sensitivity of what they replace)
    on derived items."""
    order = ("host", "verified", "user", "external", "untrusted")
    sens_order = ("public", "internal", "personal", "secret", "restricted")
    for kind, reason in COVER_REASON.items():
        covered = tuple(sorted(d.id for d in drops if d.reason == reason))
        ranks = [order.index(trust_of[c]) for c in covered if trust_of.get(c) in order]
        trust = order[max(ranks)] if ranks else None
        sranks = [sens_order.index(sens_of[c]) for c in covered
                  if sens_of and sens_of.get(c) in sens_order]
        fresh: dict[str, PItem] = {}
        for n, it in enumerate(match.items):
            if it.origin == "derived" and it.kind == kind and not it.covers:
                own = sens_order.index(it.sensitivity) if it.sensitivity in sens_order else 1
                sens = sens_order[max([own, *sranks])] if sranks or it.sensitivity else None
                match.items[n] = fresh[it.id] = replace(it, covers=covered,
                                                        trust=trust or it.trust,
                                                        sensitivity=sens)
        for n, src in enumerate(match.next_sources):
            if src.derived is not None and src.derived.id in fresh:
                match.next_sources[n] = Source(src.msg, None, fresh[src.derived.id])
