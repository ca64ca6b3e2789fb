"""The IDE Context Center twins' drivers (``vscode-context-center.cjs``,
``JetBrainsCapture.java``) and the MANIFEST's ``ide_fixture.selfcheck``, over stand-ins.

The stand-ins have the legacy entry points' shapes: ``buildContextCenter({...})`` in
``packages/vscode-extension/src/context-center.js`` and ``ContextCenter.build(workspaceId,
candidates, tokenBudget, pinnedIds, removedIds, refreshedIds)`` with a ``MiniJson``
(parse/stringify) in ``com.chainlesschain.ide``, compiled here with javac.  Both include
chips in order while they fit the budget; a workspace id ``THROW`` makes them throw.  The
JavaScript one counts characters, the Java one UTF-8 bytes, so a non-ASCII case tells the
twins apart.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from shadow.capture.runner import BASE_MS, IDE_CASES, IDE_CASES_FILE, REPEAT_SHIFT_MS
from tests.shadow.capture.standin import (
    COMMIT,
    JAVAC,
    needs_java,
    needs_node,
    read_capture,
    repeat_args,
    run_capture,
    second_run,
    tree_bytes,
    write_input,
    write_tree,
)

pytestmark = [needs_node, needs_java]

VSC = "packages/vscode-extension/src/context-center.js"
JB_DIR = "packages/jetbrains-plugin/src/main/java/com/chainlesschain/ide"

CONTEXT_CENTER_JS = """
function buildContextCenter({ workspaceId = null, candidates = [], tokenBudget = 4096,
  pinnedIds = [] } = {}) {
  if (workspaceId === "THROW") {
    const e = new RangeError("stand-in refused"); e.code = "E_STANDIN"; throw e;
  }
  let remaining = tokenBudget;
  const chips = candidates.map((c) => {
    const tokens = Math.ceil(String(c.content).length / 4);
    const included = tokens <= remaining;
    if (included) remaining -= tokens;
    return { id: c.id, status: included ? "included" : "excluded-budget", tokens };
  });
  const out = { workspaceId, budget: { limitTokens: tokenBudget, remainingTokens: remaining },
    chips, pinned: pinnedIds };
  if (workspaceId === "CLOCK") { out.at = Date.now(); out.nonce = Math.random(); }
  return out;
}
module.exports = { buildContextCenter };
"""

CONTEXT_CENTER_JAVA = """
package com.chainlesschain.ide;

import java.nio.charset.StandardCharsets;
import java.util.*;

public final class ContextCenter {
    public static final int DEFAULT_TOKEN_BUDGET = 4096;

    public static Map<String, Object> build(String workspaceId,
            List<Map<String, Object>> candidates, int tokenBudget, List<String> pinnedIds,
            List<String> removedIds, List<String> refreshedIds) {
        if ("THROW".equals(workspaceId)) throw new IllegalStateException("stand-in refused");
        long remaining = tokenBudget;
        List<Object> chips = new ArrayList<>();
        for (Map<String, Object> c : candidates == null
                ? List.<Map<String, Object>>of() : candidates) {
            long tokens = (String.valueOf(c.get("content"))
                    .getBytes(StandardCharsets.UTF_8).length + 3) / 4;
            boolean included = tokens <= remaining;
            if (included) remaining -= tokens;
            Map<String, Object> chip = new LinkedHashMap<>();
            chip.put("id", c.get("id"));
            chip.put("status", included ? "included" : "excluded-budget");
            chip.put("tokens", tokens);
            chips.add(chip);
        }
        Map<String, Object> budget = new LinkedHashMap<>();
        budget.put("limitTokens", (long) tokenBudget);
        budget.put("remainingTokens", remaining);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("workspaceId", workspaceId);
        out.put("budget", budget);
        out.put("chips", chips);
        out.put("pinned", pinnedIds);
        return out;
    }
}
"""

MINI_JSON_JAVA = r"""
package com.chainlesschain.ide;

import java.util.*;

public final class MiniJson {
    private final String s;
    private int i;

    private MiniJson(String s) { this.s = s; }

    public static Object parse(String s) {
        MiniJson p = new MiniJson(s);
        Object v = p.value();
        p.ws();
        if (p.i != s.length()) throw new IllegalArgumentException("trailing JSON");
        return v;
    }

    private void ws() { while (i < s.length() && s.charAt(i) <= ' ') i++; }

    private Object value() {
        ws();
        char c = s.charAt(i);
        if (c == '{') {
            Map<String, Object> m = new LinkedHashMap<>();
            i++; ws();
            if (s.charAt(i) == '}') { i++; return m; }
            while (true) {
                ws(); String k = str(); ws(); i++;
                m.put(k, value()); ws();
                if (s.charAt(i++) == '}') return m;
            }
        }
        if (c == '[') {
            List<Object> a = new ArrayList<>();
            i++; ws();
            if (s.charAt(i) == ']') { i++; return a; }
            while (true) { a.add(value()); ws(); if (s.charAt(i++) == ']') return a; }
        }
        if (c == '"') return str();
        for (String lit : new String[] {"true", "false", "null"}) {
            if (s.startsWith(lit, i)) {
                i += lit.length();
                return lit.equals("null") ? null : Boolean.valueOf(lit);
            }
        }
        int start = i;
        while (i < s.length() && "+-.eE0123456789".indexOf(s.charAt(i)) >= 0) i++;
        String n = s.substring(start, i);
        return n.matches("-?\\d+") ? (Object) Long.valueOf(n) : (Object) Double.valueOf(n);
    }

    private String str() {
        StringBuilder b = new StringBuilder();
        i++;
        while (true) {
            char c = s.charAt(i++);
            if (c == '"') return b.toString();
            if (c != '\\') { b.append(c); continue; }
            char e = s.charAt(i++);
            if (e == 'u') { b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; }
            else b.append(e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r'
                    : e == 'b' ? '\b' : e == 'f' ? '\f' : e);
        }
    }

    public static String stringify(Object v) {
        if (v == null) return "null";
        if (v instanceof String) {
            StringBuilder b = new StringBuilder("\"");
            for (char c : ((String) v).toCharArray()) {
                if (c == '"' || c == '\\') b.append('\\').append(c);
                else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                else b.append(c);
            }
            return b.append('"').toString();
        }
        if (v instanceof Map) {
            StringJoiner j = new StringJoiner(",", "{", "}");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                j.add(stringify(String.valueOf(e.getKey())) + ":" + stringify(e.getValue()));
            }
            return j.toString();
        }
        if (v instanceof List) {
            StringJoiner j = new StringJoiner(",", "[", "]");
            for (Object o : (List<?>) v) j.add(stringify(o));
            return j.toString();
        }
        return String.valueOf(v);
    }
}
"""


def _case(name: str, inp: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "input": inp, "expected": expected}


def _result(workspace: str, limit: int, remaining: int,
            chips: list[tuple[str, str, int]]) -> dict[str, Any]:
    return {"workspaceId": workspace, "budget": {"limitTokens": limit,
                                                 "remainingTokens": remaining},
            "chips": [{"id": i, "status": s, "tokens": t} for i, s, t in chips],
            "pinned": []}


# The shared cases: both twins agree; only the character-counting (JavaScript) one meets a
# non-ASCII expectation; both throw.
CASES = [
    _case("fits then overflows", {"workspaceId": "ws", "tokenBudget": 3, "candidates": [
        {"id": "a", "content": "abcdefgh"}, {"id": "b", "content": "abcdefgh"}]},
        _result("ws", 3, 1, [("a", "included", 2), ("b", "excluded-budget", 2)])),
    _case("non-ASCII counted as characters",
          {"workspaceId": "ws", "tokenBudget": 1,
           "candidates": [{"id": "e", "content": "\u00e9\u00e9\u00e9"}]},
          _result("ws", 1, 0, [("e", "included", 1)])),
    _case("a throw is no match", {"workspaceId": "THROW", "tokenBudget": 1, "candidates": []},
          _result("THROW", 1, 1, [])),
]


@pytest.fixture()
def legacy(tmp_path: Path) -> tuple[Path, Path]:
    """The stand-in tree and the classes javac built from its Java sources."""
    root = write_tree(tmp_path / "legacy", {
        VSC: CONTEXT_CENTER_JS,
        IDE_CASES: json.dumps(CASES, indent=2, ensure_ascii=False) + "\n",
        f"{JB_DIR}/ContextCenter.java": CONTEXT_CENTER_JAVA,
        f"{JB_DIR}/MiniJson.java": MINI_JSON_JAVA,
    })
    classes = tmp_path / "jbcp"
    assert JAVAC is not None
    sources = [str(root / JB_DIR / f) for f in ("ContextCenter.java", "MiniJson.java")]
    subprocess.run([JAVAC, "-encoding", "UTF-8", "-d", str(classes), *sources],
                   check=True, capture_output=True, timeout=300)
    return root, classes


def _inputs(tmp: Path, **centers: dict[str, Any]) -> Path:
    inputs = tmp / "inputs"
    for name, cc in centers.items():
        write_input(inputs, name, {"provider_responses": [], "context_center": cc})
    return inputs


def _capture(legacy: tuple[Path, Path], inputs: Path, out: Path, *extra: str) -> dict[str, Any]:
    root, classes = legacy
    code, stdout, stderr = run_capture(root, inputs, out, "--jetbrains-classpath", str(classes),
                                       *extra)
    assert code == 0, (stdout, stderr)
    doc = json.loads((out / "MANIFEST.json").read_text(encoding="utf-8"))
    assert isinstance(doc, dict) and "capture_errors" not in doc, doc.get("capture_errors")
    return doc


CENTER = {"workspaceId": "ws-1", "tokenBudget": 5, "pinnedIds": ["p1"],
          "candidates": [{"id": "x", "content": "0123456789"}, {"id": "y", "content": "abcd"},
                         {"id": "z", "content": "0123456789"}]}


def test_both_twins_recorded(legacy: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    manifest = _capture(legacy, _inputs(tmp_path, center=CENTER), out)
    vs = read_capture(out, "center", "vscode.context-center.json")
    jb = read_capture(out, "center", "jetbrains.context-center.json")
    expected = {"workspaceId": "ws-1", "budget": {"limitTokens": 5, "remainingTokens": 1},
                "chips": [{"id": "x", "status": "included", "tokens": 3},
                          {"id": "y", "status": "included", "tokens": 1},
                          {"id": "z", "status": "excluded-budget", "tokens": 3}],
                "pinned": ["p1"]}
    assert vs["output"] == expected and jb["output"] == expected
    assert vs["error"] is None and jb["error"] is None
    assert list(vs) == ["format", "scenario", "surface", "entry", "legacy_commit", "node",
                        "options", "input_binding", "env_flags", "determinism", "output",
                        "error"]
    assert list(jb) == list(vs)
    assert (vs["surface"], vs["entry"]) == ("vscode", f"{VSC}#buildContextCenter")
    assert (jb["surface"], jb["entry"]) == ("jetbrains",
                                            f"{JB_DIR}/ContextCenter.java#ContextCenter.build")
    assert vs["legacy_commit"] == jb["legacy_commit"] == COMMIT
    assert vs["node"] == jb["node"] == manifest["node"] and vs["node"].startswith("v")
    assert vs["options"] == {} and vs["env_flags"] == {} and jb["env_flags"] == {}
    assert vs["input_binding"] == {
        "argument": "input.context_center (verbatim, single object argument)"}
    assert "ContextCenterTest" in jb["input_binding"]["arguments"]
    assert set(jb["options"]) == {"runtime", "java"}
    assert vs["determinism"]["clock"]["base_ms"] == BASE_MS
    assert vs["determinism"]["random"]["seed_label"] == "vscode.context-center:center"
    assert jb["determinism"] == {"note": "pure function; no clock or randomness"}
    # the file is JSON.stringify(value, null, 2) and a newline, in both twins
    for f in ("vscode.context-center.json", "jetbrains.context-center.json"):
        text = (out / "center" / f).read_text(encoding="utf-8")
        assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"
    entry = manifest["scenarios"][0]
    assert entry["kind"] == "ide" and entry["provider_exchanges"] == 0
    assert [(s["file"], s["status"]) for s in entry["surfaces"]] == [
        ("vscode.context-center.json", "ok"), ("jetbrains.context-center.json", "ok")]
    inp = json.loads((out / "center" / "input.json").read_text(encoding="utf-8"))
    assert inp["context_center"] == CENTER and inp["provider_responses"] == []


def test_jetbrains_arguments_bound_as_the_plugin_test(legacy: tuple[Path, Path],
                                                      tmp_path: Path) -> None:
    out = tmp_path / "out"
    center = {"workspaceId": 42, "tokenBudget": "7", "pinnedIds": [1, None, "p"],
              "candidates": [{"id": "x", "content": "abc"}]}
    _capture(legacy, _inputs(tmp_path, bound=center), out)
    jb = read_capture(out, "bound", "jetbrains.context-center.json")["output"]
    vs = read_capture(out, "bound", "vscode.context-center.json")["output"]
    assert jb["workspaceId"] == "42"                       # stringOrNull
    assert jb["budget"]["limitTokens"] == 4096             # not a Number: the default
    assert jb["pinned"] == ["1", "null", "p"]              # strings(...)
    assert vs["workspaceId"] == 42 and vs["budget"]["limitTokens"] == "7"  # verbatim
    assert vs["pinned"] == [1, None, "p"]


def test_a_throw_is_recorded_behaviour(legacy: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    manifest = _capture(legacy, _inputs(tmp_path, boom={"workspaceId": "THROW"}), out)
    vs = read_capture(out, "boom", "vscode.context-center.json")
    jb = read_capture(out, "boom", "jetbrains.context-center.json")
    assert vs["output"] is None and jb["output"] is None
    assert vs["error"] == {"name": "RangeError", "message": "stand-in refused",
                           "code": "E_STANDIN"}
    assert jb["error"] == {"name": "IllegalStateException", "message": "stand-in refused",
                           "code": None}
    assert [(e["file"], e["error"]["name"]) for e in manifest["errored"]] == [
        ("vscode.context-center.json", "RangeError"),
        ("jetbrains.context-center.json", "IllegalStateException")]
    assert [s["status"] for s in manifest["scenarios"][0]["surfaces"]] == ["error", "error"]


def test_deterministic_and_repeat_shifted(legacy: tuple[Path, Path], tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, clock={**CENTER, "workspaceId": "CLOCK"}, center=CENTER)
    _capture(legacy, inputs, tmp_path / "a")
    _capture(legacy, inputs, tmp_path / "b", *repeat_args(tmp_path))
    first = tree_bytes(tmp_path / "a")
    second = tree_bytes(tmp_path / "b")
    assert first == second
    vs = read_capture(tmp_path / "a", "clock", "vscode.context-center.json")
    assert vs["output"]["at"] == BASE_MS                   # the fake clock, frozen
    again = read_capture(second_run(tmp_path), "clock", "vscode.context-center.json")
    assert again["output"]["at"] == BASE_MS + REPEAT_SHIFT_MS
    assert again["determinism"]["random"]["seed_label"] == "vscode.context-center:clock#repeat2"
    assert again["output"]["nonce"] != vs["output"]["nonce"]
    rel = "clock/jetbrains.context-center.json"              # a pure function: unchanged
    assert (second_run(tmp_path) / rel).read_bytes() == first[rel]


def test_selfcheck_block(legacy: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    manifest = _capture(legacy, _inputs(tmp_path, center=CENTER), out)
    root, _classes = legacy
    assert (out / IDE_CASES_FILE).read_bytes() == (root / IDE_CASES).read_bytes()
    assert manifest["ide_fixture"] == {
        "file": IDE_CASES_FILE, "source": f"{IDE_CASES}@{COMMIT}",
        "selfcheck": [
            {"name": "fits then overflows", "vscode_matches_expected": True,
             "jetbrains_matches_expected": True},
            {"name": "non-ASCII counted as characters", "vscode_matches_expected": True,
             "jetbrains_matches_expected": False},
            {"name": "a throw is no match", "vscode_matches_expected": False,
             "jetbrains_matches_expected": False},
        ]}
    assert list(manifest)[-2:] == ["ide_fixture", "capture"]
