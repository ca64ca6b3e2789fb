"""The Python SDK of ``shadow app-server``: a small client that speaks its protocol.

:class:`Connection` owns one server process (``python -m shadow app-server`` with the
arguments given) and its pipes: it writes one JSON-RPC line per message and reads the
server's lines on a reader thread, so every wait has a timeout on every platform (a
pipe cannot be ``select``-ed on Windows).  :class:`Client` is the SDK proper: typed calls
over a connection (``initialize`` then ``initialized`` first, as the Codex app-server
asks), a kernel refusal raised as the :class:`kernel.errors.KernelError` the in-process
kernel raises (same ``code`` and ``details``), any other error answer as
:class:`ServerError`, and a thread compaction returned with its lifecycle
notifications in the order they came::

    with Client.spawn() as client:
        plan = client.plan_context(request)
        notes = client.compact_thread("thr_1")   # turn/started ... turn/completed

The harness judges two surfaces with it (:mod:`shadow.served`): ``app-server`` (raw
protocol lines over :class:`Connection`) and ``sdk`` (this client).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import IO, Any, Final

from kernel.errors import KernelError

#: seconds to wait for one answer line before the server is taken for hung
DEFAULT_TIMEOUT: Final = 60.0
_EOF: Final = object()
_TURN: Final = frozenset({"turn/started", "item/started", "item/completed", "turn/completed"})
__all__ = ["Client", "Connection", "ServerError", "ServerGone", "kernel_error", "result_of"]


class ServerGone(Exception):
    """The server ended, closed its output, hung past the timeout or sent a non-JSON line."""


class ServerError(Exception):
    """An error answer that is not a kernel refusal: its JSON-RPC ``code`` and ``data``."""

    def __init__(self, code: int, message: str, data: Mapping[str, Any] | None = None):
        super().__init__(f"{code} {message}")
        self.code, self.message, self.data = code, message, dict(data or {})


def kernel_error(error: Mapping[str, Any]) -> Exception:
    """The exception an error answer stands for: a kernel refusal (``-32602`` with
    ``data.kernelError``) is the kernel's own error code and details."""
    data = error.get("data") if isinstance(error.get("data"), Mapping) else {}
    assert isinstance(data, Mapping)
    code = data.get("kernelError")
    if error.get("code") == -32602 and isinstance(code, str):
        details = data.get("details")
        return KernelError(str(error.get("message", code)), code=code,
                           details=details if isinstance(details, Mapping) else None)
    return ServerError(int(error.get("code", 0)), str(error.get("message", "")), data)


def result_of(answer: Any, ident: Any) -> Any:
    """The result of ``answer``, the answer to request ``ident``; an error answer raised
    (:func:`kernel_error`), also one with a null id (the line itself was refused:
    ``-32700``); any other answer is :class:`ServerGone`."""
    if isinstance(answer, dict) and "error" in answer and answer.get("id") in (None, ident):
        raise kernel_error(answer["error"])
    if not isinstance(answer, dict) or answer.get("id") != ident or "result" not in answer:
        raise ServerGone("the server answered out of turn")
    return answer["result"]


def _pump(stream: IO[bytes], out: queue.Queue[object]) -> None:
    try:
        for line in stream:
            out.put(line)
    except (OSError, ValueError):  # closed under us: the connection is ending
        pass
    out.put(_EOF)


class Connection:
    """One ``shadow app-server`` process: lines in, lines out, each wait bounded."""

    def __init__(self, args: Sequence[str] = (), *, timeout: float = DEFAULT_TIMEOUT,
                 python: str | None = None) -> None:
        self.timeout = timeout
        # stderr (one line per answer, no bodies) is not read by the harness: discarded,
        # so a long run never fills a pipe nobody drains
        self._proc = subprocess.Popen(
            [python or sys.executable, "-m", "shadow", "app-server", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in = self._proc.stdin
        self._lines: queue.Queue[object] = queue.Queue()
        self._reader = threading.Thread(target=_pump, args=(self._proc.stdout, self._lines),
                                        name="shadow-sdk-reader", daemon=True)
        self._reader.start()

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def send(self, message: Any) -> None:
        """Write one message as one line (compact UTF-8 JSON)."""
        self.send_line(json.dumps(message, ensure_ascii=False,
                                  separators=(",", ":")).encode("utf-8"))

    def send_line(self, line: bytes) -> None:
        try:
            self._in.write(line + b"\n")
            self._in.flush()
        except (OSError, ValueError) as exc:
            raise ServerGone(f"the server's input is closed ({type(exc).__name__})") from None

    def receive(self) -> Any:
        """The next line from the server, decoded."""
        try:
            line = self._lines.get(timeout=self.timeout)
        except queue.Empty:
            raise ServerGone(f"no answer within {self.timeout:g} s") from None
        if line is _EOF:
            self._lines.put(_EOF)  # every later read sees the end too
            raise ServerGone(f"the server ended (exit code {self._proc.poll()})")
        assert isinstance(line, bytes)
        try:
            return json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise ServerGone("the server wrote a line that is not UTF-8 JSON") from None

    def close(self) -> None:
        """End the server: close its input (it ends at end of input), then wait; kill it
        if it does not end."""
        if self._proc.poll() is None:
            with contextlib.suppress(OSError):
                self._in.close()
            try:
                self._proc.wait(timeout=min(5.0, self.timeout))
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for s in (self._proc.stdin, self._proc.stdout):
            if s is not None:
                with contextlib.suppress(OSError):
                    s.close()


class Client:
    """The SDK: typed calls over one :class:`Connection` (see the module docstring)."""

    def __init__(self, connection: Connection, *, name: str = "context-kernel-parity-sdk"):
        self.connection = connection
        self.notifications: list[dict[str, Any]] = []  # received, not yet taken
        self._ids: Iterator[int] = itertools.count(1)
        self.server = self.request("initialize", {"clientInfo": {"name": name}})
        connection.send({"method": "initialized"})

    @classmethod
    def spawn(cls, args: Sequence[str] = (), *, timeout: float = DEFAULT_TIMEOUT) -> Client:
        """Start a server (``shadow app-server ARGS``) and connect to it."""
        conn = Connection(args, timeout=timeout)
        try:
            return cls(conn)
        except BaseException:
            conn.close()
            raise

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.connection.close()

    # -- the protocol ---------------------------------------------------------------------
    def request(self, method: str, params: Any = None) -> Any:
        """Send a request and return its result; notifications that come first are kept
        in :attr:`notifications`.  An error answer is raised (:func:`kernel_error`)."""
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method}
        if params is not None:
            message["params"] = params
        self.connection.send(message)
        while True:
            got = self.connection.receive()
            if isinstance(got, dict) and "id" not in got and "method" in got:
                self.notifications.append(got)
                continue
            return result_of(got, ident)

    def wait_for(self, method: str) -> list[dict[str, Any]]:
        """Every notification up to and including the first ``method`` one, taken."""
        while not any(n.get("method") == method for n in self.notifications):
            got = self.connection.receive()
            if not isinstance(got, dict) or "method" not in got or "id" in got:
                raise ServerGone("the server sent an answer nobody asked for")
            self.notifications.append(got)
        k = next(i for i, n in enumerate(self.notifications) if n.get("method") == method)
        taken, self.notifications = self.notifications[:k + 1], self.notifications[k + 1:]
        return taken

    # -- the design's API ---------------------------------------------------------------
    def plan_context(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self.request("context/plan", dict(request)))

    def recall_memory(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self.request("memory/recall", dict(params)))

    def propose_memory(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self.request("memory/propose", dict(params)))

    def decide_memory(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self.request("memory/decide", dict(params)))

    def delete_memory(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self.request("memory/delete", dict(params)))

    def reconcile(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self.request("reconcile", dict(params)))

    # -- threads --------------------------------------------------------------------------
    def start_thread(self, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return dict(self.request("thread/start", dict(params or {})))

    def read_thread(self, thread_id: str) -> dict[str, Any]:
        return dict(self.request("thread/read", {"threadId": thread_id}))

    def interrupt_turn(self, thread_id: str, turn_id: str) -> dict[str, Any]:
        """``turn/interrupt``: answered at once, even while the turn runs; the turn's own
        ``turn/completed`` says whether it was interrupted."""
        return dict(self.request("turn/interrupt", {"threadId": thread_id, "turnId": turn_id}))

    def compact_thread(self, thread_id: str) -> list[dict[str, Any]]:
        """``thread/compact/start``: the outcome is only in the notifications; this turn's
        four are returned in order (others stay in :attr:`notifications`)."""
        self.request("thread/compact/start", {"threadId": thread_id})

        def mine(n: Mapping[str, Any]) -> bool:
            params = n.get("params")
            return (n.get("method") in _TURN and isinstance(params, Mapping)
                    and params.get("threadId") == thread_id)

        while not any(mine(n) and n["method"] == "turn/completed" for n in self.notifications):
            got = self.connection.receive()
            if not isinstance(got, dict) or "method" not in got or "id" in got:
                raise ServerGone("the server sent an answer nobody asked for")
            self.notifications.append(got)
        end = next(i for i, n in enumerate(self.notifications)
                   if mine(n) and n["method"] == "turn/completed")
        turn = [n for n in self.notifications[:end + 1] if mine(n)]
        self.notifications = [n for i, n in enumerate(self.notifications)
                              if i > end or not mine(n)]
        return turn

