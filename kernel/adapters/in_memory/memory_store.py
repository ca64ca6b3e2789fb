"""In-memory MemoryPort: the model the memory-port conformance suite trusts.

The same behaviour as the peer's ``InMemoryMemoryPort`` (name ``in-memory-authority``;
every seeded record and every commit advances the store revision by one), plus the
change feed, scope listing and conflict relation of :class:`kernel.ports.MemoryPort`.
Values are copied in and out, so callers never share state with the store: records are
kept as the compact JSON of their normalized form (immutable bytes, verified on the way in
by :func:`kernel.canonical.records.memory_record_blob`; the change feed shares them) and
parsed afresh on every read; events, operations and conflict entries are kept as compact
JSON too when that round-trips exactly (otherwise deep-copied).  Records are indexed by
id and by scope, conflict entries by member id, so a commit, a read or a conflict lookup
never scans the store.
``drop`` / ``restore`` are test hooks simulating an external actor (a record lost, a
backup restored); they bypass the CAS and do not advance the store revision.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

from kernel.canonical.records import memory_record_blob
from kernel.errors import InvalidArgument
from kernel.memory.conflicts import parse_conflict
from kernel.ports import CommitResult, MemoryCommit, json_copy

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency
    orjson = None  # type: ignore[assignment]
_loads: Any = orjson.loads if orjson is not None else json.loads


_FREEZE_OPTIONS: Final = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    if orjson is not None
    else 0
)


def _freeze(value: Mapping[str, Any]) -> bytes | dict[str, Any]:
    """A private copy of a JSON mapping: its compact JSON, or a deep copy when the JSON
    would not give the value back.  Of the serialiser's silent changes (it refuses
    subclasses, dataclasses and datetimes here) a tuple becomes an array — a JSON array
    either way, as in the SQLite adapter — and NaN/±Infinity become ``null``: so a blob
    without ``null`` is taken as is, and one with ``null`` only if it parses back equal."""
    plain = value if type(value) is dict else dict(value)
    if orjson is not None:
        try:
            blob = orjson.dumps(plain, option=_FREEZE_OPTIONS)
        except TypeError:
            pass
        else:
            if (
                b"null" not in blob
                or _nulls_are_top_level_nones(blob, plain)
                or _plain_json(plain)
                or orjson.loads(blob) == plain
            ):
                return _exact(blob)
    return json_copy(plain)


_LEAVES: Final = frozenset({str, int, bool, type(None)})


_JOIN: Final = b"".join


def _exact(blob: bytes) -> bytes:
    """``blob`` in an allocation of its own size.  ``orjson`` ≥ 3.12 returns its output in
    the buffer it grew (at least 4 KiB, never trimmed), so a store keeping its outputs held
    ≈ 6–8 KiB per record, event and operation of a few hundred bytes; a kept blob is copied
    (a two-part join: one exact allocation and one copy)."""
    return _JOIN((blob, b""))


def _nulls_are_top_level_nones(blob: bytes, value: dict[str, Any]) -> bool:
    """Every ``null`` in ``blob`` (the serialiser's output for ``value``) is one of
    ``value``'s own ``None`` values, so none came from a NaN or an infinity.  Each ``None``
    and each non-finite float prints one ``null`` token; tokens are delimited, and any other
    occurrence lies inside a string — so the count of ``null`` is at least the top-level
    ``None``s plus the non-finite floats, and equality leaves no room for one."""
    return blob.count(b"null") == list(value.values()).count(None)


def _plain_json(value: Any) -> bool:
    """Only exact dicts and lists, strings, integers, booleans, ``null`` and finite floats:
    then parsing the serialiser's output gives ``value`` back (it refuses integers it
    cannot print), so ``orjson.loads(blob) == value`` holds without parsing.  ``False``
    means "not shown" (a tuple, a NaN, an enum, …): the caller parses and compares."""
    kind = type(value)
    if kind is dict:
        items: Iterable[Any] = value.values()
    elif kind is list:
        items = value
    elif kind is float:
        return math.isfinite(value)
    else:
        return kind in _LEAVES
    leaves = _LEAVES
    for item in items:
        if type(item) in leaves:
            continue
        if not _plain_json(item):
            return False
    return True


def _thaw(stored: bytes | dict[str, Any]) -> dict[str, Any]:
    if isinstance(stored, bytes):
        value: dict[str, Any] = _loads(stored)
        return value
    return json_copy(stored)


#: One record as the store keeps it: ``(blob, revision, (scope, scopeId), state)`` — a
#: plain tuple of atomic values, which the cyclic garbage collector stops tracking.
_Stored = tuple[bytes, int, tuple[str, "str | None"], str]
_BLOB: Final = 0
_REVISION: Final = 1
_SCOPE: Final = 2
_STATE: Final = 3


def _stored(blob: bytes, record: Mapping[str, Any], previous: _Stored | None = None) -> _Stored:
    scope = (record["scope"], record.get("scopeId"))
    if previous is not None and previous[_SCOPE] == scope:
        scope = previous[_SCOPE]  # the same scope: share the previous version's pair
    return (blob, record["revision"], scope, record["state"])


def _load(stored: _Stored) -> dict[str, Any]:
    record: dict[str, Any] = _loads(stored[_BLOB])
    return record


class InMemoryMemoryPort:
    def __init__(
        self, seed: Iterable[Mapping[str, Any]] = (), *, name: str = "in-memory-authority"
    ):
        self._name = name
        self._records: dict[str, _Stored] = {}
        self._by_scope: dict[tuple[str, str | None], set[str]] = {}
        # events and the change feed as parallel lists (owner / event, revision / record):
        # no tuple per entry for the cyclic collector to count
        self._event_owners: list[str | None] = []
        self._events: list[bytes | dict[str, Any]] = []
        self._reconciliations: dict[str, bytes | dict[str, Any]] = {}
        self._change_revisions: list[int] = []
        self._changes: list[_Stored] = []
        self._revision = 0
        # the conflict relation: entries by conflictId, and conflictIds by member memoryId
        self._conflicts: dict[str, bytes | dict[str, Any]] = {}
        self._conflicts_by_member: dict[str, set[str]] = {}
        self.seed(seed)

    @property
    def name(self) -> str:
        return self._name

    def seed(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Preload records (normalized; each counts as one store revision)."""
        for raw in records:
            stored = self._place(raw)
            self._revision += 1
            self._change_revisions.append(self._revision)
            self._changes.append(stored)

    def _place(self, raw: Mapping[str, Any]) -> _Stored:
        """Verify ``raw`` and make it the current version of its record (no CAS)."""
        blob, record = memory_record_blob(raw)
        stored = _stored(_exact(blob), record)
        memory_id = str(record["memoryId"])
        previous = self._records.get(memory_id)
        if previous is not None and previous[_SCOPE] != stored[_SCOPE]:
            self._by_scope[previous[_SCOPE]].discard(memory_id)
        self._records[memory_id] = stored
        self._by_scope.setdefault(stored[_SCOPE], set()).add(memory_id)
        return stored

    def _file(self, scope: tuple[str, str | None], memory_id: str) -> None:
        ids = self._by_scope.get(scope)
        if ids is None:
            ids = self._by_scope[scope] = set()
        ids.add(memory_id)

    # ----------------------------------------------------------------- port
    def read(self, memory_id: str) -> dict[str, Any] | None:
        stored = self._records.get(memory_id)
        return _load(stored) if stored is not None else None

    def commit(self, commit: MemoryCommit, expected_revision: int) -> CommitResult:
        blob, record = memory_record_blob(commit.record)
        memory_id = str(record["memoryId"])
        current = self._records.get(memory_id)
        actual = current[_REVISION] if current is not None else 0
        if actual != expected_revision:
            return CommitResult(False, self._revision, current_revision=actual)
        if record["revision"] != expected_revision + 1:
            raise InvalidArgument(
                "a commit must advance the record revision by one",
                details={"memoryId": memory_id, "expectedRevision": expected_revision},
            )
        owner, event = commit.event.get("memoryId"), _freeze(commit.event)
        operation = commit.reconciliation
        frozen = _freeze(operation) if operation is not None else None
        scope = (record["scope"], record.get("scopeId"))
        if current is not None and current[_SCOPE] == scope:
            scope = current[_SCOPE]  # the same scope: share the previous version's pair
        stored = (_exact(blob), record["revision"], scope, record["state"])
        self._records[memory_id] = stored
        if current is None or current[_SCOPE] is not stored[_SCOPE]:  # not already filed
            if current is not None:
                self._by_scope[current[_SCOPE]].discard(memory_id)
            self._file(stored[_SCOPE], memory_id)
        self._event_owners.append(owner)
        self._events.append(event)
        if operation is not None and frozen is not None:
            self._reconciliations[str(operation["requestId"])] = frozen
        self._revision += 1
        self._change_revisions.append(self._revision)
        self._changes.append(stored)
        return tuple.__new__(CommitResult, (True, self._revision, stored[_REVISION], None))

    def store_revision(self) -> int:
        return self._revision

    def list_scope(
        self, scope: str, scope_id: str | None, states: frozenset[str] | None = None
    ) -> list[dict[str, Any]]:
        ids = self._by_scope.get((scope, scope_id), ())
        out = []
        for memory_id in sorted(ids):
            stored = self._records[memory_id]
            if states is None or stored[_STATE] in states:
                out.append(_load(stored))
        return out

    def records(self) -> list[dict[str, Any]]:
        return [_load(stored) for _, stored in sorted(self._records.items())]

    def changes(self, since: int = 0) -> list[tuple[int, dict[str, Any]]]:
        # the feed is ordered by revision: find the first entry after ``since``
        start = bisect.bisect_right(self._change_revisions, since) if since > 0 else 0
        return [
            (rev, _load(stored))
            for rev, stored in zip(
                self._change_revisions[start:], self._changes[start:], strict=True
            )
        ]

    def events(self, memory_id: str | None = None) -> list[dict[str, Any]]:
        if memory_id is None:
            return [_thaw(e) for e in self._events]
        return [
            _thaw(e)
            for owner, e in zip(self._event_owners, self._events, strict=True)
            if owner == memory_id
        ]

    def get_reconciliation(self, request_id: str) -> dict[str, Any] | None:
        operation = self._reconciliations.get(request_id)
        return _thaw(operation) if operation is not None else None

    def put_reconciliation(self, operation: Mapping[str, Any]) -> None:
        self._reconciliations[str(operation["requestId"])] = _freeze(operation)

    def reconciliations(self) -> dict[str, dict[str, Any]]:
        return {key: _thaw(value) for key, value in self._reconciliations.items()}

    def put_conflict(self, conflict: Mapping[str, Any]) -> bool:
        conflict_id = str(conflict["conflictId"])
        members = [str(m) for m in conflict["memoryIds"]]
        if conflict_id in self._conflicts:
            return False  # append-only: the first entry for the pair stays
        self._conflicts[conflict_id] = _freeze(conflict)
        for memory_id in members:
            self._conflicts_by_member.setdefault(memory_id, set()).add(conflict_id)
        return True

    def conflicts_of(self, memory_ids: Iterable[str]) -> list[dict[str, Any]]:
        found: set[str] = set()
        for memory_id in memory_ids:
            found.update(self._conflicts_by_member.get(memory_id, ()))
        return [_thaw(self._conflicts[k]) for k in sorted(found)]

    def conflicts(self) -> list[dict[str, Any]]:
        return [_thaw(self._conflicts[k]) for k in sorted(self._conflicts)]

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
            port._place(raw)
        events = snapshot.get("events") or ()
        port._event_owners = [e.get("memoryId") for e in events]
        port._events = [_freeze(e) for e in events]
        port._reconciliations = {
            str(k): _freeze(v) for k, v in (snapshot.get("reconciliations") or {}).items()
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
        stored = self._records.pop(memory_id, None)
        if stored is not None:
            self._by_scope[stored[_SCOPE]].discard(memory_id)

    def restore(self, raw: Mapping[str, Any]) -> None:
        """An external restore put this record back (normalized; bypasses CAS)."""
        self._place(raw)
