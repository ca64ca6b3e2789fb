"""Layering guard: kernel/ (outside kernel/adapters/) is a pure functional core.

The core may import only :data:`ALLOWED_MODULES` (the standard library modules it uses
today, ``orjson`` and ``rfc8785``) and ``kernel.*`` outside ``kernel.adapters`` — an
allow-list, so a new dependency is a reviewed change to this file.  :func:`violations`
also rejects, in every core module:

* a call or reference that does I/O, reads a clock, randomness or the environment, or
  imports dynamically — also through an alias (``import datetime as dt;
  dt.datetime.now()``, ``from time import time as t``) — and the names that mutate
  ambient process state (``decimal.getcontext``, ``contextlib.redirect_stdout``, …);
* ``global``, ``__builtins__``, ``globals()``, and assignment to an imported module's
  attribute (another module's state);
* module-level (and class-level) mutable state: a name bound to a list, dict or set
  display or comprehension, or to a call that builds a mutable container (``dict()``,
  ``list()``, ``sorted()``, ``defaultdict()``, …) — wrap it as ``MappingProxyType``,
  ``frozenset`` or ``tuple``; an item or attribute assigned at module level; a mutable
  default argument; a ``functools.lru_cache`` / ``functools.cache`` function declared to
  return a list, dict or set (every later caller would share, and could change, it).

A cache is either an explicit object the caller passes in or ``functools.lru_cache`` on a
pure function of immutable arguments returning an immutable value (not observable).

:func:`test_kernel_module_state_is_immutable` imports every core module and checks its
globals at run time (a value built by a helper function, nested containers).  Each
evasion has a snippet that the checker must flag (:data:`EVASIONS`), so the guard itself
is tested; and ``shadow`` may import ``kernel``, never the reverse.
"""

from __future__ import annotations

import array
import ast
import collections
import dataclasses
import decimal
import importlib
import re
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "kernel"

#: Everything the core imports today, and nothing else (``kernel.*`` is allowed apart).
ALLOWED_MODULES = frozenset(
    {
        "__future__", "array", "bisect", "collections", "collections.abc", "contextlib",
        "copy", "dataclasses", "decimal", "enum", "functools", "hashlib", "itertools", "json",
        "json.encoder", "math", "operator", "re", "types", "typing", "unicodedata",
        "orjson", "rfc8785",
    }
)
#: Qualified names never to be used, even from an allowed module (resolved through import
#: aliases).  Modules outside the allow-list are refused wholesale; their clocks, random
#: sources and environment readers are listed so that a use names what it is.
FORBIDDEN_NAMES = frozenset(
    {
        # clocks
        "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today",
        "datetime.date.today", "datetime.datetime.fromtimestamp", "datetime.date.fromtimestamp",
        "time.time", "time.time_ns", "time.monotonic", "time.monotonic_ns", "time.perf_counter",
        "time.perf_counter_ns", "time.process_time", "time.localtime", "time.gmtime",
        "time.ctime", "time.asctime", "time.strftime", "time.sleep",
        # randomness and ids
        "os.urandom", "os.getrandom", "uuid.uuid1", "uuid.uuid4", "random", "secrets",
        # environment and dynamic imports
        "os.environ", "os.getenv", "os.putenv", "importlib", "sys.modules",
        # ambient process state
        "decimal.getcontext", "decimal.setcontext", "decimal.localcontext",
        "decimal.DefaultContext", "decimal.BasicContext", "decimal.ExtendedContext",
        "contextlib.redirect_stdout", "contextlib.redirect_stderr", "contextlib.chdir",
    }
)
FORBIDDEN_CALLS = frozenset(
    {"open", "input", "print", "exec", "eval", "compile", "__import__", "breakpoint", "globals"}
)
#: Calls whose result is a mutable container (bound at module level, that is state).
MUTABLE_FACTORIES = frozenset(
    {
        "dict", "list", "set", "bytearray", "sorted", "vars",
        "collections.defaultdict", "collections.OrderedDict", "collections.Counter",
        "collections.deque", "collections.ChainMap", "array.array", "types.SimpleNamespace",
        "decimal.Context", "copy.copy", "copy.deepcopy",
    }
)
_MUTABLE_DISPLAYS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
_CACHES = frozenset({"functools.lru_cache", "functools.cache"})
_MUTABLE_RESULT = re.compile(r"\b(?:list|dict|set|bytearray|List|Dict|Set|MutableMapping)\b")


def kernel_modules() -> list[Path]:
    return sorted(
        p for p in KERNEL.rglob("*.py") if "adapters" not in p.relative_to(KERNEL).parts
    )


def _module_allowed(name: str) -> bool:
    if name == "kernel" or name.startswith("kernel."):
        return not (name == "kernel.adapters" or name.startswith("kernel.adapters."))
    return name in ALLOWED_MODULES


def _forbidden(qualified: str) -> bool:
    parts = qualified.split(".")
    return any(".".join(parts[:i]) in FORBIDDEN_NAMES for i in range(1, len(parts) + 1))


class _Checker(ast.NodeVisitor):
    """One module's violations; ``aliases`` maps a local name to what it was imported as."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.found: list[str] = []
        self.aliases: dict[str, str] = {}

    def flag(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.label}:{getattr(node, 'lineno', 0)} {what}")

    # ---------------------------------------------------------------- imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not _module_allowed(alias.name):
                self.flag(node, f"import {alias.name} (not in the core's allow-list)")
            local = alias.asname or alias.name.split(".")[0]
            self.aliases[local] = alias.name if alias.asname else local

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:  # relative: inside kernel/
            package = self.label.rsplit("/", 1)[0].replace("/", ".") if "/" in self.label else ""
            module = ".".join(p for p in ("kernel", package, module) if p)
        if not _module_allowed(module):
            self.flag(node, f"from {module} import … (not in the core's allow-list)")
        for alias in node.names:
            qualified = f"{module}.{alias.name}"
            if module in ("kernel", "kernel.adapters") and not _module_allowed(qualified):
                self.flag(node, f"from {module} import {alias.name} (core imports an adapter)")
            if module == "__future__":
                continue
            if _forbidden(qualified):
                self.flag(node, f"imports {qualified}")
            self.aliases[alias.asname or alias.name] = qualified

    # ---------------------------------------------------------------- names and calls
    def qualified(self, node: ast.AST) -> str | None:
        """``a.b.c`` resolved through the import aliases, or ``None``."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        return ".".join([self.aliases[node.id], *reversed(parts)])

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.qualified(node)
        if name is not None and _forbidden(name):
            self.flag(node, f"uses {name}")
        else:
            self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "__builtins__":
            self.flag(node, "uses __builtins__")
        name = self.qualified(node)
        if name is not None and _forbidden(name):
            self.flag(node, f"uses {name} (as {node.id})")

    def visit_Call(self, node: ast.Call) -> None:
        fn = node.func
        if isinstance(fn, ast.Name) and fn.id in FORBIDDEN_CALLS and fn.id not in self.aliases:
            self.flag(node, f"call {fn.id}()")
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.flag(node, f"global {', '.join(node.names)}")

    # ---------------------------------------------------------------- state
    def visit_Module(self, node: ast.Module) -> None:
        self.generic_visit(node)  # first: the imports bind the aliases
        self.state(node.body, "module")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.state(node.body, f"class {node.name}")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None and self.mutable(default):
                self.flag(default, f"mutable default argument of {node.name}()")
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            cached = self.qualified(target) in _CACHES
            if cached and node.returns is not None and _MUTABLE_RESULT.search(
                ast.unparse(node.returns)
            ):
                self.flag(node, f"cached {node.name}() returns a mutable value (shared by "
                          "every later caller)")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def mutable(self, value: ast.AST) -> bool:
        if isinstance(value, _MUTABLE_DISPLAYS):
            return True
        if isinstance(value, ast.Call):
            fn = value.func
            name = self.qualified(fn)
            if name is None and isinstance(fn, ast.Name):
                name = fn.id
            return name in MUTABLE_FACTORIES
        return False

    def state(self, body: list[ast.stmt], where: str) -> None:
        """Bindings at this level (descending into if/try/with/for, not into defs)."""
        for stmt in _level(body):
            if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                value = stmt.value
                for target in targets:
                    if isinstance(target, ast.Subscript | ast.Attribute):
                        owner = self.qualified(target.value) if isinstance(
                            target, ast.Attribute
                        ) else None
                        self.flag(stmt, f"{where}-level item/attribute assignment"
                                  + (f" to {owner}" if owner else ""))
                    elif value is not None and (
                        self.mutable(value) or isinstance(stmt, ast.AugAssign)
                    ):
                        self.flag(stmt, f"{where}-level mutable binding {ast.unparse(target)}")
            elif isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Constant):
                self.flag(stmt, f"{where}-level statement {ast.unparse(stmt)[:40]}")
        for node in ast.walk(ast.Module(body=body, type_ignores=[])):
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Attribute):
                        owner = self.qualified(target.value)
                        if owner is not None and where == "module":
                            self.flag(node, f"assigns an attribute of imported {owner}")


def _level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for stmt in body:
        if isinstance(stmt, ast.If | ast.With | ast.For | ast.While):
            yield from _level(stmt.body)
            yield from _level(getattr(stmt, "orelse", []))
        elif isinstance(stmt, ast.Try):
            yield from _level(stmt.body)
            for handler in stmt.handlers:
                yield from _level(handler.body)
            yield from _level(stmt.orelse)
            yield from _level(stmt.finalbody)
        else:
            yield stmt


def check_source(source: str, label: str = "snippet.py") -> list[str]:
    """Every violation of the core's rules in ``source`` (``label``: its path below kernel/)."""
    checker = _Checker(label)
    checker.visit(ast.parse(source, filename=label))
    return sorted(set(checker.found), key=checker.found.index)


def violations(path: Path) -> list[str]:
    label = str(path.relative_to(KERNEL)) if path.is_relative_to(KERNEL) else path.name
    return check_source(path.read_text(encoding="utf-8"), label)


# --------------------------------------------------------------------------- the real kernel


def test_kernel_core_has_modules() -> None:
    assert kernel_modules(), "no kernel modules found"


@pytest.mark.parametrize("path", kernel_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_kernel_module_is_pure(path: Path) -> None:
    assert violations(path) == []


def test_the_allow_list_is_what_the_core_uses() -> None:
    """Every allowed module is imported by some core module: the list holds no slack."""
    used: set[str] = set()
    for path in kernel_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                used.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                used.add(node.module)
    assert used >= ALLOWED_MODULES, sorted(ALLOWED_MODULES - used)


_MUTABLE_TYPES = (
    dict, list, set, bytearray, collections.deque, collections.ChainMap, array.array,
    decimal.Context, types.SimpleNamespace,
)


def _mutable_parts(value: Any, seen: set[int] | None = None) -> Iterator[str]:
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, _MUTABLE_TYPES):
        yield type(value).__name__
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        if not type(value).__dataclass_params__.frozen:  # type: ignore[attr-defined]
            yield f"non-frozen {type(value).__name__}"
    elif isinstance(value, tuple | frozenset):
        for item in value:
            yield from _mutable_parts(item, seen)
    elif isinstance(value, types.MappingProxyType):
        for item in value.values():
            yield from _mutable_parts(item, seen)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.parametrize("path", kernel_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_kernel_module_state_is_immutable(path: Path) -> None:
    """At run time: no global of a core module is (or holds) a mutable container."""
    module = importlib.import_module(_module_name(path))
    found = [
        f"{name}: {part}"
        for name, value in vars(module).items()
        if not (name.startswith("__") and name.endswith("__")) or name == "__all__"
        for part in _mutable_parts(value)
    ]
    assert found == []


# --------------------------------------------------------------------------- the guard itself

#: One snippet per evasion, and a word its report must contain.
EVASIONS: dict[str, tuple[str, str]] = {
    "socket": ("import socket\n", "import socket"),
    "shadow": ("from shadow import cli\n", "shadow"),
    "open": ("def f():\n    return open('x')\n", "open()"),
    "print": ("def f():\n    print('x')\n", "print()"),
    "time_module": ("import time\n", "import time"),
    "datetime_alias": (
        "import datetime as dt\ndef f():\n    return dt.datetime.now()\n",
        "datetime.datetime.now",
    ),
    "datetime_from_alias": (
        "from datetime import datetime as D\ndef f():\n    return D.utcnow()\n",
        "datetime.datetime.utcnow",
    ),
    "date_today": ("from datetime import date\ndef f():\n    return date.today()\n", "today"),
    "time_alias": ("from time import time as t\ndef f():\n    return t()\n", "time.time"),
    "clock_reference": ("import time as T\nCLOCK = T.monotonic\n", "time.monotonic"),
    "random_alias": ("import random as r\ndef f():\n    return r.random()\n", "random"),
    "random_from": ("from random import choice\n", "random"),
    "os_urandom": ("import os\ndef f():\n    return os.urandom(8)\n", "os.urandom"),
    "os_environ": ("from os import environ as E\nX = E.get('HOME')\n", "os.environ"),
    "uuid4": ("import uuid\ndef f():\n    return uuid.uuid4()\n", "uuid.uuid4"),
    "secrets": ("import secrets\ndef f():\n    return secrets.token_hex()\n", "secrets"),
    "importlib": ("import importlib\nm = importlib.import_module('os')\n", "importlib"),
    "importlib_from": ("from importlib import import_module\n", "importlib"),
    "dunder_import": ("def f():\n    return __import__('os')\n", "__import__()"),
    "builtins": ("def f():\n    return __builtins__['open']\n", "__builtins__"),
    "thread": ("import _thread\n", "_thread"),
    "threading": ("import threading\n", "threading"),
    "adapter": ("from kernel.adapters.fs.content import FsContentPort\n", "allow-list"),
    "adapter_from_kernel": ("from kernel import adapters\n", "adapter"),
    "relative_adapter": ("from .adapters import fs_content\n", "allow-list"),
    "unlisted_module": ("import pydantic\n", "allow-list"),
    "global": ("_N = 0\ndef f():\n    global _N\n    _N += 1\n", "global _N"),
    "globals_call": ("def f():\n    globals()['x'] = 1\n", "globals()"),
    "module_dict": ("_CACHE: dict[str, int] = {}\n", "mutable binding _CACHE"),
    "module_list": ("_RECENT = [b'']\n", "mutable binding _RECENT"),
    "module_set": ("_SEEN = set()\n", "mutable binding _SEEN"),
    "module_comprehension": ("_T = {k: 1 for k in 'ab'}\n", "mutable binding _T"),
    "module_sorted": ("_S = sorted('ba')\n", "mutable binding _S"),
    "module_defaultdict": (
        "import collections\n_D = collections.defaultdict(list)\n", "mutable binding _D"
    ),
    "module_in_if": (
        "try:\n    import orjson\nexcept ImportError:\n    orjson = None\n"
        "if orjson is not None:\n    _E = {}\n",
        "mutable binding _E",
    ),
    "module_item": ("from types import MappingProxyType\n_M = MappingProxyType({})\n"
                    "_M['x'] = 1\n", "item/attribute assignment"),
    "module_mutation_call": ("_X = ()\n_X.append(1)\n", "module-level statement"),
    "module_augmented": ("_X = ()\n_X += (1,)\n", "mutable binding _X"),
    "class_attribute": ("class C:\n    cache = {}\n", "class C-level mutable binding cache"),
    "default_argument": ("def f(seen=[]):\n    return seen\n", "mutable default argument"),
    "cached_mutable_result": (
        "import functools\n@functools.cache\ndef table() -> dict[str, int]:\n    return {}\n",
        "returns a mutable value",
    ),
    "cached_alias_mutable_result": (
        "from functools import lru_cache as memo\n@memo(maxsize=8)\n"
        "def ranks() -> list[int]:\n    return []\n",
        "returns a mutable value",
    ),
    "other_module_state": (
        "import kernel.canonical.digest as d\nd.ENCODERS = {}\n", "assigns an attribute of imported"
    ),
    "decimal_context": (
        "import decimal\ndef f():\n    decimal.getcontext().prec = 5\n", "decimal.getcontext"
    ),
    "decimal_alias": ("from decimal import localcontext as lc\n", "decimal.localcontext"),
    "redirect_stdout": ("from contextlib import redirect_stdout\n", "redirect_stdout"),
}


@pytest.mark.parametrize("name", sorted(EVASIONS))
def test_the_guard_flags_each_evasion(name: str) -> None:
    source, expected = EVASIONS[name]
    found = check_source(source)
    assert found, f"{name}: not flagged"
    assert any(expected in v for v in found), (name, found)


def test_the_guard_accepts_what_the_core_may_do() -> None:
    """Immutable tables, lru_cache on a pure function, a local cache, a time passed in."""
    source = (
        "from __future__ import annotations\n"
        "import functools\nimport re\nfrom types import MappingProxyType\n"
        "from typing import Final\nfrom kernel.canonical.timestamps import parse_timestamp\n"
        "_TABLE: Final = MappingProxyType({'a': 1})\n_KEYS: Final = frozenset({'a'})\n"
        "_ORDER: Final = tuple(sorted('ba'))\n_RE = re.compile('x')\n"
        "__all__ = ('f',)\n"
        "@functools.lru_cache(maxsize=64)\ndef _pure(text: str) -> tuple[int, str]:\n"
        "    return parse_timestamp(text)\n"
        "def f(now: str, seen: tuple[str, ...] = ()) -> list[str]:\n"
        "    memo: dict[str, str] = {}\n    out = [memo.setdefault(now, now)]\n"
        "    return out\n"
        "class C:\n    __slots__ = ('x',)\n    KIND: Final = 'c'\n"
    )
    assert check_source(source) == []


def test_the_runtime_check_sees_what_the_parser_cannot() -> None:
    frozen = types.MappingProxyType({"a": (1, [2])})
    assert list(_mutable_parts(frozen)) == ["list"]
    assert list(_mutable_parts((frozenset({1}), "x", types.MappingProxyType({})))) == []

    @dataclasses.dataclass
    class Loose:
        x: int = 0

    assert list(_mutable_parts(Loose())) == ["non-frozen Loose"]


def test_kernel_never_imports_shadow_anywhere() -> None:
    for path in KERNEL.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] != "shadow" for a in node.names), path
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                assert (node.module or "").split(".")[0] != "shadow", path
