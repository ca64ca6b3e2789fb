"""Where derived text came from, judged from content without keeping any body.

Trust by provenance (design 108 §12.1: web pages, MCP results, tool output and imported
memory stay data; a derived summary inherits the lowest trust and cannot be lifted by a
rewrite).  A producer's derived items — summaries (per field and per list element),
collapse markers, rewrites, altered copies — and memory records carry a **sketch**: the
hashes of their normalised shingles (``detail["shingles"]``, ``MemRecord.shingles``).
The divergence engine holds the canonical input (``shadow.canonical``), shingles every
input item once per fixture and asks, for every unit of a sketch, which low-trust input
its text came from.

Normalisation (``tokens``): NFKC, casefold; a token is a maximal run of letters or digits,
and every CJK ideograph, kana or hangul syllable is a token of its own.  A text's *parts*
are the raw text and, when it parses as JSON, each string leaf (so an escaped copy and a
decoded copy both match).  A shingle is ``K = 4`` consecutive tokens of a part; a part of
2–3 tokens is one shingle; a one-token part has none.  A shingle's hash is the first 16
hex digits of BLAKE2b over ``shadow.shingle/v1 NUL`` + the tokens joined by a space.  A
sketch keeps at most ``MAX_SKETCH`` hashes per unit (those whose value is 0 modulo the
smallest power of two that brings it under the cap: containment is estimated on the same
sample on both sides).

Derivation rule (``derived_from``), documented in docs/reason-codes.md: a unit of ``n``
shingles *came from* input ``u`` when ``shared = |unit ∩ E(u)|`` satisfies
``shared ≥ max(2, min(MIN_SHARED, n))`` and ``shared ≥ n · MIN_CONTAINMENT`` — or
``shared ≥ LONG_COPY`` (a long passage inside a long field).  Two shared shingles are at
least five consecutive copied tokens: a copied file path or a test count alone never is.
``E(u)`` is ``u``'s shingles minus every shingle of a trusted input (host, verified or
user trust: the system prompt, the user, the model's own words and tool-call arguments),
so text a trusted party also wrote is never evidence.  Units of fewer than
``MIN_TOKENS`` tokens are not judged.  An input that holds no such text can never be a
source, so a derived item whose inputs held no untrusted text is never
``trust.escalated``.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

K: Final = 4
MAX_SKETCH: Final = 2048
MIN_TOKENS: Final = 5
MIN_SHARED: Final = 3
MIN_CONTAINMENT: Final = 0.25
LONG_COPY: Final = 16
LOW_TRUST: Final = frozenset({"external", "untrusted"})
TRUSTED: Final = frozenset({"host", "verified", "user"})
TRUST_ORDER: Final = ("host", "verified", "user", "external", "untrusted")
_DOMAIN: Final = b"shadow.shingle/v1\0"
_WORD: Final = re.compile(r"[^\W_]+")
_CJK: Final = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def tokens(text: str) -> list[str]:
    """Normalised tokens of ``text`` (see the module docstring)."""
    out: list[str] = []
    for word in _WORD.findall(unicodedata.normalize("NFKC", text).casefold()):
        if not _CJK.search(word):
            out.append(word)
            continue
        run = ""
        for ch in word:
            if _CJK.match(ch):
                if run:
                    out.append(run)
                    run = ""
                out.append(ch)
            else:
                run += ch
        if run:
            out.append(run)
    return out


def string_leaves(value: Any, skip_keys: frozenset[str] = frozenset()) -> list[str]:
    """Every string in a JSON value, in document order (object members named in
    ``skip_keys`` left out)."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, Mapping):
            stack.extend(reversed([x for k, x in v.items() if k not in skip_keys]))
        elif isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
    return out


def parts(text: str) -> list[str]:
    """The raw text and, when it is JSON, every string leaf."""
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "{[\"":
        return [text]
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # a pathologically deep document: its raw text
        return [text]
    return [text, *string_leaves(doc)]


def _hash(window: Sequence[str]) -> str:
    return hashlib.blake2b(_DOMAIN + " ".join(window).encode("utf-8", "surrogatepass"),
                           digest_size=8).hexdigest()


def shingles(text: str) -> set[str]:
    """Every shingle hash of ``text`` (all parts).  Windows are collected as tuples first
    and each distinct window is hashed once (a long tool result repeats many)."""
    windows: set[tuple[str, ...]] = set()
    for part in parts(text):
        toks = tokens(part)
        if len(toks) < 2:
            continue
        if len(toks) < K:
            windows.add(tuple(toks))
            continue
        windows.update(zip(*(toks[i:] for i in range(K)), strict=False))
    return {_hash(w) for w in windows}


def token_count(text: str) -> int:
    return max((len(tokens(p)) for p in parts(text)), default=0)


def sketch(text: str) -> list[str]:
    """A sorted, capped list of shingle hashes (empty when the text is too short)."""
    if token_count(text) < MIN_TOKENS:
        return []
    hashes = sorted(shingles(text))
    m = 1
    while len(hashes) // m > MAX_SKETCH:
        m *= 2
    if m > 1:
        hashes = [h for h in hashes if int(h, 16) % m == 0][:MAX_SKETCH]
    return hashes


def summary_units(doc: Mapping[str, Any]) -> dict[str, str]:
    """Units of a structured summary: each field, and each element of a list field."""
    out: dict[str, str] = {}
    for key, value in doc.items():
        if isinstance(value, str):
            out[str(key)] = value
        elif isinstance(value, list):
            texts = [x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)
                     for x in value]
            out[str(key)] = "\n".join(texts)
            for i, t in enumerate(texts):
                out[f"{key}/{i}"] = t
        elif value is not None:
            out[str(key)] = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return out


def unit_sketches(units: Mapping[str, str]) -> dict[str, list[str]]:
    """``{unit: sketch}`` for the units long enough to be judged."""
    out = {}
    for name, text in units.items():
        sk = sketch(text)
        if sk:
            out[name] = sk
    return out


def text_sketches(text: str, doc: Mapping[str, Any] | None = None) -> dict[str, list[str]]:
    """Sketches of one produced text: per summary unit when ``doc`` is its parsed
    structure, else one unit ``""`` for the whole text."""
    return unit_sketches(summary_units(doc) if doc is not None else {"": text})


# --------------------------------------------------------------------------- the input side


@dataclass(frozen=True, slots=True)
class Source:
    """One input item as a possible origin of derived text."""

    item_id: str
    trust: str
    sensitivity: str
    text: str


@dataclass(slots=True)
class SourceIndex:
    """Shingles of a fixture's inputs, computed once and shared by every projection of
    the fixture (a per-fixture value passed in, never module state)."""

    sources: Sequence[Source]
    _low: dict[str, set[str]] | None = field(default=None, init=False)
    _all: dict[str, set[str]] | None = field(default=None, init=False)

    def _build(self) -> None:
        trusted: set[str] = set()
        full: dict[str, set[str]] = {}
        for s in self.sources:
            sh = shingles(s.text) if s.text else set()
            full[s.item_id] = sh
            if s.trust in TRUSTED:
                trusted |= sh
        self._all = full
        self._low = {s.item_id: full[s.item_id] - trusted for s in self.sources
                     if s.trust in LOW_TRUST and full[s.item_id]}

    def exclusive_low_trust(self) -> dict[str, set[str]]:
        if self._low is None:
            self._build()
        assert self._low is not None
        return self._low

    def all_shingles(self) -> dict[str, set[str]]:
        if self._all is None:
            self._build()
        assert self._all is not None
        return self._all

    def by_id(self) -> dict[str, Source]:
        return {s.item_id: s for s in self.sources}


def _came_from(unit: Sequence[str], pool: set[str]) -> int:
    """The number of shared shingles when ``unit`` came from ``pool`` by the rule, else 0."""
    n = len(unit)
    if not n or not pool:
        return 0
    shared = sum(1 for h in unit if h in pool)
    if shared >= LONG_COPY or (shared >= max(2, min(MIN_SHARED, n))
                               and shared >= n * MIN_CONTAINMENT):
        return shared
    return 0


@dataclass(frozen=True, slots=True)
class Derivation:
    """Which low-trust inputs a produced item's units came from."""

    units: Mapping[str, tuple[str, ...]]  # unit -> source ids
    sources: tuple[str, ...]
    least_trust: str | None

    @property
    def fields(self) -> list[str]:
        return sorted({u.split("/", 1)[0] or "text" for u in self.units})


def derived_from(sk: Mapping[str, Sequence[str]] | Sequence[str], index: SourceIndex,
                 *, exclude: Iterable[str] = ()) -> Derivation:
    """The low-trust inputs (exclusive text only) each unit of ``sk`` came from."""
    units = {"": list(sk)} if isinstance(sk, (list, tuple)) else dict(sk)  # type: ignore[arg-type]
    skip = set(exclude)
    low = index.exclusive_low_trust()
    trust = {s.item_id: s.trust for s in index.sources}
    hits: dict[str, tuple[str, ...]] = {}
    for name, unit in sorted(units.items()):
        ids = tuple(sorted(i for i, pool in low.items()
                           if i not in skip and _came_from(unit, pool)))
        if ids:
            hits[name] = ids
    srcs = tuple(sorted({i for ids in hits.values() for i in ids}))
    least = max((trust[i] for i in srcs), key=TRUST_ORDER.index, default=None)
    return Derivation(hits, srcs, least)


def sources_of(sk: Sequence[str], index: SourceIndex) -> tuple[str, ...]:
    """Every input (any trust, full text) a one-unit sketch came from — for sensitivity
    inheritance, where text shared with a trusted party still carries the source's class."""
    return tuple(sorted(i for i, pool in index.all_shingles().items() if _came_from(sk, pool)))


def is_sketch(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(h, str) for h in value)


def iter_units(detail: Mapping[str, Any]) -> Iterator[tuple[str, list[str]]]:
    sh = detail.get("shingles")
    if isinstance(sh, Mapping):
        for k, v in sh.items():
            if is_sketch(v):
                yield str(k), list(v)
