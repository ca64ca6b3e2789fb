"""Does a candidate projection agree with its own circumstances?

After :func:`shadow.anchor.anchor` has replaced what a candidate may not decide (the items
it was offered, its limits, the recorded provider and memory truths), the projection must
still be *about* that input.  A candidate projection that is not — a kept or dropped item
the surface never offered, a derived item that names no source or hides the sketch of its
text, a memory surface without its memory (or memory on a
surface without any), two items with one identity, a record no operation created, a whole-surface
failure nothing justifies (``aborted`` without a cancelled provider call in the
recording, ``provider_usage_unsettled`` without a usage-less answer, any other design
outcome on an input every baseline processed; the ``context_over_budget`` refusal is
judged by :mod:`~shadow.divergence.claims`) — cannot be judged: it is
``candidate.unavailable`` (always blocking) with a ``problem`` word and the JSON
``pointer`` of the first offending field, never a GO.  A semantic summary committed
without any provider answer behind it is ``provider.degraded_masked`` (§17: only a
validated provider answer is a semantic summary).

The live kernel's projections satisfy every rule on the bundled corpus (a test holds it);
the rules exist for recorded candidates, whose files say whatever they were edited to say.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from shadow.canonical import CanonItem
from shadow.divergence import Violation
from shadow.projection import Projection, provider_calls

#: a derived text at least this long has a sketch (``provenance.MIN_TOKENS`` words fit in
#: far fewer characters); a longer one without it hides where its text came from
SKETCH_MIN_LENGTH: Final = 200
#: derived formats whose text holds no input text (ids and digests only)
NO_TEXT_FORMATS: Final = frozenset({"fallback"})
#: whole-surface failures the recording justifies: the anchored truth of the provider call
JUSTIFIED_BY_TRUTH: Final = {"aborted": "cancelled", "provider_usage_unsettled": "no-usage"}
#: the refusal, judged by ``claims`` against the protected items it names
REFUSAL: Final = "context_over_budget"
#: memory operations that may create records, and those whose records derive from evidence
WRITING_OPS: Final = frozenset({"add", "update", "consolidate", "propose", "import"})
DERIVING_OPS: Final = frozenset({"consolidate"})
#: the id prefix of a derived item (a candidate's summaries, markers)
DERIVED_PREFIX: Final = "~"


def _kernel_outcomes() -> frozenset[str]:
    """Every failure code the kernel defines (its error classes and §17 outcomes), and the
    candidate's own ``aborted`` (a cancelled provider call)."""
    import kernel.compaction.summary
    import kernel.memory.lifecycle
    import kernel.memory.service
    import kernel.outcomes
    from kernel.errors import KernelError

    found: set[str] = {"aborted", kernel.compaction.summary.PROVIDER_USAGE_UNSETTLED}
    stack: list[type[KernelError]] = [KernelError]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        code = getattr(cls, "default_code", None)
        if isinstance(code, str):
            found.add(code)
    for name in kernel.outcomes.__all__:
        code = getattr(getattr(kernel.outcomes, name), "code", None)
        if isinstance(code, str):
            found.add(code)
    return frozenset(found - {"kernel_error", "outcome"})  # the bases say nothing


KERNEL_OUTCOMES: Final = _kernel_outcomes()


def _unavailable(problem: str, pointer: str, ids: tuple[str, ...] = (),
                 **extra: Any) -> Violation:
    return Violation("candidate.unavailable", ids, {"problem": problem, "pointer": pointer,
                                                    **extra})


def check(p: Projection, baseline: Projection,
          cis: Mapping[str, CanonItem] | None = None) -> list[Violation]:
    """Violations of a (anchored) candidate projection against its own circumstances
    (``cis``: the canonical input items, for what an input item must keep)."""
    out: list[Violation] = []
    offered = set(p.input_ids)
    if offered:
        out += _items(p, offered)
    if cis:
        out += _reshaped(p, cis)
    out += _memory(p, baseline)
    out += _failure(p)
    out += _provider(p)
    return out


#: what a candidate may not change about an input item it keeps (role may be omitted;
#: raising it to system, a lost binding and a pending change have their own codes)
_FIXED: Final = ("kind", "pinned", "tool_outcome")


def _reshaped(p: Projection, cis: Mapping[str, CanonItem]) -> list[Violation]:
    for n, it in enumerate(p.items):
        ci = cis.get(it.id)
        if it.origin != "input" or ci is None:
            continue
        for key in _FIXED:
            if getattr(it, key) != getattr(ci, key) and not (
                    key == "kind" and it.kind == "system-policy"):  # trust.escalated
                return [_unavailable("input_item_reshaped", f"/items/{n}/{key}", (it.id,))]
        if it.role is not None and it.role != ci.role and it.role != "system":
            return [_unavailable("input_item_reshaped", f"/items/{n}/role", (it.id,))]
    return []


def _items(p: Projection, offered: set[str]) -> list[Violation]:
    out: list[Violation] = []
    seen: set[str] = set()
    dup = unknown = None
    for n, it in enumerate(p.items):
        if dup is None and it.id in seen:
            dup = _unavailable("duplicate_item", f"/items/{n}/id", (it.id,))
        if unknown is None and it.origin == "input" and it.id not in offered:
            unknown = _unavailable("unknown_input_item", f"/items/{n}/id")
        seen.add(it.id)
    out += [v for v in (dup, unknown) if v is not None]
    # a derived item of an earlier call of the same run ("~c1.summary.1") may be dropped and
    # covered again; it is accounted for by this projection's own drops or items
    earlier = {d.id for d in p.dropped if d.id.startswith(DERIVED_PREFIX)} | {
        it.id for it in p.items if it.origin == "derived"}
    for n, d in enumerate(p.dropped):
        if d.id not in offered and not d.id.startswith(DERIVED_PREFIX):
            out.append(_unavailable("unknown_dropped_item", f"/dropped/{n}/id"))
            break
    for n, it in enumerate(p.items):
        if it.origin != "derived":
            continue
        fmt = it.detail.get("format")
        if not it.covers:
            out.append(_unavailable("derived_without_sources", f"/items/{n}/covers",
                                    (it.id,)))
        elif any(c not in offered and c not in earlier for c in it.covers) or \
                not any(c in offered for c in it.covers):
            out.append(_unavailable("unknown_cover", f"/items/{n}/covers", (it.id,)))
        elif not isinstance(fmt, str):
            out.append(_unavailable("derived_without_format", f"/items/{n}/detail/format",
                                    (it.id,)))
        elif fmt not in NO_TEXT_FORMATS and it.length >= SKETCH_MIN_LENGTH and \
                not it.detail.get("shingles"):
            out.append(_unavailable("derived_without_sketch", f"/items/{n}/detail/shingles",
                                    (it.id,)))
    return out


def _memory(p: Projection, baseline: Projection) -> list[Violation]:
    if baseline.memory is not None and p.memory is None:
        return [_unavailable("memory_missing", "/memory")]
    if baseline.memory is None and p.memory is not None:
        return [_unavailable("memory_unexpected", "/memory")]
    if p.memory is None:
        return []
    asked = {o.index for o in baseline.memory.ops} if baseline.memory is not None else set()
    for n, o in enumerate(p.memory.ops):
        if o.index not in asked:
            return [_unavailable("unknown_operation", f"/memory/ops/{n}/index")]
        if o.created and o.op not in WRITING_OPS:
            return [_unavailable("creation_by_non_writing_op", f"/memory/ops/{n}/created")]
    created = {rid for o in p.memory.ops for rid in o.created}
    deleted = {rid for o in p.memory.ops for rid in o.deleted}
    consolidated = {rid for o in p.memory.ops if o.op in DERIVING_OPS for rid in o.created}
    for n, r in enumerate(p.memory.records):
        if r.id not in created:
            return [_unavailable("record_without_operation", f"/memory/records/{n}/id")]
        if r.state in ("deleted", "purged") and r.id not in deleted:
            return [_unavailable("deletion_without_operation", f"/memory/records/{n}/state")]
        if r.id in consolidated and not r.shingles:
            return [_unavailable("record_without_sketch", f"/memory/records/{n}/shingles")]
    return []


def _failure(p: Projection) -> list[Violation]:
    """A whole-surface failure: defined by the design and justified by the recording, or
    nothing to judge (the refusal is judged by ``claims`` on the items it names)."""
    if p.status != "error" or p.error == REFUSAL:
        return []
    if p.error not in KERNEL_OUTCOMES:  # a crash, an "internal error"
        return [_unavailable("undefined_failure", "/error", error=p.error or "unrecognised")]
    truth = JUSTIFIED_BY_TRUTH.get(str(p.error))
    if truth is None:  # a design outcome on an input every baseline processed
        return [_unavailable("failure_not_justified", "/error", error=p.error)]
    if p.provider is None or p.provider.truth != truth:
        return [_unavailable("failure_not_justified", "/error", error=p.error,
                             needs=f"recorded provider truth {truth}")]
    return []


def _call_truths(p: Projection) -> list[str | None]:
    """The recorded truth of each provider call of a capture, call 1 first: the earlier
    calls of a multi-call capture (``provider_history``), then the projection's own."""
    return [pr.truth if pr is not None else None for pr in provider_calls(p)]


def _summary_call(item_id: str, calls: int) -> int:
    """The call a derived summary came from: ``~c<k>.…`` is call k's (the id a summary keeps
    when a later call carries it over), any other the last call's."""
    m = re.match(r"~c(\d+)\.", item_id)
    return int(m.group(1)) if m else calls


def _unvalidated(p: Projection, semantic: list[str]) -> list[str]:
    """Semantic summaries whose own call had no validated answer (ok, or ok without usage;
    a call the recording says nothing about is not judged here)."""
    truths = _call_truths(p)
    out = []
    for sid in semantic:
        k = _summary_call(sid, len(truths))
        if not 1 <= k <= len(truths) or truths[k - 1] not in (None, "ok", "no-usage"):
            out.append(sid)  # a failed call's summary, or one naming a call never made
    return out


def _provider(p: Projection) -> list[Violation]:
    out: list[Violation] = []
    pr = p.provider
    asked = pr is not None and pr.requests > 0
    semantic = [it.id for it in p.items if it.origin == "derived" and it.kind == "summary"
                and it.detail.get("format") not in NO_TEXT_FORMATS]
    if semantic and not asked:
        out.append(Violation("provider.degraded_masked", tuple(semantic), {
            "why": "no_provider_answer", "requests": pr.requests if pr else 0}))
    elif semantic and pr is not None and _unvalidated(p, semantic):
        # §17: only a validated provider answer is a semantic summary — judged per call: an
        # earlier call's summary may outlive a later call that failed (successive compaction)
        bad = _unvalidated(p, semantic)
        out.append(Violation("provider.degraded_masked", tuple(bad), {
            "why": "semantic_summary_from_failed_answer", "truth": pr.truth}))
    if asked and "provider_inputs" not in p.facts:
        out.append(_unavailable("provider_inputs_missing", "/facts/provider_inputs"))
    return out


__all__ = ["SKETCH_MIN_LENGTH", "check"]
