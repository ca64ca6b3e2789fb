"use strict";
// Capture driver: session-core MemoryStore / TraceStore / MemoryConsolidator
// (packages/session-core/lib/memory-store.js, trace-store.js, memory-consolidator.js, and
// file-adapters.js for the persisted stores).  This project's own code; it runs the
// legacy modules of the user's checkout on input.json's `memory_ops`.
//
// Every operation is recorded as {index, op, store?, args?, as?, result, error}: `args`
// are what the legacy method was called with (refs `as`/`ref` resolved to the ids earlier
// add ops returned), `result` its return value (JSON-copied when it returns), `error` its
// throw (det.errorRecord) — a throw is recorded behaviour, never a harness failure.
//
// Operation kinds (docs/fixtures.md, "memory_ops"):
//   add, get, recall, update, remove, clearScope, list, stats, size      MemoryStore
//   trace.record, trace.summarize                                          TraceStore
//   consolidate                                                           MemoryConsolidator
//   open      {store, args: {file}}: a new MemoryStore on
//             createMemoryFileAdapter(<CHAINLESSCHAIN_HOME>/<file>), hydrated with
//             hydrateMemoryStore — what the CLI's getMemoryStore() does; result = the
//             number of records hydrated; `store_ids` = the ids the store then holds
//             (store.list(), which touches no record)
//   hydrate   {store, args: {file}}: hydrateMemoryStore(<store>, a fresh adapter on
//             <file>) — merge a persisted snapshot into a live store; result = count,
//             `store_ids` as for open
// `store` (any op) names the store instance the op runs on; without it, the first
// (adapter-less) store.  Adapter writes are asynchronous in the legacy code: they are
// let settle after every operation, and an adapter failure is an `adapter-error` event.
const fs = require("node:fs");
const path = require("node:path");
const { main, legacyPath, header, det } = require("./common.cjs");

const SC = "packages/session-core/lib";
const ENTRY = `${SC}/memory-store.js#MemoryStore (+ trace-store.js#TraceStore, memory-consolidator.js#MemoryConsolidator.consolidate)`;
const MAIN = null; // the default store's name (ops without `store`)
const STORE_OPS = new Set(["add", "get", "recall", "update", "remove", "clearScope", "list",
  "stats", "size"]);
const TRACE_OPS = new Set(["record", "summarize"]);
const BY_ID = new Set(["get", "update", "remove"]);

class InputProblem extends Error {
  constructor(message) { super(message); this.name = "InputProblem"; this.code = "EMEMORYOPS"; }
}

function copy(value) {
  return value === undefined ? null : JSON.parse(JSON.stringify(value));
}

function settle() { return new Promise((resolve) => { setImmediate(resolve); }); }

function homeFile(req, file) {
  if (typeof file !== "string" || !file || path.isAbsolute(file)
      || file.split(/[\\/]/).includes("..")) {
    throw new InputProblem(`memory_ops: args.file must be a relative path inside the home (got ${JSON.stringify(file)})`);
  }
  const home = process.env.CHAINLESSCHAIN_HOME || path.join(req.sandbox, ".chainlesschain");
  return path.join(home, ...file.split(/[\\/]/));
}

main(async (req) => {
  const { MemoryStore } = require(legacyPath(req, `${SC}/memory-store.js`));
  const { TraceStore } = require(legacyPath(req, `${SC}/trace-store.js`));
  const { MemoryConsolidator } = require(legacyPath(req, `${SC}/memory-consolidator.js`));
  let adapters = null; // file-adapters.js, loaded only when a scenario persists
  const needsFiles = (req.input.memory_ops || []).some((o) => o && (o.op === "open" || o.op === "hydrate"));
  if (needsFiles) adapters = require(legacyPath(req, `${SC}/file-adapters.js`));
  det.reset({ baseMs: req.base_ms, stepMs: 0, label: req.label });
  const startMs = req.base_ms + 1000;
  const now = det.injectedNow(startMs, 1000);

  const events = [];
  let current = -1;
  const tag = (store, rec) => (store === MAIN ? rec : { ...rec, store });
  const stores = new Map();
  const consolidators = new Map();
  const trace = new TraceStore({ now });

  function watchStore(name, store) {
    for (const event of ["added", "updated", "removed"]) {
      store.on(event, (m) => events.push(tag(name, { op: current, emitter: "MemoryStore", event,
        id: m.id, scope: m.scope, scopeId: m.scopeId })));
    }
    store.on("adapter-error", (e) => events.push(tag(name, { op: current, emitter: "MemoryStore",
      event: "adapter-error", payload: { op: e.op, error: det.errorRecord(e.error) } })));
    stores.set(name, store);
    return store;
  }

  function consolidatorOf(name) {
    if (!consolidators.has(name)) {
      const c = new MemoryConsolidator({ memoryStore: storeOf(name), traceStore: trace, now });
      c.on("consolidated", (r) => events.push(tag(name, { op: current,
        emitter: "MemoryConsolidator", event: "consolidated",
        payload: { sessionId: r.sessionId, writtenCount: r.writtenCount } })));
      c.on("memory-write-error", (e) => events.push(tag(name, { op: current,
        emitter: "MemoryConsolidator", event: "memory-write-error",
        payload: { error: det.errorRecord(e.error), fact: copy(e.fact) } })));
      c.on("summarizer-error", (e) => events.push(tag(name, { op: current,
        emitter: "MemoryConsolidator", event: "summarizer-error",
        payload: { sessionId: e.sessionId, error: det.errorRecord(e.error) } })));
      consolidators.set(name, c);
    }
    return consolidators.get(name);
  }

  function storeOf(name) {
    if (!stores.has(name)) {
      throw new InputProblem(`memory_ops: store ${JSON.stringify(name)} is not open`);
    }
    return stores.get(name);
  }

  watchStore(MAIN, new MemoryStore({ now }));
  consolidatorOf(MAIN);

  const refs = {};
  const ops = [];
  const list = req.input.memory_ops || [];
  for (let i = 0; i < list.length; i += 1) {
    const op = list[i] || {};
    current = i;
    const kind = String(op.op);
    const name = op.store === undefined ? MAIN : op.store;
    const rec = { index: i, op: kind };
    if (name !== MAIN) rec.store = name;
    let call;
    let args;
    if (BY_ID.has(kind) && (op.ref !== undefined || op.id !== undefined)) {
      const id = op.ref !== undefined ? refs[op.ref] : op.id;
      args = { id };
      if (kind === "update") args.patch = op.patch || {};
      if (op.ref !== undefined) args.ref = op.ref;
      call = (s) => (kind === "update" ? s.update(id, args.patch) : s[kind](id));
    } else {
      args = op.args;
      const spread = Array.isArray(args) ? args : (args === undefined ? [] : [args]);
      if (STORE_OPS.has(kind)) {
        call = (s) => s[kind](...spread);
      } else if (kind.startsWith("trace.") && TRACE_OPS.has(kind.slice(6))) {
        call = () => trace[kind.slice(6)](...spread);
      } else if (kind === "consolidate") {
        storeOf(name);
        const consolidator = consolidatorOf(name);
        call = () => consolidator.consolidate(...spread);
      } else if (kind === "open") {
        const file = homeFile(req, (args || {}).file);
        if (stores.has(name)) throw new InputProblem(`memory_ops[${i}]: store ${JSON.stringify(name)} is already open`);
        call = () => {
          const adapter = adapters.createMemoryFileAdapter(file);
          const store = watchStore(name, new MemoryStore({ adapter, now }));
          return adapters.hydrateMemoryStore(store, adapter);
        };
      } else if (kind === "hydrate") {
        const file = homeFile(req, (args || {}).file);
        call = (s) => adapters.hydrateMemoryStore(s, adapters.createMemoryFileAdapter(file));
      } else {
        throw new InputProblem(`memory_ops[${i}]: unknown op ${JSON.stringify(kind)}`);
      }
    }
    if (args !== undefined) rec.args = args;
    if (op.as !== undefined) rec.as = op.as;
    const target = kind === "open" || kind.startsWith("trace.") ? null : storeOf(name);
    let result = null;
    let error = null;
    try {
      result = copy(await call(target));
    } catch (err) {
      error = det.errorRecord(err);
    }
    await settle(); // the legacy adapters write in a later microtask
    if (kind === "add" && error === null && op.as !== undefined && result) refs[op.as] = result.id;
    rec.result = result;
    if ((kind === "open" || kind === "hydrate") && stores.has(name)) {
      rec.store_ids = stores.get(name).list().map((m) => m.id);
    }
    rec.error = error;
    ops.push(rec);
  }
  current = list.length;
  await settle();

  const options = {
    MemoryStore: { now: "[Function injectedNow]" },
    TraceStore: { now: "[Function injectedNow]" },
    MemoryConsolidator: { memoryStore: "<MemoryStore>", traceStore: "<TraceStore>",
      now: "[Function injectedNow]" },
  };
  const opened = list.map((o, i) => ({ o, i })).filter(({ o }) => o && o.op === "open");
  if (opened.length) {
    options.stores = opened.map(({ o, i }) => ({ store: o.store, op: i,
      file: `<CHAINLESSCHAIN_HOME>/${(o.args || {}).file}`,
      construct: "new MemoryStore({adapter: createMemoryFileAdapter(file), now}); hydrateMemoryStore(store, adapter)" }));
  }
  // the persisted files as the run leaves them: [{file, snapshot}] (null: never written)
  const files = [];
  for (const o of list) {
    if (!o || (o.op !== "open" && o.op !== "hydrate")) continue;
    const file = (o.args || {}).file;
    if (files.some((f) => f.file === file)) continue;
    const p = homeFile(req, file);
    files.push({ file, snapshot: fs.existsSync(p) ? JSON.parse(fs.readFileSync(p, "utf8")) : null });
  }
  const determinism = det.determinismRecord(0);
  determinism.injected_now = { shared_by: ["MemoryStore", "TraceStore", "MemoryConsolidator"],
    start_ms: startMs, step_ms_per_call: 1000 };
  determinism.ids = "mem_<16 hex> from seeded crypto.randomBytes(8)";
  const output = { ops, events, refs };
  if (needsFiles) output.files = files;
  const capture = {
    ...header(req, "session-core", ENTRY),
    options,
    input_binding: { ops: "input.memory_ops (refs `as`/`ref` resolve to ids returned by earlier add ops)" },
    env_flags: {},
    determinism,
    output,
    error: null,
  };
  return { capture, exchanges: [] };
});
