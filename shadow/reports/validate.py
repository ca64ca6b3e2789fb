"""The structure of a ``report.json`` (``shadow-report/v1``) read back as an input.

``shadow report``, ``shadow diff`` and ``shadow run --previous`` read a report another
run wrote — or anything a user points them at.  :func:`validate_report` checks every
field those readers use, so a wrong document is an :class:`~shadow.errors.InputError`
naming the file and the JSON pointer (exit 2), never an ``AttributeError`` or a
``KeyError`` deep in a renderer.  Values are described by type and size only: a report's
``detail`` may carry anything, and an error never echoes it.

Checked: the document is an object with ``schema`` ``shadow-report/v1``, a ``verdict``
(``GO`` / ``NO-GO``), ``totals`` (an object of non-negative integers), ``candidate`` (an
object) and ``divergences`` (an array); every divergence and legacy defect is an object
with string ``fixture`` and ``surface``, a registered ``reason_code``, a known
``severity`` and, when present, a known ``attribution``, ``item_ids`` (strings),
``detail`` (an object) and ``id`` (a string); ``cases`` are ``{fixture, surface}``
strings; ``waivers`` lists (``applied``, ``refused``, ``expired``, ``expiring``,
``unused``) hold waiver objects with string selectors and an ISO ``expires`` date; the
other documented top-level fields have their types.  Unknown top-level fields are
allowed (a newer writer may add some).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from shadow import codes
from shadow.boundary import join_pointer
from shadow.errors import InputError, describe

REPORT_SCHEMA: Final = "shadow-report/v1"
VERDICTS: Final = ("GO", "NO-GO")
WAIVER_STATES: Final = ("applied", "refused", "expired", "expiring", "unused")
REQUIRED: Final = ("schema", "verdict", "totals", "candidate", "divergences")


_describe = describe


class _Check:
    """The checks, bound to one source file."""

    def __init__(self, src: str) -> None:
        self.src = src

    def fail(self, ptr: str, expected: str, value: Any) -> None:
        raise InputError(self.src, ptr, expected, _describe(value))

    def obj(self, value: Any, ptr: str, what: str = "an object") -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(ptr, what, value)
        return value  # type: ignore[no-any-return]

    def arr(self, value: Any, ptr: str, what: str = "an array") -> list[Any]:
        # a list, or a run's list kept on disk (shadow.spill): any sequence but text
        if not isinstance(value, Sequence) or isinstance(value, (str, bytes, bytearray)):
            self.fail(ptr, what, value)
        return value  # type: ignore[no-any-return]

    def text(self, value: Any, ptr: str, nonempty: bool = True) -> str:
        if not isinstance(value, str) or (nonempty and not value):
            self.fail(ptr, "a non-empty string" if nonempty else "a string", value)
        return value  # type: ignore[no-any-return]

    def count(self, value: Any, ptr: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            self.fail(ptr, "a non-negative integer", value)
        return value  # type: ignore[no-any-return]

    def field(self, obj: Mapping[str, Any], key: str, ptr: str) -> Any:
        if key not in obj:
            raise InputError(self.src, join_pointer(ptr, key), f"a required field {key!r}",
                             "nothing")
        return obj[key]

    def one_of(self, value: Any, ptr: str, allowed: tuple[str, ...] | frozenset[str],
               what: str) -> None:
        if not isinstance(value, str) or value not in allowed:
            got = "an unknown value" if isinstance(value, str) else _describe(value)
            raise InputError(self.src, ptr, what, got)

    # -- report parts -----------------------------------------------------------------------
    def divergence(self, value: Any, ptr: str) -> None:
        d = self.obj(value, ptr, "a divergence object")
        self.text(self.field(d, "fixture", ptr), f"{ptr}/fixture")
        self.text(self.field(d, "surface", ptr), f"{ptr}/surface")
        self.one_of(self.field(d, "reason_code", ptr), f"{ptr}/reason_code",
                    frozenset(codes.REGISTRY), "a registered reason code")
        self.one_of(self.field(d, "severity", ptr), f"{ptr}/severity", codes.SEVERITIES,
                    "one of " + ", ".join(codes.SEVERITIES))
        if "attribution" in d:
            self.one_of(d["attribution"], f"{ptr}/attribution", codes.ATTRIBUTIONS,
                        "one of " + ", ".join(codes.ATTRIBUTIONS))
        if "item_ids" in d:
            for i, item in enumerate(self.arr(d["item_ids"], f"{ptr}/item_ids")):
                self.text(item, f"{ptr}/item_ids/{i}", nonempty=False)
        if "detail" in d:
            self.obj(d["detail"], f"{ptr}/detail")
        if "id" in d:
            self.text(d["id"], f"{ptr}/id")

    def waiver(self, value: Any, ptr: str) -> None:
        w = self.obj(value, ptr, "a waiver object")
        for key in ("id", "reason_code", "fixture", "surface"):
            self.text(self.field(w, key, ptr), f"{ptr}/{key}")
        expires = self.text(self.field(w, "expires", ptr), f"{ptr}/expires")
        try:
            dt.date.fromisoformat(expires)
        except ValueError:
            raise InputError(self.src, f"{ptr}/expires", "a date YYYY-MM-DD",
                             "another format") from None
        for key in ("divergences", "refused"):
            if key in w:
                self.count(w[key], f"{ptr}/{key}")
        if "days_left" in w and (not isinstance(w["days_left"], int)
                                 or isinstance(w["days_left"], bool)):
            self.fail(f"{ptr}/days_left", "an integer", w["days_left"])

    def report(self, doc: Any, required: tuple[str, ...]) -> dict[str, Any]:
        d = self.obj(doc, "", f"a shadow report ({REPORT_SCHEMA}): a JSON object")
        for key in required:
            self.field(d, key, "")
        if "schema" in d and d["schema"] != REPORT_SCHEMA:
            raise InputError(self.src, "/schema", repr(REPORT_SCHEMA),
                             "another schema" if isinstance(d["schema"], str)
                             else _describe(d["schema"]))
        if "verdict" in d:
            self.one_of(d["verdict"], "/verdict", VERDICTS, "GO or NO-GO")
        if "totals" in d:
            for key, value in self.obj(d["totals"], "/totals").items():
                self.count(value, join_pointer("/totals", key))
        if "candidate" in d:
            self.obj(d["candidate"], "/candidate")
        for name in ("divergences", "legacy_defects"):
            if name in d:
                for i, x in enumerate(self.arr(d[name], f"/{name}")):
                    self.divergence(x, f"/{name}/{i}")
        if "cases" in d:
            for i, c in enumerate(self.arr(d["cases"], "/cases")):
                case = self.obj(c, f"/cases/{i}", "a case object")
                self.text(self.field(case, "fixture", f"/cases/{i}"), f"/cases/{i}/fixture")
                self.text(self.field(case, "surface", f"/cases/{i}"), f"/cases/{i}/surface")
        if "waivers" in d:
            w = self.obj(d["waivers"], "/waivers")
            for state in WAIVER_STATES:
                if state in w:
                    for i, x in enumerate(self.arr(w[state], f"/waivers/{state}")):
                        self.waiver(x, f"/waivers/{state}/{i}")
        if "blocking_reasons" in d:
            for i, c in enumerate(self.arr(d["blocking_reasons"], "/blocking_reasons")):
                self.text(c, f"/blocking_reasons/{i}")
        if "phase" in d:
            p = d["phase"]
            if not isinstance(p, int) or isinstance(p, bool) or not 0 <= p <= 5:
                self.fail("/phase", "a phase 0..5", p)
        if "generated_at" in d:
            self.text(d["generated_at"], "/generated_at", nonempty=False)
        for key in ("intended", "attribution"):
            if key in d:
                self.obj(d[key], f"/{key}")
        if "ladder" in d:
            for i, x in enumerate(self.arr(d["ladder"], "/ladder")):
                self.obj(x, f"/ladder/{i}")
        return d


def validate_report(doc: Any, src: str | Path, *,
                    required: tuple[str, ...] = REQUIRED) -> dict[str, Any]:
    """``doc`` (a parsed ``report.json`` read from ``src``) checked as the module says;
    returned unchanged.  Raises :class:`~shadow.errors.InputError` naming ``src`` and the
    pointer of the first wrong field.  ``required``: the top-level fields that must be
    present (default: a whole report; a reader of a part may ask for less — every field
    present is checked either way)."""
    return _Check(str(src)).report(doc, tuple(required))
