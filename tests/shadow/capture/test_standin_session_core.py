"""The session-core memory capture driver (``session-core-memory.cjs``) over stand-in legacy
modules: the options, binding and determinism record (the injected now() from
``base_ms + 1000``, seeded ids), refs, every op's args / result / error, the stores'
events, a throw recorded as behaviour, consolidation over a trace, persisted stores
(``open`` / ``hydrate`` over the file adapter, ``store_ids``, ``files``), harness errors
for bad ops, byte-identical reruns and another clock origin on a repeat."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.shadow.capture.standin import (
    needs_node,
    read_capture,
    repeat_args,
    run_capture,
    second_run,
    tree_bytes,
    write_input,
    write_tree,
)

pytestmark = needs_node

BASE_MS = 1787227200000
FILE = "session-core.memory.json"
LIB = "packages/session-core/lib"

# A stand-in MemoryStore with the legacy shape: ids mem_<16 hex> from crypto.randomBytes,
# the injected now(), events, an adapter written in a later microtask; "bad" scopes throw.
STORE = """
const EventEmitter = require("events");
const crypto = require("crypto");
const SCOPES = ["session", "agent", "user", "global"];
function check(scope) {
  if (SCOPES.includes(scope)) return;
  const e = new RangeError(`bad scope ${scope}`); e.code = "E_SCOPE"; throw e;
}
class MemoryStore extends EventEmitter {
  constructor({ adapter = null, now = Date.now } = {}) {
    super(); this._memories = new Map(); this._adapter = adapter; this._now = now;
  }
  _save(m) { if (this._adapter) Promise.resolve().then(() => this._adapter.save(m)); }
  add({ scope, scopeId = null, content, tags = [] }) {
    check(scope);
    const ts = this._now();
    const m = { id: `mem_${crypto.randomBytes(8).toString("hex")}`, scope, scopeId, content,
      tags: [...tags], createdAt: ts };
    this._memories.set(m.id, m); this._save(m); this.emit("added", m); return { ...m };
  }
  get(id) { const m = this._memories.get(id); return m ? { ...m } : null; }
  recall({ query = "" } = {}) {
    const ts = this._now();
    return [...this._memories.values()].filter((m) => m.content.includes(query))
      .map((m) => ({ ...m, relevance: 1, at: ts }));
  }
  update(id, patch = {}) {
    const m = this._memories.get(id); if (!m) return null;
    if (patch.content !== undefined) m.content = patch.content;
    m.updatedAt = this._now(); this._save(m); this.emit("updated", m); return { ...m };
  }
  remove(id) {
    const m = this._memories.get(id); if (!m) return false;
    this._memories.delete(id);
    if (this._adapter) Promise.resolve().then(() => this._adapter.remove(id));
    this.emit("removed", m); return true;
  }
  clearScope(scope, scopeId) {
    check(scope); let n = 0;
    for (const [id, m] of this._memories) {
      if (m.scope === scope && m.scopeId === scopeId) { this._memories.delete(id); n++; }
    }
    return n;
  }
  list() { return [...this._memories.values()].map((m) => ({ ...m })); }
  size() { return this._memories.size; }
  stats() { return { total: this._memories.size }; }
}
module.exports = { MemoryStore };
"""

TRACE = """
const EventEmitter = require("events");
class TraceStore extends EventEmitter {
  constructor({ now = Date.now } = {}) { super(); this._now = now; this._events = []; }
  record(e) {
    if (!e.sessionId) throw new Error("sessionId required");
    const s = { sessionId: e.sessionId, type: e.type, ts: this._now(),
      seq: this._events.length + 1, payload: e.payload || {} };
    this._events.push(s); return s;
  }
  query(sessionId) { return this._events.filter((e) => e.sessionId === sessionId); }
  summarize(sessionId) { return { sessionId, eventCount: this.query(sessionId).length }; }
}
module.exports = { TraceStore };
"""

# Consolidation: every traced user message becomes a fact at agent scope.
CONSOLIDATOR = """
const EventEmitter = require("events");
class MemoryConsolidator extends EventEmitter {
  constructor({ memoryStore, traceStore, now }) {
    super(); this.m = memoryStore; this.t = traceStore; this.now = now;
  }
  async consolidate(session) {
    if (!session || !session.sessionId) throw new Error("session required");
    const written = this.t.query(session.sessionId).filter((e) => e.payload.role === "user")
      .map((e) => this.m.add({ scope: "agent", scopeId: session.agentId || session.sessionId,
        content: e.payload.content }));
    const r = { sessionId: session.sessionId, writtenCount: written.length, written,
      at: this.now() };
    this.emit("consolidated", r); return r;
  }
}
module.exports = { MemoryConsolidator };
"""

# The file adapter: the snapshot read at creation, written whole on each save/remove.
ADAPTERS = """
const fs = require("fs");
const path = require("path");
function read(p) {
  try { return JSON.parse(fs.readFileSync(p, "utf8")); } catch { return { memories: [] }; }
}
function write(p, d) {
  fs.mkdirSync(path.dirname(p), { recursive: true }); fs.writeFileSync(p, JSON.stringify(d));
}
function createMemoryFileAdapter(p) {
  return { _s: read(p), load() { this._s = read(p); return this._s.memories; },
    async save(m) {
      const l = this._s.memories.filter((x) => x.id !== m.id); l.push({ ...m });
      this._s.memories = l; write(p, this._s);
    },
    async remove(id) {
      this._s.memories = this._s.memories.filter((x) => x.id !== id); write(p, this._s);
    } };
}
function hydrateMemoryStore(store, adapter) {
  const rs = adapter.load();
  for (const r of rs) store._memories.set(r.id, { ...r });
  return rs.length;
}
module.exports = { createMemoryFileAdapter, hydrateMemoryStore };
"""


def _tree(root: Path) -> Path:
    return write_tree(root, {f"{LIB}/memory-store.js": STORE, f"{LIB}/trace-store.js": TRACE,
                             f"{LIB}/memory-consolidator.js": CONSOLIDATOR,
                             f"{LIB}/file-adapters.js": ADAPTERS})


def _capture(tmp_path: Path, ops: list[dict[str, Any]], name: str = "mem",
             *extra: str) -> tuple[int, str, Path]:
    root = _tree(tmp_path / "legacy")
    inputs = tmp_path / "in"
    write_input(inputs, name, {"provider_responses": [], "memory_ops": ops})
    out = tmp_path / "out"
    code, _so, se = run_capture(root, inputs, out, *extra)
    return code, se, out


def _ops(doc: dict[str, Any]) -> list[dict[str, Any]]:
    ops = doc["output"]["ops"]
    assert isinstance(ops, list)
    return ops


BASIC = [
    {"op": "add", "as": "a", "args": {"scope": "user", "scopeId": "u1", "content": "likes tea"}},
    {"op": "add", "args": {"scope": "team", "scopeId": "u1", "content": "bad scope"}},
    {"op": "update", "ref": "a", "patch": {"content": "likes green tea"}},
    {"op": "recall", "args": {"query": "tea"}},
    {"op": "remove", "ref": "a"},
    {"op": "remove", "ref": "a"},
    {"op": "get", "id": "mem_0000000000000000"},
    {"op": "clearScope", "args": ["user", "u1"]},
    {"op": "stats"},
]


def test_ops_refs_errors_determinism(tmp_path: Path) -> None:
    code, se, out = _capture(tmp_path, BASIC)
    assert code == 0, se
    doc = read_capture(out, "mem", FILE)
    assert doc["surface"] == "session-core" and doc["error"] is None
    assert doc["options"]["MemoryStore"] == {"now": "[Function injectedNow]"}
    assert doc["input_binding"]["ops"].startswith("input.memory_ops")
    det = doc["determinism"]
    assert det["clock"]["base_ms"] == BASE_MS
    assert det["random"]["seed_label"] == "session-core.memory:mem"
    assert det["injected_now"] == {"shared_by": ["MemoryStore", "TraceStore",
                                                 "MemoryConsolidator"],
                                   "start_ms": BASE_MS + 1000, "step_ms_per_call": 1000}
    ops = _ops(doc)
    assert [o["index"] for o in ops] == list(range(len(BASIC)))
    added = ops[0]["result"]
    assert re.fullmatch(r"mem_[0-9a-f]{16}", added["id"])
    assert added["createdAt"] == BASE_MS + 1000 and ops[0]["as"] == "a"
    assert list(ops[0]) == ["index", "op", "args", "as", "result", "error"]
    # a legacy throw is recorded behaviour, with its name, message and code
    assert ops[1]["result"] is None
    assert ops[1]["error"] == {"name": "RangeError", "message": "bad scope team",
                               "code": "E_SCOPE"}
    # refs resolve to the id the add returned, and are recorded as args
    assert ops[2]["args"] == {"id": added["id"], "patch": {"content": "likes green tea"},
                              "ref": "a"}
    assert ops[2]["result"]["updatedAt"] == BASE_MS + 2000
    assert ops[3]["result"][0]["at"] == BASE_MS + 3000
    assert [ops[4]["result"], ops[5]["result"]] == [True, False]
    assert ops[6]["args"] == {"id": "mem_0000000000000000"} and ops[6]["result"] is None
    assert ops[7]["args"] == ["user", "u1"] and ops[7]["result"] == 0
    assert "args" not in ops[8] and ops[8]["result"] == {"total": 0}
    assert doc["output"]["refs"] == {"a": added["id"]}
    events = [(e["op"], e["emitter"], e["event"]) for e in doc["output"]["events"]]
    assert events == [(0, "MemoryStore", "added"), (2, "MemoryStore", "updated"),
                      (4, "MemoryStore", "removed")]
    assert "files" not in doc["output"]


def test_trace_and_consolidate(tmp_path: Path) -> None:
    ops_in = [
        {"op": "trace.record", "args": {"sessionId": "s", "type": "message",
                                        "payload": {"role": "user", "content": "use tabs"}}},
        {"op": "trace.record", "args": {"type": "message"}},
        {"op": "consolidate", "args": [{"sessionId": "s", "agentId": "coder"}]},
        {"op": "consolidate", "args": [{"agentId": "coder"}]},
        {"op": "trace.summarize", "args": ["s"]},
    ]
    code, se, out = _capture(tmp_path, ops_in)
    assert code == 0, se
    ops = _ops(read_capture(out, "mem", FILE))
    assert ops[0]["result"]["ts"] == BASE_MS + 1000
    assert ops[1]["error"]["message"] == "sessionId required"
    written = ops[2]["result"]["written"]
    assert [w["scopeId"] for w in written] == ["coder"] and written[0]["content"] == "use tabs"
    assert ops[3]["error"]["message"] == "session required"
    assert ops[4]["result"] == {"sessionId": "s", "eventCount": 1}
    events = read_capture(out, "mem", FILE)["output"]["events"]
    assert events[-1] == {"op": 2, "emitter": "MemoryConsolidator", "event": "consolidated",
                          "payload": {"sessionId": "s", "writtenCount": 1}}


REPLICA = [
    {"op": "open", "store": "p", "args": {"file": "memory-store.json"}},
    {"op": "add", "store": "p", "as": "x", "args": {"scope": "user", "scopeId": "u",
                                                     "content": "x"}},
    {"op": "open", "store": "r", "args": {"file": "memory-store.json"}},
    {"op": "remove", "store": "p", "ref": "x"},
    {"op": "add", "store": "r", "args": {"scope": "user", "scopeId": "u", "content": "y"}},
    {"op": "open", "store": "q", "args": {"file": "memory-store.json"}},
    {"op": "hydrate", "store": "p", "args": {"file": "memory-store.json"}},
    {"op": "size", "store": "p"},
]


def test_persisted_stores_and_replica(tmp_path: Path) -> None:
    code, se, out = _capture(tmp_path, REPLICA)
    assert code == 0, se
    doc = read_capture(out, "mem", FILE)
    ops = _ops(doc)
    x = ops[1]["result"]["id"]
    y = ops[4]["result"]["id"]
    assert ops[0]["result"] == 0 and ops[0]["store_ids"] == []
    assert list(ops[0]) == ["index", "op", "store", "args", "result", "store_ids", "error"]
    assert ops[2]["result"] == 1 and ops[2]["store_ids"] == [x]
    assert ops[3]["result"] is True
    # the stale replica wrote its snapshot back: the removed record is on disk again
    assert ops[5]["result"] == 2 and sorted(ops[5]["store_ids"]) == sorted([x, y])
    assert sorted(ops[6]["store_ids"]) == sorted([x, y]) and ops[7]["result"] == 2
    assert [s["store"] for s in doc["options"]["stores"]] == ["p", "r", "q"]
    files = doc["output"]["files"]
    assert [f["file"] for f in files] == ["memory-store.json"]
    assert sorted(m["id"] for m in files[0]["snapshot"]["memories"]) == sorted([x, y])
    assert {e.get("store") for e in doc["output"]["events"]} == {"p", "r"}
    assert str(tmp_path) not in (out / "mem" / FILE).read_text(encoding="utf-8")


def test_reruns_identical_and_repeat_moves_the_clock(tmp_path: Path) -> None:
    code, se, out = _capture(tmp_path / "a", BASIC + REPLICA, "mem", *repeat_args(tmp_path / "a"))
    assert code == 0, se
    code2, se2, out2 = _capture(tmp_path / "b", BASIC + REPLICA, "mem",
                                *repeat_args(tmp_path / "b"))
    assert code2 == 0, se2
    assert tree_bytes(out) == tree_bytes(out2)
    first = read_capture(out, "mem", FILE)
    second = read_capture(second_run(tmp_path / "a"), "mem", FILE)
    assert second["determinism"]["clock"]["base_ms"] != BASE_MS
    start = second["determinism"]["injected_now"]["start_ms"]
    assert start == second["determinism"]["clock"]["base_ms"] + 1000
    assert _ops(second)[0]["result"]["createdAt"] == start
    assert _ops(first)[0]["result"]["id"] != _ops(second)[0]["result"]["id"]


def test_bad_ops_are_harness_errors_not_captures(tmp_path: Path) -> None:
    for k, op in enumerate([{"op": "explode"}, {"op": "add", "store": "nowhere",
                                                "args": {"scope": "user"}},
                            {"op": "open", "store": "s", "args": {"file": "../x.json"}}]):
        code, _se, out = _capture(tmp_path / str(k), [op])
        assert code != 0, op
        assert not (out / "mem" / FILE).exists()
