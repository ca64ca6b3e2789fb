"""``shadow capture`` of the CLI JSONL session store against a stand-in legacy tree.

The stand-in ``jsonl-session-store.js`` is this test's own code: a tiny hash-chained JSONL
file under ``$CHAINLESSCHAIN_HOME/sessions`` (one ``Date.now()`` per event), a rebuild from
the latest compact event, a verified read that refuses a torn tail, a compare-and-swap
compact append (``SESSION_REVISION_STALE``), the store's fault hook before fsync, and a
user message ``THROW`` that makes it throw.  A stand-in compressor keeps the last two
messages behind a durable summary, so the JSONL capture has a compaction to persist.
The tests check the driver's options and bindings, the headless-runner projection, the
deterministic clock and label, the settlement, the error of a throw, the optional
``session_store`` crash / CAS-race inputs, and that two runs give identical bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.shadow.capture.standin import (
    COMMIT,
    needs_node,
    read_capture,
    run_capture,
    tree_bytes,
    write_input,
    write_tree,
)

pytestmark = needs_node

STORE = "packages/cli/src/harness/jsonl-session-store.js"
ENTRY = f"{STORE}#appendCompactEventIfMessagesMatch+rebuildMessages"
FILE = "cli.jsonl-session.json"
BASE_MS = 1787227200000

PROVENANCE_JS = """\
const TAGS = new WeakMap();
const SCHEMA = "chainlesschain.session-message-provenance/v1";
export function markDurableSystemMessage(m, kind) {
  TAGS.set(m, { schema: SCHEMA, kind });
  return m;
}
export function getDurableSystemMessageProvenance(m) { return (m && TAGS.get(m)) || null; }
export function decodeVerifiedPersistedMessage(m) {
  const { _cc_replay: tag, ...clean } = m;
  if (tag && clean.role === "system") TAGS.set(clean, { schema: SCHEMA, kind: tag.kind });
  return clean;
}
export function encodePersistedMessage(m) {
  const tag = TAGS.get(m);
  return tag ? { ...m, _cc_replay: tag } : { ...m };
}
export function projectCanonicalResumeMessages(ms) {
  return ms.filter((m) => m.role !== "system" || TAGS.get(m))
    .map((m) => (TAGS.get(m) ? markDurableSystemMessage({ ...m }, TAGS.get(m).kind) : { ...m }));
}
"""

COMPRESSOR_JS = """\
import { markDurableSystemMessage } from "../lib/session-message-provenance.js";
export class PromptCompressor {
  constructor(o = {}) { this.maxMessages = 2; this.maxTokens = 100; }
  shouldAutoCompact(ms) { return ms.length > 2; }
  async compress(ms) {
    const summary = markDurableSystemMessage({ role: "system", content: `S${ms.length}` },
      "compact-summary");
    const kept = ms.filter((m) => m.role !== "system").slice(-2);
    return { messages: [summary, ...kept],
      stats: { strategy: "standin", originalMessages: ms.length } };
  }
}
"""

STORE_JS = """\
import fs from "node:fs";
import path from "node:path";
import { createHash, randomUUID } from "node:crypto";
import {
  decodeVerifiedPersistedMessage, encodePersistedMessage,
} from "../lib/session-message-provenance.js";
export const _sessionScaleFaultHooks = Object.seal({ beforeTranscriptFsync: null });
const dir = () => path.join(process.env.CHAINLESSCHAIN_HOME, "sessions");
export function sessionPath(id) { return path.join(dir(), `${id}.jsonl`); }
function read(id) {
  const p = sessionPath(id);
  if (!fs.existsSync(p)) return { events: [], torn: false };
  const parts = fs.readFileSync(p, "utf8").split("\\n");
  return { events: parts.slice(0, -1).map((l) => JSON.parse(l)),
    torn: parts[parts.length - 1] !== "" };
}
function append(id, type, data) {
  const p = sessionPath(id);
  fs.mkdirSync(dir(), { recursive: true });
  if (fs.existsSync(p)) {  // repair a torn tail before appending
    const text = fs.readFileSync(p, "utf8");
    fs.truncateSync(p, Buffer.byteLength(text.slice(0, text.lastIndexOf("\\n") + 1)));
  }
  const { events } = read(id);
  const prevHash = events.length ? events[events.length - 1].hash : null;
  const body = data && Array.isArray(data.messages)
    ? { ...data, messages: data.messages.map(encodePersistedMessage) } : data;
  const core = { type, timestamp: Date.now(), data: body };
  const hash = createHash("sha256")
    .update(`${prevHash || "genesis"}\\n${JSON.stringify(core)}`).digest("hex");
  const event = { ...core, prevHash, hash };
  fs.appendFileSync(p, `${JSON.stringify(event)}\\n`);
  const hook = _sessionScaleFaultHooks.beforeTranscriptFsync;
  if (process.env.CC_SESSION_SCALE_FAULT_INJECTION === "1" && hook) {
    hook({ type, event, filePath: p });
  }
  return { hash, event };
}
export function startSession(id, meta) {
  append(id, "session_start", { ...meta, generationId: randomUUID() });
  return id;
}
export function appendEvent(id, type, data) { return append(id, type, data); }
export function appendUserMessage(id, content) {
  if (content === "THROW") {
    const e = new RangeError("stand-in store refused"); e.code = "E_STANDIN"; throw e;
  }
  return append(id, "user_message", { role: "user", content });
}
export function appendAssistantMessage(id, content) {
  return append(id, "assistant_message", { role: "assistant", content });
}
export function appendToolCallCompact(id, { id: callId, tool, isError }) {
  return append(id, "tool_call", { id: callId, tool, is_error: Boolean(isError) });
}
export function appendCompactEvent(id, stats) { return append(id, "compact", stats); }
export function rebuildMessages(id) {
  let out = [];
  for (const e of read(id).events) {
    if (e.type === "compact") out = e.data.messages.map(decodeVerifiedPersistedMessage);
    else if (e.type === "user_message" || e.type === "assistant_message") out.push(e.data);
  }
  return out;
}
export function readVerifiedMessages(id) {
  if (read(id).torn) { const e = new Error("torn tail"); e.code = "UNVERIFIED"; throw e; }
  return rebuildMessages(id);
}
export function appendCompactEventIfMessagesMatch(id, stats, expected) {
  if (JSON.stringify(rebuildMessages(id)) !== JSON.stringify(expected)) {
    const e = new Error(`Session messages changed for ${id}`);
    e.code = "SESSION_REVISION_STALE";
    throw e;
  }
  return append(id, "compact", stats);
}
export function verifySession(id) {
  const { events, torn } = read(id);
  return { sessionId: id, status: "verified", chainedEvents: events.length, truncatedTail: torn,
    lastHash: events.length ? events[events.length - 1].hash : null };
}
"""

MODEL = {"provider": "openai", "model": "gpt-4o"}


def _call(cid: str, name: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "host prompt"},
    {"role": "user", "content": "fix the build"},
    {"role": "assistant", "content": "looking", "tool_calls": [_call("c1", "run_shell"),
                                                               _call("c2", "read_file")]},
    {"role": "tool", "tool_call_id": "c2", "content": '{"content": "x"}'},
    {"role": "tool", "tool_call_id": "c1", "content": '{"exitCode": 1, "stderr": "boom"}'},
    {"role": "assistant", "content": "first answer"},
    {"role": "assistant", "content": "fixed it"},
    {"role": "user", "content": "thanks"},
]


def legacy_tree(tmp: Path) -> Path:
    return write_tree(tmp / "legacy", {
        "packages/cli/package.json": '{"type": "module"}\n',
        "packages/cli/src/harness/prompt-compressor.js": COMPRESSOR_JS,
        "packages/cli/src/lib/session-message-provenance.js": PROVENANCE_JS,
        STORE: STORE_JS,
    })


def inputs_with(tmp: Path, scenarios: dict[str, dict[str, Any]]) -> Path:
    """Scenario inputs and a MANIFEST listing the compressor and the JSONL store only."""
    inputs = tmp / "inputs"
    for name, doc in scenarios.items():
        write_input(inputs, name, {"model": MODEL, "messages": MESSAGES, **doc})
    manifest = {"format": "legacy-capture-manifest/v1", "scenarios": [
        {"id": name, "surfaces": [{"file": "cli.compress.json"}, {"file": FILE}]}
        for name in scenarios]}
    (inputs / "MANIFEST.json").write_text(json.dumps(manifest), encoding="utf-8")
    return inputs


def capture(tmp: Path, scenarios: dict[str, dict[str, Any]], out: str = "out") -> Path:
    root = legacy_tree(tmp)
    code, stdout, stderr = run_capture(root, inputs_with(tmp, scenarios), tmp / out)
    assert code == 0, (stdout, stderr)
    return tmp / out


def events(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in doc["output"]["raw_jsonl_lines"]]


def test_projection_settlement_bindings_and_determinism(tmp_path: Path) -> None:
    out = capture(tmp_path, {"one": {}})
    doc = read_capture(out, "one", FILE)
    assert list(doc)[:6] == ["format", "scenario", "surface", "entry", "legacy_commit", "node"]
    assert (doc["surface"], doc["entry"], doc["legacy_commit"]) == ("cli", ENTRY, COMMIT)
    assert doc["options"]["sessionId"] == "cc-capture-one"
    assert doc["options"]["startSession"] == {"title": "one", "provider": "openai",
                                              "model": "gpt-4o"}
    assert doc["input_binding"]["compaction_source"] == "cli.compress.json output (per call)"
    assert doc["input_binding"]["messages"].startswith("input.messages (then input.followup")
    det = doc["determinism"]
    assert det["clock"]["base_ms"] == BASE_MS and det["clock"]["step_ms_per_call"] == 1
    assert det["random"]["seed_label"] == "cli.jsonl:one"
    out_ = doc["output"]
    assert out_["session_file"] == "$CHAINLESSCHAIN_HOME/sessions/cc-capture-one.jsonl"
    evs = events(doc)
    assert [e["timestamp"] for e in evs] == list(range(BASE_MS, BASE_MS + len(evs)))
    assert [(e["type"], e["data"]) for e in evs[1:-1]] == [
        ("user_message", {"role": "user", "content": "fix the build"}),
        ("tool_call_started", {"id": "c1", "tool": "run_shell"}),
        ("tool_call_started", {"id": "c2", "tool": "read_file"}),
        ("tool_call", {"id": "c2", "tool": "read_file", "is_error": False}),
        ("tool_call", {"id": "c1", "tool": "run_shell", "is_error": True}),
        ("assistant_message", {"role": "assistant", "content": "fixed it"}),
        ("user_message", {"role": "user", "content": "thanks"}),
    ]
    step = out_["steps"][0]
    assert step["persisted_events"][:2] == ["skipped:system", "user_message"]
    assert step["readVerifiedMessages_before"] == [
        {"role": "user", "content": "fix the build"},
        {"role": "assistant", "content": "fixed it"}, {"role": "user", "content": "thanks"}]
    compact = evs[-1]
    assert compact["type"] == "compact" and step["settlement"]["event"] == compact
    assert step["settlement_error"] is None
    src = read_capture(out, "one", "cli.compress.json")["output"]
    assert compact["data"] == {**src["stats"], "trigger": "manual", "messages": [
        {**src["messages"][0], "_cc_replay": {
            "schema": "chainlesschain.session-message-provenance/v1", "kind": "compact-summary"}},
        *src["messages"][1:]]}
    assert out_["readVerifiedMessages_provenance"] == ["compact-summary", None, None]
    assert out_["verifySession"]["chainedEvents"] == len(evs)
    assert doc["error"] is None
    inp = json.loads((out / "one" / "input.json").read_text(encoding="utf-8"))
    assert inp["provider_responses"] == []


def test_two_runs_are_byte_identical(tmp_path: Path) -> None:
    scenarios: dict[str, dict[str, Any]] = {
        "one": {}, "race": {"session_store": {"cas_race": True}},
        "crash": {"session_store": {"crash": {"after_event": 3, "truncate_bytes": 7}}}}
    one = capture(tmp_path, scenarios, "a")
    two = capture(tmp_path, scenarios, "b")
    assert tree_bytes(one) == tree_bytes(two)
    first = events(read_capture(one, "one", FILE))[0]
    assert first["data"]["generationId"] != events(read_capture(one, "race", FILE))[0][
        "data"]["generationId"]  # one seeded stream per scenario


def test_followups_compact_per_call(tmp_path: Path) -> None:
    follow = [[{"role": "user", "content": "and the tests"},
               {"role": "assistant", "content": "green"}, {"role": "user", "content": "ok"}]]
    out = capture(tmp_path, {"two": {"followup_messages": follow}})
    doc = read_capture(out, "two", FILE)
    src = read_capture(out, "two", "cli.compress.json")
    steps = doc["output"]["steps"]
    assert [s["phase"] for s in steps] == [0, 1]
    assert steps[1]["persisted_events"] == ["user_message", "assistant_message", "user_message"]
    compacts = [e for e in events(doc) if e["type"] == "compact"]
    assert [c["data"]["originalMessages"] for c in compacts] == [
        c["output"]["stats"]["originalMessages"] for c in src["calls"]]
    assert all(s["settlement_error"] is None for s in steps)


def test_replay_tagged_system_message_is_seeded_as_a_prior_compact(tmp_path: Path) -> None:
    tag = {"schema": "chainlesschain.session-message-provenance/v1", "kind": "compact-summary"}
    msgs = [MESSAGES[0], {"role": "system", "content": "[Conversation Summary] x",
                          "_cc_replay": tag}, *MESSAGES[1:]]
    out = capture(tmp_path, {"rep": {"messages": msgs}})
    doc = read_capture(out, "rep", FILE)
    assert doc["output"]["steps"][0]["persisted_events"][:3] == [
        "skipped:system", "compact(resume-fixture)", "user_message"]
    seeded = events(doc)[1]
    assert seeded["data"] == {"strategy": "summarize", "trigger": "resume-fixture",
                              "messages": [msgs[1]]}
    assert doc["output"]["steps"][0]["readVerifiedMessages_before_provenance"][0] == (
        "compact-summary")


def test_a_throw_of_the_store_is_recorded(tmp_path: Path) -> None:
    msgs = [{"role": "user", "content": "hi"}, {"role": "user", "content": "THROW"}]
    out = capture(tmp_path, {"bad": {"messages": msgs}})
    doc = read_capture(out, "bad", FILE)
    assert doc["error"] == {"name": "RangeError", "message": "stand-in store refused",
                            "code": "E_STANDIN"}
    assert [e["type"] for e in events(doc)] == ["session_start", "user_message"]
    manifest = json.loads((out / "MANIFEST.json").read_text(encoding="utf-8"))
    assert [e["file"] for e in manifest["errored"]] == [FILE]


def test_cas_race_answers_revision_stale(tmp_path: Path) -> None:
    race = {"event": {"type": "user_message", "data": {"role": "user", "content": "other"}}}
    out = capture(tmp_path, {"race": {"session_store": {"cas_race": race}}})
    doc = read_capture(out, "race", FILE)
    step = doc["output"]["steps"][0]
    assert step["concurrent_writer"] == race["event"]
    assert step["settlement"] is None
    assert step["settlement_error"]["code"] == "SESSION_REVISION_STALE"
    assert [e["type"] for e in events(doc)][-2:] == ["user_message", "user_message"]
    assert doc["output"]["rebuildMessages"][-1] == {"role": "user", "content": "other"}


@pytest.mark.parametrize("cut", [7, 10_000])
def test_crash_mid_write_then_restart(tmp_path: Path, cut: int) -> None:
    out = capture(tmp_path, {"crash": {"session_store": {
        "crash": {"after_event": 3, "truncate_bytes": cut}}}})
    doc = read_capture(out, "crash", FILE)
    step = doc["output"]["steps"][0]
    torn = step["persisted_events"].index("tool_call_started(torn by crash)")
    assert step["persisted_events"][:torn] == ["skipped:system", "user_message",
                                               "tool_call_started"]
    restart = step["restart"]
    assert restart["after_event"] == 3 and restart["torn_event"] == "tool_call_started"
    assert restart["bytes_lost"] == min(cut, restart["line_bytes"])
    assert restart["write_error"]["code"] == "ECAPTURECRASH"
    assert restart["verifySession"]["chainedEvents"] == 3
    assert restart["verifySession"]["truncatedTail"] is (cut < restart["line_bytes"])
    if cut < restart["line_bytes"]:
        assert restart["readVerifiedMessages"] is None
        assert restart["readVerifiedMessages_error"]["code"] == "UNVERIFIED"
    # the next append repaired the tail; the rest of the phase and its compaction followed
    types = [e["type"] for e in events(doc)]
    assert types.count("tool_call_started") == 1 and types[-1] == "compact"
    assert step["settlement_error"] is None
    assert doc["output"]["verifySession"]["truncatedTail"] is False
