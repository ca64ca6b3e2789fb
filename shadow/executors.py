"""Where the map step runs: in-process, on a process pool, or on a Dask cluster.

:func:`run_map` feeds corpus units (:class:`shadow.mapstep.Task`) to one executor in
batches, keeps at most a small window of batches in flight (the corpus is a stream, never
loaded whole), and hands every :class:`~shadow.mapstep.UnitResult` to ``on_result`` as it
arrives — in completion order; the reducer sorts.

* ``serial``: the map in this process.
* ``process``: a :class:`concurrent.futures.ProcessPoolExecutor` of ``jobs`` workers
  started with ``spawn`` on every platform (Windows and macOS have no ``fork``; one
  behaviour everywhere).
* ``dask``: a ``distributed`` cluster — a :class:`distributed.LocalCluster` of ``jobs``
  single-threaded worker processes, or the scheduler at ``scheduler`` (``tcp://host:port``)
  with whatever workers it has.  Needs the ``[scale]`` extra.

Faults (docs/scale.md):

* A worker that dies while replaying a batch (``BrokenProcessPool``; Dask's
  ``KilledWorker`` once the scheduler has given up on the task) does not end the run:
  the batch's fixtures are retried one by one, and a fixture that kills its worker on its
  own is ``replay.crashed`` (:func:`shadow.mapstep.crashed`).  Collateral fixtures — in
  flight on the same pool when it broke — are judged on the retry.
* A fixture still running ``fixture_timeout`` seconds after its batch started is
  ``replay.crashed`` (timed out): the process pool is torn down and rebuilt, a Dask
  worker is restarted (best effort: a ``dask worker`` without a nanny stays busy).  The
  serial executor has no fault handling: it is the driver itself.
* Workers that cannot run the map at all (each new pool or cluster is probed with an
  empty batch first), or :data:`MAX_CONSECUTIVE_CRASHES` fixtures in a row that each
  killed their worker alone, end the run with :class:`WorkersBroken` (exit 2): the
  workers are broken, not the fixtures.
* A result judged by a worker whose :func:`shadow.mapstep.fingerprint` (platform,
  Python, package version) differs from the driver's ends the run with
  :class:`WorkerMismatch` (exit 2): its evidence would be credited to the wrong platform
  or kernel.
* Losing the Dask scheduler raises :class:`SchedulerLost` with how far the run got;
  ``shadow run`` exits 2 and writes nothing.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final

from shadow.errors import InputError, ShadowError, UsageError
from shadow.mapstep import MapContext, Task, UnitResult, crashed, fingerprint, judge_batch
from shadow.served import close_process

EXECUTORS: Final = ("serial", "process", "dask")
DEFAULT_FIXTURE_TIMEOUT: Final = 600.0
POLL: Final = 0.5  # seconds between checks of deadlines and of the scheduler
MAX_CONSECUTIVE_CRASHES: Final = 5


class SchedulerLost(ShadowError):
    """The Dask scheduler went away mid-run (exit 2: nothing is written)."""

    code = "scheduler_lost"

    def __init__(self, address: str, done: int, total: int, why: str,
                 rerun_of: int | None = None) -> None:
        where = (f"after {done} of {total} fixtures were judged" if rerun_of is None else
                 f"during the determinism rerun, after all {rerun_of} fixtures were judged "
                 f"once and {done} of the {total} sampled ones again")
        super().__init__(f"the Dask scheduler {address} was lost {where} ({why}); no report "
                         "was written")
        self.address, self.done, self.total, self.why = address, done, total, why

    def in_rerun(self, judged: int) -> SchedulerLost:
        """The same loss, said of the determinism rerun after ``judged`` fixtures."""
        return SchedulerLost(self.address, self.done, self.total, self.why, rerun_of=judged)


class WorkersBroken(ShadowError):
    """The workers cannot run the map (exit 2): not a verdict on any fixture."""

    code = "workers_broken"


class WorkerMismatch(ShadowError):
    """A worker is not what the driver is (exit 2): its results would be misattributed."""

    code = "worker_mismatch"


@dataclass(frozen=True, slots=True)
class MapOptions:
    executor: str = "serial"
    jobs: int = 1
    scheduler: str | None = None
    fixture_timeout: float = DEFAULT_FIXTURE_TIMEOUT
    scheduler_grace: float = 30.0
    batch: int | None = None  # units per map task (default: from the corpus size)


OnResult = Callable[[UnitResult], None]


def batch_size(total: int, jobs: int, wanted: int | None = None) -> int:
    """Units per task: small for small corpora (every worker gets work), at most 16."""
    if wanted is not None:
        return max(1, wanted)
    return max(1, min(16, total // max(1, jobs * 16)))


def _batches(tasks: Iterable[Task], size: int) -> Iterator[tuple[Task, ...]]:
    it = iter(tasks)
    while chunk := tuple(islice(it, size)):
        yield chunk


def check(opts: MapOptions) -> None:
    """Every executor option, before anything is read (exit 2 naming it)."""
    if opts.executor not in EXECUTORS:
        raise UsageError(f"--executor must be one of {', '.join(EXECUTORS)}, got "
                         f"{opts.executor!r}")
    if opts.scheduler is not None and opts.executor != "dask":
        raise UsageError("--scheduler needs --executor dask")
    if opts.executor == "serial" and opts.jobs > 1:
        raise UsageError(f"--jobs {opts.jobs} with --executor serial: one process judges "
                         "everything (use --executor process or dask)")
    if not opts.fixture_timeout > 0:
        raise UsageError(f"--fixture-timeout must be positive, got {opts.fixture_timeout}")
    if opts.executor == "dask":
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise UsageError("--executor dask needs the [scale] extra (dask, distributed, "
                             "pyarrow): pip install -e '.[scale]' in a checkout, or "
                             "'context-kernel-parity[scale]'") from None


def run_map(tasks: Iterable[Task], ctx: MapContext, opts: MapOptions, total: int,
            on_result: OnResult) -> None:
    """Judge every task on ``opts.executor``; ``on_result`` gets each result once."""
    size = batch_size(total, opts.jobs, opts.batch)
    me = fingerprint()

    def checked(r: UnitResult) -> None:
        if r.worker and r.worker != me:
            raise WorkerMismatch(f"fixture {r.fixture} was judged by a worker running "
                                 f"{r.worker!r}, the driver runs {me!r}: evidence is credited "
                                 "to the driver's platform, so every worker must match it")
        on_result(r)

    if opts.executor == "serial":
        try:
            for t in tasks:
                checked(judge_batch((t,), ctx)[0])
        finally:
            close_process()  # the served surfaces' server ends with the run
    elif opts.executor == "process":
        _ProcessMap(ctx, opts, checked).run(_batches(tasks, size))
    else:
        _DaskMap(ctx, opts, checked, total).run(_batches(tasks, size))


class _Breaker:
    """Counts fixtures that killed their worker alone, in a row."""

    def __init__(self) -> None:
        self.row = 0

    def crashed_alone(self) -> None:
        self.row += 1
        if self.row >= MAX_CONSECUTIVE_CRASHES:
            raise WorkersBroken(f"{self.row} fixtures in a row killed their worker when run "
                                "alone: the workers are broken, not the fixtures (look at "
                                "the workers' environment and logs)")

    def judged(self) -> None:
        self.row = 0


# --- process pool ---------------------------------------------------------------------------


def _kill(pool: ProcessPoolExecutor) -> None:
    """Tear a pool down now, its running workers included (a hung replay never returns)."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
    else:
        for p in list((getattr(pool, "_processes", None) or {}).values()):  # 3.11–3.13
            p.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def _probe(run: Callable[[], Any], where: str) -> None:
    """A new pool or cluster runs an empty batch first: workers that cannot unpickle or
    run the map (another environment, a candidate defined in ``__main__``) are one error,
    not one crashed fixture per fixture."""
    try:
        run()
    except InputError:
        raise
    except Exception as exc:
        raise WorkersBroken(f"the {where} workers cannot run the map step "
                            f"({type(exc).__name__}); nothing was judged") from None


Pending = dict[Future[list[UnitResult]], tuple[tuple[Task, ...], float, bool]]


class _ProcessMap:
    def __init__(self, ctx: MapContext, opts: MapOptions, on_result: OnResult) -> None:
        self.ctx, self.opts, self.on_result = ctx, opts, on_result
        self.window = 2 * opts.jobs
        self.suspects: deque[Task] = deque()  # retried alone after a broken pool
        self.breaker = _Breaker()

    def _new_pool(self) -> ProcessPoolExecutor:
        pool = ProcessPoolExecutor(max_workers=self.opts.jobs,
                                   mp_context=multiprocessing.get_context("spawn"))
        _probe(lambda: pool.submit(judge_batch, (), self.ctx).result(
            timeout=self.opts.fixture_timeout), "process pool")
        return pool

    def _emit(self, results: Sequence[UnitResult]) -> None:
        for r in results:
            self.breaker.judged()
            self.on_result(r)

    def run(self, batches: Iterator[tuple[Task, ...]]) -> None:
        pool = self._new_pool()
        pending: Pending = {}  # future -> (its batch, its deadline, whether it runs alone)
        try:
            while True:
                broken = self._fill(pool, pending, batches)
                if not pending and not broken:
                    return
                done, _ = wait(pending, timeout=POLL, return_when=FIRST_COMPLETED)
                for f in done:
                    batch, _deadline, alone = pending.pop(f)
                    exc = f.exception()
                    if exc is None:
                        self._emit(f.result())
                    elif isinstance(exc, BrokenProcessPool):
                        broken = True
                        self._failed(batch, "the worker process died", alone)
                    elif isinstance(exc, InputError):
                        raise exc
                    elif alone or len(batch) == 1:  # never ran its map (e.g. unpicklable)
                        self._emit([crashed(batch[0], f"the task failed: "
                                            f"{type(exc).__name__}")])
                    else:
                        self.suspects.extend(batch)
                now = time.monotonic()
                late = [f for f, (_b, deadline, _a) in pending.items() if deadline < now]
                if late or broken:
                    for f in late:
                        batch, _, alone = pending.pop(f)
                        self._failed(batch, f"timed out after {self.opts.fixture_timeout:g} s",
                                     alone)
                    for f in list(pending):  # collateral of the teardown: retried alone
                        self.suspects.extend(pending.pop(f)[0])
                    _kill(pool)
                    pool = self._new_pool()
        finally:
            _kill(pool)

    def _fill(self, pool: ProcessPoolExecutor, pending: Pending,
              batches: Iterator[tuple[Task, ...]]) -> bool:
        """Top the window up; True when the pool turned out broken while submitting.  A
        suspect (retried after a broken pool) runs alone, so a crash or a hang then names
        it and nothing else."""
        if any(alone for _b, _d, alone in pending.values()):
            return False
        if self.suspects:
            if not pending:
                one = (self.suspects.popleft(),)
                return self._submit(pool, pending, one, self.opts.fixture_timeout, True)
            return False
        while len(pending) < self.window:
            batch = next(batches, None)
            if batch is None:
                return False
            # queued behind at most one other batch per worker: twice its own time
            if self._submit(pool, pending, batch,
                            self.opts.fixture_timeout * len(batch) * 2, False):
                return True
        return False

    def _submit(self, pool: ProcessPoolExecutor, pending: Pending, batch: tuple[Task, ...],
                limit: float, alone: bool) -> bool:
        try:
            pending[pool.submit(judge_batch, batch, self.ctx)] = (
                batch, time.monotonic() + limit, alone)
        except BrokenProcessPool:  # a worker died between two results: retried alone
            self.suspects.extendleft(reversed(batch))
            return True
        return False

    def _failed(self, batch: Sequence[Task], why: str, alone: bool) -> None:
        """A batch whose worker died or hung: alone, its one fixture is named crashed;
        otherwise each of its fixtures is retried alone first."""
        if alone and len(batch) == 1:
            self.breaker.crashed_alone()
            self.on_result(crashed(batch[0], why))
        else:
            self.suspects.extend(batch)


# --- Dask -------------------------------------------------------------------------------------


class _DaskMap:
    """The same loop on a Dask cluster.  The map context travels with every task (it is
    small): scattered data dies with the last worker holding it, and would cancel every
    task that needs it.  A batch that fails is split and its fixtures retried one at a
    time, alone, so the one that kills its workers is named and nothing queued beside it."""

    def __init__(self, ctx: MapContext, opts: MapOptions, on_result: OnResult,
                 total: int) -> None:
        self.ctx, self.opts, self.on_result, self.total = ctx, opts, on_result, total
        self.done = 0
        self.address = opts.scheduler or "LocalCluster"
        self.breaker = _Breaker()
        self.no_workers_since: float | None = None

    def _emit(self, r: UnitResult, *, alone_crash: bool = False) -> None:
        if alone_crash:
            self.breaker.crashed_alone()
        else:
            self.breaker.judged()
        self.done += 1
        self.on_result(r)

    def _lost(self, why: str) -> SchedulerLost:
        return SchedulerLost(self.address, self.done, self.total, why)

    def _client(self) -> tuple[Any, Any]:
        import logging

        from distributed import Client, LocalCluster

        if self.opts.scheduler:
            try:
                client = Client(  # type: ignore[no-untyped-call]
                    self.opts.scheduler, timeout=self.opts.scheduler_grace)
            except (OSError, TimeoutError, ValueError) as exc:
                why = str(exc).splitlines()[0][:160] if str(exc) else ""
                raise InputError(self.opts.scheduler, "", "--scheduler: the address of a "
                                 "running Dask scheduler (tcp://host:port or tls://host:port)",
                                 f"{type(exc).__name__}{': ' + why if why else ''} (waited "
                                 f"up to {self.opts.scheduler_grace:g} s)") from None
            return client, None
        # the scheduler's HTTP endpoint on a free loopback port: a second cluster on the
        # machine (another run, a benchmark) never collides on 8787, nothing listens on
        # a public interface
        cluster = LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=self.opts.jobs, threads_per_worker=1, processes=True,
            dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
        try:
            return Client(cluster), cluster  # type: ignore[no-untyped-call]
        except BaseException:
            cluster.close(timeout=10)
            raise

    def run(self, batches: Iterator[tuple[Task, ...]]) -> None:
        import contextlib
        import logging

        from distributed.comm.core import CommClosedError

        # distributed logs its reconnect attempts with tracebacks: the run says what
        # happened itself (SchedulerLost, an InputError naming --scheduler)
        log = logging.getLogger("distributed")
        level = log.level
        log.setLevel(logging.CRITICAL)
        try:
            client, cluster = self._client()
            try:
                self._start(client)
                self._loop(client, batches)
            except CommClosedError as exc:
                raise self._lost(type(exc).__name__) from None
            finally:
                with contextlib.suppress(Exception):  # never hides the run's own error
                    client.close(timeout=10)
                if cluster is not None:
                    with contextlib.suppress(Exception):
                        cluster.close(timeout=10)
        finally:
            log.setLevel(level)

    def _start(self, client: Any) -> None:
        try:
            client.wait_for_workers(1, timeout=self.opts.scheduler_grace)
        except TimeoutError:
            raise InputError(self.address, "", "--scheduler: a Dask scheduler with at least "
                             "one worker", f"no worker within {self.opts.scheduler_grace:g} s"
                             ) from None
        _probe(lambda: client.submit(judge_batch, (), self.ctx, pure=False).result(
            timeout=self.opts.fixture_timeout), "Dask")

    def _window(self, client: Any) -> int:
        """Two batches per worker; no worker for ``scheduler_grace`` seconds (they all
        died and none came back: nannies restart theirs within seconds) is a lost run."""
        workers = len(client.scheduler_info().get("workers", {}))
        if workers:
            self.no_workers_since = None
        else:
            self.no_workers_since = self.no_workers_since or time.monotonic()
            if time.monotonic() - self.no_workers_since > self.opts.scheduler_grace:
                raise self._lost(f"no worker for {self.opts.scheduler_grace:g} s")
        return 2 * (max(workers, 1) if self.opts.scheduler else max(workers, self.opts.jobs))

    def _loop(self, client: Any, batches: Iterator[tuple[Task, ...]]) -> None:
        from distributed import wait as dwait

        pending: dict[Any, tuple[tuple[Task, ...], float, bool]] = {}
        singles: deque[Task] = deque()
        window = self._window(client)
        while True:
            self._fill(client, pending, singles, batches, window)
            if not pending:
                return
            try:
                done, _ = dwait(  # type: ignore[no-untyped-call]
                    list(pending), timeout=POLL, return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = set()
            except Exception:  # FuturesCancelledError: "scheduler-connection-lost"
                if any(f.cancelled() for f in pending):
                    raise self._lost("the connection to the scheduler was lost") from None
                raise
            if client.status != "running":
                raise self._lost(f"client {client.status}")
            for f in done:
                batch, _, alone = pending.pop(f)
                self._settle(f, batch, alone, singles)
            now = time.monotonic()
            for f in [f for f, (_b, d, _a) in pending.items() if d < now]:
                batch, _, alone = pending.pop(f)
                self._timed_out(client, f, batch, alone, singles)
            window = self._window(client)

    def _fill(self, client: Any, pending: dict[Any, tuple[tuple[Task, ...], float, bool]],
              singles: deque[Task], batches: Iterator[tuple[Task, ...]], window: int) -> None:
        if any(alone for _b, _d, alone in pending.values()):
            return
        if singles:
            if not pending:
                one = (singles.popleft(),)
                f = client.submit(judge_batch, one, self.ctx, pure=False)
                pending[f] = (one, time.monotonic() + self.opts.fixture_timeout, True)
            return
        while len(pending) < window:
            batch = next(batches, None)
            if batch is None:
                return
            f = client.submit(judge_batch, batch, self.ctx, pure=False)
            pending[f] = (batch, time.monotonic() + self.opts.fixture_timeout * len(batch) * 2,
                          False)

    def _settle(self, f: Any, batch: tuple[Task, ...], alone: bool,
                singles: deque[Task]) -> None:
        from distributed import KilledWorker

        if f.status == "finished":
            for r in f.result():
                self._emit(r)
            return
        if f.status == "cancelled":  # the scheduler forgot it: it lost its state
            raise self._lost("a task was cancelled")
        exc = f.exception()
        if isinstance(exc, InputError):
            raise exc
        if not alone:
            singles.extend(batch)  # which one? each alone decides
            return
        why = ("its worker died each time the scheduler ran it"
               if isinstance(exc, KilledWorker) else f"the task failed: {type(exc).__name__}")
        self._emit(crashed(batch[0], why), alone_crash=isinstance(exc, KilledWorker))

    def _timed_out(self, client: Any, f: Any, batch: tuple[Task, ...], alone: bool,
                   singles: deque[Task]) -> None:
        import contextlib

        with contextlib.suppress(Exception):  # best effort: the fixture is named either way
            busy = [w for w, keys in client.processing().items() if f.key in keys]
            f.cancel()
            if busy:
                client.restart_workers(workers=busy, raise_for_error=False)
        if not alone:
            singles.extend(batch)
            return
        self._emit(crashed(batch[0], f"timed out after {self.opts.fixture_timeout:g} s"),
                   alone_crash=True)
