"""Sessions: ``shadow`` (the main job), ``tests``, ``slow``, ``lint``, ``typecheck``, ``bench``.

Each session installs the project into its own virtualenv from pyproject.toml,
so a fresh machine with Python 3.11+ and nox needs nothing else.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests"]


@nox.session
def shadow(session: nox.Session) -> None:
    """The main job: shadow run on the bundled fixtures; reports in reports/latest/."""
    session.install("-e", ".")
    session.run("shadow", "run", "--fixtures", "fixtures", "--recordings", "recordings",
                "--out", "reports/latest",
                *session.posargs, success_codes=[0, 1])


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (everything but the slow fault/soak set), the [scale] extra included
    (the Dask executor, Parquet shards and a real scheduler + workers are tested)."""
    session.install("-e", ".[test,scale,legacy]")
    session.run("pytest", "-m", "not slow", *session.posargs)


@nox.session
def slow(session: nox.Session) -> None:
    """Long fault-injection, crash and soak runs (not part of CI's test command)."""
    session.install("-e", ".[test,scale,legacy]")
    session.run("pytest", "-m", "slow", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.5")
    session.run("ruff", "check", "kernel", "shadow", "tests", "benchmarks", "noxfile.py")


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".[typecheck]")
    session.run("mypy", "--strict", "kernel", "shadow")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks; writes reports/bench/latest.json (medians, ratios vs in-run baselines).

    ``nox -s bench -- --scale [--sizes N …] [--stage run|map]`` runs the scale-out
    benchmark instead (benchmarks/scale_bench.py; reports/bench/scale.json)."""
    session.install("-e", ".[scale]")
    args = list(session.posargs)
    if args[:1] == ["--scale"]:
        session.run("python", "-m", "benchmarks.scale_bench", *args[1:])
    else:
        session.run("python", "-m", "benchmarks", *args)
