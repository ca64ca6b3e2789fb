"""Checking the transformation a legacy surface claims when it changes an input item.

A surface adapter sees both the input text and the output text, so it records its
verdict on the item (``detail.claim`` = ``verified`` | ``falsified``, ``detail.why``);
the divergence engine turns a false claim into a defect of the producer
(``shadow.divergence.claims``).  Rules:

``cleaned`` (Desktop context engineering's prompt cleaning)
    compared token by token (``provenance.tokens``: letters and digits, so punctuation
    never counts), every changed run of the input must be *volatile* — it holds a token
    with a digit (a date, a time, a uuid group, a session or request id) — and be
    replaced by placeholder words only (``date``, ``time``, ``session``, ``uuid``,
    ``id``, ``timestamp``, ``request``).  Anything else — a word removed, a sentence
    rewritten — is ``changed_content``.
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
from typing import Final

from shadow.divergence.provenance import tokens

PLACEHOLDERS: Final = frozenset({"date", "time", "session", "uuid", "id", "timestamp",
                                 "request", "redacted"})
VERIFIED: Final = "verified"
FALSIFIED: Final = "falsified"


def _volatile(run: list[str]) -> bool:
    return any(any(ch.isdigit() for ch in t) for t in run)


def check_cleaned(original: str, output: str) -> tuple[str, str]:
    a, b = tokens(original), tokens(output)
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        removed, inserted = a[i1:i2], b[j1:j2]
        if removed and not _volatile(removed):
            return FALSIFIED, "changed_content"
        if inserted and not set(inserted) <= PLACEHOLDERS:
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
