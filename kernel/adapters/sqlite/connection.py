"""Shared SQLite plumbing of the SQLite adapters: connections, transactions, queries.

Two ways in: :func:`open_wal` (a writer: WAL, full sync, the schema created) and
:func:`open_read_only` (a reader: ``mode=ro``, nothing created — no file, no table, no
journal-mode switch; a file that is missing, not SQLite or without the adapter's tables is
:class:`StoreNotFound`).  Every sqlite3 error is translated to
:class:`kernel.errors.StoreFailure` here (the store's fault), so the adapters' own code
speaks only in kernel terms.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from kernel.errors import KernelError, StoreFailure, StoreReadOnly

_MAGIC: Final = b"SQLite format 3\x00"
_HEADER: Final = 100


class StoreNotFound(KernelError):
    """A read-only open found no store of this kind at the path (the caller's path):
    ``details["reason"]`` is ``missing``, ``empty``, ``not_sqlite`` or ``no_schema``."""

    default_code = "not_found"


def open_wal(path: Path, timeout: float, schema: str, what: str,
             tables: frozenset[str] | None = None) -> sqlite3.Connection:
    """Autocommit connection in WAL mode with full sync, the schema applied.

    With ``tables`` (the store's own), an existing database that holds tables but none of
    them is another program's file: refused before anything is changed in it (no journal
    mode switch, no schema), so a store pointed at the wrong file never alters it."""
    try:
        conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None)
        if tables is not None:
            found = {str(r[0]) for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if found and not found & tables:
                conn.close()
                raise StoreFailure(f"not a SQLite {what}: the database holds other tables",
                                   details={"reason": "foreign_database"})
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        conn.executescript(schema)
    except sqlite3.Error as exc:
        raise StoreFailure(f"cannot open the SQLite {what}", details={}) from exc
    return conn


def _uri(path: Path, *options: str) -> str:
    """``file:`` URI of ``path`` (absolute; ``?``, ``#``, ``%``, spaces and non-ASCII
    percent-quoted; a Windows drive or UNC path as SQLite expects it)."""
    absolute = Path(os.path.abspath(path)).as_posix()  # "/a/b", "C:/a/b", "//host/share/b"
    if not absolute.startswith("/"):
        absolute = "/" + absolute
    return "file://" + quote(absolute, safe="/:") + "?" + "&".join(("mode=ro", *options))


def _header(path: Path, not_found: type[StoreNotFound]) -> bytes:
    """The database header, read without blocking (a FIFO there is refused)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise not_found("no SQLite store at this path", details={"reason": "not_sqlite"})
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise not_found("no SQLite store at this path", details={"reason": "missing"}) from None
    except OSError as exc:
        raise StoreFailure("cannot read the SQLite store", details={}) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise not_found("no SQLite store at this path", details={"reason": "not_sqlite"})
        return os.read(fd, _HEADER)
    except OSError as exc:
        raise StoreFailure("cannot read the SQLite store", details={}) from exc
    finally:
        os.close(fd)


def _tables(conn: sqlite3.Connection) -> frozenset[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return frozenset(str(name) for (name,) in rows)


def open_read_only(
    path: Path,
    timeout: float,
    required: frozenset[str],
    what: str,
    not_found: type[StoreNotFound] = StoreNotFound,
) -> tuple[sqlite3.Connection, frozenset[str]]:
    """A read-only connection (``mode=ro``, ``query_only``) and the tables present.

    Nothing is created or changed: the file is never created, no table is made, the
    journal mode is left as it is.  ``not_found`` (``reason``) for a path with no file, an
    empty or non-SQLite file, or a database without every table in ``required`` — its
    schema is probed with ``immutable=1`` when it is in WAL mode with no ``-wal`` file (no
    connection is open: nothing can be missed, and SQLite creates no ``-wal``/``-shm``
    beside a database that is not ours).  Reading a WAL-mode store itself needs those
    side files, which SQLite then creates; the database file is never written."""
    header = _header(path, not_found)
    if not header:
        raise not_found(f"no SQLite {what} at this path", details={"reason": "empty"})
    if len(header) < _HEADER or not header.startswith(_MAGIC):
        raise not_found(f"no SQLite {what} at this path", details={"reason": "not_sqlite"})
    schema = {"reason": "no_schema"}
    try:
        wal = header[18] == 2 or header[19] == 2
        if wal and not os.path.lexists(f"{os.fspath(path)}-wal"):
            probe = sqlite3.connect(_uri(path, "immutable=1"), uri=True, timeout=timeout)
            with closing(probe):
                if not required <= _tables(probe):
                    raise not_found(f"no SQLite {what} at this path", details=schema)
        conn = sqlite3.connect(_uri(path), uri=True, timeout=timeout, isolation_level=None)
        try:
            conn.execute("PRAGMA query_only = ON")
            tables = _tables(conn)
        except BaseException:
            conn.close()
            raise
    except sqlite3.Error as exc:
        raise StoreFailure(f"cannot open the SQLite {what} read-only", details={}) from exc
    if not required <= tables:
        conn.close()
        raise not_found(f"no SQLite {what} at this path", details=schema)
    return conn, tables


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


class SqliteStore:
    """The plumbing both SQLite adapters share: one connection (``_conn``), transactions,
    queries, and the refusal of a write through a store opened read-only.  A subclass
    sets ``_conn``, ``_read_only`` and its ``_label`` (``"memory store"``, …)."""

    _conn: sqlite3.Connection
    _read_only: bool
    _label: str = "store"

    def close(self) -> None:
        self._conn.close()

    def _tx(self, mode: str = "IMMEDIATE") -> AbstractContextManager[sqlite3.Connection]:
        return transaction(self._conn, mode)

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return query(self._conn, sql, args)

    def _writable(self) -> None:
        if self._read_only:
            raise StoreReadOnly(f"the SQLite {self._label} was opened read-only", details={})
