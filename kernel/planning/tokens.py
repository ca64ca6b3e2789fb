"""Deterministic, pluggable token estimators.

A :class:`TokenEstimator` is any callable ``str -> int`` that is *pure*: the
same text always gives the same count, on every platform.  Estimates drive
budgets only (admission, truncation, compaction triggers).  They never feed an
identity: item ids, cache keys and content digests are computed over the
content bytes, so switching estimator — or a surface whose tokenizer differs —
changes budget decisions, never *which* item is which (design 108 §14: "tokenizer
diagnostics may differ but cannot change the authoritative item identity").

Estimators shipped here
-----------------------
``cjk_estimate`` (default, name ``cjk-legacy-cli/v1``)
    Byte-for-byte the legacy CLI ``estimateTokens`` (``packages/cli/src/harness/
    prompt-compressor.js``)::

        ceil(cjk / 1.5 + other / 4)

    where ``cjk`` counts the characters the legacy regex ``/[\\u4e00-\\u9fa5]/g``
    matches (the original CJK Unified Ideographs block up to U+9FA5, nothing
    else) and ``other = text.length - cjk`` with ``text.length`` counted in
    UTF-16 code units, as JavaScript does (an emoji outside the BMP counts 2).
    Verified against every ``stats.originalTokens`` in the CLI captures.

``cjk_wide_estimate`` (name ``cjk-wide/v1``)
    Same formula with a wider CJK class: CJK Unified Ideographs U+4E00–U+9FFF,
    Extension A U+3400–U+4DBF, Extensions B–F U+20000–U+2EBEF, Compatibility
    Ideographs U+F900–U+FAFF (+ supplement U+2F800–U+2FA1F), Hiragana
    U+3040–U+309F, Katakana U+30A0–U+30FF (+ phonetic extensions U+31F0–U+31FF),
    Hangul Syllables U+AC00–U+D7AF, Hangul Jamo U+1100–U+11FF and compatibility
    Jamo U+3130–U+318F, CJK Symbols and Punctuation U+3000–U+303F and
    Halfwidth/Fullwidth Forms U+FF00–U+FFEF.  A CJK character counts once (even
    when outside the BMP); everything else counts in UTF-16 code units.  Closer
    to real tokenizers for Japanese/Korean text and full-width punctuation, but
    *not* legacy-identical, so it is opt-in.

``utf8_bytes_estimate`` (name ``utf8-bytes/v1``)
    ``ceil(utf8 bytes / 4)`` — the IDE Context Center (VS Code / JetBrains)
    estimate.  Lone surrogates count as U+FFFD (3 bytes), as ``Buffer.byteLength``
    and Java's encoder do.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Protocol

from kernel.errors import InvalidArgument

__all__ = (
    "DEFAULT_ESTIMATOR_NAME",
    "ESTIMATORS",
    "LEGACY_CLI_CJK_RANGES",
    "WIDE_CJK_RANGES",
    "TokenEstimator",
    "cjk_estimate",
    "cjk_wide_estimate",
    "get_estimator",
    "utf8_byte_length",
    "utf8_bytes_estimate",
    "utf16_length",
)


class TokenEstimator(Protocol):
    """A pure, deterministic ``text -> token count`` function."""

    def __call__(self, text: str, /) -> int: ...


#: Inclusive code point ranges the legacy CLI regex ``[\u4e00-\u9fa5]`` matches.
LEGACY_CLI_CJK_RANGES: Final[tuple[tuple[int, int], ...]] = ((0x4E00, 0x9FA5),)

#: Inclusive code point ranges of ``cjk_wide_estimate`` (see module docstring).
WIDE_CJK_RANGES: Final[tuple[tuple[int, int], ...]] = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3000, 0x303F),  # CJK Symbols and Punctuation
    (0x3040, 0x309F),  # Hiragana
    (0x30A0, 0x30FF),  # Katakana
    (0x3130, 0x318F),  # Hangul Compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana Phonetic Extensions
    (0x3400, 0x4DBF),  # CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xAC00, 0xD7AF),  # Hangul Syllables
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0xFF00, 0xFFEF),  # Halfwidth and Fullwidth Forms
    (0x20000, 0x2EBEF),  # CJK Unified Ideographs Extensions B-F
    (0x2F800, 0x2FA1F),  # CJK Compatibility Ideographs Supplement
)


def _char_class(ranges: tuple[tuple[int, int], ...]) -> re.Pattern[str]:
    body = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in ranges)
    return re.compile(f"[{body}]")


_LEGACY_CJK: Final = _char_class(LEGACY_CLI_CJK_RANGES)
_WIDE_CJK: Final = _char_class(WIDE_CJK_RANGES)
_ASTRAL: Final = re.compile("[\U00010000-\U0010ffff]")


def utf16_length(text: str) -> int:
    """``text.length`` in JavaScript: UTF-16 code units (astral chars count 2)."""
    if text.isascii():
        return len(text)
    return len(text) + len(_ASTRAL.findall(text))


def utf8_byte_length(text: str) -> int:
    """UTF-8 byte length as JavaScript/Java encoders compute it.

    Paired surrogates (which can appear in a Python ``str`` decoded with
    ``surrogatepass``) are joined; lone surrogates count as U+FFFD (3 bytes).
    """
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return len(joined.encode("utf-8"))


def cjk_estimate(text: str) -> int:
    """Legacy CLI estimate: ``ceil(cjk/1.5 + other/4)`` (see module docstring)."""
    if not text:
        return 0
    cjk = 0 if text.isascii() else len(_LEGACY_CJK.findall(text))
    other = utf16_length(text) - cjk
    return math.ceil(cjk / 1.5 + other / 4)


def cjk_wide_estimate(text: str) -> int:
    """Wide-CJK estimate: ``ceil(cjk/1.5 + other/4)`` over ``WIDE_CJK_RANGES``."""
    if not text:
        return 0
    if text.isascii():
        return math.ceil(len(text) / 4)
    matches = _WIDE_CJK.findall(text)
    cjk = len(matches)
    cjk_units = sum(2 if ord(ch) > 0xFFFF else 1 for ch in matches)
    other = utf16_length(text) - cjk_units
    return math.ceil(cjk / 1.5 + other / 4)


def utf8_bytes_estimate(text: str) -> int:
    """IDE Context Center estimate: ``ceil(utf8 bytes / 4)``."""
    if not text:
        return 0
    return math.ceil(utf8_byte_length(text) / 4)


DEFAULT_ESTIMATOR_NAME: Final = "cjk-legacy-cli/v1"

#: Registry of named estimators (names are versioned: a changed formula is a new name).
ESTIMATORS: Final[Mapping[str, TokenEstimator]] = MappingProxyType(
    {
        DEFAULT_ESTIMATOR_NAME: cjk_estimate,
        "cjk-wide/v1": cjk_wide_estimate,
        "utf8-bytes/v1": utf8_bytes_estimate,
    }
)


def get_estimator(name: str = DEFAULT_ESTIMATOR_NAME) -> TokenEstimator:
    """Look up a registered estimator; an unknown name is ``InvalidArgument``."""
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise InvalidArgument(
            f"unknown token estimator {name!r}",
            details={"estimator": name, "known": sorted(ESTIMATORS)},
        ) from None
