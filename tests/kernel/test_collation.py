"""``kernel.canonical.collation`` against the oracle: ``localeCompare("en")`` on Node / ICU 78.2.

The vectors (``tests/vectors/collation/icu78-en-order.json``) were written by
``tests/vectors/collation/make_vectors.js`` on Node v20.20.2 with ICU 78.2 — the peer's
runtime — and are committed, so this test never needs Node.  Every order in them is
V8's stable sort with ``(a, b) => a.localeCompare(b, "en")``; this test sorts the same
inputs, in the same input order, with Python's stable sort on
:func:`kernel.canonical.collation.collation_key` and requires the same permutation and the same
ties:

* ``explicit`` — 6,000 random strings (listed with Node's order and ties);
* ``singles`` — every character of the alphabet (all 20,992 ideographs included);
* ``pairs`` — every two-character string over the non-ideographs (plus 48 ideographs):
  848,241 strings, which also proves that no two characters contract;
* ``random`` — 200,000 random strings rebuilt here from the same PRNG (mulberry32);
  with ``explicit``, 206,000 random strings in all;
* ``groups`` — the primary-weight classes Node reports (sensitivity "base").

Plus properties: the key is a total preorder consistent with the vector order, the
ASCII fast path equals the general path, ignorable controls change nothing, characters
outside the alphabet are refused, and no two distinct strings over the alphabet (without
ignorable controls) tie — the collation elements form a uniquely decodable code.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.canonical import collation as C
from kernel.canonical import digest as D
from kernel.errors import NonPortableValue

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "collation" / "icu78-en-order.json"
HAN = range(0x4E00, 0xA000)
IGNORABLE = "".join(chr(c) for c in (*range(0x09), *range(0x0E, 0x20), 0x7F))


@cache
def vectors() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(VECTORS.read_text(encoding="utf-8"))
    return doc


def non_han() -> list[str]:
    return [chr(cp) for cp in vectors()["alphabet"]["codePoints"]]


def order_digest(strings: list[str]) -> tuple[str, list[int], list[int]]:
    """sha256 of the stable sorted permutation and tie flags, as make_vectors.js."""
    keys = [C.collation_key(s) for s in strings]
    order = sorted(range(len(strings)), key=keys.__getitem__)
    ties = [int(k > 0 and keys[order[k - 1]] == keys[i]) for k, i in enumerate(order)]
    text = ",".join(map(str, order)) + "|" + "".join(map(str, ties))
    return hashlib.sha256(text.encode("ascii")).hexdigest(), order, ties


# --------------------------------------------------------------------------- the PRNG


def mulberry32(seed: int) -> Callable[[], float]:
    state = seed & 0xFFFFFFFF

    def rand() -> float:
        nonlocal state
        state = (state + 0x6D2B79F5) & 0xFFFFFFFF
        a = state
        t = ((a ^ (a >> 15)) * (1 | a)) & 0xFFFFFFFF
        t = ((t + (((t ^ (t >> 7)) * (61 | t)) & 0xFFFFFFFF)) & 0xFFFFFFFF) ^ t
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296

    return rand


def random_strings(seed: int, count: int) -> list[str]:
    """make_vectors.js ``randomStrings``, step for step."""
    doc = vectors()
    pools = [
        [chr(cp) for cp in HAN] if chars is None else list(chars) for _, chars in doc["pools"]
    ]
    weights: list[int] = doc["poolWeights"]
    group_of = {ch: group for group in doc["groups"] for ch in group}
    rand = mulberry32(seed)

    def pick(seq: Any) -> Any:
        return seq[int(rand() * len(seq))]

    def fresh() -> str:
        length = 1 + int(rand() * 8)
        return "".join(pick(pools[pick(weights)]) for _ in range(length))

    def variant(s: str) -> str:
        out = list(s)
        for _ in range(1 + int(rand() * 2)):
            open_ = [i for i, ch in enumerate(out) if len(group_of.get(ch, "")) > 1]
            if not open_:
                break
            i = pick(open_)
            out[i] = pick([ch for ch in group_of[out[i]] if ch != out[i]])
        return "".join(out)

    out: list[str] = []
    while len(out) < count:
        s = fresh()
        out.append(s)
        family = int(rand() * 4)
        for _ in range(family):
            if len(out) >= count:
                break
            out.append(variant(s))
        if rand() < 0.05 and len(out) < count:
            out.append(s)
    return out


def test_vectors_come_from_the_peer_runtime() -> None:
    doc = vectors()
    assert doc["runtime"] == {"node": "v20.20.2", "icu": "78.2", "unicode": "17.0", "cldr": "48.0"}
    assert doc["comparator"].startswith('String.prototype.localeCompare(other, "en")')


def test_prng_is_mulberry32_as_in_node() -> None:
    check = vectors()["prngCheck"]
    rand = mulberry32(check["seed"])
    assert [rand() for _ in check["values"]] == check["values"]


# --------------------------------------------------------------------------- the alphabet


def test_alphabet_is_exactly_the_vectors_alphabet() -> None:
    alphabet = vectors()["alphabet"]
    assert tuple(alphabet["hanRange"]) == (HAN.start, HAN.stop - 1)
    expected = {*alphabet["codePoints"], *HAN}
    portable = {cp for cp in range(0x10000) if C.is_collation_portable(chr(cp))}
    assert portable == expected
    assert not expected & set(alphabet["excluded"])
    assert C.is_collation_portable("".join(map(chr, sorted(expected))))


@pytest.mark.parametrize(
    "text",
    [
        "e\u0301",  # combining acute (an NFD string)
        "\u00ad",  # soft hyphen: ignorable
        "l\u00b7l",  # the root collation contracts l·
        "\u0387",  # = U+00B7
        "\u037e",  # Greek question mark = ";"
        "\u3007",  # = "0"
        "\u3021",  # = "1"
        "\u0180",  # Latin Extended-B
        "\u1e9e",  # capital sharp s (Latin Extended Additional)
        "\u3042",  # hiragana
        "\ua000",  # Yi
        "\uac00",  # Hangul
        "\uf900",  # CJK compatibility ideograph
        "\U00020000",  # CJK Extension B
        "\U0001f600",  # emoji
        "\ufb01",  # ligature fi
        "\uff5f",  # fullwidth white parenthesis (outside U+FF01-FF5E)
        "\u2044",  # fraction slash
        "\ud800",  # lone surrogate
    ],
)
def test_refuses_characters_outside_the_alphabet(text: str) -> None:
    assert not C.is_collation_portable("abc" + text)
    with pytest.raises(NonPortableValue) as refused:
        C.collation_key("abc" + text)
    assert refused.value.code == "non_portable_value"
    bad = next(ch for ch in text if not C.is_collation_portable(ch))
    assert refused.value.details["character"] == f"U+{ord(bad):04X}"
    assert refused.value.details["value"] == ("abc" + text)[:64]


# --------------------------------------------------------------------------- the oracle


def test_explicit_vector_order_and_ties() -> None:
    explicit = vectors()["explicit"]
    strings: list[str] = explicit["strings"]
    assert len(strings) == 6000
    _, order, ties = order_digest(strings)
    assert order == explicit["order"]
    assert [i for k, i in enumerate(order) if ties[k]] == explicit["ties"]
    assert len(explicit["ties"]) > 100  # ties exist, and keep their input order
    scripts = {unicodedata.name(ch, "?").split()[0] for s in strings for ch in s}
    assert {"LATIN", "GREEK", "CYRILLIC", "CJK", "IDEOGRAPHIC", "FULLWIDTH"} <= scripts


def test_every_single_character() -> None:
    strings = sorted([*non_han(), *map(chr, HAN)])
    expected = vectors()["hashed"]["singles"]
    assert len(strings) == expected["count"] == 21865
    digest, _, ties = order_digest(strings)
    assert (digest, sum(ties)) == (expected["sha256"], expected["tieCount"])


def test_every_pair_of_characters() -> None:
    expected = vectors()["hashed"]["pairs"]
    han = [chr(cp) for i, cp in enumerate(HAN) if i % expected["hanEvery"] == 0]
    alphabet = [*non_han(), *han]
    strings = [x + y for x in alphabet for y in alphabet]
    assert len(strings) == expected["count"]
    digest, _, ties = order_digest(strings)
    assert (digest, sum(ties)) == (expected["sha256"], expected["tieCount"])


def test_random_strings() -> None:
    expected = vectors()["hashed"]["random"]
    strings = random_strings(expected["seed"], expected["count"])
    assert random_strings(vectors()["explicit"]["seed"], 6000) == vectors()["explicit"]["strings"]
    digest, _, ties = order_digest(strings)
    assert (digest, sum(ties)) == (expected["sha256"], expected["tieCount"])


def test_primary_classes_are_nodes() -> None:
    """Node's sensitivity-"base" classes: one primary part per class, classes ascending."""
    groups = vectors()["groups"]
    assert groups[0] == IGNORABLE  # no primary at all
    previous = b""
    for group in groups[1:]:
        primaries = {C.collation_key(ch).split(b"\x00")[0] for ch in group}
        assert len(primaries) == 1, group
        (primary,) = primaries
        assert primary > previous, group
        previous = primary


# --------------------------------------------------------------------------- properties


def sorted_explicit() -> list[tuple[str, int]]:
    explicit = vectors()["explicit"]
    ties = set(explicit["ties"])
    out: list[tuple[str, int]] = []
    rank = -1
    for i in explicit["order"]:
        rank += i not in ties
        out.append((explicit["strings"][i], rank))
    return out


@settings(max_examples=500, deadline=None)
@given(st.data())
def test_key_order_is_the_vector_order(data: st.DataObject) -> None:
    """Total preorder: for any two vector strings, key comparison = Node's comparison."""
    ranked = sorted_explicit()
    a, rank_a = ranked[data.draw(st.integers(0, len(ranked) - 1))]
    b, rank_b = ranked[data.draw(st.integers(0, len(ranked) - 1))]
    key_a, key_b = C.collation_key(a), C.collation_key(b)
    assert (key_a > key_b) - (key_a < key_b) == (rank_a > rank_b) - (rank_a < rank_b)


_ALPHABET_CHARS = st.one_of(
    st.sampled_from([ch for ch in map(chr, vectors()["alphabet"]["codePoints"])]),
    st.integers(HAN.start, HAN.stop - 1).map(chr),
)


@settings(max_examples=300, deadline=None)
@given(st.text(_ALPHABET_CHARS, max_size=12), st.text(st.sampled_from(IGNORABLE), max_size=3),
       st.integers(0, 12))
def test_ignorable_controls_change_nothing(text: str, controls: str, at: int) -> None:
    assert C.collation_key(text[:at] + controls + text[at:]) == C.collation_key(text)


def general_key(text: str) -> bytes:
    """The key built from the per-character table alone (no ASCII fast path)."""
    table = C._table()
    weights = [table[ch] for ch in text]
    primary = b"".join(w.primary for w in weights)
    tertiary = b"".join(w.tertiary for w in weights)
    if all(w.plain for w in weights):
        return primary + b"\x00" + tertiary
    return primary + b"\x00\xff" + b"".join(w.secondary for w in weights) + b"\x00" + tertiary


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(max_codepoint=0x7F), max_size=16))
def test_ascii_fast_path_is_the_general_key(text: str) -> None:
    assert C.collation_key(text) == general_key(text)


@settings(max_examples=300, deadline=None)
@given(st.text(_ALPHABET_CHARS, min_size=1, max_size=12))
def test_wide_key_is_the_general_key(text: str) -> None:
    assert C.collation_key(text) == general_key(text)


def test_ascii_tables_agree_with_the_digest_profile() -> None:
    """One byte per ASCII primary in the order kernel.canonical.digest documents; case at the
    tertiary level; the C0 controls other than TAB..CR, and DEL, ignorable."""
    order = D.PEER_KEY_PRIMARY_ORDER
    assert [C.ASCII_PRIMARY[ord(ch)] for ch in order] == list(range(0x21, 0x21 + len(order)))
    for ch in map(chr, range(0x41, 0x5B)):
        assert C.ASCII_PRIMARY[ord(ch)] == C.ASCII_PRIMARY[ord(ch.lower())]
        assert C.ASCII_TERTIARY[ord(ch)] > C.ASCII_TERTIARY[ord(ch.lower())]
    assert IGNORABLE.encode("ascii") == C.ASCII_IGNORABLE


def test_key_layout_preconditions() -> None:
    """What the key's layout relies on (kernel.canonical.collation docstring): every element with a
    primary has a secondary, the common secondary 0500 is the lowest, tertiaries fit one
    byte below the FF that marks a secondary part, and one-byte primary codes stay below
    the 0x80 that starts the second byte of every three-byte code."""
    elements = [e for es in C._ELEMENTS.values() for e in es]
    assert all(e.secondary for e in elements if e.primary)
    assert min(e.secondary for e in elements if e.secondary) == 0x0500
    assert all(0 < e.tertiary < 0xFF for e in elements)
    assert max(C.ASCII_PRIMARY[ord(ch)] for ch in D.PEER_KEY_PRIMARY_ORDER) < 0x80


def test_no_two_distinct_strings_tie() -> None:
    """Every non-ignorable character has a primary, its collation elements are uniquely
    decodable (Sardinas-Patterson), and the secondaries of primary elements and of
    secondary-only elements are disjoint — so equal keys mean equal element sequences
    mean equal strings (once ignorable controls are dropped)."""
    elements = {ch: tuple(es) for ch, es in C._ELEMENTS.items() if es}
    elements.update({chr(cp): ((1 << 32 | cp, 0x500, 5),) for cp in HAN})  # one each
    assert all(any(e[0] for e in es) for es in elements.values())
    assert len(set(elements.values())) == len(elements)
    on_primary = {e[1] for es in elements.values() for e in es if e[0]}
    secondary_only = {e[1] for es in elements.values() for e in es if not e[0]}
    assert not on_primary & secondary_only
    words = set(elements.values())
    longer = [w for w in words if len(w) > 1]

    def suffixes(d: tuple[Any, ...]) -> set[tuple[Any, ...]]:
        """Dangling suffixes: d a proper prefix of a word, or a word a proper prefix of d."""
        found = {w[len(d):] for w in longer if len(w) > len(d) and w[: len(d)] == d}
        return found | {d[n:] for n in range(1, len(d)) if d[:n] in words}

    dangling = {w[n:] for w in longer for n in range(1, len(w)) if w[:n] in words}
    seen: set[tuple[Any, ...]] = set()
    while dangling:
        assert not dangling & words, "two parses of one element sequence"
        seen |= dangling
        dangling = set().union(*map(suffixes, dangling)) - seen
