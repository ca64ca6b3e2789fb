"""Layering guard: kernel/ (outside kernel/adapters/) is a pure functional core.

Parses every kernel module and fails on imports or calls that do I/O,
networking, subprocesses, read clocks or randomness, read the environment, or
import ``shadow``; and checks that ``shadow`` may import ``kernel`` but never
the reverse.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "kernel"

FORBIDDEN_MODULES = {
    "os", "io", "sys", "socket", "ssl", "subprocess", "multiprocessing", "threading",
    "asyncio", "select", "selectors", "signal", "shutil", "tempfile", "pathlib", "glob",
    "sqlite3", "http", "urllib", "requests", "httpx", "time", "random", "secrets", "uuid",
    "datetime_now_placeholder", "logging", "shadow", "vcr", "pandas", "builtins", "ctypes",
    "mmap", "fcntl", "msvcrt", "platform", "getpass", "webbrowser",
}
FORBIDDEN_CALLS = {"open", "input", "print", "exec", "eval", "compile", "__import__", "breakpoint"}
FORBIDDEN_ATTRS = {
    ("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"),
    ("time", "time"), ("time", "monotonic"), ("time", "perf_counter"),
    ("os", "environ"), ("os", "getenv"), ("os", "urandom"),
}


def kernel_modules() -> list[Path]:
    return sorted(
        p for p in KERNEL.rglob("*.py") if "adapters" not in p.relative_to(KERNEL).parts
    )


def violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FORBIDDEN_MODULES:
                    found.append(f"{path.name}:{node.lineno} import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            mod = (node.module or "").split(".")[0]
            if node.level == 0 and mod in FORBIDDEN_MODULES:
                found.append(f"{path.name}:{node.lineno} from {node.module} import …")
            if (node.module or "").startswith("kernel.adapters"):
                found.append(f"{path.name}:{node.lineno} core imports an adapter")
        elif isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Name) and fn.id in FORBIDDEN_CALLS:
                found.append(f"{path.name}:{node.lineno} call {fn.id}()")
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and (node.value.id, node.attr) in FORBIDDEN_ATTRS
        ):
            found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_kernel_core_has_modules() -> None:
    assert kernel_modules(), "no kernel modules found"


@pytest.mark.parametrize("path", kernel_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_kernel_module_is_pure(path: Path) -> None:
    assert violations(path) == []


def test_guard_detects_violations(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import socket\nfrom shadow import cli\nimport time\n"
        "def f():\n    open('x')\n    return datetime.now()\n",
        encoding="utf-8",
    )
    found = violations(bad)
    assert any("socket" in v for v in found)
    assert any("shadow" in v for v in found)
    assert any("open()" in v for v in found)
    assert any("datetime.now" in v for v in found)
    assert any("import time" in v for v in found)


def test_kernel_never_imports_shadow_anywhere() -> None:
    for path in KERNEL.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] != "shadow" for a in node.names), path
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                assert (node.module or "").split(".")[0] != "shadow", path
