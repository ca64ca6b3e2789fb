"""The language-agnostic entry point: `shadow kernel call` / `shadow kernel batch`."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from shadow import cli, kernel_rpc

PEER_EXAMPLE = b'{"value":{"b":1,"a":[1,2]},"domain":"x","profile":"peer"}'


def run_cli(argv: list[str], stdin: bytes, monkeypatch: pytest.MonkeyPatch,
            capsysbinary: pytest.CaptureFixture[bytes]) -> tuple[int, bytes, bytes]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = cli.main(argv)
    out, err = capsysbinary.readouterr()
    return code, out, err


def test_call_digest_peer_matches_peer_formula(monkeypatch, capsysbinary) -> None:
    import hashlib

    code, out, err = run_cli(["kernel", "call", "digest"], PEER_EXAMPLE, monkeypatch, capsysbinary)
    assert code == 0, err
    result = json.loads(out)
    assert result["canonicalJson"] == '{"a":[1,2],"b":1}'
    expected = hashlib.sha256(("x\u0000" + result["canonicalJson"]).encode()).hexdigest()
    assert result["digest"] == "sha256:" + expected


def test_call_subprocess_entry_point() -> None:
    proc = subprocess.run([sys.executable, "-m", "shadow", "kernel", "call", "digest"],
                          input=PEER_EXAMPLE, capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["digest"].startswith("sha256:")


@pytest.mark.parametrize("stdin", [b"{", b"\xef\xbb\xbf{}", b"\xff\xfe", b'{"value": NaN}'])
def test_call_bad_input_is_typed_error_without_traceback(stdin, monkeypatch, capsysbinary) -> None:
    code, out, err = run_cli(["kernel", "call", "digest"], stdin, monkeypatch, capsysbinary)
    assert code == 2
    payload = json.loads(out)
    assert payload["error"]["code"] == "invalid_input"
    assert payload["error"]["details"]["file"] == "<stdin>"
    assert b"Traceback" not in out + err


def test_unknown_method(monkeypatch, capsysbinary) -> None:
    code, out, _ = run_cli(["kernel", "call", "nope"], b"{}", monkeypatch, capsysbinary)
    assert code == 2
    assert json.loads(out)["error"]["code"] == "unknown_method"


def test_batch_thousand_lines_with_bad_lines_in_order() -> None:
    lines = []
    for i in range(1000):
        if i % 97 == 13:
            lines.append("{not json")
        elif i % 101 == 7:
            lines.append(json.dumps({"id": i, "method": "digest", "params": {"nope": 1}}))
        else:
            lines.append(json.dumps({"id": i, "method": "digest",
                                     "params": {"value": {"i": i}, "domain": "d"}}))
    out = [json.loads(x) for x in kernel_rpc.batch(lines)]
    assert len(out) == 1000
    for i, rec in enumerate(out):
        if i % 97 == 13:
            assert rec["id"] is None and rec["error"]["code"] == "invalid_input"
            assert rec["error"]["details"]["file"] == f"<stdin>:{i + 1}"
        elif i % 101 == 7:
            assert rec["id"] == i and rec["error"]["code"] == "invalid_input"
        else:
            assert rec["id"] == i and rec["result"]["digest"].startswith("sha256:")


def test_batch_via_cli(monkeypatch, capsysbinary) -> None:
    stdin = b'{"id":"a","method":"digest","params":{"value":1}}\n\n{"id":"b","method":"x"}\n'
    code, out, _ = run_cli(["kernel", "batch"], stdin, monkeypatch, capsysbinary)
    assert code == 0
    recs = [json.loads(x) for x in out.splitlines()]
    assert [r["id"] for r in recs] == ["a", "b"]
    assert "result" in recs[0] and recs[1]["error"]["code"] == "unknown_method"
