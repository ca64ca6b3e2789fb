"""The candidate's memory side: each canonical memory command executed by the live
kernel (:class:`kernel.memory.service.MemoryKernel`) over the in-memory MemoryPort, and
the outcome reduced to the memory :class:`~shadow.projection.Projection`.

One fresh store per (fixture, surface); a fixed clock (the captures' fake clock: the
operation at index *i* runs at ``BASE_TIME_MS + (i + 1)·1000``) and a counter for ids,
so a replay is a pure function of ``input.json``.  The kernel's recall runs over a
scoped lexical index (:class:`kernel.memory.recall.RecordIndex`, canonical analyzer) that
follows the port's change feed and is also a deletion purge target.

Mapping (docs/surfaces.md, "Memory candidate"):

``propose`` (legacy ``add``)
    ``propose_memory`` with ``activate: true`` — an explicit user write is active at
    once (design 108 §9.2); provenance ``explicit-user-memory``, evidence = the
    operation, sensitivity ``internal``, sinks ``*`` (the legacy has no sink policy),
    confidence 0.9, importance 0.5, retention ``session`` for session scope else
    ``durable``.  A legacy ``scopeId`` on ``global`` is dropped (the legacy contract:
    scopeId is required except for global; a global record has none).  ``score`` and
    ``metadata`` have no canonical equivalent.  The kernel validates everything else
    (scope, scopeId, category, content, secret material, tag sets).
``update``
    Records are never edited in place: an accepted patch (``content``, ``category``,
    ``tags``) proposes an active **successor** carrying the patched fields and
    ``supersedes: [current]`` (provenance ``user-correction``), then ``decide_memory``
    ``supersede`` retires the current version (``userCorrection: true``; the kernel's
    supersession policy must accept it).  Effects: ``created`` = the successor
    (``<identity>.u<op>``), ``updated`` = the superseded version.  A patch naming
    ``scope``, ``scopeId`` or ``id`` is refused whole (``scope_denied``: a scope change
    is the audited ``promote_memory_scope``, which a legacy update cannot authorise);
    a target whose current version cannot be superseded is refused by the kernel's
    table before anything is written; an unknown or deleted target is a ``noop`` (the
    legacy answers ``null``; no kernel command is issued).
``delete`` (legacy ``remove``)
    ``delete_memory`` per version of the named record (the live head and the versions
    it superseded), each with the selector ``memory:<memoryId>`` and the record's own
    scope, a fresh request id and fence; the receipt's status and per-store entries
    are reported.  Nothing live to delete → ``noop`` (the legacy's ``false``).
``clear_scope`` (legacy ``clearScope``)
    the selector ``(scope, scopeId)`` must pass the kernel's scope rule (a ``global``
    selector with a scopeId is refused — never widened to every global record); then
    one ``delete_memory`` per record ``list_scope`` returns for exactly that pair.
``recall`` / ``list`` / ``get``
    ``recall_memory`` with the one admission the arguments name (no admission → the
    kernel refuses: no cross-scope scan as fallback); legacy ``category`` / ``tags``
    filters, which the kernel has no equivalent for, narrow the kernel's ranked result
    (asked with limit 1000) before the legacy limit is applied.  ``list`` reads
    ``list_scope`` of one scope the kernel's scope rule accepts; ``get`` reads the
    named record's live head.  Only ``active`` / ``reinforced`` records are returned.
``trace_record`` / ``consolidate``
    traced events become the session's evidence items (messages trusted by
    :func:`kernel.packets.trust.source_trust` as the canonical session does, tool results and
    errors ``external``); ``consolidate_session`` proposes **candidates** at session
    scope of the traced session (never the legacy's agent default: consolidation is
    never wider than its input); candidate identity ``<op>.t<seq>`` from the evidence
    event; repeats are the kernel's ``duplicates`` (content-derived ids).

``open_store`` / ``hydrate_store`` / ``size`` (legacy ``open``, ``hydrate``, ``size``) and
the ``store`` of an operation
    a legacy store instance (a process's ``MemoryStore`` loaded from the persisted file,
    a replica, a snapshot merged into a live store) is a *view* of the kernel's one
    authority, never a second copy of it: every operation, whichever instance names it,
    runs against the one MemoryPort (the instance is kept as ``detail.store``).
    Opening or hydrating an instance is the kernel's index rebuild —
    :meth:`kernel.memory.recall.RecordIndex.rebuild` from the authority — and returns
    the recallable records the rebuilt view holds (``detail.rebuilt``); a deleted
    record is a tombstone in the authority, so no view can bring it back.  ``size``
    counts the recallable records.  What a stale legacy replica returns after a
    deletion elsewhere therefore shows as a difference of the returned sets, and the
    baseline's own ``deletion.backfill`` (docs/memory.md, "Store instances").

Projection: record state is the kernel's, except that both tombstone states
(``deleted``, ``purged``) read ``deleted`` — the projection vocabulary's "removed";
whether every copy was purged is the deletion receipt's status on the operation.  The
record digest is the digest of the kernel's content (empty for a tombstone).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from kernel.canonical.checks import assert_scope
from kernel.canonical.timestamps import epoch_ms_to_iso
from kernel.errors import KernelError, ScopeDenied
from kernel.memory.index import LexicalIndex
from kernel.memory.lifecycle import RECALLABLE_STATES, TOMBSTONE_STATES, next_state
from kernel.memory.recall import RecordIndex, recall_memory
from kernel.memory.service import MemoryKernel
from kernel.packets.trust import source_trust, tool_source_kind
from kernel.ports import MemoryPort
from shadow import bootstrap
from shadow.canonical import BASE_TIME_MS, Canon, MemoryCommand, has_secret, record_id
from shadow.divergence.provenance import sketch
from shadow.projection import MemOp, MemoryProjection, MemRecord, Projection, content_digest

IDENTITY: Final = "kernel.memory.service"
SINK: Final = "provider"
INDEX_STORE: Final = "memory-recall-index"
AUTHORITY: Final = "legacy-session-core"
EXPLICIT_CONFIDENCE: Final = 0.9
EXPLICIT_IMPORTANCE: Final = 0.5
_SCOPE_FIELDS: Final = frozenset({"scope", "scopeId", "id"})
_PATCH_FIELDS: Final = ("content", "category", "tags")
_FILTER_LIMIT: Final = 1000


def project(canon: Canon, surface: str) -> Projection:
    """Run the scenario's memory commands through the kernel; the candidate projection."""
    driver = _Driver(canon.name)
    ops = tuple(driver.run(cmd) for cmd in canon.memory or ())
    return Projection(canon.name, surface, "candidate",
                      memory=MemoryProjection(records=driver.records(), ops=ops))


class _IndexCopy:
    """The recall index as a deletion purge target: the copy is gone once the index has
    followed the change feed past the tombstone (and the entry is removed)."""

    name = INDEX_STORE

    def __init__(self, holder: RecordIndex, port: MemoryPort) -> None:
        self._holder = holder
        self._port = port

    def purge(self, request: Mapping[str, Any]) -> dict[str, Any]:
        memory_id = str(request["memoryId"])
        index = self._holder.index
        existed = index is not None and memory_id in index
        if index is not None:
            self._holder.sync(self._port)  # IndexCorrupt → the store stays pending
            index.remove(memory_id)
        return {"store": self.name, "status": "purged", "objectId": memory_id,
                "fence": request["fence"], "existed": existed}


class _Driver:
    def __init__(self, scenario: str) -> None:
        self.scenario = scenario
        self.now_ms = BASE_TIME_MS
        self._ids = 0
        self.port = bootstrap.fresh_memory()
        self.index = RecordIndex("canonical", LexicalIndex("canonical", watermark=0))
        self.kernel = MemoryKernel(
            memory_port=self.port, clock=self.clock, new_id=self.new_id,
            purge_ports=(_IndexCopy(self.index, self.port),), recall=self._recall)
        self.pid: dict[str, str] = {}  # kernel memoryId -> projection identity
        self.order: list[str] = []  # kernel memoryIds in creation order
        self.lineage: dict[str, list[str]] = {}  # legacy identity -> versions, head last
        self.traces: list[dict[str, Any]] = []
        self.last_recall: dict[str, Any] = {}

    # ----------------------------------------------------------------- injected values
    def clock(self) -> int:
        return self.now_ms

    def new_id(self) -> str:
        self._ids += 1
        return f"k{self._ids:06d}"

    def _recall(self, port: Any, request: Mapping[str, Any]) -> Mapping[str, Any]:
        outcome = recall_memory(port, request, index=self.index)
        self.last_recall = {"path": outcome.path}
        if outcome.degraded is not None:
            self.last_recall["degraded"] = outcome.degraded.reason_code
        return outcome.result

    # ----------------------------------------------------------------- bookkeeping
    def _created(self, memory_id: str, pid: str) -> str:
        self.pid[memory_id] = pid
        self.order.append(memory_id)
        return pid

    def _head(self, target: str | None) -> dict[str, Any] | None:
        versions = self.lineage.get(target or "")
        return self.port.read(versions[-1]) if versions else None

    def records(self) -> tuple[MemRecord, ...]:
        out = []
        for memory_id in self.order:
            r = self.port.read(memory_id)
            if r is None:
                continue
            state = "deleted" if r["state"] in TOMBSTONE_STATES else r["state"]
            content = str(r["content"])
            trust = r.get("trust")
            out.append(MemRecord(id=self.pid[memory_id], scope=r["scope"],
                                 scope_id=r.get("scopeId"), state=state,
                                 sensitivity=r["sensitivity"],
                                 digest=content_digest(content), category=r["category"],
                                 shingles=tuple(sketch(content)),
                                 trust=trust if isinstance(trust, str) else None,
                                 content_sensitivity="secret" if has_secret(content) else None))
        return tuple(out)

    # ----------------------------------------------------------------- dispatch
    def run(self, cmd: MemoryCommand) -> MemOp:
        self.now_ms = BASE_TIME_MS + (cmd.index + 1) * 1000
        handler = _HANDLERS.get(cmd.op)
        if handler is None:
            return MemOp(cmd.index, cmd.legacy_op, "error", error="unsupported")
        try:
            out = handler(self, cmd)
        except KernelError as exc:  # the kernel's refusal is the candidate's answer
            out = MemOp(cmd.index, cmd.legacy_op, "error", error=exc.code)
        if cmd.store is None:
            return out
        return replace(out, detail={**out.detail, "store": cmd.store})

    # ----------------------------------------------------------------- writes
    def propose(self, cmd: MemoryCommand) -> MemOp:
        args = _mapping(cmd.args)
        scope = args.get("scope")
        proposal: dict[str, Any] = {
            "memoryId": f"mem-op{cmd.index:04d}", "scope": scope,
            "category": args.get("category") or "general", "content": args.get("content"),
            "provenance": {"source": "explicit-user-memory", "actor": AUTHORITY,
                           "observedAt": self._iso()},
            "evidenceRefs": [self._op_ref(cmd)],
            "confidence": EXPLICIT_CONFIDENCE, "importance": EXPLICIT_IMPORTANCE,
            "tags": args.get("tags"), "sensitivity": "internal",
            "allowedSinks": ["*"],
            "retentionPolicy": {"mode": "session" if scope == "session" else "durable"},
            "activate": True,
        }
        if scope != "global" and "scopeId" in args:
            proposal["scopeId"] = args["scopeId"]
        record = self.kernel.propose_memory(proposal)["record"]
        pid = self._created(record["memoryId"], cmd.target or record_id(self.scenario, cmd.index))
        self.lineage[pid] = [record["memoryId"]]
        return MemOp(cmd.index, cmd.legacy_op, "ok", created=(pid,),
                     detail={"selector": _selector(record), "state": record["state"]})

    def update(self, cmd: MemoryCommand) -> MemOp:
        patch = _mapping(_mapping(cmd.args).get("patch"))
        current = self._head(cmd.target)
        if current is None or current["state"] in TOMBSTONE_STATES:
            return MemOp(cmd.index, cmd.legacy_op, "noop", detail={"reason": "not_found"})
        if set(patch) & _SCOPE_FIELDS:
            raise ScopeDenied("a scope or identity change is not an update")
        if not set(patch) & set(_PATCH_FIELDS):
            return MemOp(cmd.index, cmd.legacy_op, "noop",
                         detail={"reason": "no_canonical_field"})
        next_state(current["state"], "supersede")  # the table refuses before any write
        root = cmd.target or ""
        successor: dict[str, Any] = {
            "memoryId": f"{self.lineage[root][0]}.u{cmd.index:04d}",
            "scope": current["scope"],
            "category": patch.get("category", current["category"]),
            "content": patch.get("content", current["content"]),
            "provenance": {"source": "user-correction", "actor": AUTHORITY,
                           "observedAt": self._iso()},
            "evidenceRefs": [self._op_ref(cmd),
                             {"store": "memory", "id": current["memoryId"],
                              "revision": current["revision"], "digest": current["digest"]}],
            "confidence": current["confidence"], "importance": current["importance"],
            "tags": patch["tags"] if "tags" in patch else current["tags"],
            "sensitivity": current["sensitivity"], "allowedSinks": current["allowedSinks"],
            "retentionPolicy": current["retentionPolicy"], "activate": True,
            "supersedes": [current["memoryId"]],
        }
        if "scopeId" in current:
            successor["scopeId"] = current["scopeId"]
        new = self.kernel.propose_memory(successor)["record"]
        pid = self._created(new["memoryId"], f"{root}.u{cmd.index:04d}")
        try:
            self.kernel.decide_memory({
                "memoryId": current["memoryId"], "type": "supersede",
                "expectedRevision": current["revision"], "successorMemoryId": new["memoryId"],
                "reason": "legacy update", "authority": AUTHORITY, "userCorrection": True})
        except KernelError:  # refused: the successor must not outlive the refusal
            self._delete_one(cmd, new)
            raise
        self.lineage[root].append(new["memoryId"])
        return MemOp(cmd.index, cmd.legacy_op, "ok", created=(pid,),
                     updated=(self.pid[current["memoryId"]],),
                     detail={"selector": _selector(new),
                             "supersedes": self.pid[current["memoryId"]]})

    def delete(self, cmd: MemoryCommand) -> MemOp:
        versions = [r for r in (self.port.read(m) for m in self.lineage.get(cmd.target or "", ()))
                    if r is not None and r["state"] not in TOMBSTONE_STATES]
        if not versions:
            return MemOp(cmd.index, cmd.legacy_op, "noop", detail={"receipt": False})
        receipts = [self._delete_one(cmd, r) for r in reversed(versions)]
        return MemOp(cmd.index, cmd.legacy_op, "ok",
                     deleted=tuple(str(x["memoryId"]) for x in receipts),
                     detail={"receipt": True, "deletions": receipts})

    def clear_scope(self, cmd: MemoryCommand) -> MemOp:
        args: list[Any] = list(cmd.args) if isinstance(cmd.args, (list, tuple)) else []
        scope = args[0] if args else None
        scope_id = args[1] if len(args) > 1 else None
        sel = assert_scope(scope, scope_id)  # the kernel's scope rule, verbatim
        records = [r for r in self.port.list_scope(sel["scope"], sel.get("scopeId"))
                   if r["state"] not in TOMBSTONE_STATES]
        receipts = [self._delete_one(cmd, r) for r in records]
        return MemOp(cmd.index, cmd.legacy_op, "ok",
                     deleted=tuple(str(x["memoryId"]) for x in receipts),
                     detail={"receipt": len(receipts), "deletions": receipts,
                             "selector": {"scope": sel["scope"],
                                          "scope_id": sel.get("scopeId")}})

    def _delete_one(self, cmd: MemoryCommand, record: Mapping[str, Any]) -> dict[str, Any]:
        """One ``deleteMemory`` whose selector is exactly this record."""
        memory_id = record["memoryId"]
        n = self.new_id()
        request: dict[str, Any] = {
            "requestId": f"del-op{cmd.index:04d}-{n}", "subject": AUTHORITY,
            "scope": record["scope"], "selector": f"memory:{memory_id}",
            "memoryId": memory_id, "expectedRevision": record["revision"],
            "fence": f"fence-op{cmd.index:04d}-{n}", "authority": AUTHORITY,
            "reason": f"legacy {cmd.legacy_op}",
        }
        if "scopeId" in record:
            request["scopeId"] = record["scopeId"]
        receipt = self.kernel.delete_memory(request)
        return {"memoryId": self.pid[memory_id], "status": receipt["status"],
                "selector": receipt["selector"],
                "stores": [{"store": s["store"], "status": s["status"]}
                           for s in receipt["stores"]]}

    # ----------------------------------------------------------------- reads
    def recall(self, cmd: MemoryCommand) -> MemOp:
        args = _mapping(cmd.args)
        admissions = []
        if "scope" in args:
            admissions.append({k: args[k] for k in ("scope", "scopeId") if k in args})
        category = args.get("category") if isinstance(args.get("category"), str) else None
        tags = {t for t in args.get("tags") or () if isinstance(t, str)} \
            if isinstance(args.get("tags"), list) else set()
        limit = args.get("limit", 10)
        narrow = bool(category or tags) and isinstance(limit, int) and limit >= 1
        request = {"query": args.get("query"), "sink": SINK, "scopeAdmissions": admissions,
                   "limit": _FILTER_LIMIT if narrow else limit, "now": self._iso()}
        result = self.kernel.recall_memory(request)
        hits = [h for h in result["results"]
                if (not category or h["record"]["category"] == category)
                and (not tags or tags & set(h["record"]["tags"]))]
        if narrow:
            hits = hits[:limit]
        adm = admissions[0]
        return MemOp(cmd.index, cmd.legacy_op, "ok",
                     returned=tuple(self.pid[h["memoryId"]] for h in hits),
                     detail={"selector": {"scope": adm.get("scope"),
                                          "scope_id": adm.get("scopeId")},
                             **self.last_recall})

    def list_scope(self, cmd: MemoryCommand) -> MemOp:
        args = _mapping(cmd.args)
        sel = assert_scope(args.get("scope"), args.get("scopeId"))
        records = self.port.list_scope(sel["scope"], sel.get("scopeId"), RECALLABLE_STATES)
        return MemOp(cmd.index, cmd.legacy_op, "ok",
                     returned=tuple(self.pid[r["memoryId"]] for r in records),
                     detail={"selector": {"scope": sel["scope"],
                                          "scope_id": sel.get("scopeId")}})

    def get(self, cmd: MemoryCommand) -> MemOp:
        head = self._head(cmd.target)
        live = head is not None and head["state"] in RECALLABLE_STATES
        return MemOp(cmd.index, cmd.legacy_op, "ok",
                     returned=(self.pid[head["memoryId"]],) if live and head else ())

    def _live(self) -> list[str]:
        """Recallable records (their kernel memoryIds), in creation order."""
        live = []
        for memory_id in self.order:
            r = self.port.read(memory_id)
            if r is not None and r["state"] in RECALLABLE_STATES:
                live.append(memory_id)
        return live

    def open_store(self, cmd: MemoryCommand) -> MemOp:
        """A legacy store instance loaded from the persisted file (``open``) or a
        snapshot merged into one (``hydrate``): the index rebuilt from the authority."""
        self.index.rebuild(self.port)
        live = self._live()
        return MemOp(cmd.index, cmd.legacy_op, "ok",
                     returned=tuple(self.pid[m] for m in live),
                     detail={"rebuilt": len(live)})

    def size(self, cmd: MemoryCommand) -> MemOp:
        return MemOp(cmd.index, cmd.legacy_op, "ok", detail={"size": len(self._live())})

    def stats(self, cmd: MemoryCommand) -> MemOp:
        counts: dict[str, int] = {}
        for r in self.port.records():
            if r["state"] in RECALLABLE_STATES:
                counts[r["scope"]] = counts.get(r["scope"], 0) + 1
        return MemOp(cmd.index, cmd.legacy_op, "ok", detail={"counts": counts})

    # ----------------------------------------------------------------- traces
    def trace_record(self, cmd: MemoryCommand) -> MemOp:
        args = _mapping(cmd.args)
        self.traces.append({**args, "seq": len(self.traces) + 1, "at": self._iso()})
        return MemOp(cmd.index, cmd.legacy_op, "ok")

    def trace_summarize(self, cmd: MemoryCommand) -> MemOp:
        return MemOp(cmd.index, cmd.legacy_op, "ok")

    def consolidate(self, cmd: MemoryCommand) -> MemOp:
        args: list[Any] = list(cmd.args) if isinstance(cmd.args, (list, tuple)) else [cmd.args]
        session = _mapping(args[0] if args else None)
        session_id = session.get("sessionId")
        items = [_evidence(ev) for ev in self.traces if ev.get("sessionId") == session_id]
        out = self.kernel.consolidate_session({
            "sessionId": session_id, "scope": "session",
            "items": [i for i in items if i is not None]})
        created = []
        for receipt in out["receipts"]:
            memory_id = receipt["memoryId"]
            record = self.port.read(memory_id) or {}
            seq = _seq(record)
            pid = f"{record_id(self.scenario, cmd.index)}.t{seq:04d}"
            created.append(self._created(memory_id, pid))
        return MemOp(cmd.index, cmd.legacy_op, "ok", created=tuple(created), detail={
            "source_scope": "session", "scope": "session", "strategy": out["strategy"],
            "duplicates": [self.pid.get(m, m) for m in out["duplicates"]],
            "rejected": [r["reason"] for r in out["rejected"]]})

    # ----------------------------------------------------------------- helpers
    def _iso(self) -> str:
        return epoch_ms_to_iso(self.now_ms)

    def _op_ref(self, cmd: MemoryCommand) -> dict[str, Any]:
        return {"store": "legacy-capture", "id": f"op{cmd.index:04d}",
                "digest": content_digest(json.dumps(cmd.args, sort_keys=True,
                                                     ensure_ascii=False, default=str))}


_HANDLERS: Final[Mapping[str, Callable[[_Driver, MemoryCommand], MemOp]]] = {
    "propose": _Driver.propose, "update": _Driver.update, "delete": _Driver.delete,
    "clear_scope": _Driver.clear_scope, "recall": _Driver.recall, "list": _Driver.list_scope,
    "get": _Driver.get, "stats": _Driver.stats, "trace_record": _Driver.trace_record,
    "consolidate": _Driver.consolidate, "trace_summarize": _Driver.trace_summarize,
    "open_store": _Driver.open_store, "hydrate_store": _Driver.open_store, "size": _Driver.size,
}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _selector(record: Mapping[str, Any]) -> dict[str, Any]:
    return {"scope": record["scope"], "scope_id": record.get("scopeId")}


def _seq(record: Mapping[str, Any]) -> int:
    """Trace sequence of a consolidated candidate's first evidence item (``trace-0007``)."""
    for ref in record.get("evidenceRefs") or ():
        tail = str(ref.get("id", "")).rpartition("-")[2]
        if tail.isdigit():
            return int(tail)
    return 0


def _evidence(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """A traced event as a session evidence item (None: nothing to read)."""
    payload = _mapping(event.get("payload"))
    kind = event.get("type")
    if kind == "message":
        role = str(payload.get("role"))
        text = payload.get("content")
        source = {"user": "user_input", "assistant": "model_output",
                  "system": "host_policy"}.get(role, "unknown")
        trust = source_trust(role, source).value
        item_kind = "message"
    else:
        text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
        tool = str(payload.get("tool") or "")
        trust = source_trust("tool", tool_source_kind(tool).value if tool else "tool").value
        item_kind = "tool-evidence"
    if not isinstance(text, str) or not text:
        return None
    secret = has_secret(text)
    return {"itemId": f"trace-{int(event['seq']):04d}", "kind": item_kind, "trust": trust,
            "content": text, "digest": content_digest(text), "createdAt": event["at"],
            "sensitivity": "secret" if secret else "internal",
            "allowedSinks": ["local"] if secret else ["*"]}
