"""Shared SQLite plumbing of the SQLite adapters: WAL connection, transactions, queries.

Every sqlite3 error is translated to :class:`kernel.errors.StoreFailure` here (the
store's fault), so the adapters' own code speaks only in kernel terms.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernel.errors import StoreFailure


def open_wal(path: Path, timeout: float, schema: str, what: str) -> sqlite3.Connection:
    """Autocommit connection in WAL mode with full sync, the schema applied."""
    try:
        conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        conn.executescript(schema)
    except sqlite3.Error as exc:
        raise StoreFailure(f"cannot open the SQLite {what}", details={}) from exc
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection, mode: str = "IMMEDIATE") -> Iterator[sqlite3.Connection]:
    """``BEGIN <mode>`` … ``COMMIT``; rolled back on any exception."""
    try:
        conn.execute(f"BEGIN {mode}")
    except sqlite3.Error as exc:
        raise StoreFailure("cannot begin a SQLite transaction", details={}) from exc
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        conn.execute("ROLLBACK")
        raise StoreFailure("SQLite commit failed", details={}) from exc


def query(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    try:
        return list(conn.execute(sql, args).fetchall())
    except sqlite3.Error as exc:
        raise StoreFailure("SQLite query failed", details={}) from exc
