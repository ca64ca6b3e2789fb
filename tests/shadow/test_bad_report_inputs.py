"""Bad-input corpus, reports read back: a structurally wrong ``report.json`` given to
``shadow report``, ``shadow diff`` (either side) or ``shadow run --previous`` is exit 2
naming the file and the JSON pointer of the first wrong field — never a traceback, never a
GO (the rules of tests/shadow/test_bad_inputs.py, whose plumbing this module uses)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from typing import Any

import pytest

from shadow.cli import main
from tests.shadow.bad_inputs import (  # noqa: F401  (_no_hang: the autouse fixture)
    BASE,
    CANARY,
    FIXTURES,
    WAIVER,
    Env,
    Refused,
    _drop,
    _no_hang,
    _set,
    check,
    make_env,
)


@pytest.fixture
def env(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Env:
    return make_env(tmp_path, monkeypatch)


# =========================================================================== reports read back


@pytest.fixture(scope="module")
def good_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("good")
    shutil.copytree(FIXTURES / BASE, base / "fx" / BASE)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(base)
        code = main(["run", "--fixtures", str(base / "fx"), "--out", str(base / "out"),
                     "--skip-determinism"])
    assert code in (0, 1)
    doc: dict[str, Any] = json.loads((base / "out" / "report.json").read_text("utf-8"))
    assert doc["divergences"], "the base report needs a divergence to break"
    return doc


REPORT_MUTATIONS: list[tuple[str, Callable[[Any], Any], str, str, bool]] = [
    # id, mutation, pointer, problem, entry-level (needs load_report -> validate_report);
    # "/|/schema": load_report names /schema for a document that is not an object
    ("array", lambda d: [d], "/|/schema", "shadow-report/v1", False),
    ("string", lambda d: CANARY, "/|/schema", "shadow-report/v1", False),
    ("schema-v2", _set("schema", value="shadow-report/v2"), "/schema", "shadow-report/v1",
     False),
    ("divergences-missing", _drop("divergences"), "/divergences", "'divergences'", False),
    ("divergences-string", _set("divergences", value=CANARY), "/divergences", "an array",
     True),
    ("divergence-number", _set("divergences", 0, value=3), "/divergences/0", "object", True),
    ("fixture-missing", _drop("divergences", 0, "fixture"), "/divergences/0/fixture",
     "'fixture'", True),
    ("surface-missing", _drop("divergences", 0, "surface"), "/divergences/0/surface",
     "'surface'", True),
    ("reason-code-missing", _drop("divergences", 0, "reason_code"),
     "/divergences/0/reason_code", "'reason_code'", True),
    ("fixture-number", _set("divergences", 0, "fixture", value=1), "/divergences/0/fixture",
     "string", True),
    ("reason-code-unregistered", _set("divergences", 0, "reason_code", value=CANARY),
     "/divergences/0/reason_code", "registered", True),
    ("severity-unknown", _set("divergences", 0, "severity", value="fatal"),
     "/divergences/0/severity", "blocking", True),
    ("item-ids-string", _set("divergences", 0, "item_ids", value=CANARY),
     "/divergences/0/item_ids", "an array", True),
    ("detail-array", _set("divergences", 0, "detail", value=[CANARY]),
     "/divergences/0/detail", "an object", True),
    ("totals-string", _set("totals", value="x"), "/totals", "an object", True),
    ("verdict-maybe", _set("verdict", value="MAYBE"), "/verdict", "GO or NO-GO", True),
    ("waiver-expires-bad", _set("waivers", value={"applied": [{**WAIVER, "expires": "x"}]}),
     "/waivers/applied/0/expires", "YYYY-MM-DD", True),
]


def _report_case(command: str, fn: Callable[[Any], Any], raw: bytes | None = None) -> Any:
    def build(e: Env, good: dict[str, Any]) -> list[str]:
        bad = e.tmp / "bad" / "report.json"
        bad.parent.mkdir()
        if raw is not None:
            bad.write_bytes(raw)
        else:
            doc = json.loads(json.dumps(good))
            got = fn(doc)
            bad.write_text(json.dumps(doc if got is None else got), encoding="utf-8")
        okp = e.tmp / "ok" / "report.json"
        okp.parent.mkdir()
        okp.write_text(json.dumps(good), encoding="utf-8")
        if command == "report":
            return ["report", str(bad), "--out", str(e.tmp / "rendered")]
        if command == "diff-new":
            return ["diff", str(okp), str(bad)]
        if command == "diff-old":
            return ["diff", str(bad), str(okp)]
        return e.run("--previous", str(bad))
    return build


REPORT_CASES: list[Any] = []
for _id, _fn, _ptr, _problem, _entry in REPORT_MUTATIONS:
    for _cmd in ("report", "diff-new", "diff-old", "previous"):
        REPORT_CASES.append(pytest.param(  # every command names the file
            _report_case(_cmd, _fn), Refused("report.json", _problem), _ptr,
            id=f"{_cmd}-{_id}"))
for _id, _raw_bytes, _problem, _ptr in (
        ("empty", b"", "well-formed JSON", "/"),
        ("truncated", b'{"schema": "shadow-rep', "well-formed JSON", "/"),
        ("bom", b"\xef\xbb\xbf{}", "byte-order mark", "/"),
        ("1e400", b'{"schema": "shadow-report/v1", "totals": {"x": 1e400}}', "finite",
         "/totals/x")):
    for _cmd in ("report", "diff-new", "previous"):
        REPORT_CASES.append(pytest.param(
            _report_case(_cmd, lambda d: None, _raw_bytes), Refused("report.json", _problem),
            _ptr, id=f"{_cmd}-json-{_id}"))


@pytest.mark.parametrize(("build", "expect", "pointer"), REPORT_CASES)
def test_bad_report_input(build: Any, expect: Refused, pointer: str, env: Env,
                          good_report: dict[str, Any],
                          capsys: pytest.CaptureFixture[str]) -> None:
    err = check(env, build(env, good_report), expect, capsys)
    assert any(f": {p}: expected" in err for p in pointer.split("|")), (pointer, err)


def test_the_report_corpus_is_large_enough() -> None:
    assert len(REPORT_CASES) >= 60
