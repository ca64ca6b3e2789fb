"""Intended differences: reviewed data saying *the kernel is right by design*
(docs/intended-differences.md).

File format (JSON, strict parsing; the bundled file is
``shadow/policy/intended-differences.v1.json``)::

    {"schema": "shadow-intended-differences/v1",
     "rules": [{"id": "ID-001",
                "select": {"reason_code": ["item.missing_in_baseline"],
                           "surface": ["cli.*"], "fixture": ["*"],
                           "detail": {"/baseline_reason": ["duplicate"],
                                      "/claim": ["verified"]}},
                "design": "108 §6.1, §14",
                "rationale": "...", "owner": "kernel-team", "review_by": "2027-03-31"}]}

A rule selects divergences by exact reason codes, fixture and surface globs
(``fnmatch``, case-sensitive) and predicates over the divergence detail: each key is a
JSON pointer into ``detail`` and its value the list of allowed JSON scalars (``null``
allows an absent value).  It applies only to a divergence no invariant violation or
falsified claim explains (the attribution engine asks it last), and **never** to a
NO-GO class (design 108 §16), to ``secret.leaked``, to a gate reason or to anything
``blocking`` — such a rule is refused when the file is loaded.  A covered divergence
gets attribution ``intended`` and ``detail.intended_rule``; the report lists every
rule with the divergences it covered, unused rules, and rules whose ``review_by`` date
has passed (overdue: they still apply, and the report says so).

A waiver says "accepted for now"; an intended difference says "the kernel is right by
design" and cites the clause.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from shadow import codes
from shadow.boundary import load_path
from shadow.errors import InputError
from shadow.policy_file import entries, iso_date

SCHEMA: Final = "shadow-intended-differences/v1"
DEFAULT_PATH: Final = Path(__file__).resolve().parent / "policy" / "intended-differences.v1.json"
_FIELDS: Final = ("id", "select", "design", "rationale", "owner", "review_by")
_SELECT: Final = ("reason_code", "surface", "fixture", "detail")
#: codes an intended rule may never cover (design 108 §16 NO-GO classes, secret leaks,
#: missing evidence and the gate's own reasons)
NEVER: Final = frozenset(codes.NOGO_CODES | {"secret.leaked", *codes.ALWAYS_BLOCKING,
                                             "candidate.unavailable", "unclassified"}
                         | {c.code for c in codes.codes()
                            if c.code.startswith(("evidence.", "policy."))})


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    reason_codes: tuple[str, ...]
    surfaces: tuple[str, ...]
    fixtures: tuple[str, ...]
    detail: tuple[tuple[str, tuple[Any, ...]], ...]
    design: str
    rationale: str
    owner: str
    review_by: dt.date

    def selects(self, code: str, fixture: str, surface: str,
                detail: Mapping[str, Any]) -> bool:
        if code not in self.reason_codes:
            return False
        if not any(fnmatch.fnmatchcase(surface, g) for g in self.surfaces):
            return False
        if not any(fnmatch.fnmatchcase(fixture, g) for g in self.fixtures):
            return False
        return all(_resolve(detail, ptr) in allowed for ptr, allowed in self.detail)

    def to_wire(self) -> dict[str, Any]:
        return {"id": self.id, "reason_code": list(self.reason_codes),
                "surface": list(self.surfaces), "fixture": list(self.fixtures),
                "detail": {p: list(v) for p, v in self.detail}, "design": self.design,
                "rationale": self.rationale, "owner": self.owner,
                "review_by": self.review_by.isoformat()}


_MISSING: Final = object()


def _resolve(detail: Mapping[str, Any], pointer: str) -> Any:
    cur: Any = detail
    for raw in pointer.split("/")[1:]:
        tok = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, Mapping) and tok in cur:
            cur = cur[tok]
        elif isinstance(cur, list) and tok.isdigit() and int(tok) < len(cur):
            cur = cur[int(tok)]
        else:
            return None
    return cur if not isinstance(cur, (Mapping, list)) else _MISSING


def _strings(v: Any, src: str, ptr: str, *, exact_codes: bool = False) -> tuple[str, ...]:
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
        raise InputError(src, ptr, "a non-empty array of non-empty strings",
                         type(v).__name__)
    if exact_codes:
        for i, c in enumerate(v):
            if c not in codes.REGISTRY:
                raise InputError(src, f"{ptr}/{i}", "a registered reason code (exact)",
                                 repr(c)[:60])
            if c in NEVER:
                raise InputError(src, f"{ptr}/{i}",
                                 "a code an intended difference may cover (never a NO-GO "
                                 "class, secret.leaked, missing evidence or a gate reason)",
                                 c)
    return tuple(v)


def _detail(v: Any, src: str, ptr: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(v, Mapping):
        raise InputError(src, ptr, "an object of JSON pointer -> allowed values",
                         type(v).__name__)
    out = []
    for key, allowed in sorted(v.items()):
        kptr = f"{ptr}/{key.replace('~', '~0').replace('/', '~1')}"
        if not key.startswith("/"):
            raise InputError(src, kptr, "a JSON pointer starting with '/'", repr(key)[:60])
        if not isinstance(allowed, list) or not allowed or not all(
                x is None or isinstance(x, (str, int, float, bool)) for x in allowed):
            raise InputError(src, kptr, "a non-empty array of JSON scalars",
                             type(allowed).__name__)
        out.append((key, tuple(allowed)))
    return tuple(out)


def parse(doc: Any, src: str = "<intended differences>") -> list[Rule]:
    out: list[Rule] = []
    for ptr, r in entries(doc, src, schema=SCHEMA, key="rules", noun="rule", fields=_FIELDS,
                          required=("id", "design", "rationale", "owner", "review_by"),
                          top=("schema", "description", "rules")):
        sel = r.get("select")
        if not isinstance(sel, Mapping):
            raise InputError(src, f"{ptr}/select", "a selector object", type(sel).__name__)
        extra = sorted(set(sel) - set(_SELECT))
        if extra:
            raise InputError(src, f"{ptr}/select/{extra[0]}", "only " + ", ".join(_SELECT),
                             "an unknown field")
        out.append(Rule(
            id=r["id"],
            reason_codes=_strings(sel.get("reason_code"), src, f"{ptr}/select/reason_code",
                                  exact_codes=True),
            surfaces=_strings(sel.get("surface", ["*"]), src, f"{ptr}/select/surface"),
            fixtures=_strings(sel.get("fixture", ["*"]), src, f"{ptr}/select/fixture"),
            detail=_detail(sel.get("detail", {}), src, f"{ptr}/select/detail"),
            design=r["design"], rationale=r["rationale"], owner=r["owner"],
            review_by=iso_date(r["review_by"], src, f"{ptr}/review_by")))
    return out


def load(path: Path | str | None = None) -> list[Rule]:
    p = Path(path) if path is not None else DEFAULT_PATH
    return parse(load_path(p), str(p))


def file_digest(path: Path | str | None = None) -> str:
    import hashlib

    p = Path(path) if path is not None else DEFAULT_PATH
    return "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest()


def match(rules: Sequence[Rule], code: str, fixture: str, surface: str,
          detail: Mapping[str, Any], severity: str) -> Rule | None:
    """The first rule covering this divergence, or None (never for a NEVER code or a
    blocking divergence)."""
    if code in NEVER or severity == "blocking":
        return None
    return next((r for r in rules if r.selects(code, fixture, surface, detail)), None)


def usage_report(rules: Sequence[Rule], covered: Iterable[Mapping[str, Any]],
                 today: dt.date) -> dict[str, Any]:
    """Rules with what they covered, unused rules and overdue rules (report data)."""
    hits: dict[str, int] = {r.id: 0 for r in rules}
    for d in covered:
        rid = (d.get("detail") or {}).get("intended_rule")
        if rid in hits:
            hits[rid] += 1
    used = [{**r.to_wire(), "divergences": hits[r.id]} for r in rules if hits[r.id]]
    unused = [r.to_wire() for r in rules if not hits[r.id]]
    overdue = [{**r.to_wire(), "divergences": hits[r.id]} for r in rules
               if r.review_by < today]
    return {"applied": sorted(used, key=lambda x: x["id"]),
            "unused": sorted(unused, key=lambda x: x["id"]),
            "overdue": sorted(overdue, key=lambda x: x["id"])}
