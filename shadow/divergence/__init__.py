"""Divergence engine: projections in, :class:`Divergence` values out.

``invariants.assess(p, canon, index)`` judges one projection alone against the design's
invariants and checks its own claims; ``compare.compare(a, b, ...)`` compares two
projections (identity fast path on equal output digests, then field by field, deepdiff
for structured detail).  Every
value carries a registered reason code (``shadow.codes``); severity follows
``codes.severity_for`` (NO-GO class + candidate ⇒ blocking).  Details hold ids,
digests, categories and counts only — never a body.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shadow import codes


@dataclass(frozen=True, slots=True)
class Divergence:
    fixture: str
    surface: str
    reason_code: str
    severity: str
    attribution: str  # candidate | baseline | both | none
    item_ids: tuple[str, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        return {"fixture": self.fixture, "surface": self.surface,
                "reason_code": self.reason_code, "severity": self.severity,
                "attribution": self.attribution, "item_ids": list(self.item_ids),
                "detail": _plain(self.detail)}

    @property
    def sort_key(self) -> tuple[Any, ...]:
        return (self.fixture, self.surface, codes.severity_rank(self.severity),
                self.reason_code, self.attribution, self.item_ids,
                repr(sorted(_plain(self.detail).items())))


def _plain(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
    if isinstance(v, (list, tuple, set, frozenset)):
        items = [_plain(x) for x in v]
        return sorted(items, key=repr) if isinstance(v, (set, frozenset)) else items
    return v


def make(fixture: str, surface: str, code: str, attribution: str,
         item_ids: Iterable[str] = (), detail: Mapping[str, Any] | None = None,
         *, severity: str | None = None) -> Divergence:
    """Build a divergence; ``severity`` may only *lower* the computed one."""
    sev = codes.severity_for(code, attribution)
    if severity is not None and codes.severity_rank(severity) > codes.severity_rank(sev):
        sev = severity
    return Divergence(fixture, surface, code, sev, attribution,
                      tuple(sorted(set(item_ids))), dict(detail or {}))


_ID_TAG = b"shadow.divergence-id/v1\0"


def stable_id(fixture: str, surface: str, code: str, item_ids: Sequence[str],
              prefix: str = "d") -> str:
    """A divergence's id: a hash of (fixture, surface, reason code, item ids) — the same
    divergence gets the same id in every run of the same corpus, whatever else changed."""
    key = "\0".join([fixture, surface, code, *sorted(item_ids)]).encode("utf-8")
    return f"{prefix}-{hashlib.sha256(_ID_TAG + key).hexdigest()[:12]}"


def with_ids(wires: Sequence[Mapping[str, Any]], prefix: str = "d") -> list[dict[str, Any]]:
    """Wire divergences with an ``id`` each (:func:`stable_id`); two divergences with the
    same key (same items, different detail) get ``-2``, ``-3`` … in their sorted order."""
    seen: dict[str, int] = {}
    out = []
    for w in wires:
        base = stable_id(str(w["fixture"]), str(w["surface"]), str(w["reason_code"]),
                         [str(i) for i in w.get("item_ids", [])], prefix)
        seen[base] = seen.get(base, 0) + 1
        out.append({**w, "id": base if seen[base] == 1 else f"{base}-{seen[base]}"})
    return out


@dataclass(frozen=True, slots=True)
class Violation:
    """One invariant broken by one projection (attributed by the caller)."""

    code: str
    item_ids: tuple[str, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)


__all__ = ["Divergence", "Violation", "make", "stable_id", "with_ids"]
