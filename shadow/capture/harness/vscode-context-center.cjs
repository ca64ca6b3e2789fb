"use strict";
// Capture driver: VS Code Context Center (packages/vscode-extension/src/context-center.js).
// This project's own code; it runs the legacy module of the user's checkout.
//
// Two modes:
//   capture (default): buildContextCenter(input.context_center) → one legacy-capture/v1 file;
//   "selfcheck": each case of the extension's shared fixture (req.cases, a path) → does
//                buildContextCenter(case.input) equal case.expected (as the extension's
//                own test checks it, vitest toEqual)?
const fs = require("node:fs");
const util = require("node:util");
const { main, legacyPath, header, det } = require("./common.cjs");

const MODULE = "packages/vscode-extension/src/context-center.js";
const ENTRY = `${MODULE}#buildContextCenter`;
const BINDING = "input.context_center (verbatim, single object argument)";

/** A JSON copy: what the capture file shows (undefined members dropped, as toEqual ignores them). */
function plain(value) {
  return value === undefined ? null : JSON.parse(JSON.stringify(value));
}

function selfcheck(cc, req) {
  const cases = JSON.parse(fs.readFileSync(req.cases, "utf8"));
  return (Array.isArray(cases) ? cases : []).map((item) => {
    let matches = false;
    try {
      matches = util.isDeepStrictEqual(plain(cc.buildContextCenter(item.input)),
        plain(item.expected));
    } catch (_err) {
      matches = false;  // a throw is no match
    }
    return { name: item && item.name !== undefined ? item.name : null, matches };
  });
}

main(async (req) => {
  // eslint-disable-next-line import/no-dynamic-require, global-require
  const cc = require(legacyPath(req, MODULE));
  if (req.mode === "selfcheck") return { capture: { selfcheck: selfcheck(cc, req) }, exchanges: [] };
  const input = req.input;
  det.reset({ baseMs: req.base_ms, stepMs: 0, label: req.label });
  let output = null;
  let error = null;
  try {
    output = plain(cc.buildContextCenter(input.context_center));
  } catch (err) {
    error = det.errorRecord(err);
  }
  const capture = {
    ...header(req, "vscode", ENTRY),
    options: {},
    input_binding: { argument: BINDING },
    env_flags: {},
    determinism: det.determinismRecord(0),
    output,
    error,
  };
  return { capture, exchanges: [] };
});
