"""Bad-input corpus, part two: cassettes, waiver files and arguments.

The rules, the harness and the control case are test_bad_inputs.py's
(:mod:`tests.shadow.bad_inputs`): never a GO, never a traceback, exit 2 naming the file or
argument and the problem, no echoed canary, no hang.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.shadow.bad_inputs import (
    CANARY,
    CASSETTE,
    RECORDINGS,
    WAIVER,
    Build,
    Corpus,
    Env,
    Expect,
    Refused,
    _no_hang,  # noqa: F401  (the autouse alarm)
    _symlink,
    check,
    make_env,
    posix_only,
)

case = Corpus()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return make_env(tmp_path, monkeypatch)

# =========================================================================== cassettes


def _cassette(name: str, data: bytes | str | Callable[[str], str] | None,
              kind: str = "file") -> Build:
    def build(e: Env) -> list[str]:
        rec = e.tmp / "rec"
        rec.mkdir(exist_ok=True)
        shutil.copy(RECORDINGS / CASSETTE, rec / CASSETTE)
        p = rec / name
        if kind == "dir":
            p.mkdir()
        elif kind == "fifo":
            os.mkfifo(p)
        elif kind == "dangling":
            _symlink(rec / "nowhere.yaml", p)
        elif callable(data):
            p.write_text(data((RECORDINGS / CASSETTE).read_text(encoding="utf-8")),
                         encoding="utf-8")
        elif data is not None:
            p.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        return e.run("--recordings", str(rec))
    return build


def _yaml_doc(fn: Callable[[dict[str, Any]], None]) -> Callable[[str], str]:
    import yaml

    def edit(text: str) -> str:
        doc = yaml.safe_load(text)
        fn(doc)
        return yaml.safe_dump(doc)
    return edit


def _interaction(fn: Callable[[dict[str, Any]], None]) -> Callable[[str], str]:
    return _yaml_doc(lambda d: fn(d["interactions"][0]))


C = f"rec/{CASSETTE}"
CASSETTE_CASES: list[tuple[str, str, Any, str, Expect]] = [
    ("bad-yaml", CASSETTE, "interactions: [\n  - {", "file", Refused(C, "well-formed YAML")),
    ("tab-indented-yaml", CASSETTE, "version: 1\n\tinteractions: []\n", "file",
     Refused(C, "well-formed YAML")),
    ("empty", CASSETTE, b"", "file", Refused(C, "an empty file")),
    ("whitespace-only", CASSETTE, "\n\n   \n", "file", Refused(C, "an empty file")),
    ("invalid-utf8", CASSETTE, b"version: 1\nx: \xff\xfe\n", "file", Refused(C, "UTF-8")),
    ("bom", CASSETTE, b"\xef\xbb\xbfversion: 1\n", "file", Refused(C, "byte-order mark")),
    ("not-a-mapping-list", CASSETTE, "- 1\n- 2\n", "file", Refused(C, "a YAML mapping")),
    ("not-a-mapping-scalar", CASSETTE, f"{CANARY}\n", "file", Refused(C, "a YAML mapping")),
    ("version-2", CASSETTE, _yaml_doc(lambda d: d.update(version=2)), "file",
     Refused(C, "version 1")),
    ("version-string", CASSETTE, _yaml_doc(lambda d: d.update(version="1")), "file",
     Refused(C, "version 1")),
    ("version-missing", CASSETTE, _yaml_doc(lambda d: d.pop("version")), "file",
     Refused(C, "version 1")),
    ("metadata-missing", CASSETTE, _yaml_doc(lambda d: d.pop("metadata")), "file",
     Refused(C, "/metadata")),
    ("format-unknown", CASSETTE,
     _yaml_doc(lambda d: d["metadata"].update(format="vcrpy-plain/v9")), "file",
     Refused(C, "shadow-provider-cassette/v1")),
    ("format-missing", CASSETTE, _yaml_doc(lambda d: d["metadata"].pop("format")), "file",
     Refused(C, "/metadata/format")),
    ("another-scenario", CASSETTE,
     _yaml_doc(lambda d: d["metadata"].update(scenario="provider-failure")), "file",
     Refused(C, "/metadata/scenario")),
    ("interactions-mapping", CASSETTE, _yaml_doc(lambda d: d.update(interactions={})), "file",
     Refused(C, "/interactions")),
    ("interaction-string", CASSETTE, _yaml_doc(lambda d: d.update(interactions=[CANARY])),
     "file", Refused(C, "/interactions/0")),
    ("request-body-plain", CASSETTE, _interaction(lambda i: i["request"].update(body=CANARY)),
     "file", Refused(C, "/interactions/0/request/body")),
    ("request-unscrubbed-header", CASSETTE,
     _interaction(lambda i: i["request"]["headers"].update(authorization=[CANARY])), "file",
     Refused(C, "scrubbed headers")),
    ("request-extra-field", CASSETTE,
     _interaction(lambda i: i["request"].update(secret=CANARY)), "file",
     Refused(C, "/interactions/0/request")),
    ("status-code-string", CASSETTE,
     _interaction(lambda i: i["response"]["status"].update(code="200")), "file",
     Refused(C, "/interactions/0/response/status/code")),
    ("status-code-99", CASSETTE,
     _interaction(lambda i: i["response"]["status"].update(code=99)), "file",
     Refused(C, "HTTP status code")),
    ("response-body-missing", CASSETTE, _interaction(lambda i: i["response"].pop("body")),
     "file", Refused(C, "/interactions/0/response/body")),
    ("unknown-fault", CASSETTE,
     _interaction(lambda i: i["response"]["headers"].update(
         {"x-shadow-replay-fault": ["teleport"]})), "file",
     Refused(C, "x-shadow-replay-fault")),
    ("yml-name", "short-session.yml", "version: 1\n", "file", Refused("short-session.yml",
                                                                      ".yaml")),
    ("directory-named-yaml", "short-session.yaml", None, "dir",
     Refused("short-session.yaml", "a directory")),
    ("dangling-symlink", "short-session.yaml", None, "dangling",
     Refused("short-session.yaml", "dangling symlink")),
]
for _id, _name, _data, _kind, _expect in CASSETTE_CASES:
    case(f"cassette-{_id}", _cassette(_name, _data, _kind), _expect)
case("cassette-fifo", _cassette("short-session.yaml", None, "fifo"),
     Refused("short-session.yaml", "a FIFO"), posix_only())


def _recordings_arg(kind: str) -> Build:
    def build(e: Env) -> list[str]:
        p = e.tmp / "rec-arg"
        if kind == "file":
            p.write_text("x", encoding="utf-8")
        return e.run("--recordings", str(p))
    return build


case("recordings-arg-missing", _recordings_arg("missing"), Refused("rec-arg", "folder"))
case("recordings-arg-a-file", _recordings_arg("file"), Refused("rec-arg", "folder"))

# =========================================================================== waivers



def _waivers(data: Any, kind: str = "file") -> Build:
    def build(e: Env) -> list[str]:
        p = e.tmp / "waivers.json"
        if kind == "dir":
            p.mkdir()
        elif kind == "fifo":
            os.mkfifo(p)
        elif kind == "file":
            p.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
        return e.run("--waivers", str(p))
    return build


def _wdoc(*ws: dict[str, Any], schema: str = "shadow-waivers/v1") -> dict[str, Any]:
    return {"schema": schema, "waivers": list(ws)}


W = "waivers.json"
WAIVER_CASES: list[tuple[str, Any, str, Expect]] = [
    ("star", _wdoc({**WAIVER, "reason_code": "*"}), "file",
     Refused(W, "/waivers/0/reason_code")),
    ("star-dot-star", _wdoc({**WAIVER, "reason_code": "*.*"}), "file",
     Refused(W, "never-waivable")),
    ("char-class-every-code", _wdoc({**WAIVER, "reason_code": "[a-z]*"}), "file",
     Refused(W, "every reason code")),
    ("nogo-glob", _wdoc({**WAIVER, "reason_code": "tool_pair.*"}), "file",
     Refused(W, "never-waivable")),
    ("nogo-exact", _wdoc({**WAIVER, "reason_code": "writer.dual"}), "file",
     Refused(W, "never-waivable")),
    ("fixture-invalid", _wdoc({**WAIVER, "reason_code": "fixture.invalid"}), "file",
     Refused(W, "never-waivable")),
    ("fixture-glob", _wdoc({**WAIVER, "reason_code": "fixture.*"}), "file",
     Refused(W, "never-waivable")),
    ("suffix-glob-nogo", _wdoc({**WAIVER, "reason_code": "*.lost"}), "file",
     Refused(W, "never-waivable")),
    ("second-waiver-star", _wdoc(WAIVER, {**WAIVER, "id": "W-2", "reason_code": "*"}), "file",
     Refused(W, "/waivers/1/reason_code")),
    ("unregistered-code", _wdoc({**WAIVER, "reason_code": "no.such.code"}), "file",
     Refused(W, "/waivers/0/reason_code")),
    ("schema-wrong", _wdoc(WAIVER, schema="shadow-waivers/v2"), "file", Refused(W, "/schema")),
    ("not-an-object", [WAIVER], "file", Refused(W, "/schema")),
    ("waivers-object", {"schema": "shadow-waivers/v1", "waivers": {}}, "file",
     Refused(W, "/waivers")),
    ("waiver-string", _wdoc(CANARY), "file", Refused(W, "/waivers/0")),  # type: ignore[arg-type]
    ("unknown-field", _wdoc({**WAIVER, "note": CANARY}), "file", Refused(W, "/waivers/0/note")),
    ("owner-missing", _wdoc({k: v for k, v in WAIVER.items() if k != "owner"}), "file",
     Refused(W, "/waivers/0/owner")),
    ("reason-empty", _wdoc({**WAIVER, "reason": "  "}), "file", Refused(W, "/waivers/0/reason")),
    ("expires-not-a-date", _wdoc({**WAIVER, "expires": "soon"}), "file",
     Refused(W, "/waivers/0/expires")),
    ("expires-number", _wdoc({**WAIVER, "expires": 20990101}), "file",
     Refused(W, "/waivers/0/expires")),
    ("duplicate-id", _wdoc(WAIVER, WAIVER), "file", Refused(W, "/waivers/1/id")),
    ("empty-file", b"", "file", Refused(W, "well-formed JSON")),
    ("bom", b"\xef\xbb\xbf{}", "file", Refused(W, "byte-order mark")),
    ("nan", b'{"schema": NaN}', "file", Refused(W, "finite")),
    ("duplicate-keys", b'{"schema": "a", "schema": "b"}', "file", Refused(W, "unique")),
    ("missing-file", None, "missing", Refused(W, "no such file")),
    ("directory", None, "dir", Refused(W, "a directory")),
]
for _id, _data, _kind, _expect in WAIVER_CASES:
    case(f"waivers-{_id}", _waivers(_data, _kind), _expect)
case("waivers-fifo", _waivers(None, "fifo"), Refused(W, "a FIFO"), posix_only())

# =========================================================================== arguments

ARG_CASES: list[tuple[str, Callable[[Env], list[str]], Expect]] = [
    ("phase-9", lambda e: e.run("--phase", "9"), Refused("--phase", "invalid choice")),
    ("jobs-not-a-number", lambda e: e.run("--jobs", "many"), Refused("--jobs", "invalid")),
    ("candidate-missing-folder", lambda e: e.run("--candidate", str(e.tmp / "no-cand")),
     Refused("no-cand", "candidate")),
    ("attach-missing", lambda e: e.run("--attach", str(e.tmp / "none.xml")),
     Refused("none.xml", "no such file")),
    ("inventory-missing", lambda e: e.run("--inventory", str(e.tmp / "inv.json")),
     Refused("inv.json", "no such file")),
    ("policy-not-json", lambda e: (e.tmp.joinpath("p.json").write_text("{", "utf-8"),
                                   e.run("--policy", str(e.tmp / "p.json")))[1],
     Refused("p.json", "well-formed JSON")),
    ("intended-not-json", lambda e: (e.tmp.joinpath("i.json").write_bytes(b"\xef\xbb\xbf{}"),
                                     e.run("--intended", str(e.tmp / "i.json")))[1],
     Refused("i.json", "byte-order mark")),
    ("previous-missing", lambda e: e.run("--previous", str(e.tmp / "old.json")),
     Refused("old.json", "no such file")),
]
for _id, _build, _expect in ARG_CASES:
    case(f"arg-{_id}", _build, _expect)

# =========================================================================== the run


@pytest.mark.parametrize(("build", "expect"), case.cases)
def test_bad_input(build: Build, expect: Expect, env: Env,
                   capsys: pytest.CaptureFixture[str]) -> None:
    check(env, build(env), expect, capsys)
