"""Matching legacy output messages back to canonical input identities (shared by the
message-based surface adapters).

Rules, applied in order to each output message (docs/surfaces.md, "Matching"):

1. **exact**: same role, same content, same tool ids (the call ids of an assistant
   message, the ``tool_call_id`` of a tool message) — the first unused source message
   with that key wins, so repeated identical messages map by occurrence;
2. **by call ids**: an assistant message whose calls are a subset of one source
   message's calls (a legacy stripped some calls) maps to that message;
3. **id stripped** / **rebound**: a tool message without ``tool_call_id`` (or with another
   call's) matches a source tool message with the same content (occurrence order); its
   binding is marked lost (or bound to the call it now names);
4. **whitespace**: same role and tool ids, content equal after collapsing whitespace —
   identity kept, ``altered: "whitespace"`` (noise);
5. **adapter rewrite** (optional hook): a documented legacy transformation, e.g. the
   cleaned system prompt of Desktop context engineering — ``altered: <category>``;
6. **rewritten**: exactly one unused source message with the same role and tool ids
   lies between the neighbouring matched messages (for a message marked ``pinned``:
   exactly one unused pinned source anywhere) — identity kept, ``altered:
   "rewritten"`` (its digest will differ);
7. otherwise the message is **derived**: ``summary`` (``[Conversation Summary]``,
   ``[历史对话总结]`` or CLI provenance ``compact-summary``), ``collapse-marker``
   (``[Collapsed N tool messages…]`` or provenance ``compact-tool-collapse``),
   ``compressed-ref`` (a truncation marker), else ``rewrite``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from shadow.boundary import mapping_at
from shadow.canonical import CanonicalSession, CanonItem, has_secret
from shadow.divergence.provenance import text_sketches
from shadow.projection import PItem, content_digest, value_digest
from shadow.surfaces import alterations

SUMMARY_PREFIXES: Final = ("[Conversation Summary]", "[历史对话总结]")
COLLAPSE_RE: Final = re.compile(r"^\[Collapsed \d+ tool messages?")
COLLAPSE_COUNT_RE: Final = re.compile(r"^\[Collapsed (\d+) tool messages?")
TRUNCATION_RE: Final = re.compile(r"\[(?:truncated|snipped|\.\.\. ?truncated)|…\s*\[", re.I)
WS_RE: Final = re.compile(r"\s+")

def text_of(msg: Mapping[str, Any]) -> str:
    c = msg.get("content")
    return c if isinstance(c, str) else ""


def calls_of(msg: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A message's tool calls that are objects (a native output may hold anything)."""
    calls = msg.get("tool_calls")
    return [c for c in calls if isinstance(c, Mapping)] if isinstance(calls, list) else []


def call_ids(msg: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(c.get("id")) for c in calls_of(msg))


def tool_key(msg: Mapping[str, Any]) -> tuple[str, ...]:
    if msg.get("role") == "tool":
        tid = msg.get("tool_call_id")
        return (str(tid),) if isinstance(tid, str) else ()
    return call_ids(msg)


def ws(text: str) -> str:
    return WS_RE.sub(" ", text).strip()


def call_text(call: Mapping[str, Any]) -> str:
    fn = mapping_at(call, "function")
    return json.dumps({"name": fn.get("name"), "arguments": fn.get("arguments")},
                      sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Source:
    """A message a surface was given: a canonical input message or a prior derived one."""

    msg: Mapping[str, Any]
    seq: int | None  # input sequence, None for a prior derived message
    derived: PItem | None = None


@dataclass(slots=True)
class Match:
    items: list[PItem] = field(default_factory=list)
    kept_sources: set[int] = field(default_factory=set)  # source indexes kept
    notes: dict[str, int] = field(default_factory=dict)  # match-rule counters
    next_sources: list[Source] = field(default_factory=list)  # the output as the next input

    def note(self, key: str) -> None:
        self.notes[key] = self.notes.get(key, 0) + 1


def summary_doc(text: str) -> tuple[str, dict[str, Any] | None, int]:
    """(format, parsed object or None, body length) of a summary body."""
    body = text
    for p in SUMMARY_PREFIXES:
        if body.startswith(p):
            body = body[len(p):]
    body = body.strip()
    fence = re.search(r"```(?:json)?\s*(\{.*\})\s*```", body, re.S)
    candidate = fence.group(1) if fence else body
    try:
        doc = json.loads(candidate)
    except (ValueError, RecursionError):
        return "text", None, len(body)
    if not isinstance(doc, dict):
        return "text", None, len(body)
    return ("structured" if not fence else "structured-in-prose"), doc, len(body)


def summary_fields(text: str) -> dict[str, Any]:
    """Structure of a summary body: format + per-field digests (never the text)."""
    fmt, doc, length = summary_doc(text)
    if doc is None:
        return {"format": fmt, "length": length}
    return {"format": fmt,
            "fields": {k: value_digest(v, "shadow.summary-field/v1") for k, v in doc.items()}}


def derived_detail(kind: str, text: str) -> dict[str, Any]:
    """What a derived item's projection carries: summary structure, the declared count of
    a collapse marker, and the sketch of its text (``provenance``) — never the text."""
    detail: dict[str, Any] = {}
    doc = None
    if kind == "summary":
        detail = summary_fields(text)
        doc = summary_doc(text)[1]
    elif kind == "collapse-marker":
        m = COLLAPSE_COUNT_RE.match(text)
        if m:
            detail["declared"] = int(m.group(1))
    sk = text_sketches(text, doc)
    if sk:
        detail["shingles"] = sk
    return detail


def derived_kind(text: str, provenance: str | None) -> str:
    if provenance == "compact-summary" or text.startswith(SUMMARY_PREFIXES):
        return "summary"
    if provenance == "compact-tool-collapse" or COLLAPSE_RE.match(text):
        return "collapse-marker"
    if TRUNCATION_RE.search(text):
        return "compressed-ref"
    return "rewrite"


def _items_for(src: Source, out_msg: Mapping[str, Any], canon: CanonicalSession,
               altered: str | None, binding_lost: bool) -> list[PItem]:
    if src.derived is not None:
        d = src.derived
        text = text_of(out_msg)
        return [PItem(id=d.id, kind=d.kind, origin="derived", digest=content_digest(text),
                      length=len(text), role=str(out_msg.get("role")), trust=d.trust,
                      sensitivity=d.sensitivity, altered=altered, covers=d.covers,
                      detail=d.detail)]
    by_id = canon.by_id
    ids = canon.message_items.get(src.seq or 0, ())
    items: list[PItem] = []
    out_calls = {str(c.get("id")): c for c in calls_of(out_msg)}
    role = str(out_msg.get("role"))
    for iid in ids:
        ci = by_id[iid]
        if ci.tool_role == "call":
            call = out_calls.get(ci.legacy_tool_id or "")
            if call is None:
                continue
            text = call_text(call)
        else:
            text = text_of(out_msg)
            if ci.role == "assistant" and not text and out_calls:
                continue  # the text part was emptied; only the calls survive
        lost = binding_lost and ci.tool_role == "result"
        item = _pitem(ci, text, role, altered if ci.tool_role != "call" else None, lost)
        out_id = out_msg.get("tool_call_id")
        if ci.tool_role == "result" and isinstance(out_id, str) and \
                out_id != ci.legacy_tool_id:  # the result now answers another call (or none)
            target = canon.call_by_legacy_id.get(out_id)
            item = replace(item, tool_call_id=target, detail={
                **item.detail, **({} if target else {"binding_lost": True})})
        items.append(item)
    return items


def _pitem(ci: CanonItem, text: str, role: str, altered: str | None,
           binding_lost: bool) -> PItem:
    digest = content_digest(text)
    detail: dict[str, Any] = {}
    if binding_lost:
        detail["binding_lost"] = True
    if ci.detail.get("orphan"):
        detail["orphan"] = True
    if digest != ci.digest:
        verdict = alterations.check(altered, ci.content, text)
        if verdict is not None:
            detail["claim"], why = verdict
            if why:
                detail["why"] = why
        sk = text_sketches(text)
        if sk and altered != "whitespace":
            detail["shingles"] = sk
    return PItem(
        id=ci.item_id, kind=ci.kind, origin="input", digest=digest, length=len(text), role=role,
        tool_call_id=None if binding_lost else ci.tool_call_id, tool_role=ci.tool_role,
        tool_outcome=ci.tool_outcome, pinned=ci.pinned, trust=ci.trust,
        sensitivity=ci.sensitivity, altered=altered if digest != ci.digest else
        (altered if altered == "whitespace" else None),
        detail=detail,
    )


Rewrite = Callable[[Mapping[str, Any], Sequence[Source], set[int]], tuple[int, str] | None]


def match_messages(sources: Sequence[Source], output: Sequence[Any], canon: CanonicalSession,
                   *, provenance: Sequence[Any] | None = None, rewrite: Rewrite | None = None,
                   derived_prefix: str = "") -> Match:
    """Map output messages to source identities (the rules in the module docstring)."""
    res = Match()
    used: set[int] = set()
    exact: dict[tuple[Any, ...], list[int]] = {}
    for i, s in enumerate(sources):
        exact.setdefault((s.msg.get("role"), text_of(s.msg), tool_key(s.msg)), []).append(i)
    assigned: list[tuple[int, str | None, bool] | None] = []
    outs = [m if isinstance(m, Mapping) else {} for m in output]
    # pass 1: exact, call-id, stripped-id and whitespace matches
    for m in outs:
        role, text, key = m.get("role"), text_of(m), tool_key(m)
        hit = _first_unused(exact.get((role, text, key), ()), used)
        how: tuple[str | None, bool] = (None, False)
        if hit is None and role == "assistant" and key:
            hit = _by_calls(sources, used, set(key))
            how = ("calls-subset", False) if hit is not None else how
        if hit is None and role == "assistant" and text:
            hit = next((i for i, s in enumerate(sources) if i not in used
                        and s.msg.get("role") == "assistant" and text_of(s.msg) == text
                        and set(key) < set(call_ids(s.msg))), None)
            how = ("calls-stripped", False) if hit is not None else how
        if hit is None and role == "tool" and not key:
            hit = next((i for i, s in enumerate(sources) if i not in used
                        and s.msg.get("role") == "tool" and text_of(s.msg) == text), None)
            how = (None, True) if hit is not None else how
        if hit is None and role == "tool" and key:  # the same result, bound to another id
            hit = next((i for i, s in enumerate(sources) if i not in used
                        and s.msg.get("role") == "tool" and text_of(s.msg) == text
                        and tool_key(s.msg) != key), None)
            how = ("rebound", False) if hit is not None else how
        if hit is None:
            hit = next((i for i, s in enumerate(sources) if i not in used
                        and s.msg.get("role") == role and tool_key(s.msg) == key
                        and ws(text_of(s.msg)) == ws(text) and text), None)
            how = ("whitespace", False) if hit is not None else how
        if hit is not None:
            used.add(hit)
            assigned.append((hit, how[0], how[1]))
            res.note("exact" if how == (None, False) else (how[0] or "id-stripped"))
        else:
            assigned.append(None)
    # pass 2: adapter rewrites, then single-candidate rewrites between anchors
    for pos, m in enumerate(outs):
        if assigned[pos] is not None:
            continue
        if rewrite is not None:
            found = rewrite(m, sources, used)
            if found is not None:
                used.add(found[0])
                assigned[pos] = (found[0], found[1], False)
                res.note(found[1])
                continue
        prov = provenance[pos] if provenance and pos < len(provenance) else None
        if derived_kind(text_of(m), prov if isinstance(prov, str) else None) != "rewrite":
            continue
        lo = max((a[0] for a in assigned[:pos] if a is not None), default=-1)
        hi = min((a[0] for a in assigned[pos + 1:] if a is not None), default=len(sources))
        window = range(lo + 1, hi)
        if m.get("pinned") is True:  # a pin carries its identity on the wire: any position
            window = range(len(sources))
        cands = [i for i in window if i not in used
                 and sources[i].msg.get("role") == m.get("role")
                 and tool_key(sources[i].msg) == tool_key(m) and sources[i].derived is None
                 and (m.get("pinned") is not True or sources[i].msg.get("pinned") is True)]
        if len(cands) == 1:
            used.add(cands[0])
            assigned[pos] = (cands[0], "rewritten", False)
            res.note("rewritten")
    # build items in output order
    counters: dict[str, int] = {}
    for pos, m in enumerate(outs):
        a = assigned[pos]
        if a is not None:
            res.items.extend(_items_for(sources[a[0]], m, canon, a[1], a[2]))
            res.next_sources.append(Source(m, sources[a[0]].seq, sources[a[0]].derived))
            continue
        prov = provenance[pos] if provenance and pos < len(provenance) else None
        kind = derived_kind(text_of(m), prov if isinstance(prov, str) else None)
        counters[kind] = counters.get(kind, 0) + 1
        text = text_of(m)
        res.items.append(PItem(
            id=f"~{derived_prefix}{kind}.{counters[kind]}", kind=kind, origin="derived",
            digest=content_digest(text), length=len(text), role=str(m.get("role")),
            sensitivity="secret" if has_secret(text) else None,
            detail=derived_detail(kind, text),
        ))
        res.next_sources.append(Source(m, None, res.items[-1]))
        res.note(f"derived:{kind}")
    res.kept_sources = used
    return res


def _first_unused(cands: Sequence[int], used: set[int]) -> int | None:
    for i in cands:
        if i not in used:
            return i
    return None


def _by_calls(sources: Sequence[Source], used: set[int], ids: set[str]) -> int | None:
    for i, s in enumerate(sources):
        if i not in used and s.msg.get("role") == "assistant" and ids <= set(call_ids(s.msg)):
            return i
    return None


def input_sources(canon: CanonicalSession, seqs: range | Sequence[int]) -> list[Source]:
    return [Source(msg=canon.messages[s], seq=s) for s in seqs]


def source_ids(sources: Sequence[Source], canon: CanonicalSession) -> tuple[str, ...]:
    out: list[str] = []
    for s in sources:
        if s.derived is not None:
            out.append(s.derived.id)
        else:
            out.extend(canon.message_items.get(s.seq or 0, ()))
    return tuple(out)
