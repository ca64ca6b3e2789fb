"""JSON-RPC 2.0 over JSON Lines, as the Codex app-server speaks it.

One JSON value per line, UTF-8.  A request is ``{"id", "method", "params"?}`` (the Codex
convention omits ``"jsonrpc": "2.0"``; when a client sends it, it must be exactly that),
a notification has no ``id``, a batch is a non-empty array of those.  Every answer is one
line; a batch is answered by one array line (nothing at all when it held only
notifications).

Errors (``error.code``), each with ``error.data`` naming what was wrong — never a body:

* ``-32700`` parse error: the line is not UTF-8 JSON, or longer than :data:`MAX_LINE_BYTES`
  (refused without being read whole: the reader stops at the limit and skips to the next
  newline);
* ``-32600`` invalid request: not an object, an empty batch, a bad ``id``, ``method`` or
  ``params`` type, an unknown top-level member;
* ``-32601`` method not found;
* ``-32602`` invalid params (:class:`InvalidParams`, raised by a method);
* ``-32002`` not initialized: any method but ``initialize`` before it;
* ``-32004`` retired: a retired entry point (:mod:`shadow.app_server.retired`) — never run,
  never aliased;
* ``-32603`` internal error: a method failed unexpectedly (its exception's type only).

The functions here are pure over bytes and a dispatcher; :mod:`shadow.app_server.server`
does the I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, Final

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
NOT_INITIALIZED: Final = -32002
RETIRED: Final = -32004

#: the longest line read (bytes, newline excluded); longer ones are refused unread.  A
#: ``context/plan`` request carries its session's items whole: 32 MiB holds the longest
#: string the harness accepts (``shadow.boundary.MAX_STRING``, 16 MiB) even with every
#: character escaped; 1 MiB refused the bundled ``large-tool-output-1mib`` (a 2 MiB line)
MAX_LINE_BYTES: Final = 32 << 20
_MEMBERS: Final = frozenset({"jsonrpc", "id", "method", "params"})


class RpcError(Exception):
    """An error answer: ``code``, ``message`` and ``data`` (names and types, no body)."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, dict(data or {})

    def to_wire(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data:
            err["data"] = self.data
        return err


class InvalidParams(RpcError):
    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(INVALID_PARAMS, message, data)


#: (method, params, is_notification) -> result (ignored for a notification)
Dispatch = Callable[[str, Any, bool], Any]


def response(ident: Any, *, result: Any = None, error: RpcError | None = None
             ) -> dict[str, Any]:
    out: dict[str, Any] = {"jsonrpc": "2.0", "id": ident}
    if error is not None:
        out["error"] = error.to_wire()
    else:
        out["result"] = result
    return out


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def dumps(message: Any) -> bytes:
    """One protocol line (UTF-8, compact, newline-terminated)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _decode(line: bytes) -> Any:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise RpcError(PARSE_ERROR, "Parse error", {"expected": "UTF-8 text"}) from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise RpcError(PARSE_ERROR, "Parse error", {"expected": "one JSON value per line"}
                       ) from None


def _check(message: Any) -> tuple[Any, str, Any, bool]:
    """(id, method, params, is_notification) of a well-formed message, else RpcError."""
    if not isinstance(message, dict):
        raise RpcError(INVALID_REQUEST, "Invalid Request", {"expected": "a request object"})
    unknown = sorted(str(k) for k in message if k not in _MEMBERS)
    if unknown:
        raise RpcError(INVALID_REQUEST, "Invalid Request",
                       {"expected": "only jsonrpc, id, method, params", "unknown": unknown})
    if "jsonrpc" in message and message["jsonrpc"] != "2.0":
        raise RpcError(INVALID_REQUEST, "Invalid Request", {"expected": 'jsonrpc "2.0"'})
    ident = message.get("id")
    notify = "id" not in message
    if not notify and (isinstance(ident, bool) or not isinstance(ident, (str, int))):
        raise RpcError(INVALID_REQUEST, "Invalid Request",
                       {"expected": "an id that is a string or an integer"})
    method = message.get("method")
    if not isinstance(method, str) or not method:
        raise RpcError(INVALID_REQUEST, "Invalid Request",
                       {"expected": "a method name (a non-empty string)"})
    params = message.get("params")
    if "params" in message and not isinstance(params, (dict, list)):
        raise RpcError(INVALID_REQUEST, "Invalid Request",
                       {"expected": "params that are an object or an array"})
    return ident, method, params, notify


def _id_of(message: Any) -> Any:
    """The id to answer a malformed request with (null unless it is a usable id)."""
    if isinstance(message, dict):
        ident = message.get("id")
        if isinstance(ident, (str, int)) and not isinstance(ident, bool):
            return ident
    return None


def _one(message: Any, dispatch: Dispatch) -> dict[str, Any] | None:
    try:
        ident, method, params, notify = _check(message)
    except RpcError as exc:
        return response(_id_of(message), error=exc)
    try:
        result = dispatch(method, params, notify)
    except RpcError as exc:
        return None if notify else response(ident, error=exc)
    except Exception as exc:  # a method's bug: named by type, the server keeps serving
        err = RpcError(INTERNAL_ERROR, "Internal error", {"exception": type(exc).__name__})
        return None if notify else response(ident, error=err)
    return None if notify else response(ident, result=result)


def handle(line: bytes, dispatch: Dispatch) -> list[Any]:
    """The answer to one line: no message (notifications), one, or one batch (a list of
    one list).  Never raises for bad input."""
    try:
        message = _decode(line)
    except RpcError as exc:
        return [response(None, error=exc)]
    if isinstance(message, list):
        if not message:
            return [response(None, error=RpcError(INVALID_REQUEST, "Invalid Request",
                                                  {"expected": "a non-empty batch"}))]
        answers = [a for a in (_one(m, dispatch) for m in message) if a is not None]
        return [answers] if answers else []
    answer = _one(message, dispatch)
    return [answer] if answer is not None else []


def too_long() -> dict[str, Any]:
    return response(None, error=RpcError(PARSE_ERROR, "Parse error", {
        "expected": f"a line of at most {MAX_LINE_BYTES} bytes", "got": "a longer line"}))


def lines(stream: BinaryIO, limit: int = MAX_LINE_BYTES) -> Iterator[bytes | None]:
    """The lines of ``stream`` (newline stripped, blank lines skipped); ``None`` for a line
    longer than ``limit``, whose rest is skipped in pieces — never held whole."""
    while True:
        chunk = stream.readline(limit + 1)
        if not chunk:
            return
        if len(chunk) > limit and not chunk.endswith(b"\n"):
            while chunk and not chunk.endswith(b"\n"):  # skip to the end of that line
                chunk = stream.readline(limit + 1)
            yield None
            continue
        text = chunk.rstrip(b"\r\n")
        if len(text) > limit:
            yield None
        elif text.strip():
            yield text
