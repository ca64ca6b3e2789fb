"""Clusters: the report's unwaived divergences grouped by what they have in common.

A divergence's **signature** is ``(reason_code, surface, attribution, shape, values)``:

* ``shape`` — the sorted top-level keys of its ``detail`` (which facts the engine stated);
* ``values`` — the values of a small set of categorical detail keys when present
  (:data:`CATEGORICAL`: the claim verdict, the drop reasons, the field, the memory
  operation, …).  Those are closed vocabularies the engine writes; a value that does not
  look like one (free text, a secret) is shown as ``<text>`` and never printed.

No free text and no id (item ids, rule ids, counts) is ever part of a signature, so one
cluster is one *kind* of difference, wherever it occurs.  Every cluster has a count, the
number of fixtures it spans, its worst severity and an exemplar (the first divergence of
the cluster in report order), linked by its stable id (``#d-…``).  The counts of all
clusters sum to the number of unwaived divergences.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from shadow import codes

#: categorical detail keys whose value is part of a signature (all engine vocabularies)
CATEGORICAL: Final = ("problem", "claim", "why", "field", "kind", "op", "truth",
                      "baseline_reason", "candidate_reason", "baseline_claim",
                      "candidate_claim", "baseline_error", "candidate_error")
_VALUE: Final = re.compile(r"[A-Za-z0-9_.:+/ -]{1,60}")
TEXT: Final = "<text>"


def _has_secret(text: str) -> bool:
    from shadow.canonical import has_secret

    return has_secret(text)


def category_value(value: Any) -> str:
    """A categorical detail value as shown: JSON scalars as themselves, anything else
    (free text, a nested value, secret material) as ``<text>``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and _VALUE.fullmatch(value) and not _has_secret(value):
        return value
    return TEXT


def categorical(detail: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(key, shown value)`` for each categorical key present in ``detail``."""
    return [(k, category_value(detail[k])) for k in CATEGORICAL if k in detail]


def signature(d: Mapping[str, Any]) -> tuple[Any, ...]:
    detail = d.get("detail") or {}
    shape = tuple(sorted(str(k) for k in detail)) if isinstance(detail, Mapping) else ()
    values = tuple(categorical(detail)) if isinstance(detail, Mapping) else ()
    return (str(d.get("reason_code")), str(d.get("surface")),
            str(d.get("attribution", "none")), shape, values)


def _key(sig: tuple[Any, ...]) -> str:
    text = repr(sig).encode("utf-8", "surrogatepass")
    return "cl-" + hashlib.sha256(b"shadow.cluster/v1\0" + text).hexdigest()[:10]


class Accumulator:
    """Clusters built one divergence at a time, in report order (grouped by fixture, as
    a report's divergences always are: a cluster's fixtures are counted as they change).
    Memory: one entry per signature — plus every member's id with ``ids``."""

    def __init__(self, *, ids: bool = False) -> None:
        self._groups: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._ids = ids

    def add(self, d: Mapping[str, Any]) -> None:
        sig = signature(d)
        g = self._groups.get(sig)
        fixture, severity = str(d.get("fixture")), str(d.get("severity", "info"))
        if g is None:
            g = self._groups[sig] = {"count": 0, "fixtures": 0, "last": None,
                                     "severity": severity,
                                     "exemplar": str(d.get("id", "")), "ids": []}
        g["count"] += 1
        if g["last"] != fixture:
            g["fixtures"], g["last"] = g["fixtures"] + 1, fixture
        if codes.severity_rank(severity) < codes.severity_rank(g["severity"]):
            g["severity"] = severity
        if self._ids:
            g["ids"].append(str(d.get("id", "")))

    def result(self) -> list[dict[str, Any]]:
        """Every cluster, largest first; ties by worst severity, reason-code order,
        surface and signature."""
        order = {c.code: i for i, c in enumerate(codes.codes())}
        out = []
        for sig, g in self._groups.items():
            code, surface, attribution, shape, values = sig
            c = {"key": _key(sig), "reason_code": code, "surface": surface,
                 "attribution": attribution, "severity": g["severity"],
                 "shape": list(shape), "values": [{"key": k, "value": v} for k, v in values],
                 "label": ", ".join(f"{k}={v}" for k, v in values),
                 "count": g["count"], "fixtures": g["fixtures"], "exemplar": g["exemplar"]}
            if self._ids:
                c["ids"] = list(g["ids"])
            out.append(c)
        out.sort(key=lambda c: (-c["count"], codes.severity_rank(c["severity"]),
                                order.get(c["reason_code"], 10**6), c["surface"],
                                c["attribution"], c["shape"], c["label"]))
        return out


def clusters(divergences: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every cluster of ``divergences`` (the report's unwaived ones), with its members'
    ids; the input is taken in fixture order (stable), as a report lists it."""
    acc = Accumulator(ids=True)
    for d in sorted(divergences, key=lambda d: str(d.get("fixture"))):
        acc.add(d)
    return acc.result()


__all__ = ["CATEGORICAL", "Accumulator", "categorical", "category_value", "clusters", "signature"]
