"""The candidate's memory semantics for session-core scenarios: a reference model of
design 108 §9, §10 and §12.3, applied to the canonical memory commands.

The kernel has no memory reducer yet, so the candidate replays the commands through
this model and says so in its identity (``MODEL_ID``).  Rules (docs/surfaces.md):

* ``propose`` (legacy ``add``): scope must be session | agent | user | global and a
  scopeId is required except for global (a global scopeId is ignored); content must
  be non-empty and free of secret material; explicit user writes are ``active``.
* ``update``: a patch may change content, category, tags and score only; a patch that
  names ``scope``, ``scopeId`` or ``id`` is refused (``scope_denied``: a scope change
  is an audited transition, never an update); an unknown target is ``not_found``.
* ``delete`` (``remove``): tombstones the record (state ``deleted``); ``false`` when
  there was nothing to delete.  ``clear_scope``: deletes exactly the records of that
  (scope, scopeId); a global selector with a scopeId matches nothing and is refused.
* ``recall`` / ``list``: read only admitted scopes — an explicit scope with its
  scopeId (global without one); no scope, or a non-global scope without a scopeId, is
  ``scope_denied`` (no cross-scope scan as fallback).  Only active records are read.
  Recall matches query tokens (NFKC, lower-cased, split on non-word characters, CJK
  runs as one token) against content and tags; ranking: matched tokens, then age.
* ``consolidate``: produces ``candidate`` records (not active facts) at session scope
  of the traced session — never wider than the input — one per evidence event: a user
  message stating a preference, a successful tool result, an error with a message.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from shadow.canonical import MEMORY_SCOPES, Canon, has_secret, record_id
from shadow.projection import MemOp, MemoryProjection, MemRecord, Projection, content_digest

MODEL_ID: Final = "shadow-memory-reference/v1"
_PREF_RE: Final = re.compile(r"prefer|always|never|喜欢|偏好|总是|不要", re.I)
_TOKEN_RE: Final = re.compile(r"[\w-]+", re.U)


@dataclass(slots=True)
class _Rec:
    id: str
    scope: str
    scope_id: str | None
    content: str
    category: str
    tags: list[str] = field(default_factory=list)
    state: str = "active"
    sensitivity: str = "internal"
    order: int = 0


def tokens(text: str) -> list[str]:
    return [t for t in _TOKEN_RE.findall(unicodedata.normalize("NFKC", text).lower()) if t]


def _admission(args: Mapping[str, Any]) -> tuple[str, str | None] | None:
    scope = args.get("scope")
    sid = args.get("scopeId")
    if scope not in MEMORY_SCOPES:
        return None
    if scope == "global":
        return ("global", None) if sid in (None, "") else None
    return (scope, str(sid)) if isinstance(sid, str) and sid else None


def project(canon: Canon, surface: str) -> Projection:
    """Run the commands through the model; the projection the candidate reports."""
    recs: dict[str, _Rec] = {}
    traces: list[Mapping[str, Any]] = []
    ops: list[MemOp] = []
    for cmd in canon.memory or ():
        ops.append(_apply(cmd, recs, traces))
    records = tuple(
        MemRecord(id=r.id, scope=r.scope, scope_id=r.scope_id, state=r.state,
                  sensitivity=r.sensitivity, digest=content_digest(r.content),
                  category=r.category)
        for r in sorted(recs.values(), key=lambda r: r.order))
    return Projection(canon.name, surface, "candidate",
                      memory=MemoryProjection(records=records, ops=tuple(ops)))


def _apply(cmd: Any, recs: dict[str, _Rec], traces: list[Mapping[str, Any]]) -> MemOp:
    op, i, args = cmd.op, cmd.index, cmd.args if isinstance(cmd.args, Mapping) else {}
    legacy = cmd.legacy_op

    def err(code: str, **detail: Any) -> MemOp:
        return MemOp(i, legacy, "error", error=code, detail=detail)

    if op == "propose":
        scope = args.get("scope")
        if scope not in MEMORY_SCOPES:
            return err("invalid_argument")
        sid = args.get("scopeId")
        if scope != "global" and not (isinstance(sid, str) and sid):
            return err("invalid_argument")
        content = args.get("content")
        if not isinstance(content, str) or not content.strip():
            return err("invalid_argument")
        if has_secret(content):
            return err("secret_material")
        rid = cmd.target
        recs[rid] = _Rec(rid, scope, None if scope == "global" else sid, content,
                         str(args.get("category") or "general"),
                         [str(t) for t in args.get("tags") or ()], order=i)
        return MemOp(i, legacy, "ok", created=(rid,),
                     detail={"selector": {"scope": scope, "scope_id": recs[rid].scope_id}})
    if op == "update":
        patch = args.get("patch") if isinstance(args.get("patch"), Mapping) else {}
        rec = recs.get(cmd.target or "")
        if rec is None or rec.state == "deleted":
            return err("not_found")
        if set(patch) & {"scope", "scopeId", "id"}:
            return err("scope_denied")
        if "content" in patch and not (isinstance(patch["content"], str) and patch["content"]):
            return err("invalid_argument")
        if isinstance(patch.get("content"), str):
            rec.content = patch["content"]
        if isinstance(patch.get("category"), str):
            rec.category = patch["category"]
        if isinstance(patch.get("tags"), list):
            rec.tags = [str(t) for t in patch["tags"]]
        return MemOp(i, legacy, "ok", updated=(rec.id,))
    if op == "delete":
        rec = recs.get(cmd.target or "")
        if rec is None or rec.state == "deleted":
            return MemOp(i, legacy, "noop", detail={"receipt": False})
        rec.state = "deleted"
        return MemOp(i, legacy, "ok", deleted=(rec.id,), detail={"receipt": True})
    if op == "clear_scope":
        a = list(args) if isinstance(cmd.args, list) else []
        scope = a[0] if a else None
        sid = a[1] if len(a) > 1 else None
        if scope not in MEMORY_SCOPES:
            return err("invalid_argument")
        if scope == "global" and sid not in (None, ""):
            return err("invalid_argument", selector={"scope": scope, "scope_id": sid})
        hit = [r for r in recs.values() if r.state != "deleted" and r.scope == scope
               and (scope == "global" or r.scope_id == sid)]
        for r in hit:
            r.state = "deleted"
        return MemOp(i, legacy, "ok", deleted=tuple(r.id for r in hit),
                     detail={"receipt": len(hit),
                             "selector": {"scope": scope, "scope_id": sid}})
    if op in ("recall", "list"):
        adm = _admission(args)
        if adm is None:
            return err("scope_denied")
        alive = [r for r in recs.values() if r.state == "active"
                 and (r.scope, r.scope_id) == adm]
        if op == "list":
            return MemOp(i, legacy, "ok", returned=tuple(r.id for r in alive),
                         detail={"selector": {"scope": adm[0], "scope_id": adm[1]}})
        return MemOp(i, legacy, "ok", returned=_recall(args, alive),
                     detail={"selector": {"scope": adm[0], "scope_id": adm[1]}})
    if op == "get":
        rec = recs.get(cmd.target or "")
        ok = rec is not None and rec.state == "active"
        return MemOp(i, legacy, "ok", returned=(rec.id,) if ok and rec else ())
    if op == "stats":
        counts = {s: 0 for s in MEMORY_SCOPES}
        for r in recs.values():
            if r.state == "active":
                counts[r.scope] = counts.get(r.scope, 0) + 1
        return MemOp(i, legacy, "ok", detail={"counts": counts})
    if op == "trace_record":
        traces.append({**args, "seq": len(traces) + 1})
        return MemOp(i, legacy, "ok")
    if op == "consolidate":
        return _consolidate(cmd, recs, traces)
    if op == "trace_summarize":
        return MemOp(i, legacy, "ok")
    return err("unsupported")


def _recall(args: Mapping[str, Any], alive: list[_Rec]) -> tuple[str, ...]:
    q = tokens(str(args.get("query") or ""))
    cat = args.get("category")
    want_tags = set(args.get("tags") or ())
    limit = args.get("limit") if isinstance(args.get("limit"), int) else 10
    scored = []
    for r in alive:
        if cat and r.category != cat:
            continue
        if want_tags and not want_tags & set(r.tags):
            continue
        hay = " ".join([unicodedata.normalize("NFKC", r.content).lower(), *r.tags])
        score = sum(1 for t in q if t in hay) if q else 1
        if score:
            scored.append((-score, r.order, r.id))
    return tuple(rid for _s, _o, rid in sorted(scored)[:max(0, limit)])


def _consolidate(cmd: Any, recs: dict[str, _Rec], traces: list[Mapping[str, Any]]) -> MemOp:
    a = cmd.args if isinstance(cmd.args, list) else [cmd.args]
    session = a[0] if a and isinstance(a[0], Mapping) else {}
    sid = session.get("sessionId")
    if not isinstance(sid, str) or not sid:
        return MemOp(cmd.index, cmd.legacy_op, "error", error="invalid_argument")
    created = []
    for ev in traces:
        if ev.get("sessionId") != sid:
            continue
        payload = ev.get("payload") if isinstance(ev.get("payload"), Mapping) else {}
        kind = ev.get("type")
        text, category = None, None
        if kind == "message" and payload.get("role") == "user":
            c = str(payload.get("content") or "")
            if _PREF_RE.search(c):
                text, category = c, "preference"
        elif kind == "tool_result" and payload.get("ok") is True:
            text, category = f"Completed tool {payload.get('tool')}: {payload.get('summary')}", \
                "task"
        elif kind == "error" and (payload.get("message") or payload.get("error")):
            text = f"Error encountered: {payload.get('message') or payload.get('error')}"
            category = "correction"
        if text is None or has_secret(text):
            continue
        rid = f"{record_id(cmd.scenario, cmd.index)}.t{int(ev['seq']):04d}"
        recs[rid] = _Rec(rid, "session", sid, text, str(category), state="candidate",
                         order=cmd.index * 1000 + int(ev["seq"]))
        created.append(rid)
    return MemOp(cmd.index, cmd.legacy_op, "ok", created=tuple(created),
                 detail={"source_scope": "session", "scope": "session"})

