"""Load and validate legacy captures (``legacy-capture/v1`` layout) as fixtures.

A corpus folder holds ``<scenario>/input.json`` (``legacy-capture-input/v1``) and
``<scenario>/<surface>.<entry>.json`` (``legacy-capture/v1``) files, exactly as the
capture tool writes them.  Captures are ground truth: this module never changes
them.  A file that fails validation becomes a typed :class:`FixtureError` (file,
JSON pointer, expectation) and its scenario is *quarantined*: reported, skipped,
and the run goes on.

What counts (docs/fixtures.md, "Quarantine"): every top-level folder of the corpus is
a scenario folder (hidden entries, starting with ``.``, are ignored; top-level regular
files such as ``MANIFEST.json`` or a README are corpus metadata, never replayed).  A
scenario folder without a readable regular ``input.json``, a ``*.json`` entry that is not
a regular readable file (a directory, a FIFO — never opened —, a symlink loop, a
dangling symlink, a permission error), bad JSON, a capture whose ``output`` does not
have its surface's shape (``OUTPUT_SHAPES``) and two captures of the same call
(surface, entry, options, env_flags, input_binding) that disagree are all quarantined.

Scenario order is always sorted by name, so a listing of the folder in another
order yields identical results.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from shadow.boundary import join_pointer, loads, read_regular, regular_file_problem
from shadow.canonical import js_safe_integer
from shadow.corpus_ledger import MANIFEST_FORMAT as MANIFEST_FORMAT  # re-exported
from shadow.corpus_ledger import QUARANTINED, CorpusLedger, Row
from shadow.errors import FixtureError, InputError, describe
from shadow.noise_rules import NO_RULES, NoiseRules, given_values, neutralise

if TYPE_CHECKING:
    from shadow.corpus_source import CorpusSource

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
    #: (rule id, path, values replaced) of each reviewed noise rule that neutralised
    #: values of this capture (:func:`neutralised`); the fields above are then the
    #: neutralised capture's, and ``original`` the capture as the file holds it
    noise: tuple[tuple[str, str, int], ...] = ()
    original: Capture | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    input_file: str
    input: Mapping[str, Any] = field(repr=False)
    captures: tuple[Capture, ...]
    digest: str  # sha256 over the scenario's files (names + bytes), sorted

    @property
    def synthetic(self) -> bool:
        """Written by ``shadow synth`` (docs/scale.md): the gate refuses it as evidence."""
        return self.input.get("synthetic") is True

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

Check = Callable[[Any, str, str], object]  # a check raises; what it returns is unused


def _fail(src: str, ptr: str, expected: str, value: Any) -> None:
    raise FixtureError(src, ptr, expected, _describe(value))


_describe = describe


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


def _opt(obj: Mapping[str, Any], key: str, check: Check, src: str, ptr: str) -> None:
    """``check`` the field ``key`` when present."""
    if key in obj:
        check(obj[key], src, join_pointer(ptr, key))


def _int(value: Any, src: str, ptr: str, minimum: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        _fail(src, ptr, "an integer", value)
    if minimum is not None and value < minimum:
        raise FixtureError(src, ptr, f"an integer >= {minimum}", "a smaller integer")


def _int_or_numeric_text(value: Any, src: str, ptr: str) -> None:
    """An integer, or text the Context Center reads with ``Number()`` as one (``"1024"``);
    other text ("big") is not a budget."""
    if not isinstance(value, str):
        _int(value, src, ptr)
    elif js_safe_integer(value) is None:
        _fail(src, ptr, "an integer or its decimal text", value)


def _bool(value: Any, src: str, ptr: str) -> None:
    if not isinstance(value, bool):
        _fail(src, ptr, "a boolean", value)


def _str_or_null(value: Any, src: str, ptr: str) -> None:
    if value is not None and not isinstance(value, str):
        _fail(src, ptr, "a string or null", value)


def _obj_or_null(value: Any, src: str, ptr: str) -> None:
    if value is not None:
        _obj(value, src, ptr)


def _strings(value: Any, src: str, ptr: str) -> None:
    for i, v in enumerate(_list(value, src, ptr)):
        _str(v, src, join_pointer(ptr, i))


def _objects(value: Any, src: str, ptr: str) -> None:
    for i, v in enumerate(_list(value, src, ptr)):
        _obj(v, src, join_pointer(ptr, i))


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
    _opt(m, "name", _str, src, ptr)
    _opt(m, "_cc_replay", _obj, src, ptr)


def _messages(value: Any, src: str, ptr: str) -> None:
    for i, msg in enumerate(_list(value, src, ptr)):
        _validate_message(msg, src, join_pointer(ptr, i))


def _messages_or_refused(value: Any, src: str, ptr: str) -> None:
    """Messages, or null: the store refused the read (an unverified, torn transcript)."""
    if value is not None:
        _messages(value, src, ptr)


def _list_or_refused(value: Any, src: str, ptr: str) -> None:
    if value is not None:
        _list(value, src, ptr)


def _validate_exchange(resp: Any, src: str, ptr: str) -> None:
    """One recorded provider exchange (``provider_responses[i]``)."""
    r = _obj(resp, src, ptr)
    if "surface" in r and r["surface"] not in SURFACES:
        _fail(src, join_pointer(ptr, "surface"), "one of " + ", ".join(SURFACES), r["surface"])
    _opt(r, "entry", _str, src, ptr)
    _opt(r, "call", lambda v, s, p: _int(v, s, p, 1), src, ptr)
    _opt(r, "variant", _str_or_null, src, ptr)
    _opt(r, "request", _obj_or_null, src, ptr)
    _opt(r, "error", _obj_or_null, src, ptr)
    _opt(r, "op", lambda v, s, p: _int(v, s, p, 0), src, ptr)


def _validate_candidate(cand: Any, src: str, ptr: str) -> None:
    """One IDE context-center candidate (``context_center.candidates[i]``)."""
    c = _obj(cand, src, ptr)
    _opt(c, "kind", _str, src, ptr)
    # the Context Center reads a missing or null text field as its default (String(v ?? ""))
    for key in ("source", "identity", "content", "id", "scope", "label", "autoReason"):
        _opt(c, key, _str_or_null, src, ptr)
    for key in ("pinned", "refreshable"):
        _opt(c, key, _bool, src, ptr)


def validate_input(doc: Any, src: str, scenario: str) -> dict[str, Any]:
    d = _obj(doc, src, "")
    if _require(d, "format", src, "") != INPUT_FORMAT:
        _fail(src, "/format", repr(INPUT_FORMAT), d["format"])
    if _str(_require(d, "scenario", src, ""), src, "/scenario") != scenario:
        raise FixtureError(src, "/scenario", f"the folder name {scenario!r}", "another name")
    _strings(_require(d, "tags", src, ""), src, "/tags")
    _opt(d, "description", _str, src, "")
    _opt(d, "synthetic", _bool, src, "")  # written by `shadow synth`: never release evidence
    _messages(_require(d, "messages", src, ""), src, "/messages")
    for i, resp in enumerate(
        _list(_require(d, "provider_responses", src, ""), src, "/provider_responses")
    ):
        _validate_exchange(resp, src, f"/provider_responses/{i}")
    if d.get("model") is not None:
        model = _obj(d["model"], src, "/model")
        _opt(model, "model", _str_or_null, src, "/model")
        _opt(model, "provider", _str_or_null, src, "/model")
    for key in ("cli_thresholds", "flags"):
        _opt(d, key, _obj, src, "")
    if "memory_ops" in d:
        for i, op in enumerate(_list(d["memory_ops"], src, "/memory_ops")):
            optr = f"/memory_ops/{i}"
            o = _obj(op, src, optr)
            _str(_require(o, "op", src, optr), src, f"{optr}/op")
            for key in ("as", "ref", "id"):
                _opt(o, key, _str, src, optr)
            _opt(o, "patch", _obj, src, optr)
    if "context_center" in d:
        cc = _obj(d["context_center"], src, "/context_center")
        for i, cand in enumerate(_list(_require(cc, "candidates", src, "/context_center"), src,
                                       "/context_center/candidates")):
            _validate_candidate(cand, src, f"/context_center/candidates/{i}")
        for key in ("pinnedIds", "removedIds", "refreshedIds"):
            _opt(cc, key, _strings, src, "/context_center")
        _opt(cc, "tokenBudget", _int_or_numeric_text, src, "/context_center")
        _opt(cc, "workspaceId", _str_or_null, src, "/context_center")
    if "followup_messages" in d:
        # a list of batches, each appended after the previous call's output
        for i, batch in enumerate(_list(d["followup_messages"], src, "/followup_messages")):
            _messages(batch, src, f"/followup_messages/{i}")
    return d


# --- the native output of each capture kind --------------------------------------------
#
# What each surface adapter (shadow/surfaces) reads from a capture's ``output``: an object
# with these fields, ``required`` (name -> check) and ``optional`` ones (checked when
# present).  A capture named ``<kind>`` or ``<kind>.<variant>`` (``cli.compress.raw-wire``)
# has its kind's shape; a capture no kind names is reported as ``unclassified`` instead.


@dataclass(frozen=True, slots=True)
class OutputShape:
    required: Mapping[str, Check]
    optional: Mapping[str, Check] = field(default_factory=dict)


def _chips(value: Any, src: str, ptr: str) -> None:
    for i, chip in enumerate(_list(value, src, ptr)):
        cptr = join_pointer(ptr, i)
        c = _obj(chip, src, cptr)
        _str(_require(c, "id", src, cptr), src, join_pointer(cptr, "id"))
        _str(_require(c, "status", src, cptr), src, join_pointer(cptr, "status"))
        for key in ("content", "kind", "source", "reason", "scope", "label"):
            _opt(c, key, _str_or_null, src, cptr)
        _opt(c, "pinned", _bool, src, cptr)


def _memory_ops(value: Any, src: str, ptr: str) -> None:
    for i, op in enumerate(_list(value, src, ptr)):
        optr = join_pointer(ptr, i)
        o = _obj(op, src, optr)
        _int(_require(o, "index", src, optr), src, join_pointer(optr, "index"), 0)
        _str(_require(o, "op", src, optr), src, join_pointer(optr, "op"))
        _opt(o, "error", _obj_or_null, src, optr)


_CHAIN: Final = {"messages": _messages}
_CLI_EVENTS: Final = {"stats": _obj, "usageEvent": _obj_or_null,
                      "usageUnknownEvent": _obj_or_null, "degradedEvent": _obj_or_null}
_CONTEXT_CENTER: Final = OutputShape(
    {"chips": _chips}, {"schema": _str_or_null, "selectionAlgorithm": _str_or_null,
                        "budget": _obj_or_null, "workspaceId": _str_or_null})
OUTPUT_SHAPES: Final[Mapping[str, OutputShape]] = {
    "cli.compress": OutputShape(_CHAIN, {"stats": _obj}),
    "cli.provider-compaction": OutputShape(_CHAIN, _CLI_EVENTS),
    "cli.jsonl-session": OutputShape(
        {"rebuildMessages": _messages, "readVerifiedMessages": _messages_or_refused,
         "raw_jsonl_lines": _strings, "verifySession": _obj},
        {"steps": _objects, "readVerifiedMessages_provenance": _list_or_refused,
         "session_file": _str_or_null}),
    "desktop.compress": OutputShape(_CHAIN, {"strategy": _str_or_null}),
    "desktop.context-engineering": OutputShape(_CHAIN, {"metadata": _obj}),
    "vscode.context-center": _CONTEXT_CENTER,
    "jetbrains.context-center": _CONTEXT_CENTER,
    "session-core.memory": OutputShape(
        {"ops": _memory_ops}, {"events": _list, "refs": _obj}),
}


def capture_kind(name: str) -> str | None:
    """The capture kind (an ``OUTPUT_SHAPES`` key) a capture name belongs to, or None."""
    if name in OUTPUT_SHAPES:
        return name
    return max((k for k in OUTPUT_SHAPES if name.startswith(k + ".")), key=len, default=None)


def _validate_output(output: Any, error: Any, kind: str | None, src: str, ptr: str) -> None:
    """A native output: null only with an error, else its kind's object shape."""
    if output is None:
        if error is None:
            raise FixtureError(src, ptr, "the entry point's return value (or an error)",
                               "null output and no error")
        return
    if kind is None:
        return  # unclassified: no adapter reads it
    shape = OUTPUT_SHAPES[kind]
    out = _obj(output, src, ptr)
    for key, check in shape.required.items():
        check(_require(out, key, src, ptr), src, join_pointer(ptr, key))
    for key, check in shape.optional.items():
        _opt(out, key, check, src, ptr)


def _validate_error(error: Any, src: str, ptr: str) -> None:
    if error is not None:
        e = _obj(error, src, ptr)
        _str(_require(e, "message", src, ptr), src, join_pointer(ptr, "message"))
        _opt(e, "name", _str_or_null, src, ptr)


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
    _opt(d, "input_binding", _obj_or_null, src, "")
    kind = capture_kind(name)
    output = _require(d, "output", src, "")
    error = _require(d, "error", src, "")
    _validate_error(error, src, "/error")
    prov = d.get("output_provenance")
    if prov is not None:
        _list(prov, src, "/output_provenance")
    calls = d.get("calls")
    if calls is not None:
        for i, c in enumerate(_list(calls, src, "/calls")):
            cptr = f"/calls/{i}"
            call = _obj(c, src, cptr)
            _validate_error(call.get("error"), src, f"{cptr}/error")
            _validate_output(call.get("output"), call.get("error"), kind, src, f"{cptr}/output")
            _opt(call, "output_provenance", lambda v, s, p: v is None or _list(v, s, p),
                 src, cptr)
    _validate_output(output, error, kind, src, "/output")
    diagnostics = d.get("diagnostics") or {}
    _obj(diagnostics, src, "/diagnostics")
    return Capture(
        file=src, name=name, surface=surface, entry=entry, options=options,
        env_flags=env_flags, output=output, error=error,
        output_provenance=tuple(prov) if prov is not None else None,
        diagnostics=diagnostics, calls=tuple(calls) if calls is not None else None, raw=d,
    )


def neutralised(cap: Capture, rules: NoiseRules, given: frozenset[tuple[str, str]],
                scenario: str) -> Capture:
    """``cap`` with the values its reviewed noise rules name neutralised
    (:func:`shadow.noise_rules.neutralise`) and validated again; ``cap`` itself when no
    rule replaced anything."""
    mine = rules.for_surface(cap.name)
    if not mine:
        return cap
    raw, counts = neutralise(cap.raw, mine, given)
    if not counts:
        return cap
    try:
        out = validate_capture(raw, cap.file, scenario, cap.name)
    except FixtureError as exc:
        raise FixtureError(exc.source, exc.pointer, f"{exc.expected} (after the noise rules "
                           f"{', '.join(sorted(counts))})", exc.got) from None
    paths = {r.id: r.path for r in mine}
    return replace(out, noise=tuple((rid, paths[rid], n) for rid, n in sorted(counts.items())),
                   original=cap)


def _same_call(c: Capture) -> str:
    """What identifies one legacy call: surface, entry, options, env flags, input binding."""
    return json.dumps([c.surface, c.entry, c.options, c.env_flags, c.raw.get("input_binding")],
                      sort_keys=True, ensure_ascii=False)


def check_consistent(captures: Iterable[Capture]) -> None:
    """Two captures of the same call (``_same_call``) must record the same result: a
    :class:`FixtureError` naming the later file and the first field that disagrees."""
    first: dict[str, Capture] = {}
    for c in captures:
        prior = first.setdefault(_same_call(c), c)
        if prior is c:
            continue
        for key in ("output", "error", "calls"):
            if prior.raw.get(key) != c.raw.get(key):
                raise FixtureError(
                    c.file, f"/{key}",
                    f"the same {key} as {prior.name}.json (same surface, entry, options, "
                    "env_flags and input_binding)", f"a different {key}")


# --- loading ------------------------------------------------------------------------------


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def _hidden(name: str) -> bool:
    return name.startswith(".")


def _listing(folder: Path, src: str, expected: str) -> list[Path]:
    try:
        return sorted((p for p in folder.iterdir() if not _hidden(p.name)),
                      key=lambda p: p.name)
    except OSError as exc:
        raise FixtureError(src, "", expected,
                           "permission denied" if isinstance(exc, PermissionError)
                           else type(exc).__name__) from None


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def scenario_dirs(root: Path) -> list[Path]:
    """The corpus's scenario folders: every top-level folder that is not hidden."""
    return [p for p in _listing(root, root.name, "a readable fixture folder") if _is_dir(p)]


def _read(path: Path, src: str) -> bytes:
    try:
        return read_regular(path, src)
    except InputError as exc:
        raise FixtureError(src, exc.pointer, exc.expected, exc.got) from None


def _parse(data: bytes, src: str) -> Any:
    try:
        return loads(data, src)
    except InputError as exc:
        raise FixtureError(src, exc.pointer, exc.expected, exc.got) from None


def _require_input(names: Iterable[str], sname: str) -> None:
    if "input.json" not in names:
        raise FixtureError(f"{sname}/input.json", "", "a readable regular file input.json "
                           f"({INPUT_FORMAT}) in every scenario folder", "no such file")


def read_scenario_folder(sdir: Path, sname: str) -> list[tuple[str, bytes]]:
    """The ``*.json`` files of one scenario folder, ``(file name, bytes)`` with
    ``input.json`` first, or a :class:`FixtureError` (``sname`` is the folder relative to
    the corpus root): hidden entries are ignored; a subfolder, another spelling of
    ``.json`` or a ``*.json`` entry that is not a regular readable file is refused."""
    listing = _listing(sdir, sname, "a readable scenario folder")
    for p in listing:  # a capture renamed or moved aside must not vanish unnoticed
        if p.suffix.lower() == ".json" and p.suffix != ".json":
            raise FixtureError(f"{sname}/{p.name}", "", "a capture named "
                               "<surface>.<entry>.json (lower-case .json)",
                               "another spelling of .json")
        if _is_dir(p):
            raise FixtureError(f"{sname}/{p.name}", "", "only capture files in a scenario "
                               "folder (the capture tool writes no subfolder)", "a folder")
    entries = [p for p in listing if p.name.endswith(".json")]
    _require_input((p.name for p in entries), sname)
    return [(p.name, _read(p, f"{sname}/{p.name}"))
            for p in sorted(entries, key=lambda p: (p.name != "input.json", p.name))]


def load_scenario(sdir: Path, root: Path, noise: NoiseRules = NO_RULES) -> Scenario:
    """One scenario folder, validated; its captures neutralised by ``noise``'s reviewed
    rules (before two captures of one call are compared: a difference on a learned
    volatile field is not a different result)."""
    sname = _rel(sdir, root)
    return _scenario(sdir.name, sname, read_scenario_folder(sdir, sname), noise)


def scenario_from_files(name: str, files: Sequence[tuple[str, bytes]],
                        noise: NoiseRules = NO_RULES) -> Scenario:
    """The scenario ``name`` from its files as read (``(file name, bytes)``, the
    ``*.json`` files of its folder in any order), validated as :func:`load_scenario`
    validates a folder: the digest over the names and bytes, ``input.json``, every capture,
    the reviewed ``noise`` rules and the consistency of captures of one call; a problem is
    a :class:`FixtureError` naming ``<name>/<file>``."""
    return _scenario(name, name, files, noise)


def files_digest(files: Iterable[tuple[str, bytes]]) -> str:
    """A scenario's digest: sha256 over its files' names and bytes, sorted by name."""
    h = hashlib.sha256()
    for fname, data in sorted(files):
        h.update(fname.encode("utf-8") + b"\0")
        h.update(data)
        h.update(b"\0")
    return "sha256:" + h.hexdigest()


def _scenario(name: str, sname: str, files: Sequence[tuple[str, bytes]],
              noise: NoiseRules) -> Scenario:
    data = dict(files)
    if len(data) != len(files):
        dup = sorted(f for f in data if sum(1 for g, _ in files if g == f) > 1)[0]
        raise FixtureError(f"{sname}/{dup}", "", "one file of each name in a scenario",
                           "two files of that name")
    _require_input(data, sname)
    input_src = f"{sname}/input.json"
    inp = validate_input(_parse(data["input.json"], input_src), input_src, name)
    captures = []
    for fname in sorted(data):
        if fname == "input.json":
            continue
        csrc = f"{sname}/{fname}"
        captures.append(validate_capture(_parse(data[fname], csrc), csrc, name,
                                         fname[: -len(".json")]))
    if noise.applied:
        given = given_values(inp)
        captures = [neutralised(c, noise, given, name) for c in captures]
    check_consistent(captures)
    return Scenario(name=name, input_file=input_src, input=inp, captures=tuple(captures),
                    digest=files_digest(files))


def _top_level(root: Path) -> tuple[list[Path], list[FixtureError], list[Path]]:
    """(scenario folders, quarantined top-level entries, corpus metadata files): a
    top-level entry that is neither a folder nor a regular file (a FIFO, a dangling or
    looping symlink…) is quarantined."""
    try:
        listing = _listing(root, str(root), "a readable fixture folder")
    except FixtureError as exc:
        raise InputError(root, "", exc.expected, exc.got) from None
    dirs: list[Path] = []
    odd: list[FixtureError] = []
    files: list[Path] = []
    for p in listing:
        if _is_dir(p):
            dirs.append(p)
            continue
        problem = regular_file_problem(p)
        if problem is not None:
            odd.append(FixtureError(p.name, "", "a scenario folder or a regular corpus "
                                    "metadata file", problem))
        else:
            files.append(p)
    return dirs, odd, files


def load_corpus(root: Path | str, only: Iterable[str] | None = None,
                noise: NoiseRules = NO_RULES) -> Corpus:
    """Load every scenario of the corpus at ``root`` — a folder, a ``.tar``/``.tar.gz``/
    ``.tgz``/``.zip`` archive of one or a ``shadow-corpus-shards/v1`` listing
    (:func:`shadow.corpus_source.open_source`, docs/fixtures.md "Corpus sources"); bad
    scenarios are quarantined, never fatal.  The reviewed rules of ``noise`` neutralise
    learned volatile fields of every capture (docs/noise.md); the corpus digest is over the
    files' bytes, as they are.

    A corpus with no scenario folder at all is an :class:`InputError` (nothing to judge is
    never a GO)."""
    from shadow.corpus_source import open_source  # it reads folders with this module

    with open_source(root) as source:
        return corpus_from_source(source, only, noise)


def corpus_from_source(source: CorpusSource, only: Iterable[str] | None = None,
                       noise: NoiseRules = NO_RULES) -> Corpus:
    """:func:`load_corpus` over an open :class:`~shadow.corpus_source.CorpusSource`:
    the scenarios are read and validated one at a time.  A scenario name a later shard
    repeats is quarantined there ("also in <origin>")."""
    empty = source.nothing_to_judge()
    if empty is not None:
        raise empty
    wanted = set(only) if only else None
    ledger = CorpusLedger(source, wanted)
    scenarios: dict[str, Scenario] = {}
    rows: list[Row] = []
    errors: list[FixtureError] = []
    for unit in source.units(wanted):
        if not ledger.see(unit):
            continue
        try:
            if unit.error is not None:
                raise unit.error
            sc = scenarios[unit.name] = scenario_from_files(unit.name, unit.files, noise)
        except FixtureError as exc:
            errors.append(exc)
            rows.append((unit.name, QUARANTINED, "", ""))
        else:
            rows.append((sc.name, "loaded", sc.digest, _content_key(sc)))
    done = ledger.finish(rows, errors)
    return Corpus(root=source.root, scenarios=tuple(scenarios[n] for n in done.scenarios),
                  quarantined=done.quarantined, digest=done.digest)


def _content_key(sc: Scenario) -> str:
    """A scenario's content without its name: two scenarios with the same key are one
    piece of evidence (a copied folder with the scenario field renamed)."""
    h = hashlib.sha256()
    docs = [("input.json", sc.input), *((c.file.rsplit("/", 1)[-1], c.raw) for c in sc.captures)]
    for fname, doc in sorted(docs, key=lambda d: d[0]):
        body = {k: v for k, v in doc.items() if k != "scenario"}
        h.update(fname.encode("utf-8") + b"\0")
        h.update(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def compaction_source(capture: Capture, siblings: Mapping[str, Capture]) -> Capture | None:
    """The capture whose compaction a session-store capture persists
    (``input_binding.compaction_source``), or None for any other capture."""
    if capture.name.removesuffix(".raw-wire") != "cli.jsonl-session":
        return None
    raw_binding = capture.raw.get("input_binding")
    binding: Mapping[str, Any] = raw_binding if isinstance(raw_binding, Mapping) else {}
    source = str(binding.get("compaction_source") or "cli.compress.json").split(".json")[0]
    return siblings.get(source) or siblings.get("cli.compress")
