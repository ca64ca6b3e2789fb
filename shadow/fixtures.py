"""Load and validate legacy captures (``legacy-capture/v1`` layout) as fixtures.

A corpus folder holds ``<scenario>/input.json`` (``legacy-capture-input/v1``) and
``<scenario>/<surface>.<entry>.json`` (``legacy-capture/v1``) files, exactly as the
capture tool writes them.  Captures are ground truth: this module never changes
them.  A file that fails validation becomes a typed :class:`FixtureError` (file,
JSON pointer, expectation) and its scenario is *quarantined*: reported, skipped,
and the run goes on.

Scenario order is always sorted by name, so a listing of the folder in another
order yields identical results.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shadow.boundary import join_pointer, load_path
from shadow.errors import FixtureError, InputError

INPUT_FORMAT = "legacy-capture-input/v1"
CAPTURE_FORMAT = "legacy-capture/v1"
SURFACES = ("cli", "desktop", "vscode", "jetbrains", "session-core")
ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True, slots=True)
class Capture:
    """One legacy entry point's options and native output, verbatim."""

    file: str  # path relative to the corpus root, with "/" separators
    name: str  # e.g. "cli.compress" (file name without .json)
    surface: str
    entry: str
    options: Mapping[str, Any]
    env_flags: Mapping[str, Any]
    output: Any
    error: Mapping[str, Any] | None
    output_provenance: tuple[Any, ...] | None
    diagnostics: Mapping[str, Any]
    calls: tuple[Mapping[str, Any], ...] | None
    raw: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    input_file: str
    input: Mapping[str, Any] = field(repr=False)
    captures: tuple[Capture, ...]
    digest: str  # sha256 over the scenario's files (names + bytes), sorted

    @property
    def kind(self) -> str:
        if self.input.get("memory_ops"):
            return "memory"
        if self.input.get("context_center"):
            return "ide"
        return "messages"


@dataclass(frozen=True, slots=True)
class Corpus:
    root: str
    scenarios: tuple[Scenario, ...]
    quarantined: tuple[FixtureError, ...]
    digest: str  # sha256 over the sorted scenario digests (the fixture corpus identity)


# --- tiny declarative checks ------------------------------------------------------------

Check = Callable[[Any, str, str], None]


def _fail(src: str, ptr: str, expected: str, value: Any) -> None:
    raise FixtureError(src, ptr, expected, _describe(value))


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _obj(value: Any, src: str, ptr: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        _fail(src, ptr, "an object", value)
    return value  # type: ignore[no-any-return]


def _require(obj: Mapping[str, Any], key: str, src: str, ptr: str) -> Any:
    if key not in obj:
        raise FixtureError(src, join_pointer(ptr, key), f"a required field {key!r}", "nothing")
    return obj[key]


def _str(value: Any, src: str, ptr: str) -> str:
    if not isinstance(value, str):
        _fail(src, ptr, "a string", value)
    return value  # type: ignore[no-any-return]


def _list(value: Any, src: str, ptr: str) -> list[Any]:
    if not isinstance(value, list):
        _fail(src, ptr, "an array", value)
    return value  # type: ignore[no-any-return]


def _validate_message(msg: Any, src: str, ptr: str) -> None:
    m = _obj(msg, src, ptr)
    role = _require(m, "role", src, ptr)
    if role not in ROLES:
        _fail(src, join_pointer(ptr, "role"), "one of " + ", ".join(ROLES), role)
    if "content" in m and m["content"] is not None and not isinstance(m["content"], str):
        _fail(src, join_pointer(ptr, "content"), "a string or null", m["content"])
    if "tool_calls" in m:
        for j, call in enumerate(_list(m["tool_calls"], src, join_pointer(ptr, "tool_calls"))):
            cptr = join_pointer(join_pointer(ptr, "tool_calls"), j)
            c = _obj(call, src, cptr)
            _str(_require(c, "id", src, cptr), src, join_pointer(cptr, "id"))
            fn = _obj(_require(c, "function", src, cptr), src, join_pointer(cptr, "function"))
            fptr = join_pointer(cptr, "function")
            _str(_require(fn, "name", src, fptr), src, join_pointer(fptr, "name"))
    if "tool_call_id" in m and not isinstance(m["tool_call_id"], str):
        _fail(src, join_pointer(ptr, "tool_call_id"), "a string", m["tool_call_id"])
    if "pinned" in m and not isinstance(m["pinned"], bool):
        _fail(src, join_pointer(ptr, "pinned"), "a boolean", m["pinned"])


def validate_input(doc: Any, src: str, scenario: str) -> dict[str, Any]:
    d = _obj(doc, src, "")
    if _require(d, "format", src, "") != INPUT_FORMAT:
        _fail(src, "/format", repr(INPUT_FORMAT), d["format"])
    if _str(_require(d, "scenario", src, ""), src, "/scenario") != scenario:
        raise FixtureError(src, "/scenario", f"the folder name {scenario!r}", "another name")
    _list(_require(d, "tags", src, ""), src, "/tags")
    for i, msg in enumerate(_list(_require(d, "messages", src, ""), src, "/messages")):
        _validate_message(msg, src, f"/messages/{i}")
    for i, resp in enumerate(
        _list(_require(d, "provider_responses", src, ""), src, "/provider_responses")
    ):
        _obj(resp, src, f"/provider_responses/{i}")
    if "memory_ops" in d:
        for i, op in enumerate(_list(d["memory_ops"], src, "/memory_ops")):
            o = _obj(op, src, f"/memory_ops/{i}")
            _str(_require(o, "op", src, f"/memory_ops/{i}"), src, f"/memory_ops/{i}/op")
    if "context_center" in d:
        cc = _obj(d["context_center"], src, "/context_center")
        _list(_require(cc, "candidates", src, "/context_center"), src,
              "/context_center/candidates")
    if "followup_messages" in d:
        # a list of batches, each appended after the previous call's output
        for i, batch in enumerate(_list(d["followup_messages"], src, "/followup_messages")):
            for j, msg in enumerate(_list(batch, src, f"/followup_messages/{i}")):
                _validate_message(msg, src, f"/followup_messages/{i}/{j}")
    return d


def validate_capture(doc: Any, src: str, scenario: str, name: str) -> Capture:
    d = _obj(doc, src, "")
    if _require(d, "format", src, "") != CAPTURE_FORMAT:
        _fail(src, "/format", repr(CAPTURE_FORMAT), d["format"])
    if _str(_require(d, "scenario", src, ""), src, "/scenario") != scenario:
        raise FixtureError(src, "/scenario", f"the folder name {scenario!r}", "another name")
    surface = _require(d, "surface", src, "")
    if surface not in SURFACES:
        _fail(src, "/surface", "one of " + ", ".join(SURFACES), surface)
    if not name.startswith(f"{surface}."):
        raise FixtureError(src, "/surface", f"the file prefix {name.split('.')[0]!r}", surface)
    entry = _str(_require(d, "entry", src, ""), src, "/entry")
    options = _obj(_require(d, "options", src, ""), src, "/options")
    env_flags = _obj(_require(d, "env_flags", src, ""), src, "/env_flags")
    output = _require(d, "output", src, "")
    error = _require(d, "error", src, "")
    if error is not None:
        e = _obj(error, src, "/error")
        _str(_require(e, "message", src, "/error"), src, "/error/message")
    prov = d.get("output_provenance")
    if prov is not None:
        _list(prov, src, "/output_provenance")
    calls = d.get("calls")
    if calls is not None:
        for i, c in enumerate(_list(calls, src, "/calls")):
            _obj(c, src, f"/calls/{i}")
    diagnostics = d.get("diagnostics") or {}
    _obj(diagnostics, src, "/diagnostics")
    return Capture(
        file=src, name=name, surface=surface, entry=entry, options=options,
        env_flags=env_flags, output=output, error=error,
        output_provenance=tuple(prov) if prov is not None else None,
        diagnostics=diagnostics, calls=tuple(calls) if calls is not None else None, raw=d,
    )


# --- loading ------------------------------------------------------------------------------


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def scenario_dirs(root: Path) -> list[Path]:
    return sorted((p for p in root.iterdir() if p.is_dir() and (p / "input.json").is_file()),
                  key=lambda p: p.name)


def load_scenario(sdir: Path, root: Path) -> Scenario:
    h = hashlib.sha256()
    files = sorted(p for p in sdir.iterdir() if p.is_file() and p.suffix == ".json")
    for p in files:
        h.update(p.name.encode("utf-8") + b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    input_path = sdir / "input.json"
    src = _rel(input_path, root)
    try:
        doc = load_path(input_path)
    except InputError as exc:
        raise FixtureError(src, exc.pointer, exc.expected, exc.got) from None
    inp = validate_input(doc, src, sdir.name)
    captures = []
    for p in files:
        if p.name == "input.json":
            continue
        csrc = _rel(p, root)
        try:
            cdoc = load_path(p)
        except InputError as exc:
            raise FixtureError(csrc, exc.pointer, exc.expected, exc.got) from None
        captures.append(validate_capture(cdoc, csrc, sdir.name, p.name[: -len(".json")]))
    return Scenario(name=sdir.name, input_file=src, input=inp, captures=tuple(captures),
                    digest="sha256:" + h.hexdigest())


def load_corpus(root: Path | str, only: Iterable[str] | None = None) -> Corpus:
    """Load every scenario under ``root``; bad ones are quarantined, never fatal."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(root, "", "a fixture folder in the legacy-capture/v1 layout",
                         "no such folder")
    wanted = set(only) if only else None
    scenarios: list[Scenario] = []
    quarantined: list[FixtureError] = []
    for sdir in scenario_dirs(root):
        if wanted is not None and sdir.name not in wanted:
            continue
        try:
            scenarios.append(load_scenario(sdir, root))
        except FixtureError as exc:
            quarantined.append(exc)
    h = hashlib.sha256()
    for s in scenarios:
        h.update(f"{s.name}\0{s.digest}\n".encode())
    for q in quarantined:
        h.update(f"quarantined\0{q.source}\n".encode())
    return Corpus(root=str(root), scenarios=tuple(scenarios), quarantined=tuple(quarantined),
                  digest="sha256:" + h.hexdigest())


def compaction_source(capture: Capture, siblings: Mapping[str, Capture]) -> Capture | None:
    """The capture whose compaction a session-store capture persists
    (``input_binding.compaction_source``), or None for any other capture."""
    if capture.name.removesuffix(".raw-wire") != "cli.jsonl-session":
        return None
    binding = capture.raw.get("input_binding") if isinstance(
        capture.raw.get("input_binding"), Mapping) else {}
    source = str(binding.get("compaction_source") or "cli.compress.json").split(".json")[0]
    return siblings.get(source) or siblings.get("cli.compress")
