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

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Final, TextIO

from shadow.app_server import protocol as rpc
from shadow.app_server import retired as retired_mod

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


def _user_agent() -> str:
    from shadow import __version__

    return f"context-kernel-parity/{__version__}"


@dataclass
class Server:
    """The protocol state of one connection and its method table."""

    registry: Sequence[retired_mod.Retired] = field(default_factory=retired_mod.load)
    initialized: bool = False  # initialize answered
    ready: bool = False  # initialized notification received

    def methods(self) -> list[str]:
        return sorted({"initialize", *KERNEL_METHODS})

    def dispatch(self, method: str, params: Any, notify: bool) -> Any:
        gone = retired_mod.find(self.registry, method)
        if gone is not None:  # before anything else: never run, whatever the state
            raise rpc.RpcError(rpc.RETIRED, "Retired method", {
                "method": method, "replacement": gone.replacement, "owner": gone.owner})
        if method == "initialized" and notify:
            self.ready = self.initialized
            return None
        if method == "initialize":
            return self._initialize(params)
        if method not in KERNEL_METHODS:
            raise rpc.RpcError(rpc.METHOD_NOT_FOUND, "Method not found", {"method": method})
        if not self.initialized:
            raise rpc.RpcError(rpc.NOT_INITIALIZED, "Not initialized",
                               {"expected": "initialize first"})
        return _kernel(KERNEL_METHODS[method], params)

    def _initialize(self, params: Any) -> dict[str, Any]:
        if params is not None and not isinstance(params, dict):
            raise rpc.InvalidParams("initialize params must be an object")
        info = (params or {}).get("clientInfo")
        if info is not None and not isinstance(info, dict):
            raise rpc.InvalidParams("clientInfo must be an object", {"field": "clientInfo"})
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


def serve(stdin: BinaryIO, stdout: BinaryIO, log: TextIO) -> int:
    """Answer every line of ``stdin`` on ``stdout`` until end of input; 0."""
    server = Server()
    for line in rpc.lines(stdin):
        answers = [rpc.too_long()] if line is None else rpc.handle(line, server.dispatch)
        for a in answers:
            stdout.write(rpc.dumps(a))
        stdout.flush()
        for a in answers:
            for one in (a if isinstance(a, list) else [a]):
                err = one.get("error")
                log.write(f"app-server: id={'set' if one.get('id') is not None else 'null'} "
                          f"{'error ' + str(err['code']) if err else 'ok'}\n")
        log.flush()
    return 0


def main() -> int:
    return serve(sys.stdin.buffer, sys.stdout.buffer, sys.stderr)
