"""The corpus-wide rules of a fixture corpus, kept in one ledger fed one scenario at a time.

What no single scenario can tell (docs/fixtures.md, "Quarantine"): a scenario name a later
shard repeats ("also in <origin>"), a scenario whose content repeats an earlier one's
under another name (a copy, by name order), the capture tool's ``MANIFEST.json`` (every
scenario and capture file it lists must be there), and the corpus digest over the
scenarios kept and the sources quarantined.  :func:`shadow.fixtures.corpus_from_source`
feeds a :class:`CorpusLedger` from parsed scenarios, ``shadow run``'s stream
(:mod:`shadow.mapreduce`) from the units it sends and the ``fixtures`` table of its
shards: one rule, one message, one digest for both.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from shadow.boundary import loads
from shadow.errors import FixtureError, InputError

if TYPE_CHECKING:
    from shadow.corpus_source import CorpusSource, Unit

#: ``(name, status, digest, content_key)`` of one scenario: a status other than
#: :data:`QUARANTINED` is a scenario of the corpus (its digest counts); an empty
#: content key is never a copy
Row = tuple[str, str, str, str]
QUARANTINED: Final = "quarantined"


@dataclass(frozen=True, slots=True)
class Ledger:
    """What the corpus-wide rules decided."""

    scenarios: tuple[str, ...]  # the scenarios kept (copies left out), by name
    copies: Mapping[str, str]  # name -> the earlier scenario (by name) it copies
    quarantined: tuple[FixtureError, ...]  # by source, as Corpus.quarantined
    digest: str  # the corpus digest, as Corpus.digest


def copies_of(rows: Iterable[Row]) -> dict[str, str]:
    """name -> the earlier scenario (by name) whose content it repeats: a copy is not more
    evidence (a copied folder with the scenario field renamed)."""
    first: dict[str, str] = {}
    out: dict[str, str] = {}
    for name, status, _digest, key in sorted(rows):
        if status == QUARANTINED or not key:
            continue
        if key in first:
            out[name] = first[key]
        else:
            first[key] = name
    return out


@dataclass
class CorpusLedger:
    """The corpus-wide rules over ``source``: :meth:`see` each unit as it is read,
    :meth:`finish` with every scenario's row."""

    source: CorpusSource
    wanted: set[str] | None = None  # load_corpus(only=…)
    problems: list[FixtureError] = field(init=False)  # top-level quarantine
    manifests: list[tuple[str, FixtureError | None, Any]] = field(init=False)
    listed: dict[str, set[str]] = field(init=False)  # scenario -> files a manifest lists
    members: dict[str, frozenset[str]] = field(default_factory=dict, init=False)
    origin_of: dict[str, str] = field(default_factory=dict, init=False)  # names seen
    repeated: list[FixtureError] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.problems = [e for e in self.source.problems()
                         if self.wanted is None or e.source in self.wanted]
        self.manifests = _manifests(self.source)
        self.listed = {}
        for _, _, doc in self.manifests:
            for name, (_, entry) in _listed(doc, self.wanted) if doc is not None else ():
                self.listed.setdefault(name, set()).update(_listed_files(entry))

    def see(self, unit: Unit) -> bool:
        """Record ``unit``; False when its name was seen before (it is quarantined, "also
        in <origin>", and must not be read further)."""
        if unit.name in self.origin_of:
            self.repeated.append(FixtureError(
                f"{unit.name}/input.json", "", "a scenario name of its own (one scenario "
                "folder of that name in the corpus)",
                f"also in {self.origin_of[unit.name] or self.source.label}"))
            return False
        self.origin_of[unit.name] = unit.origin
        if unit.name in self.listed:
            self.members[unit.name] = frozenset(
                f for f in self.listed[unit.name] if self.source.has_file(unit, f))
        return True

    def release(self) -> None:
        """After :meth:`finish`: let go of the per-name records (a name per scenario seen)
        — the decision is made, and the reduce that follows should not carry them."""
        self.origin_of.clear()
        self.members.clear()
        self.listed.clear()

    def finish(self, rows: Iterable[Row], errors: Iterable[FixtureError],
               after: Iterable[FixtureError] = ()) -> Ledger:
        """The decision, from every scenario's row and the scenarios' own ``errors``;
        ``after`` are quarantined after the digest (a scenario loaded, then found
        unreplayable: it counts in the digest as a scenario).  An error of a copy is left
        out (the copy's own quarantine names it)."""
        rows = list(rows)
        copies = copies_of(rows)
        kept = sorted((name, digest) for name, status, digest, _ in rows
                      if status != QUARANTINED and name not in copies)
        out = [*self.problems, *(e for e in errors if _scenario(e) not in copies),
               *self.repeated]
        out += [FixtureError(f"{n}/input.json", "", "a scenario of its own (a copy is not "
                             "more evidence)", f"a copy of {first}")
                for n, first in sorted(copies.items())]
        present = set(self.origin_of) | {_scenario(e) for e in self.problems}
        for origin, problem, doc in self.manifests:
            out += [problem] if problem is not None else _manifest_problems(
                doc, origin, present, self.members, self.wanted)
        out.sort(key=lambda e: e.source)
        h = hashlib.sha256()
        for name, digest in kept:
            h.update(f"{name}\0{digest}\n".encode())
        for e in out:
            h.update(f"quarantined\0{e.source}\n".encode())
        out += (e for e in after if _scenario(e) not in copies)
        out.sort(key=lambda e: e.source)
        return Ledger(tuple(n for n, _ in kept), copies, tuple(out), "sha256:" + h.hexdigest())


def _scenario(e: FixtureError) -> str:
    return e.source.split("/", 1)[0]


# --- the capture tool's MANIFEST.json ---------------------------------------------------


MANIFEST_FORMAT = "legacy-capture-manifest/v1"


def _manifests(source: CorpusSource) -> list[tuple[str, FixtureError | None, Any]]:
    """(origin, problem, document) of every capture-tool ``MANIFEST.json`` of the corpus
    (one per shard at most); another ``MANIFEST.json`` is corpus metadata only."""
    out: list[tuple[str, FixtureError | None, Any]] = []
    for origin, name in source.metadata_names():
        if name != "MANIFEST.json":
            continue
        try:
            doc = loads(source.metadata(name, origin) or b"", "MANIFEST.json")
        except InputError as exc:
            out.append((origin, FixtureError("MANIFEST.json", exc.pointer, exc.expected,
                                             exc.got), None))
            continue
        if isinstance(doc, Mapping) and doc.get("format") == MANIFEST_FORMAT:
            out.append((origin, None, doc))
    return out


def _listed(doc: Any, wanted: set[str] | None) -> Iterator[tuple[str, tuple[int, Any]]]:
    """(scenario name, (index, entry)) of every scenario a manifest lists (and ``wanted``)."""
    listed = doc.get("scenarios") if isinstance(doc, Mapping) else None
    for i, entry in enumerate(listed if isinstance(listed, list) else []):
        name = entry.get("id") if isinstance(entry, Mapping) else None
        if isinstance(name, str) and (wanted is None or name in wanted):
            yield name, (i, entry)


def _listed_files(entry: Any) -> Iterator[str]:
    surfaces = entry.get("surfaces") if isinstance(entry, Mapping) else None
    for surf in surfaces if isinstance(surfaces, list) else []:
        fname = surf.get("file") if isinstance(surf, Mapping) else None
        if isinstance(fname, str):
            yield fname


def _manifest_problems(doc: Any, origin: str, present: set[str],
                       members: Mapping[str, frozenset[str]],
                       wanted: set[str] | None) -> list[FixtureError]:
    """When the corpus carries the capture tool's ``MANIFEST.json``, every scenario and
    capture file it lists must be there (``members``: the regular files of each listed
    scenario found): a deleted capture is quarantined, never silently left out of the
    judgement.  In a sharded corpus a shard's manifest may list any shard's scenarios."""
    where = f"MANIFEST.json of {origin}" if origin else "MANIFEST.json"
    out: list[FixtureError] = []
    for name, (i, entry) in _listed(doc, wanted):
        if name not in present:
            out.append(FixtureError(f"{name}/input.json", "", f"the scenario {where} "
                                    f"lists (/scenarios/{i})", "no such folder"))
            continue
        surfaces = entry.get("surfaces")
        for j, surf in enumerate(surfaces if isinstance(surfaces, list) else []):
            fname = surf.get("file") if isinstance(surf, Mapping) else None
            if isinstance(fname, str) and fname not in members.get(name, frozenset()):
                failed = isinstance(surf, Mapping) and surf.get("status") == "capture-error"
                out.append(FixtureError(f"{name}/{fname}", "", f"the capture {where} "
                                        f"lists (/scenarios/{i}/surfaces/{j})",
                                        "no such file: the capture failed (MANIFEST "
                                        "capture_errors)" if failed else "no such file"))
    return out


__all__ = ["MANIFEST_FORMAT", "QUARANTINED", "CorpusLedger", "Ledger", "Row", "copies_of"]
