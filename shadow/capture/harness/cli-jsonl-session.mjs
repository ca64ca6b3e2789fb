// Capture driver: CLI JSONL session store (packages/cli/src/harness/jsonl-session-store.js).
// This project's own code; it runs the legacy module of the user's checkout.
//
// One sandboxed $CHAINLESSCHAIN_HOME per run (the runner's env).  The input is persisted
// as the headless runner persists a turn (startSession, user_message, tool_call_started per
// call, one compact tool_call per result, one assistant_message per turn), then the
// compaction's result (the sibling capture, per call) is appended with the replay CAS
// appendCompactEventIfMessagesMatch, and the history is rebuilt and verified.
//
// Optional input fields (new scenarios only; docs/fixtures.md):
//   session_store.crash {after_event: N, truncate_bytes: K}: the write of event N+1 of the
//     session file (session_start is 1) is torn through the store's own fault hook: the
//     file loses its last K bytes (at most that line) before the sidecar and anchor are
//     published; the session is reopened (step.restart) and the phase goes on.
//   session_store.cas_race true | {phase?: P, event?: {type, data}}: between sampling the
//     expected messages and appendCompactEventIfMessagesMatch of phase P (default 0) a
//     second writer appends one event (default a user_message), so the CAS is stale.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { main, importLegacy, envFlags, header, det } = require("./common.cjs");

const STORE = "packages/cli/src/harness/jsonl-session-store.js";
const ENTRY = `${STORE}#appendCompactEventIfMessagesMatch+rebuildMessages`;
const COMPACT_EVENT = "{ ...<source>.stats, trigger: 'manual', messages: projectCanonicalResumeMessages(<source>.messages, {strict:true}) }";
const EXPECTED = "readVerifiedMessages(sessionId) sampled after persisting the phase";
const BINDING = "input.messages (then input.followup_messages[k]) persisted with the headless-runner turn projection: host system prompts skipped; user_message; tool_call_started per tool call; tool_call {id,tool,is_error} per tool result; one assistant_message = last non-empty plain assistant text per turn; a system message carrying _cc_replay is seeded as a prior compact event (trigger 'resume-fixture')";
const RACE_EVENT = { type: "user_message", data: { role: "user", content: "[concurrent writer] appended between the fingerprint read and the compact CAS" } };

function plain(value) { return value === undefined ? null : JSON.parse(JSON.stringify(value)); }

/** The headless runner's is_error: the result JSON has error, success: false or exitCode != 0. */
function resultIsError(content) {
  if (typeof content !== "string") return false;
  let parsed;
  try { parsed = JSON.parse(content); } catch (_e) { return false; }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) return false;
  if (parsed.error) return true;
  if (parsed.success === false) return true;
  return parsed.exitCode !== undefined && parsed.exitCode !== null && parsed.exitCode !== 0;
}

function isPlainAssistantText(m) {
  const calls = Array.isArray(m.tool_calls) ? m.tool_calls : [];
  return calls.length === 0 && typeof m.content === "string" && m.content !== "";
}

/** Events of one phase's messages as the headless runner persists a turn. */
function projectTurns(messages, prov) {
  const out = [];   // {label, type?, data?, compact?}
  let finalText = "";
  let active = [];  // tool calls of the current turn, in start order
  let inTurn = false;
  const flush = () => {
    if (inTurn && finalText) out.push({ label: "assistant_message", append: "assistant", data: finalText });
    finalText = "";
    active = [];
    inTurn = false;
  };
  for (const m of messages) {
    if (!m || typeof m !== "object") continue;
    if (m.role === "system") {
      if (m._cc_replay !== undefined) {
        out.push({ label: "compact(resume-fixture)", append: "compact",
          data: { strategy: "summarize", trigger: "resume-fixture",
            messages: [prov.decodeVerifiedPersistedMessage(m)] } });
      } else {
        out.push({ label: "skipped:system" });
      }
      continue;
    }
    if (m.role === "user") {
      flush();
      inTurn = true;
      out.push({ label: "user_message", append: "user", data: m.content });
      continue;
    }
    if (m.role === "assistant") {
      inTurn = true;
      for (const call of Array.isArray(m.tool_calls) ? m.tool_calls : []) {
        const tool = (call && call.function && call.function.name) || "?";
        active.push({ id: call && call.id, tool, settled: false });
        out.push({ label: "tool_call_started", append: "event", type: "tool_call_started",
          data: { id: call && call.id, tool } });
      }
      if (isPlainAssistantText(m)) finalText = m.content;
      continue;
    }
    if (m.role === "tool") {
      const settled = active.find((c) => !c.settled && c.id === m.tool_call_id)
        || [...active].reverse().find((c) => !c.settled && (!m.name || c.tool === m.name));
      if (!settled) { out.push({ label: "skipped:tool" }); continue; }
      settled.settled = true;
      out.push({ label: "tool_call", append: "tool",
        data: { id: settled.id, tool: settled.tool, isError: resultIsError(m.content) } });
      continue;
    }
    out.push({ label: `skipped:${String(m.role)}` });
  }
  flush();
  return out;
}

function appendOne(store, sessionId, ev) {
  if (ev.append === "user") return store.appendUserMessage(sessionId, ev.data);
  if (ev.append === "assistant") return store.appendAssistantMessage(sessionId, ev.data);
  if (ev.append === "tool") return store.appendToolCallCompact(sessionId, ev.data);
  if (ev.append === "compact") return store.appendCompactEvent(sessionId, ev.data);
  return store.appendEvent(sessionId, ev.type, ev.data);
}

/** The compaction capture whose result this store persists, and its per-call outputs. */
function compactionSource(req) {
  const name = req.input.provider_script !== undefined ? "cli.provider-compaction.json" : "cli.compress.json";
  const src = (req.sources || {})[name];
  if (!src) {
    const err = new Error(`the compaction source ${name} was not captured for this scenario`);
    err.code = "ESOURCE";
    throw err;
  }
  const calls = Array.isArray(src.calls) && src.calls.length
    ? src.calls.map((c) => ({ output: c.output, provenance: c.output_provenance, error: c.error }))
    : [{ output: src.output, provenance: src.output_provenance, error: src.error }];
  return { name, calls };
}

function sessionStoreOptions(input) {
  const s = input.session_store && typeof input.session_store === "object" ? input.session_store : {};
  const c = s.crash && typeof s.crash === "object" ? s.crash : null;
  const crash = c ? {
    afterEvent: Number.isInteger(c.after_event) && c.after_event > 0 ? c.after_event : 1,
    truncateBytes: Number.isInteger(c.truncate_bytes) && c.truncate_bytes > 0 ? c.truncate_bytes : 1,
  } : null;
  const r = s.cas_race;
  const race = r === true || (r && typeof r === "object") ? {
    phase: r && Number.isInteger(r.phase) ? r.phase : 0,
    event: r && r.event && typeof r.event === "object" && typeof r.event.type === "string"
      ? { type: r.event.type, data: r.event.data === undefined ? {} : r.event.data } : RACE_EVENT,
  } : null;
  return { crash, race };
}

/**
 * A crash mid-write through the store's own fault-injection hook: the write of event
 * after_event + 1 loses its last truncate_bytes bytes before fsync and the process "dies"
 * (the hook throws) before the sidecar and anti-rollback anchor are published.
 */
function armCrash(store, fileName, crash) {
  const state = { appended: 0, torn: null };
  if (!crash) return state;
  process.env.CC_SESSION_SCALE_FAULT_INJECTION = "1";
  store._sessionScaleFaultHooks.beforeTranscriptFsync = (payload) => {
    if (state.torn || path.basename(String(payload.filePath)) !== fileName) return;
    state.appended += 1;
    if (state.appended !== crash.afterEvent + 1) return;
    const size = fs.statSync(payload.filePath).size;
    const line = Buffer.byteLength(`${JSON.stringify(payload.event)}\n`, "utf8");
    const lost = Math.min(crash.truncateBytes, line);
    fs.truncateSync(payload.filePath, size - lost);
    state.torn = { after_event: crash.afterEvent, torn_event: payload.event.type,
      line_bytes: line, bytes_lost: lost };
    const err = new Error("capture harness: process crash injected mid-write");
    err.code = "ECAPTURECRASH";
    throw err;
  };
  return state;
}

main(async (req) => {
  // The store refuses a $CHAINLESSCHAIN_HOME nested in the working directory (the runner
  // starts us in the sandbox home): work from a sibling folder of the sandbox instead.
  const cwd = path.join(path.dirname(req.sandbox), "cwd");
  fs.mkdirSync(cwd, { recursive: true });
  process.chdir(cwd);
  const store = await importLegacy(req, STORE);
  const prov = await importLegacy(req, "packages/cli/src/lib/session-message-provenance.js");
  const input = req.input;
  const source = compactionSource(req);
  const { crash, race } = sessionStoreOptions(input);
  const sessionId = `cc-capture-${req.scenario}`;
  const meta = { title: req.scenario, provider: input.model.provider, model: input.model.model };
  let filePath = null;
  const crashState = armCrash(store, `${sessionId}.jsonl`, crash);
  det.reset({ baseMs: req.base_ms, stepMs: req.step_ms, label: req.label });

  const provenance = (ms) => ms.map((m) => {
    const tag = prov.getDurableSystemMessageProvenance(m);
    return tag ? tag.kind : null;
  });
  const guarded = (fn) => {
    try { return { value: fn(), error: null }; } catch (err) { return { value: null, error: det.errorRecord(err) }; }
  };
  const read = (fn) => {
    const r = guarded(fn);
    return r.error ? { messages: null, provenance: null, error: r.error } : {
      messages: plain(r.value), provenance: provenance(r.value), error: null };
  };
  const reopen = () => {
    const rebuilt = read(() => store.rebuildMessages(sessionId));
    const verified = read(() => store.readVerifiedMessages(sessionId));
    const verify = guarded(() => store.verifySession(sessionId));
    return { rebuilt, verified, verify };
  };
  let restartPending = null;
  /** A write; when the injected crash tore it, the session is reopened as after a restart. */
  const write = (fn) => {
    const wasTorn = crashState.torn;
    let value = null;
    let thrown = null;
    let threw = false;
    try { value = fn(); } catch (err) { thrown = err; threw = true; }
    if (wasTorn || !crashState.torn) {
      if (threw) throw thrown;
      return { value, crashed: null };
    }
    const r = reopen();
    restartPending = { ...crashState.torn, write_error: threw ? det.errorRecord(thrown) : null,
      rebuildMessages: r.rebuilt.messages, rebuildMessages_error: r.rebuilt.error,
      readVerifiedMessages: r.verified.messages,
      readVerifiedMessages_provenance: r.verified.provenance,
      readVerifiedMessages_error: r.verified.error,
      verifySession: r.verify.error ? null : plain(r.verify.value),
      verifySession_error: r.verify.error };
    return { value, crashed: restartPending };
  };

  let error = null;
  const steps = [];
  const phases = [input.messages || [], ...(input.followup_messages || [])];
  try {
    store.startSession(sessionId, meta);
    filePath = store.sessionPath(sessionId);
    for (let k = 0; k < phases.length; k += 1) {
      const persisted = [];
      const step = { phase: k, persisted_events: persisted };
      steps.push(step);  // a throw of the store leaves the phase's partial record
      for (const ev of projectTurns(phases[k], prov)) {
        if (!ev.append) { persisted.push(ev.label); continue; }
        const w = write(() => appendOne(store, sessionId, ev));
        persisted.push(w.crashed ? `${ev.label}(torn by crash)` : ev.label);
      }
      if (restartPending) { step.restart = restartPending; restartPending = null; }
      const before = read(() => store.rebuildMessages(sessionId));
      const expected = guarded(() => store.readVerifiedMessages(sessionId));
      step.rebuildMessages_before = before.messages;
      step.readVerifiedMessages_before = expected.error ? null : plain(expected.value);
      step.readVerifiedMessages_before_provenance = expected.error ? null : provenance(expected.value);
      if (before.error || expected.error) step.read_error = before.error || expected.error;
      const call = source.calls[Math.min(k, source.calls.length - 1)];
      let settlement = null;
      let settlementError = null;
      if (call && call.output && Array.isArray(call.output.messages) && !expected.error) {
        const compacted = call.output.messages.map((m, i) => {
          const kind = Array.isArray(call.provenance) ? call.provenance[i] : null;
          return kind ? prov.markDurableSystemMessage({ ...m }, kind) : m;
        });
        const stats = { ...call.output.stats, trigger: "manual",
          messages: prov.projectCanonicalResumeMessages(compacted, { strict: true }) };
        if (race && race.phase === k) {
          write(() => store.appendEvent(sessionId, race.event.type, race.event.data));
          step.concurrent_writer = { type: race.event.type, data: plain(race.event.data) };
        }
        try {
          const w = write(() => store.appendCompactEventIfMessagesMatch(sessionId, stats, expected.value));
          settlement = plain(w.value);
          if (w.crashed && w.crashed.write_error) settlementError = w.crashed.write_error;
        } catch (err) {
          settlementError = det.errorRecord(err);
        }
      } else if (call && call.error) {
        step.compaction_source_error = call.error;
      }
      step.settlement = settlement;
      step.settlement_error = settlementError;
      if (restartPending) { step.restart = restartPending; restartPending = null; }
      const after = read(() => store.rebuildMessages(sessionId));
      const afterVerified = read(() => store.readVerifiedMessages(sessionId));
      step.rebuildMessages_after = after.messages;
      step.readVerifiedMessages_after = afterVerified.messages;
      step.readVerifiedMessages_after_provenance = afterVerified.provenance;
    }
  } catch (err) {
    error = det.errorRecord(err);
  }
  const output = { session_file: null, raw_jsonl_lines: [], steps };
  if (!filePath) filePath = guarded(() => store.sessionPath(sessionId)).value;
  if (filePath && fs.existsSync(filePath)) {
    const home = process.env.CHAINLESSCHAIN_HOME;
    output.session_file = home
      ? `$CHAINLESSCHAIN_HOME/${path.relative(home, filePath).split(path.sep).join("/")}`
      : path.basename(filePath);
    const text = fs.readFileSync(filePath, "utf8");
    output.raw_jsonl_lines = text.split("\n").filter((l, i, all) => i < all.length - 1 || l !== "");
  }
  const final = reopen();
  output.rebuildMessages = final.rebuilt.messages;
  output.readVerifiedMessages = final.verified.messages;
  output.readVerifiedMessages_provenance = final.verified.provenance;
  output.verifySession = final.verify.error ? null : plain(final.verify.value);

  const capture = {
    ...header(req, "cli", ENTRY),
    options: { sessionId, startSession: meta, compact_event: COMPACT_EVENT, expectedMessages: EXPECTED },
    input_binding: { messages: BINDING, compaction_source: `${source.name} output (per call)` },
    env_flags: envFlags(input),
    determinism: det.determinismRecord(req.step_ms),
    output,
    error,
  };
  return { capture, exchanges: [] };
});
