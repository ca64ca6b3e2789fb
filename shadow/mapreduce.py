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


# --- map --------------------------------------------------------------------------------------


@dataclass
class _Stream:
    """The driver's side of the map: what it learns while feeding the executor."""

    total: int
    sample_all: bool
    ledger: CorpusLedger
    keep_sample: bool = True
    names: set[str] = field(default_factory=set)
    sampled: list[Task] = field(default_factory=list)

    def tasks(self, units: Iterator[Any]) -> Iterator[Task]:
        for u in units:
            if not self.ledger.see(u):  # a name seen before: quarantined, not replayed
                continue
            self.names.add(u.name)
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


def _rows(shards: Path) -> list[Row]:
    fx = frame(shards, "fixtures", ["fixture", "status", "digest", "content_key"])
    return list(zip(fx["fixture"].astype(str), fx["status"].astype(str),
                    fx["digest"].astype(str), fx["content_key"].astype(str), strict=True))


def _kept_names(shards: Path) -> set[str]:
    rows = _rows(shards)
    return {r[0] for r in rows} - set(copies_of(rows))


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


def reduce_shards(shards: Path, ledger: CorpusLedger,
                  projections: Sequence[Projection] = ()) -> Reduced:
    """Everything the judgement needs from the shards; the corpus-wide rules are
    ``ledger``'s (fed by the stream), decided over the shards' ``fixtures`` table."""
    from shadow.evidence import results_digest

    rows = _rows(shards)
    q = frame(shards, "quarantine").sort_values("fixture", kind="stable")
    status = {name: st for name, st, _, _ in rows}
    errors: list[FixtureError] = []
    # a scenario without its cassette was loaded (it counts in the corpus digest) and is
    # quarantined after the digest (the cassette rule of the map step)
    nocas: list[FixtureError] = []
    for f, s, p, e, g in zip(q["fixture"], q["source"], q["pointer"], q["expected"],
                             q["got"], strict=True):
        (nocas if status.get(f) == "no_cassette" else errors).append(FixtureError(s, p, e, g))
    done = ledger.finish(rows, errors, nocas)
    judged = {name for name, st, _, _ in rows
              if name not in done.copies and st != "no_cassette"}
    divs, defects, cases, comparisons = _raw(shards, judged)
    nf = frame(shards, "noise")
    nf = nf[nf["fixture"].isin(judged)]
    noise = {str(rid): (len(g), int(g["values"].sum()))
             for rid, g in nf.groupby("rule", sort=True)}
    replay = results_digest([d.to_wire() for d in divs], [d.to_wire() for d in defects],
                            cases, comparisons)
    fx = frame(shards, "fixtures")
    scen = fx[fx["fixture"].isin(done.scenarios)]
    return Reduced(divs, defects, comparisons, cases,
                   int((scen["status"] != "no_cassette").sum()), list(done.quarantined),
                   done.digest, int(scen["synthetic"].astype(bool).sum()),
                   noise, replay, {}, sorted(projections, key=lambda p: (p.fixture,
                                                                         p.surface)))
