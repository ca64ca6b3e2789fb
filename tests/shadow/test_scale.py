"""Scale-out (issue 16, docs/scale.md): executors, shards, faults, sampling, synthetic gate.

The report bytes must not depend on the executor, the worker count, the batch boundaries,
the shard format or the order of the corpus; a worker that dies or hangs costs one fixture
(``replay.crashed``), never the run; losing the scheduler is exit 2 with nothing written.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from shadow import executors, mapreduce, shards
from shadow.candidate import make_candidate
from shadow.cli import main
from shadow.corpus_source import open_source
from shadow.errors import UsageError
from shadow.executors import MapOptions, SchedulerLost
from shadow.mapstep import MapContext
from shadow.run import RunOptions, execute
from tests.shadow.scale_candidates import Misbehaving

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
RECORDINGS = str(ROOT / "recordings")
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
FILES = ("report.json", "evidence.json", "report.md", "report.html", "junit.xml")
#: a small mixed corpus: messages, provider, IDE and memory scenarios
SMALL = ("short-session", "orphan-tool-result", "provider-summary-ok", "ide-budget-zero",
         "memory-update-remove", "pending-approval", "mixed-zh-en", "secrets-in-user-message",
         "parallel-tool-calls", "memory-clear-scope")

distributed = pytest.importorskip("distributed")  # the [scale] extra (the test session has it)

#: distributed's comm layer sometimes leaves a listening socket to the garbage collector when
#: a LocalCluster closes (its own, never one of ours): not a failure of the run
pytestmark = [
    pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"),
]


def _small(tmp: Path) -> Path:
    root = tmp / "small"
    if not root.exists():
        names = [n for n in SMALL if (FIXTURES / n).is_dir()]
        assert len(names) >= 8, "the bundled corpus lost the scenarios this test uses"
        for n in names:
            shutil.copytree(FIXTURES / n, root / n)
    return root


def _tar(folder: Path, out: Path, order: Sequence[str]) -> Path:
    """The corpus as a .tar whose members come in ``order`` (scenario by scenario)."""
    with tarfile.open(out, "w") as tf:
        for name in order:
            for f in sorted((folder / name).iterdir()):
                tf.add(f, arcname=f"{name}/{f.name}")
    return out


def _run(fixtures: Path, out: Path, **kw: Any) -> dict[str, bytes]:
    execute(RunOptions(fixtures=str(fixtures), out=str(out), recordings=RECORDINGS, now=NOW,
                       **kw))
    return {f: (out / f).read_bytes() for f in FILES}


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _small(tmp_path_factory.mktemp("scale"))


@pytest.fixture(scope="module")
def serial_bytes(small: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return _run(small, tmp_path_factory.mktemp("serial") / "out")


def _tar_interleaved(folder: Path, out: Path, members: Sequence[tuple[str, str]]) -> Path:
    """The corpus as a .tar whose members (scenario, file) come in ``members`` order — the
    files of one scenario need not be next to each other."""
    with tarfile.open(out, "w") as tf:
        for name, fname in members:
            tf.add(folder / name / fname, arcname=f"{name}/{fname}")
    return out


EXECUTOR_GRID = [("serial", 1), ("process", 1), ("process", 2), ("dask", 1), ("dask", 2)]


@pytest.mark.parametrize(("executor", "jobs"), EXECUTOR_GRID,
                         ids=[f"{e}-{j}" for e, j in EXECUTOR_GRID])
@settings(max_examples=2, deadline=None, derandomize=True, database=None,
          phases=[Phase.generate],  # an example is a whole run: report it, never shrink it
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_shuffled_order_executor_and_workers_give_identical_report_bytes(
        executor: str, jobs: int, data: st.DataObject, small: Path,
        serial_bytes: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory) -> None:
    members = sorted((p.parent.name, p.name) for p in small.glob("*/*.json"))
    order = data.draw(st.permutations(members), label="member order")
    batch = data.draw(st.sampled_from([None, 1, 3]), label="batch")
    tmp = tmp_path_factory.mktemp("shuffled")
    corpus = _tar_interleaved(small, tmp / "corpus.tar", order)
    with pytest.MonkeyPatch.context() as mp:
        if batch is not None:  # batch boundaries inside the corpus, not one fixture each
            real = executors.batch_size
            mp.setattr(executors, "batch_size", lambda total, j, wanted=None: real(
                total, j, batch))
        got = _run(corpus, tmp / "out", executor=executor, jobs=jobs)
    for f in FILES:
        assert got[f] == serial_bytes[f], f"{f} differs ({executor}, {jobs} workers)"


def test_json_lines_shards_reduce_exactly_as_parquet(small: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert shards.parquet_available()
    pq = _run(small, tmp_path / "pq")
    monkeypatch.setattr(shards, "parquet_available", lambda: False)
    jl = _run(small, tmp_path / "jl")
    assert pq == jl


def test_parts_are_written_in_batches_and_removed_after_the_reduce(
        small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parts: list[str] = []
    real = shards.ShardWriter._write

    def spy(self: shards.ShardWriter, table: str, rs: list[dict[str, Any]]) -> None:
        parts.append(table)
        real(self, table, rs)

    monkeypatch.setattr(shards, "DEFAULT_BATCH", 3)
    monkeypatch.setattr(shards.ShardWriter, "_write", spy)
    red = mapreduce.map_corpus(open_source(small), MapContext(make_candidate(
        "kernel", RECORDINGS), recordings=RECORDINGS), MapOptions(), tmp_path / "sh",
        determinism=False)
    assert red.scenarios == len(list(small.iterdir()))
    fixtures_parts = sorted((tmp_path / "sh" / "fixtures").iterdir())
    assert len(fixtures_parts) >= 2  # more than one batch: the rows were not all held
    assert parts.count("fixtures") == len(fixtures_parts)
    out = tmp_path / "run"
    _run(small, out)
    assert not (out / ".shards").exists()


def _map(source: Path, candidate: Any, tmp: Path, **opts: Any) -> mapreduce.Reduced:
    return mapreduce.map_corpus(open_source(source), MapContext(candidate), MapOptions(**opts),
                                tmp / "shards", determinism=False)


def _crashed(red: mapreduce.Reduced) -> dict[str, str]:
    return {d.fixture: str(d.detail.get("problem")) for d in red.divergences()
            if d.reason_code == "replay.crashed"}


def test_a_worker_that_dies_costs_its_fixture_only_process_pool(small: Path,
                                                                tmp_path: Path) -> None:
    victim = "orphan-tool-result"
    red = _map(small, Misbehaving(frozenset({victim}), "exit"), tmp_path, executor="process",
               jobs=2)
    assert _crashed(red) == {victim: "the worker process died"}
    judged = {f for f, _s in red.case_keys()}
    assert judged == {p.name for p in small.iterdir()}  # every fixture judged or named
    assert red.scenarios == len(judged)


def test_a_hung_fixture_times_out_and_the_run_goes_on(small: Path, tmp_path: Path) -> None:
    victim = "mixed-zh-en"
    t0 = time.monotonic()
    red = _map(small, Misbehaving(frozenset({victim}), "hang"), tmp_path, executor="process",
               jobs=2, fixture_timeout=4.0)
    assert _crashed(red) == {victim: "timed out after 4 s"}
    assert {f for f, _s in red.case_keys()} == {p.name for p in small.iterdir()}
    assert time.monotonic() - t0 < 120


def test_a_crashed_fixture_is_quarantined_blocking_and_named_in_the_report(
        small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shadow.run as run_mod

    victim = "short-session"
    real = run_mod.MapContext
    monkeypatch.setattr(run_mod, "MapContext", lambda cand, *a, **k: real(
        Misbehaving(frozenset({victim}), "exit", RECORDINGS), *a, **k))
    r = execute(RunOptions(fixtures=str(small), out=str(tmp_path / "o"), recordings=RECORDINGS,
                           now=NOW, executor="process", jobs=2, determinism=False))
    assert r.verdict == "NO-GO"
    crashed = [d for d in r.report["divergences"] if d["reason_code"] == "replay.crashed"]
    assert [(d["fixture"], d["severity"]) for d in crashed] == [(victim, "blocking")]
    assert "replay.crashed" in r.report["blocking_reasons"]
    case = next(c for c in r.report["cases"] if c["fixture"] == victim)
    assert case["outcome"] == "fail"


# --- a real Dask deployment on loopback ---------------------------------------------------


def _dask(*args: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    with log.open("wb") as out:  # the child keeps its own handle
        return subprocess.Popen([sys.executable, "-m", "dask", *args],  # `dask scheduler|worker`
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait(timeout=30)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """``dask scheduler`` and two ``dask worker`` processes (no nanny: a killed worker
    stays dead) on 127.0.0.1."""
    sched_file = tmp_path / "scheduler.json"
    procs = [_dask("scheduler", "--host", "127.0.0.1", "--port", "0",
                   "--no-dashboard", "--scheduler-file", str(sched_file),
                   log=tmp_path / "scheduler.log")]
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(sched_file.read_text(encoding="utf-8"))["address"]
        for i in range(2):
            procs.append(_dask("worker", address, "--nthreads", "1", "--no-nanny",
                               "--no-dashboard", "--name", f"w{i}",
                               log=tmp_path / f"worker{i}.log"))
        from distributed import Client

        with Client(address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
        yield address, procs
    finally:
        _stop(procs)


def test_a_real_scheduler_and_two_workers_give_the_serial_report_bytes(
        cluster: tuple[str, list[subprocess.Popen[bytes]]], tmp_path: Path) -> None:
    address, _procs = cluster
    serial = _run(FIXTURES, tmp_path / "serial")
    dask = _run(FIXTURES, tmp_path / "dask", executor="dask", scheduler=address)
    for f in FILES:
        assert dask[f] == serial[f], f


def test_killing_a_worker_mid_run_still_judges_every_fixture(
        cluster: tuple[str, list[subprocess.Popen[bytes]]], tmp_path: Path) -> None:
    address, procs = cluster
    killed: list[int] = []

    def progress(done: int, total: int, _label: str) -> None:
        if done == 10 and not killed:
            procs[1].kill()  # worker w0, mid-run
            killed.append(done)

    r = execute(RunOptions(fixtures=str(FIXTURES), out=str(tmp_path / "o"),
                           recordings=RECORDINGS, now=NOW, executor="dask", scheduler=address,
                           progress=progress, determinism=False))
    assert killed and procs[1].poll() is not None
    names = {p.name for p in FIXTURES.iterdir() if p.is_dir()}
    crashed = {d["fixture"] for d in r.report["divergences"]
               if d["reason_code"] == "replay.crashed"}
    judged = {c["fixture"] for c in r.report["cases"]}
    assert judged == names, "every fixture judged or named as crashed"
    assert r.report["totals"]["fixtures"] == len(names)
    # a worker killed once is the scheduler's to recover: its tasks ran again elsewhere
    assert crashed == set()


def test_losing_the_scheduler_is_exit_2_and_says_how_far_it_got(
        cluster: tuple[str, list[subprocess.Popen[bytes]]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    address, procs = cluster

    def progress(done: int, total: int, _label: str) -> None:
        if done == 5 and procs[0].poll() is None:
            procs[0].kill()  # the scheduler

    with pytest.raises(SchedulerLost) as exc:
        execute(RunOptions(fixtures=str(FIXTURES), out=str(tmp_path / "o"),
                           recordings=RECORDINGS, now=NOW, executor="dask", scheduler=address,
                           progress=progress, determinism=False))
    assert exc.value.done >= 5 and exc.value.total == len(
        [p for p in FIXTURES.iterdir() if p.is_dir()])
    assert f"after {exc.value.done} of {exc.value.total}" in str(exc.value)
    assert not (tmp_path / "o").exists()


def test_an_unreachable_scheduler_is_exit_2(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--fixtures", str(FIXTURES), "--out", str(tmp_path / "o"),
                 "--executor", "dask", "--scheduler", "tcp://127.0.0.1:9",
                 "--skip-determinism"])
    assert code == 2
    assert "--scheduler" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# --- options, sampling, synthetic ---------------------------------------------------------


@pytest.mark.parametrize(("argv", "problem"), [
    (["--scheduler", "tcp://127.0.0.1:1"], "--scheduler needs --executor dask"),
    (["--executor", "dask", "--fixture-timeout", "0"], "--fixture-timeout must be positive"),
    (["--executor", "serial", "--jobs", "2"], "--jobs 2 with --executor serial"),
])
def test_bad_executor_options_are_refused_before_anything_is_read(
        argv: list[str], problem: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--fixtures", str(FIXTURES), "--out", str(tmp_path / "o"),
                 *argv]) == 2
    assert problem in capsys.readouterr().err


def test_the_executor_default_follows_jobs() -> None:
    from shadow.run import map_options

    assert map_options(RunOptions(jobs=1)).executor == "serial"
    assert map_options(RunOptions(jobs=2)).executor == "process"
    with pytest.raises(UsageError):
        from shadow.executors import check

        check(MapOptions(executor="threads"))


def test_the_determinism_sample_is_the_same_for_every_executor_and_order(
        small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapreduce, "SAMPLE", 5)
    names = sorted(p.name for p in small.iterdir())
    first = _run(small, tmp_path / "a")
    other = _run(_tar(small, tmp_path / "c.tar", names[::-1]), tmp_path / "b",
                 executor="process", jobs=2)
    assert first == other
    check = json.loads(first["evidence.json"])["checks"]["replay.deterministic"]
    assert check["status"] == "pass"
    assert check["sample"]["rule"] == "sha256(name) below 5/N"
    expected = sum(1 for n in names if mapreduce.sample_fraction(n) < 5 / len(names))
    assert 0 < check["sample"]["fixtures"] == expected < len(names)
    monkeypatch.setattr(mapreduce, "SAMPLE", len(names))  # at most SAMPLE: every fixture
    full = json.loads(_run(small, tmp_path / "full")["evidence.json"])
    assert full["checks"]["replay.deterministic"]["sample"] == {
        "rule": "all", "fixtures": len(names), "of": len(names)}


def _gate_codes(evidence: Path, phase: int, platform: str) -> set[str]:
    from shadow.gates import policy as policy_mod
    from shadow.gates.evaluate import evaluate
    from shadow.gates.merge import parse

    doc = json.loads(evidence.read_text(encoding="utf-8"))
    res = evaluate(policy_mod.load(None), [parse(doc, str(evidence))], phase,
                   platforms=(platform,), today=NOW.date())
    return {r.code for r in res.reasons}


def test_the_gate_refuses_a_synthetic_corpus_as_release_evidence(tmp_path: Path) -> None:
    for marked in (False, True):
        fx = tmp_path / f"fx-{marked}"
        for name in SMALL:
            shutil.copytree(FIXTURES / name, fx / name)
        if marked:
            doc = json.loads((fx / "short-session" / "input.json").read_text(encoding="utf-8"))
            doc["synthetic"] = True
            (fx / "short-session" / "input.json").write_text(json.dumps(doc),
                                                             encoding="utf-8")
        out = tmp_path / f"o-{marked}"
        r = execute(RunOptions(fixtures=str(fx), out=str(out), recordings=RECORDINGS, now=NOW))
        platform = r.evidence["environment"]["platform"]
        for phase in range(6):
            assert ("evidence.synthetic" in _gate_codes(out / "evidence.json", phase,
                                                        platform)) is marked
        assert r.report["totals"].get("synthetic", 0) == (1 if marked else 0)
        steps = {s["phase"]: s for s in r.report["ladder"]}
        has = any(q["code"] == "evidence.synthetic" for q in steps[0]["requirements"])
        assert has is marked
    code = main(["gate", str(tmp_path / "o-True" / "evidence.json"), "--phase", "0",
                 "--platforms", platform])
    assert code == 1


# --- more faults ------------------------------------------------------------------------


def test_a_localcluster_worker_that_dies_costs_its_fixture_only(small: Path,
                                                                tmp_path: Path) -> None:
    victim = "orphan-tool-result"
    red = _map(small, Misbehaving(frozenset({victim}), "exit"), tmp_path, executor="dask",
               jobs=2)
    assert set(_crashed(red)) == {victim}
    assert {f for f, _s in red.case_keys()} == {p.name for p in small.iterdir()}


def test_a_dying_worker_in_a_batch_blames_only_the_culprit(small: Path, tmp_path: Path) -> None:
    victim = "mixed-zh-en"
    red = _map(small, Misbehaving(frozenset({victim}), "exit"), tmp_path, executor="process",
               jobs=2, batch=4)
    assert _crashed(red) == {victim: "the worker process died"}
    assert {f for f, _s in red.case_keys()} == {p.name for p in small.iterdir()}


def test_workers_that_cannot_run_the_map_are_one_error_not_a_crash_per_fixture(
        small: Path, tmp_path: Path) -> None:
    every = frozenset(p.name for p in small.iterdir())
    with pytest.raises(executors.WorkersBroken, match="in a row killed their worker"):
        _map(small, Misbehaving(every, "exit"), tmp_path, executor="process", jobs=2)


def test_a_worker_unlike_the_driver_is_refused(small: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executors, "fingerprint", lambda: "another platform")
    with pytest.raises(executors.WorkerMismatch, match="the driver runs 'another platform'"):
        _map(small, make_candidate("kernel", None), tmp_path, executor="process", jobs=1)


def test_synth_refuses_an_out_inside_an_existing_corpus(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["synth", "--sessions", "2", "--seed", "1", "--out", str(tmp_path / "c")]) == 0
    assert main(["synth", "--sessions", "2", "--seed", "2",
                 "--out", str(tmp_path / "c" / "sub")]) == 2
    assert "inside the corpus" in capsys.readouterr().err
    assert not (tmp_path / "c" / "sub").exists()


def test_the_determinism_rerun_catches_a_sampled_fixture_and_says_which_it_checked(
        small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.shadow.scale_candidates import _CALLS, SecondTimeDifferent

    names = sorted(p.name for p in small.iterdir())
    monkeypatch.setattr(mapreduce, "SAMPLE", 5)
    inside = next(n for n in names if mapreduce.sample_fraction(n) < 5 / len(names))
    outside = next(n for n in names if mapreduce.sample_fraction(n) >= 5 / len(names))
    for victim, expected in ((inside, "fail"), (outside, "pass")):
        _CALLS.clear()
        red = mapreduce.map_corpus(open_source(small), MapContext(SecondTimeDifferent(
            frozenset({victim}))), MapOptions(), tmp_path / f"sh-{victim}")
        assert red.determinism["status"] == expected, victim
        assert red.determinism["sample"]["fixtures"] < len(names)
        assert red.determinism["digest"] != red.determinism["rerun_digest"] or \
            expected == "pass"


def test_losing_the_scheduler_in_the_rerun_says_it_was_the_rerun(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rerun's counts are of its sample: the message says the map had judged every
    fixture and how far the rerun got (not '3 of 10 fixtures' of a 42-fixture corpus)."""
    calls: list[int] = []
    real = mapreduce.run_map

    def losing(tasks: Any, ctx: Any, opts: Any, total: int, on_result: Any) -> None:
        calls.append(total)
        if len(calls) == 2:  # the rerun
            raise SchedulerLost("tcp://127.0.0.1:8786", 3, total, "connection closed")
        real(tasks, ctx, opts, total, on_result)

    monkeypatch.setattr(mapreduce, "run_map", losing)
    with pytest.raises(SchedulerLost) as exc:
        mapreduce.map_corpus(open_source(FIXTURES), MapContext(make_candidate(
            "kernel", RECORDINGS), recordings=RECORDINGS), MapOptions(), tmp_path / "sh")
    judged = len([p for p in FIXTURES.iterdir() if p.is_dir()])
    text = str(exc.value)
    assert "during the determinism rerun" in text
    assert f"after all {judged} fixtures were judged once and 3 of the {calls[1]} " \
        "sampled ones again" in text and "connection closed" in text


def test_a_localcluster_beside_another_cluster_does_not_collide(small: Path,
                                                               tmp_path: Path) -> None:
    """Another cluster on the machine (a second run, a benchmark) holds the scheduler's
    default HTTP port 8787: the run's LocalCluster serves on a free loopback port instead
    (it failed with 'Port 8787 is already in use' under warnings-as-errors)."""
    import socket

    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 8787))
        holder.listen()
    except OSError:  # something already holds it: the same situation
        pass
    try:
        red = _map(small, make_candidate("kernel", RECORDINGS), tmp_path, executor="dask",
                   jobs=1)
    finally:
        holder.close()
    assert red.scenarios == len(list(small.iterdir()))
