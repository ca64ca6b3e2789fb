"""Canonical input of a scenario, derived deterministically from ``input.json``.

Three derivations (documented rule by rule in docs/fixtures.md):

* **messages → ContextItems** (:func:`canonical_session`).  Identity comes from the
  session and the message's sequence number in the input — ``<scenario>:m0007`` —
  never from an output position.  Follow-up batches continue the sequence.  An
  assistant message with k tool calls yields its text item (when it has text) plus
  one call item per call, ``<scenario>:m0007.c1`` … ``.ck``; the call item's id is
  also the canonical ``toolCallId`` its result binds to.  A call without a result
  is explicitly ``pending``.  A result whose ``tool_call_id`` matches no call, has
  no ``tool_call_id``, or repeats an already answered call is an *orphan*: unbound
  ``tool-evidence`` (no group, so it can neither complete nor split one).
* **IDE context-center input → items** (:func:`canonical_ide`).
* **memory operations → memory commands** (:func:`memory_commands`).

Nothing here writes anything; contents stay in memory (projections only ever carry
digests).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kernel.packets import anticorruption
from kernel.packets.trust import source_trust, tool_source_kind
from kernel.planning.tokens import cjk_estimate, utf8_bytes_estimate
from shadow.projection import content_digest

BASE_TIME_MS: Final = 1_787_227_200_000  # the captures' fake-clock base, 2026-08-20T12:00Z
SOURCE_STORE: Final = "legacy-capture"

#: The canonical drop-reason vocabulary: the planner's reasons plus the compaction and
#: surface reasons a projection may carry.  Legacy reasons map onto these (docs/surfaces.md).
DROP_REASONS: Final = (
    "expired", "scope_denied", "sink_denied", "untrusted_system_policy",  # governance
    "input_budget", "partition_ceiling",  # budget
    "summarized", "collapsed",  # replaced by a derived item
    "duplicate", "user_removed", "invalid", "tool_pair_repair", "not_persisted", "unknown",
)


def iso_at(offset_ms: int) -> str:
    from kernel.canonical.timestamps import epoch_ms_to_iso

    return epoch_ms_to_iso(BASE_TIME_MS + offset_ms)


def has_secret(text: str) -> bool:
    """True when the kernel's anticorruption detectors find secret material."""
    if not text:
        return False
    return any(f.category == "secret" for f in anticorruption.scan(text, trusted=True))


@dataclass(frozen=True, slots=True)
class CanonItem:
    """One canonical ContextItem plus what the surface adapters need to match it."""

    item_id: str
    kind: str
    seq: int  # sequence of the source message / candidate / operation
    role: str | None  # the legacy wire role it came from (None for IDE items)
    content: str
    digest: str  # content_digest(content)
    trust: str
    sensitivity: str
    pinned: bool = False
    binding: Mapping[str, Any] = field(default_factory=dict)
    legacy_tool_id: str | None = None  # the legacy id (call id, or the result's tool_call_id)
    tool_name: str | None = None
    token_estimate: int = 1
    source: str = "host"
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def protected(self) -> bool:
        """Never dropped for budget (design 108 §7): pinned, trusted system policy, the
        last user request (recovery-bound)."""
        return bool(self.pinned or (self.kind == "system-policy"
                                    and self.trust in ("host", "verified"))
                    or self.binding.get("requiredForRecovery"))

    @property
    def pending(self) -> bool:
        """A pending call, question, approval or human task: kept with its binding."""
        b = self.binding
        return bool(b.get("toolOutcome") in ("pending", "unknown") or b.get("questionId")
                    or b.get("approvalId") or b.get("humanTaskId"))

    @property
    def shielded(self) -> bool:
        """Protected or pending: no budget claim can justify dropping it."""
        return self.protected or self.pending

    @property
    def tool_call_id(self) -> str | None:
        return self.binding.get("toolCallId")

    @property
    def tool_role(self) -> str | None:
        return self.binding.get("toolRole")

    @property
    def tool_outcome(self) -> str | None:
        return self.binding.get("toolOutcome")

    def wire(self, scope_id: str, sink_ok: bool = True) -> dict[str, Any]:
        """The ContextItem wire dict handed to the kernel planner."""
        out: dict[str, Any] = {
            "schemaVersion": 1,
            "itemId": self.item_id,
            "kind": self.kind,
            "scope": "session",
            "scopeId": scope_id,
            "sourceRef": {"store": SOURCE_STORE, "id": self.item_id, "eventSequence": self.seq},
            "provenance": {"source": self.source, "observedAt": iso_at(self.seq * 1000)},
            "trust": self.trust,
            "sensitivity": self.sensitivity,
            "allowedSinks": ["*"] if self.sensitivity not in ("secret", "restricted")
            else ["local"],
            "tokenEstimate": max(1, self.token_estimate),
            "priority": self.seq + 1,  # recency: later messages rank higher
            "pinned": self.pinned,
            "createdAt": iso_at(self.seq * 1000),
            "content": self.content,
        }
        if self.binding:
            out["binding"] = dict(self.binding)
        return out


@dataclass(frozen=True, slots=True)
class CanonicalSession:
    scenario: str
    items: tuple[CanonItem, ...]
    message_items: Mapping[int, tuple[str, ...]]  # message seq -> its item ids (text, calls)
    call_by_legacy_id: Mapping[str, str]  # legacy call id -> canonical call item id
    batches: tuple[tuple[int, int], ...]  # (first seq, end seq) of input + each follow-up batch
    messages: tuple[Mapping[str, Any], ...] = field(repr=False)  # all messages, by seq

    @property
    def by_id(self) -> dict[str, CanonItem]:
        return {it.item_id: it for it in self.items}

    def items_for(self, seqs: range | Sequence[int]) -> list[CanonItem]:
        b = self.by_id
        return [b[i] for s in seqs for i in self.message_items.get(s, ())]


def scope_id_of(scenario: str) -> str:
    return scenario if scenario[:1].isalnum() else f"s{scenario}"


def _tool_outcome(content: str) -> str:
    """Result outcome: ``failed`` when the result says so, else ``succeeded``."""
    try:
        doc = json.loads(content)
    except (ValueError, TypeError, RecursionError):
        return "succeeded"
    if isinstance(doc, dict) and (
        doc.get("success") is False or doc.get("isError") is True or doc.get("is_error") is True
        or ("error" in doc and doc.get("error") not in (None, "", False))
    ):
        return "failed"
    return "succeeded"


def _call_content(call: Mapping[str, Any]) -> str:
    fn = call.get("function") or {}
    return json.dumps({"name": fn.get("name"), "arguments": fn.get("arguments")},
                      sort_keys=True, ensure_ascii=False)


def _sens(*texts: str) -> str:
    return "secret" if any(has_secret(t) for t in texts) else "internal"


def canonical_session(scenario: str, doc: Mapping[str, Any]) -> CanonicalSession:
    """Derive the canonical items of ``input.json`` (messages + follow-up batches)."""
    messages: list[Mapping[str, Any]] = list(doc.get("messages") or ())
    batches = [(0, len(messages))]
    for batch in doc.get("followup_messages") or ():
        start = len(messages)
        messages.extend(batch)
        batches.append((start, len(messages)))
    base = scenario
    # pass 1: calls (legacy id -> canonical call id); first occurrence wins
    calls: dict[str, tuple[str, str, int]] = {}  # legacy id -> (call item id, tool name, seq)
    for seq, m in enumerate(messages):
        if m.get("role") == "assistant":
            for j, call in enumerate(m.get("tool_calls") or ()):
                lid = str(call.get("id"))
                if lid not in calls:
                    calls[lid] = (f"{base}:m{seq:04d}.c{j + 1}",
                                  str((call.get("function") or {}).get("name") or ""), seq)
    # pass 2: results (first result of a call pairs; the rest are orphans)
    answered: dict[str, tuple[int, str, str]] = {}  # legacy id -> (seq, outcome, sensitivity)
    for seq, m in enumerate(messages):
        if m.get("role") != "tool":
            continue
        result_of = m.get("tool_call_id")
        if isinstance(result_of, str) and result_of in calls and result_of not in answered:
            text_of = m.get("content") or ""
            answered[result_of] = (seq, _tool_outcome(text_of), _sens(text_of))
    last_user = max((s for s, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    first_user = min((s for s, m in enumerate(messages) if m.get("role") == "user"),
                     default=len(messages))
    last = len(messages) - 1
    items: list[CanonItem] = []
    per_msg: dict[int, tuple[str, ...]] = {}
    for seq, m in enumerate(messages):
        role = str(m.get("role"))
        raw_content = m.get("content")
        content: str = raw_content if isinstance(raw_content, str) else ""
        mid = f"{base}:m{seq:04d}"
        pinned = m.get("pinned") is True
        made: list[CanonItem] = []
        if role == "system":
            replay = m.get("_cc_replay")
            if isinstance(replay, Mapping):
                # a durable summary from an earlier compaction: derived content of the
                # lowest trust; a later compaction may summarize it again
                made.append(_item(mid, "message", seq, role, content, "external", pinned,
                                  {}, source="compactor",
                                  detail={"prior": str(replay.get("kind") or "summary")}))
            else:
                kind = ("system-policy" if seq == 0 else
                        "project-rule" if seq < first_user else "message")
                trust = source_trust("system", "host_policy").value
                made.append(_item(mid, kind, seq, role, content, trust, pinned, {},
                                  source="host-policy"))
        elif role == "user":
            recovery: dict[str, Any] = {"requiredForRecovery": True} if seq == last_user else {}
            made.append(_item(mid, "message", seq, role, content,
                              source_trust("user", "user_input").value, pinned, recovery,
                              source="user-input"))
        elif role == "assistant":
            trust = source_trust("assistant", "model_output").value
            tool_calls = list(m.get("tool_calls") or ())
            if content or not tool_calls:
                binding: dict[str, Any] = {}
                if seq == last and not tool_calls and content.rstrip().endswith(("?", "？")):
                    binding = {"questionId": f"{mid}.q"}  # an unanswered trailing question
                made.append(_item(mid, "message", seq, role, content, trust, pinned, binding,
                                  source="model-output"))
            for j, call in enumerate(tool_calls):
                lid = str(call.get("id"))
                cid = f"{mid}.c{j + 1}"
                own = calls.get(lid, (None,))[0] == cid
                res = answered.get(lid) if own else None
                outcome = res[1] if res else "pending"
                text = _call_content(call)
                sens = "secret" if (res and res[2] == "secret") or has_secret(text) else "internal"
                b = {"toolCallId": cid, "toolRole": "call", "toolOutcome": outcome}
                made.append(_item(cid, "tool-evidence", seq, role, text, trust, pinned, b,
                                  source="model-output", legacy_tool_id=lid,
                                  tool_name=str((call.get("function") or {}).get("name") or ""),
                                  sensitivity=sens))
        elif role == "tool":
            raw_lid = m.get("tool_call_id")
            tool_lid = raw_lid if isinstance(raw_lid, str) else None
            if tool_lid is not None and answered.get(tool_lid, (None,))[0] == seq:
                cid, name, _cseq = calls[tool_lid]
                kind_src = tool_source_kind(name).value
                outcome = answered[tool_lid][1]
                call_sens = "secret" if has_secret(
                    _call_content(_find_call(messages, tool_lid))) else "internal"
                sens = "secret" if answered[tool_lid][2] == "secret" or call_sens == "secret" \
                    else "internal"
                made.append(_item(mid, "tool-evidence", seq, role, content,
                                  source_trust("tool", kind_src).value, pinned,
                                  {"toolCallId": cid, "toolRole": "result",
                                   "toolOutcome": outcome},
                                  source=kind_src.replace("_", "-"), legacy_tool_id=tool_lid,
                                  tool_name=name, sensitivity=sens))
            else:
                name = str(m.get("name") or "")
                kind_src = tool_source_kind(name).value if name else "unknown"
                made.append(_item(mid, "tool-evidence", seq, role, content,
                                  source_trust("tool", kind_src).value, pinned, {},
                                  source=kind_src.replace("_", "-"),
                                  legacy_tool_id=tool_lid,
                                  tool_name=name or None, detail={"orphan": True}))
        else:  # unknown role: untrusted data
            made.append(_item(mid, "message", seq, role, content, "untrusted", pinned, {},
                              source="unknown"))
        items.extend(made)
        per_msg[seq] = tuple(it.item_id for it in made)
    return CanonicalSession(
        scenario=scenario, items=tuple(items), message_items=per_msg,
        call_by_legacy_id={lid: v[0] for lid, v in calls.items()},
        batches=tuple(batches), messages=tuple(messages),
    )


def _find_call(messages: Sequence[Mapping[str, Any]], lid: str) -> Mapping[str, Any]:
    for m in messages:
        for call in m.get("tool_calls") or ():
            if call.get("id") == lid:
                return call  # type: ignore[no-any-return]
    return {}


def _item(item_id: str, kind: str, seq: int, role: str, content: str, trust: str,
          pinned: bool, binding: Mapping[str, Any], *, source: str,
          legacy_tool_id: str | None = None, tool_name: str | None = None,
          sensitivity: str | None = None, detail: Mapping[str, Any] | None = None) -> CanonItem:
    return CanonItem(
        item_id=item_id, kind=kind, seq=seq, role=role, content=content,
        digest=content_digest(content), trust=trust,
        sensitivity=sensitivity or _sens(content), pinned=pinned, binding=dict(binding),
        legacy_tool_id=legacy_tool_id, tool_name=tool_name,
        token_estimate=max(1, cjk_estimate(content)), source=source, detail=dict(detail or {}),
    )


# --------------------------------------------------------------------------- IDE

IDE_KINDS: Final[Mapping[str, str]] = {
    "selection": "artifact-ref", "active-file": "artifact-ref", "open-tabs": "artifact-ref",
    "diagnostics": "tool-evidence", "test-debug": "tool-evidence", "git-diff": "tool-evidence",
    "memory": "memory",
}
IDE_DEFAULT_BUDGET: Final = 4096
IDE_MAX_BUDGET: Final = 32768
IDE_MAX_CANDIDATES: Final = 64  # the Context Center reads at most this many candidates


@dataclass(frozen=True, slots=True)
class CanonicalIDE:
    scenario: str
    items: tuple[CanonItem, ...]  # admitted candidates, in input order
    rejected: Mapping[str, str]  # item id -> canonical reason (invalid kind)
    removed: frozenset[str]  # item ids the user removed
    budget: int
    chip_ids: Mapping[str, tuple[str, ...]]  # item id -> legacy chip ids it may appear as
    all_ids: tuple[str, ...]


def chip_hash(kind: str, source: str, identity: str) -> str:
    import hashlib

    return "ctx_" + hashlib.sha256(f"{kind}\n{source}\n{identity}".encode()).hexdigest()[:16]


_JS_SPACE: Final = " \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006" \
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def js_safe_integer(value: Any) -> int | None:
    """``Number(value)`` when it is a safe integer (the Context Center's budget rule), else
    None: an integer, or text such as ``" 1024 "``, ``"1e3"``, ``"0x10"``, ``""`` (0)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if abs(value) <= 2**53 - 1 else None
    if not isinstance(value, str):
        return None
    text = value.strip(_JS_SPACE)
    if not text:
        return 0
    if not text.isascii():
        return None  # Number() reads ASCII digits only ("１０２４" is NaN)
    try:
        if text[:2].lower() in ("0x", "0o", "0b"):
            number = float(int(text[2:], {"x": 16, "o": 8, "b": 2}[text[1].lower()]))
        elif any(ch.isalpha() and ch not in "eE" for ch in text) or "_" in text:
            return None  # "Infinity", "NaN", "1_000": not a safe integer
        else:
            number = float(text)
    except ValueError:
        return None
    if not number.is_integer() or abs(number) > 2**53 - 1:
        return None
    return int(number)


def _bounded(value: Any, fallback: str, limit: int) -> str:
    """``boundedText``: ``String(value ?? "").trim() || fallback``, at most ``limit`` chars."""
    clean = "" if value is None else (value if isinstance(value, str) else str(value))
    clean = clean.strip(_JS_SPACE)
    return (clean or fallback)[:limit]


def legacy_chip_hash(c: Mapping[str, Any], kind: str) -> str:
    """The chip id the Context Center gives a candidate without an explicit id: its kind,
    its source (default ``ide-host``) and ``identity || scope || label``, each defaulted as
    the plugin normalises them."""
    source = _bounded(c.get("source"), "ide-host", 128)
    label = _bounded(c.get("label"), kind, 160)
    scope = _bounded(c.get("scope"), _bounded(c.get("identity"), label, 512), 512)
    identity = c.get("identity")
    key = identity if isinstance(identity, str) and identity else scope
    return chip_hash(kind, source, key)


def canonical_ide(scenario: str, doc: Mapping[str, Any]) -> CanonicalIDE:
    cc = doc.get("context_center") or {}
    pinned_ids = set(cc.get("pinnedIds") or ())
    removed_ids = set(cc.get("removedIds") or ())
    # Number(null) is 0; only a missing tokenBudget takes the default
    raw_budget = 0 if "tokenBudget" in cc and cc["tokenBudget"] is None else js_safe_integer(
        cc.get("tokenBudget"))
    budget = IDE_DEFAULT_BUDGET if raw_budget is None else max(0, min(raw_budget,
                                                                       IDE_MAX_BUDGET))
    items: list[CanonItem] = []
    rejected: dict[str, str] = {}
    removed: set[str] = set()
    chip_ids: dict[str, tuple[str, ...]] = {}
    all_ids: list[str] = []
    for i, c in enumerate(cc.get("candidates") or ()):
        iid = f"{scenario}:c{i:04d}"
        all_ids.append(iid)
        kind, source = str(c.get("kind")), str(c.get("source"))
        variants = []
        if isinstance(c.get("id"), str):
            variants.append(c["id"])
        variants.append(legacy_chip_hash(c, kind))
        variants.append(chip_hash(kind, source, str(c.get("identity"))))
        if c.get("scope"):
            variants.append(chip_hash(kind, source, str(c.get("scope"))))
        chip_ids[iid] = tuple(dict.fromkeys(variants))
        if kind not in IDE_KINDS:
            rejected[iid] = "invalid"
            continue
        if removed_ids.intersection(variants):
            removed.add(iid)
        content = c.get("content") if isinstance(c.get("content"), str) else ""
        trust = "user" if source.startswith("cc.") else "external"
        items.append(CanonItem(
            item_id=iid, kind=IDE_KINDS[kind], seq=i, role=None, content=content,
            digest=content_digest(content), trust=trust, sensitivity=_sens(content),
            pinned=c.get("pinned") is True or bool(pinned_ids.intersection(variants)),
            token_estimate=max(1, utf8_bytes_estimate(content)),
            source="ide" if trust == "external" else "memory",
            detail={"ide_kind": kind},
        ))
    return CanonicalIDE(scenario=scenario, items=tuple(items), rejected=rejected,
                        removed=frozenset(removed), budget=budget, chip_ids=chip_ids,
                        all_ids=tuple(all_ids))


# --------------------------------------------------------------------------- memory

MEMORY_SCOPES: Final = ("session", "agent", "user", "global")
SCOPE_WIDTH: Final = {"turn": 0, "session": 1, "agent": 2, "project": 3, "user": 4, "global": 5}


@dataclass(frozen=True, slots=True)
class MemoryCommand:
    """One legacy memory operation as a canonical command (content kept in memory only)."""

    scenario: str
    index: int
    op: str  # propose | update | delete | clear_scope | recall | get | list | stats |
    #          trace_record | consolidate | trace_summarize | open_store | hydrate_store |
    #          size | unknown
    target: str | None  # identity of the record acted on (resolved `ref`/`as`)
    args: Mapping[str, Any]
    legacy_op: str
    store: str | None = None  # the legacy store instance named by the op (None: the first)


def record_id(scenario: str, op_index: int) -> str:
    return f"{scenario}:op{op_index:04d}"


def memory_commands(scenario: str, doc: Mapping[str, Any]) -> tuple[MemoryCommand, ...]:
    """Map ``memory_ops`` to commands.  ``as``/``ref`` names resolve to the identity of the
    record created by the naming ``add`` (``<scenario>:op0003``); an explicit legacy id the
    input never created resolves to ``<scenario>:unknown:<id digest>``."""
    names: dict[str, str] = {}
    out: list[MemoryCommand] = []
    ops_map = {"add": "propose", "update": "update", "remove": "delete",
               "clearScope": "clear_scope", "recall": "recall", "get": "get", "list": "list",
               "stats": "stats", "trace.record": "trace_record", "consolidate": "consolidate",
               "trace.summarize": "trace_summarize", "open": "open_store",
               "hydrate": "hydrate_store", "size": "size"}
    for i, op in enumerate(doc.get("memory_ops") or ()):
        legacy = str(op.get("op"))
        target = None
        if legacy == "add":
            target = record_id(scenario, i)
            if isinstance(op.get("as"), str):
                names[op["as"]] = target
        elif isinstance(op.get("ref"), str):
            target = names.get(op["ref"])
        elif isinstance(op.get("id"), str):
            target = f"{scenario}:unknown:{content_digest(op['id'])[7:19]}"
        args = op.get("args")
        if legacy in ("update",):
            args = {"patch": op.get("patch") or {}}
        out.append(MemoryCommand(scenario=scenario, index=i, op=ops_map.get(legacy, "unknown"),
                                 target=target, args=args if args is not None else {},
                                 legacy_op=legacy,
                                 store=op["store"] if isinstance(op.get("store"), str)
                                 else None))
    return tuple(out)


# --------------------------------------------------------------------------- bundle


@dataclass(frozen=True, slots=True)
class Canon:
    """Every canonical derivation of one scenario (computed once, shared by adapters)."""

    name: str
    kind: str  # messages | ide | memory
    doc: Mapping[str, Any] = field(repr=False)
    session: CanonicalSession | None = None
    ide: CanonicalIDE | None = None
    memory: tuple[MemoryCommand, ...] | None = None


def canonicalize(name: str, doc: Mapping[str, Any]) -> Canon:
    if doc.get("memory_ops"):
        return Canon(name, "memory", doc, memory=memory_commands(name, doc))
    if doc.get("context_center"):
        return Canon(name, "ide", doc, ide=canonical_ide(name, doc))
    return Canon(name, "messages", doc, session=canonical_session(name, doc))


def headless_persisted(items: Sequence[CanonItem]) -> set[str]:
    """The input items the CLI's JSONL store keeps as messages when no compact event holds
    them (LEGACY.md, the headless runner's turn projection): user messages, one assistant
    message per turn (its last plain, non-empty text without tool calls) and a durable
    summary seeded as a prior compaction; tool calls, tool results, intermediate assistant
    text and host system prompts are events or nothing, never replayed as messages."""
    with_calls = {ci.item_id.rsplit(".c", 1)[0] for ci in items if ci.legacy_tool_id
                  and ci.role == "assistant"}
    keep: set[str] = set()
    last_text: str | None = None
    for ci in items:
        if ci.role == "user":
            if last_text:
                keep.add(last_text)
            last_text = None
            keep.add(ci.item_id)
        elif ci.role == "assistant" and not ci.legacy_tool_id and ci.content \
                and ci.item_id not in with_calls:
            last_text = ci.item_id
        elif ci.role == "system" and ci.detail.get("prior"):
            keep.add(ci.item_id)
    if last_text:
        keep.add(last_text)
    return keep
