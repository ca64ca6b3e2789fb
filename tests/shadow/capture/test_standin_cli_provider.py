"""``shadow capture`` of CLI provider-backed compaction against a stand-in legacy tree.

The stand-in ``compactConversationWithProvider`` is this test's own code: it asks the
capture's ``onProviderCallStart`` for a call id, calls ``chatFn`` once per compaction and
returns a one-message summary marked as a durable compact summary (or a fallback summary
when the provider call fails, rethrowing an ``AbortError``); it throws when a message says
``THROW``.  The tests check what the driver passes and records: options, bindings, the
deterministic clock and stream, the output and its provenance, the error of a throw, and
the exchanges written into ``input.json``'s ``provider_responses``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.shadow.capture.standin import (
    COMMIT,
    needs_node,
    read_capture,
    run_capture,
    tree_bytes,
    write_input,
    write_tree,
)

PBC = "packages/cli/src/harness/provider-backed-compaction.js"
ENTRY = f"{PBC}#compactConversationWithProvider"
FILE = "cli.provider-compaction.json"
RAW = "cli.provider-compaction.raw-wire.json"
BASE_MS = 1787227200000

PROVENANCE_JS = """\
const TAGS = new WeakMap();
export function markDurableSystemMessage(m, kind) { TAGS.set(m, { kind }); return m; }
export function getDurableSystemMessageProvenance(m) { return TAGS.get(m) || null; }
export function decodeVerifiedPersistedMessage(m) {
  const { _cc_replay: tag, ...clean } = m;
  if (tag && clean.role === "system") TAGS.set(clean, { kind: tag.kind });
  return clean;
}
"""

COMPACTION_JS = """\
import { markDurableSystemMessage } from "../lib/session-message-provenance.js";
export async function compactConversationWithProvider(messages, options = {}) {
  if (messages.some((m) => m.content === "THROW")) {
    const err = new TypeError("stand-in refuses THROW"); err.code = "STANDIN"; throw err;
  }
  const callId = await options.onProviderCallStart?.();
  let summary; let usage = null; let degraded = false;
  try {
    const r = await options.chatFn([{ role: "user", content: `summarise ${messages.length}` }],
      { ...(options.chatOptions || {}), provider: options.provider, model: options.model,
        signal: undefined, maxOutputTokens: 2048 });
    summary = r.message.content; usage = r.usage || null;
  } catch (err) {
    if (err && err.name === "AbortError") throw err;
    summary = `fallback: ${err.message}`; degraded = true;
  }
  const s = markDurableSystemMessage({ role: "system", content: summary }, "compact-summary");
  return { messages: [s, ...messages.slice(-1)],
    stats: { callId, degraded, usage, now: Date.now(), draw: Math.random(),
      force: options.force, keep: options.preserveCompletedExchange } };
}
"""

MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "done"}, {"role": "user", "content": "thanks"}]
MODEL = {"provider": "openai", "model": "gpt-4o"}
OK = {"ok": {"content": "SUMMARY-1", "usage": {"input_tokens": 10, "output_tokens": 2},
             "model": "gpt-4o-x"}}


def legacy_tree(tmp: Path) -> Path:
    return write_tree(tmp / "legacy", {
        "packages/cli/package.json": '{"type": "module"}\n',
        PBC: COMPACTION_JS,
        "packages/cli/src/lib/session-message-provenance.js": PROVENANCE_JS,
    })


def inputs_with(tmp: Path, scenarios: dict[str, dict[str, Any]],
                files: dict[str, list[str]] | None = None) -> Path:
    """Scenario inputs and a MANIFEST that lists only the provider-compaction captures."""
    inputs = tmp / "inputs"
    for name, doc in scenarios.items():
        write_input(inputs, name, doc)
    manifest = {"format": "legacy-capture-manifest/v1", "scenarios": [
        {"id": name, "surfaces": [{"file": f} for f in (files or {}).get(name, [FILE])]}
        for name in scenarios]}
    (inputs / "MANIFEST.json").write_text(json.dumps(manifest), encoding="utf-8")
    return inputs


def capture_ok(root: Path, inputs: Path, out: Path) -> None:
    code, stdout, stderr = run_capture(root, inputs, out)
    assert code == 0, (stdout, stderr)


def exchanges(out: Path, scenario: str) -> list[dict[str, Any]]:
    doc = json.loads((out / scenario / "input.json").read_text(encoding="utf-8"))
    got = doc["provider_responses"]
    assert isinstance(got, list)
    return got


@needs_node
def test_summary_options_bindings_determinism_and_exchange(tmp_path: Path) -> None:
    root = legacy_tree(tmp_path)
    inputs = inputs_with(tmp_path, {"ok": {"model": MODEL, "messages": MESSAGES,
                                           "provider_script": [OK]}})
    capture_ok(root, inputs, tmp_path / "out")
    doc = read_capture(tmp_path / "out", "ok", FILE)
    assert list(doc)[:6] == ["format", "scenario", "surface", "entry", "legacy_commit", "node"]
    assert (doc["surface"], doc["entry"], doc["legacy_commit"]) == ("cli", ENTRY, COMMIT)
    assert doc["options"] == {
        "provider": "openai", "model": "gpt-4o", "force": True,
        "preserveCompletedExchange": True, "chatFn": "[Function recordedChatFn]",
        "chatOptions": {"cwd": "/workspace/acme-api", "sessionId": "cc-capture-ok"},
        "onProviderCallStart": "[Function onProviderCallStart]"}
    assert doc["input_binding"]["messages"] == "input.messages (verbatim)"
    assert list(doc["input_binding"]) == ["messages", "chatFn", "onProviderCallStart"]
    assert doc["determinism"]["clock"]["base_ms"] == BASE_MS
    assert doc["determinism"]["random"]["seed_label"] == "cli.provider:ok"
    out = doc["output"]
    assert out["messages"] == [{"role": "system", "content": "SUMMARY-1"}, MESSAGES[-1]]
    assert out["stats"]["callId"] == "compaction-ok-1"
    assert out["stats"]["now"] == BASE_MS
    assert out["stats"]["usage"] == {"input_tokens": 10, "output_tokens": 2}
    assert (out["stats"]["force"], out["stats"]["keep"]) == (True, True)
    assert doc["output_provenance"] == ["compact-summary", None]
    assert doc["diagnostics"] == {"input_message_count": 4, "provider_exchange":
                                  "input.provider_responses[surface=cli, call=1]"}
    assert doc["error"] is None and "calls" not in doc
    assert exchanges(tmp_path / "out", "ok") == [{
        "surface": "cli", "entry": ENTRY, "call": 1,
        "request": {"messages": [{"role": "user", "content": "summarise 4"}],
                    "options": {"cwd": "/workspace/acme-api", "sessionId": "cc-capture-ok",
                                "provider": "openai", "model": "gpt-4o",
                                "signal": "[undefined]", "maxOutputTokens": 2048}},
        "response": {"message": {"role": "assistant", "content": "SUMMARY-1"},
                     "usage": {"input_tokens": 10, "output_tokens": 2}, "model": "gpt-4o-x"},
        "error": None}]


@needs_node
def test_scripted_errors_abort_and_legacy_throw(tmp_path: Path) -> None:
    root = legacy_tree(tmp_path)
    refused = {"error": {"name": "Error", "message": "connect ECONNREFUSED", "code":
                         "ECONNREFUSED", "port": 443}}
    abort = {"error": {"name": "AbortError", "message": "This operation was aborted",
                       "code": 20, "domException": True}}
    inputs = inputs_with(tmp_path, {
        "down": {"model": MODEL, "messages": MESSAGES, "provider_script": [refused]},
        "cancel": {"model": MODEL, "messages": MESSAGES, "provider_script": [abort]},
        "boom": {"model": MODEL, "messages": [{"role": "user", "content": "THROW"}],
                 "provider_script": [OK]},
    })
    out = tmp_path / "out"
    capture_ok(root, inputs, out)
    down = read_capture(out, "down", FILE)
    assert down["error"] is None and down["output"]["stats"]["degraded"] is True
    assert down["output"]["messages"][0]["content"] == "fallback: connect ECONNREFUSED"
    [x] = exchanges(out, "down")
    assert x["response"] is None and x["error"] == refused["error"]

    cancel = read_capture(out, "cancel", FILE)
    assert cancel["error"] == {"name": "AbortError", "message": "This operation was aborted",
                               "code": 20}
    assert cancel["output"] is None and cancel["output_provenance"] is None
    assert cancel["diagnostics"]["provider_exchange"] == (
        "input.provider_responses[surface=cli, call=1]")
    [x] = exchanges(out, "cancel")
    assert x["error"] == {"name": "AbortError", "message": "This operation was aborted",
                          "code": 20}

    boom = read_capture(out, "boom", FILE)
    assert boom["error"] == {"name": "TypeError", "message": "stand-in refuses THROW",
                             "code": "STANDIN"}
    assert boom["output"] is None
    assert boom["diagnostics"] == {"input_message_count": 1, "provider_exchange": None}
    assert exchanges(out, "boom") == []
    manifest = json.loads((out / "MANIFEST.json").read_text(encoding="utf-8"))
    assert json.dumps(manifest).count("stand-in refuses THROW") >= 1


@needs_node
def test_followups_exhausted_script_raw_wire_and_repeatable_bytes(tmp_path: Path) -> None:
    root = legacy_tree(tmp_path)
    replay = [{"role": "system", "content": "old summary",
               "_cc_replay": {"schema": "x", "kind": "compact-summary"}},
              {"role": "user", "content": "go on"}]
    inputs = inputs_with(tmp_path, {
        "twice": {"model": MODEL, "messages": MESSAGES,
                  "followup_messages": [[{"role": "user", "content": "more"}]],
                  "provider_script": [OK]},
        "replay": {"model": MODEL, "messages": replay, "provider_script": [OK]},
    }, files={"replay": [FILE, RAW]})
    out = tmp_path / "out"
    capture_ok(root, inputs, out)

    twice = read_capture(out, "twice", FILE)
    assert [c["call"] for c in twice["calls"]] == [1, 2]
    assert twice["calls"][1]["input_binding"] == (
        "calls[0].output.messages ++ input.followup_messages[0]")
    assert twice["calls"][1]["diagnostics"] == {
        "input_message_count": 3,
        "provider_exchange": "input.provider_responses[surface=cli, call=2]"}
    assert twice["output"] == twice["calls"][1]["output"]
    assert twice["output"]["stats"]["callId"] == "compaction-twice-2"
    assert twice["output"]["messages"][0]["content"].startswith(
        "fallback: provider_script has no entry for call 2")
    first, second = exchanges(out, "twice")
    assert (first["call"], first["error"]) == (1, None)
    assert second["call"] == 2 and second["response"] is None
    assert second["error"]["code"] == "CAPTURE_SCRIPT_EXHAUSTED"
    assert list(twice)[-2:] == ["calls", "error"]

    decoded = read_capture(out, "replay", FILE)
    raw = read_capture(out, "replay", RAW)
    assert decoded["input_binding"]["messages"].startswith(
        "input.messages, each mapped through decodeVerifiedPersistedMessage")
    assert raw["input_binding"]["messages"] == "input.messages (verbatim)"
    assert raw["determinism"]["random"]["seed_label"] == "cli.provider:replay:raw-wire"
    assert [x.get("variant") for x in exchanges(out, "replay")] == [None, "raw-wire"]
    assert list(exchanges(out, "replay")[1])[:4] == ["surface", "entry", "variant", "call"]

    again = tmp_path / "again"
    capture_ok(root, inputs, again)
    assert tree_bytes(out) == tree_bytes(again)
