"""Lexical analysis for memory recall (design 108 §10): two analyzers, one matching model.

Matching model (the peer's, ``scoreLexicalQuery`` of ``@chainlesschain/context-memory-kernel``
0.1.1).  A text is cut into *tokens*; a token is cut at script boundaries into *segments*,
each either *dense* (a script written without spaces) or not.  A query is a list of
distinct tokens, its *units*; a unit's *parts* are its distinct segments.  A unit matches a
record when

* the record has the unit's token, or
* every part matches: a non-dense part equals a non-dense segment of the record; a dense
  part of one character equals a dense segment (a standalone character: ``测`` never
  matches ``测试``); a longer dense part is a substring of a dense segment
  (``确定性测试`` matches ``偏好使用确定性测试``).

``lexical = matched units / units``; the query ``"*"`` scores 1 for every record.  So
``Vue开发`` needs both ``vue`` and ``开发`` (never ``Vue部署``), ``性能测试`` does not match
``确定性测试``, ``route`` does not match ``routes`` and ``load`` does not match
``load_config``.  The searchable text of a record is ``category tags summary content``.

``peer`` analyzer — byte-for-byte the peer's: lower-case (``String#toLowerCase``), tokens
    are runs of letters (``L*``), numbers (``N*``), ``_`` and ``-``; only the first 2,048
    token *occurrences* count; dense means ``Script=Han``.  Combining marks are separators
    (``cafe\\u0301`` → ``cafe``).  Python 3.11's ``[\\w-]`` is exactly ``L* ∪ N* ∪ {_, -}``
    of Unicode 14 (checked over every code point); the Han letters and numbers Unicode 15–17
    added are listed explicitly, from Node v20.20.2 / ICU 78.2 (the peer's runtime).

``canonical`` analyzer — the kernel's own, used by its index:
    * NFKC + full case folding (``ＨＴＴＰ＿ＴＩＭＥＯＵＴ`` → ``http_timeout``, ``Straße`` →
      ``strasse``, ``cafe\\u0301`` → ``café``); ``\\`` becomes ``/``;
    * a token is a run of letters, numbers, combining marks and the joiners ``_ - . /``,
      without leading/trailing ``.`` ``/``; runs without a letter or number are dropped;
    * a token with ``/`` also yields its path suffixes and segments, a token or path segment
      with ``.`` its dot parts (``src/kernel/recall.py`` → ``kernel/memory/recall.py``,
      ``recall.py``, ``src``, ``kernel``, ``recall``, ``py``; ``v1.9.0`` → ``v1``, ``9``,
      ``0``) — the query token stays whole, so ``v1.9.0`` never matches ``v1.9.1``;
    * dense scripts: Han, kana, Hangul, Bopomofo, Thai, Lao, Khmer, Myanmar;
    * no 2,048-token cut: the whole text is searchable.

Everything here is pure and deterministic.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = (
    "MATCH_ALL",
    "PEER_TOKEN_LIMIT",
    "Analysis",
    "Analyzer",
    "LexicalQuery",
    "QueryUnit",
    "analyze",
    "compile_query",
    "explain",
    "lexical_relevance",
    "lexical_text",
    "score",
    "unit_matches",
)

Analyzer = Literal["peer", "canonical"]
ANALYZERS: Final[tuple[Analyzer, ...]] = ("peer", "canonical")
MATCH_ALL: Final = "*"
PEER_TOKEN_LIMIT: Final = 2048

# Letters and numbers of Script=Han (Unicode 17, from Node v20.20.2 / ICU 78.2).
_HAN_RANGES: Final = (
    (0x3005, 0x3005), (0x3007, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B),
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFA6D), (0xFA70, 0xFAD9),
    (0x16FE3, 0x16FE3), (0x16FF2, 0x16FF6), (0x20000, 0x2A6DF), (0x2A700, 0x2B81D),
    (0x2B820, 0x2CEAD), (0x2CEB0, 0x2EBE0), (0x2EBF0, 0x2EE5D), (0x2F800, 0x2FA1D),
    (0x30000, 0x3134A), (0x31350, 0x33479),
)  # fmt: skip
# Other scripts written without spaces (whole blocks: their marks stay in the segment).
_DENSE_EXTRA: Final = (
    (0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1100, 0x11FF), (0x1780, 0x17FF),
    (0x3040, 0x30FF), (0x3100, 0x312F), (0x3130, 0x318F), (0x31A0, 0x31BF),
    (0x31F0, 0x31FF), (0xA960, 0xA97F), (0xAC00, 0xD7FF), (0xFF66, 0xFF9F),
    (0x1AFF0, 0x1B16F),
)  # fmt: skip


def _class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(
        re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}"
        for lo, hi in ranges
    )


_HAN: Final = _class(_HAN_RANGES)
_DENSE: Final = _HAN + _class(_DENSE_EXTRA)

_PEER_TOKEN: Final = re.compile(f"[\\w\\-{_HAN}]+")
_PEER_SEGMENT: Final = re.compile(f"[{_HAN}]+|[^{_HAN}]+")
_PEER_IS_DENSE: Final = re.compile(f"[{_HAN}]")

# Canonical tokens: \w (letters, numbers, "_"), "-", ".", "/" and the Han letters Python's
# Unicode 14 tables do not know yet; combining marks right after a token character are
# glued on by ``_canonical_runs`` (only non-ASCII gaps are inspected).
_RUN_ASCII: Final = re.compile(r"[\w./-]+")
_GAP: Final = re.compile(f"[^\\w./\\-{_HAN}]+")
_CANON_SEGMENT: Final = re.compile(f"[{_DENSE}]+|[^{_DENSE}]+")
_CANON_IS_DENSE: Final = re.compile(f"[{_DENSE}]")
_HAS_ALNUM: Final = re.compile(f"[^\\W_]|[{_HAN}]")
_DOT: Final = re.compile(r"\.+")
_SLASH: Final = re.compile(r"/+")
_EDGE: Final = "./"
_JOINERS: Final = "-_./"


def lexical_text(record: Mapping[str, Any]) -> str:
    """The searchable text of a record, as the peer builds it."""
    tags = record.get("tags") or ()
    summary = record.get("summary") or ""
    return f"{record['category']} {' '.join(tags)} {summary} {record['content']}"


# --- tokens ---------------------------------------------------------------------------------


def _peer_tokens(text: str) -> list[str]:
    found = _PEER_TOKEN.findall(text.lower())
    return found[:PEER_TOKEN_LIMIT] if len(found) > PEER_TOKEN_LIMIT else found


def fold(text: str) -> str:
    """NFKC + full case folding (+ NFKC again, as NFKC_Casefold does); ``\\`` → ``/``."""
    if text.isascii():
        return text.lower().replace("\\", "/")
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return folded.replace("\\", "/")


def _canonical_runs(folded: str) -> list[str]:
    if folded.isascii():
        return _RUN_ASCII.findall(folded)
    out: list[str] = []
    start = 0
    for m in _GAP.finditer(folded):
        gap_start, gap_end = m.span()
        gap = m.group()
        attached = 0  # leading combining marks belong to the preceding token
        if gap_start > start and not gap.isascii():
            while attached < len(gap) and unicodedata.category(gap[attached])[0] == "M":
                attached += 1
            if attached == len(gap) and gap_end < len(folded):
                continue  # marks only, inside a token: it goes on
        if gap_start + attached > start:
            out.append(folded[start : gap_start + attached])
        start = gap_end
    if start < len(folded):
        out.append(folded[start:])
    return out


def _expand(token: str, out: list[str]) -> None:
    """Append ``token`` and its path suffixes, path segments and dot parts."""
    found = [token]
    parts = [token]
    if "/" in token:
        parts = [s for s in (p.strip(".") for p in _SLASH.split(token)) if s]
        if len(parts) > 1:
            found.extend("/".join(parts[i:]) for i in range(1, len(parts)))
            found.extend(parts)
    for part in parts:
        if "." in part:
            found.extend(p for p in _DOT.split(part) if p)
    out.extend(t for t in dict.fromkeys(found) if _HAS_ALNUM.search(t) is not None)


def _canonical_tokens(text: str, expand: bool = True) -> list[str]:
    out: list[str] = []
    folded = fold(text)
    if folded.isascii():  # fast path: a run has a letter or digit iff it is not all joiners
        for run in _RUN_ASCII.findall(folded):
            token = run.strip(_EDGE)
            if token and token.strip(_JOINERS):
                if expand and ("/" in token or "." in token):
                    _expand(token, out)
                else:
                    out.append(token)
        return out
    for run in _canonical_runs(folded):
        token = run.strip(_EDGE)
        if token and _HAS_ALNUM.search(token) is not None:
            if expand and ("/" in token or "." in token):
                _expand(token, out)
            else:
                out.append(token)
    return out


def tokens(text: str, analyzer: Analyzer) -> list[str]:
    """Token occurrences of ``text`` (the peer keeps the first 2,048)."""
    return _peer_tokens(text) if analyzer == "peer" else _canonical_tokens(text)


def segments(token: str, analyzer: Analyzer) -> list[str]:
    """Script segments of ``token`` (a token without dense characters is one segment).
    Canonical non-dense segments lose edge joiners (``使用-vue`` → ``使用``, ``vue``)."""
    if analyzer == "peer":
        return _PEER_SEGMENT.findall(token)
    out: list[str] = []
    for seg in _CANON_SEGMENT.findall(token):
        if _CANON_IS_DENSE.match(seg) is None:
            seg = seg.strip(_JOINERS)
            if not seg:
                continue
        out.append(seg)
    return out


def is_dense(segment: str, analyzer: Analyzer) -> bool:
    pattern = _PEER_IS_DENSE if analyzer == "peer" else _CANON_IS_DENSE
    return pattern.match(segment) is not None


def has_dense(token: str, analyzer: Analyzer) -> bool:
    pattern = _PEER_IS_DENSE if analyzer == "peer" else _CANON_IS_DENSE
    return pattern.search(token) is not None


# --- documents ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Analysis:
    """What matching needs from one text.

    ``counts``: token → occurrences (its keys are the token set); ``length``: token
    occurrences in total (BM25's document length); ``plain``: non-dense segments of tokens
    that hold dense characters; ``dense``: dense segments."""

    counts: Mapping[str, int]
    length: int
    plain: frozenset[str]
    dense: tuple[str, ...]


def analyze(text: str, analyzer: Analyzer) -> Analysis:
    found = tokens(text, analyzer)
    counts = Counter(found)
    pattern = _PEER_IS_DENSE if analyzer == "peer" else _CANON_IS_DENSE
    plain: set[str] = set()
    dense: dict[str, None] = {}
    for token in counts:
        if pattern.search(token) is None:
            continue
        for seg in segments(token, analyzer):
            if pattern.match(seg) is None:
                plain.add(seg)
            else:
                dense[seg] = None
    return Analysis(counts, len(found), frozenset(plain), tuple(dense))


# --- queries --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueryUnit:
    """One query token and its parts: ``plain`` (non-dense segments), ``chars`` (one-
    character dense segments) and ``phrases`` (longer dense segments, with ``grams``: the
    character bigrams of every phrase, an index's candidate filter)."""

    token: str
    plain: tuple[str, ...]
    chars: tuple[str, ...]
    phrases: tuple[str, ...]

    @property
    def grams(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p[i : i + 2] for p in self.phrases for i in range(len(p) - 1)))


@dataclass(frozen=True, slots=True)
class LexicalQuery:
    analyzer: Analyzer
    units: tuple[QueryUnit, ...]
    match_all: bool = False


def compile_query(query: str, analyzer: Analyzer) -> LexicalQuery:
    """The query's distinct tokens, each with its distinct parts."""
    if query == MATCH_ALL:
        return LexicalQuery(analyzer, (), match_all=True)
    units: list[QueryUnit] = []
    found = _peer_tokens(query) if analyzer == "peer" else _canonical_tokens(query, expand=False)
    for token in dict.fromkeys(found):
        plain: list[str] = []
        chars: list[str] = []
        phrases: list[str] = []
        for seg in dict.fromkeys(segments(token, analyzer)):
            if not is_dense(seg, analyzer):
                plain.append(seg)
            elif len(seg) == 1:
                chars.append(seg)
            else:
                phrases.append(seg)
        units.append(QueryUnit(token, tuple(plain), tuple(chars), tuple(phrases)))
    return LexicalQuery(analyzer, tuple(units))


def unit_matches(unit: QueryUnit, doc: Analysis) -> bool:
    if unit.token in doc.counts:
        return True
    counts, plain, dense = doc.counts, doc.plain, doc.dense
    return (
        all(p in counts or p in plain for p in unit.plain)
        and all(c in dense for c in unit.chars)
        and all(any(p in s for s in dense) for p in unit.phrases)
    )


def score(query: LexicalQuery, doc: Analysis) -> float:
    """``matched units / units`` (1 for ``"*"``)."""
    if query.match_all:
        return 1
    if not query.units:
        return 0
    matched = sum(1 for unit in query.units if unit_matches(unit, doc))
    return matched / len(query.units)


def lexical_relevance(query: str, record: Mapping[str, Any], analyzer: Analyzer = "peer") -> float:
    """The peer's ``lexicalRelevance(query, record)`` (``analyzer="peer"``)."""
    compiled = compile_query(query, analyzer)
    if compiled.match_all:
        return 1
    if not compiled.units:
        return 0
    return score(compiled, analyze(lexical_text(record), analyzer))


def explain(query: str, record: Mapping[str, Any], analyzer: Analyzer) -> list[dict[str, Any]]:
    """Why each query unit matched or not: ``{"unit", "matched", "via"}`` where ``via`` is
    ``"token"``, ``"parts"`` or ``None`` — the explainable form of lexical matching."""
    compiled = compile_query(query, analyzer)
    if compiled.match_all:
        return [{"unit": MATCH_ALL, "matched": True, "via": "match-all"}]
    doc = analyze(lexical_text(record), analyzer)
    out: list[dict[str, Any]] = []
    for unit in compiled.units:
        via = "token" if unit.token in doc.counts else "parts" if unit_matches(unit, doc) else None
        out.append({"unit": unit.token, "matched": via is not None, "via": via})
    return out
