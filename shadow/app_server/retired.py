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
from shadow.policy_file import entries

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
    """The registry, validated (file and JSON pointer on any problem;
    :func:`shadow.policy_file.entries`: documented fields, non-empty, unique names)."""
    out: list[Retired] = []
    for ptr, e in entries(doc, src, schema=SCHEMA, key="retired", noun="retired entry point",
                          fields=FIELDS, required=FIELDS, top=("schema", "retired"),
                          ident="name"):
        if e["match"] not in ("exact", "prefix"):
            raise InputError(src, f"{ptr}/match", '"exact" or "prefix"', "another value")
        if (e["match"] == "prefix") != e["name"].endswith("*"):
            raise InputError(src, f"{ptr}/name", "a name ending in * exactly when match is "
                             "prefix", "another name")
        out.append(Retired(**{f: e[f] for f in FIELDS}))
    if not out:
        raise InputError(src, "/retired", "a non-empty array of retired entry points",
                         "an empty array")
    return out


def load(path: Path | None = None) -> list[Retired]:
    p = path or DEFAULT_PATH
    return parse(load_path(p), p.as_posix())


def find(registry: Sequence[Retired], method: str) -> Retired | None:
    """The registry entry retiring ``method``, if any."""
    return next((r for r in registry if r.selects(method)), None)
