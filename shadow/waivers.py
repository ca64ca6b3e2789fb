"""Waivers: a reviewed file of accepted divergences (docs/waivers.md).

File format (JSON, strict parsing)::

    {"schema": "shadow-waivers/v1",
     "waivers": [{"id": "W-001", "reason_code": "digest.mismatch",
                  "fixture": "*", "surface": "desktop.context-engineering",
                  "owner": "desktop-team", "reason": "cache-friendly prompt cleaning",
                  "expires": "2026-12-31"}]}

A waiver selects divergences by reason code (exact, or a glob such as ``noise.*``) and
fixture / surface globs (``fnmatch``, case-sensitive).  On or after its ``expires``
date (UTC) it stops applying and is reported as expired; one that expires within
``warning_days`` (the gate policy's ``waiver_warning_days``, 30) of the run date is also
reported as expiring; an active waiver that selected nothing is reported as unused.

Never waivable (:func:`waivable`): ``fixture.invalid`` (missing evidence), every NO-GO
class of design 108 §16 (``codes.NOGO_CODES``) and ``secret.leaked`` attributed to the
candidate or to both.  A ``reason_code`` that matches every registered code (``*``) or
any never-waivable class is refused when the file is loaded (an :class:`InputError`
naming the file and the pointer); a waiver that still selects a never-waivable
divergence (a candidate's ``secret.leaked``) leaves it in the report and is listed
under ``refused`` with the count.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any, Final

from shadow import codes
from shadow.boundary import load_path
from shadow.divergence import Divergence
from shadow.errors import InputError
from shadow.policy_file import entries, iso_date

SCHEMA: Final = "shadow-waivers/v1"
_FIELDS: Final = ("id", "reason_code", "fixture", "surface", "owner", "reason", "expires")
#: reason codes no waiver may ever select, whatever the attribution
NEVER_WAIVABLE_CODES: Final = frozenset({*codes.ALWAYS_BLOCKING, *codes.NOGO_CODES,
                                         "unclassified"})  # nothing judged it
#: ``secret.leaked`` is never waivable when these attributions carry it
_SECRET_NEVER: Final = frozenset({"candidate", "both"})
WARNING_DAYS: Final = 30  # the gate policy's default waiver_warning_days


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
        _check_selector(w["reason_code"], src, f"{ptr}/reason_code")
        out.append(Waiver(w["id"], w["reason_code"], w["fixture"], w["surface"], w["owner"],
                          w["reason"], iso_date(w["expires"], src, f"{ptr}/expires")))
    return out


def _check_selector(pattern: str, src: str, ptr: str) -> None:
    """A reason-code selector must name registered, waivable codes only."""
    every = [c.code for c in codes.codes()]
    hits = [c for c in every if fnmatch.fnmatchcase(c, pattern)]
    if not hits:
        raise InputError(src, ptr, "a registered reason code (or glob)",
                         "no registered code matches")
    expected = "a reason code (or glob) that selects waivable codes only"
    if len(hits) == len(every):
        raise InputError(src, ptr, expected, "a glob matching every reason code")
    never = sorted(set(hits) & NEVER_WAIVABLE_CODES)
    if never:
        raise InputError(src, ptr, expected,
                         f"a selector matching the never-waivable code {never[0]!r}"
                         + (f" (and {len(never) - 1} more)" if len(never) > 1 else ""))


def load(path: Path | str) -> list[Waiver]:
    return parse(load_path(Path(path)), str(path))


def waivable(d: Divergence) -> bool:
    """False for a divergence no waiver may cover (module docstring)."""
    if d.reason_code in NEVER_WAIVABLE_CODES:
        return False
    return not (d.reason_code == "secret.leaked" and d.attribution in _SECRET_NEVER)


@dataclass(frozen=True, slots=True)
class WaiverOutcome:
    kept: tuple[Divergence, ...]
    waived: tuple[Divergence, ...]
    report: Mapping[str, Any]


class Waiving:
    """:func:`apply` in steps: :meth:`split` takes the divergences a part at a time (a run
    judges fixture by fixture) and counts what each waiver covered; :meth:`report` gives
    each waiver's state once every part has been split."""

    def __init__(self, waivers: Sequence[Waiver], today: dt.date,
                 warning_days: int = WARNING_DAYS) -> None:
        self.waivers, self.today, self.warning_days = tuple(waivers), today, warning_days
        self.active = [w for w in waivers if today < w.expires]
        self.hits: dict[str, int] = {w.id: 0 for w in waivers}
        self.refused: dict[str, int] = {w.id: 0 for w in waivers}
        self.waived = 0

    def split(self, divergences: Iterable[Divergence], waived: list[Divergence] | None = None
              ) -> list[Divergence]:
        """The divergences no waiver covers (kept); the covered ones go to ``waived``."""
        kept: list[Divergence] = []
        for d in divergences:
            match = next((w for w in self.active if w.selects(d)), None)
            if match is None:
                kept.append(d)
            elif not waivable(d):
                self.refused[match.id] += 1
                kept.append(d)
            else:
                self.hits[match.id] += 1
                self.waived += 1
                if waived is not None:
                    waived.append(d)
        return kept

    def report(self) -> dict[str, Any]:
        hits, refused, today, active = self.hits, self.refused, self.today, self.active

        def counted(w: Waiver) -> dict[str, Any]:
            return {**w.to_wire(), "divergences": hits[w.id], "refused": refused[w.id]}

        by_id = itemgetter("id")
        return {
            "applied": sorted((counted(w) for w in active if hits[w.id]), key=by_id),
            "refused": sorted((counted(w) for w in active if refused[w.id]), key=by_id),
            "expired": sorted((w.to_wire() for w in self.waivers if today >= w.expires),
                              key=by_id),
            "expiring": sorted(({**w.to_wire(), "days_left": (w.expires - today).days}
                                for w in active
                                if (w.expires - today).days <= self.warning_days),
                               key=by_id),
            "unused": sorted(({**w.to_wire(), "refused": 0} for w in active
                              if not hits[w.id] and not refused[w.id]), key=by_id),
        }


def apply(divergences: Sequence[Divergence], waivers: Sequence[Waiver],
          today: dt.date, warning_days: int = WARNING_DAYS) -> WaiverOutcome:
    """Split divergences into kept and waived; report each waiver's state.

    ``report`` keys: ``applied`` (covered at least one divergence; ``divergences`` and
    ``refused`` counts), ``refused`` (selected at least one never-waivable divergence,
    which stays kept; the same counts), ``expired`` (on or after ``expires``),
    ``expiring`` (active, ``expires`` within ``warning_days`` of ``today``;
    ``days_left``) and ``unused`` (active, selected nothing at all).  A waiver can be in
    ``applied`` and ``refused`` at once, and an ``expiring`` one is also in one of the
    others."""
    w = Waiving(waivers, today, warning_days)
    waived: list[Divergence] = []
    kept = w.split(divergences, waived)
    return WaiverOutcome(tuple(kept), tuple(waived), w.report())
