"""In-memory MemoryPort: the model the memory-port conformance suite trusts.

The same behaviour as the peer's ``InMemoryMemoryPort`` (name ``in-memory-authority``;
every seeded record and every commit advances the store revision by one), plus the
change feed and scope listing of :class:`kernel.memory_ports.MemoryPort`.  Values are
deep-copied in and out, so callers never share state with the store.
``drop`` / ``restore`` are test hooks simulating an external actor (a record lost, a
backup restored); they bypass the CAS and do not advance the store revision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kernel.errors import InvalidArgument
from kernel.memory_ports import CommitResult, MemoryCommit, json_copy
from kernel.normalize import normalize_memory_record


class InMemoryMemoryPort:
    def __init__(
        self, seed: Iterable[Mapping[str, Any]] = (), *, name: str = "in-memory-authority"
    ):
        self._name = name
        self._records: dict[str, dict[str, Any]] = {}
        self._events: list[dict[str, Any]] = []
        self._reconciliations: dict[str, dict[str, Any]] = {}
        self._changes: list[tuple[int, dict[str, Any]]] = []
        self._revision = 0
        self.seed(seed)

    @property
    def name(self) -> str:
        return self._name

    def seed(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Preload records (normalized; each counts as one store revision)."""
        for raw in records:
            record = normalize_memory_record(raw)
            self._records[record["memoryId"]] = record
            self._revision += 1
            self._changes.append((self._revision, json_copy(record)))

    # ----------------------------------------------------------------- port
    def read(self, memory_id: str) -> dict[str, Any] | None:
        record = self._records.get(memory_id)
        return json_copy(record) if record is not None else None

    def commit(self, commit: MemoryCommit, expected_revision: int) -> CommitResult:
        record = normalize_memory_record(commit.record)
        current = self._records.get(record["memoryId"])
        actual = current["revision"] if current is not None else 0
        if actual != expected_revision:
            return CommitResult(False, self._revision, current_revision=actual)
        if record["revision"] != expected_revision + 1:
            raise InvalidArgument(
                "a commit must advance the record revision by one",
                details={"memoryId": record["memoryId"], "expectedRevision": expected_revision},
            )
        self._records[record["memoryId"]] = record
        self._events.append(json_copy(dict(commit.event)))
        if commit.reconciliation is not None:
            operation = json_copy(dict(commit.reconciliation))
            self._reconciliations[str(operation["requestId"])] = operation
        self._revision += 1
        self._changes.append((self._revision, json_copy(record)))
        return CommitResult(True, self._revision, revision=record["revision"])

    def store_revision(self) -> int:
        return self._revision

    def list_scope(
        self, scope: str, scope_id: str | None, states: frozenset[str] | None = None
    ) -> list[dict[str, Any]]:
        return [
            json_copy(r)
            for _, r in sorted(self._records.items())
            if r["scope"] == scope
            and r.get("scopeId") == scope_id
            and (states is None or r["state"] in states)
        ]

    def records(self) -> list[dict[str, Any]]:
        return [json_copy(r) for _, r in sorted(self._records.items())]

    def changes(self, since: int = 0) -> list[tuple[int, dict[str, Any]]]:
        return [(rev, json_copy(r)) for rev, r in self._changes if rev > since]

    def events(self, memory_id: str | None = None) -> list[dict[str, Any]]:
        return [
            json_copy(e)
            for e in self._events
            if memory_id is None or e.get("memoryId") == memory_id
        ]

    def get_reconciliation(self, request_id: str) -> dict[str, Any] | None:
        operation = self._reconciliations.get(request_id)
        return json_copy(operation) if operation is not None else None

    def put_reconciliation(self, operation: Mapping[str, Any]) -> None:
        self._reconciliations[str(operation["requestId"])] = json_copy(dict(operation))

    def reconciliations(self) -> dict[str, dict[str, Any]]:
        return json_copy(self._reconciliations)

    def close(self) -> None:
        """Nothing to release (symmetry with the SQLite adapter)."""

    # ----------------------------------------------------------------- snapshots
    def snapshot(self) -> dict[str, Any]:
        """The whole store as JSON: ``{records, events, reconciliations, storeRevision}``."""
        return {
            "records": self.records(),
            "events": self.events(),
            "reconciliations": self.reconciliations(),
            "storeRevision": self._revision,
        }

    @classmethod
    def from_snapshot(
        cls, snapshot: Mapping[str, Any], *, name: str = "in-memory-authority"
    ) -> InMemoryMemoryPort:
        """A store continuing a :meth:`snapshot` (records re-normalized, digests checked).

        The change feed restarts at the snapshot's store revision (earlier changes are
        summarised by the records themselves)."""
        port = cls(name=name)
        for raw in snapshot.get("records") or ():
            record = normalize_memory_record(raw)
            port._records[record["memoryId"]] = record
        port._events = [json_copy(dict(e)) for e in snapshot.get("events") or ()]
        port._reconciliations = {
            str(k): json_copy(dict(v)) for k, v in (snapshot.get("reconciliations") or {}).items()
        }
        revision = snapshot.get("storeRevision", len(port._records))
        if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
            raise InvalidArgument("storeRevision must be an integer >= 0")
        port._revision = revision
        return port

    # ----------------------------------------------------------------- test hooks
    def drop(self, memory_id: str) -> None:
        """An external actor lost the record (bypasses CAS and the store revision)."""
        self._records.pop(memory_id, None)

    def restore(self, raw: Mapping[str, Any]) -> None:
        """An external restore put this record back (normalized; bypasses CAS)."""
        record = normalize_memory_record(raw)
        self._records[record["memoryId"]] = record
