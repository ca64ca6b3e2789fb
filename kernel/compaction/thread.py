"""``thread/compact/start`` lifecycle as values (second seed, "3. 压缩 current").

Manual compaction enters only through ``thread/compact/start`` whose params are
exactly ``{threadId}``; an accepted request answers ``{}`` at once.  Progress and
outcome travel only as the standard Thread / Turn / Item notifications, in this
order::

    turn/started → item/started (contextCompaction) → item/completed → turn/completed

No session, turns or compacted state ever go back in the response.  The
functions here build those values; the shell (the JSON-RPC server, later)
emits them.  The compaction outcome is the receipt status of
``kernel.compaction.service``; it maps to the item's and the turn's status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from kernel.errors import InvalidArgument

THREAD_COMPACT_START: Final = "thread/compact/start"
TURN_STARTED: Final = "turn/started"
ITEM_STARTED: Final = "item/started"
ITEM_COMPLETED: Final = "item/completed"
TURN_COMPLETED: Final = "turn/completed"
CONTEXT_COMPACTION_ITEM: Final = "contextCompaction"

#: Receipt status → (item status, turn status).
OUTCOME_STATUS: Final[Mapping[str, tuple[str, str]]] = MappingProxyType({
    "committed": ("completed", "completed"),
    "degraded": ("completed", "completed"),
    "stale": ("failed", "failed"),
    "reconciliation_required": ("failed", "failed"),
    "aborted": ("failed", "failed"),
    "cancelled": ("failed", "interrupted"),
})


@dataclass(frozen=True, slots=True)
class Notification:
    """A JSON-RPC notification (no id)."""

    method: str
    params: Mapping[str, Any]

    def to_wire(self) -> dict[str, Any]:
        return {"method": self.method, "params": dict(self.params)}


def accept_thread_compact_start(params: Any) -> tuple[str, dict[str, Any]]:
    """Validate ``thread/compact/start`` params; returns ``(thread_id, {})``.

    Params must be exactly ``{"threadId": <non-empty string>}``.
    """
    if not isinstance(params, Mapping):
        raise InvalidArgument("thread/compact/start params must be an object", details={})
    unknown = sorted(str(k) for k in params if k != "threadId")
    if unknown:
        raise InvalidArgument(
            "thread/compact/start params accept only threadId",
            details={"field": "params", "unknown": unknown},
        )
    thread_id = params.get("threadId")
    if not isinstance(thread_id, str) or not thread_id or len(thread_id) > 160:
        raise InvalidArgument(
            "threadId must be a string between 1 and 160 characters",
            details={"field": "threadId"},
        )
    return thread_id, {}


def _item(item_id: str, status: str, outcome: Mapping[str, Any] | None) -> dict[str, Any]:
    item: dict[str, Any] = {"type": CONTEXT_COMPACTION_ITEM, "id": item_id, "status": status}
    if outcome is not None:
        item["compaction"] = dict(outcome)
    return item


def compaction_started(thread_id: str, turn_id: str, item_id: str) -> tuple[Notification, ...]:
    """The two notifications sent when a compaction turn starts."""
    return (
        Notification(
            TURN_STARTED,
            {"threadId": thread_id, "turn": {"id": turn_id, "status": "inProgress", "items": []}},
        ),
        Notification(
            ITEM_STARTED,
            {"threadId": thread_id, "turnId": turn_id, "item": _item(item_id, "inProgress", None)},
        ),
    )


def outcome_of(receipt: Mapping[str, Any]) -> dict[str, Any]:
    """The compaction facts an item may carry: ids, heads and status, never content."""
    keys = ("operationId", "status", "inputHead", "newHead", "currentHead")
    return {k: receipt[k] for k in keys if receipt.get(k) is not None}


def compaction_completed(
    thread_id: str,
    turn_id: str,
    item_id: str,
    status: str,
    *,
    outcome: Mapping[str, Any] | None = None,
    error_code: str | None = None,
) -> tuple[Notification, ...]:
    """The two notifications sent when the compaction turn ends."""
    if status not in OUTCOME_STATUS:
        raise InvalidArgument("unknown compaction outcome", details={"status": status})
    item_status, turn_status = OUTCOME_STATUS[status]
    facts = dict(outcome or {})
    facts.setdefault("status", status)
    turn: dict[str, Any] = {"id": turn_id, "status": turn_status, "items": []}
    if turn_status != "completed":
        turn["error"] = {"code": error_code or status}
    return (
        Notification(
            ITEM_COMPLETED,
            {"threadId": thread_id, "turnId": turn_id, "item": _item(item_id, item_status, facts)},
        ),
        Notification(TURN_COMPLETED, {"threadId": thread_id, "turn": turn}),
    )


def compaction_turn(
    thread_id: str,
    turn_id: str,
    item_id: str,
    receipt: Mapping[str, Any],
) -> tuple[Notification, ...]:
    """All four notifications of one compaction turn, in order, from its receipt."""
    status = str(receipt.get("status"))
    return compaction_started(thread_id, turn_id, item_id) + compaction_completed(
        thread_id, turn_id, item_id, status, outcome=outcome_of(receipt)
    )


def compaction_turn_failed(
    thread_id: str, turn_id: str, item_id: str, error_code: str | None, *, cancelled: bool = False
) -> tuple[Notification, ...]:
    """All four notifications of a compaction turn that ended with an error."""
    status = "cancelled" if cancelled else "aborted"
    return compaction_started(thread_id, turn_id, item_id) + compaction_completed(
        thread_id, turn_id, item_id, status, error_code=error_code
    )
