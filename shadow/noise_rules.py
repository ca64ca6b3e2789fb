"""Noise rules: reviewed data naming the fields of a legacy capture whose values are
clock- or seed-derived (docs/noise.md).

A rule is *learned*, not guessed: ``shadow capture --repeat 2`` records every input twice
with different clock origins and id seeds, and every field whose value differs between
the two legacy runs becomes a rule (:mod:`shadow.capture.noise`).  Until a person has
reviewed it (``reviewed: true`` with an ``owner`` and a ``reason``) a rule is reported
but **not applied** — as an unreviewed waiver would not be.

File format (JSON, strict parsing; the bundled file is ``shadow/policy/noise.v1.json``)::

    {"schema": "shadow-noise-rules/v1",
     "description": "...",
     "rules": [{"id": "NR-001", "surface": "session-core.memory",
                "path": "/output/ops/*/result/createdAt",
                "evidence": {"source": "repeat", "scenarios": 5, "values": 22,
                             "differing": 22},
                "reviewed": true, "owner": "memory-team",
                "reason": "MemoryStore now(): clock-derived"}]}

* ``surface`` — the capture it applies to: the capture file's name without ``.json``
  (``cli.compress.raw-wire`` is its own surface), exactly;
* ``path`` — a JSON pointer into the capture file, starting at ``/output``, ``/calls``,
  ``/diagnostics`` or ``/error`` (never the call's identity: options, entry, …, and never
  ``/determinism``); ``*`` stands for every array element or object member, and the
  token ``~json`` (not a valid RFC 6901 escape, so never a real key) descends into a
  string that holds JSON text (``/output/raw_jsonl_lines/*/~json/timestamp``);
* ``evidence`` — where the rule comes from (``repeat``: a control-vs-control capture run;
  ``manifest``: derived from the capture MANIFEST's ``determinism`` section) and how many
  scenario pairs showed it, how many values were compared and — for a repeat run — how
  many of them differed (fewer than compared: the field is not always volatile, look
  twice); never a value.

Applying a rule (:func:`neutralise`) replaces each value at its path by a placeholder:
a number by ``0`` (a clock value or a duration), anything else by ``"~noise.<n>"``,
numbered by first occurrence over the document — one numbering for all the document's
rules, so equal values stay equal (an id and the references to it keep matching).  Two
runs that differ only by a consistent renaming or a clock shift neutralise to the same
document.  ``null`` and a
string the scenario's ``input.json`` itself holds (an id the input names, a timestamp the
input gives) are never replaced: the run did not make them.  A rule never touches a
field it does not name.  Every error names the file, the JSON pointer and what was
expected; a broken file is an input error (exit 2).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from shadow.boundary import load_path, pointer_escape
from shadow.errors import InputError
from shadow.policy_file import entries

SCHEMA: Final = "shadow-noise-rules/v1"
DEFAULT_PATH: Final = Path(__file__).resolve().parent / "policy" / "noise.v1.json"
ANY: Final = "*"
JSON_TEXT: Final = "~json"  # descend into a string holding JSON text
#: where a rule may point: a capture's results, never the call's identity or /determinism
ROOTS: Final = ("output", "calls", "diagnostics", "error")
SOURCES: Final = ("repeat", "manifest")
PLACEHOLDER: Final = "~noise."
_FIELDS: Final = ("id", "surface", "path", "evidence", "reviewed", "owner", "reason")
_EVIDENCE: Final = ("source", "scenarios", "values", "differing")
_SURFACE: Final = re.compile(r"^(cli|desktop|vscode|jetbrains|session-core)(\.[a-z0-9-]+)+$")
_TOKEN: Final = re.compile(r"^(?:[^~]|~[01])*$")


@dataclass(frozen=True, slots=True)
class Evidence:
    source: str  # repeat | manifest
    scenarios: int  # scenario pairs (or fixtures) that showed the field
    values: int  # values compared at the field
    differing: int | None = None  # of those, how many differed (a repeat run's count)

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "scenarios": self.scenarios,
                               "values": self.values}
        if self.differing is not None:
            out["differing"] = self.differing
        return out


@dataclass(frozen=True, slots=True)
class NoiseRule:
    id: str
    surface: str
    path: str
    evidence: Evidence
    reviewed: bool = False
    owner: str | None = None
    reason: str | None = None

    @property
    def tokens(self) -> tuple[str, ...]:
        """The path's tokens, still escaped (``~0``/``~1``), so ``~json`` is never a key."""
        return tuple(self.path.split("/")[1:])

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "surface": self.surface, "path": self.path,
                               "evidence": self.evidence.to_wire(), "reviewed": self.reviewed}
        if self.owner is not None:
            out["owner"] = self.owner
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True, slots=True)
class NoiseRules:
    """A parsed rule file: the rules in file order and where they came from."""

    rules: tuple[NoiseRule, ...] = ()
    source: str = "<no noise rules>"
    description: str | None = None

    @property
    def applied(self) -> tuple[NoiseRule, ...]:
        """Reviewed rules: the only ones :func:`neutralise` is given by the run."""
        return tuple(r for r in self.rules if r.reviewed)

    @property
    def unreviewed(self) -> tuple[NoiseRule, ...]:
        return tuple(r for r in self.rules if not r.reviewed)

    def for_surface(self, surface: str) -> tuple[NoiseRule, ...]:
        return tuple(r for r in self.applied if r.surface == surface)


NO_RULES: Final = NoiseRules()


# --------------------------------------------------------------------------- paths


def check_path(path: Any, src: str, ptr: str) -> str:
    """A rule's path as the module docstring says, or an InputError at ``ptr``."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise InputError(src, ptr, "a JSON pointer starting with '/'",
                         type(path).__name__ if not isinstance(path, str) else "another string")
    tokens = path.split("/")[1:]
    if tokens[0] not in ROOTS:
        raise InputError(src, ptr, "a path under " + ", ".join(f"/{r}" for r in ROOTS)
                         + " (never the call's identity or /determinism)",
                         f"/{tokens[0]}"[:60] if _TOKEN.match(tokens[0]) else "another root")
    for tok in tokens[1:]:
        if tok != JSON_TEXT and not _TOKEN.match(tok):
            raise InputError(src, ptr, "tokens escaped as RFC 6901 (~0, ~1), '*' or '~json'",
                             "a bad '~' escape")
    if tokens[-1] == JSON_TEXT:
        raise InputError(src, ptr, "a path naming a field (not ending in '~json')",
                         "a path ending in '~json'")
    return path


def covers(pattern: Sequence[str], tokens: Sequence[str]) -> bool:
    """Whether a rule path's tokens select every field ``tokens`` name (``*`` in the
    pattern matches any one token but ``~json``)."""
    if len(pattern) != len(tokens):
        return False
    return all(p == t or (p == ANY and t != JSON_TEXT) for p, t in zip(pattern, tokens,
                                                                        strict=True))


# --------------------------------------------------------------------------- the file


def _int(v: Any, src: str, ptr: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise InputError(src, ptr, "an integer >= 0", type(v).__name__)
    return v


def _evidence(v: Any, src: str, ptr: str) -> Evidence:
    if not isinstance(v, Mapping):
        raise InputError(src, ptr, "an evidence object {source, scenarios, values}",
                         type(v).__name__)
    extra = sorted(set(v) - set(_EVIDENCE))
    if extra:
        raise InputError(src, f"{ptr}/{pointer_escape(extra[0])}", "only "
                         + ", ".join(_EVIDENCE), "an unknown field")
    if v.get("source") not in SOURCES:
        raise InputError(src, f"{ptr}/source", "one of " + ", ".join(SOURCES),
                         "nothing" if "source" not in v else "another value")
    values = _int(v.get("values"), src, f"{ptr}/values")
    differing = None
    if "differing" in v:
        differing = _int(v["differing"], src, f"{ptr}/differing")
        if differing > values:
            raise InputError(src, f"{ptr}/differing", "at most the values compared",
                             "more")
    return Evidence(v["source"], _int(v.get("scenarios"), src, f"{ptr}/scenarios"),
                    values, differing)


def parse(doc: Any, src: str = "<noise rules>") -> NoiseRules:
    out: list[NoiseRule] = []
    seen: dict[tuple[str, str], str] = {}
    for ptr, r in entries(doc, src, schema=SCHEMA, key="rules", noun="noise rule",
                          fields=_FIELDS, required=("id", "surface", "path"),
                          top=("schema", "description", "rules")):
        if not _SURFACE.match(r["surface"]):
            raise InputError(src, f"{ptr}/surface", "a capture name <surface>.<entry> "
                             "(e.g. session-core.memory)", "another string")
        path = check_path(r["path"], src, f"{ptr}/path")
        key = (r["surface"], path)
        if key in seen:
            raise InputError(src, f"{ptr}/path", "one rule per surface and path",
                             f"the path of {seen[key]}"[:80])
        seen[key] = r["id"]
        reviewed = r.get("reviewed")
        if not isinstance(reviewed, bool):
            raise InputError(src, f"{ptr}/reviewed", "true or false",
                             "nothing" if "reviewed" not in r else type(reviewed).__name__)
        texts: dict[str, str | None] = {}
        for name in ("owner", "reason"):
            value = r.get(name)
            if value is None and name not in r and not reviewed:
                texts[name] = None
                continue
            if not isinstance(value, str) or not value.strip():
                raise InputError(src, f"{ptr}/{name}",
                                 "a non-empty string (a reviewed rule names its "
                                 f"{name})" if reviewed else "a non-empty string",
                                 "nothing" if name not in r else type(value).__name__)
            texts[name] = value
        out.append(NoiseRule(r["id"], r["surface"], path,
                             _evidence(r.get("evidence"), src, f"{ptr}/evidence"),
                             reviewed, texts["owner"], texts["reason"]))
    description = doc.get("description")
    if description is not None and not isinstance(description, str):
        raise InputError(src, "/description", "a string", type(description).__name__)
    return NoiseRules(tuple(out), src, description)


def load(path: Path | str | None = None) -> NoiseRules:
    """The rule file at ``path`` (default: the bundled ``shadow/policy/noise.v1.json``)."""
    p = Path(path) if path is not None else DEFAULT_PATH
    return parse(load_path(p), str(p))


def to_doc(rules: Iterable[NoiseRule], description: str | None = None) -> dict[str, Any]:
    """The file's document: rules sorted by (surface, path)."""
    doc: dict[str, Any] = {"schema": SCHEMA,
                           "rules": [r.to_wire() for r in sorted(
                               rules, key=lambda r: (r.surface, r.path, r.id))]}
    if description is not None:
        doc["description"] = description
    return doc


def render(doc: Mapping[str, Any]) -> str:
    """Deterministic bytes: keys sorted, indent 2, UTF-8 text, a final newline."""
    return json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------- applying


def value_key(value: Any) -> tuple[str, str]:
    """A value's identity for the placeholder numbering (``True`` is not ``1``)."""
    kind = "n" if isinstance(value, int | float) and not isinstance(value, bool) else \
        "s" if isinstance(value, str) else "j"
    return kind, value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _scalars(value: Any) -> Iterator[Any]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _scalars(v)
    elif isinstance(value, list):
        for v in value:
            yield from _scalars(v)
    else:
        yield value
        inner = json_text(value)
        if inner is not None:
            yield from _scalars(inner)


def json_text(value: Any) -> Any:
    """The JSON container a string holds (``{...}`` or ``[...]``), else None."""
    if not isinstance(value, str) or value[:1] not in ("{", "["):
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict | list) else None


def given_values(input_doc: Any) -> frozenset[tuple[str, str]]:
    """Every string ``input.json`` holds (also inside JSON text): identifiers and stamps
    the run was given, which :func:`neutralise` never replaces.  (Numbers are not: a
    small count or a zero coincides too easily; a clock value is never an input's.)"""
    return frozenset(value_key(v) for v in _scalars(input_doc) if isinstance(v, str))


class _Numbering:
    def __init__(self, given: frozenset[tuple[str, str]]) -> None:
        self.given = given
        self.seen: dict[tuple[str, str], str] = {}

    def replace(self, value: Any) -> tuple[Any, bool]:
        if value is None:
            return value, False
        tag = value_key(value)
        if tag in self.given:
            return value, False
        if tag[0] == "n":
            return 0, True
        if tag not in self.seen:
            self.seen[tag] = f"{PLACEHOLDER}{len(self.seen) + 1}"
        return self.seen[tag], True


def _apply(node: Any, tokens: Sequence[str], numbering: _Numbering) -> tuple[Any, int]:
    """(``node`` with the values at ``tokens`` replaced, how many); mutates containers
    of the (deep-copied) document in place."""
    if not tokens:
        value, replaced = numbering.replace(node)
        return value, int(replaced)
    head, rest = tokens[0], tokens[1:]
    if head == JSON_TEXT:
        inner = json_text(node)
        if inner is None:
            return node, 0
        inner, n = _apply(inner, rest, numbering)
        return (json.dumps(inner, ensure_ascii=False, separators=(",", ":")), n) if n else \
            (node, 0)
    count = 0
    if isinstance(node, list):
        if head == ANY:
            slots: Iterable[Any] = range(len(node))
        elif head.isdigit() and (head == "0" or not head.startswith("0")) \
                and int(head) < len(node):
            slots = (int(head),)
        else:
            slots = ()
    elif isinstance(node, dict):
        keys = {pointer_escape(k): k for k in node}
        slots = list(node) if head == ANY else ((keys[head],) if head in keys else ())
    else:
        return node, 0
    for slot in slots:
        node[slot], n = _apply(node[slot], rest, numbering)
        count += n
    return node, count


def neutralise(doc: Mapping[str, Any], rules: Sequence[NoiseRule],
               given: frozenset[tuple[str, str]] = frozenset()
               ) -> tuple[dict[str, Any], dict[str, int]]:
    """(a copy of ``doc`` with every value the rules name replaced, values replaced per
    rule id) — see the module docstring.  ``doc`` is never changed; rules apply in
    (path, id) order so the numbering is a function of the document."""
    out: dict[str, Any] = copy.deepcopy(dict(doc))
    numbering = _Numbering(given)
    counts: dict[str, int] = {}
    for rule in sorted(rules, key=lambda r: (r.path, r.id)):
        out, n = _apply(out, rule.tokens, numbering)
        if n:
            counts[rule.id] = counts.get(rule.id, 0) + n
    return out, counts


def usage_report(rules: NoiseRules, applied: Mapping[str, tuple[int, int]]
                 ) -> dict[str, Any]:
    """Report data: rules that neutralised values (``captures``, ``values``), reviewed
    rules that matched nothing, and unreviewed rules (never applied)."""
    def short(r: NoiseRule) -> dict[str, Any]:
        return {"id": r.id, "surface": r.surface, "path": r.path,
                "evidence": r.evidence.to_wire()}

    used = [{**short(r), "captures": applied[r.id][0], "values": applied[r.id][1]}
            for r in rules.applied if r.id in applied]
    return {"file": Path(rules.source).name,
            "applied": sorted(used, key=lambda x: x["id"]),
            "unused": sorted(r.id for r in rules.applied if r.id not in applied),
            "unreviewed": sorted((short(r) for r in rules.unreviewed),
                                 key=lambda x: x["id"])}
