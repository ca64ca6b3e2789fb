// Capture driver: CLI PromptCompressor.compress (packages/cli/src/harness/prompt-compressor.js).
// This project's own code; it runs the legacy module of the user's checkout.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { main, importLegacy, envFlags, header, det, callRecords } = require("./common.cjs");

const ENTRY = "packages/cli/src/harness/prompt-compressor.js#PromptCompressor.compress";
const VERIFIED = "input.messages, each mapped through session-message-provenance.decodeVerifiedPersistedMessage (CLI verified-resume path)";

function hasReplayTag(messages) {
  return (messages || []).some((m) => m && typeof m === "object" && m._cc_replay !== undefined);
}

main(async (req) => {
  const pc = await importLegacy(req, "packages/cli/src/harness/prompt-compressor.js");
  const prov = await importLegacy(req, "packages/cli/src/lib/session-message-provenance.js");
  const input = req.input;
  const decode = req.variant !== "raw-wire" && hasReplayTag(input.messages);
  const bind = (ms) => (decode ? ms.map((m) => prov.decodeVerifiedPersistedMessage(m)) : ms);
  const ctor = { model: input.model.model, provider: input.model.provider, ...(input.cli_thresholds || {}) };
  det.reset({ baseMs: req.base_ms, stepMs: 0, label: req.label });
  const provenance = (ms) => ms.map((m) => {
    const tag = prov.getDurableSystemMessageProvenance(m);
    return tag ? tag.kind : null;
  });
  const followups = input.followup_messages || [];
  const calls = [];
  let messages = bind(input.messages);
  for (let k = 0; k <= followups.length; k += 1) {
    if (k > 0) messages = [...calls[k - 1].result.messages, ...bind(followups[k - 1])];
    const compressor = new pc.PromptCompressor(ctor);
    const diagnostics = {
      resolved_thresholds: { maxMessages: compressor.maxMessages, maxTokens: compressor.maxTokens,
        adaptive: compressor._adaptive, contextWindow: compressor._contextWindow },
      shouldAutoCompact_before: compressor.shouldAutoCompact(messages),
      input_message_count: messages.length,
      input_provenance: provenance(messages),
    };
    let result = null;
    let error = null;
    try { result = await compressor.compress(messages, { preserveToolPairs: true }); } catch (err) {
      error = det.errorRecord(err);
    }
    calls.push({ k, result, error, diagnostics,
      output: result === null ? null : JSON.parse(JSON.stringify(result)),
      output_provenance: result === null ? null : provenance(result.messages) });
    if (error) break;
  }
  const last = calls[calls.length - 1];
  const capture = {
    ...header(req, "cli", ENTRY),
    options: { constructor: ctor, compress: { preserveToolPairs: true } },
    input_binding: { messages: decode ? VERIFIED : "input.messages (verbatim)" },
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
  return { capture, exchanges: [] };
});
