"""``shadow/bootstrap.py`` is the one place where adapters are wired to the kernel: no
other shell module imports ``kernel.adapters`` (the compaction harness's scripted session
double extends the in-memory port, as the peer's protocol describes — the one exception)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {"shadow/bootstrap.py", "shadow/compaction_harness.py"}


def adapter_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        out += [n for n in names if n == "kernel.adapters" or n.startswith("kernel.adapters.")]
    return out


def test_only_the_composition_root_imports_adapters() -> None:
    offenders = {}
    for path in sorted((ROOT / "shadow").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        found = adapter_imports(path)
        if found and rel not in ALLOWED:
            offenders[rel] = found
    assert offenders == {}
    assert adapter_imports(ROOT / "shadow" / "bootstrap.py")


def test_the_checker_sees_every_import_form(tmp_path: Path) -> None:
    for src in ("import kernel.adapters.sqlite.memory_store\n",
                "from kernel.adapters import sqlite_memory\n",
                "from kernel.adapters.fs.content import FsContentPort\n",
                "def f():\n    from kernel.adapters import jsonl_session\n"):
        p = tmp_path / "m.py"
        p.write_text(src, encoding="utf-8")
        assert adapter_imports(p), src
