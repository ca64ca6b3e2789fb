"""The kernel's package structure (issue 14 item 1; ADR 0013).

* Every package below ``kernel/`` has a docstring naming its public API and an
  ``__all__`` whose names exist.
* No kernel module imports a private name (``_x``) or a private module from another
  package.  A package is ``kernel.<name>`` or ``kernel.adapters.<name>``; a top-level
  module (``kernel.ports``, ``kernel.errors``, …) is a package of its own.
* No import inside a function or method (the way an import cycle is dodged), and no
  cycle between modules or between packages.
* The vocabulary is defined once, in ``kernel/vocabulary.py``: no other kernel module
  spells a list of three or more scopes, trust levels or sensitivities, the identifier
  pattern, the safe-integer limit, or the token and content limits; the typing
  ``Literal``s in the contracts list the same values in the same order.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import pytest

from kernel import vocabulary
from kernel.canonical.items import CONTEXT_KINDS
from kernel.contracts import _base
from kernel.contracts import items as contract_items
from kernel.contracts import planning as contract_planning
from kernel.planning.partitions import SELECTABLE_PARTITIONS

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "kernel"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(KERNEL.rglob("*.py"))}
PACKAGES = sorted(m for m, p in MODULES.items() if p.name == "__init__.py")


def package_of(module: str) -> str:
    """``kernel.memory.recall`` → ``kernel.memory``; ``kernel.adapters.sqlite.session`` →
    ``kernel.adapters.sqlite``; a top-level module is its own package."""
    parts = module.split(".")
    if parts[:2] == ["kernel", "adapters"] and len(parts) >= 3:
        return ".".join(parts[:3])
    if module in PACKAGES and len(parts) <= 2:
        return module
    return ".".join(parts[:2]) if len(parts) >= 3 else module


def _imports(tree: ast.Module) -> Iterator[tuple[str, str | None, int]]:
    """``(module, imported name or None, line)`` for every module-level kernel import."""
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("kernel"):
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernel"):
            for alias in node.names:
                yield str(node.module), alias.name, node.lineno


def _trees() -> Iterator[tuple[str, ast.Module]]:
    for name, path in MODULES.items():
        yield name, ast.parse(path.read_text(encoding="utf-8"))


#: Public subpackages a package's ``__all__`` need not list (the root lists none of them).
_UNLISTED = frozenset({
    "vocabulary", "canonical", "planning", "packets", "compaction", "memory", "contracts",
    "ports", "errors", "outcomes", "adapters", "machine",
})


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_names_its_public_api(package: str) -> None:
    module = importlib.import_module(package)
    assert (module.__doc__ or "").strip(), f"{package} has no docstring"
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, tuple) and exported, f"{package} has no __all__"
    for name in exported:
        submodule = f"{package}.{name}" in MODULES
        assert submodule or hasattr(module, name), (package, name)
        if submodule:
            assert f"``{name}``" in module.__doc__, f"{package}'s docstring omits {name}"
    children = {
        m.rsplit(".", 1)[1] for m in MODULES
        if m.startswith(package + ".") and m.count(".") == package.count(".") + 1
    }
    if any(name in children for name in exported):  # a package of modules lists them all
        public = {c for c in children if not c.startswith("_")}
        assert public <= set(exported) | _UNLISTED, (package, sorted(public - set(exported)))


def test_no_private_name_crosses_a_package() -> None:
    found = []
    for name, tree in _trees():
        for target, imported, line in _imports(tree):
            if package_of(target) == package_of(name):
                continue
            private_module = any(part.startswith("_") for part in target.split("."))
            if private_module or (imported or "").startswith("_"):
                found.append(f"{name}:{line} imports {target}.{imported}")
    assert found == []


def test_no_function_level_imports() -> None:
    found = []
    for name, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Import | ast.ImportFrom):
                        found.append(f"{name}:{inner.lineno} in {node.name}()")
    assert found == []


def _graph(key: object) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, tree in _trees():
        for target, imported, _ in _imports(tree):
            deps = {target} | ({f"{target}.{imported}"} if imported else set())
            for dep in deps & MODULES.keys():
                a, b = (name, dep) if key == "module" else (package_of(name), package_of(dep))
                if a != b:
                    graph.setdefault(a, set()).add(b)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("key", ["module", "package"])
def test_no_import_cycles(key: str) -> None:
    graph = _graph(key)
    assert graph, "no kernel imports found"
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# --------------------------------------------------------------------------- vocabulary

#: Size limits distinctive enough to spot when spelled again.
_LIMITS = {
    vocabulary.MAX_TOKENS: "MAX_TOKENS",
    vocabulary.MAX_CONTENT_CHARS: "MAX_CONTENT_CHARS",
}

_WORDS = {
    "scope": set(vocabulary.SCOPES),
    "trust": set(vocabulary.TRUST),
    "sensitivity": set(vocabulary.SENSITIVITY),
}


def _spelled_vocabulary(tree: ast.Module) -> Iterator[str]:
    literals = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "Literal"
        for sub in ast.walk(node.slice)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set) and id(node) not in literals:
            values = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if len(values) != len(node.elts) or len(values) < 3:
                continue
            for kind, words in _WORDS.items():
                if values <= words:
                    yield f"line {node.lineno}: a list of {kind} values {sorted(values)}"
        elif isinstance(node, ast.Constant):
            if node.value in (vocabulary.MAX_SAFE_INTEGER, 2**53):
                yield f"line {node.lineno}: the safe-integer limit"
            if type(node.value) is int and node.value in _LIMITS:
                yield f"line {node.lineno}: the limit {_LIMITS[node.value]}"
            if isinstance(node.value, str) and vocabulary.IDENTIFIER.pattern in node.value:
                yield f"line {node.lineno}: the identifier pattern"
        elif isinstance(node, ast.BinOp) and ast.unparse(node) == "2 ** 53":
            yield f"line {node.lineno}: 2**53"


def test_the_vocabulary_is_defined_once() -> None:
    found = []
    for name, tree in _trees():
        if name == "kernel.vocabulary":
            continue
        found += [f"{name} {what}" for what in _spelled_vocabulary(tree)]
    assert found == []


def test_the_vocabulary_check_sees_a_copy() -> None:
    copies = (
        'S = ("turn", "session", "agent")\n',
        'T = frozenset({"host", "verified", "user"})\n',
        "LIMIT = 9_007_199_254_740_991\n",
        "LIMIT = 2**53 - 1\n",
        "WINDOW = 16_777_216\n",
        'P = r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,159}"\n',
    )
    for source in copies:
        assert list(_spelled_vocabulary(ast.parse(source))), source


def test_the_contract_literals_are_the_vocabulary() -> None:
    assert get_args(_base.Scope) == vocabulary.SCOPE_ORDER
    assert get_args(_base.Trust) == vocabulary.TRUST_ORDER
    assert get_args(_base.Sensitivity) == vocabulary.SENSITIVITY_ORDER


def test_the_contract_literals_equal_the_normalisers_sets() -> None:
    """A typing ``Literal`` cannot be built from a tuple: where the contracts repeat a
    normaliser's list, the two are held equal here."""
    assert get_args(contract_items.ItemKind) == CONTEXT_KINDS
    assert get_args(contract_planning.Partition) == SELECTABLE_PARTITIONS


def test_the_orders_are_plain_strings() -> None:
    """Digests and JSON see wire strings, never enum members."""
    for order in (vocabulary.SCOPE_ORDER, vocabulary.TRUST_ORDER, vocabulary.SENSITIVITY_ORDER):
        assert all(type(v) is str for v in order)
    assert [t.value for t in sorted(vocabulary.Trust)] == list(vocabulary.TRUST_ASCENDING)
    assert vocabulary.Sensitivity.SECRET > "personal"
