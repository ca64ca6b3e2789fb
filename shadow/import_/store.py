"""One CLI JSONL session file → its events, or the reason it is quarantined.

A session store is one file per session, one JSON event a line (``{type, timestamp,
data, prevHash, hash}``, the hash chain of :mod:`kernel.adapters.jsonl.chain`, which
verifies it here: nothing of the chain is re-implemented).  A file is imported only
whole and intact; the first of these problems quarantines it, with its line number:

=========================  ==============================================================
``session.unreadable``     not a regular readable file (line 0)
``session.not_json``       a line that is not JSON (or not UTF-8), or not a JSON object
``session.chain_broken``   the hash chain does not verify (linkage, content, a record
                           without a hash after the chain started)
``session.unchained``      a record without a hash before the chain (a legacy prefix):
                           its history cannot be authenticated
``session.truncated_tail`` the last line has no final newline (a torn append)
=========================  ==============================================================

Blank lines are skipped, as the legacy reader skips them.  Errors never quote a line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shadow.bootstrap import verify_bytes
from shadow.boundary import read_regular
from shadow.errors import InputError


@dataclass(frozen=True, slots=True)
class Event:
    """One verified event and the 1-based line it was read from."""

    line: int
    type: str
    timestamp: Any
    data: Any


@dataclass(frozen=True, slots=True)
class Quarantine:
    """Why a session file is not imported: the file (as reported), line and reason code."""

    file: str
    line: int
    reason: str
    detail: str = ""

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "line": self.line, "reason": self.reason}
        return {**out, "detail": self.detail} if self.detail else out


@dataclass(frozen=True, slots=True)
class SessionFile:
    """An intact, verified session file."""

    file: str  # the name reported (relative to the PATH argument)
    name: str  # the file name without ``.jsonl``
    events: tuple[Event, ...] = field(default_factory=tuple)
    lines: int = 0


def _reject_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


def _parse_line(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _events(raw: bytes, label: str) -> tuple[list[Event], int] | Quarantine:
    """Every complete line parsed (events, line count), or the first non-JSON line."""
    end = raw.rfind(b"\n") + 1
    events: list[Event] = []
    lines = raw[:end].split(b"\n")[:-1]
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        event = _parse_line(line)
        if event is None:
            return Quarantine(label, number, "session.not_json", "not a JSON object")
        events.append(Event(number, str(event.get("type")), event.get("timestamp"),
                            event.get("data")))
    return events, len(lines)


def _first_unchained(raw: bytes) -> int:
    for number, line in enumerate(raw.split(b"\n"), start=1):
        event = _parse_line(line) if line.strip() else None
        if event is not None and not isinstance(event.get("hash"), str):
            return number
    return 0


def read_session(path: Path, label: str) -> SessionFile | Quarantine:
    """Read and verify one session file (never raises for a bad file)."""
    try:
        raw = read_regular(path, label)
    except (InputError, OSError) as exc:
        detail = exc.expected if isinstance(exc, InputError) else type(exc).__name__
        return Quarantine(label, 0, "session.unreadable", detail)
    parsed = _events(raw, label)
    if isinstance(parsed, Quarantine):
        return parsed
    events, count = parsed
    report = verify_bytes(raw)
    if report.status == "tampered":
        return Quarantine(label, report.first_invalid_line or 0, "session.chain_broken",
                          report.reason or "")
    if report.legacy_events:
        return Quarantine(label, _first_unchained(raw), "session.unchained",
                          "a record without a hash chain")
    if report.truncated_tail:
        return Quarantine(label, count + 1, "session.truncated_tail",
                          "the last line has no final newline")
    name = path.name.removesuffix(".jsonl")
    return SessionFile(label, name, tuple(events), count)
