"""In-memory projection store: a :class:`~kernel.ports.PurgePort` that holds copies.

A projection (a search index, an embedding store, a cache, a replica) keeps one entry per
memory record, keyed by ``memoryId`` and remembered with the record's scope.  ``purge``
removes exactly the entry its request names — a dict lookup, never a scan — and only when
the entry's scope is the request's (a copy filed under another scope is left alone and the
purge answers ``pending`` with ``projection_scope_mismatch``, so a deletion can never reach
beyond its own record, not even through a projection).  Purging an absent entry succeeds
(idempotent, as ``reconcile`` re-runs every target).  ``fail_next`` makes the next purge
raise (fault injection: the deletion is ``partial`` until ``reconcile``).

Naive on purpose: one plain dict per entry, the payload deep-copied in and out.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["InMemoryProjectionStore", "ProjectionPurgeFailed"]


class ProjectionPurgeFailed(Exception):
    """A purge the store could not carry out; ``code`` goes into the deletion receipt."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class InMemoryProjectionStore:
    def __init__(self, name: str) -> None:
        self._name = name
        self._entries: dict[str, dict[str, Any]] = {}
        self._failure: ProjectionPurgeFailed | None = None

    @property
    def name(self) -> str:
        return self._name

    # ----------------------------------------------------------------- projection
    def put(self, record: Mapping[str, Any], payload: Any = None) -> None:
        """Project ``record`` (its scope is remembered; ``payload`` is the derived copy)."""
        self._entries[str(record["memoryId"])] = {
            "scope": str(record["scope"]),
            "scopeId": record.get("scopeId"),
            "payload": copy.deepcopy(payload),
        }

    def get(self, memory_id: str) -> Any:
        entry = self._entries.get(memory_id)
        return copy.deepcopy(entry["payload"]) if entry is not None else None

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def fail_next(self, message: str, code: str) -> None:
        self._failure = ProjectionPurgeFailed(message, code)

    # ----------------------------------------------------------------- PurgePort
    def purge(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
        memory_id = str(request["memoryId"])
        entry = self._entries.get(memory_id)
        if entry is not None:
            if entry["scope"] != request["scope"] or entry["scopeId"] != request.get("scopeId"):
                raise ProjectionPurgeFailed(
                    "projection holds the record under another scope", "projection_scope_mismatch"
                )
            del self._entries[memory_id]
        return {
            "store": self._name,
            "status": "purged",
            "memoryId": memory_id,
            "fence": request["fence"],
            "existed": entry is not None,
        }
