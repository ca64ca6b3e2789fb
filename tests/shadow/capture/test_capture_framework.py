"""``shadow capture`` itself, over a stand-in CLI compressor: determinism, ``--only``, a
missing entry point, a timeout, a throwing entry point, a network attempt, the manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shadow.fixtures import load_corpus
from tests.shadow.capture.standin import (
    COMMIT,
    empty_rules,
    needs_node,
    read_capture,
    run_capture,
    tree_bytes,
    write_input,
    write_tree,
)

pytestmark = needs_node

# A stand-in PromptCompressor with the legacy shape: keeps the last 2 messages; what the
# last message says steers it (throw, hang, reach for the network, draw a random id).
COMPRESSOR = """
import { randomUUID } from "node:crypto";
export class PromptCompressor {
  constructor(o = {}) {
    this.maxMessages = o.maxMessages || 20; this.maxTokens = o.maxTokens || 8000;
    this._adaptive = !o.maxMessages; this._contextWindow = this._adaptive ? 1000 : null;
  }
  shouldAutoCompact(ms) { return ms.length > this.maxMessages; }
  async compress(ms) {
    const last = ms.length ? String(ms[ms.length - 1].content) : "";
    if (last === "THROW") {
      const e = new RangeError("stand-in refused"); e.code = "E_STANDIN"; throw e;
    }
    if (last === "HANG") { for (;;) {} }
    if (last === "NET") { try { await fetch("https://example.invalid/"); } catch (_e) {} }
    if (last === "DNS") {
      try { (await import("node:dns")).resolve4("example.invalid", () => {}); } catch (_e) {}
    }
    const kept = ms.slice(-2);
    return { messages: kept, stats: { strategy: "standin", at: Date.now(), id: randomUUID(),
      originalMessages: ms.length, compressedMessages: kept.length } };
  }
}
"""
PROVENANCE = """
export function decodeVerifiedPersistedMessage(m) { return m; }
export function getDurableSystemMessageProvenance(_m) { return null; }
"""
TREE = {"packages/cli/src/harness/prompt-compressor.js": COMPRESSOR,
        "packages/cli/src/lib/session-message-provenance.js": PROVENANCE,
        "packages/cli/package.json": '{"type": "module"}\n'}


def _messages(*contents: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": c} for c in contents]


def _inputs(tmp: Path, **scenarios: list[str]) -> Path:
    inputs = tmp / "inputs"
    for name, contents in scenarios.items():
        write_input(inputs, name, {"model": {"provider": "openai", "model": "gpt-4o"},
                                   "messages": _messages(*contents)})
    # a manifest listing only the CLI compressor, so the stand-in tree needs nothing else
    entries = [{"id": n, "surfaces": [{"file": "cli.compress.json"}]} for n in scenarios]
    (inputs / "MANIFEST.json").write_text(json.dumps({"scenarios": entries}), encoding="utf-8")
    return inputs


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "legacy", TREE)


def test_capture_writes_files_and_manifest(root: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, alpha=["a", "b", "c"], beta=["x"])
    code, out, _err = run_capture(root, inputs, tmp_path / "out")
    assert code == 0, out
    doc = read_capture(tmp_path / "out", "alpha", "cli.compress.json")
    assert doc["format"] == "legacy-capture/v1" and doc["legacy_commit"] == COMMIT
    assert [m["content"] for m in doc["output"]["messages"]] == ["b", "c"]
    assert doc["output"]["stats"]["at"] == 1787227200000  # the frozen fake clock
    assert doc["determinism"]["random"]["seed_label"] == "cli.compress:alpha"
    assert doc["diagnostics"]["input_message_count"] == 3
    manifest = json.loads((tmp_path / "out" / "MANIFEST.json").read_text(encoding="utf-8"))
    assert [s["id"] for s in manifest["scenarios"]] == ["alpha", "beta"]
    assert manifest["legacy_commit"] == COMMIT and manifest["errored"] == []
    inp = json.loads((tmp_path / "out" / "alpha" / "input.json").read_text(encoding="utf-8"))
    assert inp["provider_responses"] == []


def test_two_runs_are_byte_identical_and_seeded_per_scenario(root: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, alpha=["a", "b", "c"], beta=["x", "y", "z"])
    assert run_capture(root, inputs, tmp_path / "one")[0] == 0
    assert run_capture(root, inputs, tmp_path / "two")[0] == 0
    assert tree_bytes(tmp_path / "one") == tree_bytes(tmp_path / "two")
    ids = {s: read_capture(tmp_path / "one", s, "cli.compress.json")["output"]["stats"]["id"]
           for s in ("alpha", "beta")}
    assert ids["alpha"] != ids["beta"]  # one stream per (scenario, surface)


def test_only_captures_the_named_scenarios(root: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, alpha=["a", "b", "c"], beta=["x"])
    code, _out, _err = run_capture(root, inputs, tmp_path / "out", "--only", "beta")
    assert code == 0
    assert not (tmp_path / "out" / "alpha").exists()
    full = tmp_path / "full"
    run_capture(root, inputs, full)
    assert (tmp_path / "out" / "beta" / "cli.compress.json").read_bytes() == (
        full / "beta" / "cli.compress.json").read_bytes()
    code, _out, err = run_capture(root, inputs, tmp_path / "x", "--only", "gamma")
    assert code == 2 and "gamma" in err


def test_missing_entry_point_exits_2_naming_it(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "legacy", {"packages/cli/package.json": "{}\n"})
    inputs = _inputs(tmp_path, alpha=["a"])
    code, _out, err = run_capture(root, inputs, tmp_path / "out")
    assert code == 2
    assert "packages/cli/src/harness/prompt-compressor.js" in err
    assert not (tmp_path / "out").exists()


def test_a_throw_is_recorded_behaviour(root: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, alpha=["a", "THROW"])
    code, _out, _err = run_capture(root, inputs, tmp_path / "out")
    assert code == 0
    doc = read_capture(tmp_path / "out", "alpha", "cli.compress.json")
    assert doc["output"] is None
    assert doc["error"] == {"name": "RangeError", "message": "stand-in refused",
                            "code": "E_STANDIN"}
    manifest = json.loads((tmp_path / "out" / "MANIFEST.json").read_text(encoding="utf-8"))
    assert manifest["errored"][0]["scenario"] == "alpha"
    assert manifest["scenarios"][0]["surfaces"][0]["status"] == "error"


def test_a_timeout_is_a_capture_error_and_the_run_goes_on(root: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, alpha=["HANG"], beta=["a", "b"])
    code, out, _err = run_capture(root, inputs, tmp_path / "out", "--timeout", "3")
    assert code == 1
    assert "alpha/cli.compress.json: timeout" in out
    assert not (tmp_path / "out" / "alpha" / "cli.compress.json").exists()
    assert (tmp_path / "out" / "beta" / "cli.compress.json").is_file()
    manifest = json.loads((tmp_path / "out" / "MANIFEST.json").read_text(encoding="utf-8"))
    assert manifest["capture_errors"] == [{"scenario": "alpha", "file": "cli.compress.json",
                                           "problem": {"reason": "timeout", "seconds": 3.0}}]


def test_a_network_attempt_is_a_capture_error(root: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, alpha=["a", "NET"], beta=["a", "DNS"])
    code, out, _err = run_capture(root, inputs, tmp_path / "out")
    assert code == 1
    assert "alpha/cli.compress.json: network-attempt" in out
    assert "beta/cli.compress.json: network-attempt" in out  # a DNS query is one too
    assert not (tmp_path / "out" / "alpha" / "cli.compress.json").exists()


def test_repeat_learns_the_volatile_fields_into_unreviewed_rules(root: Path,
                                                                 tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, alpha=["a", "b", "c"], beta=["x", "y", "z"])
    rules = empty_rules(tmp_path / "noise.json")
    code, out, _err = run_capture(root, inputs, tmp_path / "out", "--repeat", "2",
                                  "--noise-rules", str(rules))
    assert code == 0, out
    doc = json.loads(rules.read_text(encoding="utf-8"))
    learned = {(r["surface"], r["path"]): r for r in doc["rules"]}
    # the stand-in's clock read and random id differ between the control runs; nothing else
    assert set(learned) == {("cli.compress", "/output/stats/at"),
                            ("cli.compress", "/output/stats/id")}
    assert all(r["reviewed"] is False and r["evidence"]["scenarios"] == 2
               for r in learned.values())
    assert "new (unreviewed): NR-001, NR-002" in out
    # the first run is the ordinary capture; the control run leaves nothing behind
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["MANIFEST.json", "alpha",
                                                                    "beta"]
    again = tmp_path / "again"
    run_capture(root, inputs, again)
    assert tree_bytes(again) == tree_bytes(tmp_path / "out")


def test_bad_repeat_or_timeout_is_a_usage_error(root: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, alpha=["a"])
    assert run_capture(root, inputs, tmp_path / "o", "--repeat", "0")[0] == 2
    assert run_capture(root, inputs, tmp_path / "o", "--timeout", "0")[0] == 2


def test_repeat_needs_a_rule_file_and_can_keep_its_control_run(root: Path,
                                                              tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, alpha=["a", "b"])
    code, _out, err = run_capture(root, inputs, tmp_path / "o", "--repeat", "2")
    assert code == 2 and "--noise-rules" in err and not (tmp_path / "o").exists()
    code, _out, err = run_capture(root, inputs, tmp_path / "o", "--repeat", "2",
                                  "--noise-rules", str(tmp_path / "typo.json"))
    assert code == 2 and "no such file" in err and not (tmp_path / "typo.json").exists()
    assert run_capture(root, inputs, tmp_path / "o", "--keep-repeats", str(tmp_path))[0] == 2
    code, _out, _err = run_capture(root, inputs, tmp_path / "o", "--repeat", "2",
                                   "--noise-rules", str(empty_rules(tmp_path / "n.json")),
                                   "--keep-repeats", str(tmp_path / "keep"))
    assert code == 0
    kept = read_capture(tmp_path / "keep" / "repeat-2", "alpha", "cli.compress.json")
    assert kept["determinism"]["random"]["seed_label"] == "cli.compress:alpha#repeat2"
    assert kept["determinism"]["clock"]["base_ms"] != 1787227200000


def test_out_is_replaced_whole_and_never_the_inputs(root: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, alpha=["a", "b"], beta=["x", "y"])
    out = tmp_path / "out"
    assert run_capture(root, inputs, out)[0] == 0
    assert run_capture(root, inputs, out, "--only", "beta")[0] == 0
    assert sorted(p.name for p in out.iterdir()) == ["MANIFEST.json", "beta"]  # no stale alpha
    for bad in (inputs, inputs / "alpha", tmp_path):
        code, _out, err = run_capture(root, inputs, bad)
        assert code == 2 and "--out" in err
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine", encoding="utf-8")
    assert run_capture(root, inputs, other)[0] == 2
    assert (other / "keep.txt").read_text(encoding="utf-8") == "mine"


def test_a_failed_capture_stays_listed_and_its_scenario_is_quarantined(
        root: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, alpha=["HANG"], beta=["a", "b"])
    out = tmp_path / "out"
    assert run_capture(root, inputs, out, "--timeout", "3")[0] == 1
    manifest = json.loads((out / "MANIFEST.json").read_text(encoding="utf-8"))
    [alpha] = [s for s in manifest["scenarios"] if s["id"] == "alpha"]
    assert alpha["surfaces"][0]["status"] == "capture-error"
    corpus = load_corpus(out)  # never silently left out: a quarantined file (NO-GO)
    [err] = corpus.quarantined
    assert err.source == "alpha/cli.compress.json" and "capture failed" in err.got
    assert not next(s for s in corpus.scenarios if s.name == "alpha").captures


def test_a_broken_input_is_a_clear_usage_error(root: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, alpha=["a"])
    (inputs / "alpha" / "input.json").write_bytes(b"\xef\xbb\xbf" + b'{"format": 1}')
    code, _out, err = run_capture(root, inputs, tmp_path / "o")
    assert code == 2 and "alpha" in err and "input.json" in err and "object" in err
    (inputs / "alpha" / "input.json").write_text("[1, 2]", encoding="utf-8")
    code, _out, err = run_capture(root, inputs, tmp_path / "o")
    assert code == 2 and "got list" in err


def test_a_classpath_without_the_plugin_classes_is_refused_up_front(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "legacy", {**TREE, "packages/jetbrains-plugin/src/main/java/"
                                            "com/chainlesschain/ide/ContextCenter.java": "//\n"})
    inputs = tmp_path / "inputs"
    write_input(inputs, "ide", {"context_center": {"candidates": []}})
    entries = [{"id": "ide", "surfaces": [{"file": "jetbrains.context-center.json"}]}]
    (inputs / "MANIFEST.json").write_text(json.dumps({"scenarios": entries}), encoding="utf-8")
    empty = tmp_path / "classes"
    empty.mkdir()
    code, _out, err = run_capture(root, inputs, tmp_path / "o", "--jetbrains-classpath",
                                  str(empty))
    assert code == 2 and "ContextCenter.class" in err and not (tmp_path / "o").exists()
