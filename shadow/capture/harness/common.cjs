"use strict";
// Shared plumbing of the capture drivers (this project's own code): read the request,
// resolve legacy modules inside the user's checkout, answer with one JSON envelope line.
const fs = require("node:fs");
const path = require("node:path");
const url = require("node:url");
const det = require("./determinism.cjs");

function readRequest() {
  const text = fs.readFileSync(0, "utf8");
  const req = JSON.parse(text);
  req.input = JSON.parse(req.input_text);
  return req;
}

function legacyPath(req, rel) { return path.join(req.legacy_root, ...rel.split("/")); }

async function importLegacy(req, rel) {
  return import(url.pathToFileURL(legacyPath(req, rel)).href);
}

function envFlags(input) {
  const flags = input.flags || {};
  const out = {};
  for (const name of ["CONTEXT_SNIP", "CONTEXT_COLLAPSE", "COMPRESSION_AB"]) {
    out[`CC_FLAG_${name}`] = flags[name] === true ? "true" : "false";
  }
  return out;
}

function reply(envelope) {
  envelope.network = det.networkAttempts();
  process.stdout.write(`${JSON.stringify(envelope)}\n`);
}

/** Run ``body`` (async, returns {capture, exchanges}) and print the envelope. */
function main(body) {
  let req;
  try { req = readRequest(); } catch (err) {
    reply({ harness_error: { stage: "request", message: String(err && err.message) } });
    process.exitCode = 3;
    return;
  }
  det.install();
  Promise.resolve()
    .then(() => body(req))
    .then((res) => reply({ text: det.captureText(res.capture), exchanges: res.exchanges || [] }))
    .catch((err) => {
      reply({ harness_error: { stage: "driver", name: err && err.name, code: err && err.code,
        message: String(err && err.message) } });
      process.exitCode = 3;
    });
}

function header(req, surface, entry) {
  return { format: "legacy-capture/v1", scenario: req.scenario, surface, entry,
    legacy_commit: req.legacy_commit, node: process.version };
}

/** What was passed, as JSON: functions and undefined described as strings. */
function describe(value) {
  if (value === undefined) return "[undefined]";
  if (typeof value === "function") return `[Function ${value.name || "anonymous"}]`;
  if (Array.isArray(value)) return value.map(describe);
  if (value && typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = describe(v);
    return out;
  }
  return value;
}

/**
 * ``calls[]`` of a two-phase scenario (input.followup_messages): per call its number, how
 * its messages were bound, the fields ``keys`` of the call record (in that order), its error.
 */
function callRecords(calls, keys) {
  return calls.map((c) => {
    const rec = { call: c.k + 1, input_binding: c.k === 0 ? "input.messages"
      : `calls[${c.k - 1}].output.messages ++ input.followup_messages[${c.k - 1}]` };
    for (const key of keys) rec[key] = c[key];
    rec.error = c.error;
    return rec;
  });
}

module.exports = { readRequest, legacyPath, importLegacy, envFlags, reply, main, header, det,
  describe, callRecords };
