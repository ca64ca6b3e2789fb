"""Design 108 §16 phases 0 and 5 over a legacy checkout: what writes context and memory,
and whether it still does.  Parsed with tree-sitter (JavaScript, TypeScript, TSX, Java;
the ``[legacy]`` extra), never run.

:func:`scan` walks the roots of ``shadow/policy/legacy-scan.v1.json`` under
``--legacy-root`` (each root is one surface) and finds, per file and line:

``writer_class``
    a class declaration named in ``writerClasses``;
``entry_point``
    a mutation entry point: a function or method named in ``mutationFunctions``, or a
    method of a writer class named (or prefixed) by ``writerMethods``, or one whose body
    writes; each is classified for the fence check (below);
``sql_write``
    a string literal writing a memory table (``sqlWrite``);
``retired``
    an identifier, property or string that a retired entry point of
    ``shadow/policy/retired.v1.json`` selects (``unified_memory_*``, ``session/compact`` …).

An entry point's **fence status** (:func:`fence_status`) reads its body:

``fenced``
    it fails closed before anything else: its first statement throws, or calls a guard
    (``guards``), or is an ``if`` whose branch throws an error named by ``fencedErrors``;
``writing``
    its body still writes: a memory SQL write, or a call of ``writeCalls``
    (``writeFileSync``, ``run``, ``save`` …);
``read_only``
    neither.

Nothing here reads a file's text into a report: findings carry paths, lines, names and
kinds only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from shadow.app_server import retired as retired_mod
from shadow.errors import InputError, UsageError

CONFIG: Final = Path(__file__).resolve().parent / "policy" / "legacy-scan.v1.json"
MAX_FILE_BYTES: Final = 2 * 1024 * 1024  # larger files are bundles, not sources: skipped
__all__ = ["Config", "Finding", "Scan", "fence_status", "load_config", "scan"]


@dataclass(frozen=True)
class Config:
    roots: tuple[tuple[str, str], ...]
    extensions: Mapping[str, str]
    excluded_segments: frozenset[str]
    excluded_suffixes: tuple[str, ...]
    writer_classes: frozenset[str]
    mutation_functions: frozenset[str]
    writer_methods: tuple[str, ...]
    sql_write: re.Pattern[str]
    write_calls: frozenset[str]
    guards: re.Pattern[str]
    fenced_errors: re.Pattern[str]
    doc: Mapping[str, Any] = field(repr=False, default_factory=dict)


def load_config(path: Path = CONFIG) -> Config:
    src = path.as_posix()
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(src, "", "a JSON legacy-scan config", type(exc).__name__) from None
    if not isinstance(d, dict) or d.get("schema") != "shadow-legacy-scan/v1":
        raise InputError(src, "/schema", '"shadow-legacy-scan/v1"', repr(
            d.get("schema") if isinstance(d, dict) else d))
    try:
        return Config(
            tuple((str(r["path"]), str(r["surface"])) for r in d["roots"]),
            {str(k): str(v) for k, v in d["extensions"].items()},
            frozenset(d["excludedSegments"]), tuple(d["excludedSuffixes"]),
            frozenset(d["writerClasses"]), frozenset(d["mutationFunctions"]),
            tuple(d["writerMethods"]), re.compile(d["sqlWrite"]), frozenset(d["writeCalls"]),
            re.compile(d["guards"]), re.compile(d["fencedErrors"]), d)
    except (KeyError, TypeError, AttributeError, re.error) as exc:
        raise InputError(src, "", "roots, extensions, excludedSegments, excludedSuffixes, "
                         "writerClasses, mutationFunctions, writerMethods, sqlWrite, "
                         "writeCalls, guards, fencedErrors", type(exc).__name__) from None


@dataclass(frozen=True, slots=True, order=True)
class Finding:
    surface: str
    file: str  # relative to the legacy root, with /
    line: int
    kind: str  # writer_class | entry_point | sql_write | retired
    name: str  # Class.method, a class, a table-writing literal's verb, a retired name
    status: str = ""  # entry points: fenced | writing | read_only

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"surface": self.surface, "file": self.file, "line": self.line,
                               "kind": self.kind, "name": self.name}
        if self.status:
            out["status"] = self.status
        return out


@dataclass(frozen=True)
class Scan:
    root: str
    files: int  # source files parsed
    skipped: tuple[str, ...]  # files not parsed (too large, not UTF-8), relative paths
    findings: tuple[Finding, ...]
    missing_roots: tuple[str, ...]


# --- tree-sitter ------------------------------------------------------------------------------


def _languages() -> dict[str, Any]:
    try:
        import tree_sitter_java
        import tree_sitter_javascript
        import tree_sitter_typescript
        from tree_sitter import Language
    except ImportError:
        raise UsageError("shadow inventory and shadow fence-check need the [legacy] extra "
                         "(tree-sitter and its JavaScript, TypeScript and Java grammars): "
                         "pip install -e '.[legacy]' in a checkout") from None
    return {"javascript": Language(tree_sitter_javascript.language()),
            "typescript": Language(tree_sitter_typescript.language_typescript()),
            "tsx": Language(tree_sitter_typescript.language_tsx()),
            "java": Language(tree_sitter_java.language())}


_CLASS: Final = frozenset({"class_declaration", "class", "abstract_class_declaration"})
_METHOD: Final = frozenset({"method_definition", "method_declaration", "function_declaration",
                            "generator_function_declaration"})
_CALL: Final = frozenset({"call_expression", "method_invocation", "new_expression"})
_STRING: Final = frozenset({"string", "template_string", "string_literal", "string_fragment"})
_NAMES: Final = frozenset({"identifier", "property_identifier", "type_identifier"})


def _text(node: Any) -> str:
    return bytes(node.text).decode("utf-8", "replace")


def _name(node: Any) -> str | None:
    n = node.child_by_field_name("name")
    return _text(n) if n is not None else None


def _callee(node: Any) -> str | None:
    """The called name of a call: ``f(...)`` → f, ``a.b.c(...)`` → c."""
    if node.type == "method_invocation":
        return _name(node)
    fn = node.child_by_field_name("function") or node.child_by_field_name("constructor")
    if fn is None:
        return None
    if fn.type in ("member_expression", "field_access"):
        prop = fn.child_by_field_name("property") or fn.child_by_field_name("field")
        return _text(prop) if prop is not None else None
    return _text(fn) if fn.type in _NAMES else None


def _walk(node: Any) -> Iterator[Any]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _statements(body: Any) -> list[Any]:
    return [c for c in body.named_children if c.type != "comment"]


def fence_status(body: Any, cfg: Config) -> str:
    """``fenced`` | ``writing`` | ``read_only`` of one function body (module docstring)."""
    if body is None:
        return "read_only"
    first = next(iter(_statements(body)), None)
    if first is not None:
        if first.type == "throw_statement":
            return "fenced"
        if first.type == "expression_statement":
            call = next((n for n in _walk(first) if n.type in _CALL), None)
            name = _callee(call) if call is not None else None
            if name and cfg.guards.search(name):
                return "fenced"
        if first.type == "if_statement":
            branch = first.child_by_field_name("consequence")
            if branch is not None and any(
                    n.type == "throw_statement" and cfg.fenced_errors.search(_text(n))
                    for n in _walk(branch)):
                return "fenced"
    for n in _walk(body):
        if n.type in _STRING and cfg.sql_write.search(_text(n)):
            return "writing"
        if n.type in _CALL and not _own(n):
            name = _callee(n)
            # a write call, or a delegation to another writer's mutation
            if name in cfg.write_calls or name in cfg.mutation_functions or (
                    name is not None and _is_writer_method(name, cfg)):
                return "writing"
    return "read_only"


def _own(call: Any) -> str | None:
    """The method name of a call on ``this`` (``this.save()``), else None."""
    if call.type == "method_invocation":
        obj = call.child_by_field_name("object")
        return _name(call) if obj is None or obj.type == "this" else None
    fn = call.child_by_field_name("function")
    if fn is not None and fn.type == "member_expression":
        obj, prop = fn.child_by_field_name("object"), fn.child_by_field_name("property")
        if obj is not None and obj.type == "this" and prop is not None:
            return _text(prop)
    return None


def class_statuses(methods: Mapping[str, Any], cfg: Config) -> dict[str, str]:
    """Each method's status, a call of ``this.m()`` counting as what ``m`` does: a method
    that reaches a writing method of its class writes (unless it is fenced first)."""
    status = {m: fence_status(b, cfg) for m, b in methods.items()}
    calls = {m: {c for n in (_walk(b) if b is not None else ()) if n.type in _CALL
                 and (c := _own(n)) is not None} for m, b in methods.items()}
    changed = True
    while changed:
        changed = False
        for m in methods:
            if status[m] == "read_only" and any(status.get(c) == "writing" for c in calls[m]):
                status[m], changed = "writing", True
    return status


def _is_writer_method(name: str, cfg: Config) -> bool:
    return any(name == m or (name.startswith(m) and name[len(m):len(m) + 1].isupper())
               for m in cfg.writer_methods)


def _file_findings(tree: Any, surface: str, rel: str, cfg: Config,
                   registry: Sequence[retired_mod.Retired]) -> list[Finding]:
    out: list[Finding] = []
    # (class node id or None, class name, method name, body, line) of every function
    functions: list[tuple[int | None, str | None, str, Any, int]] = []
    stack: list[tuple[Any, Any]] = [(tree.root_node, None)]
    while stack:  # depth first, without recursion (bundled code nests deeply)
        node, owner = stack.pop()
        t = node.type
        line = node.start_point[0] + 1
        if t in _CLASS:
            name = _name(node)
            if name in cfg.writer_classes:
                out.append(Finding(surface, rel, line, "writer_class", str(name)))
            stack.extend((c, node) for c in reversed(node.named_children))
            continue
        value = node.child_by_field_name("value") if t == "variable_declarator" else None
        if t in _METHOD or (value is not None and value.type in (
                "arrow_function", "function_expression", "function")):
            name = _name(node)
            body = node.child_by_field_name("body") if value is None else \
                value.child_by_field_name("body")
            if name:
                functions.append((owner.id if owner is not None else None,
                                  _name(owner) if owner is not None else None, name, body,
                                  line))
        elif t in _STRING and t != "string_fragment":
            text = _text(node)
            m = cfg.sql_write.search(text)
            if m:
                out.append(Finding(surface, rel, line, "sql_write",
                                   " ".join(m.group(0).split()[:2]).upper()))
            inner = text.strip("'\"`")
            if retired_mod.find(registry, inner) is not None:
                out.append(Finding(surface, rel, line, "retired", inner))
        elif t in _NAMES:
            text = _text(node)
            if retired_mod.find(registry, text) is not None:
                out.append(Finding(surface, rel, line, "retired", text))
        stack.extend((c, owner) for c in reversed(node.named_children))
    by_class: dict[int | None, dict[str, Any]] = {}
    for key, cls, name, body, _line in functions:
        if key is not None and (cls in cfg.writer_classes or name in cfg.mutation_functions):
            by_class.setdefault(key, {})[name] = body
    statuses = {key: class_statuses(methods, cfg) for key, methods in by_class.items()}
    for key, cls, name, body, line in functions:
        if not (name in cfg.mutation_functions or cls in cfg.writer_classes):
            continue
        status = statuses[key][name] if key is not None else fence_status(body, cfg)
        if name in cfg.mutation_functions or _is_writer_method(name, cfg) or \
                status == "writing":
            qual = f"{cls}.{name}" if cls else name
            out.append(Finding(surface, rel, line, "entry_point", qual, status))
    return out


def _sources(root: Path, sub: str, cfg: Config) -> Iterator[Path]:
    base = root / sub
    for p in sorted(base.rglob("*")):
        rel = p.relative_to(root)
        if p.suffix not in cfg.extensions or not p.is_file() or p.is_symlink():
            continue
        if any(part in cfg.excluded_segments for part in rel.parts):
            continue
        if p.name.endswith(cfg.excluded_suffixes):
            continue
        yield p


def scan(legacy_root: str | Path, cfg: Config | None = None,
         progress: Any = None) -> Scan:
    """Every finding under the configured roots of ``legacy_root`` (sorted)."""
    from tree_sitter import Parser

    root = Path(legacy_root)
    if not root.is_dir():
        raise UsageError(f"--legacy-root {legacy_root}: no such folder")
    cfg = cfg or load_config()
    langs = _languages()
    parsers = {k: Parser(v) for k, v in langs.items()}
    registry = retired_mod.load()
    findings: list[Finding] = []
    skipped: list[str] = []
    missing: list[str] = []
    files = 0
    for sub, surface in cfg.roots:
        if not (root / sub).is_dir():
            missing.append(sub)
            continue
        for path in _sources(root, sub, cfg):
            rel = path.relative_to(root).as_posix()
            data = path.read_bytes()
            if len(data) > MAX_FILE_BYTES:
                skipped.append(rel)
                continue
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                skipped.append(rel)
                continue
            tree = parsers[cfg.extensions[path.suffix]].parse(data)
            findings += _file_findings(tree, surface, rel, cfg, registry)
            files += 1
            if progress is not None and files % 250 == 0:
                progress(files, rel)
    return Scan(root.as_posix(), files, tuple(sorted(skipped)), tuple(sorted(set(findings))),
                tuple(missing))
