"""The one place where adapters are wired to the kernel (house style: composition root).

Everything else in ``shadow/`` asks this module for a port and never imports
``kernel.adapters`` itself (``tests/test_layering.py`` holds that line; the only other
importer is :mod:`shadow.compaction_harness`, whose scripted session double *extends* the
in-memory port the peer's conformance protocol describes).  Callers validate their own
request shape first and report errors in their own words; what this module adds is the
choice of adapter and its lifetime.

* :func:`memory_store` — a SQLite memory store opened for the call (``read_only`` for
  reads: ``mode=ro``, nothing is ever created or altered), closed afterwards;
* :func:`seeded_memory` / :func:`fresh_memory` — the naive in-memory memory port, from a
  snapshot or empty;
* ``encode_event`` / ``verify_bytes`` — the JSONL store's hash-chain codec, for reading
  and re-chaining legacy CLI session files without a store (``shadow import-sessions``);
* :func:`session_store` — a SQLite or JSONL session store opened for the call
  (``read_only`` for reads such as ``reconcile``: the SQLite file is opened ``mode=ro`` and
  never created or altered; a JSONL read creates nothing either way);
* :func:`thread_store` — the JSONL session store whose sessions are the app server's
  threads (it also starts sessions and appends messages);
* :func:`memory_folder` — the memory store folder and its four tools.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from kernel.adapters.in_memory.memory_store import InMemoryMemoryPort
from kernel.adapters.jsonl import chain as jsonl_chain
from kernel.adapters.jsonl.session import JsonlSessionPort
from kernel.adapters.memory_folder.store import MemoryFolder
from kernel.adapters.sqlite.memory_store import SqliteMemoryPort
from kernel.adapters.sqlite.session import SqliteSessionPort
from kernel.canonical.digest import Profile
from kernel.ports import MemoryPort, SessionContextPort

__all__ = ["ChainReport", "encode_event", "event_hash", "fresh_memory", "memory_folder",
           "memory_store", "seeded_memory", "session_store", "thread_store", "verify_bytes"]

#: the JSONL session store's hash-chain codec (one adapter's pure functions, wired here)
ChainReport = jsonl_chain.ChainReport
encode_event = jsonl_chain.encode_event
event_hash = jsonl_chain.event_hash
verify_bytes = jsonl_chain.verify_bytes


@contextlib.contextmanager
def memory_store(path: Path, *, read_only: bool) -> Iterator[MemoryPort]:
    """The SQLite memory store at ``path`` for the length of one call."""
    port = SqliteMemoryPort(path, read_only=read_only)
    try:
        yield port
    finally:
        port.close()


def seeded_memory(snapshot: Mapping[str, Any]) -> MemoryPort:
    """The in-memory memory port holding ``snapshot`` (the peer's ``memory`` field)."""
    return InMemoryMemoryPort.from_snapshot(dict(snapshot))


def fresh_memory() -> InMemoryMemoryPort:
    """An empty in-memory memory port (the shadow candidate's memory driver)."""
    return InMemoryMemoryPort()


@contextlib.contextmanager
def session_store(kind: Literal["sqlite", "jsonl"], path: Path, profile: Profile, *,
                  read_only: bool = False) -> Iterator[SessionContextPort]:
    """A session store for the length of one call: the SQLite file ``path``, or the
    folder of ``<sessionId>.jsonl`` transcripts ``path``.  ``read_only``: a call that only
    reads sessions — the SQLite store is opened ``mode=ro`` (a path holding no session
    store is ``not_found``, nothing is created); a write through either store raises
    ``store_read_only``."""
    if kind == "sqlite":
        sqlite = SqliteSessionPort(path, profile=profile, read_only=read_only)
        try:
            yield sqlite
        finally:
            sqlite.close()
    else:
        yield JsonlSessionPort(path, profile=profile, read_only=read_only)


def thread_store(root: Path, clock: Callable[[], int], kind: str = "jsonl"
                 ) -> JsonlSessionPort | SqliteSessionPort:
    """The session store whose sessions are the app server's threads: the JSONL folder
    ``root`` (created by the first write, never by a read), or the SQLite file ``root``
    (``kind="sqlite"``; the caller closes it)."""
    if kind == "sqlite":
        return SqliteSessionPort(root)
    return JsonlSessionPort(root, clock=clock)


def memory_folder(root: Path) -> MemoryFolder:
    """The memory store folder at ``root`` (nothing is created by reading it)."""
    return MemoryFolder(root)
