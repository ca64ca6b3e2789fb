"""Bad-input corpus: every broken input is a named error, never a GO, never a traceback.

Each case copies ONE small bundled scenario (``short-session``) into ``tmp_path``, breaks
one thing — a fixture file here (cassettes, waiver files and arguments:
test_bad_run_inputs.py; reports read back: test_bad_report_inputs.py) —
and runs the real CLI in-process (``shadow.cli.main``).  Every case asserts:

* the exit code is never 0 (never a GO), and nothing prints a traceback or an
  ``internal error``;
* exit 2 (input error) names the file or the argument and the problem on stderr;
* exit 1 (NO-GO) comes from the broken file: report.json holds a ``fixture.invalid``
  divergence for exactly that file with its JSON pointer in ``detail.pointer``;
* no value planted in a broken input (``CANARY``, shaped like a key) is ever echoed;
* nothing hangs: a FIFO is never opened (POSIX only), and an alarm fails a case that
  blocks.

A control case runs the unbroken copy and checks that it judges cleanly (no quarantine,
no blocking divergence), so every failure below is the broken input's.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from shadow.cli import main
from tests.shadow import test_bad_run_inputs as run_inputs
from tests.shadow.bad_inputs import (
    BASE,
    CANARY,
    CAP,
    Build,
    Corpus,
    Env,
    Expect,
    Quarantined,
    Refused,
    _drop,
    _mut,
    _no_hang,  # noqa: F401  (the autouse alarm)
    _quarantine_entries,
    _set,
    _symlink,
    check,
    make_env,
    posix_only,
)

case = Corpus()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return make_env(tmp_path, monkeypatch)

# =========================================================================== control


def test_the_unbroken_copy_judges_cleanly(env: Env, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    code = main(env.run())
    out, err = capsys.readouterr()
    assert code in (0, 1) and "Traceback" not in out + err  # 1: too few fixtures to gate
    report = json.loads((env.out / "report.json").read_text(encoding="utf-8"))
    assert report["totals"]["quarantined"] == 0 and report["totals"]["blocking"] == 0
    assert not _quarantine_entries(report)


# =========================================================================== fixture files

INPUT = f"{BASE}/input.json"
CAPTURE = f"{BASE}/{CAP}"


def _remove(name: str) -> Build:
    def build(e: Env) -> list[str]:
        (e.sc / name).unlink()
        return e.run()
    return build


def _as_dir(name: str) -> Build:
    def build(e: Env) -> list[str]:
        p = e.sc / name
        if p.exists():
            p.unlink()
        p.mkdir()
        return e.run()
    return build


def _as_fifo(name: str) -> Build:
    def build(e: Env) -> list[str]:
        p = e.sc / name
        if p.exists():
            p.unlink()
        os.mkfifo(p)
        return e.run()
    return build


def _dangling(name: str) -> Build:
    def build(e: Env) -> list[str]:
        p = e.sc / name
        if p.exists():
            p.unlink()
        _symlink(e.sc / "gone.json", p)
        return e.run()
    return build


def _loop(name: str) -> Build:
    def build(e: Env) -> list[str]:
        p = e.sc / name
        if p.exists():
            p.unlink()
        _symlink(e.sc / "other.json", p)
        _symlink(p, e.sc / "other.json")
        return e.run()
    return build


def _denied(name: str) -> Build:
    def build(e: Env) -> list[str]:
        real = os.open
        target = str(e.sc / name)

        def fake(path: Any, flags: int, *a: Any, **k: Any) -> int:
            if str(path) == target:
                raise PermissionError(13, "Permission denied")
            return real(path, flags, *a, **k)

        e.mp.setattr(os, "open", fake)
        return e.run()
    return build


def _folder_denied(e: Env) -> list[str]:
    real = pathlib.Path.iterdir
    target = e.sc

    def fake(self: Path) -> Iterator[Path]:
        if self == target:
            raise PermissionError(13, "Permission denied")
        return real(self)

    e.mp.setattr(pathlib.Path, "iterdir", fake)
    return e.run()


for _name, _src in (("input.json", INPUT), (CAP, CAPTURE)):
    _tag = "input" if _name == "input.json" else "capture"
    case(f"{_tag}-is-a-directory", _as_dir(_name), Quarantined(_src, ""))
    case(f"{_tag}-is-a-fifo", _as_fifo(_name), Quarantined(_src, ""), posix_only())
    case(f"{_tag}-dangling-symlink", _dangling(_name), Quarantined(_src, ""))
    case(f"{_tag}-symlink-loop", _loop(_name), Quarantined(_src, ""))
    case(f"{_tag}-permission-denied", _denied(_name), Quarantined(_src, ""))
case("input-missing", _remove("input.json"), Quarantined(INPUT, ""))
case("scenario-folder-unreadable", _folder_denied, Quarantined(BASE, ""))
case("extra-json-named-directory", _as_dir("cli.compress.extra.json"),
     Quarantined(f"{BASE}/cli.compress.extra.json", ""))
case("extra-json-fifo", _as_fifo("desktop.compress.more.json"),
     Quarantined(f"{BASE}/desktop.compress.more.json", ""), posix_only())


def _empty_scenario_beside(e: Env) -> list[str]:
    (e.fx / "empty-scenario").mkdir()
    (e.fx / "empty-scenario" / "README.md").write_text("notes\n", encoding="utf-8")
    return e.run()


def _only_captures_beside(e: Env) -> list[str]:
    shutil.copytree(e.sc, e.fx / "no-input")
    (e.fx / "no-input" / "input.json").unlink()
    return e.run()


def _top_fifo(e: Env) -> list[str]:
    os.mkfifo(e.fx / "stray")
    return e.run()


def _top_dangling(e: Env) -> list[str]:
    _symlink(e.fx / "nowhere", e.fx / "ghost-scenario")
    return e.run()


def _top_loop(e: Env) -> list[str]:
    _symlink(e.fx / "loop-b", e.fx / "loop-a")
    _symlink(e.fx / "loop-a", e.fx / "loop-b")
    return e.run()


case("scenario-folder-without-input", _empty_scenario_beside,
     Quarantined("empty-scenario/input.json", ""))
case("scenario-folder-with-captures-only", _only_captures_beside,
     Quarantined("no-input/input.json", ""))
case("top-level-fifo", _top_fifo, Quarantined("stray", ""), posix_only())
case("top-level-dangling-symlink", _top_dangling, Quarantined("ghost-scenario", ""))
case("top-level-symlink-loop", _top_loop, Quarantined("loop-a", ""))


def _fixtures_arg(kind: str) -> Build:
    def build(e: Env) -> list[str]:
        if kind == "empty":
            target = e.tmp / "empty-fx"
            target.mkdir()
        elif kind == "scenario":
            target = e.sc
        elif kind == "missing":
            target = e.tmp / "no-such-fx"
        else:
            target = e.tmp / "a-file"
            target.write_text("x", encoding="utf-8")
        return ["run", "--fixtures", str(target), "--out", str(e.out), "--skip-determinism"]
    return build


case("fixtures-arg-empty-folder", _fixtures_arg("empty"), Refused("empty-fx", "scenario"))
case("fixtures-arg-one-scenario-folder", _fixtures_arg("scenario"),
     Refused(BASE, "scenario folder"))
case("fixtures-arg-missing", _fixtures_arg("missing"), Refused("no-such-fx", "no such folder"))
case("fixtures-arg-a-file", _fixtures_arg("file"), Refused("a-file", "folder"))

# --------------------------------------------------------------------------- JSON level

RAW: dict[str, bytes] = {
    "empty-file": b"",
    "whitespace-only": b"  \n\t ",
    "truncated": b'{"format": "legacy-capture',
    "truncated-object": b'{"format": "x", "messages": [',
    "bom": b"\xef\xbb\xbf{}",
    "invalid-utf8": b'{"format": "\xff\xfe"}',
    "truncated-utf8": b'{"format": "\xe4\xbd"}',
    "utf16": '{"format": 1}'.encode("utf-16"),
    "nan": b'{"format": NaN}',
    "infinity": b'{"format": [Infinity]}',
    "minus-infinity": b'{"a": {"b": -Infinity}}',
    "duplicate-keys": b'{"format": "a", "format": "b"}',
    "deep-nesting": b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    "garbage": b"\x00\x01\x02 not json",
    "trailing-comma": b'{"format": "x",}',
    "single-quotes": b"{'format': 'x'}",
    "two-documents": b"{} {}",
    "null-document": b"null",
    "array-document": b"[]",
    "string-document": json.dumps(CANARY).encode(),
}


def _raw(name: str, data: bytes) -> Build:
    def build(e: Env) -> list[str]:
        e.write(name, data)
        return e.run()
    return build


for _name, _src in (("input.json", INPUT), (CAP, CAPTURE)):
    _tag = "input" if _name == "input.json" else "capture"
    for _kind, _data in RAW.items():
        case(f"{_tag}-json-{_kind}", _raw(_name, _data), Quarantined(_src, ""))

# numbers that are not finite doubles: named with their pointer
NUMBERS = {"1e400": "1e400", "minus-1e400": "-1e400", "1e999": "1.5e999",
           "int-400-digits": "9" * 400, "int-5000-digits": "1" + "0" * 5000}


def _number(name: str, path: tuple[Any, ...], raw: str) -> Build:
    def build(e: Env) -> list[str]:
        doc = e.read(name)
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = "__NUMBER__"
        e.write(name, json.dumps(doc).replace('"__NUMBER__"', raw).encode())
        return e.run()
    return build


for _kind, _raw_number in NUMBERS.items():
    case(f"input-number-{_kind}", _number("input.json", ("messages", 1, "weight"), _raw_number),
         Quarantined(INPUT, "/messages/1/weight"))
    case(f"capture-number-{_kind}", _number(CAP, ("output", "stats", "ratio"), _raw_number),
         Quarantined(CAPTURE, "/output/stats/ratio"))

# --------------------------------------------------------------------------- input.json


CALL = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
INPUT_CASES: list[tuple[str, Callable[[Any], Any], str]] = [
    ("format-missing", _drop("format"), "/format"),
    ("format-v2", _set("format", value="legacy-capture-input/v2"), "/format"),
    ("format-capture-format", _set("format", value="legacy-capture/v1"), "/format"),
    ("format-number", _set("format", value=1), "/format"),
    ("format-null", _set("format", value=None), "/format"),
    ("scenario-other-name", _set("scenario", value="another-scenario"), "/scenario"),
    ("scenario-missing", _drop("scenario"), "/scenario"),
    ("scenario-number", _set("scenario", value=7), "/scenario"),
    ("tags-missing", _drop("tags"), "/tags"),
    ("tags-string", _set("tags", value="smoke"), "/tags"),
    ("tags-item-number", _set("tags", value=[1]), "/tags/0"),
    ("description-number", _set("description", value=3), "/description"),
    ("messages-missing", _drop("messages"), "/messages"),
    ("messages-object", _set("messages", value={}), "/messages"),
    ("message-not-object", _set("messages", 0, value=42), "/messages/0"),
    ("message-string", _set("messages", 1, value=CANARY), "/messages/1"),
    ("role-missing", _drop("messages", 1, "role"), "/messages/1/role"),
    ("role-wizard", _set("messages", 1, "role", value="wizard"), "/messages/1/role"),
    ("role-canary", _set("messages", 1, "role", value=CANARY), "/messages/1/role"),
    ("role-number", _set("messages", 0, "role", value=1), "/messages/0/role"),
    ("role-uppercase", _set("messages", 1, "role", value="User"), "/messages/1/role"),
    ("content-number", _set("messages", 1, "content", value=5), "/messages/1/content"),
    ("content-object", _set("messages", 1, "content", value={"t": CANARY}),
     "/messages/1/content"),
    ("content-array", _set("messages", 0, "content", value=[CANARY]), "/messages/0/content"),
    ("pinned-string", _set("messages", 1, "pinned", value="yes"), "/messages/1/pinned"),
    ("tool-call-id-number", _set("messages", 1, "tool_call_id", value=7),
     "/messages/1/tool_call_id"),
    ("tool-calls-object", _set("messages", 1, "tool_calls", value={}), "/messages/1/tool_calls"),
    ("tool-call-string", _set("messages", 1, "tool_calls", value=["call"]),
     "/messages/1/tool_calls/0"),
    ("tool-call-id-missing", _set("messages", 1, "tool_calls",
                                  value=[{"function": {"name": "x"}}]),
     "/messages/1/tool_calls/0/id"),
    ("tool-call-function-missing", _set("messages", 1, "tool_calls", value=[{"id": "c"}]),
     "/messages/1/tool_calls/0/function"),
    ("tool-call-name-number", _set("messages", 1, "tool_calls",
                                   value=[{**CALL, "function": {"name": 3}}]),
     "/messages/1/tool_calls/0/function/name"),
    ("message-name-number", _set("messages", 1, "name", value=9), "/messages/1/name"),
    ("cc-replay-string", _set("messages", 0, "_cc_replay", value="x"),
     "/messages/0/_cc_replay"),
    ("provider-responses-missing", _drop("provider_responses"), "/provider_responses"),
    ("provider-responses-object", _set("provider_responses", value={}), "/provider_responses"),
    ("provider-response-number", _set("provider_responses", value=[1]),
     "/provider_responses/0"),
    ("provider-response-call-string", _set("provider_responses", value=[{"call": "one"}]),
     "/provider_responses/0/call"),
    ("provider-response-call-zero", _set("provider_responses", value=[{"call": 0}]),
     "/provider_responses/0/call"),
    ("provider-response-call-bool", _set("provider_responses", value=[{"call": True}]),
     "/provider_responses/0/call"),
    ("provider-response-surface", _set("provider_responses",
                                       value=[{"surface": "mainframe", "call": 1}]),
     "/provider_responses/0/surface"),
    ("provider-response-error-string", _set("provider_responses", value=[{"error": "boom"}]),
     "/provider_responses/0/error"),
    ("model-string", _set("model", value="gpt-4o"), "/model"),
    ("model-name-number", _set("model", "model", value=4), "/model/model"),
    ("cli-thresholds-array", _set("cli_thresholds", value=[]), "/cli_thresholds"),
    ("memory-ops-object", _set("memory_ops", value={}), "/memory_ops"),
    ("memory-op-missing-op", _set("memory_ops", value=[{"args": {}}]), "/memory_ops/0/op"),
    ("memory-op-number", _set("memory_ops", value=[5]), "/memory_ops/0"),
    ("memory-op-ref-number", _set("memory_ops", value=[{"op": "get", "ref": 1}]),
     "/memory_ops/0/ref"),
    ("context-center-array", _set("context_center", value=[]), "/context_center"),
    ("context-center-no-candidates", _set("context_center", value={"tokenBudget": 5}),
     "/context_center/candidates"),
    ("context-candidate-number", _set("context_center", value={"candidates": [3]}),
     "/context_center/candidates/0"),
    ("context-candidate-kind-number",
     _set("context_center", value={"candidates": [{"kind": 1, "content": "x"}]}),
     "/context_center/candidates/0/kind"),
    ("context-pinned-ids-objects",
     _set("context_center", value={"candidates": [], "pinnedIds": [{}]}),
     "/context_center/pinnedIds/0"),
    ("context-token-budget-string",
     _set("context_center", value={"candidates": [], "tokenBudget": "big"}),
     "/context_center/tokenBudget"),
    ("followup-object", _set("followup_messages", value={}), "/followup_messages"),
    ("followup-batch-string", _set("followup_messages", value=["x"]), "/followup_messages/0"),
    ("followup-role", _set("followup_messages", value=[[{"role": "wizard"}]]),
     "/followup_messages/0/0/role"),
]
for _id, _fn, _ptr in INPUT_CASES:
    case(f"input-{_id}", _mut("input.json", _fn), Quarantined(INPUT, _ptr))

# --------------------------------------------------------------------------- captures


def _msgs_then(bad: Any) -> Callable[[Any], None]:
    """Two valid output messages appended, then ``bad`` at index 3."""
    def fn(doc: Any) -> None:
        msgs = doc["output"]["messages"]
        msgs.append(dict(msgs[1]))
        msgs.append(bad)
    return fn


CAPTURE_CASES: list[tuple[str, str, Callable[[Any], Any], str]] = [
    ("format-missing", CAP, _drop("format"), "/format"),
    ("format-input-format", CAP, _set("format", value="legacy-capture-input/v1"), "/format"),
    ("format-array", CAP, _set("format", value=["legacy-capture/v1"]), "/format"),
    ("scenario-other", CAP, _set("scenario", value="someone-else"), "/scenario"),
    ("surface-unknown", CAP, _set("surface", value="mainframe"), "/surface"),
    ("surface-not-the-prefix", CAP, _set("surface", value="desktop"), "/surface"),
    ("surface-missing", CAP, _drop("surface"), "/surface"),
    ("entry-number", CAP, _set("entry", value=12), "/entry"),
    ("entry-missing", CAP, _drop("entry"), "/entry"),
    ("options-missing", CAP, _drop("options"), "/options"),
    ("options-array", CAP, _set("options", value=[]), "/options"),
    ("env-flags-missing", CAP, _drop("env_flags"), "/env_flags"),
    ("env-flags-string", CAP, _set("env_flags", value="CC_X=1"), "/env_flags"),
    ("input-binding-string", CAP, _set("input_binding", value="messages"), "/input_binding"),
    ("output-missing", CAP, _drop("output"), "/output"),
    ("output-42", CAP, _set("output", value=42), "/output"),
    ("output-string", CAP, _set("output", value=CANARY), "/output"),
    ("output-array", CAP, _set("output", value=[]), "/output"),
    ("output-true", CAP, _set("output", value=True), "/output"),
    ("output-null-no-error", CAP, _set("output", value=None), "/output"),
    ("output-empty-object", CAP, _set("output", value={}), "/output/messages"),
    ("output-messages-object", CAP, _set("output", "messages", value={}), "/output/messages"),
    ("output-messages-string", CAP, _set("output", "messages", value=CANARY),
     "/output/messages"),
    ("output-message-number", CAP, _set("output", "messages", 0, value=7),
     "/output/messages/0"),
    ("output-role-wizard", CAP, _msgs_then({"role": "wizard", "content": CANARY}),
     "/output/messages/3/role"),
    ("output-role-missing", CAP, _msgs_then({"content": "x"}), "/output/messages/3/role"),
    ("output-content-number", CAP, _set("output", "messages", 1, "content", value=1),
     "/output/messages/1/content"),
    ("output-tool-calls-string", CAP, _set("output", "messages", 1, "tool_calls", value="x"),
     "/output/messages/1/tool_calls"),
    ("output-tool-call-no-id", CAP,
     _set("output", "messages", 1, "tool_calls", value=[{"function": {"name": "x"}}]),
     "/output/messages/1/tool_calls/0/id"),
    ("output-stats-array", CAP, _set("output", "stats", value=[]), "/output/stats"),
    ("error-string", CAP, _set("error", value="boom"), "/error"),
    ("error-missing", CAP, _drop("error"), "/error"),
    ("error-no-message", CAP, _set("error", value={"name": "Error"}), "/error/message"),
    ("error-message-object", CAP, _set("error", value={"message": {}}), "/error/message"),
    ("output-provenance-object", CAP, _set("output_provenance", value={}),
     "/output_provenance"),
    ("calls-object", CAP, _set("calls", value={}), "/calls"),
    ("calls-item-string", CAP, _set("calls", value=["x"]), "/calls/0"),
    ("calls-output-42", CAP, _set("calls", value=[{"output": 42, "error": None}]),
     "/calls/0/output"),
    ("diagnostics-array", CAP, _set("diagnostics", value=[1]), "/diagnostics"),
    ("desktop-strategy-number", "desktop.compress.json",
     _set("output", "strategy", value=7), "/output/strategy"),
    ("desktop-messages-missing", "desktop.compress.json", _drop("output", "messages"),
     "/output/messages"),
    ("context-engineering-metadata-array", "desktop.context-engineering.json",
     _set("output", "metadata", value=[]), "/output/metadata"),
    ("context-engineering-role", "desktop.context-engineering.json",
     _set("output", "messages", 0, "role", value="developer"), "/output/messages/0/role"),
    ("jsonl-rebuild-missing", "cli.jsonl-session.json", _drop("output", "rebuildMessages"),
     "/output/rebuildMessages"),
    ("jsonl-lines-numbers", "cli.jsonl-session.json",
     _set("output", "raw_jsonl_lines", value=[1]), "/output/raw_jsonl_lines/0"),
    ("jsonl-verify-null", "cli.jsonl-session.json", _set("output", "verifySession", value=None),
     "/output/verifySession"),
    ("jsonl-read-verified-role", "cli.jsonl-session.json",
     _set("output", "readVerifiedMessages", value=[{"role": "wizard"}]),
     "/output/readVerifiedMessages/0/role"),
    ("jsonl-steps-strings", "cli.jsonl-session.json", _set("output", "steps", value=["x"]),
     "/output/steps/0"),
]
for _id, _file, _fn, _ptr in CAPTURE_CASES:
    case(f"capture-{_id}", _mut(_file, _fn), Quarantined(f"{BASE}/{_file}", _ptr))


def _new_capture(name: str, surface: str, output: Any) -> Build:
    """A capture of another surface's kind dropped into the scenario."""
    def build(e: Env) -> list[str]:
        doc = e.read(CAP)
        doc.update(surface=surface, entry=f"{surface}/entry.js#build", output=output,
                   options={}, env_flags={})
        doc.pop("output_provenance", None)
        e.write(name, doc)
        return e.run()
    return build


for _id, _name, _surface, _output, _ptr in (
    ("chips-missing", "vscode.context-center.json", "vscode", {"schema": "x"}, "/output/chips"),
    ("chip-id-number", "vscode.context-center.json", "vscode",
     {"chips": [{"id": 5, "status": "included"}]}, "/output/chips/0/id"),
    ("chip-status-missing", "jetbrains.context-center.json", "jetbrains",
     {"chips": [{"id": "ctx_1"}]}, "/output/chips/0/status"),
    ("chip-pinned-string", "jetbrains.context-center.json", "jetbrains",
     {"chips": [{"id": "ctx_1", "status": "included", "pinned": "no"}]},
     "/output/chips/0/pinned"),
    ("memory-ops-missing", "session-core.memory.json", "session-core", {"events": []},
     "/output/ops"),
    ("memory-op-index-string", "session-core.memory.json", "session-core",
     {"ops": [{"index": "0", "op": "add"}]}, "/output/ops/0/index"),
    ("memory-op-index-negative", "session-core.memory.json", "session-core",
     {"ops": [{"index": -1, "op": "add"}]}, "/output/ops/0/index"),
    ("memory-op-name-missing", "session-core.memory.json", "session-core",
     {"ops": [{"index": 0}]}, "/output/ops/0/op"),
    ("provider-compaction-usage-string", "cli.provider-compaction.json", "cli",
     {"messages": [], "stats": {}, "usageEvent": "x"}, "/output/usageEvent"),
    ("raw-wire-variant-output-42", "cli.compress.raw-wire.json", "cli", 42, "/output"),
):
    case(f"capture-{_id}", _new_capture(_name, _surface, _output),
         Quarantined(f"{BASE}/{_name}", _ptr))


def _contradiction(key: str, value: Any) -> Build:
    """A second capture of the same call (surface, entry, options, env_flags,
    input_binding) recording something else."""
    def build(e: Env) -> list[str]:
        doc = e.read(CAP)
        doc[key] = value if not callable(value) else value(doc.get(key))
        e.write("cli.compress.zz-again.json", doc)
        return e.run()
    return build


case("capture-contradictory-output",
     _contradiction("output", lambda o: {**o, "messages": o["messages"][:1]}),
     Quarantined(f"{BASE}/cli.compress.zz-again.json", "/output"))
case("capture-contradictory-error", _contradiction("error", {"message": "x", "name": "E"}),
     Quarantined(f"{BASE}/cli.compress.zz-again.json", "/error"))
case("capture-contradictory-calls",
     _contradiction("calls", lambda _o: [{"output": None, "error": {"message": "x"}}]),
     Quarantined(f"{BASE}/cli.compress.zz-again.json", "/calls"))

# =========================================================================== the run


@pytest.mark.parametrize(("build", "expect"), case.cases)
def test_bad_input(build: Build, expect: Expect, env: Env,
                   capsys: pytest.CaptureFixture[str]) -> None:
    check(env, build(env), expect, capsys)


def test_the_corpus_is_large_enough() -> None:
    """Fixture files here, cassettes, waivers and arguments in test_bad_run_inputs.py
    (reports read back: tests/shadow/test_bad_report_inputs.py)."""
    assert len(case.cases) + len(run_inputs.case.cases) >= 120
