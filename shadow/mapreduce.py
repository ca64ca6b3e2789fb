"""``shadow run``'s map and reduce over a corpus stream, on any executor.

The corpus is read one scenario at a time (:mod:`shadow.corpus_source`), judged on the
chosen executor (:mod:`shadow.executors`), and every result is appended to the run's
shards (:mod:`shadow.shards`) as it arrives.  :func:`reduce_shards` then builds, with
pandas, what the reports need — everything sorted by value, so the executor, the worker
count, the batch boundaries and the order of the corpus never reach a report byte.

The corpus-wide rules are :func:`shadow.fixtures.load_corpus`'s own
(:class:`shadow.corpus_ledger.CorpusLedger`), fed from the stream: a scenario name seen
again (a second shard) is quarantined ("also in …") and not replayed; the capture tool's
``MANIFEST.json`` is checked against each scenario's files as it passes; copies (by name
order) and the corpus digest are decided after the map, from the shards' ``fixtures``
table.

The determinism rerun (docs/scale.md, "Determinism at scale") replays again, in reverse
order, every fixture when the corpus has at most :data:`SAMPLE` scenarios, otherwise the
fixtures whose name hashes below ``SAMPLE / N`` (:func:`shadow.mapstep.sample_fraction`):
about :data:`SAMPLE` of them, the same ones whatever the executor or the order.  The
evidence says which rule applied and how many fixtures it compared.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from shadow.corpus_ledger import CorpusLedger, Row, copies_of
from shadow.divergence import Divergence
from shadow.errors import FixtureError
from shadow.executors import MapOptions, SchedulerLost, run_map
from shadow.mapstep import MapContext, Task, UnitResult, sample_fraction
from shadow.projection import Projection
from shadow.shards import ShardWriter, scan

SAMPLE: Final = 500  # fixtures the determinism rerun replays again, at most about
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, slots=True)
class Reduced:
    """The map's output as the judgement needs it: counts, the corpus-wide verdicts, and
    the judged fixtures' rows on disk (:meth:`groups`, one fixture at a time)."""

    shards: Path
    keep: Callable[[str], bool]  # a fixture whose rows are judged (not a copy, has a cassette)
    comparisons: int
    cases: int  # fixture × surface cases of the judged fixtures
    scenarios: int  # scenarios judged (what load_corpus would list)
    quarantined: list[FixtureError]  # sorted by source, as Corpus.quarantined
    digest: str  # the corpus digest, as Corpus.digest
    synthetic: int  # scenarios marked synthetic: true
    noise: dict[str, tuple[int, int]]  # rule -> (captures, values)
    replay_digest: str  # of the whole map's raw output (determinism)
    determinism: dict[str, Any] = field(default_factory=dict)
    projections: list[Projection] = field(default_factory=list, repr=False)

    def groups(self) -> Iterator[Group]:
        """The judged fixtures' rows, in name order (reads the shards again each call)."""
        return groups(self.shards, self.keep)

    def divergences(self) -> Iterator[Divergence]:
        return (d for g in self.groups() for d in g.divergences)

    def legacy_defects(self) -> Iterator[Divergence]:
        return (d for g in self.groups() for d in g.legacy_defects)

    def case_keys(self) -> Iterator[tuple[str, str]]:
        return ((g.fixture, s) for g in self.groups() for s in g.surfaces)


def _divergence(wire: str) -> Divergence:
    d = json.loads(wire)
    return Divergence(d["fixture"], d["surface"], d["reason_code"], d["severity"],
                      d["attribution"], tuple(d["item_ids"]), d["detail"])


# --- map --------------------------------------------------------------------------------------


@dataclass
class _Stream:
    """The driver's side of the map: what it learns while feeding the executor."""

    total: int
    sample_all: bool
    ledger: CorpusLedger
    keep_sample: bool = True
    sampled: list[Task] = field(default_factory=list)

    def tasks(self, units: Iterator[Any]) -> Iterator[Task]:
        for u in units:
            if not self.ledger.see(u):  # a name seen before: quarantined, not replayed
                continue
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
    stream = _Stream(total, total <= SAMPLE, CorpusLedger(source), keep_sample=sample)
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
    red = reduce_shards(shards, stream.ledger, projections)
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
    try:
        run_map(sample, ctx, opts, len(sample), again.append)
    except SchedulerLost as lost:  # its counts are the rerun's: say so
        raise lost.in_rerun(red.scenarios) from None
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


@dataclass(frozen=True, slots=True)
class Group:
    """One judged fixture's rows, as the judgement takes them: divergences and legacy
    defects sorted by value, its surfaces sorted."""

    fixture: str
    divergences: list[Divergence]
    legacy_defects: list[Divergence]
    surfaces: list[str]


def _sorted(fixture: str, rows: list[dict[str, Any]]) -> list[Divergence]:
    out = [_divergence(r["wire"]) for r in rows]
    for d in out:  # the rows are grouped by their fixture column: the wire must agree
        if d.fixture != fixture:
            raise ValueError(f"a result row of {fixture!r} holds a divergence of "
                             f"{d.fixture!r}: the run's shards are inconsistent")
    return sorted(out, key=lambda d: d.sort_key)


def _group(fixture: str, tables: dict[str, list[dict[str, Any]]]) -> Group:
    return Group(fixture, _sorted(fixture, tables.get("divergences", [])),
                 _sorted(fixture, tables.get("legacy_defects", [])),
                 sorted(str(r["surface"]) for r in tables.get("cases", [])))


_JUDGED_TABLES: Final = ("cases", "divergences", "legacy_defects")


def groups(shards: Path, keep: Callable[[str], bool],
           tables: Sequence[str] = _JUDGED_TABLES) -> Iterator[Group]:
    """Every fixture of the shards that ``keep`` keeps, one at a time, in name order
    (:func:`shadow.shards.scan`: never a whole table in memory); only ``tables`` are read
    (the others' lists are empty)."""
    for fixture, rows in scan(shards, tables):
        if keep(fixture):
            yield _group(fixture, rows)


def _rows(shards: Path) -> list[Row]:
    """The ledger's rows (name, status, digest, content key): about 400 bytes a fixture,
    what the copy rule needs."""
    return [(str(r["fixture"]), str(r["status"]), str(r["digest"]), str(r["content_key"]))
            for _, t in scan(shards, ("fixtures",)) for r in t["fixtures"]]


def _kept_names(shards: Path) -> set[str]:
    rows = _rows(shards)
    return {r[0] for r in rows} - set(copies_of(rows))


def _stream_digest(shards: Path, keep: Callable[[str], bool], comparisons: int) -> str:
    """:func:`shadow.evidence.results_digest` of the kept fixtures' raw rows, streamed: each
    list a :class:`shadow.spill.Stream` over the shards, hashed as it is read."""
    from shadow.evidence import results_digest
    from shadow.spill import Stream

    def cases() -> Iterator[list[str]]:
        return ([g.fixture, s] for g in groups(shards, keep, ("cases",)) for s in g.surfaces)

    def wires(attr: str) -> Callable[[], Iterator[dict[str, Any]]]:
        return lambda: (d.to_wire() for g in groups(shards, keep, (attr,))
                        for d in getattr(g, attr))

    return results_digest(Stream(wires("divergences")), Stream(wires("legacy_defects")),
                          Stream(cases), comparisons)


def _digest_of(shards: Path, names: set[str]) -> str:
    comparisons = sum(int(r["comparisons"]) for fx, t in scan(shards, ("fixtures",))
                      if fx in names for r in t["fixtures"])
    return _stream_digest(shards, names.__contains__, comparisons)


def results_digest_of(results: Sequence[UnitResult]) -> str:
    from shadow.evidence import results_digest

    divs = sorted((_divergence(json.dumps(d)) for r in results for d in r.divergences),
                  key=lambda d: d.sort_key)
    defects = sorted((_divergence(json.dumps(d)) for r in results for d in r.legacy_defects),
                     key=lambda d: d.sort_key)
    cases = sorted((r.fixture, c) for r in results for c in r.cases)
    return results_digest([d.to_wire() for d in divs], [d.to_wire() for d in defects],
                          cases, sum(r.comparisons for r in results))


def reduce_shards(shards: Path, ledger: CorpusLedger,
                  projections: Sequence[Projection] = ()) -> Reduced:
    """What the judgement needs from the shards, in bounded memory; the corpus-wide rules
    are ``ledger``'s (fed by the stream), decided over the shards' ``fixtures`` table."""
    rows = _rows(shards)
    status = {name: st for name, st, _, _ in rows}
    errors: list[FixtureError] = []
    # a scenario without its cassette was loaded (it counts in the corpus digest) and is
    # quarantined after the digest (the cassette rule of the map step)
    nocas: list[FixtureError] = []
    for _, t in scan(shards, ("quarantine",)):
        for q in t["quarantine"]:
            (nocas if status.get(q["fixture"]) == "no_cassette" else errors).append(
                FixtureError(q["source"], q["pointer"], q["expected"], q["got"]))
    done = ledger.finish(rows, errors, nocas)
    ledger.release()
    excluded = frozenset(done.copies) | {name for name, st, _, _ in rows
                                         if st == "no_cassette"}
    del rows, status  # the ledger's rows are not needed past its decision

    def keep(name: str) -> bool:
        return name not in excluded

    scenarios = set(done.scenarios)
    comparisons = cases = judged = synthetic = 0
    noise: dict[str, list[int]] = {}
    for fx, t in scan(shards, ("fixtures", "cases", "noise")):
        if keep(fx):
            comparisons += sum(int(r["comparisons"]) for r in t["fixtures"])
            cases += len(t["cases"])
            for r in t["noise"]:
                n = noise.setdefault(str(r["rule"]), [0, 0])
                n[0], n[1] = n[0] + 1, n[1] + int(r["values"])
        if fx in scenarios:
            judged += sum(1 for r in t["fixtures"] if r["status"] != "no_cassette")
            synthetic += sum(1 for r in t["fixtures"] if r["synthetic"])
    quarantined, digest = list(done.quarantined), done.digest
    del scenarios, done  # names: not needed past the counts
    return Reduced(shards, keep, comparisons, cases, judged, quarantined, digest, synthetic,
                   {k: (v[0], v[1]) for k, v in sorted(noise.items())},
                   _stream_digest(shards, keep, comparisons), {},
                   sorted(projections, key=lambda p: (p.fixture, p.surface)))
