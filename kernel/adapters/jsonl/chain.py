"""The legacy CLI transcript hash chain, byte-compatible, plus a cross-platform file lock.

Line format (``packages/cli/src/harness/jsonl-session-store.js``)::

    {"type": ..., "timestamp": <ms>, "data": ..., "prevHash": <hex|null>, "hash": <hex>}
    hash = sha256_hex((prevHash or "genesis") + "\\n" + JSON.stringify({type, timestamp, data}))

``js_stringify`` (:mod:`kernel.canonical.jsjson`, re-exported here) reproduces
JavaScript ``JSON.stringify`` for JSON data, so a parsed line re-hashes to the bytes the
legacy writer hashed, and a line we write verifies under the legacy verifier.

``verify_lines`` mirrors the legacy ``verifyTranscriptLines`` statuses:
``verified``, ``partial`` (legacy prefix, then a valid chain), ``legacy``,
``tampered``, ``empty``; a half-written last line (a crash mid-append) is
``truncated_tail`` and is never treated as an event.

``FileLock`` is an exclusive advisory lock on ``<file>.lock``: ``fcntl.flock``
on POSIX, ``msvcrt.locking`` on Windows (both released by the OS when the holder
dies), and an ``O_EXCL`` lock file with stale-lock breaking where neither exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from kernel.canonical.jsjson import js_stringify

try:  # POSIX
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows
    _fcntl = None  # type: ignore[assignment]
_msvcrt: Any
try:  # Windows
    import msvcrt as _msvcrt
except ImportError:  # POSIX
    _msvcrt = None

GENESIS: Final = "genesis"

# --------------------------------------------------------------------------- chain


def event_hash(prev_hash: str | None, event_type: Any, timestamp: Any, data: Any) -> str:
    core = js_stringify({"type": event_type, "timestamp": timestamp, "data": data})
    return hashlib.sha256(f"{prev_hash or GENESIS}\n{core}".encode()).hexdigest()


def encode_event(
    prev_hash: str | None, event_type: str, timestamp: int, data: Any
) -> tuple[bytes, str]:
    """One complete line (with ``\\n``) and its hash."""
    digest = event_hash(prev_hash, event_type, timestamp, data)
    record = {
        "type": event_type,
        "timestamp": timestamp,
        "data": data,
        "prevHash": prev_hash,
        "hash": digest,
    }
    return (js_stringify(record) + "\n").encode("utf-8"), digest


@dataclass
class ChainReport:
    status: str = "empty"
    chained_events: int = 0
    legacy_events: int = 0
    malformed_lines: int = 0
    truncated_tail: bool = False
    first_invalid_line: int | None = None
    reason: str | None = None
    head_hash: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    intact_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.status in ("verified", "partial", "legacy", "empty")

    @property
    def head(self) -> str:
        """The CAS head: hash of the last chained event, or ``genesis``."""
        return self.head_hash or GENESIS


def verify_bytes(raw: bytes) -> ChainReport:
    """Parse and verify a transcript; a final segment without ``\\n`` is a torn tail."""
    report = ChainReport()
    end = raw.rfind(b"\n") + 1
    report.intact_bytes = end
    if raw[end:].strip():
        report.truncated_tail = True
        report.malformed_lines += 1
    saw_chain = False
    last: str | None = None
    for number, line in enumerate(raw[:end].split(b"\n")[:-1], start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            report.malformed_lines += 1
            if saw_chain:
                return _tampered(report, number, "malformed line inside hash chain")
            continue
        if isinstance(event, dict) and isinstance(event.get("hash"), str):
            expected_prev = last if saw_chain else None
            if event.get("prevHash") != expected_prev:
                return _tampered(report, number, "hash chain linkage broken")
            actual = event_hash(
                expected_prev, event.get("type"), event.get("timestamp"), event.get("data")
            )
            if actual != event["hash"]:
                return _tampered(report, number, "event content does not match its hash")
            saw_chain = True
            last = event["hash"]
            report.chained_events += 1
        else:
            if saw_chain:
                return _tampered(report, number, "unchained record after hash chain started")
            report.legacy_events += 1
        report.events.append(event if isinstance(event, dict) else {"type": None, "data": event})
    report.head_hash = last
    if report.chained_events:
        report.status = "partial" if report.legacy_events else "verified"
    elif report.legacy_events or report.malformed_lines:
        report.status = "legacy"
    return report


def _tampered(report: ChainReport, line: int, reason: str) -> ChainReport:
    report.status = "tampered"
    report.first_invalid_line = line
    report.reason = reason
    return report


# --------------------------------------------------------------------------- file lock


class FileLock:
    """Exclusive inter-process lock on ``path`` (a dedicated ``.lock`` file)."""

    def __init__(
        self, path: str | Path, *, timeout: float = 120.0, stale_after: float = 30.0, mode: str = ""
    ) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.stale_after = stale_after
        self.mode = mode or ("fcntl" if _fcntl else "msvcrt" if _msvcrt else "excl")
        self._fd: int | None = None

    def __enter__(self) -> FileLock:
        deadline = time.monotonic() + self.timeout
        if self.mode == "excl":
            self._acquire_excl(deadline)
            return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if self.mode == "fcntl" and _fcntl is not None:
                _fcntl.flock(fd, _fcntl.LOCK_EX)
            elif _msvcrt is not None:  # pragma: no cover - Windows
                self._acquire_msvcrt(fd, deadline)
            else:  # pragma: no cover
                raise RuntimeError(f"lock mode {self.mode!r} unavailable")
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def _acquire_msvcrt(self, fd: int, deadline: float) -> None:  # pragma: no cover - Windows
        assert _msvcrt is not None
        delay = 0.001
        while True:
            try:
                os.lseek(fd, 0, os.SEEK_SET)
                _msvcrt.locking(fd, _msvcrt.LK_NBLCK, 1)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"lock {self.path} not acquired") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

    def _acquire_excl(self, deadline: float) -> None:
        target = self.path.with_name(self.path.name + ".excl")
        delay = 0.001
        while True:
            try:
                fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                self._fd = -1
                return
            except FileExistsError:
                try:
                    age = time.time() - target.stat().st_mtime
                    if age > self.stale_after:  # holder died: break the stale lock
                        target.unlink(missing_ok=True)
                        continue
                except FileNotFoundError:
                    continue
                if time.monotonic() > deadline:
                    raise TimeoutError(f"lock {target} not acquired") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if self.mode == "excl":
            self.path.with_name(self.path.name + ".excl").unlink(missing_ok=True)
            return
        try:
            if self.mode == "fcntl" and _fcntl is not None:
                _fcntl.flock(fd, _fcntl.LOCK_UN)
            elif _msvcrt is not None:  # pragma: no cover - Windows
                os.lseek(fd, 0, os.SEEK_SET)
                _msvcrt.locking(fd, _msvcrt.LK_UNLCK, 1)
        finally:
            os.close(fd)


def append_durably(path: Path, data: bytes, *, keep: int | None = None) -> None:
    """Append ``data`` with one ``O_APPEND`` write loop and ``fsync``.

    ``keep``: first truncate the file to that many bytes (drops a torn tail left by
    a crash; only call under the lock).
    """
    created = not path.exists()
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags | (0 if keep is not None else os.O_APPEND), 0o644)
    try:
        if keep is not None:
            os.ftruncate(fd, keep)
            os.lseek(fd, keep, os.SEEK_SET)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    if created and hasattr(os, "O_DIRECTORY"):
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
