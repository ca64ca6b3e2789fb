"""Peer conformance: ``deletion-vectors.json`` (the peer's ``ContextMemoryKernel`` with
``InMemoryMemoryPort``: proposeMemory, decideMemory, deleteMemory, reconcile, recallMemory).

Each case builds :class:`kernel.memory.service.MemoryKernel` over the in-memory memory
port with the README's test doubles (:mod:`shadow.memory_methods`: commit failures,
projection and scripted purge ports, the content port, a fixed per-step clock,
prefixed uuids, the authority registry) and compares, per step: the value (receipts
byte for byte, digests included) or the error's code, message and details,
``uuidsConsumed``, ``purgeCalls``, ``storeRevision`` and ``recordStates``; per case the
final port state (records, events, reconciliations, store revision, content objects).

Recall steps run the recall pipeline (:func:`kernel.memory.recall.recall_memory`, peer
profile) over the same port: deleted and purged records never come back, and
``memoryRevision`` is the store's.

Documented difference (``tests/vectors/peer/KNOWN_DIFFERENCES.md``, "memory"): KD-1 —
a step whose input holds a sorted set (tags, allowedSinks, supersedes,
parentDigests) of two or more strings with non-ASCII text is refused with
``non_portable_value``; the test asserts that outcome at that step, and then replays
the case with ASCII stand-ins for those entries and compares everything but set order
and digests (:mod:`tests.peer.memory_kd1`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kernel.adapters.in_memory.memory_store import InMemoryMemoryPort
from kernel.adapters.sqlite.memory_store import SqliteMemoryPort
from kernel.errors import KernelError
from kernel.memory.recall import recall_memory
from kernel.memory.service import MemoryKernel
from kernel.ports import MemoryPort
from shadow.compaction_harness import ScriptedIds
from shadow.memory_methods import (
    FailingCommits,
    FixedClock,
    PeerContentPort,
    ProjectionPurgePort,
    authority_registry,
    purge_ports,
    record_states,
)
from tests.conftest import peer_cases, require_case
from tests.peer.memory_kd1 import kd1_non_portable_collation, kd1_substitute, mask

FILE = "deletion-vectors.json"
pytestmark = pytest.mark.peer


def peer_recall(port: MemoryPort, request: Mapping[str, Any]) -> Mapping[str, Any]:
    """The recall pipeline's peer profile over the port (admitted scopes only)."""
    return recall_memory(port, request, profile="peer").result


Store = InMemoryMemoryPort | SqliteMemoryPort


class Harness:
    def __init__(self, case: dict[str, Any], memory: Store | None = None) -> None:
        spec, ports = case["kernel"], case["ports"]
        self.clock = FixedClock()
        self.ids = ScriptedIds(spec["uuidPrefix"])
        self.log: list[dict[str, Any]] = []
        self.memory: Store = memory if memory is not None else InMemoryMemoryPort()
        self.memory.seed(ports.get("memorySeed") or ())
        self.port = FailingCommits(self.memory, ports.get("failCommitCalls") or ())
        self.content: PeerContentPort | None = None
        self.content_refs: list[dict[str, Any]] = []
        if ports.get("content"):
            self.content = PeerContentPort(self.log)
            for obj in ports.get("contentObjects") or ():
                self.content_refs.append(self.content.put(obj["content"], obj["policy"]))
        self.purge_ports = purge_ports(ports.get("purgePorts") or (), self.log)
        self.registry, self.writer = authority_registry(spec.get("authority"), self.clock)
        self.mode = spec["mode"]
        self.kernel = self.new_kernel()

    def new_kernel(self) -> MemoryKernel:
        return MemoryKernel(
            memory_port=self.port,
            clock=self.clock,
            new_id=self.ids,
            content_port=self.content,
            purge_ports=self.purge_ports,
            authority_registry=self.registry,
            writer=self.writer,
            mode=self.mode,
            recall=peer_recall,
        )

    def step(self, step: dict[str, Any]) -> Any:
        op = step["op"]
        if op == "proposeMemory":
            return self.kernel.propose_memory(copy.deepcopy(step["request"]))
        if op == "decideMemory":
            return self.kernel.decide_memory(copy.deepcopy(step["command"]))
        if op == "deleteMemory":
            return self.kernel.delete_memory(copy.deepcopy(step["request"]))
        if op == "reconcile":
            return self.kernel.reconcile(step["operationId"])
        if op == "recallMemory":
            return self.kernel.recall_memory(copy.deepcopy(step["request"]))
        if op == "setProjectionFailure":
            port = next(p for p in self.purge_ports if p.name == step["port"])
            assert isinstance(port, ProjectionPurgePort)
            port.fail_with(step["error"])
        elif op == "restartKernel":
            self.kernel = self.new_kernel()
        elif op == "dropRecord":
            self.memory.drop(step["memoryId"])
        elif op == "replaceRecord":
            self.memory.restore(step["record"])
        else:  # pragma: no cover - a new op in a future vector file
            raise AssertionError(f"unknown op {op}")
        return None


def run_case(
    case: dict[str, Any], memory: Store | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any] | None, int]:
    """Results per step (stopping at a KD-1 step), the final state, and the KD-1 step."""
    h = Harness(case, memory)
    results: list[dict[str, Any]] = []
    for index, step in enumerate(case["steps"]):
        if "now" in step:
            h.clock.set(step["now"])
        ids_before, calls_before = len(h.ids.issued), len(h.log)
        result: dict[str, Any]
        try:
            value = h.step(step)
            result = {"ok": True} if value is None else {"ok": True, "value": value}
        except KernelError as exc:
            if exc.code == "non_portable_value":
                assert kd1_non_portable_collation(step), f"non_portable_value outside KD-1: {exc}"
                return results, None, index
            result = {
                "ok": False,
                "error": {"code": exc.code, "message": exc.message, "details": exc.details},
            }
        result.update(
            uuidsConsumed=h.ids.issued[ids_before:],
            purgeCalls=h.log[calls_before:],
            storeRevision=h.memory.store_revision(),
            recordStates=record_states(h.memory),
        )
        results.append(result)
    after = {
        "records": h.memory.records(),
        "events": h.memory.events(),
        "reconciliations": h.memory.reconciliations(),
        "storeRevision": h.memory.store_revision(),
        "contentObjectIds": sorted(h.content.objects) if h.content is not None else None,
    }
    assert h.content_refs == case["contentRefs"]
    return results, after, -1


def _expected(result: dict[str, Any]) -> dict[str, Any]:
    out = dict(result)
    if out.get("ok") and out.get("value") is None:
        out.pop("value", None)
    return out


@pytest.mark.parametrize("case", peer_cases(FILE))
def test_deletion_vector(case: dict[str, Any] | None) -> None:
    case = require_case(case, FILE)
    check_case(case, *run_case(case))


@pytest.mark.parametrize("case", peer_cases(FILE))
def test_deletion_vector_on_sqlite(case: dict[str, Any] | None, tmp_path: Path) -> None:
    """The same vectors over the SQLite MemoryPort (named like the peer's store)."""
    case = require_case(case, FILE)
    store = SqliteMemoryPort(tmp_path / "memory.sqlite3", name="in-memory-authority")
    try:
        if kd1_non_portable_collation(case["steps"]):
            check_structure(case, store)
        else:
            check_case(case, *run_case(case, store))
    finally:
        store.close()


def check_case(
    case: dict[str, Any],
    results: list[dict[str, Any]],
    after: dict[str, Any] | None,
    kd1_step: int,
) -> None:
    for index, (got, expected) in enumerate(zip(results, case["results"], strict=False)):
        assert got == _expected(expected), (
            f"{case['id']} step {index} ({case['steps'][index]['op']})"
        )
    if kd1_step >= 0:  # KD-1: documented outcome, the rest of the case depends on it
        assert len(results) == kd1_step
        return
    assert len(results) == len(case["results"])
    expected_after = dict(case["after"])
    assert after is not None
    assert sorted(r["memoryId"] for r in after["records"]) == sorted(
        r["memoryId"] for r in expected_after["records"]
    )
    assert {r["memoryId"]: r for r in after["records"]} == {
        r["memoryId"]: r for r in expected_after["records"]
    }
    assert after["events"] == expected_after["events"]
    assert after["reconciliations"] == expected_after["reconciliations"]
    assert after["storeRevision"] == expected_after["storeRevision"]
    assert after["contentObjectIds"] == expected_after["contentObjectIds"]


@pytest.mark.parametrize("case", peer_cases(FILE))
def test_deletion_vector_kd1_structure(case: dict[str, Any] | None) -> None:
    """KD-1 cases, replayed with ASCII stand-ins: equal up to set order and digests."""
    case = require_case(case, FILE)
    if kd1_non_portable_collation(case["steps"]):
        check_structure(case)


def check_structure(case: dict[str, Any], memory: Store | None = None) -> None:
    replay = kd1_substitute(case)
    results, after, kd1_step = run_case(replay, memory)
    assert kd1_step == -1
    for index, (got, expected) in enumerate(zip(results, replay["results"], strict=True)):
        assert mask(got) == mask(_expected(expected)), f"{case['id']} step {index}"
    assert after is not None
    expected_after = replay["after"]
    assert mask(sorted(after["records"], key=lambda r: r["memoryId"])) == mask(
        sorted(expected_after["records"], key=lambda r: r["memoryId"])
    )
    for key in ("events", "reconciliations", "storeRevision", "contentObjectIds"):
        assert mask(after[key]) == mask(expected_after[key]), key


def test_deletion_vector_counts() -> None:
    """Every case runs; KD-1 stops exactly the cases its predicate names."""
    cases = [c.values[0] for c in peer_cases(FILE)]
    require_case(cases[0], FILE)
    stopped = [c["id"] for c in cases if run_case(c)[2] >= 0]
    predicted = [c["id"] for c in cases if kd1_non_portable_collation(c["steps"])]
    assert stopped == predicted
