"""``shadow kernel call`` memory methods (``shadow.memory_methods``): stateless calls that
carry their store, chained through ``memoryAfter``; SQLite stores opened by path.

The issue's names — ``recall_memory``, ``propose_memory``, ``decide_memory``,
``delete_memory``, ``reconcile`` — replay the peer's recall and deletion vectors through
``kernel_rpc.call`` alone, and ``recall_memory`` also as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import shadow.memory_methods  # noqa: F401  (registers the methods)
from kernel.adapters.sqlite.memory_store import SqliteMemoryPort
from shadow.kernel_rpc import call
from shadow.memory_methods import PeerContentPort
from tests.conftest import load_peer_vectors, peer_cases, require_case

PROPOSAL: dict[str, Any] = {
    "memoryId": "mem-1",
    "scope": "user",
    "scopeId": "user-1",
    "category": "preference",
    "content": "Prefers pnpm",
    "provenance": {"source": "explicit-user-memory", "observedAt": "2026-08-28T00:00:00Z"},
    "evidenceRefs": [{"store": "session-log", "id": "ev-1"}],
    "confidence": 0.8,
    "importance": 0.5,
    "sensitivity": "internal",
    "allowedSinks": ["cli"],
    "retentionPolicy": {"mode": "durable"},
    "activate": True,
}
DELETE = {
    "requestId": "del-1",
    "subject": "user-1",
    "scope": "user",
    "scopeId": "user-1",
    "selector": "memory:mem-1",
    "memoryId": "mem-1",
    "expectedRevision": 2,
    "fence": "fence-1",
    "authority": "user-1",
}


def test_chained_calls_delete_partially_then_reconcile() -> None:
    first = call(
        "propose_memory", {"request": PROPOSAL, "now": "2026-08-29T00:00:00Z", "uuidPrefix": "t"}
    )["result"]
    assert first["uuidsConsumed"] == ["t-001"] and first["value"]["receipt"]["storeRevision"] == 1
    second = call(
        "decide_memory",
        {
            "memory": first["memoryAfter"],
            "uuidPrefix": "t",
            "uuidStart": 2,
            "now": "2026-08-29T00:01:00Z",
            "command": {"memoryId": "mem-1", "type": "reinforce", "expectedRevision": 1},
        },
    )["result"]
    assert second["recordStates"]["mem-1"]["state"] == "reinforced"
    ports = [
        {
            "type": "projection",
            "name": "search-index",
            "failWith": {"message": "offline", "code": "index_offline"},
        }
    ]
    third = call(
        "delete_memory",
        {
            "memory": second["memoryAfter"],
            "request": DELETE,
            "purgePorts": ports,
            "uuidPrefix": "t",
            "uuidStart": 3,
            "now": "2026-08-29T00:02:00Z",
        },
    )["result"]
    assert third["value"]["status"] == "partial"
    assert third["purgeCalls"][0]["port"] == "search-index"
    fourth = call(
        "reconcile_memory",
        {
            "memory": third["memoryAfter"],
            "operationId": "del-1",
            "purgePorts": [{"type": "projection", "name": "search-index"}],
            "uuidPrefix": "t",
            "uuidStart": 4,
            "now": "2026-08-29T00:03:00Z",
        },
    )["result"]
    assert fourth["value"]["status"] == "purged"
    assert fourth["recordStates"]["mem-1"]["state"] == "purged"


def test_errors_are_typed_values() -> None:
    fenced = call("propose_memory", {"request": PROPOSAL, "mode": "shadow"})
    assert fenced["error"]["code"] == "legacy_writer_fenced"
    bad = call("delete_memory", {"request": {**DELETE, "selector": "memory:*"}})
    assert bad["error"]["code"] == "invalid_argument"
    unknown = call("reconcile_memory", {"operationId": "x", "extra": 1})
    assert unknown["error"]["code"] == "invalid_input"


def test_sqlite_store_by_path(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    SqliteMemoryPort(path).close()
    spec = {"type": "sqlite", "path": str(path)}
    call("propose_memory", {"memoryStore": spec, "request": PROPOSAL})
    out = call(
        "delete_memory", {"memoryStore": spec, "request": {**DELETE, "expectedRevision": 1}}
    )["result"]
    assert out["value"]["status"] == "purged"
    port = SqliteMemoryPort(path)
    try:
        assert port.read("mem-1")["state"] == "purged"
    finally:
        port.close()
    again = call("reconcile", {"memoryStore": spec, "operationId": "del-1"})["result"]
    assert again["value"] == out["value"]  # the sealed receipt, from the store on disk


# --- the method names over the peer vectors ---------------------------------------

RECALL = "recall-vectors.json"
DELETION = "deletion-vectors.json"


def _recall_case_params(case: dict[str, Any], **extra: Any) -> dict[str, Any]:
    records = load_peer_vectors(RECALL)["record_sets"][case["record_set"]]
    return {"memory": {"records": records}, "request": case["request"], **extra}


def _kd_r2(case: dict[str, Any]) -> bool:
    """KD-R2 (KNOWN_DIFFERENCES.md, "recall"): the peer threw a JavaScript TypeError."""
    error = case.get("error") or {}
    return error.get("code") is None and error.get("jsException") == "TypeError"


def _recall_cases() -> list[Any]:
    return [c for c in peer_cases(RECALL) if c.values[0] is None or not _kd_r2(c.values[0])]


@pytest.mark.parametrize("case", _recall_cases())
def test_recall_memory_reproduces_the_recall_vectors(case: dict[str, Any] | None) -> None:
    """``recall_memory`` over a seeded store gives the peer's MemoryRecallResult (plus the
    store's ``memoryRevision``), or the peer's error, by scan and by index alike."""
    case = require_case(case, RECALL)
    records = load_peer_vectors(RECALL)["record_sets"][case["record_set"]]
    for use_index in (False, True):
        out = call("recall_memory", _recall_case_params(case, index=use_index))
        if "error" in case:
            assert out == {"error": {"code": case["error"]["code"],
                                     "message": case["error"]["message"],
                                     "details": case["error"]["details"]}}
            continue
        got = out["result"]
        assert got["path"] == ("index" if use_index else "scan") and got["degraded"] is None
        value = dict(got["value"])
        assert value.pop("memoryRevision") == len(records)
        assert value == case["result"]


def test_recall_memory_on_a_sqlite_store_and_its_contract(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    SqliteMemoryPort(path).close()
    spec = {"type": "sqlite", "path": str(path)}
    call("propose_memory", {"memoryStore": spec, "request": PROPOSAL})
    request = {"query": "pnpm", "sink": "cli", "limit": 5, "now": "2026-09-01T00:00:00Z",
               "scopeAdmissions": [{"scope": "user", "scopeId": "user-1"}]}
    out = call("recall_memory", {"memoryStore": spec, "request": request})["result"]
    assert [h["memoryId"] for h in out["value"]["results"]] == ["mem-1"]
    assert out["value"]["memoryRevision"] == 1
    canonical = call("recall_memory", {"memoryStore": spec, "request": request,
                                       "profile": "canonical", "index": True})["result"]
    assert canonical["path"] == "index"
    assert [h["memoryId"] for h in canonical["value"]["results"]] == ["mem-1"]
    other = {**request, "scopeAdmissions": [{"scope": "user", "scopeId": "user-2"}]}
    assert call("recall_memory", {"memoryStore": spec, "request": other})["result"][
        "value"]["results"] == []  # another scope's memory never comes back
    for bad, pointer in (({"request": request, "now": "x"}, "/now"),
                         ({"request": request, "profile": "fast"}, "/profile"),
                         ({"request": request, "index": "yes"}, "/index"),
                         ({}, "/request")):
        error = call("recall_memory", bad)["error"]
        assert (error["code"], error["details"]["pointer"]) == ("invalid_input", pointer)


# --- resolve_memory_conflict: an unresolved conflict is kept and recall shows it ------------

CONFLICT_RECALL: dict[str, Any] = {
    "query": "prefers",
    "sink": "cli",
    "scopeAdmissions": [{"scope": "user", "scopeId": "user-1"}],
    "now": "2026-09-01T00:00:00Z",
}


def _conflicts_shown(params: dict[str, Any]) -> dict[str, Any]:
    """``memoryId → conflictsWith`` of a canonical recall, scan and index alike."""
    scan = call("recall_memory", {**params, "request": CONFLICT_RECALL, "profile": "canonical"})
    indexed = call(
        "recall_memory",
        {**params, "request": CONFLICT_RECALL, "profile": "canonical", "index": True},
    )
    assert scan["result"]["value"] == indexed["result"]["value"]
    return {h["memoryId"]: h.get("conflictsWith") for h in scan["result"]["value"]["results"]}


def test_resolve_memory_conflict_then_recall_shows_it() -> None:
    stamp = {"now": "2026-08-29T00:00:00Z", "uuidPrefix": "t"}
    first = call("propose_memory", {"request": PROPOSAL, **stamp})["result"]
    second = call(
        "propose_memory",
        {"memory": first["memoryAfter"], "uuidStart": 2, **stamp,
         "request": {**PROPOSAL, "memoryId": "mem-2", "content": "Prefers npm"}},
    )["result"]  # fmt: skip
    assert "conflicts" not in second["memoryAfter"]  # absent until there is one
    resolved = call(
        "resolve_memory_conflict",
        {"memory": second["memoryAfter"], "now": "2026-08-30T00:00:00Z",
         "request": {"memoryIds": ["mem-2", "mem-1"], "operationId": "op-1"}},
    )["result"]  # fmt: skip
    value = resolved["value"]
    assert value["decision"] == {"outcome": "conflict", "rule": "unresolved"}
    assert value["recorded"] is True and value["conflict"]["memoryIds"] == ["mem-1", "mem-2"]
    assert value["conflict"]["recordedAt"] == "2026-08-30T00:00:00.000Z"
    after = resolved["memoryAfter"]
    assert after["conflicts"] == [value["conflict"]]
    assert after["storeRevision"] == second["memoryAfter"]["storeRevision"]
    assert {k: v["state"] for k, v in resolved["recordStates"].items()} == {
        "mem-1": "active",
        "mem-2": "active",
    }
    assert _conflicts_shown({"memory": after}) == {"mem-1": ["mem-2"], "mem-2": ["mem-1"]}
    peer = call("recall_memory", {"memory": after, "request": CONFLICT_RECALL})["result"]
    assert all("conflictsWith" not in h for h in peer["value"]["results"])  # peer-exact

    corrected = call(
        "resolve_memory_conflict",
        {"memory": after, "now": "2026-08-31T00:00:00Z", "uuidPrefix": "u",
         "request": {"memoryIds": ["mem-1", "mem-2"], "userCorrection": "mem-2",
                     "operationId": "op-2"}},
    )["result"]  # fmt: skip
    assert corrected["value"]["decision"]["rule"] == "user_correction"
    assert corrected["value"]["superseded"]["record"]["memoryId"] == "mem-1"
    assert corrected["recordStates"]["mem-1"]["state"] == "superseded"
    assert corrected["uuidsConsumed"] == ["u-001"]  # the supersede event's id
    assert corrected["memoryAfter"]["conflicts"] == after["conflicts"]  # append-only
    assert _conflicts_shown({"memory": corrected["memoryAfter"]}) == {"mem-2": None}

    tampered = {**after, "conflicts": [{**after["conflicts"][0], "operationId": "op-9"}]}
    error = call("recall_memory", {"memory": tampered, "request": CONFLICT_RECALL})["error"]
    assert error["code"] == "digest_mismatch"
    bad = call("resolve_memory_conflict", {"memory": after, "request": {"memoryIds": []}})
    assert bad["error"]["code"] == "invalid_argument"


def test_resolve_memory_conflict_on_a_sqlite_store(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    SqliteMemoryPort(path).close()
    spec = {"type": "sqlite", "path": str(path)}
    other = {**PROPOSAL, "memoryId": "mem-2", "content": "Prefers npm"}
    for proposal in (PROPOSAL, other):
        call("propose_memory", {"memoryStore": spec, "request": proposal})
    out = call(
        "resolve_memory_conflict",
        {"memoryStore": spec, "request": {"memoryIds": ["mem-1", "mem-2"]}},
    )["result"]
    assert out["value"]["recorded"] is True
    port = SqliteMemoryPort(path)  # a new connection: the relation is on disk
    try:
        assert port.conflicts() == [out["value"]["conflict"]]
    finally:
        port.close()
    assert _conflicts_shown({"memoryStore": spec}) == {"mem-1": ["mem-2"], "mem-2": ["mem-1"]}


class _Replay:
    """A deletion vector replayed through ``kernel_rpc.call`` alone: one stateless call
    per step, each seeded with the previous ``memoryAfter``; the harness-only steps
    (projection failures, dropped or restored records) become call parameters."""

    def __init__(self, case: dict[str, Any]) -> None:
        ports, kernel = case["ports"], case["kernel"]
        seed = ports.get("memorySeed") or []
        self.memory: dict[str, Any] = {"records": seed, "events": [], "reconciliations": {},
                                       "storeRevision": len(seed)}
        self.prefix, self.issued = kernel["uuidPrefix"], 0
        self.common: dict[str, Any] = {"mode": kernel["mode"]}
        if kernel.get("authority"):
            self.common["authority"] = kernel["authority"]
        self.specs = [dict(p) for p in ports.get("purgePorts") or ()]
        self.scripted_calls = {p["name"]: 0 for p in self.specs if p["type"] == "scripted"}
        self.failures: dict[str, Any] = {}
        self.objects = list(ports.get("contentObjects") or ()) if ports.get("content") else None
        self.now: str | None = None

    def _ports(self) -> list[dict[str, Any]]:
        out = []
        for spec in self.specs:
            spec = dict(spec)
            if spec["type"] == "scripted":
                responses = spec["responses"]
                spec["responses"] = responses[min(self.scripted_calls[spec["name"]],
                                                  len(responses) - 1):]
            elif spec["name"] in self.failures:
                spec["failWith"] = self.failures[spec["name"]]
            out.append(spec)
        return out

    def step(self, step: dict[str, Any]) -> dict[str, Any] | None:
        op = step["op"]
        self.now = step.get("now", self.now)
        if op == "setProjectionFailure":
            self.failures[step["port"]] = step["error"]
            return None
        if op == "dropRecord":
            self.memory["records"] = [
                r for r in self.memory["records"] if r["memoryId"] != step["memoryId"]
            ]
            return None
        if op == "replaceRecord":
            self.memory["records"] = [
                r for r in self.memory["records"] if r["memoryId"] != step["record"]["memoryId"]
            ] + [step["record"]]
            return None
        if op == "restartKernel":  # every call is a fresh kernel anyway
            return None
        if op == "recallMemory":
            out = call("recall_memory", {"memory": self.memory, "request": step["request"]})
            return {"result": {"value": out["result"]["value"], "memoryAfter": self.memory,
                               "uuidsConsumed": [], "purgeCalls": []}} if "result" in out else out
        method, argument = {
            "proposeMemory": ("propose_memory", "request"),
            "decideMemory": ("decide_memory", "command"),
            "deleteMemory": ("delete_memory", "request"),
            "reconcile": ("reconcile", "operationId"),
        }[op]
        params = {**self.common, "memory": self.memory, argument: step[argument],
                  "uuidPrefix": self.prefix, "uuidStart": self.issued + 1,
                  "purgePorts": self._ports()}
        if self.now is not None:
            params["now"] = self.now
        if self.objects is not None:
            params["content"] = {"objects": self.objects}
        out = call(method, params)
        if "result" in out:
            result = out["result"]
            self.memory = result["memoryAfter"]
            self.issued += len(result["uuidsConsumed"])
            for purge in result["purgeCalls"]:
                self.failures.pop(purge["port"], None)
                if purge["port"] in self.scripted_calls:
                    self.scripted_calls[purge["port"]] += 1
            if self.objects is not None:
                kept = set(self.memory["contentObjectIds"])
                self.objects = [o for o in self.objects if _object_id(o) in kept]
        return out


def _object_id(obj: dict[str, Any]) -> str:
    return str(PeerContentPort().put(obj["content"], obj.get("policy") or {})["objectId"])


def _deletion_cases() -> list[Any]:
    """Every deletion vector a stateless caller can replay: not those whose store double
    fails commits (it has no wire form)."""
    return [
        c for c in peer_cases(DELETION)
        if c.values[0] is None or not c.values[0]["ports"].get("failCommitCalls")
    ]


@pytest.mark.parametrize("case", _deletion_cases())
def test_deletion_vectors_through_the_rpc(case: dict[str, Any] | None) -> None:
    """propose/decide/delete/reconcile/recall by their ``shadow kernel call`` names give
    the peer's values, ids, purge calls, store revisions and record states per step, and
    the peer's final store."""
    case = require_case(case, DELETION)
    replay = _Replay(case)
    for index, (step, expected) in enumerate(zip(case["steps"], case["results"], strict=True)):
        out = replay.step(step)
        where = f"{case['id']} step {index} ({step['op']})"
        if out is None:
            continue
        if "error" in out and out["error"]["code"] == "non_portable_value" and expected["ok"]:
            return  # KD-1 (KNOWN_DIFFERENCES.md, "memory"): refused; the rest depends on it
        if "error" in out:
            assert not expected["ok"], where
            assert out["error"] == expected["error"], where
            assert expected["uuidsConsumed"] == [] and expected["purgeCalls"] == [], where
            continue
        got = out["result"]
        assert expected["ok"], where
        assert got["value"] == expected["value"], where
        assert got["uuidsConsumed"] == expected["uuidsConsumed"], where
        assert got["purgeCalls"] == expected["purgeCalls"], where
        assert got["memoryAfter"]["storeRevision"] == expected["storeRevision"], where
        states = {r["memoryId"]: {"state": r["state"], "revision": r["revision"],
                                  "digest": r["digest"]} for r in got["memoryAfter"]["records"]}
        assert states == expected["recordStates"], where
    after = replay.memory
    expected_after = case["after"]
    assert {r["memoryId"]: r for r in after["records"]} == {
        r["memoryId"]: r for r in expected_after["records"]
    }
    assert after["events"] == expected_after["events"]
    assert after["reconciliations"] == expected_after["reconciliations"]
    assert after["storeRevision"] == expected_after["storeRevision"]


def test_reconcile_dispatches_on_memory_state() -> None:
    """``reconcile`` with memory state is ``reconcile_memory``; with a session it is the
    compaction's; both kinds at once is refused."""
    memory = {"records": [], "storeRevision": 0}
    as_reconcile = call("reconcile", {"memory": memory, "operationId": "del-x"})
    assert as_reconcile == call("reconcile_memory", {"memory": memory, "operationId": "del-x"})
    assert as_reconcile["result"]["value"] == {"operationId": "del-x", "status": "not_found"}
    session = {"sessionId": "s", "head": "h", "items": []}
    compaction = call("reconcile", {"session": session, "operationId": "op-x"})["result"]
    assert compaction["receipt"] == {"operationId": "op-x", "status": "not_found"}
    both = call("reconcile", {"memory": memory, "session": session, "operationId": "x"})
    assert both["error"]["code"] == "invalid_input"
    assert both["error"]["details"]["pointer"] == "/session"
    neither = call("reconcile", {"operationId": "x"})["error"]
    assert neither["code"] == "invalid_input" and "memoryStore" in neither["details"]["expected"]


def test_cli_recall_memory_subprocess() -> None:
    case = next(
        c for c in load_peer_vectors(RECALL)["cases"]
        if "result" in c and c["result"]["results"] and c["record_set"] == "set-zh"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "shadow", "kernel", "call", "recall_memory"],
        input=json.dumps(_recall_case_params(case)).encode(),
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    value = dict(out["value"])
    value.pop("memoryRevision")
    assert value == case["result"]
