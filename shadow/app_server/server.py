"""``shadow app-server``: the kernel behind JSON-RPC 2.0 over stdio (one JSON per line).

The lifecycle follows the Codex app-server: the client sends ``initialize`` (a request)
and then ``initialized`` (a notification); before ``initialize`` every other method is
answered ``-32002``.  The design's API methods run the kernel's own functions
(:mod:`shadow.kernel_rpc`: the same code the harness and the peer vectors call); a
retired entry point (:mod:`shadow.app_server.retired`) is refused, naming its
replacement.  Only protocol lines go to stdout; stderr gets one line per answer (whether
it had an id, its outcome code: nothing of its params), and the server never ends on bad
input, only at the end of its input.
"""

from __future__ import annotations

import io
import json
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from queue import Empty, Queue
from typing import Any, BinaryIO, Final, TextIO

from shadow.app_server import consolidation
from shadow.app_server import protocol as rpc
from shadow.app_server import retired as retired_mod
from shadow.app_server.memory_tools import METHODS as MEMORY_TOOLS
from shadow.app_server.memory_tools import MemoryTools
from shadow.app_server.schema import Schema
from shadow.app_server.soul import METHODS as SOUL_METHODS
from shadow.app_server.soul import SoulConfig
from shadow.app_server.threads import Job, Threads

#: the design's API (design 108 §10) as methods -> the kernel function each one runs
KERNEL_METHODS: Final[Mapping[str, str]] = {
    "context/plan": "plan_context",
    "memory/recall": "recall_memory",
    "memory/propose": "propose_memory",
    "memory/decide": "decide_memory",
    "memory/delete": "delete_memory",
    "reconcile": "reconcile",
}
_KERNEL_INTERNAL: Final = frozenset({"internal_error"})
THREAD_METHODS: Final = ("thread/start", "thread/resume", "thread/read",
                         "thread/compact/start", "turn/interrupt")


def _wall_ms() -> int:
    import time

    return int(time.time() * 1000)


def _uuid() -> str:
    import uuid

    return uuid.uuid4().hex[:16]


def _threads() -> Threads:
    return Threads(None, _uuid, _wall_ms)


def _user_agent() -> str:
    from shadow import __version__

    return f"context-kernel-parity/{__version__}"


@dataclass
class Server:
    """The protocol state of one connection and its method table."""

    registry: Sequence[retired_mod.Retired] = field(default_factory=retired_mod.load)
    threads: Threads = field(default_factory=_threads)
    memory: MemoryTools = field(default_factory=lambda: MemoryTools(None))
    soul: SoulConfig = field(default_factory=lambda: SoulConfig(None))
    schema: Schema = field(default_factory=Schema)  # protocol.v1.json: every method's params
    initialized: bool = False  # initialize answered
    ready: bool = False  # initialized notification received
    outbox: list[dict[str, Any]] = field(default_factory=list)  # after the answers
    jobs: list[Job] = field(default_factory=list)  # then these, each streaming

    def methods(self) -> list[str]:
        """The request methods (``protocol.v1.json``), as ``initialize`` lists them."""
        return [m for m in self.schema.methods()
                if self.schema.doc["methods"][m]["kind"] == "request"]

    def dispatch(self, method: str, params: Any, notify: bool) -> Any:
        gone = retired_mod.find(self.registry, method)
        if gone is not None:  # before anything else: never run, whatever the state
            raise rpc.RpcError(rpc.RETIRED, "Retired method", {
                "method": method, "replacement": gone.replacement, "owner": gone.owner})
        if method == "initialized" and notify:
            self.ready = self.initialized
            return None
        if method not in self.methods():
            raise rpc.RpcError(rpc.METHOD_NOT_FOUND, "Method not found", {"method": method})
        if not self.initialized and method != "initialize":
            raise rpc.RpcError(rpc.NOT_INITIALIZED, "Not initialized",
                               {"expected": "initialize first"})
        self.schema.check(method, params)
        if method == "initialize":
            return self._initialize()
        if method in KERNEL_METHODS:
            return _kernel(KERNEL_METHODS[method], params)
        if method in MEMORY_TOOLS:
            return self.memory.call(method, params)
        if method in SOUL_METHODS:
            return self.soul.call(method, params)
        return self._thread(method, params)

    def _thread(self, method: str, params: Any) -> Any:
        if method == "thread/start":
            result, notes = self.threads.start(params)
            self.outbox.extend(notes)
            return result
        if method == "thread/resume":
            return self.threads.resume(params)
        if method == "thread/read":
            return self.threads.read(params)
        if method == "turn/interrupt":
            return self.threads.interrupt(params)
        answer, job = self.threads.compact_start(params)
        tid, memory_root, threads = str(params["threadId"]), self.memory.root, self.threads
        self.jobs.append(lambda: consolidation.after_turn(
            memory_root, tid, job(), lambda: threads.item_count(tid)))
        return answer

    def pending(self) -> list[dict[str, Any]] | Job | None:
        """What to send after the answers: the queued notifications, then each job."""
        if self.outbox:
            out, self.outbox = self.outbox, []
            return out
        return self.jobs.pop(0) if self.jobs else None

    def _initialize(self) -> dict[str, Any]:
        if self.initialized:
            raise rpc.RpcError(rpc.INVALID_REQUEST, "Already initialized",
                               {"expected": "initialize once per connection"})
        self.initialized = True
        return {"userAgent": _user_agent(), "methods": self.methods()}


def _kernel(name: str, params: Any) -> Any:
    from shadow import kernel_rpc

    out = kernel_rpc.call(name, params)
    if "error" not in out:
        return out["result"]
    err = out["error"]
    code = str(err.get("code", "internal_error"))
    data = {"kernelError": code, "details": err.get("details", {})}
    if code in _KERNEL_INTERNAL:
        raise rpc.RpcError(rpc.INTERNAL_ERROR, "Internal error", {"kernelError": code})
    raise rpc.InvalidParams(str(err.get("message", "invalid params")), data)


_EOF: Final = object()  # the reader thread's last queue entry
READ_AHEAD: Final = 16  # lines read but not yet handled, at most
_INTERRUPT: Final = b'"turn/interrupt"'


def _interrupt_now(line: bytes | None) -> bool:
    """Whether ``line`` is one ``turn/interrupt`` request (answered as soon as it is read
    while a turn runs; every other line waits its turn, in order)."""
    if line is None or _INTERRUPT not in line:  # the cheap gate; then the exact test
        return False
    try:
        message = json.loads(line)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == "turn/interrupt"


def _next(queue: Queue[Any]) -> Any:
    """The next line read; waits in short steps (Ctrl+C reaches a Windows wait too)."""
    while True:
        try:
            return queue.get(timeout=0.5)
        except Empty:
            continue


def serve(stdin: BinaryIO, stdout: BinaryIO, log: TextIO, *,
          server: Server | None = None) -> int:
    """Answer every line of ``stdin`` on ``stdout`` until end of input; 0.  A line's
    answers go first, then the notifications its requests queued, then the turns they
    started (a compaction's notifications, each written as it happens); the next line is
    handled after that.  A thread reads ahead, so that a ``turn/interrupt`` sent while a
    turn runs is answered (and reaches the turn) at once; read while no turn runs, it
    takes its place in line like any other."""
    server = server or Server()
    write = threading.Lock()
    turning = threading.Event()  # a turn is running

    def send(messages: Sequence[Any]) -> None:
        with write:
            for m in messages:
                stdout.write(rpc.dumps(m))
            stdout.flush()

    def answer(line: bytes | None) -> None:
        answers = [rpc.too_long()] if line is None else rpc.handle(line, server.dispatch)
        send(answers)
        with write:
            for a in answers:
                for one in (a if isinstance(a, list) else [a]):
                    err = one.get("error")
                    log.write(f"app-server: id={'set' if one.get('id') is not None else 'null'}"
                              f" {'error ' + str(err['code']) if err else 'ok'}\n")
            log.flush()

    queue: Queue[Any] = Queue(maxsize=READ_AHEAD)  # read ahead, bounded: a client
    # that sends faster than turns end is held back by the pipe again

    def read() -> None:
        try:
            for line in rpc.lines(stdin):
                if turning.is_set() and _interrupt_now(line):
                    answer(line)
                else:
                    queue.put(line)
        finally:
            queue.put(_EOF)

    threading.Thread(target=read, name="app-server-reader", daemon=True).start()
    while (line := _next(queue)) is not _EOF:
        answer(line)
        while (after := server.pending()) is not None:
            if isinstance(after, list):
                send(after)
                continue
            turning.set()
            try:
                for note in after():
                    send([note])
            finally:
                turning.clear()
    return 0


def main(sessions: str | None = None, memory: str | None = None,
         config: str | None = None, session_store: str = "jsonl",
         provider: Mapping[str, Any] | None = None) -> int:
    """``shadow app-server``; ``provider``: the keyword arguments of
    :func:`shadow.app_server.provider.provider` (``url``, ``model``, ...), or None."""
    from pathlib import Path

    from shadow.app_server.threads import DEFAULT_POLICY

    summarizer = None
    if provider is not None:
        from shadow.app_server.provider import ProviderSetupError
        from shadow.app_server.provider import provider as make

        try:
            summarizer = make(**provider, sink=str(DEFAULT_POLICY["sink"]))
        except ProviderSetupError as exc:
            print(f"shadow app-server: {exc}", file=sys.stderr)
            return 2
    threads = Threads(Path(sessions) if sessions else None, _uuid, _wall_ms, DEFAULT_POLICY,
                      session_store, summarizer)
    server = Server(threads=threads, memory=MemoryTools(Path(memory) if memory else None),
                    soul=SoulConfig(Path(config) if config else None))
    # stdin through a reader of its own: the reader thread may sit in a read when the
    # process ends, and must not hold the interpreter's sys.stdin lock then
    stdin = io.BufferedReader(io.FileIO(sys.stdin.fileno(), "rb", closefd=False))
    try:
        return serve(stdin, sys.stdout.buffer, sys.stderr, server=server)
    finally:
        threads.close()
