"""Deterministic drivers for :class:`kernel.compaction.service.CompactionKernel`.

The test doubles of the peer's ``compaction-vectors.json`` README (fixed or
ticking clocks, prefixed uuids, scripted summarizers, a session port whose head
moves after the first read), shared by the peer conformance test and by the
``compact_context`` / ``reconcile`` methods of ``shadow kernel call``.

A compaction call over JSON needs its whole state in the request, so the
in-memory port here can also be *restored* from a previous call's
``sessionAfter`` (events and reconciliation receipts included): feeding it back
as the next call's ``session`` continues the same session statelessly.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kernel.adapters.in_memory.session import InMemorySessionPort
from kernel.canonical.digest import Profile
from kernel.canonical.items import normalize_context_item
from kernel.canonical.timestamps import iso_to_epoch_ms
from kernel.errors import KernelError
from kernel.ports import SessionContextPort, SessionSnapshot, SummarizerFailure


class ScriptedClock:
    """``{"mode":"fixed","now"}`` or ``{"mode":"tick","start","stepMs"}`` (epoch ms).

    The k-th call (from 0) answers ``start + k·stepMs``; ``calls`` counts them.
    """

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.spec = dict(spec)
        self.calls = 0
        if self.spec.get("mode") == "fixed":
            self._start, self._step = iso_to_epoch_ms(self.spec["now"]), 0
        elif self.spec.get("mode") == "tick":
            self._start = iso_to_epoch_ms(self.spec["start"])
            self._step = int(self.spec["stepMs"])
        else:
            raise ValueError(f"unknown clock mode {self.spec.get('mode')!r}")

    def __call__(self) -> int:
        k = self.calls
        self.calls += 1
        return self._start + k * self._step


class ScriptedIds:
    """The k-th id (from ``start``, default 1) is ``<prefix>-<k zero-padded to 3>``."""

    def __init__(self, prefix: str, start: int = 1) -> None:
        self.prefix = prefix
        self.start = start
        self.issued: list[str] = []

    def __call__(self) -> str:
        value = f"{self.prefix}-{self.start + len(self.issued):03d}"
        self.issued.append(value)
        return value


class ScriptedSummarizer:
    """``{"kind":"return","output"}`` returns a copy of ``output``;
    ``{"kind":"throw","error":{message, code?, outcomeUnknown?}}`` raises
    :class:`SummarizerFailure`.  Every call is logged as the peer records it."""

    def __init__(self, spec: Mapping[str, Any], log: list[dict[str, Any]]) -> None:
        self.spec = spec
        self.log = log

    def __call__(self, dropped: list[dict[str, Any]], context: dict[str, Any]) -> Any:
        self.log.append(
            {
                "droppedItemIds": [i["itemId"] for i in dropped],
                "droppedItemDigests": [i["digest"] for i in dropped],
                "context": copy.deepcopy(context),
            }
        )
        if self.spec["kind"] == "return":
            return copy.deepcopy(self.spec["output"])
        error = self.spec["error"]
        raise SummarizerFailure(
            error["message"],
            code=error.get("code"),
            outcome_unknown=bool(error.get("outcomeUnknown")),
        )


class AdvancingPort(InMemorySessionPort):
    """The peer's in-memory port (items normalized under ``profile``) plus its
    ``advanceHeadAfterRead`` double: the head moves after the first read."""

    def __init__(self, advance_to: str | None = None, *, profile: Profile = "peer") -> None:
        super().__init__(
            profile=profile, normalize=lambda i: normalize_context_item(i, profile=profile)
        )
        self.advance_to = advance_to
        self.reads = 0

    def read_snapshot(self, session_id: str) -> SessionSnapshot | None:
        snapshot = super().read_snapshot(session_id)
        self.reads += 1
        if self.reads == 1 and self.advance_to is not None and snapshot is not None:
            self.set_head(session_id, self.advance_to)
        return snapshot


def seeded_port(
    session: Mapping[str, Any],
    *,
    advance_to: str | None = None,
    profile: Profile = "peer",
) -> AdvancingPort:
    """An :class:`AdvancingPort` holding one session seed
    ``{sessionId, head, memoryRevision, items, events?, reconciliations?}``."""
    port = AdvancingPort(advance_to, profile=profile)
    session_id = session["sessionId"]
    port.seed(
        session_id,
        head=session["head"],
        memory_revision=session["memoryRevision"],
        items=session["items"],
    )
    port.restore(session_id, session.get("events") or (), session.get("reconciliations") or ())
    return port


def session_after(port: SessionContextPort, session_id: str) -> dict[str, Any]:
    """What the port persisted, in the vectors' ``sessionAfter`` shape plus what a
    stateless caller needs to continue (``sessionId``, ``memoryRevision``, ``items``)."""
    snapshot = port.read_snapshot(session_id)
    items = [dict(i) for i in snapshot.items] if snapshot else []
    return {
        "sessionId": session_id,
        "head": snapshot.head if snapshot else None,
        "memoryRevision": snapshot.memory_revision if snapshot else None,
        "itemIds": [i["itemId"] for i in items],
        "items": items,
        "events": port.compaction_events(session_id),
        "reconciliations": port.reconciliations(session_id),
    }


def error_record(exc: BaseException) -> dict[str, Any]:
    """The peer's error record: ``{code, message, details?, compactionLifecycle?}``;
    a non-kernel error (a summarizer's own exception) has ``code: None``."""
    record: dict[str, Any]
    if isinstance(exc, KernelError):
        record = {"code": exc.code, "message": exc.message, "details": exc.details}
    else:
        record = {"code": None, "message": str(exc)}
    lifecycle = getattr(exc, "compaction_lifecycle", None)
    if lifecycle is not None:
        record["compactionLifecycle"] = lifecycle
    return record
