"""Bad-input corpus, part two: arguments checked before any replay, gate and evidence
inputs, kernel calls and a closed stdout — never a GO, never a traceback, the file or
argument and the problem named (the same rules as tests/shadow/test_bad_inputs.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shadow.cli import main
from tests.shadow.bad_inputs import (  # noqa: F401  (_no_hang: the autouse fixture)
    CANARY,
    FIXTURES,
    Env,
    Refused,
    _no_hang,
    check,
    make_env,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return make_env(tmp_path, monkeypatch)


def _xml(e: Env, name: str, text: str) -> str:
    p = e.tmp / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def _file(e: Env, name: str, text: str = "x") -> str:
    p = e.tmp / name
    p.write_text(text, encoding="utf-8")
    return str(p)


ARGS: list[tuple[str, Any, Refused]] = [
    ("jobs-zero", lambda e: e.run("--jobs", "0"), Refused("--jobs", "at least 1")),
    ("jobs-negative", lambda e: e.run("--jobs", "-3"), Refused("--jobs", "at least 1")),
    ("fixtures-empty-string", lambda e: ["run", "--fixtures", "", "--out", str(e.out)],
     Refused("--fixtures", "selects nothing")),
    ("fixtures-blank", lambda e: ["run", "--fixtures", "   ", "--out", str(e.out)],
     Refused("--fixtures", "selects nothing")),
    ("out-empty-string", lambda e: ["run", "--fixtures", str(e.fx), "--out", ""],
     Refused("--out", "empty")),
    ("out-is-a-file", lambda e: ["run", "--fixtures", str(e.fx), "--out",
                                 _file(e, "afile"), "--skip-determinism"],
     Refused("afile", "a file")),
    ("out-holds-other-files", lambda e: (e.out.mkdir(), (e.out / "mine.txt").write_text(
        "x", encoding="utf-8"), e.run())[-1], Refused("out", "not replaced")),
    ("out-under-a-file", lambda e: ["run", "--fixtures", str(e.fx), "--out",
                                    str(Path(_file(e, "plain")) / "sub"),
                                    "--skip-determinism"], Refused("plain", "not writable")),
    ("surface-matches-nothing", lambda e: e.run("--surface", "no-such-*"),
     Refused("--surface", "selects no capture")),
    ("surface-typo", lambda e: e.run("--surface", "cli.compres"),
     Refused("--surface", "selects no capture")),
    ("record-candidate-is-a-file", lambda e: e.run("--record-candidate", _file(e, "rc")),
     Refused("--record-candidate", "a folder")),
    ("record-candidate-under-a-file", lambda e: e.run(
        "--record-candidate", str(Path(_file(e, "rc2")) / "x")),
     Refused("--record-candidate", "got a file")),
    ("attach-not-xml", lambda e: e.run("--attach", _xml(e, "a.xml", "not xml")),
     Refused("a.xml", "well-formed JUnit XML")),
    ("attach-html", lambda e: e.run("--attach", _xml(e, "b.xml", "<html></html>")),
     Refused("b.xml", "<testsuites>")),
    ("attach-no-testcase", lambda e: e.run("--attach", _xml(
        e, "c.xml", "<testsuites><testsuite name='s'/></testsuites>")),
     Refused("c.xml", "at least one <testcase>")),
    ("attach-truncated", lambda e: e.run("--attach", _xml(
        e, "d.xml", "<testsuites><testsuite name='s'><testcase")),
     Refused("d.xml", "parse error")),
    ("attach-a-folder", lambda e: e.run("--attach", str(e.tmp)),
     Refused("JUnit XML", "no such file")),
    ("inventory-not-json", lambda e: e.run("--inventory", _file(e, "inv.json", "{")),
     Refused("inv.json", "JSON")),
    ("inventory-wrong-schema", lambda e: e.run("--inventory", _file(
        e, "inv2.json", json.dumps({"schema": "nope"}))), Refused("inv2.json", "expected")),
    ("waivers-missing", lambda e: e.run("--waivers", str(e.tmp / "none.json")),
     Refused("none.json", "")),
    ("policy-missing", lambda e: e.run("--policy", str(e.tmp / "nopolicy.json")),
     Refused("nopolicy.json", "")),
    ("phase-minus-one", lambda e: e.run("--phase", "-1"), Refused("--phase", "")),
    ("phase-text", lambda e: e.run("--phase", "two"), Refused("--phase", "")),
    ("unknown-option", lambda e: e.run("--no-such-option"), Refused("unrecognized", "")),
    ("candidate-empty-folder", lambda e: (Path(e.tmp / "emptycand").mkdir(),
                                          e.run("--candidate", str(e.tmp / "emptycand")))[-1],
     Refused("emptycand", "")),
]


@pytest.mark.parametrize(("build", "expect"), [pytest.param(b, x, id=i) for i, b, x in ARGS])
def test_a_bad_argument_is_refused_before_any_replay(
        build: Any, expect: Refused, env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[int] = []
    import shadow.run as run_mod

    real = run_mod.map_corpus
    env.mp.setattr(run_mod, "map_corpus", lambda *a, **k: calls.append(1) or real(*a, **k))
    check(env, build(env), expect, capsys)
    assert not calls, "the argument must be refused before the replay"
    assert not (env.out / "report.json").exists()


# --- the gate's inputs --------------------------------------------------------------------


@pytest.fixture(scope="module")
def evidence_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("ev")
    shutil.copytree(FIXTURES / "short-session", base / "fx" / "short-session")
    assert main(["run", "--fixtures", str(base / "fx"), "--out", str(base / "out"),
                 "--skip-determinism"]) in (0, 1)
    return base / "out"


def _edit_evidence(edit: Any) -> Any:
    def build(e: Env, src: Path) -> list[str]:
        dst = e.tmp / "ev"
        shutil.copytree(src, dst)
        doc = json.loads((dst / "evidence.json").read_text(encoding="utf-8"))
        out = edit(doc, dst)
        if isinstance(out, (bytes, dict, list)):
            (dst / "evidence.json").write_bytes(out if isinstance(out, bytes)
                                                else json.dumps(out).encode("utf-8"))
        return ["gate", "--phase", "1", str(dst)]
    return build


GATE: list[tuple[str, Any, Refused]] = [
    ("not-json", _edit_evidence(lambda d, p: b"{"), Refused("evidence.json", "JSON")),
    ("empty", _edit_evidence(lambda d, p: b""), Refused("evidence.json", "JSON")),
    ("an-array", _edit_evidence(lambda d, p: []), Refused("evidence.json", "/schema")),
    ("other-schema", _edit_evidence(lambda d, p: {**d, "schema": "x"}),
     Refused("evidence.json", "/schema")),
    ("no-cases", _edit_evidence(lambda d, p: {k: v for k, v in d.items() if k != "cases"}),
     Refused("evidence.json", "/cases")),
    ("edited-verdict", _edit_evidence(lambda d, p: {**d, "run": {**d["run"], "verdict": "GO"}}),
     Refused("evidence.json", "/evidence_digest")),
    ("edited-case", _edit_evidence(lambda d, p: {**d, "cases": d["cases"][1:]}),
     Refused("evidence.json", "/evidence_digest")),
    ("edited-identity", _edit_evidence(
        lambda d, p: {**d, "identity": {**d["identity"], "commit": "x"}}),
     Refused("evidence.json", "/identity_digest")),
    ("relabelled", _edit_evidence(lambda d, p: {**d, "environment": {
        **d["environment"], "platform": "windows" if d["environment"]["platform"] != "windows"
        else "linux"}}), Refused("evidence.json", "/evidence_digest")),
    ("report-missing", _edit_evidence(lambda d, p: (p / "report.json").unlink()),
     Refused("report.json", "no such file")),
    ("report-edited", _edit_evidence(lambda d, p: (p / "report.json").write_text(
        json.dumps({**json.loads((p / "report.json").read_text(encoding="utf-8")),
                    "divergences": []}), encoding="utf-8")),
     Refused("report.json", "/divergences")),
    ("report-not-json", _edit_evidence(lambda d, p: (p / "report.json").write_text(
        "[", encoding="utf-8")), Refused("report.json", "JSON")),
    ("folder-without-evidence", lambda e, src: ["gate", "--phase", "1", str(e.tmp)],
     Refused("evidence.json", "none found")),
    ("no-such-path", lambda e, src: ["gate", "--phase", "1", str(e.tmp / "nowhere")],
     Refused("nowhere", "no such path")),
    ("bad-phase", lambda e, src: ["gate", "--phase", "6", str(src)], Refused("--phase", "")),
    ("bad-platform", lambda e, src: ["gate", "--phase", "1", "--platforms", "beos", str(src)],
     Refused("--platforms", "beos")),
    ("bad-today", lambda e, src: ["gate", "--phase", "1", "--today", "tomorrow", str(src)],
     Refused("--today", "YYYY-MM-DD")),
    ("bad-release-matrix", lambda e, src: ["gate", "--phase", "1", "--release-matrix",
                                           _file(e, "m.json", "{"), str(src)],
     Refused("m.json", "JSON")),
]


@pytest.mark.parametrize(("build", "expect"), [pytest.param(b, x, id=i) for i, b, x in GATE])
def test_bad_gate_input(build: Any, expect: Refused, env: Env, evidence_dir: Path,
                        capsys: pytest.CaptureFixture[str]) -> None:
    check(env, build(env, evidence_dir), expect, capsys)


# --- kernel calls ----------------------------------------------------------------------------

KERNEL: list[tuple[str, str, bytes]] = [
    ("not-json", "digest", b"{"),
    ("empty", "digest", b""),
    ("bom", "digest", b"\xef\xbb\xbf{}"),
    ("bad-utf8", "digest", b'{"value": "\xff"}'),
    ("nan", "digest", b'{"value": NaN}'),
    ("huge-number", "digest", b'{"value": 1e400}'),
    ("duplicate-key", "digest", b'{"value": 1, "value": 2}'),
    ("an-array", "digest", b"[1, 2]"),
    ("unknown-method", "no_such_method", b"{}"),
    ("plan-missing-fields", "plan_context", b"{}"),
    ("plan-wrong-types", "plan_context", b'{"items": 7, "budget": "lots"}'),
    ("compact-missing-fields", "compact_context", b"{}"),
    ("recall-wrong-types", "recall_memory", b'{"memory": [], "request": 3}'),
    ("deep-nesting", "digest", b'{"value": ' + b"[" * 400 + b"]" * 400 + b"}"),
    ("canary-in-bad-field", "plan_context",
     b'{"items": "' + CANARY.encode() + b'", "budget": {}}'),
]


@pytest.mark.parametrize(("method", "payload"), [pytest.param(m, p, id=i)
                                                 for i, m, p in KERNEL])
def test_a_bad_kernel_call_is_a_typed_error(method: str, payload: bytes,
                                            capsysbinary: pytest.CaptureFixture[bytes],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    class _In:
        buffer = io.BytesIO(payload)

    monkeypatch.setattr(sys, "stdin", _In())
    code = main(["kernel", "call", method])
    out, err = capsysbinary.readouterr()
    text = (out + err).decode("utf-8", errors="replace")
    assert code == 2, text
    assert "Traceback" not in text and "internal error" not in text
    assert CANARY not in text
    doc = json.loads(out.decode("utf-8"))
    assert "error" in doc and doc["error"].get("code"), doc


# --- a closed stdout ---------------------------------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="a pipe closed by `head` (POSIX shell)")
@pytest.mark.parametrize("argv", [["codes"], ["diff", "{out}", "{out}"], ["report", "{out}"],
                                  ["gate", "--phase", "0", "--platforms", "linux,windows",
                                   "{out}"]])
def test_a_closed_pipe_ends_quietly_with_the_verdicts_exit_code(
        argv: list[str], evidence_dir: Path) -> None:
    args = [a.replace("{out}", str(evidence_dir)) for a in argv]
    proc = subprocess.Popen([sys.executable, "-m", "shadow", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(1)
    proc.stdout.close()  # like `| head -c1`
    err = proc.stderr.read().decode("utf-8", errors="replace")
    proc.stderr.close()
    code = proc.wait(timeout=60)
    assert "Traceback" not in err and "internal error" not in err and "Broken pipe" not in err
    assert code in (0, 1), (code, err)
    if args[0] == "gate":
        assert code == 1  # two platforms required, one present: NO-GO, even into a closed pipe
