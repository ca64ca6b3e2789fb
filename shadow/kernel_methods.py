"""Kernel methods exposed through ``shadow kernel call|batch`` beyond ``digest``.

``plan_context`` takes a plan vector's ``request`` verbatim.  ``compact_context``
and ``reconcile`` carry the state a stateless JSON call needs: either a session
seed (the in-memory port of the peer's compaction vectors, restorable from a
previous call's ``sessionAfter``) or a ``sessionStore`` (a SQLite database or
legacy JSONL transcripts on disk, opened by this shell), plus the injected
clock, ids and a scripted summarizer.  The format is documented, with examples,
in ``docs/kernel-rpc.md``; kernel errors become ``{"error": …}`` in
``kernel_rpc``, and compaction errors also carry ``compactionLifecycle``.

``reconcile`` serves both operations that have one: params carrying memory state
(``memory`` / ``memoryStore``) resume a memory deletion
(:func:`shadow.memory_methods.reconcile_memory`); otherwise it settles a compaction.
"""

from __future__ import annotations

import contextlib
import copy
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from kernel.canonical.digest import Profile
from kernel.compaction.service import CompactionKernel
from kernel.errors import KernelError
from kernel.planning.planner import plan_context
from kernel.ports import SessionContextPort, SummarizerFailure, SummaryCancelled
from shadow import bootstrap
from shadow.compaction_harness import (
    ScriptedClock,
    ScriptedIds,
    ScriptedSummarizer,
    seeded_port,
    session_after,
)
from shadow.errors import InputError
from shadow.kernel_rpc import register

_COMPACT_FIELDS: Final = frozenset(
    {"session", "sessionStore", "request", "summarizer", "clock", "uuidPrefix", "uuidStart",
     "mode", "profile", "port"}
)
_RECONCILE_FIELDS: Final = frozenset(
    {"session", "sessionStore", "operationId", "mode", "profile"}
)


class CompactionCallError(KernelError):
    """A kernel error raised by a compaction call, re-raised with what the caller
    needs: the lifecycle the kernel attached and the ids/clock calls consumed."""

    def __init__(self, record: Mapping[str, Any], trace: Mapping[str, Any]) -> None:
        super().__init__(
            str(record["message"]), code=str(record["code"]), details=record.get("details")
        )
        self.lifecycle = record.get("compactionLifecycle")
        self.trace = dict(trace)

    def to_wire(self) -> dict[str, Any]:
        wire = super().to_wire()
        if self.lifecycle is not None:
            wire["compactionLifecycle"] = self.lifecycle
        wire.update(self.trace)
        return wire


# ----------------------------------------------------------------------------- parsing


def _where(method: str) -> str:
    return f"<{method} params>"


def _object(value: Any, method: str, pointer: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(_where(method), pointer, "a JSON object", type(value).__name__)
    return value


def _string(value: Any, method: str, pointer: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(_where(method), pointer, "a non-empty string", type(value).__name__)
    return value


def _only(params: dict[str, Any], allowed: frozenset[str], method: str) -> None:
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise InputError(_where(method), f"/{unknown[0]}", f"only {sorted(allowed)}",
                         "an unknown field")


def _profile(params: dict[str, Any], method: str) -> Profile:
    value = params.get("profile", "peer")
    if value == "peer":
        return "peer"
    if value == "jcs":
        return "jcs"
    raise InputError(_where(method), "/profile", '"peer" or "jcs"', repr(value))


def _mode(params: dict[str, Any], method: str) -> str:
    value = params.get("mode", "canonical")
    if value not in ("canonical", "shadow"):
        raise InputError(_where(method), "/mode", '"canonical" or "shadow"', repr(value))
    return str(value)


def _seed(value: Any, method: str) -> dict[str, Any]:
    seed = _object(value, method, "/session")
    _string(seed.get("sessionId"), method, "/session/sessionId")
    _string(seed.get("head"), method, "/session/head")
    revision = seed.get("memoryRevision", 0)
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise InputError(_where(method), "/session/memoryRevision", "an integer >= 0",
                         type(revision).__name__)
    for key in ("items", "events", "reconciliations"):
        entries = seed.get(key, [])
        if not isinstance(entries, list):
            raise InputError(_where(method), f"/session/{key}", "an array",
                             type(entries).__name__)
        for index, entry in enumerate(entries):
            _object(entry, method, f"/session/{key}/{index}")
    return {**seed, "memoryRevision": revision, "items": seed.get("items", [])}


def _clock(params: dict[str, Any], method: str) -> Callable[[], int]:
    if "clock" not in params:
        return lambda: time.time_ns() // 1_000_000
    spec = _object(params["clock"], method, "/clock")
    try:
        return ScriptedClock(spec)
    except (KeyError, TypeError, ValueError, KernelError):
        raise InputError(
            _where(method), "/clock",
            '{"mode":"fixed","now"} or {"mode":"tick","start","stepMs"} with RFC 3339 times',
            "an invalid clock",
        ) from None


def _ids(params: dict[str, Any], method: str) -> Callable[[], str]:
    if "uuidPrefix" not in params:
        return lambda: str(uuid.uuid4())
    prefix = _string(params["uuidPrefix"], method, "/uuidPrefix")
    start = params.get("uuidStart", 1)
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise InputError(_where(method), "/uuidStart", "an integer >= 0", repr(start))
    return ScriptedIds(prefix, start)


def _summarizer(value: Any, log: list[dict[str, Any]], method: str) -> Any:
    if value is None:
        return None
    spec = _object(value, method, "/summarizer")
    kind = spec.get("kind")
    if kind == "return" and "output" in spec:
        return ScriptedSummarizer(spec, log)
    if kind == "throw":
        error = _object(spec.get("error"), method, "/summarizer/error")
        _string(error.get("message"), method, "/summarizer/error/message")
        return ScriptedSummarizer(spec, log)
    if kind == "cancel":
        def cancelled(dropped: Any, context: Any) -> Any:
            ScriptedSummarizer({"kind": "return", "output": None}, log)(dropped, context)
            raise SummaryCancelled("summary cancelled by the caller")

        return cancelled
    raise InputError(_where(method), "/summarizer",
                     'null, {"kind":"return","output"}, {"kind":"throw","error"} or '
                     '{"kind":"cancel"}', "an invalid summarizer")


@contextlib.contextmanager
def _store(
    params: dict[str, Any], method: str, profile: Profile, advance_to: str | None,
    read_only: bool = False,
) -> Iterator[tuple[SessionContextPort, str | None]]:
    """The port a call runs on and the session id it was seeded with (if any);
    ``read_only``: the call only reads sessions (a store is opened read-only)."""
    has_seed, has_store = "session" in params, "sessionStore" in params
    if has_seed == has_store:
        raise InputError(_where(method), "",
                         "exactly one of session, sessionStore"
                         + (" (or memory / memoryStore: a memory deletion)"
                            if method == "reconcile" else ""),
                         "both" if has_seed else "neither")
    if has_seed:
        seed = _seed(params["session"], method)
        yield seeded_port(seed, advance_to=advance_to, profile=profile), seed["sessionId"]
        return
    if advance_to is not None:
        raise InputError(_where(method), "/port", "no port double with a sessionStore",
                         "advanceHeadAfterRead")
    spec = _object(params["sessionStore"], method, "/sessionStore")
    _only(spec, frozenset({"type", "path"}), method)
    path = Path(_string(spec.get("path"), method, "/sessionStore/path"))
    if spec.get("type") == "sqlite":
        if not path.is_file():
            raise InputError(_where(method), "/sessionStore/path",
                             "an existing SQLite session store", "no such file")
        with bootstrap.session_store("sqlite", path, profile, read_only=read_only) as sqlite:
            yield sqlite, None
    elif spec.get("type") == "jsonl":
        root = path.parent if path.suffix == ".jsonl" else path
        if not root.is_dir():
            raise InputError(_where(method), "/sessionStore/path",
                             "a directory of <sessionId>.jsonl transcripts or one of them",
                             "no such directory")
        with bootstrap.session_store("jsonl", root, profile, read_only=read_only) as jsonl:
            yield jsonl, None
    else:
        raise InputError(_where(method), "/sessionStore/type", '"sqlite" or "jsonl"',
                         repr(spec.get("type")))


def _error(exc: BaseException, trace: dict[str, Any]) -> CompactionCallError:
    """A thrown compaction error as a typed wire error (peer ``code: null`` errors,
    i.e. a summarizer's own failure, become ``summarizer_failed``; a cancel ``cancelled``)."""
    record: dict[str, Any]
    if isinstance(exc, KernelError):
        record = {"code": exc.code, "message": exc.message, "details": exc.details}
    elif isinstance(exc, SummarizerFailure):
        record = {"code": exc.code or "summarizer_failed", "message": str(exc)}
    elif isinstance(exc, SummaryCancelled):
        record = {"code": "cancelled", "message": str(exc)}
    else:
        raise exc
    record["compactionLifecycle"] = getattr(exc, "compaction_lifecycle", None)
    return CompactionCallError(record, trace)


# ----------------------------------------------------------------------------- methods


def _plan_context(params: Any) -> Any:
    # the kernel validates the request itself (invalid_argument, as the peer)
    return plan_context(params)


def _compact_context(params: Any) -> dict[str, Any]:
    method = "compact_context"
    p = _object(params, method, "")
    _only(p, _COMPACT_FIELDS, method)
    request = copy.deepcopy(_object(p.get("request"), method, "/request"))
    profile, mode = _profile(p, method), _mode(p, method)
    port_spec = _object(p.get("port", {}), method, "/port")
    _only(port_spec, frozenset({"advanceHeadAfterRead"}), method)
    advance_to = port_spec.get("advanceHeadAfterRead")
    if advance_to is not None:
        _string(advance_to, method, "/port/advanceHeadAfterRead")
    clock, ids = _clock(p, method), _ids(p, method)
    log: list[dict[str, Any]] = []
    summarizer = _summarizer(p.get("summarizer"), log, method)
    if summarizer is not None:
        request["summarizer"] = summarizer
    counted_clock = _Counted(clock)
    issued: list[str] = []

    def new_id() -> str:
        issued.append(ids())
        return issued[-1]

    with _store(p, method, profile, advance_to) as (port, seeded_id):
        kernel = CompactionKernel(port, clock=counted_clock, new_id=new_id, mode=mode,
                                  profile=profile)
        try:
            receipt = kernel.compact_context(request)
        except Exception as exc:
            trace = {"uuidsConsumed": issued, "clockCalls": counted_clock.calls,
                     "summarizerCalls": log}
            raise _error(exc, trace) from exc
        session_id = seeded_id or str(receipt.get("sessionId"))
        return {
            "receipt": receipt,
            "sessionAfter": session_after(port, session_id),
            "uuidsConsumed": issued,
            "clockCalls": counted_clock.calls,
            "summarizerCalls": log,
        }


def _reconcile(params: Any) -> dict[str, Any]:
    method = "reconcile"
    from shadow import memory_methods  # the memory side of ``reconcile``

    if memory_methods.carries_memory_state(params):
        both = sorted({"session", "sessionStore", "profile"} & set(params))
        if both:
            raise InputError(_where(method), f"/{both[0]}",
                             "memory deletion params (memory or memoryStore) without "
                             "compaction params", "both")
        return memory_methods.reconcile_memory(params)
    p = _object(params, method, "")
    _only(p, _RECONCILE_FIELDS, method)
    if "operationId" not in p:
        raise InputError(_where(method), "/operationId", "an operation id", "nothing")
    profile, mode = _profile(p, method), _mode(p, method)
    with _store(p, method, profile, None, read_only=True) as (port, seeded_id):  # reads only
        kernel = CompactionKernel(port, clock=_no_clock, new_id=_no_id, mode=mode,
                                  profile=profile)
        try:
            receipt = kernel.reconcile(p["operationId"])
        except KernelError as exc:
            raise _error(exc, {}) from exc
        session_id = seeded_id or receipt.get("sessionId")
        after = session_after(port, session_id) if isinstance(session_id, str) else None
        return {"receipt": receipt, "sessionAfter": after}


class _Counted:
    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.clock()


def _no_clock() -> int:  # reconcile reads no clock (asserted by the peer vectors)
    raise RuntimeError("reconcile must not read the clock")


def _no_id() -> str:
    raise RuntimeError("reconcile must not draw ids")


register("plan_context", _plan_context)
register("compact_context", _compact_context)
register("reconcile", _reconcile)
