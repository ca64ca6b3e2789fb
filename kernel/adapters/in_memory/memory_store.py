"""In-memory MemoryPort: the naive model the memory-port conformance suite trusts.

The same behaviour as the peer's ``InMemoryMemoryPort`` (name ``in-memory-authority``;
every seeded record and every commit advances the store revision by one), plus the
change feed, scope listing and conflict relation of :class:`kernel.ports.MemoryPort`.

Naive on purpose: plain dicts and lists, and deep copies (:func:`kernel.ports.json_copy`,
a ``copy.deepcopy`` for JSON values) on the way in and on the way out, so callers never
share state with the store.  A record is normalized on the way in
(:func:`kernel.canonical.records.normalize_memory_record`, as the SQLite adapter does; its
output is a new object the store owns); events, deletion operations and conflict entries
are deep-copied.  Two plain indexes keep the protocol's "never a scan" lookups honest:
record ids by ``(scope, scopeId)`` and conflict ids by member ``memoryId``.

``drop`` / ``restore`` are test hooks simulating an external actor (a record lost, a
backup restored); they bypass the CAS and do not advance the store revision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kernel.canonical.records import normalize_memory_record
from kernel.errors import InvalidArgument
from kernel.memory.conflicts import parse_conflict
from kernel.ports import CommitResult, MemoryCommit, json_copy, json_value

__all__ = ["InMemoryMemoryPort"]


def _scope_of(record: Mapping[str, Any]) -> tuple[str, str | None]:
    return (str(record["scope"]), record.get("scopeId"))


class InMemoryMemoryPort:
    def __init__(
        self, seed: Iterable[Mapping[str, Any]] = (), *, name: str = "in-memory-authority"
    ):
        self._name = name
        self._records: dict[str, dict[str, Any]] = {}
        self._by_scope: dict[tuple[str, str | None], set[str]] = {}
        #: ``(memoryId of the committed record, event)``, oldest first
        self._events: list[tuple[str | None, dict[str, Any]]] = []
        self._reconciliations: dict[str, dict[str, Any]] = {}
        #: ``(store revision, record)`` per commit, oldest first (records never mutated)
        self._changes: list[tuple[int, dict[str, Any]]] = []
        self._revision = 0
        self._conflicts: dict[str, dict[str, Any]] = {}
        self._conflicts_by_member: dict[str, set[str]] = {}
        self.seed(seed)

    @property
    def name(self) -> str:
        return self._name

    def seed(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Preload records (normalized; each counts as one store revision)."""
        for raw in records:
            record = self._place(normalize_memory_record(raw))
            self._revision += 1
            self._changes.append((self._revision, record))

    def _place(self, record: dict[str, Any]) -> dict[str, Any]:
        """Make the normalized ``record`` the current version of its memory (no CAS)."""
        memory_id = str(record["memoryId"])
        previous = self._records.get(memory_id)
        if previous is not None:
            self._by_scope[_scope_of(previous)].discard(memory_id)
        self._records[memory_id] = record
        self._by_scope.setdefault(_scope_of(record), set()).add(memory_id)
        return record

    # ----------------------------------------------------------------- port
    def read(self, memory_id: str) -> dict[str, Any] | None:
        record = self._records.get(memory_id)
        return json_copy(record) if record is not None else None

    def commit(self, commit: MemoryCommit, expected_revision: int) -> CommitResult:
        record = normalize_memory_record(commit.record)
        memory_id = str(record["memoryId"])
        current = self._records.get(memory_id)
        actual = current["revision"] if current is not None else 0
        if actual != expected_revision:
            return CommitResult(False, self._revision, current_revision=actual)
        if record["revision"] != expected_revision + 1:
            raise InvalidArgument(
                "a commit must advance the record revision by one",
                details={"memoryId": memory_id, "expectedRevision": expected_revision},
            )
        event = json_value(commit.event, "event")
        operation = commit.reconciliation
        stored_operation = json_value(operation, "operation") if operation is not None else None
        self._place(record)
        self._events.append((memory_id, event))
        if stored_operation is not None:
            self._reconciliations[str(stored_operation["requestId"])] = stored_operation
        self._revision += 1
        self._changes.append((self._revision, record))
        return CommitResult(True, self._revision, revision=record["revision"])

    def store_revision(self) -> int:
        return self._revision

    def list_scope(
        self, scope: str, scope_id: str | None, states: frozenset[str] | None = None
    ) -> list[dict[str, Any]]:
        out = []
        for memory_id in sorted(self._by_scope.get((scope, scope_id), ())):
            record = self._records[memory_id]
            if states is None or record["state"] in states:
                out.append(json_copy(record))
        return out

    def records(self) -> list[dict[str, Any]]:
        return [json_copy(self._records[k]) for k in sorted(self._records)]

    def changes(self, since: int = 0) -> list[tuple[int, dict[str, Any]]]:
        return [(rev, json_copy(record)) for rev, record in self._changes if rev > since]

    def events(self, memory_id: str | None = None) -> list[dict[str, Any]]:
        return [
            json_copy(event)
            for owner, event in self._events
            if memory_id is None or owner == memory_id
        ]

    def get_reconciliation(self, request_id: str) -> dict[str, Any] | None:
        operation = self._reconciliations.get(request_id)
        return json_copy(operation) if operation is not None else None

    def put_reconciliation(self, operation: Mapping[str, Any]) -> None:
        self._reconciliations[str(operation["requestId"])] = json_value(operation, "operation")

    def reconciliations(self) -> dict[str, dict[str, Any]]:
        return json_copy(self._reconciliations)

    def put_conflict(self, conflict: Mapping[str, Any]) -> bool:
        conflict_id = str(conflict["conflictId"])
        if conflict_id in self._conflicts:
            return False  # append-only: the first entry for the pair stays
        self._conflicts[conflict_id] = json_value(conflict, "conflict")
        for memory_id in conflict["memoryIds"]:
            self._conflicts_by_member.setdefault(str(memory_id), set()).add(conflict_id)
        return True

    def conflicts_of(self, memory_ids: Iterable[str]) -> list[dict[str, Any]]:
        found: set[str] = set()
        for memory_id in memory_ids:
            found.update(self._conflicts_by_member.get(memory_id, ()))
        return [json_copy(self._conflicts[k]) for k in sorted(found)]

    def conflicts(self) -> list[dict[str, Any]]:
        return [json_copy(self._conflicts[k]) for k in sorted(self._conflicts)]

    def close(self) -> None:
        """Nothing to release (symmetry with the SQLite adapter)."""

    # ----------------------------------------------------------------- snapshots
    def snapshot(self) -> dict[str, Any]:
        """The whole store as JSON: ``{records, events, reconciliations, storeRevision}``,
        plus ``conflicts`` when the conflict relation holds any entry."""
        out: dict[str, Any] = {
            "records": self.records(),
            "events": self.events(),
            "reconciliations": self.reconciliations(),
            "storeRevision": self._revision,
        }
        if self._conflicts:
            out["conflicts"] = self.conflicts()
        return out

    @classmethod
    def from_snapshot(
        cls, snapshot: Mapping[str, Any], *, name: str = "in-memory-authority"
    ) -> InMemoryMemoryPort:
        """A store continuing a :meth:`snapshot` (records re-normalized, digests checked).

        The change feed restarts at the snapshot's store revision (earlier changes are
        summarised by the records themselves)."""
        port = cls(name=name)
        for raw in snapshot.get("records") or ():
            port._place(normalize_memory_record(raw))
        port._events = [  # a snapshot's events name their record themselves
            (e.get("memoryId"), json_copy(dict(e))) for e in snapshot.get("events") or ()
        ]
        port._reconciliations = {
            str(k): json_copy(dict(v)) for k, v in (snapshot.get("reconciliations") or {}).items()
        }
        for conflict in snapshot.get("conflicts") or ():
            port.put_conflict(parse_conflict(conflict).to_wire())  # checked, digest verified
        revision = snapshot.get("storeRevision", len(port._records))
        if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
            raise InvalidArgument("storeRevision must be an integer >= 0")
        port._revision = revision
        return port

    # ----------------------------------------------------------------- test hooks
    def drop(self, memory_id: str) -> None:
        """An external actor lost the record (bypasses CAS and the store revision)."""
        record = self._records.pop(memory_id, None)
        if record is not None:
            self._by_scope[_scope_of(record)].discard(memory_id)

    def restore(self, raw: Mapping[str, Any]) -> None:
        """An external restore put this record back (normalized; bypasses CAS)."""
        self._place(normalize_memory_record(raw))
