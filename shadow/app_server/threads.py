"""Threads over a session store, and manual compaction through ``thread/compact/start``.

A thread is a session of one of the project's session stores: the JSONL store
(``--sessions DIR``: hash-chained transcripts) or the SQLite store (``--sessions FILE
--session-store sqlite``), both with compare-and-swap appends
(:func:`shadow.bootstrap.thread_store`).
``thread/start`` creates one, ``thread/resume`` and ``thread/read`` find one (``-32602``
for an unknown ``threadId``).  ``thread/compact/start`` takes params exactly
``{threadId}`` (:func:`kernel.compaction.thread.accept_thread_compact_start`), answers
``{}`` as soon as it is accepted and only then runs the kernel's compaction
(:class:`kernel.compaction.service.CompactionKernel`), whose outcome travels only in the
notifications, in this order (:mod:`kernel.compaction.thread`)::

    turn/started → item/started (contextCompaction) → item/completed → turn/completed

The compaction policy (window, reserves, sink, profile) is the server's
(:data:`DEFAULT_POLICY`); without a provider the kernel compacts deterministically (no
summarizer).  With one (``provider``: a summarizer per turn, given that turn's cancel
hook; the CLI's ``--provider-url``) the dropped items are summarized by it, and
``turn/interrupt {threadId, turnId}`` cancels a running turn: its provider call is given
up on and the turn completes ``interrupted`` (outcome ``cancelled``).  Clock and ids are
injected (the CLI passes the wall clock and uuid4).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from kernel.compaction import thread as lifecycle
from kernel.errors import KernelError
from kernel.ports import Summarizer, SummaryCancelled
from shadow.app_server import protocol as rpc

#: the server's compaction policy (design 108 §6 budgets), per thread: its own scope
DEFAULT_POLICY: Final[Mapping[str, Any]] = MappingProxyType({
    "modelWindowTokens": 32000, "reservedOutputTokens": 4000, "safetyMarginTokens": 1000,
    "recoveryReserveTokens": 1000, "sink": "provider.local",
    "policyVersion": "app-server-1", "modelProfile": "default",
})
NO_STORE: Final = -32000

Job = Callable[[], Iterator[dict[str, Any]]]
#: a turn's summarizer, given the turn's cancel hook (true once it is interrupted)
Provider = Callable[[Callable[[], bool]], Summarizer]


def _thread_id(params: Any) -> str:
    """The ``threadId`` of params the server checked against ``protocol.v1.json``."""
    return str(params["threadId"])


@dataclass
class Threads:
    """The thread methods over one session store (``root`` None: none configured)."""

    root: Path | None
    new_id: Callable[[], str]
    clock: Callable[[], int]  # epoch milliseconds
    policy: Mapping[str, Any] = field(default_factory=lambda: DEFAULT_POLICY)
    kind: str = "jsonl"  # or "sqlite": ``root`` is the SQLite file
    provider: Provider | None = None  # the summarizer of each compaction turn
    _open: Any = field(default=None, repr=False)  # the SQLite store, opened by its first call
    #: the running turns: turnId -> (threadId, its cancel flag); ``turn/interrupt`` comes
    #: from the server's reader thread, hence the lock
    _running: dict[str, tuple[str, threading.Event]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _port(self) -> Any:
        if self.root is None:
            raise rpc.RpcError(NO_STORE, "No session store", {
                "expected": "shadow app-server --sessions DIR"})
        from shadow import bootstrap

        if self.kind != "sqlite":  # a folder of files: read afresh by every call
            return bootstrap.thread_store(self.root, self.clock)
        if self._open is None:  # one connection for the server's life
            self._open = bootstrap.thread_store(self.root, self.clock, self.kind)
        return self._open

    def close(self) -> None:
        """Close the store (the SQLite connection); the next call opens it again."""
        port, self._open = self._open, None
        if port is not None and hasattr(port, "close"):
            port.close()

    def _snapshot(self, tid: str) -> Any:
        try:
            snap = self._port().read_snapshot(tid)
        except KernelError as exc:
            raise rpc.InvalidParams("threadId is not a thread of this store",
                                    {"field": "threadId", "kernelError": exc.code}) from None
        if snap is None:
            raise rpc.InvalidParams("unknown threadId", {"field": "threadId"})
        return snap

    def start(self, params: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        title = (params or {}).get("title", "Untitled")
        tid = f"thr_{self.new_id()}"
        port = self._port()
        if self.kind == "sqlite":  # the SQLite store keeps no title: an empty session
            port.seed(tid)
            head = port.read_snapshot(tid).head
        else:
            head = port.start_session(tid, title=title).new_head
        thread = {"id": tid, "head": head}
        return {"thread": thread}, [rpc.notification("thread/started", {"thread": thread})]

    def item_count(self, tid: str) -> int | None:
        """How many items the thread holds now (None when it cannot be read)."""
        try:
            snap = self._port().read_snapshot(tid)
        except (KernelError, OSError):
            return None
        return None if snap is None else len(snap.items)

    def resume(self, params: Any) -> dict[str, Any]:
        snap = self._snapshot(_thread_id(params))
        return {"thread": {"id": snap.session_id, "head": snap.head,
                           "itemCount": len(snap.items)}}

    def read(self, params: Any) -> dict[str, Any]:
        snap = self._snapshot(_thread_id(params))
        return {"thread": {"id": snap.session_id, "head": snap.head, "epoch": snap.epoch,
                           "memoryRevision": snap.memory_revision,
                           "items": [dict(i) for i in snap.items]}}

    def compact_start(self, params: Any) -> tuple[dict[str, Any], Job]:
        """Accept (``{}``) and the job that runs the compaction turn afterwards."""
        try:
            tid, answer = lifecycle.accept_thread_compact_start(params)
        except KernelError as exc:
            raise rpc.InvalidParams(str(exc), dict(getattr(exc, "details", {}) or {})
                                    ) from None
        self._snapshot(tid)  # an unknown thread is -32602, before anything is accepted
        return answer, lambda: self._compact(tid)

    def interrupt(self, params: Any) -> dict[str, Any]:
        """``turn/interrupt``: flag a running turn of this thread as cancelled; ``{}``.
        Where the turn can still stop (before or during its provider call) it completes
        ``interrupted``; a turn past that point completes as it would have."""
        tid, turn = _thread_id(params), str(params["turnId"])
        with self._lock:
            running = self._running.get(turn)
        if running is None or running[0] != tid:
            raise rpc.InvalidParams("no running turn of this thread has that turnId",
                                    {"field": "turnId"})
        running[1].set()
        return {}

    def _compact(self, tid: str) -> Iterator[dict[str, Any]]:
        turn, item = f"turn_{self.new_id()}", f"item_{self.new_id()}"
        cancel = threading.Event()
        with self._lock:
            self._running[turn] = (tid, cancel)
        try:
            yield from self._turn(tid, turn, item, cancel)
        finally:
            with self._lock:
                del self._running[turn]

    def _turn(self, tid: str, turn: str, item: str,
              cancel: threading.Event) -> Iterator[dict[str, Any]]:
        from kernel.compaction.service import CompactionKernel

        for n in lifecycle.compaction_started(tid, turn, item):
            yield rpc.notification(n.method, dict(n.params))
        request = {**self.policy, "sessionId": tid,
                   "scopeAdmissions": [{"scope": "session", "scopeId": tid}]}
        if self.provider is not None:
            request |= {"summarizer": self.provider(cancel.is_set), "allowFallback": False}
        kernel = CompactionKernel(self._port(), clock=self.clock, new_id=self.new_id)
        try:
            if cancel.is_set():  # interrupted before it began
                raise SummaryCancelled()
            receipt = kernel.compact_context(request)
        except SummaryCancelled as exc:  # a provider call given up on after it was sent
            # may have run and be billed: the item says so (nothing else records it)
            usage = getattr(getattr(exc, "outcome", None), "usage", None)
            done = lifecycle.compaction_completed(
                tid, turn, item, "cancelled", error_code="cancelled",
                outcome={"providerUsage": "unknown"} if usage == "unknown" else None)
        except Exception as exc:  # a failed compaction (the kernel's error, a provider's):
            # the turn fails, named by its code, and the server serves on
            code = getattr(exc, "code", None)
            done = lifecycle.compaction_completed(
                tid, turn, item, "aborted",
                error_code=str(code) if code else "compaction_failed")
        else:
            done = lifecycle.compaction_completed(tid, turn, item, str(receipt["status"]),
                                                  outcome=lifecycle.outcome_of(receipt))
        for n in done:
            yield rpc.notification(n.method, dict(n.params))
