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

module.exports = { readRequest, legacyPath, importLegacy, envFlags, reply, main, header, det };
