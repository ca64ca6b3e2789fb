"""session-core ``MemoryStore`` / ``TraceStore`` / ``MemoryConsolidator`` → projection.

Each recorded operation becomes a :class:`~shadow.projection.MemOp`; legacy record ids
(``mem_<16 hex>``) map to canonical identities: the record created by operation *i* is
``<scenario>:op000i``; a consolidated fact is ``<scenario>:op000i.t000s`` where *s* is
the trace sequence of the evidence event its content came from (``.w<j>`` when no event
matches).  Effects are read from the return values: ``add`` creates, ``update`` updates
(a changed scope is recorded), ``remove`` → ``true`` deletes (``true`` for an absent or
already deleted record is a success that removed nothing) / ``false`` is a no-op,
``clearScope`` deletes the records of that scope (and scopeId, except for global — the
legacy's documented semantics; the returned count is the receipt), ``recall`` / ``list``
/ ``get`` return identities.  Legacy records carry no sensitivity and no state beyond
present/removed: state is ``active`` or ``deleted``.  Timestamps and ``relevance``
scores are noise.

Several store instances (an op's ``store``; docs/fixtures.md): each record's membership
is followed per instance — ``add`` / ``consolidate`` put it in the op's store, a removal
takes it out of that store only, ``clearScope`` clears that store's records, and
``open`` / ``hydrate`` (a store loaded from the persisted file) hold exactly the
capture's ``store_ids``, which the op *returns* (what the snapshot made visible).  A
record a read or a load returns is present again: a deleted record that comes back
(a stale replica, a snapshot written back) is ``active`` and named in ``restored`` —
the invariants see it as ``deletion.backfill``.  ``size`` reports its count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from shadow.boundary import list_at, mapping_at
from shadow.canonical import Canon, has_secret, record_id
from shadow.divergence.provenance import sketch, string_leaves
from shadow.fixtures import Capture
from shadow.projection import MemOp, MemoryProjection, MemRecord, Projection, content_digest
from shadow.recorded_provider import facts_truth
from shadow.surfaces.cli_compress import error_category


class _State:
    def __init__(self, scenario: str, exchanges: list[Mapping[str, Any]] | None = None) -> None:
        self.scenario = scenario
        self.exchanges = list(exchanges or ())  # recorded summariser calls, in order
        self.llm_calls = 0
        self.text: dict[str, str] = {}  # identity -> what the legacy scorer matches (memory only)
        self.ids: dict[str, str] = {}  # legacy id -> identity
        self.recs: dict[str, dict[str, Any]] = {}  # identity -> record facts
        self.order: list[str] = []
        self.traces: list[tuple[int, str]] = []  # (seq, evidence text)
        self.where: dict[str, set[str | None]] = {}  # identity -> store instances holding it

    def ident(self, legacy: Any) -> str:
        if isinstance(legacy, str) and legacy in self.ids:
            return self.ids[legacy]
        return f"{self.scenario}:unknown:{content_digest(str(legacy))[7:19]}"

    def put(self, ident: str, rec: Mapping[str, Any], state: str = "active") -> None:
        if ident not in self.recs:
            self.order.append(ident)
        content = str(rec.get("content"))
        tags = list_at(rec, "tags")
        self.text[ident] = " ".join([content, " ".join(map(str, tags)),
                                     str(rec.get("category") or "")]).lower()
        self.recs[ident] = {"scope": rec.get("scope"), "scope_id": rec.get("scopeId"),
                            "state": state, "digest": content_digest(content),
                            "category": rec.get("category"), "history": [str(rec.get("scope"))],
                            "shingles": tuple(sketch(content)),
                            "content_sensitivity": "secret" if has_secret(content) else None}


def _returned(st: _State, result: Any) -> tuple[str, ...]:
    if isinstance(result, Mapping):
        result = [result]
    if not isinstance(result, list):
        return ()
    return tuple(st.ident(r.get("id")) for r in result if isinstance(r, Mapping))


def _present(st: _State, returned: tuple[str, ...], store: str | None) -> list[str]:
    """Records a read or load returned are present (in ``store``); the deleted ones among
    them are back (``restored``)."""
    restored = []
    for ident in returned:
        st.where.setdefault(ident, set()).add(store)
        rec = st.recs.get(ident)
        if rec is not None and rec["state"] == "deleted":
            rec["state"] = "active"
            restored.append(ident)
    return restored


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
    store = raw.get("store") if isinstance(raw.get("store"), str) else None
    mop = _op_in(st, i, op, store, args, result, error, raw)
    if store is None:
        return mop
    return replace(mop, detail={**mop.detail, "store": store})


def _asked_selector(op: str, args: Any) -> dict[str, Any] | None:
    """The scope an operation asked for, read from its arguments as the ``ok`` branches
    read them (``add``/``recall``/``list``: ``{scope, scopeId}``; ``clearScope``:
    ``[scope, scopeId]``); None for operations without one."""
    if op in ("add", "recall", "list") and isinstance(args, Mapping):
        return {"scope": args.get("scope"), "scope_id": args.get("scopeId")}
    if op == "clearScope" and isinstance(args, list):
        return {"scope": args[0] if args else None,
                "scope_id": args[1] if len(args) > 1 else None}
    return None


def _op_in(st: _State, i: int, op: str, store: str | None, args: Any, result: Any,
           error: Any, raw: Mapping[str, Any]) -> MemOp:
    if op == "consolidate":
        return _consolidate(st, i, op, args, result, error, store)
    if error is not None:  # what was asked does not depend on how the legacy answered
        asked = _asked_selector(op, args)
        return MemOp(i, op, "error", error=error_category(error),
                     detail={"selector": asked} if asked else {})
    if op == "add" and isinstance(result, Mapping):
        ident = record_id(st.scenario, i)
        st.ids[str(result.get("id"))] = ident
        st.put(ident, result)
        st.where[ident] = {store}
        asked = _asked_selector(op, args) or {"scope": None, "scope_id": None}
        return MemOp(i, op, "ok", created=(ident,), detail={"selector": asked})
    if op in ("open", "hydrate"):
        loaded = tuple(st.ident(x) for x in list_at(raw, "store_ids"))
        restored = _present(st, loaded, store)
        detail: dict[str, Any] = {"hydrated": result}
        if restored:
            detail["restored"] = restored
        return MemOp(i, op, "ok", returned=loaded, detail=detail)
    if op == "size":
        return MemOp(i, op, "ok", detail={"size": result})
    if op == "update":
        if not isinstance(result, Mapping):
            return MemOp(i, op, "noop")
        ident = st.ident(result.get("id"))
        prev = st.recs.get(ident, {})
        st.put(ident, result, prev.get("state", "active"))
        st.recs[ident]["history"] = [*prev.get("history", []), str(result.get("scope"))]
        return MemOp(i, op, "ok", updated=(ident,))
    if op == "remove":
        ident = st.ident((args or {}).get("id") if isinstance(args, Mapping) else None)
        target = {"target": ident} if ident in st.recs else {}
        if result is True:
            st.where.get(ident, set()).discard(store)
        if result is True and ident in st.recs and st.recs[ident]["state"] != "deleted":
            st.recs[ident]["state"] = "deleted"
            return MemOp(i, op, "ok", deleted=(ident,), detail={"receipt": True, **target})
        if result is True:  # success claimed for a record that is absent or already gone
            return MemOp(i, op, "ok", detail={"receipt": True, **target})
        return MemOp(i, op, "noop", detail={"receipt": bool(result), **target})
    if op == "clearScope":
        asked = _asked_selector(op, args) or {"scope": None, "scope_id": None}
        scope, sid = asked["scope"], asked["scope_id"]
        hit = [k for k in st.order if st.recs[k]["state"] != "deleted"
               and store in st.where.get(k, ())
               and st.recs[k]["scope"] == scope
               and (scope == "global" or st.recs[k]["scope_id"] == sid)]
        if isinstance(result, int) and result != len(hit):
            hit = hit[:result]
        for k in hit:
            st.recs[k]["state"] = "deleted"
            st.where[k].discard(store)
        return MemOp(i, op, "ok", deleted=tuple(hit),
                     detail={"receipt": result, "selector": asked})
    if op in ("recall", "list", "get"):
        asked = _asked_selector(op, args)
        sel: dict[str, Any] = {"selector": asked} if asked else {}
        returned = _returned(st, result)
        restored = _present(st, returned, store)
        if restored:
            sel["restored"] = restored
        if op == "recall" and isinstance(args, Mapping):
            # the legacy's own relevance rule: a query token occurs in content, tags or
            # category; a record returned without one is not a recall hit
            query = [t for t in str(args.get("query") or "").lower().split() if t]
            bad = [r for r in returned if query and r in st.text
                   and not any(t in st.text[r] for t in query)]
            if bad:
                sel["irrelevant"] = bad
        return MemOp(i, op, "ok", returned=returned, detail=sel)
    if op == "trace.record" and isinstance(result, Mapping):
        payload = mapping_at(result, "payload")
        text = payload.get("content") or payload.get("summary") or payload.get("message") or ""
        st.traces.append((int(result.get("seq") or 0), str(text)))
        return MemOp(i, op, "ok")
    if op == "stats" and isinstance(result, Mapping):
        counts = {k: v for k, v in result.items() if k != "total"}
        return MemOp(i, op, "ok", detail={"counts": counts})
    return MemOp(i, op, "ok")


def _summarizer(st: _State, index: int, args: Any, result: Any) -> dict[str, Any] | None:
    """The recorded summariser exchange of an LLM consolidation (``useLLM``): what the
    recording says, whether the legacy marked its result degraded, whether the request
    carried secret material.  Exchanges pair with LLM consolidations in order (or by an
    exchange's own ``op`` index)."""
    opts = args[1] if isinstance(args, list) and len(args) > 1 and isinstance(
        args[1], Mapping) else {}
    if opts.get("useLLM") is not True:
        return None
    ex = next((e for e in st.exchanges if e.get("op") == index), None)
    if ex is None:
        ex = st.exchanges[st.llm_calls] if st.llm_calls < len(st.exchanges) else None
    st.llm_calls += 1
    if ex is None:
        return {"truth": "unrecorded", "degraded": None}
    res = result if isinstance(result, Mapping) else {}
    marks = [res.get("degraded")] + [
        (w.get("metadata") or {}).get("degraded") for w in res.get("written") or ()
        if isinstance(w, Mapping) and isinstance(w.get("metadata"), Mapping)]
    return {"truth": facts_truth(ex), "degraded": any(m is True for m in marks),
            "sent_secret": any(has_secret(t) for t in string_leaves(ex.get("request")))}


def _consolidate(st: _State, i: int, op: str, args: Any, result: Any, error: Any,
                 store: str | None = None) -> MemOp:
    summ = _summarizer(st, i, args, result)
    extra: dict[str, Any] = {"summarizer": summ} if summ is not None else {}
    if error is not None:
        return MemOp(i, op, "error", error=error_category(error), detail=extra)
    if not isinstance(result, Mapping):
        return MemOp(i, op, "ok", detail=extra)
    created = []
    for j, rec in enumerate(result.get("written") or ()):
        if not isinstance(rec, Mapping):
            continue
        ident = _fact_id(st, i, str(rec.get("content") or ""), j)
        st.ids[str(rec.get("id"))] = ident
        st.put(ident, rec)
        st.where[ident] = {store}
        created.append(ident)
    return MemOp(i, op, "ok", created=tuple(created),
                 detail={"source_scope": "session", "scope": result.get("scope"), **extra})


def adapt(canon: Canon, capture: Capture, siblings: Mapping[str, Capture] | None = None
          ) -> Projection:
    out = capture.output
    if capture.error is not None or not isinstance(out, Mapping):
        return Projection(canon.name, capture.name, "baseline", status="error",
                          error=error_category(capture.error))
    st = _State(canon.name, [r for r in canon.doc.get("provider_responses") or ()
                             if isinstance(r, Mapping) and r.get("surface") == capture.surface])
    ops = tuple(_op(st, raw) for raw in out.get("ops") or () if isinstance(raw, Mapping))
    records = tuple(
        MemRecord(id=k, scope=str(st.recs[k]["scope"]), scope_id=st.recs[k]["scope_id"],
                  state=st.recs[k]["state"], sensitivity=None, digest=st.recs[k]["digest"],
                  category=st.recs[k]["category"], shingles=st.recs[k]["shingles"],
                  content_sensitivity=st.recs[k]["content_sensitivity"])
        for k in st.order)
    history = {k: st.recs[k]["history"] for k in st.order if len(set(st.recs[k]["history"])) > 1}
    return Projection(canon.name, capture.name, "baseline",
                      memory=MemoryProjection(records=records, ops=ops),
                      facts={"scope_history": history} if history else {})
