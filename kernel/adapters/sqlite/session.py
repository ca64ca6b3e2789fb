"""SQLite SessionContextPort (stdlib ``sqlite3``, WAL): the embedded default.

One append-only ``log`` table holds every seeded item, tail-window item,
compaction event and reconciliation receipt; rows are never updated or
deleted, so raw evidence survives every compaction.  Each row records the head
before and after it, so :meth:`SqliteSessionPort.verify` can re-walk the head
chain.  ``sessions`` caches the current head, the context epoch and the row of
the latest compaction (the epoch's artifact).

Compare-and-swap: every write runs in ``BEGIN IMMEDIATE`` (one writer at a
time across processes), re-reads the head inside the transaction and commits
only when it equals ``expected_head``.  ``synchronous=FULL`` makes a committed
transaction durable; a process killed mid-commit leaves the WAL's last complete
transaction, never a partial row.  Third-party errors become
:class:`kernel.errors.StoreFailure`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kernel.adapters.in_memory.session import HeadFn, session_head
from kernel.adapters.sqlite.connection import (
    SqliteStore,
    StoreNotFound,
    open_read_only,
    open_wal,
)
from kernel.canonical.digest import Profile
from kernel.ports import CasResult, OperationRecord, SessionSnapshot

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id      TEXT PRIMARY KEY,
    head            TEXT NOT NULL,
    memory_revision INTEGER NOT NULL,
    epoch           INTEGER NOT NULL DEFAULT 0,
    epoch_seq       INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS log (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id   TEXT NOT NULL REFERENCES sessions(session_id),
    kind         TEXT NOT NULL CHECK (kind IN ('seed', 'item', 'compaction', 'reconciliation')),
    operation_id TEXT,
    prev_head    TEXT NOT NULL,
    head         TEXT NOT NULL,
    body         TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS log_compaction ON log(operation_id)
    WHERE kind = 'compaction';
CREATE INDEX IF NOT EXISTS log_operation ON log(operation_id);
CREATE INDEX IF NOT EXISTS log_session ON log(session_id, seq);
"""

#: The tables a session store has (a read needs both).
_TABLES = frozenset({"sessions", "log"})


class SessionStoreNotFound(StoreNotFound):
    """No SQLite session store at the path (read-only open; the caller's path)."""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class SqliteSessionPort(SqliteStore):
    """SessionContextPort over one SQLite database file (safe across processes)."""

    _label = "session store"

    def __init__(
        self,
        path: str | Path,
        *,
        profile: Profile = "peer",
        head_fn: HeadFn | None = None,
        timeout: float = 60.0,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self._head_fn: HeadFn = head_fn or (lambda prev, d: session_head(prev, d, profile))
        self._read_only = read_only
        if read_only:
            self._conn, _ = open_read_only(
                self.path, timeout, _TABLES, "session store", SessionStoreNotFound
            )
        else:
            self._conn = open_wal(self.path, timeout, SCHEMA, "session store", _TABLES)

    # ----------------------------------------------------------------- seeding
    def seed(
        self,
        session_id: str,
        *,
        head: str = "head:0",
        memory_revision: int = 0,
        items: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        self._writable()
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO sessions(session_id, head, memory_revision) VALUES (?, ?, ?)",
                (session_id, head, memory_revision),
            )
            conn.executemany(
                "INSERT INTO log(session_id, kind, prev_head, head, body) "
                "VALUES (?, 'seed', ?, ?, ?)",
                [(session_id, head, head, _dumps(dict(i))) for i in items],
            )

    # ----------------------------------------------------------------- port
    def read_snapshot(self, session_id: str) -> SessionSnapshot | None:
        with self._tx("DEFERRED") as conn:
            row = conn.execute(
                "SELECT head, memory_revision, epoch, epoch_seq FROM sessions WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                return None
            head, memory_revision, epoch, epoch_seq = row
            items: list[dict[str, Any]] = []
            if epoch_seq:
                (body,) = conn.execute(
                    "SELECT body FROM log WHERE seq = ?", (epoch_seq,)
                ).fetchone()
                event = json.loads(body)
                items = list(event.get("outputItems") or [])
            tail = conn.execute(
                "SELECT body FROM log WHERE session_id = ? AND seq > ? "
                "AND kind IN ('seed', 'item') ORDER BY seq",
                (session_id, epoch_seq),
            ).fetchall()
        items.extend(json.loads(b) for (b,) in tail)
        return SessionSnapshot(session_id, head, memory_revision, tuple(items), epoch)

    def append_compaction(self, event: Mapping[str, Any], expected_head: str) -> CasResult:
        self._writable()
        operation_id = str(event.get("operationId"))
        session_id = str(event.get("sessionId"))
        body = _dumps(dict(event))
        with self._tx() as conn:
            done = conn.execute(
                "SELECT head FROM log WHERE operation_id = ? AND kind = 'compaction'",
                (operation_id,),
            ).fetchone()
            if done is not None:
                return CasResult(ok=True, new_head=done[0], idempotent=True)
            row = conn.execute(
                "SELECT head FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row is None or row[0] != expected_head:
                return CasResult(ok=False, current_head=row[0] if row else None)
            new_head = self._head_fn(expected_head, str(event.get("digest")))
            cursor = conn.execute(
                "INSERT INTO log(session_id, kind, operation_id, prev_head, head, body) "
                "VALUES (?, 'compaction', ?, ?, ?, ?)",
                (session_id, operation_id, expected_head, new_head, body),
            )
            conn.execute(
                "UPDATE sessions SET head = ?, epoch = epoch + 1, epoch_seq = ? "
                "WHERE session_id = ?",
                (new_head, cursor.lastrowid, session_id),
            )
        return CasResult(ok=True, new_head=new_head)

    def append_reconciliation(self, receipt: Mapping[str, Any], expected_head: str) -> CasResult:
        self._writable()
        session_id = str(receipt.get("sessionId"))
        with self._tx() as conn:
            row = conn.execute(
                "SELECT head FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row is None or row[0] != expected_head:
                return CasResult(ok=False, current_head=row[0] if row else None)
            conn.execute(
                "INSERT INTO log(session_id, kind, operation_id, prev_head, head, body) "
                "VALUES (?, 'reconciliation', ?, ?, ?, ?)",
                (
                    session_id,
                    str(receipt.get("operationId")),
                    row[0],
                    row[0],
                    _dumps(dict(receipt)),
                ),
            )
        return CasResult(ok=True, new_head=expected_head)

    def read_operation(self, operation_id: str) -> OperationRecord | None:
        rows = self._query(
            "SELECT kind, head, body FROM log WHERE operation_id = ? "
            "ORDER BY kind = 'compaction' DESC, seq DESC LIMIT 1",
            (operation_id,),
        )
        if not rows:
            return None
        kind, head, body = rows[0]
        return OperationRecord(kind, json.loads(body), head if kind == "compaction" else None)

    def compaction_events(self, session_id: str) -> list[dict[str, Any]]:
        return self._bodies(session_id, "compaction")

    def reconciliations(self, session_id: str) -> list[dict[str, Any]]:
        return self._bodies(session_id, "reconciliation")

    def _bodies(self, session_id: str, kind: str) -> list[dict[str, Any]]:
        rows = self._query(
            "SELECT body FROM log WHERE session_id = ? AND kind = ? ORDER BY seq",
            (session_id, kind),
        )
        return [json.loads(b) for (b,) in rows]

    # ----------------------------------------------------------------- tail window
    def append_items(
        self, session_id: str, items: Iterable[Mapping[str, Any]], expected_head: str | None = None
    ) -> CasResult:
        self._writable()
        with self._tx() as conn:
            row = conn.execute(
                "SELECT head FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row is None:
                return CasResult(ok=False, current_head=None)
            head = row[0]
            if expected_head is not None and head != expected_head:
                return CasResult(ok=False, current_head=head)
            for item in items:
                new_head = self._head_fn(head, str(item.get("digest")))
                conn.execute(
                    "INSERT INTO log(session_id, kind, prev_head, head, body) "
                    "VALUES (?, 'item', ?, ?, ?)",
                    (session_id, head, new_head, _dumps(dict(item))),
                )
                head = new_head
            conn.execute("UPDATE sessions SET head = ? WHERE session_id = ?", (head, session_id))
        return CasResult(ok=True, new_head=head)

    def evidence(self, session_id: str) -> list[dict[str, Any]]:
        """Every item ever held (seeded, appended, or output by a compaction)."""
        out: list[dict[str, Any]] = []
        for kind, body in self._query(
            "SELECT kind, body FROM log WHERE session_id = ? ORDER BY seq", (session_id,)
        ):
            value = json.loads(body)
            if kind in ("seed", "item"):
                out.append(value)
            elif kind == "compaction":
                out.extend(value.get("outputItems") or [])
        return out

    def verify(self, session_id: str) -> bool:
        """Re-walk the head chain of one session; True when every link holds."""
        rows = self._query(
            "SELECT kind, prev_head, head, body FROM log WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
        current = self._query("SELECT head FROM sessions WHERE session_id = ?", (session_id,))
        if not current:
            return False
        head: str | None = None
        for kind, prev_head, new_head, body in rows:
            if head is None:
                head = prev_head
            if prev_head != head:
                return False
            if kind in ("item", "compaction"):
                digest_value = str(json.loads(body).get("digest"))
                if new_head != self._head_fn(prev_head, digest_value):
                    return False
            elif new_head != prev_head:
                return False
            head = new_head
        return head is None or head == current[0][0]
