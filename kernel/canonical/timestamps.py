"""Timestamp normalisation: V8 ``Date.parse`` + ``toISOString``, restricted to exact forms.

The peer normalises every timestamp with ``new Date(Date.parse(text)).toISOString()``
(process ``TZ=UTC``).  V8's parser has two stages: a strict ES5/ISO-8601 grammar
and, for anything it cannot finish, a very lenient "legacy" parser.  This module
reproduces exactly:

* the whole ES5 grammar as V8 implements it — ``[+-]YYYYYY`` or ``YYYY``,
  optional ``-MM`` and ``-DD``, optional ``T``/``t`` time ``HH:mm[:ss[.f+]]``
  with ``Z``/``z``, ``±hh:mm`` or ``±hhmm``; fraction digits beyond
  milliseconds are truncated (V8 keeps at most nine significant digits, so
  ``.0001234567891`` reads as 123 ms, as in V8); ``T24:00`` rolls to the next
  day, days 29–31 roll into the next month (``2026-02-30`` is March 2);
  date-only forms are UTC and zone-less date-times are local time, which is UTC
  for the peer's vectors (``TZ=UTC``);
* once a valid ES5 date is followed by a ``T`` separator the ES5 grammar decides:
  anything else is invalid (V8 returns ``Invalid`` there, never the legacy parser);
  an out-of-range month/day before a ``T`` is invalid too (the legacy parser meets
  the ``T`` word after a number and gives up);
* two legacy forms whose meaning is unambiguous: RFC 3339 with a space instead
  of ``T`` (``2026-08-29 00:00:00Z``) and the RFC 7231 IMF-fixdate
  (``Sat, 29 Aug 2026 07:10:38 GMT``; V8 ignores the weekday name, and so do we),
  both for years 0100–9999 (V8's legacy parser maps years below 100 to 19xx/20xx);
* strings without an ASCII digit, which V8 never parses.

Anything else (other legacy forms, two-digit years, ``GMT+0800`` suffixes after a
space, …) raises :class:`~kernel.errors.NonPortableValue` naming the value: its
meaning depends on one engine's heuristics, so we refuse to guess.

``now`` of a plan may also be an epoch-millisecond number (``new Date(number)``):
finite numbers are truncated toward zero; other JavaScript coercions (``true``,
``null``, arrays) are refused as non-portable.
"""

from __future__ import annotations

import functools
import math
import re
from types import MappingProxyType
from typing import Final

from kernel.errors import InvalidArgument, NonPortableValue

__all__ = (
    "MAX_EPOCH_MS",
    "epoch_ms_to_iso",
    "format_epoch_ms",
    "iso_to_epoch_ms",
    "now_from_value",
    "parse_timestamp",
)

MS_PER_DAY: Final = 86_400_000
MAX_EPOCH_MS: Final = 8_640_000_000_000_000  # ECMAScript TimeClip bound

# ES5 grammar (V8 ``ParseES5DateTime``).  Group layout:
#   1 sign, 2 six-digit year | 3 four-digit year, 4 month, 5 day, 6 rest
_ES5_DATE = re.compile(
    r"(?:([+-])(\d{6})|(\d{4}))(?![0-9])(?:-(\d\d)(?![0-9])(?:-(\d\d)(?![0-9]))?)?"
)
_ES5_TIME = re.compile(
    r"(\d\d):(\d\d)(?::(\d\d)(?:\.(\d+))?)?"
    r"(?:([Zz])|([+-])(?:(\d\d):(\d\d)|(\d\d)(\d\d)))?"
)
_RFC3339_SPACE = re.compile(
    r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:([Zz])|([+-])(\d\d):(\d\d))"
)
_MONTHS: Final = MappingProxyType(
    {
        name: i + 1
        for i, name in enumerate(
            ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
        )
    }
)
_IMF_FIXDATE = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d\d) "
    r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) (\d\d):(\d\d):(\d\d) GMT"
)
_ASCII_DIGIT = re.compile(r"[0-9]")
_POW10: Final = (1, 10, 100, 1000, 10_000, 100_000, 1_000_000)
_CACHE_SIZE: Final = 1 << 16


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic-Gregorian date; ``day`` may overflow the month."""
    y = year - (1 if month <= 2 else 0)
    era = y // 400
    yoe = y - era * 400
    mp = month - 3 if month > 2 else month + 9
    doy = (153 * mp + 2) // 5
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468 + (day - 1)


def epoch_ms_to_iso(ms: int) -> str:
    """``new Date(ms).toISOString()`` for a time value inside the TimeClip range."""
    days, rem = divmod(ms, MS_PER_DAY)
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    hh, rem = divmod(rem, 3_600_000)
    mi, rem = divmod(rem, 60_000)
    ss, fff = divmod(rem, 1000)
    sign = "" if 0 <= year <= 9999 else ("+" if year > 0 else "-")
    ytext = f"{year:04d}" if not sign else f"{sign}{abs(year):06d}"
    return f"{ytext}-{month:02d}-{day:02d}T{hh:02d}:{mi:02d}:{ss:02d}.{fff:03d}Z"


def _v8_milliseconds(digits: str) -> int:
    """V8 ``ReadMilliseconds``: leading zeros skipped, 9 significant digits kept,
    then scaled by the (capped at 9) digit count to three digits, truncating."""
    length = len(digits)
    significant = digits.lstrip("0")[:9]
    number = int(significant) if significant else 0
    if length == 1:
        return number * 100
    if length == 2:
        return number * 10
    length = min(length, 9)
    return number // _POW10[length - 3]


def _invalid(field: str) -> InvalidArgument:
    return InvalidArgument(f"{field} must be an ISO timestamp", details={"field": field})


def _non_portable(text: str, field: str) -> NonPortableValue:
    return NonPortableValue(
        f"{field} uses a timestamp form whose meaning depends on V8's legacy Date.parse "
        f"heuristics: {text!r}; use RFC 3339",
        details={"field": field, "value": text},
    )


def _compose(
    year: int, month: int, day: int, hh: int, mi: int, ss: int, ms: int, offset_min: int
) -> int | None:
    epoch = (
        _days_from_civil(year, month, day) * MS_PER_DAY
        + hh * 3_600_000
        + mi * 60_000
        + ss * 1000
        + ms
        - offset_min * 60_000
    )
    return epoch if -MAX_EPOCH_MS <= epoch <= MAX_EPOCH_MS else None


def _parse_es5(text: str, field: str) -> int | None:
    """ES5 stage.  Returns epoch ms, raises ``_invalid``, or ``None`` when V8 would
    continue with its legacy parser (the caller decides what that means)."""
    m = _ES5_DATE.match(text)
    if m is None:
        return None
    sign, year6, year4, mon_s, day_s = m.groups()
    if year6 is not None:
        year = int(year6)
        if sign == "-":
            if year == 0:
                return None
            year = -year
    else:
        year = int(year4)
    month = int(mon_s) if mon_s is not None else 1
    day = int(day_s) if day_s is not None else 1
    pos = m.end()
    date_ok = 1 <= month <= 12 and 1 <= day <= 31
    rest = text[pos:]
    if not rest:
        if not date_ok:
            return None
        epoch = _compose(year, month, day, 0, 0, 0, 0, 0)
        if epoch is None:
            raise _invalid(field)
        return epoch
    # Is the next token the single-letter keyword ``T``?  (V8 reads words of chars >= 'A'.)
    if rest[0] not in "Tt" or (len(rest) > 1 and rest[1] >= "A" and not rest[1].isspace()):
        return None
    if not date_ok:
        if year6 is not None:
            return None
        raise _invalid(field)  # legacy parser: garbage word after a number -> NaN
    t = _ES5_TIME.fullmatch(rest, 1)
    if t is None:
        raise _invalid(field)
    hh_s, mi_s, ss_s, frac, _zulu, tz_sign, tzh_a, tzm_a, tzh_b, tzm_b = t.groups()
    hh, mi = int(hh_s), int(mi_s)
    ss = int(ss_s) if ss_s is not None else 0
    if hh > 24 or mi > 59 or ss > 59:
        raise _invalid(field)
    if hh == 24 and (mi or ss or (frac is not None and frac.strip("0"))):
        raise _invalid(field)
    ms = _v8_milliseconds(frac) if frac is not None else 0
    offset = 0
    if tz_sign is not None:
        tzh = int(tzh_a if tzh_a is not None else tzh_b)
        tzm = int(tzm_a if tzm_a is not None else tzm_b)
        if tzh > 23 or tzm > 59:
            raise _invalid(field)
        offset = (tzh * 60 + tzm) * (1 if tz_sign == "+" else -1)
    # zulu, explicit offset, or zone-less local time (UTC for the peer's TZ=UTC runtime)
    epoch = _compose(year, month, day, hh, mi, ss, ms, offset)
    if epoch is None:
        raise _invalid(field)
    return epoch


def _parse_legacy(text: str, field: str) -> int:
    m = _RFC3339_SPACE.fullmatch(text)
    if m is not None:
        y, mo, d, hh, mi, ss, frac, _zulu, tz_sign, tzh, tzm = m.groups()
        year, month, day = int(y), int(mo), int(d)
        h, n, s = int(hh), int(mi), int(ss)
        if year < 100:
            raise _non_portable(text, field)
        if not (1 <= month <= 12 and 1 <= day <= 31) or h > 24 or n > 59 or s > 59:
            raise _invalid(field)
        offset = 0
        if tz_sign is not None:
            oh, om = int(tzh), int(tzm)
            if om > 59:
                raise _invalid(field)
            if oh > 23:
                raise _non_portable(text, field)
            offset = (oh * 60 + om) * (1 if tz_sign == "+" else -1)
        ms = _v8_milliseconds(frac) if frac is not None else 0
        if h == 24 and (n or s or ms):
            raise _non_portable(text, field)
        epoch = _compose(year, month, day, h, n, s, ms, offset)
        if epoch is None:
            raise _invalid(field)
        return epoch
    m = _IMF_FIXDATE.fullmatch(text)
    if m is not None:
        d, mon, y, hh, mi, ss = m.groups()
        year, day, h, n, s = int(y), int(d), int(hh), int(mi), int(ss)
        if year < 100 or not 1 <= day <= 31 or h > 24 or n > 59 or s > 59:
            raise _non_portable(text, field)
        if h == 24 and (n or s):
            raise _non_portable(text, field)
        epoch = _compose(year, _MONTHS[mon], day, h, n, s, 0, 0)
        if epoch is None:
            raise _invalid(field)
        return epoch
    if _ASCII_DIGIT.search(text) is None:
        raise _invalid(field)  # V8 needs at least one number
    raise _non_portable(text, field)


def parse_timestamp(text: str, field: str = "timestamp") -> tuple[int, str]:
    """Parse like ``Date.parse`` and return ``(epoch_ms, toISOString())``.

    Raises :class:`InvalidArgument` where V8 yields ``NaN`` (or ``toISOString``
    would throw) and :class:`NonPortableValue` for forms outside the exact subset.
    No length check: callers apply the field's bounds first.

    An exact ``str`` is answered through :func:`_parsed` (``functools.lru_cache`` over
    the field-free parse: a pure function of an immutable string, returning an immutable
    tuple, so no answer depends on earlier calls); a refusal is raised by the parse
    itself, naming ``field``.
    """
    if type(text) is str:
        try:
            return _parsed(text)
        except (InvalidArgument, NonPortableValue):
            pass  # refusals are not cached: parse again below for the field's own error
    return _parse(text, field)


def _parse(text: str, field: str) -> tuple[int, str]:
    """The parser itself (no cache)."""
    epoch = _parse_es5(text, field)
    if epoch is None:
        epoch = _parse_legacy(text, field)
    return epoch, epoch_ms_to_iso(epoch)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _parsed(text: str) -> tuple[int, str]:
    return _parse(text, "timestamp")


def format_epoch_ms(ms: int) -> str:
    """:func:`epoch_ms_to_iso`; an exact ``int`` through ``functools.lru_cache`` (a pure
    function of an int: the reducer formats the same clock reading several times per
    deletion)."""
    return _formatted(ms) if type(ms) is int else epoch_ms_to_iso(ms)


_formatted: Final = functools.lru_cache(maxsize=4096)(epoch_ms_to_iso)


def iso_to_epoch_ms(iso: str) -> int:
    """Epoch ms of a string produced by :func:`epoch_ms_to_iso` (or any exact form)."""
    return parse_timestamp(iso)[0]


def now_from_value(value: object, field: str = "now") -> tuple[int, str]:
    """``new Date(value).toISOString()`` for a plan's ``now`` (string or epoch ms)."""
    if isinstance(value, str):
        return parse_timestamp(value, field)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NonPortableValue(
            f"{field} must be a timestamp string or epoch milliseconds; JavaScript would "
            f"coerce {type(value).__name__} values",
            details={"field": field},
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgument(f"{field} must be a valid timestamp", details={"field": field})
    ms = math.trunc(value)
    if not -MAX_EPOCH_MS <= ms <= MAX_EPOCH_MS:
        raise InvalidArgument(f"{field} must be a valid timestamp", details={"field": field})
    return ms, epoch_ms_to_iso(ms)
