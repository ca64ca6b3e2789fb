"""Consolidation after a compaction turn (second seed §1 and §3 rule 5).

A compaction is session-context governance, never a long-term memory fact source: its
result reaches the memory store only as a **rollout summary** written through
consolidation, never into ``MEMORY.md`` or ``memory_summary.md`` directly.  When the
server has both a session store and a memory folder (``--sessions`` and ``--memory``),
a committed or degraded ``thread/compact/start`` turn is followed — after its
``turn/completed``, so it never blocks the turn — by:

1. ``rollout_summaries/<threadId>-<operationId>.md``: the compaction's facts (thread,
   operation, status, heads, how many items the context kept); the server compacts
   without a provider, so there is no summary text to copy, and the file holds no
   message content (whatever it holds passes the folder's secret and injection scan);
2. the folder's consolidation (:meth:`MemoryFolder.consolidate`): new notes folded into
   ``MEMORY.md`` after the same scan (doubtful ones moved to ``review/``) and
   ``memory_summary.md`` regenerated;
3. one notification, ``memory/consolidated`` ``{threadId, status, rolloutSummary?,
   consolidated, review, reasonCode?}``: ``ok``, or ``degraded`` when anything failed —
   then the previous ``memory_summary.md`` is kept as it was.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from kernel.errors import KernelError
from shadow.app_server import protocol as rpc

CONSOLIDATED: Final = "memory/consolidated"
_AFTER: Final = frozenset({"committed", "degraded"})


def rollout_text(thread_id: str, outcome: Mapping[str, Any], kept: int | None) -> str:
    """The rollout summary of one compaction: its facts, never a message body."""
    lines = [f"# Compaction of {thread_id}", "",
             f"- operation: {outcome.get('operationId', '?')}",
             f"- status: {outcome.get('status', '?')}",
             f"- input head: {outcome.get('inputHead', '?')}",
             f"- new head: {outcome.get('newHead', '?')}"]
    if kept is not None:
        lines.append(f"- items in the thread after it: {kept}")
    return "\n".join(lines) + "\n"


def after_turn(memory_root: Path | None, thread_id: str, turn: Iterator[dict[str, Any]],
               kept: Any) -> Iterator[dict[str, Any]]:
    """The turn's notifications as they come, then (if it committed and a memory folder
    is configured) the rollout summary, the consolidation and ``memory/consolidated``.
    ``kept()`` gives the thread's item count after the turn (None when unreadable)."""
    outcome: Mapping[str, Any] | None = None
    for note in turn:
        if note.get("method") == "item/completed":
            outcome = note["params"]["item"].get("compaction")
        yield note
    if memory_root is None or outcome is None or outcome.get("status") not in _AFTER:
        return
    yield rpc.notification(CONSOLIDATED, consolidate(memory_root, thread_id, outcome, kept))


def consolidate(memory_root: Path, thread_id: str, outcome: Mapping[str, Any],
                kept: Any) -> dict[str, Any]:
    from shadow import bootstrap

    params: dict[str, Any] = {"threadId": thread_id, "status": "ok", "consolidated": 0,
                              "review": 0}
    try:
        folder = bootstrap.memory_folder(memory_root)
        name = f"{thread_id}-{outcome.get('operationId', 'op')}"
        written = folder.add_rollout_summary(name, rollout_text(thread_id, outcome, kept()))
        params["rolloutSummary"] = written["path"]
        report = folder.consolidate()
    except (KernelError, OSError) as exc:  # the previous summary stays as it was
        params.update(status="degraded", reasonCode=str(getattr(exc, "code", "")) or
                      "consolidation_failed")
        return params
    params["consolidated"] = len(report.get("consolidated", []))
    params["review"] = len(report.get("review", []))
    degraded = report.get("degraded") or (
        {"details": {"reasonCode": report["error"]}} if report.get("error") else None)
    if degraded:
        params.update(status="degraded",
                      reasonCode=str((degraded.get("details") or {}).get("reasonCode", "")))
    return params
