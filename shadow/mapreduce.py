"""``shadow run``'s map and reduce over a corpus stream, on any executor.

The corpus is read one scenario at a time (:mod:`shadow.corpus_source`), judged on the
chosen executor (:mod:`shadow.executors`), and every result is appended to the run's
shards (:mod:`shadow.shards`) as it arrives.  :func:`reduce_shards` then builds, with
pandas, what the reports need — everything sorted by value, so the executor, the worker
count, the batch boundaries and the order of the corpus never reach a report byte.

What the corpus-wide checks of :func:`shadow.fixtures.load_corpus` do, this does on the
stream: a scenario name seen again (a second shard) is quarantined ("also in …") and not
replayed; a scenario whose content repeats an earlier one's under another name is
quarantined as a copy (by name order, after the map); the capture tool's
``MANIFEST.json`` is checked against each scenario's files as it passes.

The determinism rerun (docs/scale.md, "Determinism at scale") replays again, in reverse
order, every fixture when the corpus has at most :data:`SAMPLE` scenarios, otherwise the
fixtures whose name hashes below ``SAMPLE / N`` (:func:`shadow.mapstep.sample_fraction`):
about :data:`SAMPLE` of them, the same ones whatever the executor or the order.  The
evidence says which rule applied and how many fixtures it compared.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from shadow.divergence import Divergence
from shadow.errors import FixtureError
from shadow.executors import MapOptions, run_map
from shadow.mapstep import MapContext, Task, UnitResult, sample_fraction
from shadow.projection import Projection
from shadow.shards import ShardWriter, frame

SAMPLE: Final = 500  # fixtures the determinism rerun replays again, at most about
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, slots=True)
class Reduced:
    """The map's output as the judgement needs it (sorted by value)."""

    divergences: list[Divergence]
    legacy_defects: list[Divergence]
    comparisons: int
    cases: list[tuple[str, str]]
    scenarios: int  # scenarios judged (what load_corpus would list)
    quarantined: list[FixtureError]  # sorted by source, as Corpus.quarantined
    digest: str  # the corpus digest, as Corpus.digest
    synthetic: int  # scenarios marked synthetic: true
    noise: dict[str, tuple[int, int]]  # rule -> (captures, values)
    replay_digest: str  # of the whole map's raw output (determinism)
    determinism: dict[str, Any] = field(default_factory=dict)
    projections: list[Projection] = field(default_factory=list, repr=False)


def _divergence(wire: str) -> Divergence:
    d = json.loads(wire)
    return Divergence(d["fixture"], d["surface"], d["reason_code"], d["severity"],
                      d["attribution"], tuple(d["item_ids"]), d["detail"])


# --- the MANIFEST.json of the capture tool, checked unit by unit ----------------------------


class ManifestCheck:
    """Every scenario and capture file a capture-tool ``MANIFEST.json`` lists must be
    there: the rule of :func:`shadow.fixtures.load_corpus`, fed unit by unit (only the
    files of listed scenarios are remembered)."""

    def __init__(self, source: Any) -> None:
        from shadow.fixtures import _listed, _listed_files, _manifests

        self.source = source
        self.manifests = _manifests(source)
        self.listed: dict[str, list[str]] = {}
        for _origin, _problem, doc in self.manifests:
            for name, (_i, entry) in _listed(doc, None) if doc is not None else ():
                self.listed.setdefault(name, []).extend(_listed_files(entry))
        self.members: dict[str, frozenset[str]] = {}

    def see(self, unit: Any) -> None:
        files = self.listed.get(unit.name)
        if files is not None:
            self.members[unit.name] = frozenset(
                f for f in files if self.source.has_file(unit, f))

    def problems(self, present: set[str]) -> list[FixtureError]:
        from shadow.fixtures import _manifest_problems

        out: list[FixtureError] = []
        for origin, problem, doc in self.manifests:
            if problem is not None:
                out.append(problem)
            else:
                out += _manifest_problems(doc, origin, present, self.members, None)
        return out


# --- map --------------------------------------------------------------------------------------


@dataclass
class _Stream:
    """The driver's side of the map: what it learns while feeding the executor."""

    total: int
    sample_all: bool
    manifest: ManifestCheck
    label: str
    keep_sample: bool = True
    errors: list[FixtureError] = field(default_factory=list)  # found by the driver
    names: set[str] = field(default_factory=set)
    sampled: list[Task] = field(default_factory=list)

    def tasks(self, units: Iterator[Any]) -> Iterator[Task]:
        origins: dict[str, str] = {}
        for u in units:
            if u.name in self.names:
                self.errors.append(FixtureError(
                    f"{u.name}/input.json", "", "a scenario name of its own (one scenario "
                    "folder of that name in the corpus)",
                    f"also in {origins.get(u.name) or self.label}"))
                continue
            self.names.add(u.name)
            if u.origin:
                origins[u.name] = u.origin
            self.manifest.see(u)
            task = Task(u.name, tuple(u.files), u.origin, u.error)
            if self.keep_sample and (self.sample_all
                                     or sample_fraction(u.name) < SAMPLE / self.total):
                self.sampled.append(task)
            yield task


def map_to_shards(source: Any, ctx: MapContext, opts: MapOptions, shards: Path, *,
                  progress: Progress | None = None, sample: bool = True
                  ) -> tuple[_Stream, list[Projection]]:
    """The map alone: every scenario of ``source`` judged on ``opts.executor``, its rows
    appended to ``shards`` in batches (nothing but the driver's bookkeeping — names seen,
    the determinism sample when ``sample`` — stays in memory)."""
    total = source.count()
    stream = _Stream(total, total <= SAMPLE, ManifestCheck(source), source.label,
                     keep_sample=sample)
    writer = ShardWriter(shards)
    projections: list[Projection] = []
    done = 0

    def on_result(r: UnitResult) -> None:
        nonlocal done
        done += 1
        writer.add(r)
        projections.extend(r.projections)
        if progress is not None:
            progress(done, total, r.fixture)

    run_map(stream.tasks(source.units()), ctx, opts, total, on_result)
    writer.close()
    return stream, projections


def map_corpus(source: Any, ctx: MapContext, opts: MapOptions, shards: Path, *,
               progress: Progress | None = None, determinism: bool = True) -> Reduced:
    """Judge every scenario of ``source`` on ``opts.executor``; the rows go to ``shards``;
    returns the reduction (and, with ``determinism``, the sampled rerun's verdict)."""
    stream, projections = map_to_shards(source, ctx, opts, shards, progress=progress,
                                        sample=determinism)
    errors = [*source.problems(), *stream.errors, *stream.manifest.problems(stream.names)]
    red = reduce_shards(shards, errors, projections)
    if not determinism:
        return red
    return _rerun(red, stream, ctx, opts, shards)


def _rerun(red: Reduced, stream: _Stream, ctx: MapContext, opts: MapOptions,
           shards: Path) -> Reduced:
    """Replay the sample again in reverse order and compare the digests."""
    from dataclasses import replace

    kept = _kept_names(shards)
    sample = [t for t in reversed(stream.sampled) if t.name in kept]
    again: list[UnitResult] = []
    run_map(sample, ctx, opts, len(sample), again.append)
    names = {t.name for t in sample}
    first = _digest_of(shards, names) if not stream.sample_all else red.replay_digest
    rerun = results_digest_of(again)
    info = {"status": "pass" if first == rerun else "fail", "order": "reversed",
            "digest": first, "rerun_digest": rerun,
            "sample": {"rule": "all" if stream.sample_all else
                       f"sha256(name) below {SAMPLE}/N", "fixtures": len(sample),
                       "of": red.scenarios}}
    return replace(red, determinism=info)


# --- reduce -----------------------------------------------------------------------------------


def _kept_names(shards: Path) -> set[str]:
    fx = frame(shards, "fixtures", ["fixture", "status", "content_key"])
    return set(fx["fixture"]) - set(_copies(fx))


def _copies(fx: Any) -> dict[str, str]:
    """name -> the earlier scenario (by name) it copies: a copy is not more evidence."""
    parsed = fx[fx["content_key"] != ""].sort_values("fixture", kind="stable")
    first = parsed.drop_duplicates("content_key", keep="first").set_index(
        "content_key")["fixture"]
    dup = parsed[parsed.duplicated("content_key", keep="first")]
    return {str(n): str(first[k]) for n, k in zip(dup["fixture"], dup["content_key"],
                                                    strict=True)}


def _digest_of(shards: Path, names: set[str]) -> str:
    from shadow.evidence import results_digest

    divs, defects, cases, comparisons = _raw(shards, names)
    return results_digest([d.to_wire() for d in divs], [d.to_wire() for d in defects],
                          cases, comparisons)


def results_digest_of(results: Sequence[UnitResult]) -> str:
    from shadow.evidence import results_digest

    divs = sorted((_divergence(json.dumps(d)) for r in results for d in r.divergences),
                  key=lambda d: d.sort_key)
    defects = sorted((_divergence(json.dumps(d)) for r in results for d in r.legacy_defects),
                     key=lambda d: d.sort_key)
    cases = sorted((r.fixture, c) for r in results for c in r.cases)
    return results_digest([d.to_wire() for d in divs], [d.to_wire() for d in defects],
                          cases, sum(r.comparisons for r in results))


def _raw(shards: Path, names: set[str] | None) -> tuple[list[Divergence], list[Divergence],
                                                        list[tuple[str, str]], int]:
    def only(df: Any) -> Any:
        return df if names is None else df[df["fixture"].isin(names)]

    divs = sorted((_divergence(w) for w in only(frame(shards, "divergences"))["wire"]),
                  key=lambda d: d.sort_key)
    defects = sorted((_divergence(w) for w in only(frame(shards, "legacy_defects"))["wire"]),
                     key=lambda d: d.sort_key)
    cf = only(frame(shards, "cases")).sort_values(["fixture", "surface"], kind="stable")
    cases = list(zip(cf["fixture"].astype(str), cf["surface"].astype(str), strict=True))
    fx = only(frame(shards, "fixtures", ["fixture", "comparisons"]))
    return divs, defects, cases, int(fx["comparisons"].sum())


def reduce_shards(shards: Path, errors: Sequence[FixtureError],
                  projections: Sequence[Projection] = ()) -> Reduced:
    """Everything the judgement needs from the shards plus the driver's ``errors``."""
    from shadow.evidence import results_digest

    fx = frame(shards, "fixtures")
    copies = _copies(fx)
    kept = fx[~fx["fixture"].isin(list(copies))]
    names = set(kept["fixture"].astype(str))
    q = frame(shards, "quarantine")
    q = q[q["fixture"].isin(names)]
    load_errors = [FixtureError(s, p, e, g) for s, p, e, g in zip(
        q["source"], q["pointer"], q["expected"], q["got"], strict=True)]
    # a scenario without its cassette was loaded (it counts in the corpus digest) and is
    # quarantined after, as run.without_cassettes does
    nocas_names = set(kept.loc[kept["status"] == "no_cassette", "fixture"])
    nocas = [e for e, f in zip(load_errors, q["fixture"], strict=True) if f in nocas_names]
    load_errors = [e for e, f in zip(load_errors, q["fixture"], strict=True)
                   if f not in nocas_names]
    load_errors += [FixtureError(f"{n}/input.json", "", "a scenario of its own (a copy is "
                                 "not more evidence)", f"a copy of {first}")
                    for n, first in sorted(copies.items())]
    load_errors += errors
    load_errors.sort(key=lambda e: e.source)
    scen = kept[kept["status"].isin(["judged", "crashed", "no_cassette"])].sort_values(
        "fixture", kind="stable")
    h = hashlib.sha256()
    for name, dig in zip(scen["fixture"], scen["digest"], strict=True):
        h.update(f"{name}\0{dig}\n".encode())
    for e in load_errors:
        h.update(f"quarantined\0{e.source}\n".encode())
    judged = names - nocas_names
    divs, defects, cases, comparisons = _raw(shards, judged)
    nf = frame(shards, "noise")
    nf = nf[nf["fixture"].isin(judged)]
    noise = {str(rid): (len(g), int(g["values"].sum()))
             for rid, g in nf.groupby("rule", sort=True)}
    replay = results_digest([d.to_wire() for d in divs], [d.to_wire() for d in defects],
                            cases, comparisons)
    return Reduced(divs, defects, comparisons, cases,
                   int((scen["status"] != "no_cassette").sum()),
                   sorted([*load_errors, *nocas], key=lambda e: e.source),
                   "sha256:" + h.hexdigest(), int(scen["synthetic"].astype(bool).sum()),
                   noise, replay, {}, sorted(projections, key=lambda p: (p.fixture,
                                                                         p.surface)))
