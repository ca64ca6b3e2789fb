"""One conformance suite for every MemoryPort adapter (``kernel.ports``).

Example tests pin the protocol (CAS, store revision, scope listing, change feed,
events, reconciliations, the conflict relation); a hypothesis ``RuleBasedStateMachine``
drives each adapter and a twenty-line reference model with the same random commits —
fresh, stale and duplicate — and conflict entries, and compares them after every step
(as hypothesis's own ``test_database_agreement.py`` runs one machine over several
databases).
"""

from __future__ import annotations

import contextlib
import copy
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kernel.adapters.in_memory.memory_store import InMemoryMemoryPort
from kernel.adapters.in_memory.projection import InMemoryProjectionStore
from kernel.adapters.sqlite.memory_store import SqliteMemoryPort
from kernel.errors import InvalidArgument
from kernel.memory.conflicts import record_conflict
from kernel.memory.lifecycle import COMMAND_TARGETS, TRANSITIONS, apply_memory_command
from kernel.memory.service import MemoryKernel
from kernel.ports import MemoryCommit, MemoryPort, PurgePort
from tests.kernel.test_memory_lifecycle import Clock, Ids, make

Factory = Callable[[Path], MemoryPort]
ADAPTERS: dict[str, Factory] = {
    "memory": lambda path: InMemoryMemoryPort(),
    "sqlite": lambda path: SqliteMemoryPort(path / "memory.sqlite3"),
}


@pytest.fixture(params=sorted(ADAPTERS))
def port(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryPort]:
    adapter = ADAPTERS[request.param](tmp_path)
    yield adapter
    adapter.close()  # type: ignore[attr-defined]


def event_for(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "eventId": f"e-{record['memoryId']}-{record['revision']}",
        "memoryId": record["memoryId"],
        "revision": record["revision"],
    }


def propose(port: MemoryPort, memory_id: str, **kw: Any) -> Any:
    record = make(memoryId=memory_id, **kw)
    return port.commit(MemoryCommit(record, event_for(record)), 0)


def advance(record: dict[str, Any], kind: str = "activate") -> dict[str, Any]:
    command: dict[str, Any] = {"type": kind, "expectedRevision": record["revision"]}
    if kind in ("delete", "purge"):
        command["deletionFence"] = "f-1"
    if kind == "supersede":
        command["successorMemoryId"] = "mem-z"
    return apply_memory_command(record, command, clock=Clock(), new_id=Ids()).record


def test_protocols_are_satisfied(port: MemoryPort) -> None:
    assert isinstance(port, MemoryPort)
    assert isinstance(_Purge(), PurgePort)


class _Purge:
    name = "index"

    def purge(self, request: Any) -> Any:
        return {"status": "purged"}


def test_cas_commit(port: MemoryPort) -> None:
    assert port.store_revision() == 0 and port.read("mem-1") is None
    first = propose(port, "mem-1")
    assert (first.ok, first.revision, first.store_revision) == (True, 1, 1)
    duplicate = propose(port, "mem-1")
    assert (duplicate.ok, duplicate.current_revision, duplicate.store_revision) == (False, 1, 1)
    record = port.read("mem-1")
    assert record is not None
    nxt = advance(record)
    stale = port.commit(MemoryCommit(nxt, event_for(nxt)), 0)
    assert not stale.ok and port.read("mem-1") == record  # a lost CAS writes nothing
    done = port.commit(MemoryCommit(nxt, event_for(nxt), {"requestId": "r-1", "state": "x"}), 1)
    assert (done.ok, done.store_revision) == (True, 2)
    assert port.read("mem-1") == nxt
    assert port.get_reconciliation("r-1") == {"requestId": "r-1", "state": "x"}
    assert [e["revision"] for e in port.events("mem-1")] == [1, 2]


def test_events_are_listed_under_the_record_they_were_committed_with(port: MemoryPort) -> None:
    record = make(memoryId="mem-1")
    assert port.commit(MemoryCommit(record, {"eventId": "e-1"}), 0).ok  # names no memoryId
    other = make(memoryId="mem-2")
    assert port.commit(MemoryCommit(other, {"eventId": "e-2", "memoryId": "mem-1"}), 0).ok
    assert [e["eventId"] for e in port.events("mem-1")] == ["e-1"]
    assert [e["eventId"] for e in port.events("mem-2")] == ["e-2"]
    assert [e["eventId"] for e in port.events()] == ["e-1", "e-2"]


def test_the_store_name_is_the_one_a_deletion_receipt_names(port: MemoryPort) -> None:
    assert isinstance(port.name, str) and port.name
    record = make(memoryId="mem-1", scope="user", scopeId="user-1", activate=True)
    assert port.commit(MemoryCommit(record, event_for(record)), 0).ok
    index = InMemoryProjectionStore("index")
    index.put(record, ("tokens",))
    counter = iter(range(1, 100))
    kernel = MemoryKernel(memory_port=port, clock=lambda: 1_787_227_200_000,
                          new_id=lambda: f"id-{next(counter)}", purge_ports=[index])  # fmt: skip
    receipt = kernel.delete_memory({
        "requestId": "del-1", "subject": "user-1", "scope": "user", "scopeId": "user-1",
        "selector": "memory:mem-1", "memoryId": "mem-1", "expectedRevision": 1,
        "fence": "fence-1", "authority": "privacy.officer",
    })  # fmt: skip
    assert receipt["status"] == "purged"
    assert [s["store"] for s in receipt["stores"]] == [port.name, "index"]
    assert "mem-1" not in index
    stored = port.read("mem-1")
    assert stored is not None and stored["state"] == "purged"


def test_commit_refuses_revision_jumps(port: MemoryPort) -> None:
    propose(port, "mem-1")
    record = port.read("mem-1")
    assert record is not None
    jumped = advance(advance(record), "reinforce")
    with pytest.raises(InvalidArgument):
        port.commit(MemoryCommit(jumped, event_for(jumped)), 1)
    assert port.store_revision() == 1


def test_scope_listing_never_crosses_scopes(port: MemoryPort) -> None:
    propose(port, "mem-a", scope="project", scopeId="p-1")
    propose(port, "mem-b", scope="project", scopeId="p-2")
    propose(port, "mem-c", scope="global", scopeId=None)
    propose(port, "mem-d", scope="project", scopeId="p-1", activate=True)
    assert [r["memoryId"] for r in port.list_scope("project", "p-1")] == ["mem-a", "mem-d"]
    assert [r["memoryId"] for r in port.list_scope("project", "p-1", frozenset({"active"}))] == [
        "mem-d"
    ]
    assert [r["memoryId"] for r in port.list_scope("global", None)] == ["mem-c"]
    assert port.list_scope("user", "p-1") == []


def test_change_feed_and_values_are_copies(port: MemoryPort) -> None:
    propose(port, "mem-a")
    propose(port, "mem-b")
    record = port.read("mem-a")
    assert record is not None
    record["content"] = "mutated by the caller"
    assert port.read("mem-a") != record
    changes = port.changes(0)
    assert [(rev, r["memoryId"]) for rev, r in changes] == [(1, "mem-a"), (2, "mem-b")]
    assert port.changes(1) == changes[1:]


@pytest.mark.parametrize(
    "bad",
    [float("nan"), float("inf"), {1: "a non-string key"}, {"x": object()}, b"bytes"],
    ids=["nan", "inf", "int-key", "object", "bytes"],
)
def test_every_store_refuses_a_value_that_is_not_json_alike(port: MemoryPort, bad: Any) -> None:
    """An event, an operation or a conflict entry holding a non-JSON value is refused with
    ``invalid_argument`` by every adapter before anything is written (the in-memory port
    once kept NaN and tuples, SQLite refused them with a bare ``ValueError``)."""
    assert propose(port, "mem-j").ok
    record = port.read("mem-j")
    assert record is not None
    revision = port.store_revision()
    with pytest.raises(InvalidArgument):
        port.commit(MemoryCommit(advance(record), {"eventId": "e-j", "v": bad}), 1)
    with pytest.raises(InvalidArgument):
        port.put_reconciliation({"requestId": "r-j", "v": bad})
    assert port.store_revision() == revision and port.get_reconciliation("r-j") is None
    assert port.read("mem-j") == record


def test_every_store_gives_back_json_values(port: MemoryPort) -> None:
    """A tuple is stored as a JSON array and comes back as a list, from every adapter."""
    port.put_reconciliation({"requestId": "r-t", "pair": (1, 2), "nested": {"t": ("a",)}})
    assert port.get_reconciliation("r-t") == {
        "requestId": "r-t", "pair": [1, 2], "nested": {"t": ["a"]}
    }


def test_sqlite_is_durable_and_cas_holds_across_connections(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite3"
    a, b = SqliteMemoryPort(path), SqliteMemoryPort(path)
    try:
        propose(a, "mem-1")
        ra, rb = a.read("mem-1"), b.read("mem-1")
        assert ra == rb and ra is not None and rb is not None
        first = a.commit(MemoryCommit(advance(ra), event_for(advance(ra))), 1)
        second = b.commit(MemoryCommit(advance(rb, "delete"), {"eventId": "x"}), 1)
        assert first.ok and not second.ok and second.current_revision == 2
        a.put_reconciliation({"requestId": "r-1", "state": "purge_pending"})
    finally:
        a.close()
        b.close()
    reopened = SqliteMemoryPort(path)
    try:
        assert reopened.store_revision() == 2
        assert reopened.read("mem-1") is not None
        assert reopened.reconciliations() == {"r-1": {"requestId": "r-1", "state": "purge_pending"}}
    finally:
        reopened.close()


def conflict_entry(first: str, second: str, operation: str = "op-1") -> dict[str, Any]:
    """A conflict entry as the kernel writes it (the port stores it as given)."""
    a, b = make(memoryId=first, activate=True), make(memoryId=second, activate=True)
    return record_conflict(a, b, at="2026-08-30T00:00:00.000Z", operation_id=operation).to_wire()


def test_conflict_relation_is_append_only_and_indexed_by_member(port: MemoryPort) -> None:
    propose(port, "mem-a")
    ab, bc = conflict_entry("mem-a", "mem-b"), conflict_entry("mem-b", "mem-c")
    assert port.put_conflict(ab) and port.put_conflict(bc)
    assert not port.put_conflict(conflict_entry("mem-b", "mem-a", "op-2"))  # the first stays
    assert port.store_revision() == 1 and port.changes(1) == []  # no record changed
    expected = sorted([ab, bc], key=lambda c: c["conflictId"])
    assert port.conflicts() == expected
    assert port.conflicts_of(["mem-b"]) == expected  # each entry once
    assert port.conflicts_of(["mem-a", "mem-c", "mem-a"]) == expected
    assert port.conflicts_of(["mem-c"]) == [bc] and port.conflicts_of(["mem-x"]) == []
    assert port.conflicts_of([]) == []
    many = [f"mem-{i:04d}" for i in range(1000)]  # more ids than one SQL statement holds
    assert port.conflicts_of([*many, "mem-a"]) == [ab]
    got = port.conflicts_of(["mem-a"])[0]
    got["memoryIds"].append("mutated by the caller")
    assert port.conflicts_of(["mem-a"]) == [ab]


def test_sqlite_keeps_conflicts_and_adds_the_table_to_an_older_store(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    SqliteMemoryPort(path).close()
    with contextlib.closing(sqlite3.connect(path)) as conn:  # a store from before the relation
        conn.executescript(
            "DROP TABLE conflicts; DROP INDEX IF EXISTS conflicts_memory_a; "
            "DROP INDEX IF EXISTS conflicts_memory_b;"
        )
    older = SqliteMemoryPort(path)
    try:
        propose(older, "mem-a")
        assert older.conflicts() == [] and older.put_conflict(conflict_entry("mem-a", "mem-b"))
    finally:
        older.close()
    reopened = SqliteMemoryPort(path)
    try:
        assert reopened.conflicts() == [conflict_entry("mem-a", "mem-b")]
        assert reopened.conflicts_of(["mem-b"]) == reopened.conflicts()
        assert reopened.store_revision() == 1
    finally:
        reopened.close()


# --------------------------------------------------------------------------- the machine

IDS = ("mem-a", "mem-b", "mem-c")
SCOPES = (("project", "p-1"), ("project", "p-2"), ("global", None))
KINDS = sorted(COMMAND_TARGETS)


class Model:
    """The reference: what a MemoryPort must hold."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.reconciliations: dict[str, dict[str, Any]] = {}
        self.changes: list[tuple[int, dict[str, Any]]] = []
        self.conflicts: dict[str, dict[str, Any]] = {}  # append-only, first entry stays

    def put_conflict(self, conflict: dict[str, Any]) -> bool:
        if conflict["conflictId"] in self.conflicts:
            return False
        self.conflicts[conflict["conflictId"]] = copy.deepcopy(conflict)
        return True

    def commit(self, record: dict[str, Any], event: dict[str, Any], expected: int) -> bool:
        current = self.records.get(record["memoryId"])
        if (current["revision"] if current else 0) != expected:
            return False
        self.records[record["memoryId"]] = copy.deepcopy(record)
        self.events.append(copy.deepcopy(event))
        self.changes.append((len(self.changes) + 1, copy.deepcopy(record)))
        return True


class PortAgreement(RuleBasedStateMachine):
    adapter = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="memport-"))
        self.port = ADAPTERS[self.adapter](self.dir)
        self.model = Model()

    def teardown(self) -> None:
        self.port.close()  # type: ignore[attr-defined]
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(memory_id=st.sampled_from(IDS), scope=st.sampled_from(SCOPES), active=st.booleans())
    def propose(self, memory_id: str, scope: tuple[str, str | None], active: bool) -> None:
        record = make(memoryId=memory_id, scope=scope[0], scopeId=scope[1], activate=active)
        event = event_for(record)
        result = self.port.commit(MemoryCommit(record, event), 0)
        assert result.ok == self.model.commit(record, event, 0)

    @precondition(lambda self: bool(self.model.records))
    @rule(data=st.data(), kind=st.sampled_from(KINDS), stale=st.booleans())
    def command(self, data: st.DataObject, kind: str, stale: bool) -> None:
        memory_id = data.draw(st.sampled_from(sorted(self.model.records)))
        current = self.model.records[memory_id]
        if COMMAND_TARGETS[kind] not in TRANSITIONS[current["state"]]:
            return
        if kind == "purge" and current.get("deletionFence") != "f-1":
            return
        record = advance(current, kind)
        event = event_for(record)
        expected = current["revision"] - 1 if stale else current["revision"]
        result = self.port.commit(MemoryCommit(record, event), expected)
        assert result.ok == self.model.commit(record, event, expected)
        assert result.store_revision == len(self.model.changes)

    @rule(request_id=st.sampled_from(("r-1", "r-2")), state=st.sampled_from(("a", "b")))
    def reconciliation(self, request_id: str, state: str) -> None:
        operation = {"requestId": request_id, "state": state, "stores": [{"store": "x"}]}
        self.port.put_reconciliation(operation)
        self.model.reconciliations[request_id] = operation

    @rule(
        pair=st.lists(st.sampled_from(IDS), min_size=2, max_size=2, unique=True),
        operation=st.sampled_from(("op-1", "op-2")),
    )
    def conflict(self, pair: list[str], operation: str) -> None:
        entry = conflict_entry(pair[0], pair[1], operation)
        assert self.port.put_conflict(entry) == self.model.put_conflict(entry)

    @precondition(lambda self: self.adapter == "sqlite")
    @rule()
    def reopen(self) -> None:
        self.port.close()  # type: ignore[attr-defined]
        self.port = ADAPTERS[self.adapter](self.dir)

    @invariant()
    def agrees(self) -> None:
        self.check(self.port)

    def check(self, port: MemoryPort) -> None:
        model = self.model
        assert port.store_revision() == len(model.changes)
        assert port.records() == [model.records[k] for k in sorted(model.records)]
        assert port.events() == model.events
        assert port.reconciliations() == model.reconciliations
        assert port.changes(0) == model.changes
        for scope, scope_id in SCOPES:
            assert port.list_scope(scope, scope_id) == [
                r
                for _, r in sorted(model.records.items())
                if (r["scope"], r.get("scopeId")) == (scope, scope_id)
            ]
        for memory_id in IDS:
            assert port.read(memory_id) == model.records.get(memory_id)
            assert port.conflicts_of([memory_id]) == [
                c for _, c in sorted(model.conflicts.items()) if memory_id in c["memoryIds"]
            ]
        assert port.conflicts() == [c for _, c in sorted(model.conflicts.items())]


_SETTINGS = settings(
    max_examples=50,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class MemoryAdapterAgreement(PortAgreement):
    adapter = "memory"


class SqliteAdapterAgreement(PortAgreement):
    adapter = "sqlite"


class SqliteReadOnlyAgreement(PortAgreement):
    """A read-only port on the same file (what ``recall_memory`` opens), kept open across
    the writer's commits and reopens, reads what the model holds after every step."""

    adapter = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.reader = SqliteMemoryPort(self.dir / "memory.sqlite3", read_only=True)

    def teardown(self) -> None:
        self.reader.close()
        super().teardown()

    @invariant()
    def reader_agrees(self) -> None:
        self.check(self.reader)


MemoryAdapterAgreement.TestCase.settings = _SETTINGS
SqliteAdapterAgreement.TestCase.settings = _SETTINGS
SqliteReadOnlyAgreement.TestCase.settings = _SETTINGS
TestMemoryAdapterAgreement = MemoryAdapterAgreement.TestCase
TestSqliteAdapterAgreement = SqliteAdapterAgreement.TestCase
TestSqliteReadOnlyAgreement = SqliteReadOnlyAgreement.TestCase
