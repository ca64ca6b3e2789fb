"""The map step of ``shadow run`` on any executor: one corpus unit in, plain rows out.

:func:`judge_batch` is what the serial loop, the process pool and a Dask worker run.  It
is a module-level function of picklable values (a spawn-started process or a remote
worker imports it by name), it reads nothing but the bytes it is given, writes nothing,
and returns plain data: a :class:`UnitResult` per unit, which the reducer appends to the
run's shards (:mod:`shadow.shards`).  A scenario that does not parse is a quarantined
result, never an exception; a harness exception while judging one fixture is that
fixture's ``replay.crashed`` result, and the batch goes on.  Only an :class:`InputError`
(a malformed recorded candidate: the run's input is broken) propagates, as it does in
the serial replay.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shadow.candidate import Candidate
from shadow.errors import FixtureError, InputError
from shadow.fixtures import files_digest
from shadow.noise_rules import NO_RULES, NoiseRules
from shadow.projection import Projection


@dataclass(frozen=True, slots=True)
class Task:
    """One scenario as read from the corpus (its ``*.json`` files, not parsed)."""

    name: str
    files: tuple[tuple[str, bytes], ...] = field(repr=False)  # never in a worker's log
    origin: str = ""
    error: FixtureError | None = None


@dataclass(frozen=True, slots=True)
class MapContext:
    """What every map task needs besides its unit (scattered once to a cluster)."""

    candidate: Candidate
    surfaces: tuple[str, ...] = ()
    noise: NoiseRules = NO_RULES
    recordings: str | None = None  # a scenario with provider exchanges needs its cassette
    keep_projections: bool = False  # only ``--record-candidate`` needs them
    served: bool = False  # judge the served surfaces too (:mod:`shadow.served`)


@dataclass(frozen=True, slots=True)
class UnitResult:
    """Plain rows of one unit's judgement (see :mod:`shadow.shards` for the tables)."""

    fixture: str
    status: str  # judged | quarantined | crashed | no_cassette (loaded, not replayable)
    origin: str = ""
    digest: str = ""  # the scenario's file digest (corpus digest)
    content_key: str = ""  # its content without its name (copy detection)
    synthetic: bool = False
    comparisons: int = 0
    cases: tuple[str, ...] = ()
    divergences: tuple[Mapping[str, Any], ...] = ()  # Divergence.to_wire() of the map
    legacy_defects: tuple[Mapping[str, Any], ...] = ()
    quarantine: tuple[Mapping[str, str], ...] = ()  # FixtureError as source/pointer/…
    noise: tuple[tuple[str, int], ...] = ()  # (rule id, values) per judged capture
    projections: tuple[Projection, ...] = field(default=(), repr=False)
    worker: str = ""  # the fingerprint of what judged it (:func:`fingerprint`)


def error_row(e: Any) -> dict[str, str]:
    return {"source": str(getattr(e, "source", "?")), "pointer": str(getattr(e, "pointer", "")),
            "expected": str(getattr(e, "expected", "")), "got": str(getattr(e, "got", ""))}


def crashed(task: Task, why: str) -> UnitResult:
    """The result of a fixture whose replay killed, hung or broke its worker: named, its
    evidence missing (``replay.crashed``, always blocking)."""
    from shadow.divergence import make

    d = make(task.name, "replay", "replay.crashed", "none", (),
             {"problem": why, "attribution_reason": "the replay of this fixture did not "
              "finish: nothing was judged"})
    return UnitResult(task.name, "crashed", task.origin, files_digest(task.files),
                      divergences=(d.to_wire(),), cases=("replay",))


def content_key(scenario: Any) -> str:
    """The scenario's content without its name (``shadow.fixtures._content_key``)."""
    from shadow.fixtures import _content_key

    return str(_content_key(scenario))


def _missing_cassette(scenario: Any, recordings: str | None) -> FixtureError | None:
    from shadow.providers.cassettes import cassette_path

    if recordings is None or not scenario.input.get("provider_responses"):
        return None
    if cassette_path(recordings, scenario.name).is_file():
        return None
    return FixtureError(f"{scenario.name}/input.json", "/provider_responses",
                        f"a cassette {Path(recordings).name}/{scenario.name}.yaml for the "
                        "recorded provider exchanges (rebuild: python -m "
                        "shadow.providers.importer FIXTURES RECORDINGS)", "no cassette")


def judge_unit(task: Task, ctx: MapContext) -> UnitResult:
    from shadow.fixtures import scenario_from_files
    from shadow.replay import replay_fixture, selected
    from shadow.served import for_this_process

    if task.error is not None:
        return UnitResult(task.name, "quarantined", task.origin,
                          quarantine=(error_row(task.error),))
    try:
        scenario = scenario_from_files(task.name, task.files, ctx.noise)
    except FixtureError as exc:
        return UnitResult(task.name, "quarantined", task.origin, quarantine=(error_row(exc),))
    key = content_key(scenario)
    missing = _missing_cassette(scenario, ctx.recordings)
    if missing is not None:
        return UnitResult(task.name, "no_cassette", task.origin, scenario.digest, key,
                          scenario.synthetic, quarantine=(error_row(missing),))
    try:
        r = replay_fixture(scenario, ctx.candidate, ctx.surfaces,
                           for_this_process() if ctx.served else None)
    except InputError:
        raise
    except Exception as exc:  # a harness bug on this fixture: named, and the run goes on
        return crashed(task, f"the map step raised {type(exc).__name__}")
    noise = tuple((rid, n) for c in scenario.captures
                  if selected(c.name, c.surface, ctx.surfaces) for rid, _p, n in c.noise)
    return UnitResult(
        task.name, "judged", task.origin, scenario.digest, key, scenario.synthetic,
        r.comparisons, r.cases, tuple(d.to_wire() for d in r.divergences),
        tuple(d.to_wire() for d in r.legacy_defects), (), noise,
        r.candidate_projections if ctx.keep_projections else ())


def fingerprint() -> str:
    """What the evidence is credited to: the platform, the Python and this package's
    version.  A worker whose fingerprint differs from the driver's would judge with another
    kernel or be credited to another platform (:func:`shadow.executors.run_map` refuses)."""
    import sys

    from shadow.evidence import package_version, platform_name

    return (f"{platform_name()} python {sys.version_info.major}.{sys.version_info.minor} "
            f"context-kernel-parity {package_version()}")


def judge_batch(tasks: Sequence[Task], ctx: MapContext) -> list[UnitResult]:
    """The map task of every executor: a few units per call (fewer round trips)."""
    from dataclasses import replace

    me = fingerprint()
    return [replace(judge_unit(t, ctx), worker=me) for t in tasks]


def sample_fraction(name: str) -> float:
    """A fixture's place in [0, 1) by its name alone: the determinism sample is the same
    whatever the executor, the worker count or the order of the corpus."""
    h = hashlib.sha256(b"shadow-determinism-sample\0" + name.encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def wire_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
