"""A stand-in legacy tree for ``shadow capture`` tests: tiny JS modules (and a Java class)
with the legacy entry points' shapes, written by the tests themselves.

Nothing here is legacy code: each stand-in answers from its arguments in a few lines, so
a test can check what the harness passes in and records, without the legacy monorepo.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Mapping, Sequence
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from shadow import noise_rules
from shadow.capture import jsjson
from shadow.cli import main

NODE = shutil.which("node")
JAVAC = shutil.which("javac")
needs_node = pytest.mark.skipif(NODE is None, reason="Node.js is not installed")
needs_java = pytest.mark.skipif(JAVAC is None, reason="a JDK (javac) is not installed")

COMMIT = "abc1234"


def write_tree(root: Path, files: Mapping[str, str]) -> Path:
    """Write ``{relative path: text}`` under ``root`` (UTF-8, ``\\n``); returns ``root``."""
    for rel, text in files.items():
        p = root.joinpath(*rel.split("/"))
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8", newline="\n")
    return root


def write_input(inputs: Path, scenario: str, doc: Mapping[str, Any]) -> Path:
    """One scenario folder with its ``input.json`` (the capture's own byte format)."""
    body = {"format": "legacy-capture-input/v1", "scenario": scenario,
            "description": f"stand-in scenario {scenario}", "tags": ["stand-in"],
            "model": None, "messages": [], **dict(doc)}
    path = inputs / scenario / "input.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(jsjson.dumps(body), encoding="utf-8", newline="\n")
    return path


def run_capture(root: Path, inputs: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    """``shadow capture`` in-process: (exit code, stdout, stderr)."""
    argv = ["capture", "--legacy-root", str(root), "--inputs", str(inputs), "--out", str(out),
            "--legacy-commit", COMMIT, *extra]
    so, se = io.StringIO(), io.StringIO()
    with redirect_stdout(so), redirect_stderr(se):
        code = main(argv)
    return code, so.getvalue(), se.getvalue()


def read_capture(out: Path, scenario: str, file: str) -> dict[str, Any]:
    doc = json.loads((out / scenario / file).read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def tree_bytes(out: Path) -> dict[str, bytes]:
    """Every file under ``out`` (relative POSIX path → bytes), for byte comparisons."""
    return {p.relative_to(out).as_posix(): p.read_bytes()
            for p in sorted(out.rglob("*")) if p.is_file()}


def files_of(out: Path, scenario: str) -> Sequence[str]:
    return sorted(p.name for p in (out / scenario).iterdir())


def empty_rules(path: Path) -> Path:
    """An empty, valid noise rule file (``--noise-rules`` must name an existing file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(noise_rules.render(noise_rules.to_doc([], "stand-in rules")),
                    encoding="utf-8", newline="\n")
    return path


def repeat_args(work: Path) -> tuple[str, ...]:
    """``--repeat 2`` with a fresh rule file and the control run kept under ``work``."""
    rules = empty_rules(work / "noise.v1.json")
    return ("--repeat", "2", "--noise-rules", str(rules), "--keep-repeats", str(work / "repeats"))


def second_run(work: Path) -> Path:
    """Where :func:`repeat_args` keeps the control run."""
    return work / "repeats" / "repeat-2"
