"""Waivers: a reviewed file of accepted divergences (docs/waivers.md).

File format (JSON, strict parsing)::

    {"schema": "shadow-waivers/v1",
     "waivers": [{"id": "W-001", "reason_code": "digest.mismatch",
                  "fixture": "*", "surface": "desktop.context-engineering",
                  "owner": "desktop-team", "reason": "cache-friendly prompt cleaning",
                  "expires": "2026-12-31"}]}

A waiver selects divergences by reason code (exact, or a glob such as ``noise.*``) and
fixture / surface globs (``fnmatch``, case-sensitive).  On or after its ``expires``
date (UTC) it stops applying and is reported as expired; a waiver that selected
nothing is reported as unused.  A divergence that is ``blocking`` *and* of a NO-GO
class (design 108 §16) can never be waived: the waiver is reported with the count it
was refused.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from shadow import codes
from shadow.boundary import load_path
from shadow.divergence import Divergence
from shadow.errors import InputError
from shadow.policy_file import entries, iso_date

SCHEMA: Final = "shadow-waivers/v1"
_FIELDS: Final = ("id", "reason_code", "fixture", "surface", "owner", "reason", "expires")


@dataclass(frozen=True, slots=True)
class Waiver:
    id: str
    reason_code: str
    fixture: str
    surface: str
    owner: str
    reason: str
    expires: dt.date

    def selects(self, d: Divergence) -> bool:
        return (fnmatch.fnmatchcase(d.reason_code, self.reason_code)
                and fnmatch.fnmatchcase(d.fixture, self.fixture)
                and fnmatch.fnmatchcase(d.surface, self.surface))

    def to_wire(self) -> dict[str, Any]:
        return {"id": self.id, "reason_code": self.reason_code, "fixture": self.fixture,
                "surface": self.surface, "owner": self.owner, "reason": self.reason,
                "expires": self.expires.isoformat()}


def parse(doc: Any, src: str = "<waivers>") -> list[Waiver]:
    out: list[Waiver] = []
    for ptr, w in entries(doc, src, schema=SCHEMA, key="waivers", noun="waiver",
                          fields=_FIELDS, required=_FIELDS):
        if not any(fnmatch.fnmatchcase(c.code, w["reason_code"]) for c in codes.codes()):
            raise InputError(src, f"{ptr}/reason_code", "a registered reason code (or glob)",
                             "no registered code matches")
        out.append(Waiver(w["id"], w["reason_code"], w["fixture"], w["surface"], w["owner"],
                          w["reason"], iso_date(w["expires"], src, f"{ptr}/expires")))
    return out


def load(path: Path | str) -> list[Waiver]:
    return parse(load_path(Path(path)), str(path))


def waivable(d: Divergence) -> bool:
    return not (d.severity == "blocking" and d.reason_code in codes.NOGO_CODES)


@dataclass(frozen=True, slots=True)
class WaiverOutcome:
    kept: tuple[Divergence, ...]
    waived: tuple[Divergence, ...]
    report: Mapping[str, Any]


def apply(divergences: Sequence[Divergence], waivers: Sequence[Waiver],
          today: dt.date) -> WaiverOutcome:
    """Split divergences into kept and waived; report applied / expired / unused."""
    active = [w for w in waivers if today < w.expires]
    expired = [w for w in waivers if today >= w.expires]
    hits: dict[str, int] = {w.id: 0 for w in waivers}
    refused: dict[str, int] = {w.id: 0 for w in waivers}
    kept: list[Divergence] = []
    waived: list[Divergence] = []
    for d in divergences:
        match = next((w for w in active if w.selects(d)), None)
        if match is None:
            kept.append(d)
        elif not waivable(d):
            refused[match.id] += 1
            kept.append(d)
        else:
            hits[match.id] += 1
            waived.append(d)
    applied = [{**w.to_wire(), "divergences": hits[w.id], "refused": refused[w.id]}
               for w in active if hits[w.id]]
    unused = [{**w.to_wire(), "refused": refused[w.id]} for w in active if not hits[w.id]]
    report = {
        "applied": sorted(applied, key=lambda x: x["id"]),
        "expired": sorted((w.to_wire() for w in expired), key=lambda x: x["id"]),
        "unused": sorted(unused, key=lambda x: x["id"]),
    }
    return WaiverOutcome(tuple(kept), tuple(waived), report)
