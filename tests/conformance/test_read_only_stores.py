"""Reading a store never changes it (issue 14, "honest doubles, safe adapters").

* ``recall_memory`` — a read-only call — opens the SQLite memory store read-only: pointed
  at an unrelated SQLite file it creates no table, no ``-wal`` / ``-shm`` / ``-journal``
  file and does not switch the journal mode, even when the request itself is refused; a
  missing store, or a database without the memory schema, is ``not_found`` (the file is
  never created).
* a read of a JSONL session directory creates neither the directory nor a transcript nor
  a lock file, and a FIFO where a transcript is expected is refused at once; a JSONL store
  opened read-only refuses every write before touching the disk;
* a read of a filesystem content store creates none of its directories;
* ``reconcile`` — a read-only call — opens a SQLite session store read-only
  (``SqliteSessionPort(read_only=True)``): a missing path, an empty, non-SQLite or foreign
  SQLite file is ``not_found`` and keeps its bytes and its folder (no file, no table, no
  side file); the reader refuses every write; a session writer refuses a foreign database.

The read-only SQLite port also joins the MemoryPort agreement machine
(``tests/conformance/test_memory_ports.py``): it agrees with the model after every step.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernel.adapters.fs.content import FsContentPort
from kernel.adapters.jsonl.session import JsonlSessionPort
from kernel.adapters.sqlite.memory_store import MemoryStoreNotFound, SqliteMemoryPort
from kernel.adapters.sqlite.session import SessionStoreNotFound, SqliteSessionPort
from kernel.errors import ContentUnavailable, InvalidArgument, KernelError, StoreFailure
from kernel.memory.recall import recall_memory
from kernel.ports import AccessContext, ContentRef, MemoryCommit
from shadow.kernel_rpc import call
from tests.blocking import within
from tests.conformance.session_harness import conversation, items_for
from tests.kernel.test_memory_lifecycle import make
from tests.shadow.test_memory_methods import PROPOSAL

REQUEST: dict[str, Any] = {
    "query": "pnpm",
    "sink": "cli",
    "limit": 5,
    "now": "2026-09-01T00:00:00Z",
    "scopeAdmissions": [{"scope": "user", "scopeId": "user-1"}],
}


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _foreign(path: Path, *, wal: bool = False) -> Path:
    """An unrelated application's SQLite database: one table ``t``."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        if wal:
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x INTEGER)")
        conn.execute("INSERT INTO t VALUES (42)")
        conn.commit()
    return path


def _memory_store(path: Path) -> Path:
    """A real memory store with one active record (written, then closed)."""
    port = SqliteMemoryPort(path)
    try:
        record = make(memoryId="mem-1", scope="user", scopeId="user-1", activate=True,
                      content="Prefers pnpm", allowedSinks=["cli"])  # fmt: skip
        assert port.commit(MemoryCommit(record, {"eventId": "e-1"}), 0).ok
    finally:
        port.close()
    return path


def _refuses_each(writes: list[Callable[[], Any]]) -> None:
    for write in writes:
        with pytest.raises(InvalidArgument) as caught:
            write()
        assert caught.value.code == "store_read_only"


# --- the adapter ----------------------------------------------------------------------------


#: The SQLite stores a read-only call opens: the port and its "no such store" error.
READERS: dict[str, tuple[Callable[..., Any], type[KernelError]]] = {
    "memory": (SqliteMemoryPort, MemoryStoreNotFound),
    "session": (SqliteSessionPort, SessionStoreNotFound),
}


@pytest.mark.parametrize("store", sorted(READERS))
@pytest.mark.parametrize("wal", [False, True])
def test_a_read_only_open_of_a_foreign_database_changes_nothing(
    tmp_path: Path, wal: bool, store: str
) -> None:
    port, not_found = READERS[store]
    path = _foreign(tmp_path / "other.db", wal=wal)
    before = _listing(tmp_path)
    with pytest.raises(not_found) as caught:
        port(path, read_only=True)
    assert caught.value.code == "not_found"
    assert caught.value.details == {"reason": "no_schema"}
    assert _listing(tmp_path) == before  # same bytes, no -wal / -shm / -journal
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]


@pytest.mark.parametrize("store", sorted(READERS))
@pytest.mark.parametrize("content", [None, b"", b"not a database at all\n" * 10])
def test_a_missing_empty_or_non_sqlite_store_is_not_found(
    tmp_path: Path, content: bytes | None, store: str
) -> None:
    port, not_found = READERS[store]
    path = tmp_path / "store.sqlite3"
    if content is not None:
        path.write_bytes(content)
    before = _listing(tmp_path)
    with pytest.raises(not_found) as caught:
        port(path, read_only=True)
    assert caught.value.code == "not_found"
    assert _listing(tmp_path) == before
    assert path.exists() == (content is not None)


def test_a_read_only_port_reads_a_store_and_refuses_writes(tmp_path: Path) -> None:
    path = _memory_store(tmp_path / "memory.sqlite3")
    writer = SqliteMemoryPort(path)
    expected = (writer.records(), writer.events(), writer.changes(0), writer.store_revision())
    writer.close()
    db = path.read_bytes()
    port = SqliteMemoryPort(path, read_only=True)
    try:
        assert (port.records(), port.events(), port.changes(0), port.store_revision()) == expected
        assert port.read("mem-1") == expected[0][0]
        assert port.list_scope("user", "user-1") == expected[0]
        outcome = recall_memory(port, REQUEST, profile="peer")
        assert [h["memoryId"] for h in outcome.result["results"]] == ["mem-1"]
        record = dict(expected[0][0])
        writes: list[Callable[[], Any]] = [
            lambda: port.commit(MemoryCommit(record, {"eventId": "e-2"}), 1),
            lambda: port.seed([record]),
            lambda: port.put_reconciliation({"requestId": "r-1"}),
            lambda: port.put_conflict({"conflictId": "c", "memoryIds": ["a", "b"]}),
            lambda: port.drop("mem-1"),
            lambda: port.restore(record),
        ]
        _refuses_each(writes)
    finally:
        port.close()
    assert path.read_bytes() == db


def test_a_read_only_port_of_an_older_store_adds_no_table(tmp_path: Path) -> None:
    path = _memory_store(tmp_path / "old.sqlite3")
    with contextlib.closing(sqlite3.connect(path)) as conn:  # from before the relation
        conn.executescript("DROP TABLE conflicts;")
    db = path.read_bytes()
    port = SqliteMemoryPort(path, read_only=True)
    try:
        assert port.conflicts() == [] and port.conflicts_of(["mem-1"]) == []
        assert [r["memoryId"] for r in port.records()] == ["mem-1"]
    finally:
        port.close()
    assert path.read_bytes() == db
    with contextlib.closing(sqlite3.connect(path)) as conn:
        names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "conflicts" not in names


def test_a_read_only_port_sees_a_writers_later_commits(tmp_path: Path) -> None:
    path = _memory_store(tmp_path / "memory.sqlite3")
    reader = SqliteMemoryPort(path, read_only=True)
    writer = SqliteMemoryPort(path)
    try:
        record = make(memoryId="mem-2", scope="user", scopeId="user-1")
        assert writer.commit(MemoryCommit(record, {"eventId": "e-2"}), 0).ok
        assert reader.store_revision() == 2 and reader.read("mem-2") == writer.read("mem-2")
    finally:
        writer.close()
        reader.close()


def test_an_odd_path_is_opened_as_itself(tmp_path: Path) -> None:
    folder = tmp_path / "a dir?#%20 with ü"
    folder.mkdir()
    path = _memory_store(folder / "m?x#y%41.sqlite3")
    port = SqliteMemoryPort(path, read_only=True)  # URI quoting: never another file
    try:
        assert port.store_revision() == 1
    finally:
        port.close()
    assert sorted(p.name for p in folder.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        "m?x#y%41.sqlite3"
    ]


# --- recall_memory over the RPC -------------------------------------------------------------


@pytest.mark.parametrize(
    "request_",
    [REQUEST, {**REQUEST, "limit": "many"}],  # a valid request, and one the kernel refuses
    ids=["valid", "refused"],
)
def test_recall_memory_never_writes_into_a_foreign_database(
    tmp_path: Path, request_: dict[str, Any]
) -> None:
    path = _foreign(tmp_path / "other.db")
    before = _listing(tmp_path)
    out = call("recall_memory", {"memoryStore": {"type": "sqlite", "path": str(path)},
                                 "request": request_})  # fmt: skip
    assert out["error"]["code"] == "not_found"
    assert _listing(tmp_path) == before  # same bytes; no -wal, -shm or -journal beside it


def test_recall_memory_at_a_missing_path_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "missing.sqlite3"
    out = call("recall_memory", {"memoryStore": {"type": "sqlite", "path": str(path)},
                                 "request": REQUEST})  # fmt: skip
    assert out["error"]["code"] == "invalid_input"
    assert list(tmp_path.iterdir()) == []


def test_recall_memory_reads_a_real_store_without_changing_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    SqliteMemoryPort(path).close()
    spec = {"type": "sqlite", "path": str(path)}
    assert "result" in call("propose_memory", {"memoryStore": spec, "request": PROPOSAL})
    db = path.read_bytes()
    for params in ({}, {"profile": "canonical", "index": True}):
        out = call("recall_memory", {"memoryStore": spec, "request": REQUEST, **params})
        assert [h["memoryId"] for h in out["result"]["value"]["results"]] == ["mem-1"]
    assert path.read_bytes() == db


# --- JSONL sessions -------------------------------------------------------------------------


def test_reading_a_jsonl_session_directory_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "sessions"
    port = JsonlSessionPort(missing)
    assert port.read_snapshot("s-1") is None
    assert port.verify("s-1").status == "not-found"
    assert port.read_operation("op-1") is None
    assert port.compaction_events("s-1") == [] and port.evidence("s-1") == []
    assert not missing.exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    JsonlSessionPort(existing).read_snapshot("s-1")
    assert list(existing.iterdir()) == []  # no transcript, no lock file


def test_a_read_only_jsonl_store_refuses_every_write_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """``JsonlSessionPort(read_only=True)`` (``bootstrap.session_store(read_only=True)``)
    refuses each write before touching the disk: the transcript's bytes and the folder's
    listing are unchanged, and no lock file appears."""
    root = tmp_path / "sessions"
    writer = JsonlSessionPort(root)
    assert writer.start_session("s-1").ok
    before = _listing(root)
    reader = JsonlSessionPort(root, read_only=True)
    snapshot = reader.read_snapshot("s-1")
    assert snapshot is not None
    event = {"sessionId": "s-1", "operationId": "op-1"}
    writes: list[Callable[[], object]] = [
        lambda: reader.start_session("s-2"),
        lambda: reader.append_compaction(event, snapshot.head),
        lambda: reader.append_reconciliation(event, snapshot.head),
    ]
    for write in writes:
        with pytest.raises(InvalidArgument) as caught:
            write()
        assert caught.value.code == "store_read_only"
    assert _listing(root) == before


def test_writing_a_jsonl_session_creates_its_directory(tmp_path: Path) -> None:
    root = tmp_path / "new" / "sessions"
    port = JsonlSessionPort(root)
    assert port.start_session("s-1").ok
    assert port.read_snapshot("s-1") is not None and (root / "s-1.jsonl").is_file()


def test_a_fifo_as_a_jsonl_transcript_is_refused_at_once(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform (POSIX only)")
    fifo = tmp_path / "s-1.jsonl"
    os.mkfifo(fifo)
    port = JsonlSessionPort(tmp_path)
    for read in (lambda: port.read_snapshot("s-1"), lambda: port.read_operation("op-1")):
        with pytest.raises(StoreFailure):
            within(5.0, read, fifo)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


# --- the content store ----------------------------------------------------------------------


def test_reading_a_content_store_creates_nothing(tmp_path: Path) -> None:
    root = tmp_path / "content"
    port = FsContentPort(root)
    ref = ContentRef(store="fs-content", object_id="ab" * 32 + ".cd", digest="sha256:" + "ab" * 32,
                     byte_length=1, summary="x", recoverable=True)  # fmt: skip
    with pytest.raises(ContentUnavailable):
        port.get(ref, AccessContext(scope="session", scope_id="s1", sink="cli"))
    assert port.object_ids() == [] and list(port.blobs()) == []
    assert port.sweep_temps() == 0
    assert port.purge(ref, "fence").existed is False
    assert not root.exists()


def test_a_content_store_root_that_is_a_file_is_a_store_failure(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"x")
    with pytest.raises(KernelError) as caught:
        FsContentPort(path)
    assert caught.value.code == "store_failure"


@pytest.mark.parametrize("kind", ["blobs", "refs"])
def test_a_fifo_in_a_content_store_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform (POSIX only)")
    from kernel.ports import ContentPolicy

    port = FsContentPort(tmp_path / "c")
    policy = ContentPolicy(scope="session", scope_id="s1", allowed_sinks=("cli",))
    ref = port.put(b"tool output", policy)
    head = ref.object_id[:64]
    path = tmp_path / "c" / kind / head[:2] / (head if kind == "blobs" else f"{ref.object_id}.json")
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(StoreFailure):
        within(5.0, lambda: port.get(ref, AccessContext("session", "s1", "cli")), path)


@pytest.mark.parametrize("store", sorted(READERS))
def test_a_writer_never_alters_a_foreign_database(tmp_path: Path, store: str) -> None:
    """A write method pointed at another program's SQLite file refuses it before changing
    anything in it: no schema, no journal mode switch, no side file."""
    port = READERS[store][0]
    foreign = _foreign(tmp_path / "app.db")
    before = foreign.read_bytes()
    with pytest.raises(StoreFailure) as exc:
        port(foreign)
    assert exc.value.details == {"reason": "foreign_database"}
    assert foreign.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]
    fresh = tmp_path / "store.sqlite3"  # a new or empty file still becomes a store
    port(fresh).close()
    port(fresh).close()  # and reopens as one


# --- SQLite sessions ------------------------------------------------------------------------

SESSION = "s-ro"
COMPACT: dict[str, Any] = {
    "operationId": "op-ro-1",
    "sessionId": SESSION,
    "modelWindowTokens": 400,
    "reservedOutputTokens": 100,
    "safetyMarginTokens": 20,
    "recoveryReserveTokens": 20,
    "sink": "provider.local",
    "scopeAdmissions": [{"scope": "session", "scopeId": SESSION}],
    "policyVersion": "policy-1",
    "modelProfile": "model-1",
}


def _session_store(path: Path) -> Path:
    """A real session store with one session of 14 turns (written, then closed)."""
    port = SqliteSessionPort(path)
    try:
        port.seed(SESSION, head="head:0", items=items_for(SESSION, conversation(14)))
    finally:
        port.close()
    return path


def test_a_memory_store_is_not_a_session_store(tmp_path: Path) -> None:
    path = _memory_store(tmp_path / "memory.sqlite3")
    before = _listing(tmp_path)
    with pytest.raises(SessionStoreNotFound) as caught:
        SqliteSessionPort(path, read_only=True)
    assert caught.value.details == {"reason": "no_schema"}
    assert _listing(tmp_path) == before


def test_a_read_only_session_port_reads_a_store_and_refuses_writes(tmp_path: Path) -> None:
    path = _session_store(tmp_path / "sessions.db")
    writer = SqliteSessionPort(path)
    try:
        snapshot = writer.read_snapshot(SESSION)
        assert snapshot is not None
        expected = (snapshot, writer.evidence(SESSION), writer.compaction_events(SESSION))
    finally:
        writer.close()
    db = path.read_bytes()
    port = SqliteSessionPort(path, read_only=True)
    try:
        assert port.read_snapshot(SESSION) == expected[0]
        assert (port.evidence(SESSION), port.compaction_events(SESSION)) == expected[1:]
        assert port.read_snapshot("s-missing") is None and port.read_operation("op-x") is None
        assert port.reconciliations(SESSION) == [] and port.verify(SESSION)
        head = expected[0].head
        item = dict(expected[0].items[0])
        operation = {"operationId": "op-1", "sessionId": SESSION}
        writes: list[Callable[[], Any]] = [
            lambda: port.seed("s-2", items=[item]),
            lambda: port.append_items(SESSION, [item], head),
            lambda: port.append_compaction(operation, head),
            lambda: port.append_reconciliation(operation, head),
        ]
        _refuses_each(writes)
    finally:
        port.close()
    assert path.read_bytes() == db


def test_a_read_only_session_port_sees_a_writers_later_commits(tmp_path: Path) -> None:
    path = _session_store(tmp_path / "sessions.db")
    reader = SqliteSessionPort(path, read_only=True)
    writer = SqliteSessionPort(path)
    try:
        head = writer.read_snapshot(SESSION).head  # type: ignore[union-attr]
        turn = items_for(SESSION, [{"role": "user", "content": "one more"}], start=100)
        assert writer.append_items(SESSION, turn, head).ok
        assert reader.read_snapshot(SESSION) == writer.read_snapshot(SESSION)
    finally:
        writer.close()
        reader.close()


@pytest.mark.parametrize("kind", ["foreign", "memory_store", "not_sqlite"])
def test_reconcile_never_writes_into_a_file_that_is_not_a_session_store(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "other.db"
    if kind == "foreign":
        _foreign(path)
    elif kind == "memory_store":
        _memory_store(path)
    else:
        path.write_bytes(b"plain text, not a database\n")
    before = _listing(tmp_path)
    out = call("reconcile", {"sessionStore": {"type": "sqlite", "path": str(path)},
                             "operationId": "op-1"})  # fmt: skip
    assert out["error"]["code"] == "not_found"
    assert _listing(tmp_path) == before


def test_reconcile_reads_a_real_session_store_without_changing_its_bytes(tmp_path: Path) -> None:
    path = _session_store(tmp_path / "sessions.db")
    spec = {"type": "sqlite", "path": str(path)}
    clock = {"mode": "fixed", "now": "2026-09-01T00:00:00.000Z"}
    compacted = call("compact_context", {"sessionStore": spec, "request": COMPACT,
                                         "clock": clock})  # fmt: skip
    assert compacted["result"]["receipt"]["status"] == "committed"
    db = path.read_bytes()
    for operation_id, status in (("op-ro-1", "committed"), ("op-none", "not_found")):
        out = call("reconcile", {"sessionStore": spec, "operationId": operation_id})
        assert out["result"]["receipt"]["status"] == status
    assert path.read_bytes() == db
