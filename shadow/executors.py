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
  worker is restarted (best effort: a ``dask worker`` without a nanny stays busy).
* Losing the Dask scheduler (the client cannot reach it for ``scheduler_grace`` seconds)
  raises :class:`SchedulerLost` with how far the run got; ``shadow run`` exits 2 and
  writes nothing.
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
from shadow.mapstep import MapContext, Task, UnitResult, crashed, judge_batch

EXECUTORS: Final = ("serial", "process", "dask")
DEFAULT_FIXTURE_TIMEOUT: Final = 600.0
POLL: Final = 0.5  # seconds between checks of deadlines and of the scheduler


class SchedulerLost(ShadowError):
    """The Dask scheduler went away mid-run (exit 2: nothing is written)."""

    code = "scheduler_lost"

    def __init__(self, address: str, done: int, total: int, why: str) -> None:
        super().__init__(f"the Dask scheduler {address} was lost after {done} of {total} "
                         f"fixtures were judged ({why}); no report was written")
        self.address, self.done, self.total = address, done, total


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
    if not opts.fixture_timeout > 0:
        raise UsageError(f"--fixture-timeout must be positive, got {opts.fixture_timeout}")
    if opts.executor == "dask":
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise UsageError("--executor dask needs the [scale] extra: pip install "
                             "'context-kernel-parity[scale]' (dask, distributed, "
                             "pyarrow)") from None


def run_map(tasks: Iterable[Task], ctx: MapContext, opts: MapOptions, total: int,
            on_result: OnResult) -> None:
    """Judge every task on ``opts.executor``; ``on_result`` gets each result once."""
    size = batch_size(total, opts.jobs, opts.batch)
    if opts.executor == "serial":
        for t in tasks:
            on_result(judge_batch((t,), ctx)[0])
    elif opts.executor == "process":
        _ProcessMap(ctx, opts, on_result).run(_batches(tasks, size))
    else:
        _DaskMap(ctx, opts, on_result, total).run(_batches(tasks, size))


# --- process pool ---------------------------------------------------------------------------


def _new_pool(jobs: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))


def _kill(pool: ProcessPoolExecutor) -> None:
    """Tear a pool down now, its running workers included (a hung replay never returns)."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
    else:
        for p in list(getattr(pool, "_processes", {}).values()):  # 3.11–3.13: no public API
            p.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


class _ProcessMap:
    def __init__(self, ctx: MapContext, opts: MapOptions, on_result: OnResult) -> None:
        self.ctx, self.opts, self.on_result = ctx, opts, on_result
        self.window = 2 * opts.jobs
        self.suspects: deque[Task] = deque()  # retried alone after a broken pool

    def run(self, batches: Iterator[tuple[Task, ...]]) -> None:
        pool = _new_pool(self.opts.jobs)
        # future -> (its batch, its deadline, whether it runs alone)
        pending: dict[Future[list[UnitResult]], tuple[tuple[Task, ...], float, bool]] = {}
        try:
            while True:
                self._fill(pool, pending, batches)
                if not pending:
                    return
                done, _ = wait(pending, timeout=POLL, return_when=FIRST_COMPLETED)
                broken = False
                for f in done:
                    batch, _deadline, alone = pending.pop(f)
                    exc = f.exception()
                    if exc is None:
                        for r in f.result():
                            self.on_result(r)
                    elif isinstance(exc, BrokenProcessPool):
                        broken = True
                        self._failed(batch, "the worker process died", alone)
                    elif isinstance(exc, InputError):
                        raise exc
                    else:  # the task never ran its map (e.g. it could not be pickled)
                        for t in batch:
                            self.on_result(crashed(t, f"the task failed: {type(exc).__name__}"))
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
                    pool = _new_pool(self.opts.jobs)
        finally:
            _kill(pool)

    def _fill(self, pool: ProcessPoolExecutor,
              pending: dict[Future[list[UnitResult]], tuple[tuple[Task, ...], float, bool]],
              batches: Iterator[tuple[Task, ...]]) -> None:
        """Top the window up.  A suspect (retried after a broken pool) runs alone, so a
        crash or a hang then names it and nothing else."""
        if any(alone for _b, _d, alone in pending.values()):
            return
        if self.suspects:
            if not pending:
                one = (self.suspects.popleft(),)
                pending[pool.submit(judge_batch, one, self.ctx)] = (
                    one, time.monotonic() + self.opts.fixture_timeout, True)
            return
        while len(pending) < self.window:
            batch = next(batches, None)
            if batch is None:
                return
            # queued behind at most one other batch per worker: twice its own time
            limit = self.opts.fixture_timeout * len(batch) * 2
            pending[pool.submit(judge_batch, batch, self.ctx)] = (
                batch, time.monotonic() + limit, False)

    def _failed(self, batch: Sequence[Task], why: str, alone: bool) -> None:
        """A batch whose worker died or hung: alone, its one fixture is named crashed;
        otherwise each of its fixtures is retried alone first."""
        if alone and len(batch) == 1:
            self.on_result(crashed(batch[0], why))
        else:
            self.suspects.extend(batch)


# --- Dask -------------------------------------------------------------------------------------


class _DaskMap:
    def __init__(self, ctx: MapContext, opts: MapOptions, on_result: OnResult,
                 total: int) -> None:
        self.ctx, self.opts, self.on_result, self.total = ctx, opts, on_result, total
        self.done = 0
        self.address = opts.scheduler or "LocalCluster"

    def _emit(self, r: UnitResult) -> None:
        self.done += 1
        self.on_result(r)

    def _client(self) -> tuple[Any, Any]:
        import logging

        from distributed import Client, LocalCluster

        if self.opts.scheduler:
            try:
                client = Client(  # type: ignore[no-untyped-call]
                    self.opts.scheduler, timeout=self.opts.scheduler_grace)
                return client, None
            except (OSError, TimeoutError) as exc:
                raise InputError(self.opts.scheduler, "", "--scheduler: the address of a "
                                 "running Dask scheduler (tcp://host:port)",
                                 type(exc).__name__) from None
        cluster = LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=self.opts.jobs, threads_per_worker=1, processes=True,
            dashboard_address=None, silence_logs=logging.ERROR)
        return Client(cluster), cluster  # type: ignore[no-untyped-call]

    def run(self, batches: Iterator[tuple[Task, ...]]) -> None:
        import logging

        # distributed logs its reconnect attempts with tracebacks: the run says what
        # happened itself (SchedulerLost, an InputError naming --scheduler)
        log = logging.getLogger("distributed")
        level = log.level
        log.setLevel(logging.CRITICAL)
        try:
            client, cluster = self._client()
            try:
                self._loop(client, batches)
            except OSError as exc:  # CommClosedError and the like: the scheduler is gone
                raise SchedulerLost(self.address, self.done, self.total,
                                    type(exc).__name__) from None
            finally:
                try:
                    client.close(timeout=10)
                finally:
                    if cluster is not None:
                        cluster.close(timeout=10)
        finally:
            log.setLevel(level)

    def _loop(self, client: Any, batches: Iterator[tuple[Task, ...]]) -> None:
        from distributed import wait as dwait

        workers = max(1, len(client.scheduler_info().get("workers", {})))
        window = 2 * max(workers, self.opts.jobs)
        ctx = client.scatter(self.ctx, broadcast=True, hash=False)
        pending: dict[Any, tuple[tuple[Task, ...], float]] = {}
        singles: deque[Task] = deque()
        lost_since: float | None = None
        while True:
            while len(pending) < window:
                batch = (singles.popleft(),) if singles else next(batches, None)
                if batch is None:
                    break
                limit = self.opts.fixture_timeout * len(batch) * 2
                f = client.submit(judge_batch, batch, ctx, pure=False)
                pending[f] = (batch, time.monotonic() + limit)
            if not pending:
                return
            try:
                done, _ = dwait(  # type: ignore[no-untyped-call]
                    list(pending), timeout=POLL, return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = set()
            except Exception:  # FuturesCancelledError: "scheduler-connection-lost"
                if any(f.cancelled() for f in pending):
                    raise SchedulerLost(self.address, self.done, self.total,
                                        "the connection to the scheduler was lost") from None
                raise
            if client.status not in ("running", "connecting"):
                raise SchedulerLost(self.address, self.done, self.total,
                                    f"client {client.status}")
            if client.status == "connecting":
                lost_since = lost_since or time.monotonic()
                if time.monotonic() - lost_since > self.opts.scheduler_grace:
                    raise SchedulerLost(self.address, self.done, self.total,
                                        f"unreachable for {self.opts.scheduler_grace:g} s")
                continue
            lost_since = None
            for f in done:
                batch, _ = pending.pop(f)
                self._settle(f, batch, singles)
            now = time.monotonic()
            for f in [f for f, (_b, d) in pending.items() if d < now]:
                batch, _ = pending.pop(f)
                self._timed_out(client, f, batch)

    def _settle(self, f: Any, batch: tuple[Task, ...], singles: deque[Task]) -> None:
        from distributed import KilledWorker

        if f.status == "finished":
            for r in f.result():
                self._emit(r)
            return
        if f.status == "cancelled":  # the scheduler forgot it: it lost its state
            raise SchedulerLost(self.address, self.done, self.total, "a task was cancelled")
        exc = f.exception()
        if isinstance(exc, InputError):
            raise exc
        if isinstance(exc, KilledWorker) and len(batch) > 1:
            singles.extend(batch)  # which one killed its workers? each alone decides
            return
        why = ("its worker died each time the scheduler ran it"
               if isinstance(exc, KilledWorker) else f"the task failed: {type(exc).__name__}")
        for t in batch:
            self._emit(crashed(t, why))

    def _timed_out(self, client: Any, f: Any, batch: tuple[Task, ...]) -> None:
        busy = []
        try:
            busy = [w for w, keys in client.processing().items() if f.key in keys]
            f.cancel()
            if busy:
                client.restart_workers(workers=busy, raise_for_error=False)
        except Exception:  # best effort: the fixture is named crashed either way
            pass
        for t in batch:
            self._emit(crashed(t, f"timed out after {self.opts.fixture_timeout:g} s"))
