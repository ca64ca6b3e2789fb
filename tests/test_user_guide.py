"""The user guide cannot drift: every ``sh`` block of docs/*.md runs verbatim, after the
README's Quick start, in a fresh copy of the project.

"After the Quick start" means: the project is installed (this test's interpreter has it,
with its ``shadow`` and ``pytest`` scripts on ``PATH``) and ``reports/latest`` holds the
main job's run (``nox -s shadow`` = ``shadow run`` on the bundled fixtures and
recordings).  Each command must exit 0 (GO) or 1 (NO-GO) — never 2, never a traceback.
Blocks tagged ``text`` are samples or CI-only commands and are not run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
_CACHES = shutil.ignore_patterns(".git", ".nox", ".venv", "__pycache__", ".pytest_cache",
                                 ".mypy_cache", ".ruff_cache", ".hypothesis")


def _skip(folder: str, names: list[str]) -> set[str]:
    """What a fresh clone does not have: caches, environments, and the run outputs."""
    skip = set(_CACHES(folder, names))
    if Path(folder) == ROOT:
        skip |= {"reports"} & set(names)
    return skip


def commands(doc: Path) -> list[str]:
    out = []
    for block in _BLOCK.findall(doc.read_text(encoding="utf-8")):
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def test_the_user_guide_has_runnable_blocks() -> None:
    cmds = commands(ROOT / "docs" / "user-guide.md")
    assert any(c.startswith("shadow run") for c in cmds)
    assert any(c.startswith("shadow gate") for c in cmds)
    assert any(c.startswith("pytest --shadow") for c in cmds)


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    where = tmp_path_factory.mktemp("guide") / "project"
    shutil.copytree(ROOT, where, ignore=_skip)
    (where / "reports").mkdir()
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep
           + os.environ.get("PATH", "")}
    env.pop("PYTEST_ADDOPTS", None)
    quick = subprocess.run([sys.executable, "-m", "shadow", "run", "--fixtures", "fixtures",
                            "--recordings", "recordings", "--out", "reports/latest"],
                           cwd=where, env=env, capture_output=True, text=True, timeout=600,
                           check=False)
    assert quick.returncode in (0, 1), quick.stderr
    return where, env


@pytest.mark.parametrize("doc", [d for d in DOCS if commands(d)], ids=lambda d: d.name)
def test_every_sh_block_runs_verbatim_after_the_quick_start(
        doc: Path, clone: tuple[Path, dict[str, str]]) -> None:
    where, env = clone
    for cmd in commands(doc):
        done = subprocess.run(cmd, shell=True, cwd=where, env=env, capture_output=True,
                              text=True, encoding="utf-8", errors="replace", timeout=600,
                              check=False)
        out = done.stdout + done.stderr
        assert done.returncode in (0, 1), f"{doc.name}: `{cmd}` exited {done.returncode}:\n{out}"
        assert "Traceback" not in out and "internal error" not in out, (cmd, out)
