"""The pluggable candidate: what the harness judges against each legacy surface.

* :class:`KernelCandidate` — the live Python kernel.  For each (fixture, surface) it
  runs ``kernel.planning.planner.plan_context`` on the scenario's canonical items with the
  policy matching the surface's configuration (window and thresholds from
  ``kernel.packets.profiles``, overrides from the capture's ``options``), summarizes with the
  *recorded* provider answer (``shadow.recorded_provider``, the only way to get one)
  and returns a :class:`~shadow.projection.Projection`.  It reads a capture's options
  and call structure, never its output.  Memory scenarios run every canonical memory
  command through ``kernel.memory.service.MemoryKernel`` (``shadow.memory_candidate``).
* :class:`RecordedCandidate` — a folder written by ``--record-candidate DIR`` (or by
  any other implementation of the design) in the documented projection format.

Surface policies are documented in docs/surfaces.md ("Candidate policy").
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Final, Protocol

from kernel.errors import KernelError
from kernel.packets.profiles import auto_compact_tokens, resolve_profile
from kernel.planning.tokens import cjk_estimate
from shadow import memory_candidate
from shadow.boundary import load_path, mapping_at
from shadow.canonical import Canon, CanonItem, headless_persisted, scope_id_of
from shadow.compaction_harness import AdvancingPort
from shadow.divergence.provenance import text_sketches
from shadow.errors import InputError, SideEffectError
from shadow.fixtures import Capture, compaction_source
from shadow.projection import (
    Drop,
    PItem,
    Projection,
    ProviderOutcome,
    SideEffect,
    content_digest,
    dumps,
    from_wire,
)
from shadow.projection_wire import CODE, ID
from shadow.recorded_provider import parse_summary, recorded_answer
from shadow.surfaces._messages import summary_doc, summary_fields

CANDIDATE_SCHEMA: Final = "shadow-candidate/v1"
PlanFn = Callable[[Mapping[str, Any]], dict[str, Any]]
#: one planner call: its request and the plan, or the kernel's refusal
PlanCall = tuple[Mapping[str, Any], "dict[str, Any] | KernelError"]
_TRUST = ("host", "verified", "user", "external", "untrusted")
_SENS = ("public", "internal", "personal", "secret", "restricted")
PROVIDER_ENTRIES: Final = {
    "cli.provider-compaction":
        "packages/cli/src/harness/provider-backed-compaction.js#compactConversationWithProvider",
    "desktop.compress":
        "desktop-app-vue/src/main/llm/prompt-compressor.js#PromptCompressor.compress",
}


class Candidate(Protocol):
    @property
    def identity(self) -> Mapping[str, Any]: ...

    def project(self, canon: Canon, capture: Capture,
                siblings: Mapping[str, Capture]) -> Projection: ...


def base_name(capture_name: str) -> str:
    return capture_name.removesuffix(".raw-wire")


def _default_plan(request: Mapping[str, Any]) -> dict[str, Any]:
    from kernel.planning.planner import plan_context

    return plan_context(request, profile="jcs")


@dataclass(frozen=True, slots=True)
class _Work:
    """One item offered to a planning step (canonical or derived by an earlier call)."""

    pid: str  # projection id
    wire: Mapping[str, Any]
    order: tuple[int, int]
    item: PItem


@dataclass(frozen=True, slots=True)
class _Policy:
    window: int
    reserved: int
    safety: int
    ceilings: Mapping[str, int] | None = None
    summarize: tuple[str, str] | None = None  # (surface, entry) of the recorded provider
    profile: str = "unknown"
    sink: str = "provider"


class KernelCandidate:
    """The live kernel (planner + recorded summarizer + memory kernel)."""

    def __init__(self, plan_fn: PlanFn | None = None,
                 recordings: str | Path | None = None) -> None:
        self._plan = plan_fn or _default_plan
        self._recordings = None if recordings is None else str(recordings)
        self.identity = {
            "kind": "kernel",
            "implementation": "context-kernel-parity (python)",
            "planner": "kernel.planning.planner.plan_context" if plan_fn is None else "injected",
            "summarizer": "recorded provider answers (shadow.recorded_provider: "
                          + ("vcrpy cassettes" if recordings is not None else "captures")
                          + ")",
            "memory": memory_candidate.IDENTITY,
            "policy": "shadow-policy/v1",
        }

    @property
    def serves(self) -> bool:
        """Whether this is the kernel's own planner (what ``shadow app-server`` runs), so
        its served surfaces can be judged against it (:mod:`shadow.served`)."""
        return self._plan is _default_plan

    def with_planner(self, plan_fn: PlanFn) -> KernelCandidate:
        """The same candidate (recordings included) planning with ``plan_fn``."""
        return KernelCandidate(plan_fn, self._recordings)

    def recording(self) -> tuple[KernelCandidate, list[PlanCall]]:
        """The same candidate, keeping each of its planner's calls in order: (request,
        the plan or the :class:`KernelError` it raised) — what a served surface sends."""
        calls: list[PlanCall] = []
        inner = self._plan

        def plan(request: Mapping[str, Any]) -> dict[str, Any]:
            try:
                out = inner(request)
            except KernelError as exc:
                calls.append((request, exc))
                raise
            calls.append((request, out))
            return out

        return KernelCandidate(plan, self._recordings), calls

    # -- dispatch ------------------------------------------------------------------------
    def project(self, canon: Canon, capture: Capture,
                siblings: Mapping[str, Capture]) -> Projection:
        name = base_name(capture.name)
        if canon.kind == "memory":
            return memory_candidate.project(canon, capture.name)
        if canon.kind == "ide":
            return self._ide(canon, capture)
        if name == "cli.jsonl-session":
            return self._jsonl(canon, capture, siblings)
        return self._messages(canon, capture)

    # -- messages ------------------------------------------------------------------------
    def _policy(self, canon: Canon, capture: Capture) -> _Policy:
        return surface_policy(canon, capture)

    def _messages(self, canon: Canon, capture: Capture) -> Projection:
        session = canon.session
        assert session is not None
        policy = self._policy(canon, capture)
        sid = scope_id_of(canon.name)
        ncalls = len(capture.calls) if capture.calls else 1
        first, end = session.batches[0]
        work = [_from_canon(ci, sid) for ci in session.items_for(range(first, end))]
        offered = [w.pid for w in work]
        provider = _ProviderLog()
        side: list[SideEffect] = []
        kept: list[_Work] = []
        drops: dict[str, Drop] = {}  # every call's drops; a later call's verdict wins
        facts: dict[str, Any] = {"limits": {"tokens": policy.window - policy.reserved
                                            - policy.safety}}
        history: list[dict[str, Any]] = []  # the provider outcome after each earlier call
        for k in range(ncalls):
            outcome = provider.outcome(policy) if k else None
            if outcome is not None:
                history.append(asdict(outcome))
                facts["provider_history"] = list(history)
            if k > 0 and k < len(session.batches):
                b0, b1 = session.batches[k]
                extra = [_from_canon(ci, sid) for ci in session.items_for(range(b0, b1))]
                work = kept + extra
                offered += [w.pid for w in extra]
            prefix = f"c{k + 1}." if k < ncalls - 1 else ""
            try:
                kept, step_drops = self._step(canon, policy, work, prefix, provider, side)
            except KernelError as exc:
                return Projection(canon.name, capture.name, "candidate", status="error",
                                  error=getattr(exc, "code", type(exc).__name__),
                                  input_ids=tuple(offered), side_effects=tuple(side),
                                  provider=provider.outcome(policy),
                                  facts={**facts, **_error_detail(exc, provider)})
            except _Aborted:
                return Projection(canon.name, capture.name, "candidate", status="error",
                                  error="aborted", input_ids=tuple(offered),
                                  side_effects=tuple(side), provider=provider.outcome(policy),
                                  facts={**facts, **provider.facts()})
            drops.update((d.id, d) for d in step_drops)
        kept_ids = {w.pid for w in kept}
        return Projection(
            canon.name, capture.name, "candidate", input_ids=tuple(offered),
            items=tuple(w.item for w in kept),
            dropped=tuple(sorted((d for i, d in drops.items() if i not in kept_ids),
                                 key=lambda d: d.id)),
            provider=provider.outcome(policy), side_effects=tuple(side),
            facts={**facts, **provider.facts()},
            noise={"selectedTokens": sum(int(w.wire["tokenEstimate"]) for w in kept)},
        )

    def _request(self, canon: Canon, policy: _Policy, work: Sequence[_Work]) -> dict[str, Any]:
        req: dict[str, Any] = {
            "modelWindowTokens": max(1, policy.window),
            "reservedOutputTokens": policy.reserved,
            "safetyMarginTokens": policy.safety,
            "recoveryReserveTokens": 0,
            "items": [dict(w.wire) for w in work],
            "sink": policy.sink,
            "scopeAdmissions": [{"scope": "session", "scopeId": scope_id_of(canon.name)}],
            "policyVersion": "shadow-policy/v1",
            "modelProfile": policy.profile,
            "sessionHead": f"head:{len(work)}",
            "memoryRevision": 0,
            "now": "2026-08-20T12:00:00.000Z",
        }
        if policy.ceilings is not None:
            req["partitionCeilings"] = dict(policy.ceilings)
        return req

    def _step(self, canon: Canon, policy: _Policy, work: list[_Work], prefix: str,
              provider: _ProviderLog, side: list[SideEffect]) -> tuple[list[_Work], list[Drop]]:
        plan = self._plan(self._request(canon, policy, work))
        by_pid = {w.wire["itemId"]: w for w in work}
        selected = {i for i in plan["selectedItemIds"]}
        kept = sorted((w for w in work if w.wire["itemId"] in selected), key=lambda w: w.order)
        drops = [Drop(by_pid[d["itemId"]].pid, str(d["reason"]), None, bool(d.get("protected")))
                 for d in plan["dropped"]]
        budget_dropped = [by_pid[d["itemId"]] for d in plan["dropped"]
                          if d["reason"] in ("input_budget", "partition_ceiling")]
        total = sum(int(w.wire["tokenEstimate"]) for w in work)
        overflow = total > policy.window - policy.reserved - policy.safety
        if policy.summarize is None or not budget_dropped or not (
                overflow or policy.ceilings is not None):
            return kept, drops  # compaction triggers on overflow (or when forced)
        surface, entry = policy.summarize
        call = provider.requests + 1
        provider.requests += 1
        provider.inputs.extend(w.pid for w in budget_dropped)
        try:
            answer = recorded_answer(canon.doc, surface, entry, call, self._recordings)
        except SideEffectError:
            side.append(SideEffect("provider_request", f"{surface}:{entry.split('#')[0]}#{call}",
                                   recorded=False))
            provider.note("degraded", degraded=True, reason="no_recording", usage="none")
            text, fallback = _fallback_text(budget_dropped), True
        else:
            provider.recorded += 1
            provider.truth = answer.truth
            if answer.truth == "cancelled":
                provider.note("aborted", cancelled=True, usage="none")
                raise _Aborted
            if answer.truth == "no-usage" or (answer.truth == "error" and answer.outcome_unknown):
                # §8.2/§17: an unsettled or unknown outcome is reconciled, never committed
                provider.note("reconciliation_required", degraded=False, usage="unknown")
                return sorted(work, key=lambda w: w.order), []  # nothing is committed
            handoff = parse_summary(answer.content) if answer.truth == "ok" else None
            if handoff is not None:
                provider.note("committed", degraded=False, usage="known")
                text = json.dumps(handoff, ensure_ascii=False)
                fallback = False
            else:  # invalid answer or provider failure: deterministic fallback, degraded
                if answer.truth == "error":
                    reason = "provider_not_reached" if answer.not_sent else "provider_failed"
                else:
                    problem, _detail = answer.problem
                    reason = f"invalid_summary:{problem or 'invalid'}"
                provider.note("degraded", degraded=True, reason=reason,
                              usage="known" if answer.usage else "none")
                text, fallback = _fallback_text(budget_dropped), True
        covered = sorted(w.pid for w in budget_dropped)
        summary = _summary_work(canon, prefix, text, budget_dropped, fallback)
        drops = [replace(d, reason="summarized") if d.id in covered else d for d in drops]
        summary = replace(summary, item=replace(summary.item, covers=tuple(covered)))
        return sorted([*kept, summary], key=lambda w: w.order), drops

    # -- JSONL session store ---------------------------------------------------------------
    def _jsonl(self, canon: Canon, capture: Capture,
               siblings: Mapping[str, Capture]) -> Projection:
        src_capture = compaction_source(capture, siblings)
        if src_capture is None:
            return Projection(canon.name, capture.name, "candidate", status="error",
                              error="no_compaction_source")
        src = self._messages(canon, replace(src_capture, calls=capture.calls or
                                            src_capture.calls))
        settlement = "ok"
        if src.status == "error" and src.error == "aborted":
            # a cancelled compaction commits nothing: the store keeps the whole history
            src, settlement = self._unchanged(canon, src), "aborted"
        elif _cas_race(canon) and src.status == "ok" and not _kernel_cas_commits():
            # a second writer moved the head between the read and the commit: the kernel's
            # compare-and-swap refuses the compact event, nothing is committed
            src, settlement = self._unchanged(canon, src), "stale"
        by_id = canon.session.by_id if canon.session else {}
        kept, dropped = [], list(src.dropped)
        for it in src.items:
            ci = by_id.get(it.id)
            if ci is not None and ci.role == "system" and not ci.detail.get("prior"):
                dropped.append(Drop(it.id, "not_persisted", None, False))
            else:
                kept.append(it)
        dropped = [d for d in dropped if not (by_id.get(d.id) and by_id[d.id].role == "system"
                                              and d.reason != "not_persisted"
                                              and not by_id[d.id].detail.get("prior"))]
        return replace(src, surface=capture.name, items=tuple(kept),
                       dropped=tuple(sorted(dropped, key=lambda d: d.id)),
                       facts={**dict(src.facts), "chain": "verified", "replay": "consistent",
                              "settlement": settlement})

    def _unchanged(self, canon: Canon, src: Projection) -> Projection:
        """The persisted history with no compaction applied (every offered input item)."""
        session = canon.session
        assert session is not None
        sid = scope_id_of(canon.name)
        seqs = [q for b in session.batches for q in range(*b)]
        offered = session.items_for(seqs)
        kept = headless_persisted(offered)
        items = tuple(_from_canon(ci, sid).item for ci in offered if ci.item_id in kept)
        dropped = tuple(Drop(ci.item_id, "not_persisted", None, False) for ci in offered
                        if ci.item_id not in kept)
        return replace(src, status="ok", error=None, items=items, dropped=dropped)

    # -- IDE context center --------------------------------------------------------------
    def _ide(self, canon: Canon, capture: Capture) -> Projection:
        ide = canon.ide
        assert ide is not None
        sid = scope_id_of(canon.name)
        drops = [Drop(i, r, None, False) for i, r in sorted(ide.rejected.items())]
        work = []
        for ci in ide.items:
            if ci.item_id in ide.removed:
                drops.append(Drop(ci.item_id, "user_removed", None, ci.pinned))
            else:
                w = _from_canon(ci, sid)
                work.append(replace(w, wire={**w.wire, "priority": len(ide.all_ids) - ci.seq}))
        policy = _Policy(max(1, ide.budget), 0, 0, profile="ide/context-center",
                         sink="provider.ide")
        facts: dict[str, Any] = {"order": "priority", "limits": {"tokens": max(1, ide.budget)}}
        try:
            plan = self._plan(self._request(canon, policy, work))
        except KernelError as exc:
            return Projection(canon.name, capture.name, "candidate", status="error",
                              error=getattr(exc, "code", type(exc).__name__),
                              input_ids=ide.all_ids, dropped=tuple(drops),
                              facts={**facts, **_error_detail(exc, None)})
        by_pid = {w.wire["itemId"]: w for w in work}
        items = tuple(by_pid[i].item for i in plan["selectedItemIds"])
        drops += [Drop(d["itemId"], str(d["reason"]), None, bool(d.get("protected")))
                  for d in plan["dropped"]]
        return Projection(canon.name, capture.name, "candidate", input_ids=ide.all_ids,
                          items=items, dropped=tuple(sorted(drops, key=lambda d: d.id)),
                          facts=facts, noise={"selectedTokens": plan.get("selectedTokens")})


def surface_policy(canon: Canon, capture: Capture) -> _Policy:
    """The candidate policy of a message surface (docs/surfaces.md, "Candidate policy")."""
    name = base_name(capture.name)
    ctor = mapping_at(capture.options, "constructor")
    model = canon.doc.get("model") or {}
    provider = str(ctor.get("provider") or capture.options.get("provider")
                   or model.get("provider") or "unknown")
    model_name = str(ctor.get("model") or capture.options.get("model")
                     or model.get("model") or "unknown")
    prof = resolve_profile(provider, model_name)
    ident = f"{prof.provider}/{prof.model}"
    sink = f"provider.{prof.provider}"
    if name == "desktop.compress":
        budget = int(ctor.get("maxTotalTokens") or 4000)
        summarizer = None
        if ctor.get("llmManager") and ctor.get("enableSummarization", True):
            summarizer = ("desktop", PROVIDER_ENTRIES[name])
        return _Policy(budget, 0, 0, None, summarizer, ident, sink)
    if name == "desktop.context-engineering":
        return _Policy(prof.context_window, prof.output_reserve, prof.safety_margin,
                       profile=ident, sink=sink)
    budget = int(ctor.get("maxTokens") or 0) or auto_compact_tokens(prof)
    safety = max(0, prof.context_window - prof.output_reserve - budget)
    if budget > prof.context_window - prof.output_reserve:
        return _Policy(budget, 0, 0, profile=ident, sink=sink)
    if name == "cli.provider-compaction":
        ceilings = None
        if capture.options.get("force"):
            ceilings = {"trusted-system": budget, "working-state": 0, "tools-and-skills": 0,
                        "conversation": 0, "tool-evidence": 0, "memory-and-rules": 0}
        return _Policy(prof.context_window, prof.output_reserve, safety, ceilings,
                       ("cli", PROVIDER_ENTRIES[name]), ident, sink)
    return _Policy(prof.context_window, prof.output_reserve, safety, profile=ident,
                   sink=sink)


class _Aborted(Exception):
    pass


class _ProviderLog:
    def __init__(self) -> None:
        self.requests = 0
        self.recorded = 0
        self.truth: str | None = None
        self.status = "none"
        self.degraded: bool | None = None
        self.reason: str | None = None
        self.usage: str | None = None
        self.cancelled = False
        self.inputs: list[str] = []  # ids handed to the summarizer (the provider sink)

    def facts(self) -> dict[str, Any]:
        return {"provider_inputs": sorted(set(self.inputs))} if self.inputs else {}

    def note(self, status: str, *, degraded: bool | None = None, reason: str | None = None,
             usage: str | None = None, cancelled: bool = False) -> None:
        self.status, self.reason, self.usage = status, reason, usage
        self.degraded = degraded if degraded is not None else self.degraded
        self.cancelled = self.cancelled or cancelled

    def outcome(self, policy: _Policy) -> ProviderOutcome | None:
        if policy.summarize is None:
            return None
        return ProviderOutcome(status=self.status, requests=self.requests,
                               recorded=self.recorded, degraded=self.degraded,
                               degraded_reason=self.reason, usage=self.usage,
                               cancelled=self.cancelled, truth=self.truth)


_ERROR_DETAIL_KEYS: Final = ("protectedItemIds", "requiredTokens", "selectableBudget",
                              "inputBudget", "usedTokens")


def _error_detail(exc: KernelError, provider: _ProviderLog | None) -> dict[str, Any]:
    """Ids and counts of a refusal (never a message body), for the report."""
    raw = getattr(exc, "details", None)
    detail = {k: raw[k] for k in _ERROR_DETAIL_KEYS if isinstance(raw, Mapping) and k in raw}
    out: dict[str, Any] = {"error_detail": detail} if detail else {}
    return {**out, **(provider.facts() if provider is not None else {})}


def _cas_race(canon: Canon) -> bool:
    """The input stages a second writer before the compact commit (``session_store``)."""
    store = canon.doc.get("session_store")
    return isinstance(store, Mapping) and bool(store.get("cas_race"))


def _kernel_cas_commits() -> bool:
    """Ask the kernel's own session port: does a compact event commit against the head it
    read when another writer has appended since?  (It must not: design 108 §8.2.)"""
    port = AdvancingPort(advance_to="head:concurrent-writer")
    port.seed("race", head="head:read", memory_revision=0, items=[])
    snapshot = port.read_snapshot("race")
    assert snapshot is not None
    event = {"sessionId": "race", "operationId": "op-race", "expectedHead": snapshot.head}
    return port.append_compaction(event, snapshot.head).ok


def _from_canon(ci: CanonItem, scope_id: str) -> _Work:
    # the kernel renders only host/verified content with the system role
    role = None if ci.role == "system" and ci.trust not in ("host", "verified") else ci.role
    item = PItem(id=ci.item_id, kind=ci.kind, origin="input", digest=ci.digest,
                 length=len(ci.content), role=role, tool_call_id=ci.tool_call_id,
                 tool_role=ci.tool_role, tool_outcome=ci.tool_outcome, pinned=ci.pinned,
                 trust=ci.trust, sensitivity=ci.sensitivity,
                 detail={"orphan": True} if ci.detail.get("orphan") else {})
    sub = int(ci.item_id.rsplit(".c", 1)[1]) if ".c" in ci.item_id.rsplit(":", 1)[-1] else 0
    return _Work(ci.item_id, ci.wire(scope_id), (ci.seq, sub), item)


def _fallback_text(dropped: Sequence[_Work]) -> str:
    """Deterministic fallback: the replaced identities and their digests, no bodies."""
    return json.dumps({"fallback": "deterministic",
                       "replaced": [[w.pid, w.item.digest] for w in
                                    sorted(dropped, key=lambda w: w.order)]})


def _summary_work(canon: Canon, prefix: str, text: str, covered: Sequence[_Work],
                  fallback: bool) -> _Work:
    trust = _TRUST[max(_TRUST.index(str(w.wire["trust"])) for w in covered)]
    sens = _SENS[max(_SENS.index(str(w.wire["sensitivity"])) for w in covered)]
    pid = f"~{prefix}summary.1"
    first = min(w.order for w in covered)
    seq = first[0]
    wire = {
        "schemaVersion": 1, "itemId": f"{canon.name}:d.{prefix}summary.1", "kind": "message",
        "scope": "session", "scopeId": scope_id_of(canon.name),
        "sourceRef": {"store": "shadow-candidate", "id": f"{canon.name}:d.{prefix}summary.1",
                      "eventSequence": seq},
        "provenance": {"source": "compactor", "observedAt": "2026-08-20T12:00:00.000Z"},
        "trust": trust, "sensitivity": sens,
        "allowedSinks": ["*"] if sens not in ("secret", "restricted") else ["local"],
        "tokenEstimate": max(1, cjk_estimate(text)), "priority": seq + 1, "pinned": False,
        "createdAt": "2026-08-20T12:00:00.000Z", "content": text,
    }
    fields = {"format": "fallback", "length": len(text)} if fallback else summary_fields(text)
    sk = {} if fallback else text_sketches(text, summary_doc(text)[1])
    if sk:
        fields = {**fields, "shingles": sk}
    item = PItem(id=pid, kind="summary", origin="derived", digest=content_digest(text),
                 length=len(text), trust=trust, sensitivity=sens, detail=fields)
    return _Work(pid, wire, (first[0], first[1] - 1), item)


# --------------------------------------------------------------------------- recorded


#: a recorded candidate's self-description (shown in reports): short printable values
_IDENTITY_VALUE: Final = re.compile(r"^[^\x00-\x1f\x7f<>\ud800-\udfff]{0,120}$")


def _check_identity(meta: Path, ident: Mapping[str, Any]) -> None:
    if len(ident) > 16:
        raise InputError(meta, "/identity", "at most 16 identity fields", f"{len(ident)}")
    for key, value in ident.items():
        if not CODE.match(str(key)):
            raise InputError(meta, "/identity", "identity keys that are code words",
                             f"a key of {len(str(key))} characters")
        ok = value is None or isinstance(value, (bool, int)) or (
            isinstance(value, str) and _IDENTITY_VALUE.match(value))
        if not ok:
            raise InputError(meta, f"/identity/{key}", "a short printable value (at most "
                             "120 characters, no markup or control characters)",
                             type(value).__name__)


class RecordedCandidate:
    """A folder of projections in the documented format (``--candidate DIR``)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        meta = self.root / CANDIDATE_FILE
        if not meta.is_file():
            raise InputError(meta, "", "a recorded candidate folder with candidate.json",
                             "no such file")
        doc = load_path(meta)
        if not isinstance(doc, Mapping) or doc.get("schema") != CANDIDATE_SCHEMA:
            raise InputError(meta, "/schema", repr(CANDIDATE_SCHEMA), "something else")
        ident = doc.get("identity")
        ident = dict(ident) if isinstance(ident, Mapping) else {}
        _check_identity(meta, ident)
        self.identity = {**ident, "kind": "recorded", "recorded_kind": ident.get("kind"),
                         "folder": self.root.name}

    def project(self, canon: Canon, capture: Capture,
                siblings: Mapping[str, Capture]) -> Projection:
        path = self.root / canon.name / f"{capture.name}.projection.json"
        if not path.is_file():  # an incomplete recording is refused, never judged GO
            raise InputError(path, "", "a recorded projection for every judged fixture and "
                             "surface (record it with --record-candidate)", "no such file")
        p = from_wire(load_path(path), str(path), candidate=True)
        if p.fixture != canon.name or p.surface != capture.name:
            wrong = p.fixture if p.fixture != canon.name else p.surface
            raise InputError(path, "/fixture" if p.fixture != canon.name else "/surface",
                             f"{canon.name} / {capture.name}",
                             repr(wrong) if ID.match(wrong) and len(wrong) <= 64
                             else f"a string of {len(wrong)} characters")
        return replace(p, producer="candidate")


#: the file that marks a recorded candidate folder
CANDIDATE_FILE: Final = "candidate.json"


def write_recorded(root: Path | str, identity: Mapping[str, Any],
                   projections: Sequence[Projection]) -> None:
    """Write a recorded candidate folder (``--record-candidate DIR``)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    meta = {"schema": CANDIDATE_SCHEMA, "identity": dict(identity)}
    (root / CANDIDATE_FILE).write_text(json.dumps(meta, sort_keys=True, indent=1) + "\n",
                                         encoding="utf-8")
    for p in projections:
        d = root / p.fixture
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{p.surface}.projection.json").write_text(dumps(p), encoding="utf-8")


def make_candidate(spec: str | None, recordings: str | Path | None = None) -> Candidate:
    """The candidate to judge.  Every cassette of ``recordings`` is parsed and checked
    first (:func:`shadow.providers.cassettes.validate_recordings`): a broken one is an
    :class:`InputError` naming the file, before any replay — never a candidate that
    merely lacks answers."""
    if recordings is not None:
        from shadow.providers.cassettes import validate_recordings

        if not Path(recordings).is_dir():
            raise InputError(recordings, "", "--recordings: a recordings folder",
                             "no such folder")
        validate_recordings(recordings)
    if spec in (None, "", "kernel"):
        return KernelCandidate(recordings=recordings)
    return RecordedCandidate(spec)
