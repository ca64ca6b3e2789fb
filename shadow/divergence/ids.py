"""Divergence ids unique across a run judged fixture by fixture.

A divergence's id is a 48-bit hash (:func:`shadow.divergence.stable_id`); two divergences
with the same base id get ``-2``, ``-3`` … in the report's order (:func:`with_ids`).  A
run that numbers each fixture's divergences alone (ADR 0017) gives the same ids except
when two *different* fixtures hash to one base — about 0.35 % of 100,000-session runs,
one in three at 10^6.  :class:`IdCheck` finds those bases after the pass (8 bytes per
distinct base per fixture, sorted with numpy) and :meth:`IdCheck.renumber` gives the
whole-list numbering again, so a report's ids are the ones the whole list would get and
never repeat.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

_HEX = 12  # hex digits of a stable id's hash


class IdCheck:
    """The base ids of every fixture's divergences (one ``prefix``), then the bases two or
    more fixtures share and the renumbering that makes the ids unique."""

    def __init__(self, prefix: str = "d") -> None:
        self.prefix = prefix
        self._bases = array("Q")
        self.renamed: dict[tuple[str, str], str] = {}  # (fixture, id) -> new id

    def base(self, ident: str) -> int:
        start = len(self.prefix) + 1
        return int(ident[start:start + _HEX], 16)

    def add(self, wires: Iterable[Mapping[str, Any]]) -> None:
        """One fixture's divergences, with their ids (:func:`with_ids`)."""
        for b in sorted({self.base(str(w["id"])) for w in wires}):
            self._bases.append(b)

    def shared(self) -> set[int]:
        """The bases more than one fixture has (usually none)."""
        import numpy as np

        if len(self._bases) < 2:
            return set()
        a = np.sort(np.frombuffer(self._bases, dtype=np.uint64))
        return {int(x) for x in np.unique(a[1:][a[1:] == a[:-1]])}

    def renumber(self, wires: Iterable[Mapping[str, Any]], shared: set[int]
                 ) -> Iterator[dict[str, Any]]:
        """``wires`` (every fixture's, in report order) with the ids of the ``shared``
        bases numbered over the whole list, as :func:`with_ids` numbers it; each change
        is kept in :attr:`renamed`."""
        seen: dict[int, int] = {}
        for w in wires:
            ident = str(w["id"])
            b = self.base(ident)
            if b not in shared:
                yield dict(w)
                continue
            seen[b] = seen.get(b, 0) + 1
            stem = ident[:len(self.prefix) + 1 + _HEX]
            new = stem if seen[b] == 1 else f"{stem}-{seen[b]}"
            if new != ident:
                self.renamed[(str(w["fixture"]), ident)] = new
            yield {**w, "id": new}

    def rename_case(self, case: Mapping[str, Any]) -> dict[str, Any]:
        """A judged case with its ``failing`` ids renamed as :meth:`renumber` renamed
        them (sorted, as :func:`shadow.gates.rule.case_outcome` sorts them)."""
        fx = str(case["fixture"])
        if "failing" not in case:
            return dict(case)
        return {**case, "failing": sorted(self.renamed.get((fx, str(i)), str(i))
                                          for i in case["failing"])}
