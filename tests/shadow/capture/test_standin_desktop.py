"""The Desktop capture drivers (``desktop-compress.cjs``, ``desktop-context-engineering.mjs``)
over stand-in legacy modules: the options and bindings they record, the Electron logger
stub, the scripted ``llmManager`` and its exchanges in ``input.json``, two-call scenarios,
a throw recorded as behaviour, the fake clock and seeded ids, byte-identical reruns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.shadow.capture.standin import (
    needs_node,
    read_capture,
    repeat_args,
    run_capture,
    second_run,
    tree_bytes,
    write_input,
    write_tree,
)

pytestmark = needs_node

BASE_MS = 1787227200000
PC = "desktop-app-vue/src/main/llm/prompt-compressor.js"
CE = "desktop-app-vue/src/main/llm/context-engineering.js"

# The real logger only loads inside Electron; this one refuses to load at all, so a capture
# that works proves the driver's require.cache stub is used.
LOGGER = 'throw new Error("stand-in logger: Electron only");\n'

# A stand-in Desktop PromptCompressor with the legacy shape: keeps the last N messages; with
# an llmManager and more than 3 messages it asks for a summary of the older ones (and keeps
# going without one when the query throws); a last message "THROW" makes it throw.
COMPRESSOR = """
const { logger } = require("../utils/logger.js");
const crypto = require("crypto");
class PromptCompressor {
  constructor(o = {}) {
    this.keep = o.maxHistoryMessages || 10; this.llmManager = o.llmManager || null;
    this.summarize = !!o.enableSummarization; logger.info("stand-in", o);
  }
  async compress(messages, options = {}) {
    const start = Date.now();
    const last = messages[messages.length - 1];
    if (last && last.content === "THROW") {
      const e = new TypeError("stand-in refused"); e.code = "E_STANDIN"; throw e;
    }
    let out = messages.slice(-this.keep);
    let strategy = "truncation";
    if (this.summarize && this.llmManager && messages.length > 3) {
      const older = messages.slice(0, -1).map((m) => m.content).join("|");
      try {
        const opts = { max_tokens: 500, temperature: 0.3 };
        const r = await this.llmManager.query(`sum: ${older}`, opts);
        out = [{ role: "system", content: `[sum]\\n${r.text}` }, messages[messages.length - 1]];
        strategy = "summarization";
      } catch (e) { strategy = `summary-failed:${e.name}`; }
    }
    return { messages: out, strategy, options, at: Date.now(),
      id: crypto.randomUUID(), processingTime: Date.now() - start };
  }
}
module.exports = { PromptCompressor };
"""

# A stand-in ContextEngineering: the system prompt first, then the history's role/content;
# a system prompt "THROW" makes it throw.
ENGINEERING = """
const crypto = require("crypto");
class ContextEngineering {
  constructor(o = {}) { this.stats = { totalCalls: 0 }; this.o = o; }
  buildOptimizedPrompt({ systemPrompt, messages = [] }) {
    this.stats.totalCalls++;
    if (systemPrompt === "THROW") { const e = new RangeError("stand-in CE refused"); throw e; }
    return { messages: [{ role: "system", content: String(systemPrompt).toUpperCase() },
      ...messages.map((m) => ({ role: m.role, content: m.content }))],
      metadata: { at: Date.now(), id: crypto.randomUUID(), n: messages.length } };
  }
  getStats() { return { ...this.stats, hit: "0.00%" }; }
}
exports.ContextEngineering = ContextEngineering;
"""

TREE = {PC: COMPRESSOR, CE: ENGINEERING,
        "desktop-app-vue/src/main/utils/logger.js": LOGGER,
        "desktop-app-vue/package.json": '{"name": "stand-in-desktop"}\n'}
FILES = ["desktop.compress.json", "desktop.context-engineering.json"]


def _msgs(*contents: str) -> list[dict[str, str]]:
    roles = ["system"] + ["user", "assistant"] * len(contents)
    return [{"role": r, "content": c} for r, c in zip(roles, contents, strict=False)]


def _inputs(tmp: Path, scenarios: dict[str, dict[str, Any]]) -> Path:
    inputs = tmp / "inputs"
    for name, doc in scenarios.items():
        write_input(inputs, name, {"model": {"provider": "openai", "model": "gpt-4o"}, **doc})
    entries = [{"id": n, "surfaces": [{"file": f} for f in FILES]} for n in scenarios]
    (inputs / "MANIFEST.json").write_text(json.dumps({"scenarios": entries}), encoding="utf-8")
    return inputs


def _input(out: Path, scenario: str) -> dict[str, Any]:
    doc = json.loads((out / scenario / "input.json").read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "legacy", TREE)


OK_SCRIPT = [{"ok": {"content": "the gist", "model": "gpt-4o-2024-08-06",
                     "usage": {"input_tokens": 30, "output_tokens": 7,
                               "cache_read_input_tokens": 5}}}]


def test_production_defaults_and_determinism(root: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, {"alpha": {"messages": _msgs("sys", "a", "b", "c", "d")}})
    code, out, _err = run_capture(root, inputs, tmp_path / "out")
    assert code == 0, out
    doc = read_capture(tmp_path / "out", "alpha", "desktop.compress.json")
    assert doc["surface"] == "desktop" and doc["entry"] == f"{PC}#PromptCompressor.compress"
    assert doc["options"] == {"constructor": {
        "enableDeduplication": True, "enableSummarization": False, "enableTruncation": True,
        "maxHistoryMessages": 10, "maxTotalTokens": 4000, "similarityThreshold": 0.9,
        "llmManager": None}, "compress": {}}
    assert doc["input_binding"]["messages"] == "input.messages (verbatim)"
    assert doc["input_binding"]["constructor"].startswith("production defaults")
    assert doc["env_flags"] == {}
    det = doc["determinism"]
    assert det["clock"]["base_ms"] == BASE_MS and det["clock"]["step_ms_per_call"] == 0
    assert det["random"]["seed_label"] == "desktop.compress:alpha"
    assert "processingTime is 0" in det["note"]
    output = doc["output"]
    assert output["strategy"] == "truncation" and output["options"] == {}
    assert [m["content"] for m in output["messages"]] == ["sys", "a", "b", "c", "d"]
    assert output["at"] == BASE_MS and output["processingTime"] == 0
    assert doc["error"] is None and "calls" not in doc
    assert list(doc)[-1] == "error"
    assert _input(tmp_path / "out", "alpha")["provider_responses"] == []


def test_scripted_llm_manager_records_exchanges(root: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, {
        "ok": {"messages": _msgs("sys", "a", "b", "c"), "provider_script": OK_SCRIPT},
        "bad": {"messages": _msgs("sys", "a", "b", "c"), "provider_script": [{"error": {
            "name": "Error", "message": "connect ECONNREFUSED", "code": "ECONNREFUSED",
            "errno": -111}}]},
        "abort": {"messages": _msgs("sys", "a", "b", "c"), "provider_script": [{"error": {
            "name": "AbortError", "message": "aborted", "code": 20, "domException": True}}]},
        "nousage": {"messages": _msgs("sys", "a", "b", "c"), "provider_script": [
            {"ok": {"content": "short", "usage": None, "model": "m1"}}]},
    })
    code, out, _err = run_capture(root, inputs, tmp_path / "out")
    assert code == 0, out
    doc = read_capture(tmp_path / "out", "ok", "desktop.compress.json")
    assert doc["options"]["constructor"]["enableSummarization"] is True
    assert doc["options"]["constructor"]["llmManager"] == {"query": "[Function recordedQuery]"}
    assert doc["input_binding"]["constructor"].startswith("SessionManager-style")
    assert doc["output"]["strategy"] == "summarization"
    assert doc["output"]["messages"][0] == {"role": "system", "content": "[sum]\nthe gist"}
    [x] = _input(tmp_path / "out", "ok")["provider_responses"]
    assert x == {"surface": "desktop",
                 "entry": f"{PC}#PromptCompressor.compress -> llmManager.query", "call": 1,
                 "request": {"prompt": "sum: sys|a|b",
                             "options": {"max_tokens": 500, "temperature": 0.3}},
                 "response": {"text": "the gist", "model": "gpt-4o-2024-08-06", "tokens": 37,
                              "usage": {"prompt_tokens": 30, "completion_tokens": 7,
                                        "total_tokens": 37},
                              "timestamp": BASE_MS},
                 "error": None}
    [bad] = _input(tmp_path / "out", "bad")["provider_responses"]
    assert bad["response"] is None
    assert bad["error"] == {"name": "Error", "message": "connect ECONNREFUSED",
                            "code": "ECONNREFUSED"}
    assert read_capture(tmp_path / "out", "bad", "desktop.compress.json")["output"][
        "strategy"] == "summary-failed:Error"
    [abort] = _input(tmp_path / "out", "abort")["provider_responses"]
    assert abort["error"] == {"name": "AbortError", "message": "aborted", "code": 20}
    [nousage] = _input(tmp_path / "out", "nousage")["provider_responses"]
    assert nousage["response"] == {"text": "short", "model": "m1", "tokens": 0,
                                   "timestamp": BASE_MS}


def test_followup_messages_make_calls(root: Path, tmp_path: Path) -> None:
    script = [*OK_SCRIPT, {"ok": {"content": "second", "model": "m2",
                                  "usage": {"input_tokens": 1, "output_tokens": 1}}}]
    inputs = _inputs(tmp_path, {"two": {"messages": _msgs("sys", "a", "b", "c"),
                                        "followup_messages": [_msgs("x", "y")],
                                        "provider_script": script}})
    code, out, _err = run_capture(root, inputs, tmp_path / "out")
    assert code == 0, out
    doc = read_capture(tmp_path / "out", "two", "desktop.compress.json")
    assert [c["call"] for c in doc["calls"]] == [1, 2]
    assert [c["input_binding"] for c in doc["calls"]] == [
        "input.messages", "calls[0].output.messages ++ input.followup_messages[0]"]
    assert list(doc["calls"][0]) == ["call", "input_binding", "output", "error"]
    assert doc["output"] == doc["calls"][1]["output"]
    assert doc["output"]["messages"][0]["content"] == "[sum]\nsecond"
    calls = [x["call"] for x in _input(tmp_path / "out", "two")["provider_responses"]]
    assert calls == [1, 2]  # the surface counts its own calls across both compress calls
    assert list(doc)[-2:] == ["calls", "error"]


def test_a_throw_is_recorded_behaviour(root: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, {"boom": {"messages": [{"role": "system", "content": "THROW"},
                                                      {"role": "user", "content": "THROW"}]}})
    code, out, _err = run_capture(root, inputs, tmp_path / "out")
    assert code == 0, out
    doc = read_capture(tmp_path / "out", "boom", "desktop.compress.json")
    assert doc["output"] is None
    assert doc["error"] == {"name": "TypeError", "message": "stand-in refused",
                            "code": "E_STANDIN"}
    ce = read_capture(tmp_path / "out", "boom", "desktop.context-engineering.json")
    assert ce["output"] is None
    assert ce["error"] == {"name": "RangeError", "message": "stand-in CE refused", "code": None}
    assert ce["diagnostics"] == {"stats_after": {"totalCalls": 1, "hit": "0.00%"}}
    manifest = json.loads((tmp_path / "out" / "MANIFEST.json").read_text(encoding="utf-8"))
    assert {e["file"] for e in manifest["errored"]} == set(FILES)


def test_context_engineering_binding(root: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, {"alpha": {"messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi", "id": "u1"},
        {"role": "assistant", "content": "hello"}]}})
    code, out, _err = run_capture(root, inputs, tmp_path / "out")
    assert code == 0, out
    doc = read_capture(tmp_path / "out", "alpha", "desktop.context-engineering.json")
    assert doc["entry"] == f"{CE}#ContextEngineering.buildOptimizedPrompt"
    assert doc["options"] == {"constructor": {}, "buildOptimizedPrompt": {
        "systemPrompt": "<input.messages[0].content>", "messages": "<input.messages.slice(1)>"}}
    assert doc["input_binding"] == {"systemPrompt": "input.messages[0].content",
                                    "messages": "input.messages.slice(1)"}
    assert doc["determinism"]["random"]["seed_label"] == "desktop.ce:alpha"
    assert "note" not in doc["determinism"]
    assert doc["output"]["messages"] == [{"role": "system", "content": "BE BRIEF"},
                                         {"role": "user", "content": "hi"},
                                         {"role": "assistant", "content": "hello"}]
    assert doc["output"]["metadata"]["at"] == BASE_MS and doc["output"]["metadata"]["n"] == 2
    assert doc["diagnostics"] == {"stats_after": {"totalCalls": 1, "hit": "0.00%"}}
    assert list(doc)[-3:] == ["output", "diagnostics", "error"] and doc["error"] is None


def test_two_runs_are_byte_identical_and_repeats_move_the_clock(root: Path,
                                                                  tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, {"alpha": {"messages": _msgs("sys", "a", "b", "c"),
                                          "provider_script": OK_SCRIPT},
                                "beta": {"messages": _msgs("sys", "a", "b", "c")}})
    assert run_capture(root, inputs, tmp_path / "one")[0] == 0
    assert run_capture(root, inputs, tmp_path / "two", *repeat_args(tmp_path))[0] == 0
    one, two = tree_bytes(tmp_path / "one"), tree_bytes(tmp_path / "two")
    assert one == two
    ids = {s: read_capture(tmp_path / "one", s, "desktop.compress.json")["output"]["id"]
           for s in ("alpha", "beta")}
    assert ids["alpha"] != ids["beta"]  # one stream per (scenario, surface)
    rep = read_capture(second_run(tmp_path), "alpha", "desktop.compress.json")
    assert rep["determinism"]["clock"]["base_ms"] != BASE_MS
    assert rep["output"]["at"] == rep["determinism"]["clock"]["base_ms"]
    assert rep["determinism"]["random"]["seed_label"] == "desktop.compress:alpha#repeat2"
    [x] = _input(second_run(tmp_path), "alpha")["provider_responses"]
    assert x["response"]["timestamp"] == rep["determinism"]["clock"]["base_ms"]
