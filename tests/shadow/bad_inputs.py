"""The bad-input corpus's harness (tests/shadow/test_bad_inputs.py,
test_bad_run_inputs.py, test_bad_report_inputs.py, test_bad_inputs_cli.py).

Each case copies ONE small bundled scenario (``short-session``) into ``tmp_path``, breaks
one thing and runs the real CLI in-process (``shadow.cli.main``); :func:`check` asserts
the corpus's rules (see test_bad_inputs.py).  Importing :func:`_no_hang` into a test
module makes its alarm apply there.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from shadow.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
RECORDINGS = ROOT / "recordings"
BASE = "short-session"
CAP = "cli.compress.json"
CASSETTE = "provider-summary-ok.yaml"
CANARY = "sk-proj-Q7wX2mZ9CANARYrT4kLp8vN3bH6jY1"
POSIX = os.name == "posix"


# --------------------------------------------------------------------------- plumbing


@dataclass
class Env:
    tmp: Path
    fx: Path  # the corpus root
    sc: Path  # the scenario folder
    out: Path
    mp: pytest.MonkeyPatch

    def run(self, *extra: str) -> list[str]:
        return ["run", "--fixtures", str(self.fx), "--out", str(self.out),
                "--skip-determinism", *extra]

    def read(self, name: str) -> Any:
        return json.loads((self.sc / name).read_text(encoding="utf-8"))

    def write(self, name: str, value: Any) -> None:
        data = value if isinstance(value, bytes) else json.dumps(value).encode("utf-8")
        (self.sc / name).write_bytes(data)


@dataclass(frozen=True)
class Quarantined:
    """NO-GO because this file was quarantined at this pointer."""

    source: str  # relative to the corpus root
    pointer: str


@dataclass(frozen=True)
class Refused:
    """Exit 2 naming ``name`` (a file's trailing path or an argument) and ``problem``."""

    name: str
    problem: str


Build = Callable[[Env], list[str]]
Expect = Quarantined | Refused


class Hang(Exception):
    pass


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def alarm(signum: int, frame: Any) -> None:
        raise Hang("the run blocked")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(20)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def make_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    fx = tmp_path / "fx"
    shutil.copytree(FIXTURES / BASE, fx / BASE)
    monkeypatch.chdir(tmp_path)  # hermetic: no ./recordings, nothing written elsewhere
    return Env(tmp_path, fx, fx / BASE, tmp_path / "out", monkeypatch)


def _quarantine_entries(report: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for d in report["divergences"]:
        if d["reason_code"] == "fixture.invalid":
            src = d["surface"] if d["surface"] == d["fixture"] else f"{d['fixture']}/{d['surface']}"
            out.append((src, d["detail"].get("pointer", "")))
    return out


def check(env: Env, argv: list[str], expect: Expect,
          capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``argv`` and assert the module's rules; returns stderr."""
    code = main(argv)
    out, err = capsys.readouterr()
    text = out + err
    assert code != 0, "a broken input must never be a GO"
    assert "Traceback" not in text and "internal error" not in text, text
    assert CANARY not in text
    if isinstance(expect, Refused):
        assert code == 2, (code, text[-2000:])
        assert err.startswith("shadow: error: ") or err.startswith("usage:") or \
            "error:" in err, err
        assert expect.name in err, (expect.name, err)
        assert expect.problem in err, (expect.problem, err)
        return err
    assert code == 1, (code, text[-2000:])
    report_text = (env.out / "report.json").read_text(encoding="utf-8")
    assert CANARY not in report_text
    report = json.loads(report_text)
    assert report["verdict"] == "NO-GO"
    assert (expect.source, expect.pointer) in _quarantine_entries(report), (
        expect, _quarantine_entries(report))
    assert report["totals"]["quarantined"] >= 1
    # the run names each quarantined file on stdout too
    assert f"quarantined: {expect.source} at {expect.pointer or '/'}" in out, out
    return err


class Corpus:
    """One test module's cases: ``case(id, build, expect, *marks)`` adds one; ``cases`` is
    what ``pytest.mark.parametrize(("build", "expect"), …)`` takes."""

    def __init__(self) -> None:
        self.cases: list[Any] = []

    def __call__(self, id_: str, build: Build, expect: Expect, *marks: Any) -> None:
        self.cases.append(pytest.param(build, expect, id=id_, marks=marks))


def posix_only(reason: str = "POSIX file types") -> Any:
    return pytest.mark.skipif(not POSIX, reason=reason)


def _symlink(target: str | Path, link: Path) -> None:
    try:
        os.symlink(target, link)
    except (OSError, NotImplementedError):
        pytest.skip("symlinks are not available here")


def _mut(name: str, fn: Callable[[Any], Any]) -> Build:
    def build(e: Env) -> list[str]:
        doc = e.read(name)
        got = fn(doc)
        e.write(name, doc if got is None else got)
        return e.run()
    return build


def _set(*path: Any, value: Any) -> Callable[[Any], None]:
    def fn(doc: Any) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return fn


def _drop(*path: Any) -> Callable[[Any], None]:
    def fn(doc: Any) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return fn


WAIVER = {"id": "W-1", "reason_code": "digest.mismatch", "fixture": "*",
          "surface": "desktop.context-engineering", "owner": "desktop-team",
          "reason": "prompt cleaning", "expires": "2099-01-01"}
