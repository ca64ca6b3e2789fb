"""The memory recall index (design 108 §10, §11): an in-memory inverted index, BM25-class,
that is a *rebuildable projection* of the authoritative records — never their authority.

Shape.  Documents live in *partitions*, one per ``(scope, scopeId)``; a search names the
admitted partitions and touches only their posting lists, so no query can ever see — or
have its statistics shaped by — another scope.  Per partition:

* ``tokens``: token → doc ordinals and term frequencies (``array('I')``, appended in
  ordinal order); ``plain``: non-dense segments of tokens holding dense characters;
  ``dense``: dense segments; ``grams``: character bigrams of dense segments (candidates for
  a dense phrase, confirmed by a substring check against the document's dense segments);
* a document table: id, revision, digest, length, dense segments, ``supersedes``.

A one-term query touches that term's posting list only.  Removal is lazy (the ordinal is
marked dead and skipped; a partition whose dead ordinals outnumber the live ones is
compacted).  Matching follows :mod:`kernel.memory.lexical` exactly, so an index search equals a
scan over the same documents (:func:`scan` computes the same hits from analyses; the
property tests hold them equal).

Scoring.  ``lexical`` is the matched fraction of query units.  ``bm25`` (k1 = 1.2, b = 0.75)
ranks documents of equal relevance: for every matched unit, ``idf · tf·(k1+1) / (tf +
k1·(1 − b + b·dl/avgdl))`` with ``idf = ln(1 + (N − df + 0.5)/(df + 0.5))``; ``N``, ``df``
and ``avgdl`` are counted over the *searched* partitions only, ``tf`` is the unit's token
count (1 for a match through its parts), ``dl`` the document's token count.  All counts are
integers, and contributions are added in query-unit order, so both paths compute the same
floats.

Trust.  The index stores no record bodies and decides nothing about governance: recall
re-reads every hit from the authority and checks its digest against the indexed one
(:mod:`kernel.memory.recall`).  :meth:`LexicalIndex.to_wire` / :meth:`LexicalIndex.from_wire`
persist it with a digest; a damaged or foreign payload raises :class:`IndexCorrupt`, and
the caller rebuilds or degrades (``IndexDegraded``).
"""

from __future__ import annotations

import hashlib
import json
import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kernel.errors import InvalidArgument, KernelError
from kernel.memory.lexical import (
    ANALYZERS,
    Analysis,
    Analyzer,
    LexicalQuery,
    QueryUnit,
    analyze,
    unit_matches,
)

__all__ = (
    "BM25_B",
    "BM25_K1",
    "INDEX_FORMAT",
    "RECALLABLE_STATES",
    "IndexCorrupt",
    "IndexEntry",
    "IndexHit",
    "LexicalIndex",
    "PartitionKey",
    "bm25_weight",
    "idf",
    "scan",
)

PartitionKey = tuple[str, str | None]
RECALLABLE_STATES: Final = frozenset({"active", "reinforced"})
INDEX_FORMAT: Final = "cmk.lexical-index/v1"
BM25_K1: Final = 1.2
BM25_B: Final = 0.75


class IndexCorrupt(KernelError):
    """A persisted index failed its format, digest or consistency check (the index's
    fault, never the records'): rebuild it or degrade to a lexical scan."""

    default_code = "index_corrupt"


def idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def bm25_weight(weight: float, tf: int, dl: int, avgdl: float) -> float:
    norm = 1.0 - BM25_B + BM25_B * (dl / avgdl if avgdl > 0 else 0.0)
    return weight * (tf * (BM25_K1 + 1.0)) / (tf + BM25_K1 * norm)


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """What the index knows of one document: enough to check it against the authority."""

    doc_id: str
    partition: PartitionKey
    revision: int
    digest: str


@dataclass(frozen=True, slots=True)
class IndexHit:
    doc_id: str
    partition: PartitionKey
    digest: str
    lexical: float
    bm25: float


@dataclass(slots=True)
class _Doc:
    doc_id: str
    revision: int
    digest: str
    length: int
    dense: tuple[str, ...]
    supersedes: tuple[str, ...]


def _postings() -> dict[str, array[int]]:
    return {}


@dataclass(slots=True)
class _Partition:
    docs: list[_Doc | None] = field(default_factory=list)
    by_id: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, array[int]] = field(default_factory=_postings)
    tf: dict[str, array[int]] = field(default_factory=_postings)
    plain: dict[str, array[int]] = field(default_factory=_postings)
    dense: dict[str, array[int]] = field(default_factory=_postings)
    grams: dict[str, array[int]] = field(default_factory=_postings)
    supersedes: dict[str, array[int]] = field(default_factory=_postings)
    total_length: int = 0
    dead: int = 0

    @property
    def live(self) -> int:
        return len(self.by_id)

    def add(self, doc: _Doc, analysis: Analysis) -> None:
        ordinal = len(self.docs)
        self.docs.append(doc)
        self.by_id[doc.doc_id] = ordinal
        self.total_length += doc.length
        tokens, tfs = self.tokens, self.tf
        for token, count in analysis.counts.items():
            postings = tokens.get(token)
            if postings is None:
                tokens[token] = array("I", (ordinal,))
                tfs[token] = array("I", (count,))
            else:
                postings.append(ordinal)
                tfs[token].append(count)
        for seg in analysis.plain:
            _append(self.plain, seg, ordinal)
        for seg in analysis.dense:
            _append(self.dense, seg, ordinal)
            if len(seg) > 1:
                for gram in dict.fromkeys(seg[i : i + 2] for i in range(len(seg) - 1)):
                    _append(self.grams, gram, ordinal)
        for target in doc.supersedes:
            _append(self.supersedes, target, ordinal)

    def remove(self, doc_id: str) -> bool:
        ordinal = self.by_id.pop(doc_id, None)
        if ordinal is None:
            return False
        doc = self.docs[ordinal]
        assert doc is not None
        self.total_length -= doc.length
        self.docs[ordinal] = None
        self.dead += 1
        if self.dead > 64 and self.dead > self.live:
            self._compact()
        return True

    def _compact(self) -> None:
        """Drop dead ordinals: renumber live documents in their order."""
        remap = {old: new for new, old in enumerate(sorted(self.by_id.values()))}
        live = [d for d in self.docs if d is not None]
        self.docs = list(live)
        self.by_id = {d.doc_id: i for i, d in enumerate(live)}
        self.dead = 0
        kept: dict[str, array[int]] = {}
        kept_tf: dict[str, array[int]] = {}
        for token, ords in self.tokens.items():
            tfs = self.tf[token]
            pairs = [(remap[o], t) for o, t in zip(ords, tfs, strict=True) if o in remap]
            if pairs:
                kept[token] = array("I", (o for o, _ in pairs))
                kept_tf[token] = array("I", (t for _, t in pairs))
        self.tokens, self.tf = kept, kept_tf
        for name in ("plain", "dense", "grams", "supersedes"):
            table: dict[str, array[int]] = getattr(self, name)
            fresh = {k: array("I", (remap[o] for o in v if o in remap)) for k, v in table.items()}
            setattr(self, name, {k: v for k, v in fresh.items() if v})

    def _live(self, postings: array[int] | None) -> set[int]:
        if postings is None:
            return set()
        if not self.dead:
            return set(postings)
        docs = self.docs
        return {o for o in postings if docs[o] is not None}

    def match(self, unit: QueryUnit) -> dict[int, int]:
        """Live ordinals matching ``unit`` → the unit's term frequency there."""
        docs = self.docs
        exact: dict[int, int] = {}
        ords = self.tokens.get(unit.token)
        if ords is not None:
            exact = {
                o: t for o, t in zip(ords, self.tf[unit.token], strict=True) if docs[o] is not None
            }
        if not (unit.plain or unit.chars or unit.phrases):
            return exact
        cand: set[int] | None = None
        for part in unit.plain:
            found = self._live(self.tokens.get(part)) | self._live(self.plain.get(part))
            cand = found if cand is None else cand & found
        for char in unit.chars:
            found = self._live(self.dense.get(char))
            cand = found if cand is None else cand & found
        for phrase in unit.phrases:
            found = self._live(self.grams.get(phrase[:2]))
            for i in range(1, len(phrase) - 1):
                if not found:
                    break
                found &= self._live(self.grams.get(phrase[i : i + 2]))
            confirmed = set()
            for o in found:
                doc = docs[o]
                if doc is not None and any(phrase in seg for seg in doc.dense):
                    confirmed.add(o)
            cand = confirmed if cand is None else cand & confirmed
        for o in cand or ():
            exact.setdefault(o, 1)
        return exact


def _append(table: dict[str, array[int]], key: str, value: int) -> None:
    postings = table.get(key)
    if postings is None:
        table[key] = array("I", (value,))
    else:
        postings.append(value)


def _rank(
    query: LexicalQuery,
    matches: list[list[dict[int, int]]],
    parts: Sequence[tuple[PartitionKey, Sequence[_Doc | None]]],
    n: int,
    total_length: int,
) -> list[IndexHit]:
    """Shared scoring of both paths.  ``matches[u][p]`` maps document positions of
    partition ``p`` to unit ``u``'s tf; ``parts[p]`` holds the documents by position (only
    matched positions are read, so a search costs its posting lists, not the partition)."""
    units = len(query.units)
    avgdl = total_length / n if n else 0.0
    weights = [idf(n, sum(len(m) for m in per_part)) for per_part in matches]
    hits: list[IndexHit] = []
    for p, (key, docs) in enumerate(parts):
        matched: dict[int, int] = {}
        score: dict[int, float] = {}
        for u in range(units):
            weight = weights[u]
            for pos, tf in matches[u][p].items():
                doc = docs[pos]
                assert doc is not None
                matched[pos] = matched.get(pos, 0) + 1
                score[pos] = score.get(pos, 0.0) + bm25_weight(weight, tf, doc.length, avgdl)
        for pos in sorted(matched):
            doc = docs[pos]
            assert doc is not None
            hits.append(IndexHit(doc.doc_id, key, doc.digest, matched[pos] / units, score[pos]))
    return hits


class LexicalIndex:
    """Partitioned inverted index over one analyzer.  ``watermark`` is the authority's
    store revision the index reflects (maintained by its owner)."""

    def __init__(self, analyzer: Analyzer = "canonical", *, watermark: int = 0) -> None:
        if analyzer not in ANALYZERS:
            raise InvalidArgument("unknown analyzer", details={"analyzer": analyzer})
        self.analyzer: Analyzer = analyzer
        self.watermark = watermark
        self._parts: dict[PartitionKey, _Partition] = {}
        self._where: dict[str, PartitionKey] = {}

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._where

    def partitions(self) -> list[PartitionKey]:
        return [k for k, p in self._parts.items() if p.live]

    def add(
        self,
        partition: PartitionKey,
        doc_id: str,
        text: str,
        *,
        digest: str,
        revision: int = 0,
        supersedes: Sequence[str] = (),
    ) -> None:
        """Index (or re-index) ``doc_id``; a document id lives in one partition only."""
        self.remove(doc_id)
        analysis = analyze(text, self.analyzer)
        doc = _Doc(doc_id, revision, digest, analysis.length, analysis.dense, tuple(supersedes))
        part = self._parts.get(partition)
        if part is None:
            part = self._parts[partition] = _Partition()
        part.add(doc, analysis)
        self._where[doc_id] = partition

    def remove(self, doc_id: str) -> bool:
        key = self._where.pop(doc_id, None)
        return key is not None and self._parts[key].remove(doc_id)

    def entry(self, doc_id: str) -> IndexEntry | None:
        key = self._where.get(doc_id)
        if key is None:
            return None
        part = self._parts[key]
        doc = part.docs[part.by_id[doc_id]]
        assert doc is not None
        return IndexEntry(doc_id, key, doc.revision, doc.digest)

    def entries(self, partition: PartitionKey) -> list[IndexEntry]:
        part = self._parts.get(partition)
        if part is None:
            return []
        docs = [d for d in part.docs if d is not None]
        return [IndexEntry(d.doc_id, partition, d.revision, d.digest) for d in docs]

    def superseded_by(self, target: str, partitions: Iterable[PartitionKey]) -> list[str]:
        """Documents in ``partitions`` whose ``supersedes`` names ``target``."""
        out: list[str] = []
        for key in dict.fromkeys(partitions):
            part = self._parts.get(key)
            if part is not None:
                for o in sorted(part._live(part.supersedes.get(target))):
                    doc = part.docs[o]
                    assert doc is not None
                    out.append(doc.doc_id)
        return out

    def search(self, query: LexicalQuery, partitions: Iterable[PartitionKey]) -> list[IndexHit]:
        """Hits (``lexical > 0``) in the named partitions only."""
        if query.analyzer != self.analyzer:
            raise InvalidArgument(
                "query analyzer differs from the index analyzer",
                details={"query": query.analyzer, "index": self.analyzer},
            )
        keys = [k for k in dict.fromkeys(partitions) if k in self._parts]
        if query.match_all:
            return [
                IndexHit(d.doc_id, k, d.digest, 1, 0.0)
                for k in keys
                for d in self._parts[k].docs
                if d is not None
            ]
        if not query.units:
            return []
        selected = [self._parts[k] for k in keys]
        n = sum(p.live for p in selected)
        total = sum(p.total_length for p in selected)
        matches = [[p.match(u) for p in selected] for u in query.units]
        tables = [(k, p.docs) for k, p in zip(keys, selected, strict=True)]
        return _rank(query, matches, tables, n, total)

    # --- integrity ------------------------------------------------------------------------

    def fingerprint(self) -> str:
        """Digest of the logical content (live documents and their postings), independent of
        insertion order and dead ordinals: a rebuild equals a fresh build iff equal."""
        h = hashlib.sha256(f"{INDEX_FORMAT}\x00{self.analyzer}".encode())
        for key in sorted(self._parts, key=lambda k: (k[0], k[1] or "")):
            part = self._parts[key]
            if not part.live:
                continue
            ids = {o: d.doc_id for o, d in enumerate(part.docs) if d is not None}
            docs = sorted(
                (d.doc_id, d.revision, d.digest, d.length, d.dense, d.supersedes)
                for d in part.docs
                if d is not None
            )
            h.update(json.dumps([key, docs], ensure_ascii=False).encode("utf-8", "surrogatepass"))
            for name in ("tokens", "plain", "dense", "grams", "supersedes"):
                table: dict[str, array[int]] = getattr(part, name)
                for term in sorted(table):
                    live = sorted(ids[o] for o in table[term] if o in ids)
                    if live:
                        h.update(
                            json.dumps([name, term, live], ensure_ascii=False).encode(
                                "utf-8", "surrogatepass"
                            )
                        )
            for term in sorted(part.tokens):
                tfs = sorted(
                    (ids[o], t)
                    for o, t in zip(part.tokens[term], part.tf[term], strict=True)
                    if o in ids
                )
                if tfs:
                    h.update(
                        json.dumps(["tf", term, tfs], ensure_ascii=False).encode(
                            "utf-8", "surrogatepass"
                        )
                    )
        return "sha256:" + h.hexdigest()

    def to_wire(self) -> dict[str, Any]:
        """A JSON-ready snapshot with a digest over its body (for an ``index/`` folder)."""
        body: dict[str, Any] = {
            "format": INDEX_FORMAT,
            "analyzer": self.analyzer,
            "watermark": self.watermark,
            "partitions": [
                {
                    "scope": key[0],
                    "scopeId": key[1],
                    "docs": [
                        [
                            d.doc_id,
                            d.revision,
                            d.digest,
                            d.length,
                            list(d.dense),
                            list(d.supersedes),
                        ]
                        for d in part.docs
                        if d is not None
                    ],
                    "postings": _wire_postings(part),
                }
                for key, part in self._parts.items()
                if part.live
            ],
        }
        return {**body, "digest": _body_digest(body)}

    @classmethod
    def from_wire(cls, wire: Any) -> LexicalIndex:
        """Load a snapshot; any damage raises :class:`IndexCorrupt`."""
        try:
            body = {k: v for k, v in wire.items() if k != "digest"}
            if wire.get("format") != INDEX_FORMAT or wire.get("digest") != _body_digest(body):
                raise IndexCorrupt("index snapshot failed its format or digest check")
            index = cls(wire["analyzer"], watermark=int(wire["watermark"]))
            for entry in wire["partitions"]:
                key: PartitionKey = (str(entry["scope"]), entry["scopeId"])
                part = index._parts[key] = _Partition()
                for doc_id, revision, digest, length, dense, sup in entry["docs"]:
                    doc = _Doc(doc_id, revision, digest, length, tuple(dense), tuple(sup))
                    part.by_id[doc_id] = len(part.docs)
                    part.docs.append(doc)
                    part.total_length += length
                    if index._where.setdefault(doc_id, key) != key:
                        raise IndexCorrupt("index snapshot holds a document twice")
                _load_postings(part, entry["postings"])
        except IndexCorrupt:
            raise
        except Exception as exc:  # any malformed snapshot is the index's fault
            raise IndexCorrupt(
                "index snapshot is malformed", details={"error": type(exc).__name__}
            ) from exc
        return index


_WIRE_TABLES: Final = ("tokens", "tf", "plain", "dense", "grams", "supersedes")


def _wire_postings(part: _Partition) -> dict[str, dict[str, list[int]]]:
    remap = {o: i for i, o in enumerate(o for o, d in enumerate(part.docs) if d is not None)}
    out: dict[str, dict[str, list[int]]] = {}
    for name in _WIRE_TABLES:
        table: dict[str, array[int]] = getattr(part, name)
        if name == "tf":
            continue
        rows: dict[str, list[int]] = {}
        for term, ords in table.items():
            if name == "tokens":
                pairs = [
                    (remap[o], t) for o, t in zip(ords, part.tf[term], strict=True) if o in remap
                ]
                if pairs:
                    rows[term] = [o for o, _ in pairs]
                    out.setdefault("tf", {})[term] = [t for _, t in pairs]
            else:
                live = [remap[o] for o in ords if o in remap]
                if live:
                    rows[term] = live
        out[name] = rows
    return out


def _load_postings(part: _Partition, wire: Mapping[str, Mapping[str, list[int]]]) -> None:
    size = len(part.docs)
    for name in _WIRE_TABLES:
        rows = wire.get(name, {})
        table = {term: array("I", ords) for term, ords in rows.items()}
        if name != "tf" and any(o >= size for ords in table.values() for o in ords):
            raise IndexCorrupt("index snapshot posting points past its documents")
        setattr(part, name, table)
    if set(part.tokens) != set(part.tf) or any(
        len(part.tokens[t]) != len(part.tf[t]) for t in part.tokens
    ):
        raise IndexCorrupt("index snapshot term frequencies do not match its postings")


def _body_digest(body: Mapping[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def scan(
    query: LexicalQuery,
    docs: Iterable[tuple[PartitionKey, str, str, Analysis]],
) -> list[IndexHit]:
    """The index-free path: score ``(partition, doc_id, digest, analysis)`` documents with
    the same statistics an index over exactly those documents would use."""
    order: dict[PartitionKey, list[tuple[str, str, Analysis]]] = {}
    for key, doc_id, digest, analysis in docs:
        order.setdefault(key, []).append((doc_id, digest, analysis))
    if query.match_all:
        return [IndexHit(i, k, d, 1, 0.0) for k, rows in order.items() for i, d, _ in rows]
    if not query.units:
        return []
    n = sum(len(rows) for rows in order.values())
    total = sum(a.length for rows in order.values() for _, _, a in rows)
    matches = [
        [
            {
                pos: a.counts.get(unit.token, 1)
                for pos, (_, _, a) in enumerate(rows)
                if unit_matches(unit, a)
            }
            for rows in order.values()
        ]
        for unit in query.units
    ]
    tables = [
        (k, [_Doc(i, 0, d, a.length, (), ()) for i, d, a in rows]) for k, rows in order.items()
    ]
    return _rank(query, matches, tables, n, total)
