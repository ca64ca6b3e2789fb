"""Memory methods of ``shadow kernel call|batch`` and the test doubles they share with
the peer conformance tests (``deletion-vectors.json`` README).

Methods (registered in :mod:`shadow.kernel_rpc`): ``recall_memory``,
``propose_memory``, ``decide_memory``, ``resolve_memory_conflict``
(``MemoryKernel.resolve_supersession``), ``delete_memory`` and ``reconcile_memory`` —
also reachable as ``reconcile``, which :mod:`shadow.kernel_methods` hands over here
whenever its params carry memory state (``memory`` / ``memoryStore``,
:func:`carries_memory_state`).  A JSON call is stateless, so each request carries the
state it runs on, as the vectors' harness does (format and examples in
``docs/memory.md`` and ``docs/kernel-rpc.md``):

``memory``
    the in-memory store: ``{records, events, reconciliations, storeRevision,
    conflicts?}`` (a previous call's ``memoryAfter``; absent = empty), **or** ``memoryStore``
    ``{"type": "sqlite", "path"}`` — an existing SQLite memory store opened here;
``request`` / ``command`` / ``operationId``
    the kernel call's own argument, verbatim;
``now``, ``uuidPrefix``, ``uuidStart``
    the injected clock (fixed ISO time; default: wall clock) and ids
    (``<prefix>-<k:03d>``; default: uuid4);
``mode``, ``authority``
    ``canonical`` (default) or ``shadow``; ``{bindings, writer}`` for the
    authority registry;
``purgePorts``, ``content``
    the copies a deletion purges: ``{"type":"projection","name","failWith"?}`` and
    ``{"type":"scripted","name","responses"}`` doubles; ``{"objects": [{content,
    policy}]}`` puts objects into a content store first.

Each answers ``{value, memoryAfter, uuidsConsumed, purgeCalls, recordStates}``.

``recall_memory`` reads only: ``{memory | memoryStore, request, profile?, index?, mode?}``
→ ``{value, path, degraded}`` where ``value`` is the peer's ``MemoryRecallResult`` plus
``memoryRevision`` (``MemoryKernel.recall_memory``).  A ``memory`` seed is loaded into a
read-only store whose records are checked as ``rankMemoryRecords`` checks them
(:func:`kernel.memory.recall.normalize_recall_record`).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, cast

from kernel.canonical.timestamps import iso_to_epoch_ms
from kernel.memory.conflicts import parse_conflict
from kernel.memory.recall import (
    RecallProfile,
    RecordIndex,
    build_index,
    normalize_recall_record,
    recall_memory,
)
from kernel.memory.service import AuthorityRegistry, MemoryKernel
from kernel.ports import (
    CommitResult,
    ContentPort,
    ContentRef,
    MemoryCommit,
    MemoryPort,
    PurgePort,
    json_copy,
)
from shadow import bootstrap
from shadow.compaction_harness import ScriptedIds
from shadow.errors import InputError
from shadow.kernel_rpc import register

START: Final = "2026-08-29T00:00:00.000Z"

# ----------------------------------------------------------------------------- doubles


class FixedClock:
    """A clock fixed per step (``set`` moves it); counts its calls."""

    def __init__(self, now: str = START) -> None:
        self.now = iso_to_epoch_ms(now)
        self.calls = 0

    def set(self, now: str) -> None:
        self.now = iso_to_epoch_ms(now)

    def __call__(self) -> int:
        self.calls += 1
        return self.now


class PurgeFailure(Exception):
    """What a failing purge double throws (``code`` is what the receipt records)."""

    def __init__(self, message: str, code: Any = None) -> None:
        super().__init__(message)
        self.code = code


CallLog = list[dict[str, Any]]


class ProjectionPurgePort:
    """The peer's ``InMemoryProjectionPurgePort``: purges; ``fail_with`` makes the next
    purge throw."""

    def __init__(self, name: str, log: CallLog | None = None) -> None:
        self.name = name
        self.purged: dict[str, str] = {}
        self.failure: Mapping[str, Any] | None = None
        self.log = log if log is not None else []

    def fail_with(self, error: Mapping[str, Any]) -> None:
        self.failure = dict(error)

    def purge(self, request: Mapping[str, Any]) -> Any:
        self.log.append({"port": self.name, "request": copy.deepcopy(dict(request))})
        if self.failure is not None:
            error, self.failure = self.failure, None
            raise PurgeFailure(str(error.get("message", "")), error.get("code"))
        self.purged[str(request["memoryId"])] = str(request["fence"])
        return {
            "store": self.name,
            "status": "purged",
            "memoryId": request["memoryId"],
            "fence": request["fence"],
        }


class ScriptedPurgePort:
    """Call n answers ``responses[min(n, last)]``: ``{"return": X}`` or ``{"throw": {...}}``."""

    def __init__(
        self, name: str, responses: Sequence[Mapping[str, Any]], log: CallLog | None = None
    ) -> None:
        self.name = name
        self.responses = [dict(r) for r in responses]
        self.calls = 0
        self.log = log if log is not None else []

    def purge(self, request: Mapping[str, Any]) -> Any:
        self.log.append({"port": self.name, "request": copy.deepcopy(dict(request))})
        response = self.responses[min(self.calls, len(self.responses) - 1)]
        self.calls += 1
        if "throw" in response:
            error = response["throw"]
            raise PurgeFailure(str(error.get("message", "")), error.get("code"))
        return copy.deepcopy(response.get("return"))


class PeerContentPort:
    """The peer's ``InMemoryContentPort`` (object ids from the policy; purge receipts
    ``{store, status, objectId, fence, existed}``), logging purges as ``content``."""

    store = "in-memory-content"

    def __init__(self, log: CallLog | None = None) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.log = log if log is not None else []

    def put(self, content: str | bytes, policy: Mapping[str, Any]) -> dict[str, Any]:
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        object_id = str(policy.get("objectId") or digest[7:39])
        ref: dict[str, Any] = {
            "store": self.store,
            "objectId": object_id,
            "digest": digest,
            "byteLength": len(data),
        }
        if policy.get("mimeType"):
            ref["mimeType"] = policy["mimeType"]
        ref["summary"] = policy.get("summary") or "Stored content"
        ref["recoverable"] = True
        if policy.get("accessPolicy"):
            ref["accessPolicy"] = policy["accessPolicy"]
        self.objects[object_id] = {"bytes": data, "ref": ref}
        return copy.deepcopy(ref)

    def get(self, ref: ContentRef, access: Any) -> bytes:
        return bytes(self.objects[ref.object_id]["bytes"])

    def purge(self, ref: ContentRef, fence: str) -> dict[str, Any]:
        self.log.append({"port": "content", "request": {"ref": ref.to_wire(), "fence": fence}})
        existed = self.objects.pop(ref.object_id, None) is not None
        return {
            "store": self.store,
            "status": "purged",
            "objectId": ref.object_id,
            "fence": fence,
            "existed": existed,
        }


class FailingCommits:
    """A MemoryPort whose n-th ``commit`` calls (1-based, every commit counted) answer
    ``ok=False`` without writing."""

    def __init__(self, port: MemoryPort, fail_calls: Sequence[int] = ()) -> None:
        self.port = port
        self.fail_calls = frozenset(fail_calls)
        self.commits = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.port, name)

    @property
    def name(self) -> str:
        return self.port.name

    def commit(self, commit: MemoryCommit, expected_revision: int) -> CommitResult:
        self.commits += 1
        if self.commits in self.fail_calls:
            current = self.port.read(str(commit.record["memoryId"]))
            return CommitResult(
                False,
                self.port.store_revision(),
                current_revision=current["revision"] if current else 0,
            )
        return self.port.commit(commit, expected_revision)


def purge_ports(specs: Sequence[Mapping[str, Any]], log: CallLog) -> list[PurgePort]:
    ports: list[PurgePort] = []
    for spec in specs:
        if spec.get("type") == "projection":
            port = ProjectionPurgePort(str(spec["name"]), log)
            if spec.get("failWith") is not None:
                port.fail_with(spec["failWith"])
            ports.append(port)
        elif spec.get("type") == "scripted":
            ports.append(ScriptedPurgePort(str(spec["name"]), spec["responses"], log))
        else:
            raise ValueError(f"unknown purge port type {spec.get('type')!r}")
    return ports


def record_states(port: MemoryPort) -> dict[str, dict[str, Any]]:
    return {
        r["memoryId"]: {"state": r["state"], "revision": r["revision"], "digest": r["digest"]}
        for r in port.records()
    }


def memory_after(port: MemoryPort, content: PeerContentPort | None = None) -> dict[str, Any]:
    """The store in the vectors' ``after`` shape (also a valid ``memory`` for the next call),
    plus ``conflicts`` (the conflict relation) when it holds any entry."""
    after: dict[str, Any] = {
        "records": port.records(),
        "events": port.events(),
        "reconciliations": port.reconciliations(),
        "storeRevision": port.store_revision(),
        "contentObjectIds": sorted(content.objects) if content is not None else [],
    }
    conflicts = port.conflicts()
    if conflicts:
        after["conflicts"] = conflicts
    return after


def authority_registry(
    spec: Mapping[str, Any] | None, clock: Callable[[], int]
) -> tuple[AuthorityRegistry | None, Mapping[str, Any] | None]:
    if spec is None:
        return None, None
    registry = AuthorityRegistry(clock)
    for binding in spec.get("bindings") or ():
        registry.bind(binding)
    return registry, spec.get("writer")


class RecallSnapshotPort:
    """A read-only MemoryPort over a ``memory`` seed (``{records, storeRevision?,
    conflicts?}``) for ``recall_memory``: records checked as ``rankMemoryRecords`` checks
    them, conflict entries as the kernel checks them (digest re-verified), then copied out
    on every read; any write is refused."""

    def __init__(self, snapshot: Mapping[str, Any], *, name: str = "in-memory-authority"):
        records = [normalize_recall_record(r) for r in snapshot.get("records") or ()]
        self._name = name
        self._records = {r["memoryId"]: r for r in records}
        conflicts = [parse_conflict(c).to_wire() for c in snapshot.get("conflicts") or ()]
        self._conflicts = {c["conflictId"]: c for c in conflicts}
        revision = snapshot.get("storeRevision", len(self._records))
        if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
            raise InputError("<recall_memory params>", "/memory/storeRevision",
                             "an integer >= 0", type(revision).__name__)
        self._revision = revision

    @property
    def name(self) -> str:
        return self._name

    def read(self, memory_id: str) -> dict[str, Any] | None:
        record = self._records.get(memory_id)
        return json_copy(record) if record is not None else None

    def commit(self, commit: MemoryCommit, expected_revision: int) -> CommitResult:
        raise InputError("<recall_memory params>", "", "a read-only recall", "a write")

    def store_revision(self) -> int:
        return self._revision

    def list_scope(
        self, scope: str, scope_id: str | None, states: frozenset[str] | None = None
    ) -> list[dict[str, Any]]:
        return [
            json_copy(r)
            for _, r in sorted(self._records.items())
            if r["scope"] == scope
            and r.get("scopeId") == scope_id
            and (states is None or r["state"] in states)
        ]

    def records(self) -> list[dict[str, Any]]:
        return [json_copy(r) for _, r in sorted(self._records.items())]

    def changes(self, since: int = 0) -> list[tuple[int, dict[str, Any]]]:
        return []  # the seed summarises history; an index is built from records()

    def events(self, memory_id: str | None = None) -> list[dict[str, Any]]:
        return []

    def get_reconciliation(self, request_id: str) -> dict[str, Any] | None:
        return None

    def put_reconciliation(self, operation: Mapping[str, Any]) -> None:
        raise InputError("<recall_memory params>", "", "a read-only recall", "a write")

    def reconciliations(self) -> dict[str, dict[str, Any]]:
        return {}

    def put_conflict(self, conflict: Mapping[str, Any]) -> bool:
        raise InputError("<recall_memory params>", "", "a read-only recall", "a write")

    def conflicts_of(self, memory_ids: Iterable[str]) -> list[dict[str, Any]]:
        wanted = set(memory_ids)
        return [
            json_copy(c)
            for _, c in sorted(self._conflicts.items())
            if not wanted.isdisjoint(c["memoryIds"])
        ]

    def conflicts(self) -> list[dict[str, Any]]:
        return [json_copy(c) for _, c in sorted(self._conflicts.items())]


# ----------------------------------------------------------------------------- methods

_MEMORY_STATE: Final = frozenset({"memory", "memoryStore"})


def carries_memory_state(params: Any) -> bool:
    """``reconcile`` params meant for memory deletion (they hold ``memory`` or
    ``memoryStore``) rather than for compaction (``session`` / ``sessionStore``)."""
    return isinstance(params, dict) and not _MEMORY_STATE.isdisjoint(params)


_COMMON: Final = frozenset(
    {
        "memory",
        "memoryStore",
        "now",
        "uuidPrefix",
        "uuidStart",
        "mode",
        "authority",
        "purgePorts",
        "content",
    }
)
_ARGUMENT: Final = {
    "propose_memory": "request",
    "decide_memory": "command",
    "delete_memory": "request",
    "reconcile_memory": "operationId",
    "resolve_memory_conflict": "request",
}


def _fail(method: str, pointer: str, expected: str, got: Any) -> InputError:
    return InputError(f"<{method} params>", pointer, expected, type(got).__name__)


@contextlib.contextmanager
def _store(p: Mapping[str, Any], method: str, read_only: bool = False) -> Iterator[MemoryPort]:
    if "memory" in p and "memoryStore" in p:
        raise InputError(f"<{method} params>", "", "at most one of memory, memoryStore", "both")
    if "memoryStore" in p:
        spec = p["memoryStore"]
        if (
            not isinstance(spec, dict)
            or spec.get("type") != "sqlite"
            or not isinstance(spec.get("path"), str)
        ):
            raise _fail(method, "/memoryStore", '{"type":"sqlite","path"}', spec)
        path = Path(spec["path"])
        if not path.is_file():
            raise InputError(
                f"<{method} params>",
                "/memoryStore/path",
                "an existing SQLite memory store",
                "no such file",
            )
        with bootstrap.memory_store(path, read_only=read_only) as sqlite:  # a read: no write
            yield sqlite
        return
    memory = p.get("memory", {})
    if not isinstance(memory, dict):
        raise _fail(method, "/memory", "a JSON object", memory)
    yield bootstrap.seeded_memory(memory)


_RECALL_FIELDS: Final = frozenset({"memory", "memoryStore", "request", "profile", "index", "mode"})


def _recall(params: Any) -> dict[str, Any]:
    """``recall_memory``: the recall pipeline over the seeded or opened store."""
    method = "recall_memory"
    if not isinstance(params, dict):
        raise _fail(method, "", "a JSON object", params)
    unknown = sorted(set(params) - _RECALL_FIELDS)
    if unknown:
        raise InputError(
            f"<{method} params>", f"/{unknown[0]}", f"only {sorted(_RECALL_FIELDS)}",
            "an unknown field",
        )
    if "request" not in params:
        raise InputError(f"<{method} params>", "/request", "a MemoryRecallRequest", "nothing")
    profile: RecallProfile
    if params.get("profile", "peer") == "peer":
        profile = "peer"
    elif params["profile"] == "canonical":
        profile = "canonical"
    else:
        raise InputError(f"<{method} params>", "/profile", '"peer" or "canonical"',
                         repr(params["profile"]))
    use_index = params.get("index", False)
    if not isinstance(use_index, bool):
        raise _fail(method, "/index", "a boolean", use_index)
    if "memory" in params and "memoryStore" not in params:
        memory = params["memory"]
        if not isinstance(memory, dict):
            raise _fail(method, "/memory", "a JSON object", memory)
        seeded: contextlib.AbstractContextManager[MemoryPort] = contextlib.nullcontext(
            RecallSnapshotPort(memory)
        )
    else:
        seeded = _store(params, method, read_only=True)
    with seeded as port:
        outcome: list[Any] = []

        def run(store: MemoryPort, request: Mapping[str, Any]) -> Mapping[str, Any]:
            holder = None
            if use_index:  # the analyzer of the profile: the peer's, or the kernel's own
                holder = RecordIndex(
                    profile, build_index(store.records(), profile, store.store_revision())
                )
            result = recall_memory(store, request, index=holder, profile=profile)
            outcome.append(result)
            return result.result

        kernel = MemoryKernel(
            memory_port=port,
            clock=_no_clock,
            new_id=_no_id,
            mode=str(params.get("mode", "canonical")),
            recall=run,
        )
        value = kernel.recall_memory(copy.deepcopy(params["request"]))
        degraded = outcome[-1].degraded
        return {
            "value": value,
            "path": outcome[-1].path,
            "degraded": None if degraded is None else degraded.to_wire(),
        }


def _no_clock() -> int:  # recall reads no clock: the request carries ``now``
    raise RuntimeError("recall_memory must not read the clock")


def _no_id() -> str:
    raise RuntimeError("recall_memory must not draw ids")


def reconcile_memory(params: Any) -> dict[str, Any]:
    """``reconcile`` / ``reconcile_memory``: resume a memory deletion by its request id."""
    return _call("reconcile_memory", params)


def _call(method: str, params: Any) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise _fail(method, "", "a JSON object", params)
    argument = _ARGUMENT[method]
    unknown = sorted(set(params) - _COMMON - {argument})
    if unknown:
        raise InputError(
            f"<{method} params>", f"/{unknown[0]}", "a known field", "an unknown field"
        )
    if argument not in params:
        raise InputError(f"<{method} params>", f"/{argument}", "a value", "nothing")
    now = params.get("now")
    if now is not None and not isinstance(now, str):
        raise _fail(method, "/now", "an ISO timestamp", now)
    clock: Callable[[], int] = FixedClock(now) if now else (lambda: time.time_ns() // 1_000_000)
    ids: Callable[[], str]
    issued: list[str] = []
    if "uuidPrefix" in params:
        scripted = ScriptedIds(str(params["uuidPrefix"]), int(params.get("uuidStart", 1)))
        ids = scripted
        issued = scripted.issued
    else:

        def ids() -> str:
            issued.append(str(uuid.uuid4()))
            return issued[-1]

    log: CallLog = []
    specs = params.get("purgePorts", [])
    if not isinstance(specs, list):
        raise _fail(method, "/purgePorts", "an array", specs)
    content = None
    if params.get("content") is not None:
        content = PeerContentPort(log)
        for obj in params["content"].get("objects") or ():
            content.put(obj["content"], obj.get("policy") or {})
    registry, writer = authority_registry(params.get("authority"), clock)
    with _store(params, method) as port:
        kernel = MemoryKernel(
            memory_port=port,
            clock=clock,
            new_id=ids,
            # the peer's content port speaks the peer's wire (dict receipts), which the
            # kernel only forwards into its own receipts: structurally, not nominally, a
            # ContentPort — said here instead of silenced
            content_port=cast("ContentPort | None", content),
            purge_ports=purge_ports(specs, log),
            authority_registry=registry,
            writer=writer,
            mode=str(params.get("mode", "canonical")),
        )
        action = {
            "propose_memory": kernel.propose_memory,
            "decide_memory": kernel.decide_memory,
            "delete_memory": kernel.delete_memory,
            "reconcile_memory": kernel.reconcile,
            "resolve_memory_conflict": kernel.resolve_supersession,
        }[method]
        value = action(copy.deepcopy(params[argument]))
        return {
            "value": value,
            "memoryAfter": memory_after(port, content),
            "uuidsConsumed": list(issued),
            "purgeCalls": log,
            "recordStates": record_states(port),
        }


def _method(name: str) -> Callable[[Any], dict[str, Any]]:
    def run(params: Any) -> dict[str, Any]:
        return _call(name, params)

    run.__name__ = name
    return run


for _name in _ARGUMENT:
    register(_name, _method(_name))
register("recall_memory", _recall)

__all__ = [
    "FailingCommits",
    "FixedClock",
    "PeerContentPort",
    "ProjectionPurgePort",
    "PurgeFailure",
    "RecallSnapshotPort",
    "ScriptedPurgePort",
    "authority_registry",
    "carries_memory_state",
    "memory_after",
    "purge_ports",
    "reconcile_memory",
    "record_states",
]
