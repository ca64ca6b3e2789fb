"""Checking the transformation a legacy surface claims when it changes an input item.

A surface adapter sees both the input text and the output text, so it records its
verdict on the item (``detail.claim`` = ``verified`` | ``falsified``, ``detail.why``);
the divergence engine turns a false claim into a defect of the producer
(``shadow.divergence.claims``).  Rules:

``cleaned`` (Desktop context engineering's prompt cleaning)
    compared word by word (letters and digits; punctuation never counts), the original
    characters of every changed run must be *volatile values* and separators only — a
    date or time stamp, a uuid, an id with a numeric or hex tail (``cc-7f3a9d21``), a
    number (``VOLATILE``) — and be replaced by placeholder words only (``date``,
    ``time``, ``session``, ``uuid``, ``id``, ``timestamp``, ``request``).  Anything
    else — a word removed, a sentence rewritten — is ``changed_content``.
``trimmed`` (IDE chips cut to the budget)
    the output is a prefix of the input: not ``split_character`` (a cut inside a
    character — a lone surrogate or U+FFFD the input does not have there) and not
    ``not_a_prefix``.
``whitespace``
    only whitespace differs (the matcher's own rule) — always verified.

Other categories (``rewritten``: a message the matcher paired by position) make no
checkable claim; the adapter records nothing.
"""

from __future__ import annotations

import difflib
import re
from typing import Final

PLACEHOLDERS: Final = frozenset({"date", "time", "session", "uuid", "id", "timestamp",
                                 "request", "redacted"})
VERIFIED: Final = "verified"
FALSIFIED: Final = "falsified"


_TOKEN: Final = re.compile(r"[^\W_]+")
#: what a cleaner may replace: a date / time stamp, a uuid, an id with a hex or numeric
#: tail (``cc-7f3a9d21``, ``sess_42``), a bare number — separators included
VOLATILE: Final = re.compile(
    r"(?:\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\d{1,2}:\d{2}(?::\d{2})?"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|[A-Za-z]{1,12}(?:[-_][A-Za-z]{1,12})*[-_][0-9a-fA-F]*\d[0-9a-fA-F]*"
    r"|\d+)")


def _spans(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(0).casefold(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def _volatile_run(text: str, start: int, end: int) -> bool:
    """The original characters of a removed run are volatile values and separators only."""
    return not _TOKEN.search(VOLATILE.sub(" ", text[start:end]))


def check_cleaned(original: str, output: str) -> tuple[str, str]:
    a, b = _spans(original), _spans(output)
    ta, tb = [t for t, _, _ in a], [t for t, _, _ in b]
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ta, tb,
                                                      autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if i2 > i1 and not _volatile_run(original, a[i1][1], a[i2 - 1][2]):
            return FALSIFIED, "changed_content"
        if j2 > j1 and not set(tb[j1:j2]) <= PLACEHOLDERS:
            return FALSIFIED, "changed_content"
    return VERIFIED, ""


def _broken(text: str) -> bool:
    return bool(text) and (text[-1] == "\ufffd" or 0xD800 <= ord(text[-1]) <= 0xDFFF)


def check_trimmed(original: str, output: str) -> tuple[str, str]:
    if original.startswith(output):
        return VERIFIED, ""
    if _broken(output) and original.startswith(output[:-1]):
        return FALSIFIED, "split_character"
    return FALSIFIED, "not_a_prefix"


def check(category: str | None, original: str, output: str) -> tuple[str, str] | None:
    """The verdict on a claimed transformation, or None when it claims nothing checkable."""
    if category == "cleaned":
        return check_cleaned(original, output)
    if category == "trimmed":
        return check_trimmed(original, output)
    if category == "whitespace":
        return VERIFIED, ""
    return None
