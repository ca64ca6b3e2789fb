"use strict";
// Capture driver: Desktop PromptCompressor.compress
// (desktop-app-vue/src/main/llm/prompt-compressor.js).  This project's own code; it runs the
// legacy module of the user's checkout where it lies.
//
// The compressor is built with the production defaults (bootstrap/core-initializer.js,
// promptCompressor factory), or — when the input has a provider_script — SessionManager-style
// (enableSummarization: !!llmManager) with a scripted llmManager whose query() replays
// input.provider_script[call-1] and records every exchange for input.json's provider_responses.
// The Electron logger (src/main/utils/logger.js) does not load outside Electron; a silent stand-in
// is put in require.cache for its resolved path before the compressor is required.
const Module = require("node:module");
const { main, legacyPath, header, det, describe, callRecords } = require("./common.cjs");

const MODULE = "desktop-app-vue/src/main/llm/prompt-compressor.js";
const LOGGER = "desktop-app-vue/src/main/utils/logger.js";
const ENTRY = `${MODULE}#PromptCompressor.compress`;
const QUERY_ENTRY = `${ENTRY} -> llmManager.query`;
const DEFAULTS_BINDING = "production defaults from desktop-app-vue/src/main/bootstrap/core-initializer.js (promptCompressor factory)";
const SCRIPTED_BINDING = "SessionManager-style (enableSummarization: !!llmManager); llmManager.query replays input.provider_script[call-1] as {text,model,tokens,usage,timestamp} or throws the scripted error";
const NOTE = "Date.now is frozen during desktop runs, so processingTime is 0";

function silentLogger() {
  const noop = () => {};
  const logger = { debug: noop, info: noop, warn: noop, error: noop, fatal: noop, log: noop,
    perfStart: noop, perfEnd: noop, setConfig: noop, cleanup: noop };
  logger.child = () => logger;
  return logger;
}

function stubLogger(req) {
  const file = require.resolve(legacyPath(req, LOGGER));
  const mod = new Module(file, module);
  mod.filename = file;
  mod.loaded = true;
  const logger = silentLogger();
  mod.exports = { logger, Logger: function Logger() { return silentLogger(); },
    createLogger: () => silentLogger() };
  require.cache[file] = mod;
}

function clone(value) { return value === undefined ? null : JSON.parse(JSON.stringify(value)); }

function scriptedError(spec) {
  const e = spec && typeof spec === "object" ? spec : {};
  const message = e.message === undefined ? "scripted provider error" : String(e.message);
  if (e.domException) return new DOMException(message, e.name || "Error");
  const err = new Error(message);
  if (e.name) err.name = e.name;
  for (const [k, v] of Object.entries(e)) {
    if (k !== "name" && k !== "message" && k !== "domException") err[k] = v;
  }
  return err;
}

/** The Desktop llmManager.query reply: {text, model, tokens, usage?, timestamp}. */
function desktopReply(ok, input) {
  const u = ok.usage && typeof ok.usage === "object" ? ok.usage : null;
  const reply = { text: ok.content, model: ok.model !== undefined ? ok.model : (input.model || {}).model };
  if (u) {
    const prompt = u.input_tokens || 0;
    const completion = u.output_tokens || 0;
    reply.tokens = prompt + completion;
    reply.usage = { prompt_tokens: prompt, completion_tokens: completion,
      total_tokens: prompt + completion };
  } else {
    reply.tokens = 0;
  }
  reply.timestamp = Date.now();
  return reply;
}

function scriptedManager(input, exchanges) {
  const script = Array.isArray(input.provider_script) ? input.provider_script : [];
  let calls = 0;
  return {
    query: async function recordedQuery(prompt, options) {
      calls += 1;
      const step = script[calls - 1];
      const record = { surface: "desktop", entry: QUERY_ENTRY, call: calls,
        request: { prompt: clone(prompt), options: clone(options) }, response: null, error: null };
      exchanges.push(record);
      let err;
      if (step && step.ok) {
        const reply = desktopReply(step.ok, input);
        record.response = clone(reply);
        return reply;
      }
      if (step && step.error) err = scriptedError(step.error);
      else {
        err = new Error(`provider_script has no entry for call ${calls} (the capture input scripts fewer provider calls than the legacy code made)`);
        err.code = "CAPTURE_SCRIPT_EXHAUSTED";
      }
      record.error = det.errorRecord(err);
      throw err;
    },
  };
}

main(async (req) => {
  stubLogger(req);
  const pc = require(legacyPath(req, MODULE));
  const input = req.input;
  det.reset({ baseMs: req.base_ms, stepMs: 0, label: req.label });
  const exchanges = [];
  const scripted = input.provider_script !== undefined;
  const llmManager = scripted ? scriptedManager(input, exchanges) : null;
  const ctor = { enableDeduplication: true, enableSummarization: !!llmManager,
    enableTruncation: true, maxHistoryMessages: 10, maxTotalTokens: 4000,
    similarityThreshold: 0.9, llmManager };
  const compressOptions = {};
  const followups = Array.isArray(input.followup_messages) ? input.followup_messages : [];
  const calls = [];
  let messages = input.messages;
  for (let k = 0; k <= followups.length; k += 1) {
    if (k > 0) messages = [...calls[k - 1].result.messages, ...followups[k - 1]];
    const compressor = new pc.PromptCompressor(ctor);
    let result = null;
    let error = null;
    try { result = await compressor.compress(messages, { ...compressOptions }); } catch (err) {
      error = det.errorRecord(err);
    }
    calls.push({ k, result, error, output: result === null ? null : clone(result) });
    if (error) break;
  }
  const last = calls[calls.length - 1];
  const determinism = det.determinismRecord(0);
  determinism.note = NOTE;
  const capture = {
    ...header(req, "desktop", ENTRY),
    options: { constructor: describe(ctor), compress: describe(compressOptions) },
    input_binding: { messages: "input.messages (verbatim)",
      constructor: scripted ? SCRIPTED_BINDING : DEFAULTS_BINDING },
    env_flags: {},
    determinism,
    output: last.output,
  };
  if (followups.length) {
    capture.calls = callRecords(calls, ["output"]);
  }
  capture.error = last.error;
  return { capture, exchanges };
});
