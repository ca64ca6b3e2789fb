"""``shadow kernel call`` memory methods (``shadow.memory_methods``): stateless calls that
carry their store, chained through ``memoryAfter``; SQLite stores opened by path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import shadow.memory_methods  # noqa: F401  (registers the methods)
from kernel.adapters.sqlite_memory import SqliteMemoryPort
from shadow.kernel_rpc import call

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
