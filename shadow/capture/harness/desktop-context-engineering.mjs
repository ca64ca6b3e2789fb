// Capture driver: Desktop ContextEngineering.buildOptimizedPrompt
// (desktop-app-vue/src/main/llm/context-engineering.js).  This project's own code; it runs the
// legacy module of the user's checkout where it lies.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { main, importLegacy, header, det } = require("./common.cjs");

const MODULE = "desktop-app-vue/src/main/llm/context-engineering.js";
const ENTRY = `${MODULE}#ContextEngineering.buildOptimizedPrompt`;

function clone(value) { return value === undefined ? null : JSON.parse(JSON.stringify(value)); }

main(async (req) => {
  const ce = await importLegacy(req, MODULE);
  const input = req.input;
  det.reset({ baseMs: req.base_ms, stepMs: 0, label: req.label });
  const messages = Array.isArray(input.messages) ? input.messages : [];
  const ctor = {};
  const engine = new ce.ContextEngineering(ctor);
  let output = null;
  let error = null;
  try {
    output = clone(engine.buildOptimizedPrompt({
      systemPrompt: messages.length ? messages[0].content : undefined,
      messages: messages.slice(1),
    }));
  } catch (err) {
    error = det.errorRecord(err);
  }
  const capture = {
    ...header(req, "desktop", ENTRY),
    options: { constructor: ctor, buildOptimizedPrompt: {
      systemPrompt: "<input.messages[0].content>", messages: "<input.messages.slice(1)>" } },
    input_binding: { systemPrompt: "input.messages[0].content", messages: "input.messages.slice(1)" },
    env_flags: {},
    determinism: det.determinismRecord(0),
    output,
    diagnostics: { stats_after: clone(engine.getStats()) },
    error,
  };
  return { capture, exchanges: [] };
});
