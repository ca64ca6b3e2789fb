"""session-core ``MemoryStore`` / ``TraceStore`` / ``MemoryConsolidator`` → projection.

Each recorded operation becomes a :class:`~shadow.projection.MemOp`; legacy record ids
(``mem_<16 hex>``) map to canonical identities: the record created by operation *i* is
``<scenario>:op000i``; a consolidated fact is ``<scenario>:op000i.t000s`` where *s* is
the trace sequence of the evidence event its content came from (``.w<j>`` when no event
matches).  Effects are read from the return values: ``add`` creates, ``update`` updates
(a changed scope is recorded), ``remove`` → ``true`` deletes / ``false`` is a no-op,
``clearScope`` deletes the records of that scope (and scopeId, except for global — the
legacy's documented semantics; the returned count is the receipt), ``recall`` / ``list``
/ ``get`` return identities.  Legacy records carry no sensitivity and no state beyond
present/removed: state is ``active`` or ``deleted``.  Timestamps and ``relevance``
scores are noise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shadow.canonical import Canon, record_id
from shadow.fixtures import Capture
from shadow.projection import MemOp, MemoryProjection, MemRecord, Projection, content_digest
from shadow.surfaces.cli_compress import error_category


class _State:
    def __init__(self, scenario: str) -> None:
        self.scenario = scenario
        self.ids: dict[str, str] = {}  # legacy id -> identity
        self.recs: dict[str, dict[str, Any]] = {}  # identity -> record facts
        self.order: list[str] = []
        self.traces: list[tuple[int, str]] = []  # (seq, evidence text)

    def ident(self, legacy: Any) -> str:
        if isinstance(legacy, str) and legacy in self.ids:
            return self.ids[legacy]
        return f"{self.scenario}:unknown:{content_digest(str(legacy))[7:19]}"

    def put(self, ident: str, rec: Mapping[str, Any], state: str = "active") -> None:
        if ident not in self.recs:
            self.order.append(ident)
        self.recs[ident] = {"scope": rec.get("scope"), "scope_id": rec.get("scopeId"),
                            "state": state, "digest": content_digest(str(rec.get("content"))),
                            "category": rec.get("category"), "history": [rec.get("scope")]}


def _returned(st: _State, result: Any) -> tuple[str, ...]:
    if isinstance(result, Mapping):
        result = [result]
    if not isinstance(result, list):
        return ()
    return tuple(st.ident(r.get("id")) for r in result if isinstance(r, Mapping))


def _fact_id(st: _State, op_index: int, content: str, j: int) -> str:
    for seq, text in st.traces:
        if text and text in content:
            return f"{record_id(st.scenario, op_index)}.t{seq:04d}"
    return f"{record_id(st.scenario, op_index)}.w{j}"


def _op(st: _State, raw: Mapping[str, Any]) -> MemOp:
    i = int(raw.get("index", 0))
    op = str(raw.get("op"))
    result, error = raw.get("result"), raw.get("error")
    args = raw.get("args")
    if error is not None:
        return MemOp(i, op, "error", error=error_category(error))
    if op == "add" and isinstance(result, Mapping):
        ident = record_id(st.scenario, i)
        st.ids[str(result.get("id"))] = ident
        st.put(ident, result)
        req = args if isinstance(args, Mapping) else {}
        return MemOp(i, op, "ok", created=(ident,),
                     detail={"selector": {"scope": req.get("scope"),
                                          "scope_id": req.get("scopeId")}})
    if op == "update":
        if not isinstance(result, Mapping):
            return MemOp(i, op, "noop")
        ident = st.ident(result.get("id"))
        prev = st.recs.get(ident, {})
        st.put(ident, result, prev.get("state", "active"))
        st.recs[ident]["history"] = [*prev.get("history", []), result.get("scope")]
        return MemOp(i, op, "ok", updated=(ident,))
    if op == "remove":
        ident = st.ident((args or {}).get("id") if isinstance(args, Mapping) else None)
        if result is True and ident in st.recs:
            st.recs[ident]["state"] = "deleted"
            return MemOp(i, op, "ok", deleted=(ident,), detail={"receipt": True})
        return MemOp(i, op, "noop", detail={"receipt": bool(result)})
    if op == "clearScope":
        a = args if isinstance(args, list) else []
        scope = a[0] if a else None
        sid = a[1] if len(a) > 1 else None
        hit = [k for k in st.order if st.recs[k]["state"] != "deleted"
               and st.recs[k]["scope"] == scope
               and (scope == "global" or st.recs[k]["scope_id"] == sid)]
        if isinstance(result, int) and result != len(hit):
            hit = hit[:result]
        for k in hit:
            st.recs[k]["state"] = "deleted"
        return MemOp(i, op, "ok", deleted=tuple(hit),
                     detail={"receipt": result, "selector": {"scope": scope, "scope_id": sid}})
    if op in ("recall", "list", "get"):
        sel = {}
        if isinstance(args, Mapping) and op != "get":
            sel = {"selector": {"scope": args.get("scope"), "scope_id": args.get("scopeId")}}
        return MemOp(i, op, "ok", returned=_returned(st, result), detail=sel)
    if op == "trace.record" and isinstance(result, Mapping):
        payload = result.get("payload") if isinstance(result.get("payload"), Mapping) else {}
        text = payload.get("content") or payload.get("summary") or payload.get("message") or ""
        st.traces.append((int(result.get("seq") or 0), str(text)))
        return MemOp(i, op, "ok")
    if op == "consolidate" and isinstance(result, Mapping):
        created = []
        for j, rec in enumerate(result.get("written") or ()):
            if not isinstance(rec, Mapping):
                continue
            ident = _fact_id(st, i, str(rec.get("content") or ""), j)
            st.ids[str(rec.get("id"))] = ident
            st.put(ident, rec)
            created.append(ident)
        return MemOp(i, op, "ok", created=tuple(created),
                     detail={"source_scope": "session", "scope": result.get("scope")})
    if op == "stats" and isinstance(result, Mapping):
        counts = {k: v for k, v in result.items() if k != "total"}
        return MemOp(i, op, "ok", detail={"counts": counts})
    return MemOp(i, op, "ok")


def adapt(canon: Canon, capture: Capture) -> Projection:
    out = capture.output
    if capture.error is not None or not isinstance(out, Mapping):
        return Projection(canon.name, capture.name, "baseline", status="error",
                          error=error_category(capture.error))
    st = _State(canon.name)
    ops = tuple(_op(st, raw) for raw in out.get("ops") or () if isinstance(raw, Mapping))
    records = tuple(
        MemRecord(id=k, scope=str(st.recs[k]["scope"]), scope_id=st.recs[k]["scope_id"],
                  state=st.recs[k]["state"], sensitivity=None, digest=st.recs[k]["digest"],
                  category=st.recs[k]["category"])
        for k in st.order)
    history = {k: st.recs[k]["history"] for k in st.order if len(set(st.recs[k]["history"])) > 1}
    return Projection(canon.name, capture.name, "baseline",
                      memory=MemoryProjection(records=records, ops=ops),
                      facts={"scope_history": history} if history else {})
