"""Retired entry points as data (second seed, "5. cleanup"): each has an owner, a reason,
an exit condition and how it is verified, in ``shadow/policy/retired.v1.json``.

Calling one is answered with a distinct fail-closed error (``-32004``, "Retired method")
naming its replacement: it is never run, never aliased to the replacement, never
dispatched twice and never falls back to anything.  A name is retired exactly
(``"match": "exact"``) or by prefix (``"match": "prefix"``, the name ending in ``*``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from shadow.boundary import load_path
from shadow.errors import InputError

SCHEMA: Final = "shadow-retired/v1"
DEFAULT_PATH: Final = Path(__file__).resolve().parent.parent / "policy" / "retired.v1.json"
FIELDS: Final = ("name", "match", "kind", "replacement", "owner", "reason", "exit_condition",
                 "verified_by")


@dataclass(frozen=True, slots=True)
class Retired:
    name: str
    match: str  # exact | prefix
    kind: str
    replacement: str
    owner: str
    reason: str
    exit_condition: str
    verified_by: str

    def selects(self, method: str) -> bool:
        if self.match == "exact":
            return method == self.name
        return method.startswith(self.name[:-1])

    def to_wire(self) -> dict[str, str]:
        return {f: getattr(self, f) for f in FIELDS}


def parse(doc: Any, src: str = "<retired entry points>") -> list[Retired]:
    """The registry, validated (file and JSON pointer on any problem)."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise InputError(src, "/schema", f'"{SCHEMA}"', "another value")
    entries = doc.get("retired")
    if not isinstance(entries, list) or not entries:
        raise InputError(src, "/retired", "a non-empty array of retired entry points",
                         type(entries).__name__)
    out: list[Retired] = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise InputError(src, f"/retired/{i}", "an object", type(e).__name__)
        extra = sorted(set(e) - set(FIELDS))
        if extra:
            raise InputError(src, f"/retired/{i}/{extra[0]}", "only " + ", ".join(FIELDS),
                             "an unknown field")
        for f in FIELDS:
            if not isinstance(e.get(f), str) or not e[f].strip():
                raise InputError(src, f"/retired/{i}/{f}", "a non-empty string",
                                 "nothing" if f not in e else type(e[f]).__name__)
        if e["match"] not in ("exact", "prefix"):
            raise InputError(src, f"/retired/{i}/match", '"exact" or "prefix"', "another value")
        if (e["match"] == "prefix") != e["name"].endswith("*"):
            raise InputError(src, f"/retired/{i}/name", "a name ending in * exactly when "
                             "match is prefix", "another name")
        out.append(Retired(**{f: e[f] for f in FIELDS}))
    return out


def load(path: Path | None = None) -> list[Retired]:
    p = path or DEFAULT_PATH
    return parse(load_path(p), p.as_posix())


def find(registry: Sequence[Retired], method: str) -> Retired | None:
    """The registry entry retiring ``method``, if any."""
    return next((r for r in registry if r.selects(method)), None)
