"""SessionContextPort over legacy-CLI-compatible JSONL session transcripts.

One file per session (``<root>/<sessionId>.jsonl``), one hash-chained event a
line, exactly as the legacy CLI writes and verifies them (see
:mod:`kernel.adapters.jsonl.chain`).  A legacy session can therefore be read,
verified and compacted by the kernel without losing its chain, and the legacy
CLI can keep replaying it afterwards.

Replay (the legacy ``rebuildMessages`` rule): start from the latest ``compact``
event's ``data.messages``, then every later ``user_message``,
``assistant_message`` and ``system`` event.  The snapshot's items are:

* after a kernel compaction (a ``compact`` event whose ``data.canonical`` is a
  ``chainlesschain.context-compaction/v1`` event): its ``outputItems`` — the
  context epoch's artifact — followed by the messages appended since (the tail
  window);
* otherwise: the replay messages projected by
  :func:`kernel.adapters.jsonl.messages.messages_to_items`.

A kernel commit appends one ``compact`` event whose data holds the legacy stats,
``trigger``, the replayable ``messages`` and the kernel event under
``canonical`` (the CLI's own layout); a reconciliation receipt is a
``context_memory_reconciliation`` event.  Nothing is ever rewritten or deleted.

The head is the hash of the last chained line (``genesis`` before the first).
Every write takes an exclusive file lock, re-reads and verifies the chain,
compares the head (compare-and-swap), drops a torn tail left by a crash, then
appends the whole line with one ``O_APPEND`` write and ``fsync``.  A broken
chain is :class:`kernel.errors.StoreFailure`; the kernel never compacts it.

Reads create nothing: the directory is made by the first write (with its lock file),
and a transcript is read only if it is a regular file (checked before and after a
non-blocking open, so a FIFO there fails at once with ``StoreFailure`` instead of
blocking the read).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kernel.adapters.fs.files import read_regular
from kernel.adapters.jsonl.chain import (
    ChainReport,
    FileLock,
    append_durably,
    encode_event,
    verify_bytes,
)
from kernel.adapters.jsonl.messages import SourceMessage, items_to_messages, messages_to_items
from kernel.canonical.digest import Profile
from kernel.canonical.jsjson import js_stringify
from kernel.canonical.timestamps import iso_to_epoch_ms
from kernel.errors import InvalidArgument, KernelError, StoreFailure, StoreReadOnly
from kernel.ports import CasResult, OperationRecord, SessionSnapshot

COMPACT: Final = "compact"
RECONCILIATION: Final = "context_memory_reconciliation"
MESSAGE_EVENTS: Final = {
    "user_message": "user",
    "assistant_message": "assistant",
    "system": "system",
}
COMPACTION_SCHEMA: Final = "chainlesschain.context-compaction/v1"
_SEQ_STRIDE: Final = 100_000
_UNSAFE = re.compile(r'[\x00-\x1f<>:"/\\|?*]|\.\.')
_RESERVED = re.compile(r"(?i)(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?")


def _is_kernel_compaction(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("schema") == COMPACTION_SCHEMA
        and value.get("status") in ("committed", "degraded")
        and isinstance(value.get("outputItems"), list)
        and isinstance(value.get("operationId"), str)
    )


@dataclass
class Replay:
    """What a verified transcript says about the session."""

    report: ChainReport
    items: list[dict[str, Any]] = field(default_factory=list)
    epoch: int = 0
    memory_revision: int = 0
    compactions: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    reconciliations: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    reconciliation_list: list[dict[str, Any]] = field(default_factory=list)
    message_count: int = 0


class JsonlSessionPort:
    """SessionContextPort over a directory of legacy JSONL session files."""

    def __init__(
        self,
        root: str | Path,
        *,
        profile: Profile = "peer",
        allowed_sinks: Iterable[str] = ("*",),
        clock: Callable[[], int] | None = None,
        lock_mode: str = "",
        lock_timeout: float = 120.0,
        read_only: bool = False,
    ) -> None:
        """``read_only``: every write raises ``store_read_only`` before touching the disk
        (reads create nothing either way)."""
        self.root = Path(root)  # created by the first write, never by a read
        self._read_only = read_only
        self._profile: Profile = profile
        self._sinks = tuple(allowed_sinks)
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._lock_mode = lock_mode
        self._lock_timeout = lock_timeout

    # ----------------------------------------------------------------- files
    def path(self, session_id: str) -> Path:
        if (
            not isinstance(session_id, str)
            or not session_id
            or len(session_id) > 160
            or _UNSAFE.search(session_id)
            or _RESERVED.fullmatch(session_id)
            or session_id.strip(" .") != session_id
        ):
            raise InvalidArgument("unsafe session id", details={"field": "sessionId"})
        return self.root / f"{session_id}.jsonl"

    def _lock(self, session_id: str) -> FileLock:
        """The session's write lock (every write takes it first: the directory is made
        here)."""
        path = self.path(session_id)
        if self._read_only:
            raise StoreReadOnly("the JSONL session store was opened read-only", details={})
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreFailure("cannot create the session directory", details={}) from exc
        return FileLock(
            path.with_name(path.name + ".lock"), timeout=self._lock_timeout, mode=self._lock_mode
        )

    def verify(self, session_id: str) -> ChainReport:
        path = self.path(session_id)
        try:
            raw = read_regular(path)
        except FileNotFoundError:
            return ChainReport(status="not-found")
        except OSError as exc:
            raise StoreFailure("cannot read session transcript", details={}) from exc
        if raw is None:
            raise StoreFailure(
                "session transcript is not a regular file", details={"sessionId": session_id}
            )
        return verify_bytes(raw)

    def _replay(self, session_id: str) -> Replay | None:
        report = self.verify(session_id)
        if report.status == "not-found":
            return None
        if not report.ok:
            raise StoreFailure(
                "session transcript hash chain is broken",
                details={
                    "sessionId": session_id,
                    "status": report.status,
                    "line": report.first_invalid_line,
                    "reason": report.reason,
                },
            )
        return self._project(session_id, report)

    def _project(self, session_id: str, report: ChainReport) -> Replay:
        replay = Replay(report)
        base: list[dict[str, Any]] = []
        sources: list[SourceMessage] = []
        for index, event in enumerate(report.events):
            kind = event.get("type")
            data = event.get("data")
            line_hash = event.get("hash")
            if not isinstance(line_hash, str):
                line_hash = hashlib.sha256(js_stringify(event).encode()).hexdigest()
            stamp = event.get("timestamp")
            ts = stamp if isinstance(stamp, int) and 0 <= stamp <= 8_640_000_000_000_000 else 0
            replay.events.append(event)
            if (
                kind == COMPACT
                and isinstance(data, dict)
                and isinstance(data.get("messages"), list)
            ):
                replay.epoch += 1
                canonical = data.get("canonical")
                if isinstance(canonical, dict) and _is_kernel_compaction(canonical):
                    base = [dict(i) for i in canonical["outputItems"]]
                    sources = []
                    replay.compactions[canonical["operationId"]] = (canonical, line_hash)
                    revision = canonical.get("memoryRevision")
                    if isinstance(revision, int) and revision > replay.memory_revision:
                        replay.memory_revision = revision
                else:
                    base = []
                    sources = [
                        SourceMessage(m, line_hash, j, index * _SEQ_STRIDE + j, ts)
                        for j, m in enumerate(data["messages"])
                        if isinstance(m, dict) and isinstance(m.get("role"), str)
                    ]
            elif kind in MESSAGE_EVENTS and isinstance(data, dict):
                if isinstance(data.get("role"), str):
                    sources.append(SourceMessage(data, line_hash, 0, index * _SEQ_STRIDE, ts))
                    replay.message_count += 1
            elif kind == RECONCILIATION and isinstance(data, dict):
                receipt = data.get("receipt")
                if isinstance(receipt, dict) and isinstance(receipt.get("operationId"), str):
                    replay.reconciliations[receipt["operationId"]] = receipt
                    replay.reconciliation_list.append(receipt)
        replay.items = base + messages_to_items(
            sources, session_id, allowed_sinks=self._sinks, profile=self._profile
        )
        return replay

    def _append(
        self, session_id: str, report: ChainReport, event_type: str, timestamp: int, data: Any
    ) -> str:
        line, new_hash = encode_event(report.head_hash, event_type, timestamp, data)
        keep = report.intact_bytes if report.truncated_tail else None
        try:
            append_durably(self.path(session_id), line, keep=keep)
        except OSError as exc:
            raise StoreFailure("cannot append to session transcript", details={}) from exc
        return new_hash

    # ----------------------------------------------------------------- legacy writers
    def append_event(
        self,
        session_id: str,
        event_type: str,
        data: Any,
        *,
        expected_head: str | None = None,
        timestamp: int | None = None,
    ) -> CasResult:
        """Append any legacy event (``session_start``, ``user_message``, …), CAS optional."""
        with self._lock(session_id):
            report = self.verify(session_id)
            if report.status == "not-found":
                report = ChainReport()
            elif not report.ok:
                raise StoreFailure("session transcript hash chain is broken", details={})
            if expected_head is not None and report.head != expected_head:
                return CasResult(ok=False, current_head=report.head)
            stamp = self._clock() if timestamp is None else timestamp
            return CasResult(
                ok=True, new_head=self._append(session_id, report, event_type, stamp, data)
            )

    def start_session(
        self, session_id: str, *, title: str = "Untitled", provider: str = "", model: str = ""
    ) -> CasResult:
        return self.append_event(
            session_id, "session_start", {"title": title, "provider": provider, "model": model}
        )

    def append_message(
        self,
        session_id: str,
        role: str,
        content: Any,
        *,
        expected_head: str | None = None,
        timestamp: int | None = None,
    ) -> CasResult:
        kind = {"user": "user_message", "assistant": "assistant_message", "system": "system"}[role]
        return self.append_event(
            session_id,
            kind,
            {"role": role, "content": content},
            expected_head=expected_head,
            timestamp=timestamp,
        )

    # ----------------------------------------------------------------- port
    def read_snapshot(self, session_id: str) -> SessionSnapshot | None:
        replay = self._replay(session_id)
        if replay is None:
            return None
        return SessionSnapshot(
            session_id=session_id,
            head=replay.report.head,
            memory_revision=replay.memory_revision,
            items=tuple(replay.items),
            epoch=replay.epoch,
        )

    def append_compaction(self, event: Mapping[str, Any], expected_head: str) -> CasResult:
        session_id = str(event.get("sessionId"))
        operation_id = str(event.get("operationId"))
        with self._lock(session_id):
            replay = self._replay(session_id)
            if replay is None:
                return CasResult(ok=False, current_head=None)
            done = replay.compactions.get(operation_id)
            if done is not None:
                return CasResult(ok=True, new_head=done[1], idempotent=True)
            if replay.report.head != expected_head:
                return CasResult(ok=False, current_head=replay.report.head)
            outputs = [dict(i) for i in event.get("outputItems") or []]
            messages = items_to_messages(outputs)
            before = sum(int(i.get("tokenEstimate") or 0) for i in replay.items)
            after = sum(int(i.get("tokenEstimate") or 0) for i in outputs)
            data = {
                "strategy": event.get("strategy"),
                "originalMessages": len(items_to_messages(replay.items)),
                "compressedMessages": len(messages),
                "originalTokens": before,
                "compressedTokens": after,
                "saved": max(0, before - after),
                "degraded": event.get("status") == "degraded",
                "trigger": "manual",
                "messages": messages,
                "canonical": dict(event),
            }
            stamp = _epoch_ms(event.get("committedAt"), self._clock)
            return CasResult(
                ok=True, new_head=self._append(session_id, replay.report, COMPACT, stamp, data)
            )

    def append_reconciliation(self, receipt: Mapping[str, Any], expected_head: str) -> CasResult:
        session_id = str(receipt.get("sessionId"))
        with self._lock(session_id):
            replay = self._replay(session_id)
            if replay is None or replay.report.head != expected_head:
                return CasResult(ok=False, current_head=replay.report.head if replay else None)
            stamp = _epoch_ms(receipt.get("startedAt"), self._clock)
            new_head = self._append(
                session_id, replay.report, RECONCILIATION, stamp, {"receipt": dict(receipt)}
            )
            return CasResult(ok=True, new_head=new_head)

    def read_operation(self, operation_id: str) -> OperationRecord | None:
        for path in sorted(self.root.glob("*.jsonl")):
            replay = self._replay(path.name[: -len(".jsonl")])
            if replay is None:
                continue
            done = replay.compactions.get(operation_id)
            if done is not None:
                return OperationRecord("compaction", done[0], done[1])
            receipt = replay.reconciliations.get(operation_id)
            if receipt is not None:
                return OperationRecord("reconciliation", receipt, None)
        return None

    def compaction_events(self, session_id: str) -> list[dict[str, Any]]:
        replay = self._replay(session_id)
        return [event for event, _ in replay.compactions.values()] if replay else []

    def reconciliations(self, session_id: str) -> list[dict[str, Any]]:
        replay = self._replay(session_id)
        return list(replay.reconciliation_list) if replay else []

    def evidence(self, session_id: str) -> list[dict[str, Any]]:
        """Every transcript event, oldest first (nothing is ever removed)."""
        replay = self._replay(session_id)
        return list(replay.events) if replay else []


def _epoch_ms(value: Any, clock: Callable[[], int]) -> int:
    if isinstance(value, str):
        try:
            return iso_to_epoch_ms(value)
        except KernelError:
            pass
    return clock()
