"""Memory recall (design 108 §10): ``rank_memory_records`` and ``recall_memory``.

The pipeline, in the design's order::

    scope admission → sensitivity / allowed-sink filter → lexical candidates
      → provenance and confidence adjustment → conflict / supersession filter
      → diversity and token budget → stable top-K + attribution

* **Scope admission**: a record is a candidate only if ``(scope, scopeId)`` is one of the
  request's admissions; with an index, only admitted partitions are searched, and the
  degraded scan lists admitted scopes only (``MemoryPort.list_scope``) — never a
  cross-scope scan.  State must be ``active``/``reinforced``; ``expiresAt`` must be after
  ``now``.
* **Sink filter**: ``allowedSinks`` holds ``*`` or the request's sink.
* **Lexical candidates**: :mod:`kernel.memory.lexical` (coverage of query units; ``lexical > 0``).
* **Adjustment**: ``relevance = min(1, 0.65·lexical + 0.2·confidence + 0.15·importance)``,
  reported as ``Number(relevance.toFixed(6))`` (JavaScript rounding, reproduced exactly).
* **Supersession** (profile ``canonical``): a candidate named in the ``supersedes`` of
  another admitted, visible record is hidden — the successor speaks for it.  The peer
  profile keeps the peer's behaviour (superseded *records* are already excluded by state).
* **Conflicts** (profile ``canonical``, :func:`recall_memory`): both sides of an
  unresolved conflict (:mod:`kernel.memory.conflicts`) stay recallable; a returned hit
  names its partners that the request could recall itself in ``conflictsWith`` (absent
  when there are none, so conflict-free results are unchanged).
* **Order**: relevance (unrounded) desc, then — canonical only — BM25 desc, then importance
  desc, then memoryId by the peer's ``localeCompare("en")``; stable.
* **Diversity and budget**: at most ``max(2, ceil(limit/2))`` per category while some
  candidate has a category not yet taken; a record whose ``max(1, ceil(utf8Bytes/4))``
  tokens exceed the remaining budget is skipped and the scan goes on; stop at ``limit``.
* **Attribution**: each hit carries memoryId, scope (+scopeId), provenance (source),
  confidence, importance, relevance, estimatedTokens, ``truncated`` (always ``false``:
  records are never cut, they are skipped) and the record.  The result is digested under
  ``chainlesschain.memory-recall/v1``.

``rank_memory_records(records, request)`` is the peer's ``rankMemoryRecords`` (profile
``"peer"``, byte-identical results and digests).  ``recall_memory(port, request, index=…)``
is the kernel path over a :class:`~kernel.ports.MemoryPort`: the index proposes,
the authority decides — every hit is re-read from the port and its digest checked against
the indexed one.  A lost, corrupt or inconsistent index is rebuilt from the authority or
the call degrades to an explainable lexical scan of the admitted scopes; either way the
outcome carries :class:`~kernel.outcomes.IndexDegraded`.  Pure: no clock (``now`` is
required), no I/O beyond the port handed in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import (
    ROUND_HALF_EVEN,
    ROUND_HALF_UP,
    Context,
    Decimal,
    DivisionByZero,
    InvalidOperation,
    Overflow,
)
from functools import partial
from typing import Any, Final, Literal

from kernel.canonical import digest as _digest
from kernel.canonical.checks import (
    MISSING,
    bounded_integer,
    bounded_string,
    digest_value,
    known_fields,
    object_value,
    scope_pair,
)
from kernel.canonical.items import (
    MEMORY_RECORD_DOMAIN,
    identifier_collation_key,
    peer_collation_key,
)
from kernel.canonical.records import normalize_memory_record
from kernel.canonical.timestamps import iso_to_epoch_ms, parse_timestamp
from kernel.errors import DigestMismatch, InvalidArgument, NonPortableValue
from kernel.memory.conflicts import conflict_partners, parse_conflict
from kernel.memory.index import RECALLABLE_STATES, IndexCorrupt, IndexHit, LexicalIndex, scan
from kernel.memory.lexical import (
    Analyzer,
    LexicalQuery,
    analyze,
    compile_query,
    lexical_relevance,
    lexical_text,
    score,
)
from kernel.outcomes import IndexDegraded
from kernel.ports import MemoryPort

__all__ = (
    "RECALL_DOMAIN",
    "RecallOutcome",
    "RecallProfile",
    "RecallRequest",
    "RecordIndex",
    "build_index",
    "estimated_tokens",
    "index_record",
    "js_to_fixed",
    "lexical_relevance",
    "normalize_recall_record",
    "parse_recall_request",
    "rank_memory_records",
    "recall_memory",
    "relevance",
)

RecallProfile = Literal["peer", "canonical"]
IndexFallback = Literal["rebuild", "lexical"]
RECALL_DOMAIN: Final = "chainlesschain.memory-recall/v1"
INDEX_NAME: Final = "memory-recall-lexical"
_REQUEST_FIELDS: Final = frozenset(
    {"query", "sink", "scopeAdmissions", "limit", "tokenBudget", "now"}
)
_SORTED_SETS: Final = ("tags", "allowedSinks")


# --- numbers --------------------------------------------------------------------------------


def js_to_fixed(value: float, digits: int = 6) -> float:
    """``Number(value.toFixed(digits))``: the exact binary value rounded half away from zero
    (ECMA-262 picks the larger ``n`` on a tie), read back as the nearest double."""
    exact = Decimal.from_float(value)  # exact; reads and signals no context
    context = _decimal_context()
    step = Decimal(1).scaleb(-digits, context)
    return float(exact.quantize(step, rounding=ROUND_HALF_UP, context=context))


def _decimal_context() -> Context:
    """A fresh context with the values of ``decimal``'s default one, for this call alone:
    the result never depends on the thread's ambient context (which any caller may
    change), and no shared context's flags are touched."""
    return Context(
        prec=28,
        rounding=ROUND_HALF_EVEN,
        Emin=-999_999,
        Emax=999_999,
        capitals=1,
        clamp=0,
        flags=[],
        traps=[InvalidOperation, DivisionByZero, Overflow],
    )


def relevance(lexical: float, confidence: float, importance: float) -> float:
    """The peer's unrounded relevance (evaluated in its order)."""
    return min(1, lexical * 0.65 + confidence * 0.2 + importance * 0.15)


def estimated_tokens(content: str) -> int:
    """``max(1, ceil(utf8Bytes/4))`` (a lone surrogate counts 3 bytes, as in Node)."""
    size = len(content) if content.isascii() else len(content.encode("utf-8", "surrogatepass"))
    return max(1, math.ceil(size / 4))


# --- request --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecallRequest:
    query: str
    sink: str
    limit: int
    token_budget: int
    now: str
    now_ms: int
    admissions: tuple[tuple[str, str | None], ...]


def parse_recall_request(raw: Any) -> RecallRequest:
    """Validate in the peer's order (first fault wins).  Differences: ``now`` is required
    (the kernel reads no clock) and a ``null`` admission is ``invalid_argument`` (the peer
    throws a ``TypeError``)."""
    request = object_value(raw, "MemoryRecallRequest")
    known_fields(request, _REQUEST_FIELDS, "MemoryRecallRequest")
    query = bounded_string(request.get("query"), "query", 1, 32 * 1024)
    sink = bounded_string(request.get("sink"), "sink", 1, 128)
    limit = request.get("limit")
    limit = bounded_integer(10 if limit is None else limit, "limit", 1, 1000)
    budget = request.get("tokenBudget")
    budget = bounded_integer(4096 if budget is None else budget, "tokenBudget", 1, 1_048_576)
    if "now" not in request:
        raise InvalidArgument(
            "now is required: the kernel reads no clock", details={"field": "now"}
        )
    now_ms, now = parse_timestamp(bounded_string(request["now"], "now", 20, 64), "now")
    admissions = request.get("scopeAdmissions")
    if not isinstance(admissions, list | tuple) or not 1 <= len(admissions) <= 128:
        raise InvalidArgument("scopeAdmissions must contain 1-128 entries")
    parsed: list[tuple[str, str | None]] = []
    for i, entry in enumerate(admissions):
        label = f"scopeAdmissions[{i}]"
        if entry is None:
            raise InvalidArgument(f"{label} must be an object", details={"field": label})
        entry = entry if isinstance(entry, Mapping) else {}  # JS: a primitive's .scope is undefined
        scope_id = entry.get("scopeId", MISSING)
        parsed.append(scope_pair(entry.get("scope"), scope_id, f"{label}.scope"))
    return RecallRequest(query, sink, limit, budget, now, now_ms, tuple(parsed))


# --- records --------------------------------------------------------------------------------


def _normalize(raw: Any) -> dict[str, Any]:
    """``normalize_memory_record``; for a record whose ``tags``/``allowedSinks`` hold
    non-ASCII text (KD-1: their ICU order is not reproduced) the supplied order is
    accepted when the supplied digest binds it (see KNOWN_DIFFERENCES.md, KD-R1)."""
    try:
        return normalize_memory_record(raw)
    except NonPortableValue:
        if not isinstance(raw, Mapping) or "digest" not in raw:
            raise
        held = {f: raw[f] for f in _SORTED_SETS if _non_ascii_set(raw.get(f))}
        if not held:
            raise
    supplied = digest_value(raw["digest"])
    stand_in = {k: v for k, v in raw.items() if k != "digest"}
    for name, values in held.items():
        stand_in[name] = [f"kd-r1-{i:04d}" for i in range(len(values))]
    record = normalize_memory_record(stand_in)  # every other check, in the peer's order
    del record["digest"]
    for name, values in held.items():
        ascii_order = [v for v in values if v.isascii()]
        if ascii_order != sorted(ascii_order, key=peer_collation_key):
            raise DigestMismatch(
                "MemoryRecord digest does not match canonical content",
                details={"memoryId": record["memoryId"]},
            )
        record[name] = list(values)
    if _digest.digest(record, MEMORY_RECORD_DOMAIN, "peer") != supplied:
        raise DigestMismatch(
            "MemoryRecord digest does not match canonical content",
            details={"memoryId": record["memoryId"]},
        )
    record["digest"] = supplied
    return record


def normalize_recall_record(raw: Any) -> dict[str, Any]:
    """A record as :func:`rank_memory_records` accepts it: ``normalize_memory_record``,
    except that a non-ASCII ``tags`` / ``allowedSinks`` order bound by the supplied digest
    is kept (KD-R1).  For shells that seed a read-only recall store."""
    return _normalize(raw)


def _non_ascii_set(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) > 1
        and all(type(v) is str for v in value)
        and not all(v.isascii() for v in value)
        and len(set(value)) == len(value)
    )


def _governed(record: Mapping[str, Any], req: RecallRequest) -> bool:
    """State, expiry, scope admission and sink: the record may be recalled at all."""
    if record["state"] not in RECALLABLE_STATES:
        return False
    expires = record["retentionPolicy"].get("expiresAt")
    if expires is not None and iso_to_epoch_ms(expires) <= req.now_ms:
        return False
    if (record["scope"], record.get("scopeId")) not in req.admissions:
        return False
    sinks = record["allowedSinks"]
    return "*" in sinks or req.sink in sinks


# --- ranking, selection, output -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Scored:
    record: Mapping[str, Any]
    relevance: float
    bm25: float


def _order(entries: list[_Scored], profile: RecallProfile) -> list[_Scored]:
    if profile == "peer":
        entries.sort(key=lambda e: identifier_collation_key(e.record["memoryId"]))
        entries.sort(key=lambda e: (-e.relevance, -e.record["importance"]))
    else:
        entries.sort(key=lambda e: identifier_collation_key(e.record["memoryId"]))
        entries.sort(key=lambda e: (-e.relevance, -e.bm25, -e.record["importance"]))
    return entries


def _select(scored: list[_Scored], req: RecallRequest) -> tuple[list[dict[str, Any]], int]:
    results: list[dict[str, Any]] = []
    used = 0
    taken: dict[str, int] = {}
    cap = max(2, math.ceil(req.limit / 2))
    categories = len({e.record["category"] for e in scored})
    for entry in scored:
        if len(results) >= req.limit:
            break
        record = entry.record
        tokens = estimated_tokens(record["content"])
        if used + tokens > req.token_budget:
            continue
        count = taken.get(record["category"], 0)
        if count >= cap and len(taken) < categories:
            continue
        hit: dict[str, Any] = {"memoryId": record["memoryId"], "scope": record["scope"]}
        if record.get("scopeId"):
            hit["scopeId"] = record["scopeId"]
        hit["provenance"] = record["provenance"]
        hit["confidence"] = record["confidence"]
        hit["importance"] = record["importance"]
        hit["relevance"] = js_to_fixed(entry.relevance)
        hit["estimatedTokens"] = tokens
        hit["truncated"] = False
        hit["record"] = record
        results.append(hit)
        used += tokens
        taken[record["category"]] = count + 1
    return results, used


def _output(
    req: RecallRequest,
    scored: list[_Scored],
    annotate: Callable[[list[dict[str, Any]]], None] | None = None,
) -> dict[str, Any]:
    results, used = _select(scored, req)
    if annotate is not None:  # before the digest: the digest covers what it adds
        annotate(results)
    output: dict[str, Any] = {
        "query": req.query,
        "sink": req.sink,
        "tokenBudget": req.token_budget,
        "usedTokens": used,
        "totalCandidates": len(scored),
        "results": results,
    }
    output["digest"] = _digest.digest(output, RECALL_DOMAIN, "peer")
    return output


def _analyzer(profile: RecallProfile) -> Analyzer:
    if profile not in ("peer", "canonical"):
        raise InvalidArgument("unknown recall profile", details={"profile": profile})
    return "peer" if profile == "peer" else "canonical"


def _score(hits: Iterable[IndexHit], records: Mapping[str, Mapping[str, Any]]) -> list[_Scored]:
    out: list[_Scored] = []
    for hit in hits:
        record = records[hit.doc_id]
        rel = relevance(hit.lexical, record["confidence"], record["importance"])
        out.append(_Scored(record, rel, hit.bm25))
    return out


def _supersession(scored: list[_Scored], visible: Mapping[str, Mapping[str, Any]]) -> list[_Scored]:
    """Hide candidates that a visible admitted record supersedes."""
    hidden = {t for r in visible.values() for t in r.get("supersedes") or ()}
    return [e for e in scored if e.record["memoryId"] not in hidden] if hidden else scored


def rank_memory_records(
    records: Sequence[Any], request: Any, *, profile: RecallProfile = "peer"
) -> dict[str, Any]:
    """The peer's ``rankMemoryRecords(records, request)`` over a list of records (every
    record is normalized and its digest re-verified, as the peer does)."""
    req = parse_recall_request(request)
    analyzer = _analyzer(profile)
    query = compile_query(req.query, analyzer)
    normalized = [_normalize(r) for r in records]
    if profile == "peer":
        return _output(req, _peer_scored(normalized, req, query))
    pool = [
        r
        for r in normalized
        if r["state"] in RECALLABLE_STATES and (r["scope"], r.get("scopeId")) in req.admissions
    ]
    return _output(req, _canonical(query, req, pool))


def _lexical(query: LexicalQuery, record: Mapping[str, Any]) -> float:
    if query.match_all:
        return 1
    if not query.units:
        return 0
    return score(query, analyze(lexical_text(record), query.analyzer))


def _peer_scored(
    records: Iterable[Mapping[str, Any]], req: RecallRequest, query: LexicalQuery
) -> list[_Scored]:
    """The peer's scan: governance, then ``lexical > 0``, in the peer's order."""
    scored: list[_Scored] = []
    for record in records:
        if _governed(record, req):
            lexical = _lexical(query, record)
            if lexical > 0:
                rel = relevance(lexical, record["confidence"], record["importance"])
                scored.append(_Scored(record, rel, 0.0))
    return _order(scored, "peer")


def _canonical(
    query: LexicalQuery, req: RecallRequest, pool: Sequence[Mapping[str, Any]]
) -> list[_Scored]:
    """Canonical ranking over the admitted recallable ``pool`` (the BM25 population)."""
    docs = (
        (
            (r["scope"], r.get("scopeId")),
            r["memoryId"],
            r["digest"],
            analyze(lexical_text(r), query.analyzer),
        )
        for r in pool
    )
    hits = scan(query, docs)
    by_id = {r["memoryId"]: r for r in pool}
    visible = {i: r for i, r in by_id.items() if _governed(r, req)}
    scored = _score((h for h in hits if h.doc_id in visible), by_id)
    return _order(_supersession(scored, visible), "canonical")


# --- the kernel path: a MemoryPort and its index --------------------------------------------


def index_record(index: LexicalIndex, record: Mapping[str, Any]) -> None:
    """Project one authoritative record: recallable states are indexed, others removed."""
    if record["state"] in RECALLABLE_STATES:
        index.add(
            (record["scope"], record.get("scopeId")),
            record["memoryId"],
            lexical_text(record),
            digest=record["digest"],
            revision=record["revision"],
            supersedes=record.get("supersedes") or (),
        )
    else:
        index.remove(record["memoryId"])


def build_index(
    records: Iterable[Mapping[str, Any]], analyzer: Analyzer = "canonical", watermark: int = 0
) -> LexicalIndex:
    """A fresh index over ``records`` (authoritative, normalized)."""
    index = LexicalIndex(analyzer, watermark=watermark)
    for record in records:
        index_record(index, record)
    return index


class RecordIndex:
    """The recall index of one :class:`MemoryPort`: a projection that follows the port's
    change feed (``sync``), can be rebuilt from it (``rebuild``), persisted and reloaded
    (``to_wire`` / ``load``), lost or damaged (``fault``).  It is never consulted for
    anything but candidate ids."""

    def __init__(self, analyzer: Analyzer = "canonical", index: LexicalIndex | None = None):
        self.analyzer: Analyzer = analyzer
        self.index = index
        self.fault: str | None = None if index is not None else "index_missing"

    def rebuild(self, port: MemoryPort) -> LexicalIndex:
        watermark = port.store_revision()
        self.index = build_index(port.records(), self.analyzer, watermark)
        self.fault = None
        return self.index

    def sync(self, port: MemoryPort) -> None:
        """Apply the change feed up to the port's store revision (:class:`IndexCorrupt`
        when the index is missing, ahead of its authority, or the feed has a gap)."""
        index = self.index
        if index is None:
            raise IndexCorrupt("no index to synchronise")
        current = port.store_revision()
        if index.watermark == current:
            return
        if index.watermark > current:
            raise IndexCorrupt("index is ahead of its authority")
        last = index.watermark
        for revision, record in port.changes(index.watermark):
            if revision != last + 1:
                raise IndexCorrupt("change feed has a gap")
            index_record(index, record)
            last = revision
        if last != current:
            raise IndexCorrupt("change feed does not reach the store revision")
        index.watermark = current

    def load(self, wire: Any) -> bool:
        """Adopt a persisted snapshot; a damaged one leaves the index faulted."""
        try:
            loaded = LexicalIndex.from_wire(wire)
        except IndexCorrupt:
            self.index, self.fault = None, "index_corrupt"
            return False
        if loaded.analyzer != self.analyzer:
            self.index, self.fault = None, "index_analyzer_mismatch"
            return False
        self.index, self.fault = loaded, None
        return True

    def to_wire(self) -> dict[str, Any] | None:
        return self.index.to_wire() if self.index is not None else None


@dataclass(frozen=True, slots=True)
class RecallOutcome:
    """The recall result (peer shape + ``memoryRevision``), the path that produced it and,
    when the index failed, the :class:`IndexDegraded` outcome."""

    result: dict[str, Any]
    path: Literal["index", "scan"]
    degraded: IndexDegraded | None = None


def recall_memory(
    port: MemoryPort,
    request: Any,
    *,
    index: RecordIndex | None = None,
    profile: RecallProfile = "canonical",
    on_index_failure: IndexFallback = "rebuild",
) -> RecallOutcome:
    """``recallMemory``: rank the port's admitted records for ``request``.

    Without ``index`` the admitted scopes are scanned (``path="scan"``).  With one, the
    index proposes candidates from the admitted partitions and the port decides; if the
    index is missing, corrupt, out of sync or inconsistent with the authority it is
    rebuilt (``on_index_failure="rebuild"``) or the call scans the admitted scopes
    (``"lexical"``), and the outcome says so.  Either way the records are the same."""
    req = parse_recall_request(request)
    analyzer = _analyzer(profile)
    if on_index_failure not in ("rebuild", "lexical"):
        raise InvalidArgument("on_index_failure must be 'rebuild' or 'lexical'")
    if index is not None and index.analyzer != analyzer:
        raise InvalidArgument(
            "index analyzer does not match the recall profile",
            details={"index": index.analyzer, "profile": profile},
        )
    query = compile_query(req.query, analyzer)
    revision = port.store_revision()
    degraded: IndexDegraded | None = None
    path: Literal["index", "scan"] = "scan"
    scored: list[_Scored] | None = None
    if index is not None:
        scored, reason = _via_index(port, req, query, profile, index)
        if reason is not None:
            index.fault = reason
            fallback: IndexFallback = on_index_failure
            if fallback == "rebuild":
                index.rebuild(port)
                scored, again = _via_index(port, req, query, profile, index)
                if again is not None:  # the authority moved under the rebuild: scan
                    index.fault, fallback, scored = again, "lexical", None
            degraded = IndexDegraded(index=INDEX_NAME, fallback=fallback, reason_code=reason)
        path = "index" if scored is not None else "scan"
    if scored is None:
        scored = _scan_port(port, req, query, profile)
    annotate = partial(_show_conflicts, port, req) if profile == "canonical" else None
    result = _output(req, scored, annotate)
    result["memoryRevision"] = revision
    return RecallOutcome(result, path, degraded)


def _show_conflicts(port: MemoryPort, req: RecallRequest, results: list[dict[str, Any]]) -> None:
    """§9.3: a hit in an unresolved conflict names its partners (``conflictsWith``,
    sorted) — only partners this request could recall itself (state, expiry, scope
    admission and sink decided on the authoritative record), so no id leaks across scopes
    or sinks.  The same on every path: the relation and the partners come from the port."""
    if not results:
        return
    ids = [hit["memoryId"] for hit in results]
    entries = [parse_conflict(raw) for raw in port.conflicts_of(ids)]
    if not entries:
        return
    seen: dict[str, bool] = {}

    def visible(memory_id: str) -> bool:
        if memory_id not in seen:
            record = port.read(memory_id)
            seen[memory_id] = record is not None and _governed(record, req)
        return seen[memory_id]

    partners = conflict_partners(entries, ids, visible)
    for hit in results:
        others = partners.get(hit["memoryId"])
        if others:
            hit["conflictsWith"] = others


def _scan_port(
    port: MemoryPort, req: RecallRequest, query: LexicalQuery, profile: RecallProfile
) -> list[_Scored]:
    """The index-free path: exactly the admitted scopes, one ``list_scope`` each."""
    pool: list[dict[str, Any]] = []
    for scope, scope_id in dict.fromkeys(req.admissions):
        pool.extend(port.list_scope(scope, scope_id, RECALLABLE_STATES))
    if profile == "canonical":
        return _canonical(query, req, pool)
    return _peer_scored(pool, req, query)


def _consistent(record: Mapping[str, Any] | None, digest: str, partition: Any) -> bool:
    return (
        record is not None
        and record["digest"] == digest
        and (record["scope"], record.get("scopeId")) == partition
        and record["state"] in RECALLABLE_STATES
    )


def _via_index(
    port: MemoryPort,
    req: RecallRequest,
    query: LexicalQuery,
    profile: RecallProfile,
    holder: RecordIndex,
) -> tuple[list[_Scored] | None, str | None]:
    """Index candidates, re-read and checked against the authority; ``(None, reason)``
    when the index cannot be trusted for this call."""
    if holder.index is None or holder.fault is not None:
        return None, holder.fault or "index_missing"
    try:
        holder.sync(port)
    except IndexCorrupt:
        return None, "index_out_of_sync"
    index = holder.index
    hits = index.search(query, req.admissions)
    records: dict[str, Mapping[str, Any]] = {}
    for hit in hits:
        record = port.read(hit.doc_id)
        if not _consistent(record, hit.digest, hit.partition):
            return None, "index_entry_mismatch"
        assert record is not None
        records[hit.doc_id] = record
    visible = {i for i, r in records.items() if _governed(r, req)}
    scored = _score((h for h in hits if h.doc_id in visible), records)
    if profile == "canonical":
        hidden: set[str] = set()
        for entry in scored:
            target = entry.record["memoryId"]
            for successor in index.superseded_by(target, req.admissions):
                found = index.entry(successor)
                current = records.get(successor) or port.read(successor)
                if found is None or not _consistent(current, found.digest, found.partition):
                    return None, "index_entry_mismatch"
                assert current is not None
                if _governed(current, req):
                    hidden.add(target)
        scored = [e for e in scored if e.record["memoryId"] not in hidden]
    return _order(scored, profile), None
