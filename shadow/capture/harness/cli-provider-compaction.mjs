// Capture driver: CLI compactConversationWithProvider
// (packages/cli/src/harness/provider-backed-compaction.js).
// This project's own code; it runs the legacy module of the user's checkout.  The provider
// is scripted from input.provider_script; every call the legacy code makes is returned as
// an exchange record for input.provider_responses.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { main, importLegacy, envFlags, header, det, describe, callRecords } = require("./common.cjs");

const MODULE = "packages/cli/src/harness/provider-backed-compaction.js";
const ENTRY = `${MODULE}#compactConversationWithProvider`;
const VERIFIED = "input.messages, each mapped through decodeVerifiedPersistedMessage (CLI verified-resume path)";
const CHAT_BINDING = "replays input.provider_script[call-1] as a coreChatWithTools-shaped response {message:{role,content},usage?,model?,callId?} or throws the scripted error; every exchange is recorded in input.provider_responses";
const CALL_START_BINDING = "returns `compaction-<scenario>-<n>` (mirrors headless-stream manual /compact metering)";
const CWD = "/workspace/acme-api";

function hasReplayTag(messages) {
  return (messages || []).some((m) => m && typeof m === "object" && m._cc_replay !== undefined);
}


/** Each script entry is {ok: {content, usage?, model?, callId?}} or {error: {name, message, …}}. */
function checkScript(script) {
  if (script === undefined) return [];
  if (!Array.isArray(script)) throw new TypeError("input.provider_script: expected a list");
  script.forEach((s, i) => {
    const ok = s && typeof s === "object" && !Array.isArray(s)
      && ((s.ok && typeof s.ok === "object" && typeof s.ok.content === "string")
        || (s.error && typeof s.error === "object" && typeof s.error.message === "string"));
    if (!ok) throw new TypeError(`input.provider_script[${i}]: expected {ok: {content, …}} or {error: {message, …}}`);
  });
  return script;
}

/** The scripted answer of a coreChatWithTools-shaped provider: a response, or an error to throw. */
function scripted(entry, call) {
  if (entry === undefined) {
    const record = { name: "Error",
      message: `provider_script has no entry for call ${call} (the capture input scripts fewer provider calls than the legacy code made)`,
      code: "CAPTURE_SCRIPT_EXHAUSTED" };
    const err = new Error(record.message);
    err.code = record.code;
    return { record, error: err };
  }
  if (entry.ok) {
    const ok = entry.ok;
    const response = { message: { role: "assistant", content: ok.content } };
    if (ok.usage !== undefined && ok.usage !== null) response.usage = ok.usage;
    if (ok.model !== undefined && ok.model !== null) response.model = ok.model;
    if (ok.callId !== undefined && ok.callId !== null) response.callId = ok.callId;
    return { response };
  }
  const { domException, ...record } = entry.error;
  const name = record.name || "Error";
  let err;
  if (domException === true) {
    err = new DOMException(record.message, name);
  } else {
    err = new Error(record.message);
    if (name !== "Error") err.name = name;
    for (const [k, v] of Object.entries(record)) {
      if (k !== "name" && k !== "message") err[k] = v;
    }
  }
  return { record: { name, ...record }, error: err };
}

main(async (req) => {
  const pbc = await importLegacy(req, MODULE);
  const prov = await importLegacy(req, "packages/cli/src/lib/session-message-provenance.js");
  const input = req.input;
  const script = checkScript(input.provider_script);
  const decode = req.variant !== "raw-wire" && hasReplayTag(input.messages);
  const bind = (ms) => (decode ? ms.map((m) => prov.decodeVerifiedPersistedMessage(m)) : ms);
  det.reset({ baseMs: req.base_ms, stepMs: 0, label: req.label });

  const exchanges = [];
  let started = 0;
  const exchangeHead = { surface: "cli", entry: ENTRY,
    ...(req.variant ? { variant: req.variant } : {}) };
  async function recordedChatFn(messages, options) {
    const call = exchanges.length + 1;
    const request = { messages: describe(messages), options: describe(options) };
    const answer = scripted(script[call - 1], call);
    exchanges.push({ ...exchangeHead, call, request,
      response: answer.response === undefined ? null : JSON.parse(JSON.stringify(answer.response)),
      error: answer.record === undefined ? null : answer.record });
    if (answer.error) throw answer.error;
    return answer.response;
  }
  async function onProviderCallStart() {
    started += 1;
    return `compaction-${req.scenario}-${started}`;
  }
  const options = {
    provider: input.model.provider,
    model: input.model.model,
    force: true,
    preserveCompletedExchange: true,
    chatFn: recordedChatFn,
    chatOptions: { cwd: CWD, sessionId: `cc-capture-${req.scenario}` },
    onProviderCallStart,
  };
  const provenance = (ms) => ms.map((m) => {
    const tag = prov.getDurableSystemMessageProvenance(m);
    return tag ? tag.kind : null;
  });

  const followups = input.followup_messages || [];
  const calls = [];
  let messages = bind(input.messages);
  for (let k = 0; k <= followups.length; k += 1) {
    if (k > 0) messages = [...calls[k - 1].result.messages, ...bind(followups[k - 1])];
    const before = exchanges.length;
    let result = null;
    let error = null;
    try { result = await pbc.compactConversationWithProvider(messages, options); } catch (err) {
      error = det.errorRecord(err);
    }
    const made = exchanges.slice(before);
    const diagnostics = {
      input_message_count: messages.length,
      provider_exchange: made.length
        ? made.map((x) => `input.provider_responses[surface=cli, call=${x.call}]`).join(" ++ ")
        : null,
    };
    calls.push({ k, result, error, diagnostics,
      output: result === null ? null : JSON.parse(JSON.stringify(result)),
      output_provenance: result === null ? null : provenance(result.messages) });
    if (error) break;
  }
  const last = calls[calls.length - 1];
  const capture = {
    ...header(req, "cli", ENTRY),
    options: describe(options),
    input_binding: {
      messages: decode ? VERIFIED : "input.messages (verbatim)",
      chatFn: CHAT_BINDING,
      onProviderCallStart: CALL_START_BINDING,
    },
    env_flags: envFlags(input),
    determinism: det.determinismRecord(0),
    output: last.output,
    output_provenance: last.output_provenance,
    diagnostics: last.diagnostics,
  };
  if (followups.length) {
    capture.calls = callRecords(calls, ["output", "output_provenance", "diagnostics"]);
  }
  capture.error = last.error;
  return { capture, exchanges };
});
