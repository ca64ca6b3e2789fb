"""KD-1's alphabet (``tests/vectors/peer/KNOWN_DIFFERENCES.md``): the text whose
``localeCompare("en")`` order the kernel reproduces exactly.

It is read from the committed collation oracle vectors
(``tests/vectors/collation/icu78-en-order.json``, written by Node / ICU 78.2), not from
``kernel.canonical.collation``, so the peer tests' predicates do not depend on the code they judge;
``tests/kernel/test_collation.py`` proves that the kernel's alphabet is exactly this one.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "collation" / "icu78-en-order.json"
#: Completely ignorable ASCII controls: they collate as nothing, so keys differing only in
#: them would tie (the digest profile refuses them in object keys).
IGNORABLE_CONTROLS = frozenset(chr(c) for c in (*range(0x09), *range(0x0E, 0x20), 0x7F))


@cache
def alphabet() -> frozenset[str]:
    doc = json.loads(_VECTORS.read_text(encoding="utf-8"))["alphabet"]
    low, high = doc["hanRange"]
    return frozenset(map(chr, [*doc["codePoints"], *range(low, high + 1)]))


def collation_portable(text: str) -> bool:
    """Every character of ``text`` is in the reproduced alphabet (ASCII included)."""
    chars = alphabet()
    return all(ch in chars for ch in text)


def portable_key(key: str) -> bool:
    """An object key the peer digest profile orders exactly: alphabet, no ignorables."""
    return collation_portable(key) and not IGNORABLE_CONTROLS.intersection(key)


def non_portable_set(entries: Any) -> bool:
    """A set the normalizers sort (two or more strings) holding non-portable text."""
    return (
        isinstance(entries, list)
        and len(entries) > 1
        and all(isinstance(e, str) for e in entries)
        and not all(collation_portable(e) for e in entries)
    )
