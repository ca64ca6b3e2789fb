"""A minimal MemoryPort for recall tests: holds already-normalized records as given (no
re-normalization, so the peer's record sets with non-ASCII tags can be loaded), keeps a
store revision, a change feed and the conflict relation, and has hooks that bypass the
revision and the feed (``drop``/``tamper``) to simulate an external actor corrupting the
authority under its index."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from kernel.ports import CommitResult, MemoryCommit


class ListPort:
    def __init__(self, records: Iterable[Mapping[str, Any]] = ()) -> None:
        self._records: dict[str, dict[str, Any]] = {}
        self._changes: list[tuple[int, dict[str, Any]]] = []
        self._conflicts: dict[str, dict[str, Any]] = {}
        self._revision = 0
        self.reads = 0
        self.scope_lists: list[tuple[str, str | None]] = []
        for record in records:
            self.put(record)

    @property
    def name(self) -> str:
        return "recall-test-authority"

    # mutations (each one store revision, on the change feed)
    def put(self, record: Mapping[str, Any]) -> None:
        self._records[record["memoryId"]] = dict(record)
        self._revision += 1
        self._changes.append((self._revision, dict(record)))

    # external actors (no revision, no feed)
    def drop(self, memory_id: str) -> None:
        self._records.pop(memory_id, None)

    def tamper(self, record: Mapping[str, Any]) -> None:
        self._records[record["memoryId"]] = dict(record)

    # MemoryPort
    def read(self, memory_id: str) -> dict[str, Any] | None:
        self.reads += 1
        record = self._records.get(memory_id)
        return dict(record) if record is not None else None

    def commit(self, commit: MemoryCommit, expected_revision: int) -> CommitResult:
        raise NotImplementedError

    def store_revision(self) -> int:
        return self._revision

    def list_scope(
        self, scope: str, scope_id: str | None, states: frozenset[str] | None = None
    ) -> list[dict[str, Any]]:
        self.scope_lists.append((scope, scope_id))
        return [
            dict(r)
            for _, r in sorted(self._records.items())
            if r["scope"] == scope
            and r.get("scopeId") == scope_id
            and (states is None or r["state"] in states)
        ]

    def records(self) -> list[dict[str, Any]]:
        return [dict(r) for _, r in sorted(self._records.items())]

    def changes(self, since: int = 0) -> list[tuple[int, dict[str, Any]]]:
        return [(rev, copy.deepcopy(r)) for rev, r in self._changes if rev > since]

    def events(self, memory_id: str | None = None) -> list[dict[str, Any]]:
        return []

    def get_reconciliation(self, request_id: str) -> dict[str, Any] | None:
        return None

    def put_reconciliation(self, operation: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def reconciliations(self) -> dict[str, dict[str, Any]]:
        return {}

    # the conflict relation (append-only, by conflictId; not on the change feed)
    def put_conflict(self, conflict: Mapping[str, Any]) -> bool:
        if conflict["conflictId"] in self._conflicts:
            return False
        self._conflicts[conflict["conflictId"]] = copy.deepcopy(dict(conflict))
        return True

    def conflicts_of(self, memory_ids: Iterable[str]) -> list[dict[str, Any]]:
        wanted = set(memory_ids)
        return [
            copy.deepcopy(c)
            for _, c in sorted(self._conflicts.items())
            if not wanted.isdisjoint(c["memoryIds"])
        ]

    def conflicts(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(c) for _, c in sorted(self._conflicts.items())]
