"""SQLite MemoryPort (stdlib ``sqlite3``, WAL): the embedded memory authority.

Tables: ``records`` (the current version of every record, tombstones included,
with scope columns indexed for scope listing), ``commits`` (one row per store
revision: the record version written and its event — the change feed and event
log; seeded records have no event), ``reconciliations`` (deletion operations by
request id), ``conflicts`` (the conflict relation, append-only, indexed by both member
ids; created on open when an older store lacks it) and ``meta`` (the store revision).

Compare-and-swap: a commit runs in ``BEGIN IMMEDIATE`` (one writer at a time, also
across processes), re-reads the record's revision inside the transaction and writes
only when it equals the expected revision; record, event, reconciliation and store
revision change in that one transaction.  ``synchronous=FULL``: a committed
transaction is durable; a crash leaves the last complete transaction.  Bodies are
JSON (ASCII-escaped, so lone surrogates survive); third-party errors become
:class:`kernel.errors.StoreFailure`.  Indexes over memory content are projections
elsewhere (recall) — never this table's authority.

``read_only=True`` (what a read-only call such as ``recall_memory`` opens) changes
nothing on disk: the database is opened ``mode=ro``; a missing file, a non-SQLite file or
a database without the memory tables is :class:`MemoryStoreNotFound` (``not_found``);
no table is created (an older store without ``conflicts`` reads as having none), the
journal mode is left alone, and every write is :class:`StoreReadOnly`
(``store_read_only``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kernel.adapters.sqlite.connection import (
    SqliteStore,
    StoreNotFound,
    open_read_only,
    open_wal,
)
from kernel.canonical.records import normalize_memory_record
from kernel.errors import InvalidArgument, StoreFailure
from kernel.ports import CommitResult, MemoryCommit, json_value

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT OR IGNORE INTO meta(key, value) VALUES ('store_revision', 0);
CREATE TABLE IF NOT EXISTS records (
    memory_id TEXT PRIMARY KEY,
    scope     TEXT NOT NULL,
    scope_id  TEXT NOT NULL,
    state     TEXT NOT NULL,
    revision  INTEGER NOT NULL,
    body      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_scope ON records(scope, scope_id, memory_id);
CREATE TABLE IF NOT EXISTS commits (
    store_revision INTEGER PRIMARY KEY,
    memory_id      TEXT NOT NULL,
    record         TEXT NOT NULL,
    event          TEXT
);
CREATE INDEX IF NOT EXISTS commits_memory ON commits(memory_id, store_revision);
CREATE TABLE IF NOT EXISTS reconciliations (
    request_id TEXT PRIMARY KEY,
    body       TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS conflicts (
    conflict_id TEXT PRIMARY KEY,
    memory_a    TEXT NOT NULL,
    memory_b    TEXT NOT NULL,
    body        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS conflicts_memory_a ON conflicts(memory_a);
CREATE INDEX IF NOT EXISTS conflicts_memory_b ON conflicts(memory_b);
"""

#: The tables a store must have to be read (``conflicts`` came later: optional).
_TABLES = frozenset({"meta", "records", "commits", "reconciliations"})

#: Ids per ``IN (…)`` lookup (well under SQLite's host-parameter limit, twice per query).
_CHUNK = 400


class MemoryStoreNotFound(StoreNotFound):
    """No SQLite memory store at the path (read-only open; the caller's path)."""


def _dumps(value: Any, label: str = "value") -> str:
    """The stored JSON of ``value``; a value that is not JSON is refused as every memory
    store refuses it (:func:`kernel.ports.json_value`)."""
    return json.dumps(
        json_value(value, label), ensure_ascii=True, separators=(",", ":"), allow_nan=False
    )


def _loads(text: str) -> Any:
    return json.loads(text)


class SqliteMemoryPort(SqliteStore):
    """MemoryPort over one SQLite database file (safe across processes)."""

    _label = "memory store"

    def __init__(
        self,
        path: str | Path,
        *,
        name: str = "sqlite-authority",
        timeout: float = 60.0,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self._name = name
        self._read_only = read_only
        if read_only:
            self._conn, tables = open_read_only(
                self.path, timeout, _TABLES, "memory store", MemoryStoreNotFound
            )
            self._has_conflicts = "conflicts" in tables
        else:
            self._conn = open_wal(self.path, timeout, SCHEMA, "memory store", _TABLES)
            self._has_conflicts = True

    @property
    def name(self) -> str:
        return self._name

    # ----------------------------------------------------------------- plumbing
    def _conflict_table(self) -> bool:
        """Whether ``conflicts`` exists (a read-only port of an older store: a writer may
        have added it since the open)."""
        if not self._has_conflicts:
            self._has_conflicts = bool(self._query(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'conflicts'"
            ))  # fmt: skip
        return self._has_conflicts

    @staticmethod
    def _put_record(conn: sqlite3.Connection, record: Mapping[str, Any]) -> str:
        """Make ``record`` the stored version of its memory; returns the body written."""
        body = _dumps(record, "record")
        conn.execute(
            "INSERT OR REPLACE INTO records(memory_id, scope, scope_id, state, revision, body) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                record["memoryId"],
                record["scope"],
                record.get("scopeId") or "",
                record["state"],
                record["revision"],
                body,
            ),
        )
        return body

    @classmethod
    def _write(cls, conn: sqlite3.Connection, record: Mapping[str, Any], event: Any) -> int:
        body = cls._put_record(conn, record)
        conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'store_revision'")
        (revision,) = conn.execute("SELECT value FROM meta WHERE key = 'store_revision'").fetchone()
        conn.execute(
            "INSERT INTO commits(store_revision, memory_id, record, event) VALUES (?, ?, ?, ?)",
            (revision, record["memoryId"], body, None if event is None else _dumps(event, "event")),
        )
        return int(revision)

    # ----------------------------------------------------------------- seeding
    def seed(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Preload records (normalized; each counts as one store revision)."""
        self._writable()
        normalized = [normalize_memory_record(r) for r in records]
        try:
            with self._tx() as conn:
                for record in normalized:
                    self._write(conn, record, None)
        except sqlite3.Error as exc:
            raise StoreFailure("SQLite seed failed", details={}) from exc

    # ----------------------------------------------------------------- port
    def read(self, memory_id: str) -> dict[str, Any] | None:
        rows = self._query("SELECT body FROM records WHERE memory_id = ?", (memory_id,))
        return _loads(rows[0][0]) if rows else None

    def commit(self, commit: MemoryCommit, expected_revision: int) -> CommitResult:
        self._writable()
        record = normalize_memory_record(commit.record)
        try:
            with self._tx() as conn:
                row = conn.execute(
                    "SELECT revision FROM records WHERE memory_id = ?", (record["memoryId"],)
                ).fetchone()
                actual = int(row[0]) if row else 0
                if actual != expected_revision:
                    (store,) = conn.execute(
                        "SELECT value FROM meta WHERE key = 'store_revision'"
                    ).fetchone()
                    return CommitResult(False, int(store), current_revision=actual)
                if record["revision"] != expected_revision + 1:
                    raise InvalidArgument(
                        "a commit must advance the record revision by one",
                        details={
                            "memoryId": record["memoryId"],
                            "expectedRevision": expected_revision,
                        },
                    )
                store_revision = self._write(conn, record, dict(commit.event))
                if commit.reconciliation is not None:
                    operation = dict(commit.reconciliation)
                    conn.execute(
                        "INSERT OR REPLACE INTO reconciliations(request_id, body) VALUES (?, ?)",
                        (str(operation["requestId"]), _dumps(operation, "operation")),
                    )
        except sqlite3.Error as exc:
            raise StoreFailure("SQLite memory commit failed", details={}) from exc
        return CommitResult(True, store_revision, revision=record["revision"])

    def store_revision(self) -> int:
        return int(self._query("SELECT value FROM meta WHERE key = 'store_revision'")[0][0])

    def list_scope(
        self, scope: str, scope_id: str | None, states: frozenset[str] | None = None
    ) -> list[dict[str, Any]]:
        rows = self._query(
            "SELECT state, body FROM records WHERE scope = ? AND scope_id = ? ORDER BY memory_id",
            (scope, scope_id or ""),
        )
        return [_loads(body) for state, body in rows if states is None or state in states]

    def records(self) -> list[dict[str, Any]]:
        return [_loads(b) for (b,) in self._query("SELECT body FROM records ORDER BY memory_id")]

    def changes(self, since: int = 0) -> list[tuple[int, dict[str, Any]]]:
        rows = self._query(
            "SELECT store_revision, record FROM commits WHERE store_revision > ? "
            "ORDER BY store_revision",
            (since,),
        )
        return [(int(rev), _loads(body)) for rev, body in rows]

    def events(self, memory_id: str | None = None) -> list[dict[str, Any]]:
        if memory_id is None:
            rows = self._query(
                "SELECT event FROM commits WHERE event IS NOT NULL ORDER BY store_revision"
            )
        else:
            rows = self._query(
                "SELECT event FROM commits WHERE event IS NOT NULL AND memory_id = ? "
                "ORDER BY store_revision",
                (memory_id,),
            )
        return [_loads(e) for (e,) in rows]

    def get_reconciliation(self, request_id: str) -> dict[str, Any] | None:
        rows = self._query("SELECT body FROM reconciliations WHERE request_id = ?", (request_id,))
        return _loads(rows[0][0]) if rows else None

    def put_reconciliation(self, operation: Mapping[str, Any]) -> None:
        self._writable()
        try:
            with self._tx() as conn:
                conn.execute(
                    "INSERT OR REPLACE INTO reconciliations(request_id, body) VALUES (?, ?)",
                    (str(operation["requestId"]), _dumps(operation, "operation")),
                )
        except sqlite3.Error as exc:
            raise StoreFailure("SQLite reconciliation write failed", details={}) from exc

    def reconciliations(self) -> dict[str, dict[str, Any]]:
        rows = self._query("SELECT request_id, body FROM reconciliations ORDER BY request_id")
        return {rid: _loads(body) for rid, body in rows}

    def put_conflict(self, conflict: Mapping[str, Any]) -> bool:
        self._writable()
        first, second = (str(m) for m in conflict["memoryIds"])
        try:
            with self._tx() as conn:
                cursor = conn.execute(
                    "INSERT OR IGNORE INTO conflicts(conflict_id, memory_a, memory_b, body) "
                    "VALUES (?, ?, ?, ?)",
                    (str(conflict["conflictId"]), first, second, _dumps(conflict, "conflict")),
                )
                stored = cursor.rowcount == 1
        except sqlite3.Error as exc:
            raise StoreFailure("SQLite conflict write failed", details={}) from exc
        return stored

    def conflicts_of(self, memory_ids: Iterable[str]) -> list[dict[str, Any]]:
        if not self._conflict_table():
            return []
        ids = sorted(set(memory_ids))
        found: dict[str, str] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = tuple(ids[start : start + _CHUNK])
            marks = ", ".join("?" * len(chunk))
            rows = self._query(
                f"SELECT conflict_id, body FROM conflicts WHERE memory_a IN ({marks}) "
                f"UNION SELECT conflict_id, body FROM conflicts WHERE memory_b IN ({marks})",
                chunk + chunk,
            )
            found.update(rows)
        return [_loads(found[k]) for k in sorted(found)]

    def conflicts(self) -> list[dict[str, Any]]:
        if not self._conflict_table():
            return []
        rows = self._query("SELECT body FROM conflicts ORDER BY conflict_id")
        return [_loads(body) for (body,) in rows]

    # ----------------------------------------------------------------- test hooks
    def drop(self, memory_id: str) -> None:
        """An external actor lost the record (bypasses CAS and the store revision)."""
        self._writable()
        with self._tx() as conn:
            conn.execute("DELETE FROM records WHERE memory_id = ?", (memory_id,))

    def restore(self, raw: Mapping[str, Any]) -> None:
        """An external restore put this record back (normalized; bypasses CAS)."""
        self._writable()
        record = normalize_memory_record(raw)
        with self._tx() as conn:
            self._put_record(conn, record)
