"""KD-1 for the memory vectors (``tests/vectors/peer/KNOWN_DIFFERENCES.md``, "memory").

The peer sorts ``tags`` / ``allowedSinks`` / ``supersedes`` / ``parentDigests`` with ICU
collation; for a set of two or more strings with text outside the reproduced alphabet
(:mod:`tests.peer.kd1`: ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic, CJK
punctuation, fullwidth forms, CJK ideographs) the kernel refuses with
``non_portable_value`` (:func:`kd1_non_portable_collation` is the predicate).

Such a case is checked twice: (1) our documented outcome at the first step the
predicate names; (2) a **structural replay** — every non-portable set entry replaced,
in the inputs *and* in the peer's outputs, by the same ASCII stand-in
(:func:`kd1_substitute`), the case run to the end, and results compared with set
order and digests masked (:func:`mask`): the order of those sets, and so every digest
over them, is exactly what KD-1 leaves open; states, revisions, errors, receipts'
other fields, uuids, purge calls and stores must all agree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from tests.peer.kd1 import collation_portable, non_portable_set

SETS = ("tags", "allowedSinks", "supersedes", "parentDigests")
DIGEST_KEYS = ("digest", "recordDigest", "eventDigest")


def kd1_non_portable_collation(value: Any) -> bool:
    """KD-1 predicate: some sorted set in ``value`` has ≥ 2 strings, one non-portable."""
    if isinstance(value, Mapping):
        return any(
            (key in SETS and non_portable_set(entry)) or kd1_non_portable_collation(entry)
            for key, entry in value.items()
        )
    if isinstance(value, list):
        return any(kd1_non_portable_collation(v) for v in value)
    return False


def stand_in(text: str) -> str:
    """The ASCII stand-in of a non-portable set entry (injective, identifier-safe)."""
    return "kd1-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def kd1_substitute(value: Any) -> Any:
    """``value`` with every non-portable string inside a sorted set replaced by its
    stand-in."""
    if isinstance(value, Mapping):
        out = {}
        for key, entry in value.items():
            if key in SETS and isinstance(entry, list):
                out[key] = [
                    stand_in(e)
                    if isinstance(e, str) and not collation_portable(e)
                    else kd1_substitute(e)
                    for e in entry
                ]
            else:
                out[key] = kd1_substitute(entry)
        return out
    if isinstance(value, list):
        return [kd1_substitute(v) for v in value]
    return value


def reseal(record: Any) -> Any:
    """A substituted input record with its supplied ``digest`` recomputed (the peer
    accepted the original; a record that does not normalize is returned as is)."""
    from kernel.canonical.records import normalize_memory_record
    from kernel.errors import KernelError

    if not isinstance(record, Mapping) or "digest" not in record:
        return record
    try:
        sealed = normalize_memory_record({k: v for k, v in record.items() if k != "digest"})
    except KernelError:
        return record
    return {**record, "digest": sealed["digest"]}


def mask(value: Any) -> Any:
    """Set order and digests masked (what KD-1 leaves open)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, entry in value.items():
            if key in DIGEST_KEYS and isinstance(entry, str):
                out[key] = "<digest>"
            elif key in SETS and isinstance(entry, list):
                out[key] = sorted(mask(e) for e in entry)
            else:
                out[key] = mask(entry)
        return out
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value
