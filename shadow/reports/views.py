"""The report's long lists as lazy, re-iterable views, and their tallies in one pass.

A run of 100,000 sessions has over a million divergences; the renderers must never hold
them all (docs/adr/0017-bounded-reduce-and-reports.md, step 4).  Everything here reads the
report's ``cases``, ``divergences`` and ``legacy_defects`` — plain lists of a
``report.json`` read from disk, or the disk-backed lists a run streams
(:mod:`shadow.spill`) — through the :class:`Seq` protocol only (``len``, iteration), and
keeps in memory what the vocabulary bounds (surfaces, reason codes, severities, cluster
signatures), one case's divergences at a time, and the names the report lists by
construction (nothing per divergence).

The order the templates see is the report's: divergences sorted by fixture, surface,
severity rank, reason code (:attr:`shadow.divergence.Divergence.sort_key`) and cases by
fixture and surface — a run always writes them so.  A list that is not so sorted (an
edited ``report.json``) is sorted here first when it is in memory; a disk-backed one
must be, and a view that finds it otherwise raises (never a silently wrong report).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from shadow import codes
from shadow.reports import clusters as clusters_mod

SEVERITIES: Final = codes.SEVERITIES
_CODE_ORDER: Final = {c.code: i for i, c in enumerate(codes.codes())}
_ATTR_SPLIT: Final = (("by_candidate", ("candidate", "both")), ("by_baseline", ("baseline",)),
                      ("by_intended", ("intended",)), ("by_none", ("none",)))


def code_order(code: str) -> tuple[int, str]:
    """Reason codes in registry order (unknown codes last, by name)."""
    return (_CODE_ORDER.get(code, 10**6), code)


def slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def fixture_anchor(fixture: str) -> str:
    return f"fx-{slug(fixture)}"


def case_anchor(fixture: str, surface: str) -> str:
    return f"c-{slug(fixture)}--{slug(surface)}"


def code_anchor(code: str) -> str:
    return f"code-{slug(code)}"


def _detail(d: Mapping[str, Any]) -> str:
    return json.dumps(d.get("detail", {}), sort_keys=True, ensure_ascii=False,
                      separators=(", ", ": "))


def record(i: int, d: Mapping[str, Any], prefix: str = "d") -> dict[str, Any]:
    """One divergence (or legacy defect) as the templates show it; ``i`` counts from 1 and
    names a divergence without an id (``prefix-i``)."""
    ids = list(d.get("item_ids", []))
    return {"id": str(d.get("id") or f"{prefix}-{i}"), "fixture": d["fixture"],
            "surface": d["surface"], "reason_code": d["reason_code"],
            "severity": d["severity"], "attribution": d.get("attribution", "none"),
            "items": len(ids), "item_ids": ids, "detail": _detail(d),
            "fixture_anchor": fixture_anchor(d["fixture"]),
            "case_anchor": case_anchor(d["fixture"], d["surface"]),
            "code_anchor": code_anchor(d["reason_code"]),
            "rank": codes.severity_rank(d["severity"])}


class Lazy(Sequence[Any]):
    """A re-iterable view: ``make()`` starts a fresh iteration; ``n`` is its length.
    Indexing and slicing stream (the templates slice the first rows only)."""

    def __init__(self, make: Callable[[], Iterator[Any]], n: int) -> None:
        self._make, self._n = make, n

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[Any]:
        return self._make()

    def __bool__(self) -> bool:
        return self._n > 0

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            return list(itertools.islice(self._make(), start, stop, step))
        i = index + self._n if index < 0 else index
        if not 0 <= i < self._n:
            raise IndexError(index)
        return next(itertools.islice(self._make(), i, None))

    def __repr__(self) -> str:
        return f"Lazy(len={self._n})"


def records(seq: Sequence[Mapping[str, Any]], prefix: str = "d", *,
            keep: Callable[[Mapping[str, Any]], bool] | None = None,
            n: int | None = None) -> Lazy:
    """``record`` of every element of ``seq`` (numbered in ``seq``), lazily — only those
    ``keep`` keeps, when given (``n`` of them), each filtered before it is made."""
    if keep is None:
        return Lazy(lambda: (record(i, d, prefix) for i, d in enumerate(seq, 1)), len(seq))
    return Lazy(lambda: (record(i, d, prefix) for i, d in enumerate(seq, 1) if keep(d)),
                n if n is not None else sum(1 for d in seq if keep(d)))


def by_fixture(seq: Sequence[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], Any]
               ) -> Sequence[Mapping[str, Any]]:
    """``seq`` in ``key`` order: an in-memory list is sorted (stable); any other sequence
    is trusted and checked as it is read (:func:`checked`)."""
    if isinstance(seq, list):
        return sorted(seq, key=key)
    return seq


def checked(items: Iterable[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], Any],
            what: str) -> Iterator[Mapping[str, Any]]:
    """``items``, raising ``ValueError`` on the first one out of ``key`` order."""
    last: Any = None
    for n, x in enumerate(items):
        k = key(x)
        if last is not None and k < last:
            raise ValueError(f"{what}[{n}] is out of order ({k!r} after {last!r})")
        last = k
        yield x


def _fs(x: Mapping[str, Any]) -> tuple[str, str]:
    return (str(x["fixture"]), str(x["surface"]))


class Tally:
    """Every count the reports print, from one pass over the divergences and one over
    the cases (:meth:`cases`), bounded by the vocabulary."""

    def __init__(self, divergences: Sequence[Mapping[str, Any]],
                 defects: Sequence[Mapping[str, Any]]) -> None:
        self.severity: Counter[str] = Counter()
        self.cell: Counter[tuple[str, str]] = Counter()  # (surface, code)
        self.split: Counter[tuple[str, str]] = Counter()  # (surface, attribution)
        self.sev_by_surface: Counter[tuple[str, str]] = Counter()
        self.blocking: Counter[str] = Counter()  # code -> unwaived blocking divergences
        self.clusters = clusters_mod.Accumulator()
        for d in checked(divergences, _fs, "/divergences"):
            sf, code, sev = str(d["surface"]), str(d["reason_code"]), str(d["severity"])
            self.severity[sev] += 1
            self.cell[(sf, code)] += 1
            self.split[(sf, str(d.get("attribution", "none")))] += 1
            self.sev_by_surface[(sf, sev)] += 1
            if sev == "blocking":
                self.blocking[code] += 1
            self.clusters.add(d)
        self.codes = {c for _, c in self.cell} | {str(d["reason_code"]) for d in defects}

    def matrix(self) -> dict[str, Any]:
        """The surface × reason-code table (counts of unwaived divergences)."""
        if not self.cell:
            return {"surfaces": [], "codes": [], "rows": [], "totals": []}
        surfaces = sorted({s for s, _ in self.cell})
        cols = sorted({c for _, c in self.cell}, key=code_order)
        rows = [{"surface": s, "anchor": f"s-{slug(s)}",
                 "counts": [self.cell[(s, c)] for c in cols],
                 "total": sum(self.cell[(s, c)] for c in cols)} for s in surfaces]
        return {"surfaces": surfaces, "codes": [
            {"code": c, "severity": codes.get(c).severity, "anchor": code_anchor(c)}
            for c in cols], "rows": rows,
            "totals": [sum(self.cell[(s, c)] for s in surfaces) for c in cols]}

    def top_codes(self, surface: str) -> str:
        part = [(c, n) for (s, c), n in self.cell.items() if s == surface]
        part.sort(key=lambda cn: (-cn[1], _CODE_ORDER.get(cn[0], float("inf")), cn[0]))
        return ", ".join(f"{c} ×{n}" for c, n in part[:3])

    def surfaces(self, cases: Mapping[str, tuple[int, int]]) -> list[dict[str, Any]]:
        """Per surface: cases, failing cases (``cases``: surface -> (cases, failing)),
        divergences per severity and per attribution, the top three reason codes."""
        out = []
        for sf in sorted(cases):
            n, failing = cases[sf]
            row: dict[str, Any] = {"surface": sf, "cases": n, "failing": failing}
            row.update({s: self.sev_by_surface[(sf, s)] for s in SEVERITIES})
            row["top_codes"] = self.top_codes(sf)
            for col, whom in _ATTR_SPLIT:
                row[col] = sum(self.split[(sf, a)] for a in whom)
            out.append(row)
        return out


def case_stream(cases: Sequence[Mapping[str, Any]], divergences: Sequence[Mapping[str, Any]]
                ) -> Iterator[dict[str, Any]]:
    """Every case (the report's, and any fixture × surface a divergence names), in
    (fixture, surface) order, each with its divergences' records (by severity rank,
    reason code and id), its counts per severity and its status: the run's outcome when
    the report carries one, else the one failure rule at ``major``."""
    recs = (record(i, d) for i, d in enumerate(checked(divergences, _fs, "/divergences"), 1))
    divs = itertools.groupby(recs, key=_fs)
    listed = ((_fs(c), c) for c in checked(cases, _fs, "/cases"))
    nxt_d = next(divs, None)
    nxt_c = next(listed, None)
    last: tuple[str, str] | None = None
    while nxt_d is not None or nxt_c is not None:
        key = min(k for k in (nxt_d and nxt_d[0], nxt_c and nxt_c[0]) if k is not None)
        case, group = None, []
        if nxt_c is not None and nxt_c[0] == key:
            case, nxt_c = nxt_c[1], next(listed, None)
        if nxt_d is not None and nxt_d[0] == key:
            group, nxt_d = list(nxt_d[1]), next(divs, None)
        if key == last:  # a case listed twice: shown once, as the tables always did
            continue
        last = key
        yield _case(key, case, group)


def _case(key: tuple[str, str], case: Mapping[str, Any] | None,
          group: list[dict[str, Any]]) -> dict[str, Any]:
    fx, sf = key
    recs = sorted(group, key=lambda r: (r["rank"], r["reason_code"], r["id"]))
    sev = Counter(r["severity"] for r in recs)
    if case is not None and "outcome" in case:
        status, failing = str(case["outcome"]), list(case.get("failing", []))
    else:
        status = ("fail" if any(codes.fails(r) for r in recs) else "note" if recs
                  else "pass")
        failing = []
    return {"fixture": fx, "surface": sf, **{s: sev.get(s, 0) for s in SEVERITIES},
            "status": status, "failing_ids": failing, "anchor": case_anchor(fx, sf),
            "divergences": recs}


def fixture_stream(cases: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The cases grouped by fixture (what the HTML's per-fixture section lists)."""
    for fx, group in itertools.groupby(cases, key=lambda c: c["fixture"]):
        yield {"fixture": fx, "anchor": fixture_anchor(fx), "cases": list(group)}
