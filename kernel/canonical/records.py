"""MemoryRecord normalisation (design 108 §6), byte-compatible with the peer.

It builds on :mod:`kernel.canonical.items` (whose scalar checks it uses); see that
module's docstring for the rules shared with ContextItems.

**Verified records, by type.**  A record is verified each time it crosses a boundary
(read from a port, handed to the reducer, committed to a port), and the same record often
crosses several in one operation — a deletion's tombstone is produced by the reducer,
committed and purged.  What the kernel produced itself need not be checked again, and
that is said by its type, never by call history: :class:`VerifiedRecord` is an immutable
mapping that only this module constructs — from the full normaliser, or by the reducer's
derivations (:func:`tombstone_record`, :func:`purged_record`) from a record that is itself
a ``VerifiedRecord``.  The reducer and the stores (:func:`memory_record_blob`) take one
without re-checking; any other value — a dict, whatever the process saw before — takes
the full path: field checks, secret scan, canonical digest, digest comparison.  There is
no module state: the same call gives the same answer whatever ran before it
(``tests/kernel/test_purity_probes.py``; docs/adr/0011-purity-by-type.md, superseding the
process-wide memo of ADR 0005).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from kernel.canonical import digest as _digest
from kernel.canonical.checks import (
    MISSING,
    RETENTION_FIELDS,
    bounded_integer,
    bounded_string,
    digest_value,
    identifier,
    known_fields,
    object_value,
    retention_policy,
    scope_pair,
    source_ref,
    timestamp,
)
from kernel.canonical.checks import identifier as _checks_identifier
from kernel.canonical.items import (
    _CONTENT_REF_FIELDS,
    _PROVENANCE_FIELDS,
    _SOURCE_REF_FIELDS,
    MEMORY_RECORD_DOMAIN,
    _array,
    _content_ref,
    _is_one,
    _provenance,
    _string_set,
    canonical_keys,
    kernel_digest,
)
from kernel.canonical.timestamps import parse_timestamp
from kernel.errors import DigestMismatch, InvalidArgument, KernelError
from kernel.vocabulary import (
    IDENTIFIER,
    MAX_CONTENT_CHARS,
    MAX_SAFE_INTEGER,
    MEMORY_STATES,
    RETENTION_MODES,
    SCOPE_ID_REQUIRED,
    SENSITIVITY,
)

__all__ = (
    "LIFECYCLE_FIELDS",
    "MEMORY_FIELDS",
    "VerifiedRecord",
    "contains_secret_material",
    "fast_identifier",
    "memory_record_blob",
    "normalize_memory_record",
    "parse_stored_record",
    "purged_record",
    "tombstone_record",
    "verified_fields",
    "verified_memory_record",
    "verified_stored_record",
)

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency
    _orjson = None  # type: ignore[assignment]

_MEMORY_FIELDS: Final = frozenset(
    {
        "schemaVersion",
        "memoryId",
        "scope",
        "scopeId",
        "category",
        "content",
        "contentRef",
        "summary",
        "provenance",
        "evidenceRefs",
        "confidence",
        "importance",
        "tags",
        "sensitivity",
        "allowedSinks",
        "state",
        "retentionPolicy",
        "createdAt",
        "updatedAt",
        "lastAccessedAt",
        "accessCount",
        "supersedes",
        "revision",
        "digest",
        "deletionFence",
    }
)
#: The fields a MemoryRecord holds (public: what a proposal may set is derived from it).
MEMORY_FIELDS: Final = _MEMORY_FIELDS
#: The fields the store and the lifecycle own: never set by a proposal.
LIFECYCLE_FIELDS: Final = frozenset({
    "schemaVersion", "state", "updatedAt", "lastAccessedAt", "accessCount", "revision",
    "digest", "deletionFence",
})
#: Every dict a normalized MemoryRecord holds draws its keys from these names (all ASCII,
#: byte order = peer order), so its canonical JSON is the encoder's sorted-keys output
#: whenever its two floats are in the band both encoders print alike (:func:`_record_digest`).
_MEMORY_KEYS: Final = canonical_keys(
    (_MEMORY_FIELDS, _SOURCE_REF_FIELDS, _PROVENANCE_FIELDS, _CONTENT_REF_FIELDS,
     RETENTION_FIELDS)
)
_PLAIN_FLOAT_MAX: Final = 4503599627370496.0  # 2**52, as kernel.canonical.digest's fast paths


def _plain_number(value: int | float) -> bool:
    """An int, or a float printed identically by ECMAScript ``Number#toString`` and the
    fast encoder (non-integral, ``1e-4 <= |x| < 2**52``: :mod:`kernel.canonical.digest`'s
    own bound)."""
    return type(value) is int or 1e-4 <= abs(value) < _PLAIN_FLOAT_MAX


def _record_digest(out: dict[str, Any], profile: _digest.Profile) -> str:
    """The canonical digest of a normalized record ``out`` (without ``digest``): the
    sorted-keys fast path when its scores are printed alike by both encoders
    (:func:`_plain_number`: its only floats), else the exact path."""
    keys = (
        _MEMORY_KEYS
        if _plain_number(out["confidence"]) and _plain_number(out["importance"])
        else None
    )
    return kernel_digest(out, MEMORY_RECORD_DOMAIN, profile, keys)


def _number(value: Any, field: str, lo: float = 0, hi: float = 1) -> int | float:
    kind = type(value)
    if (kind is int or kind is float) and lo <= value <= hi:  # NaN fails the comparison
        return int(value) if kind is float and value.is_integer() else value
    raise InvalidArgument(
        f"{field} must be a finite number between {lo:g} and {hi:g}", details={"field": field}
    )


# JavaScript ``\s`` and the ``/iu`` word class (``ſ`` U+017F and ``K`` U+212A fold into it).
_JS_SPACE: Final = (
    "[\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]"
)
_JS_WORD: Final = "[A-Za-z0-9_\\u017f\\u212a]"
_JS_B: Final = f"(?:(?<={_JS_WORD})(?!{_JS_WORD})|(?<!{_JS_WORD})(?={_JS_WORD}))"
_SECRET_PATTERNS: Final = tuple(
    re.compile(p.replace("\\s", _JS_SPACE).replace("\\b", _JS_B), re.IGNORECASE)
    for p in (
        r"-----BEGIN (?:RSA |EC |OPENSSH )?PRIVATE KEY-----",
        r"\bBearer\s+[A-Za-z0-9._~+/=-]{16,}\b",
        r"\b(?:api[_-]?key|access[_-]?token|client[_-]?secret)\s*[:=]\s*[\"']?[A-Za-z0-9._~+/=-]{12,}",
        r"\b(?:recovery|backup)\s+code\s*[:=]\s*[A-Za-z0-9 -]{8,}",
        r"\b(?:session|auth)(?:id|_token)?\s*=\s*[A-Za-z0-9%._~+/=-]{16,}",
    )
)


#: Characters Python's ``re.IGNORECASE`` matches against an ASCII letter besides its two
#: cases (``tests/kernel/test_memory_fastpaths.py`` enumerates every code point).
_FOLD_TO_ASCII: Final = MappingProxyType({0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"})


def _may_hold_secret(folded: str) -> tuple[bool, ...]:
    """Per pattern, a necessary condition on the folded text (a literal every match of
    that pattern contains), so a pattern that cannot match is never run."""
    assign = "=" in folded
    colon = assign or ":" in folded
    return (
        "-----begin" in folded,
        "bearer" in folded,
        colon and ("api" in folded or "access" in folded or "client" in folded),
        colon and "code" in folded,
        assign and ("session" in folded or "auth" in folded),
    )


def contains_secret_material(content: str) -> bool:
    """The peer's secret-material detector (same patterns, JavaScript ``/iu`` semantics)."""
    folded = (content if content.isascii() else content.translate(_FOLD_TO_ASCII)).lower()
    possible = _may_hold_secret(folded)
    if True not in possible:  # no pattern can match: none is run
        return False
    return any(
        may and pattern.search(content) is not None
        for may, pattern in zip(possible, _SECRET_PATTERNS, strict=True)
    )


def _matcher(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    """Whether a string fully matches ``pattern``.  (Not cached: the ids a deletion checks
    — request, memory, fence — are new on every request, so an ``lru_cache`` here missed
    far more often than it hit and cost more than the match; measured, ADR 0011.)"""
    fullmatch = pattern.fullmatch

    def matches(text: str) -> bool:
        return fullmatch(text) is not None

    return matches


#: The identifier check (:data:`kernel.vocabulary.IDENTIFIER`).
_is_identifier: Final = _matcher(IDENTIFIER)


def fast_identifier(value: Any, field: str) -> str:
    """``kernel.canonical.checks.identifier(value, field)`` (the API argument check, in the
    peer's wording): an exact ``str`` matching the identifier pattern (which bounds it to
    1–160 ASCII characters) is returned as is; anything else takes the full check."""
    if type(value) is str and _is_identifier(value):
        return value
    return _checks_identifier(value, field)


def _short_string_set(value: Any, field: str, lo: int) -> list[str]:
    """``_string_set(value, field, lo, 128, 128)``; an empty list or one string of at most
    64 characters (128 UTF-16 units at most) is checked inline, anything else in full."""
    if type(value) is list:
        if not value and lo == 0:
            return []
        if len(value) == 1:
            item = value[0]
            if type(item) is str and 0 < len(item) <= 64:
                return [item]
    return _string_set(value, field, lo, 128, 128)


def _evidence_refs(raw: Any) -> list[dict[str, Any]]:
    if not _array(raw) or not 1 <= len(raw) <= 128:
        raise InvalidArgument("evidenceRefs must contain 1-128 entries")
    out = []
    match = _is_identifier
    for i, entry in enumerate(raw):
        # ``{store, id}`` of two identifiers is checked inline, anything else in full
        if type(entry) is dict and len(entry) == 2:
            store, ident = entry.get("store"), entry.get("id")
            if (
                type(store) is str
                and type(ident) is str
                and match(store)
                and match(ident)
            ):
                out.append({"store": store, "id": ident})
                continue
        out.append(source_ref(entry, f"evidenceRefs[{i}]"))
    return out


#: Retention modes that need no further field (``{"mode": m}`` is complete).
_BARE_MODES: Final = frozenset(RETENTION_MODES - {"until_expired", "legal_hold"})


def _fast_timestamp(value: Any, field: str) -> str:
    """``timestamp(value, field)``: a string of 20 to 32 characters (within the field's
    20–64 UTF-16 units whatever it holds) goes straight to the parser (whose answers for
    exact strings are an ``lru_cache`` of a pure function); anything else takes the full
    path."""
    if type(value) is str and 20 <= len(value) <= 32:
        return parse_timestamp(value, field)[1]
    return timestamp(value, field)


def _fast_provenance(raw: Any) -> dict[str, Any]:
    """``_provenance(raw)``: ``{source, observedAt}`` (an identifier and a timestamp) is
    checked inline, anything else in full."""
    if type(raw) is dict and len(raw) == 2:
        source, observed = raw.get("source"), raw.get("observedAt")
        if type(source) is str and _is_identifier(source) and (
            type(observed) is str and 20 <= len(observed) <= 32
        ):
            try:
                iso = parse_timestamp(observed, "provenance.observedAt")[1]
            except KernelError:
                pass  # the full path reports it, in the peer's order
            else:
                return {"source": source, "observedAt": iso}
    return _provenance(raw)


# --- the verified record ---------------------------------------------------------------------

_LEAVES: Final = frozenset({str, int, float, bool, type(None)})


def _thawed(value: Any) -> Any:
    """A deep copy of a record's value (dicts, lists and JSON scalars only)."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _LEAVES else _thawed(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _LEAVES else _thawed(v) for v in value]
    return value


def _encode(record: dict[str, Any]) -> bytes:
    """The compact JSON a store keeps (``orjson``; ``json`` without it)."""
    if _orjson is not None:
        try:
            return _orjson.dumps(record)
        except TypeError:  # JSONEncodeError: a lone surrogate, …
            pass
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8")  # a lone surrogate raises, as a store would


@dataclass(frozen=True, slots=True, init=False, eq=False, repr=False)
class VerifiedRecord(Mapping[str, Any]):
    """A MemoryRecord in normal form (peer profile, digest checked or computed): what
    :func:`normalize_memory_record` returns, as an immutable mapping.

    Only this module builds one — :func:`verified_memory_record` (from any value, by the
    full normaliser), :func:`verified_stored_record`, and the reducer's derivations
    :func:`tombstone_record` / :func:`purged_record` from a record that is itself
    verified — so the type *is* the proof: the reducer and the stores take a
    ``VerifiedRecord`` without checking it again, and trust nothing else.  Calling the
    class raises ``TypeError``; it cannot be subclassed; copies are the same object, and
    unpickling verifies again.

    Reading a key returns its value; a nested object or array is returned as a fresh
    copy, so no holder can change the record (``to_wire()``: the whole record as a new
    dict).  :attr:`blob` is its compact JSON (what a store keeps), computed once."""

    _record: dict[str, Any]
    _blob: bytes | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "a VerifiedRecord is made by the normaliser only: "
            "use kernel.canonical.records.verified_memory_record(raw)"
        )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError("VerifiedRecord cannot be subclassed")

    # --- the mapping (read-only; nested values copied out)
    def __getitem__(self, key: str) -> Any:
        value = self._record[key]
        return value if type(value) in _LEAVES else _thawed(value)

    def get(self, key: str, default: Any = None) -> Any:
        value = self._record.get(key, MISSING)
        if value is MISSING:
            return default
        return value if type(value) in _LEAVES else _thawed(value)

    def __contains__(self, key: object) -> bool:
        return key in self._record

    def __iter__(self) -> Iterator[str]:
        return iter(self._record)

    def __len__(self) -> int:
        return len(self._record)

    def __eq__(self, other: object) -> bool:
        if type(other) is VerifiedRecord:
            return self._record == other._record
        if isinstance(other, Mapping):
            return self._record == (other if type(other) is dict else dict(other.items()))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"VerifiedRecord({self._record!r})"

    # --- copies
    def __copy__(self) -> VerifiedRecord:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> VerifiedRecord:
        return self

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return verified_memory_record, (self.to_wire(),)  # verified again when unpickled

    def __setstate__(self, state: Any) -> None:
        raise TypeError("a VerifiedRecord is unpickled through verified_memory_record only")

    # --- views
    def to_wire(self) -> dict[str, Any]:
        """The record as a new plain dict (the caller owns it)."""
        return _thawed(self._record)  # type: ignore[no-any-return]

    @property
    def blob(self) -> bytes:
        """The record's compact JSON (immutable; computed on first use)."""
        blob = self._blob
        if blob is None:
            blob = _encode(self._record)
            _set_blob(self, blob)  # a function of the record: not state
        return blob


_new_record: Final = object.__new__
#: The slots' own setters (they bypass the frozen class's ``__setattr__``; only here).
_set_record: Final = VerifiedRecord.__dict__["_record"].__set__
_set_blob: Final = VerifiedRecord.__dict__["_blob"].__set__


def _seal(record: dict[str, Any]) -> VerifiedRecord:
    """The only constructor: ``record`` is a normalized record nobody else holds."""
    sealed: VerifiedRecord = _new_record(VerifiedRecord)
    _set_record(sealed, record)
    _set_blob(sealed, None)
    return sealed


def verified_fields(record: Any) -> Mapping[str, Any]:
    """The normalized fields of ``record`` for the kernel's own reads: a
    :class:`VerifiedRecord`'s own (no copy per read), anything else verified in full.
    Kernel-internal (this module, the reducer, deletion): what is read through it is
    neither changed nor handed out — nested values are the record's own."""
    if type(record) is VerifiedRecord:
        return record._record
    return _normalize(record, "peer")


def normalize_memory_record(raw: Any, *, profile: _digest.Profile = "peer") -> dict[str, Any]:
    """The peer's ``normalizeMemoryRecord``: validated wire dict with ``digest`` (a new
    object; the caller owns it).  A :class:`VerifiedRecord` is already in normal form
    (peer profile): its copy is returned."""
    if type(raw) is VerifiedRecord and profile == "peer":
        return raw.to_wire()
    return _normalize(raw, profile)


def verified_memory_record(raw: Any) -> VerifiedRecord:
    """``normalize_memory_record(raw)`` as a :class:`VerifiedRecord` (``raw`` itself when
    it is one)."""
    if type(raw) is VerifiedRecord:
        return raw
    return _seal(_normalize(raw, "peer"))


def parse_stored_record(blob: bytes) -> dict[str, Any] | None:
    """A store's compact JSON of a record, parsed as :func:`verified_stored_record` needs
    it (``None`` without ``orjson``: the caller reads the record the ordinary way)."""
    if _orjson is None:  # pragma: no cover - orjson is a declared dependency
        return None
    value = _orjson.loads(blob)
    return value if type(value) is dict else None


def verified_stored_record(blob: bytes, raw: dict[str, Any]) -> VerifiedRecord:
    """``verified_memory_record(raw)`` for ``raw = parse_stored_record(blob)`` (bytes a
    store holds): verified in full — a store's bytes are not trusted, whoever wrote them.
    (``blob`` is not reused as the record's own bytes: a stored record may be valid
    without being in normal form; :attr:`~VerifiedRecord.blob` encodes the normal form.)"""
    return _seal(_normalize(raw, "peer"))


def memory_record_blob(raw: Any) -> tuple[bytes, Mapping[str, Any]]:
    """``normalize_memory_record(raw)`` as compact JSON bytes (what a store keeps), and a
    mapping to read the normalized fields from.  A :class:`VerifiedRecord` (e.g. the
    record the reducer just built) is taken as it is: its own bytes and itself; anything
    else is verified in full.  Never store that mapping."""
    if type(raw) is VerifiedRecord:
        return raw.blob, raw
    out = _normalize(raw, "peer")
    return _encode(out), out


# --- records the reducer derives from a verified record -------------------------------------
#
# A deletion turns a verified record into its tombstone and the tombstone into its purged
# version.  Both are built here directly in normal form from a VerifiedRecord (anything
# else is verified first): every field is either copied from the verified input, a
# constant of the design (tombstone provenance, sink, zeroed scores), or checked with the
# normalizer's own check (time, fence, revision); then the canonical digest is computed.
# ``tests/kernel/test_memory_fastpaths.py`` holds both equal to normalizing the slow
# construction (``kernel.memory.lifecycle.tombstone``) on generated records, so what they seal is
# what the normaliser would have produced.

TOMBSTONE_SOURCE: Final = "memory-tombstone"
TOMBSTONE_SINK: Final = "kernel.tombstone"


def _sealed_record(out: dict[str, Any]) -> VerifiedRecord:
    revision = out["revision"]
    if type(revision) is not int or not 1 <= revision <= MAX_SAFE_INTEGER:
        out["revision"] = bounded_integer(revision, "revision", 1)
    out["digest"] = _record_digest(out, "peer")
    return _seal(out)


def tombstone_record(current: Any, *, at: str, fence: str) -> VerifiedRecord:
    """The tombstone of ``current`` in normal form (peer profile): state ``deleted``,
    revision + 1, updated ``at``, body-free, ``fence``.  ``current`` is a
    :class:`VerifiedRecord`, or is verified in full first (and refused if invalid)."""
    record = verified_fields(current)
    memory_id = record["memoryId"]
    at = _fast_timestamp(at, "updatedAt")
    out: dict[str, Any] = {
        "schemaVersion": 1,
        "memoryId": memory_id,
        "scope": record["scope"],
        "scopeId": record.get("scopeId", MISSING),
        "category": "deleted",
        "content": "",
        "provenance": {"source": TOMBSTONE_SOURCE, "observedAt": at},
        "evidenceRefs": [{"store": TOMBSTONE_SOURCE, "id": memory_id, "digest": record["digest"]}],
        "confidence": 0,
        "importance": 0,
        "tags": [],
        "sensitivity": record["sensitivity"],
        "allowedSinks": [TOMBSTONE_SINK],
        "state": "deleted",
        "retentionPolicy": dict(record["retentionPolicy"]),
        "createdAt": record["createdAt"],
        "updatedAt": at,
        "accessCount": 0,
        "revision": record["revision"] + 1,
        "deletionFence": (
            fence
            if type(fence) is str and _is_identifier(fence)
            else identifier(fence, "deletionFence")
        ),
    }
    if out["scopeId"] is MISSING:  # present exactly when ``current`` has one
        del out["scopeId"]
    return _sealed_record(out)


def purged_record(tombstone: Any, *, at: str) -> VerifiedRecord:
    """The purged version of ``tombstone`` in normal form (peer profile): state
    ``purged``, revision + 1, updated ``at``.  ``tombstone`` is a :class:`VerifiedRecord`
    in state ``deleted``, or is verified in full first; any other state is refused (only
    a tombstone has the purged version's body-free shape)."""
    record = verified_fields(tombstone)
    if record["state"] != "deleted":
        raise InvalidArgument(
            "only a deleted MemoryRecord has a purged version",
            details={"memoryId": record["memoryId"], "state": record["state"]},
        )
    out = dict(record)  # shares its nested values with ``tombstone``: neither changes them
    del out["digest"]
    out["state"] = "purged"  # existing keys: their places are kept
    out["updatedAt"] = _fast_timestamp(at, "updatedAt")
    out["revision"] = record["revision"] + 1
    return _sealed_record(out)


def _normalize(raw: Any, profile: _digest.Profile) -> dict[str, Any]:
    value = raw if type(raw) is dict else object_value(raw, "MemoryRecord")
    if not _MEMORY_FIELDS.issuperset(value):
        known_fields(value, _MEMORY_FIELDS, "MemoryRecord")
    get = value.get
    if not _is_one(get("schemaVersion")):
        raise InvalidArgument("MemoryRecord schemaVersion must be 1")
    state = get("state")
    if type(state) is not str or state not in MEMORY_STATES:
        raise InvalidArgument("MemoryRecord state is invalid", details={"state": state})
    sensitivity = get("sensitivity")
    if type(sensitivity) is not str or sensitivity not in SENSITIVITY:
        raise InvalidArgument("MemoryRecord sensitivity is invalid")
    tombstoned = state in ("deleted", "purged")
    content = bounded_string(
        get("content"), "content", 0 if tombstoned else 1, MAX_CONTENT_CHARS
    )
    if not tombstoned and contains_secret_material(content):
        raise InvalidArgument(
            "MemoryRecord content appears to contain secret material", details={"field": "content"}
        )
    if tombstoned:
        if content != "":
            raise InvalidArgument("deleted/purged MemoryRecord content must be empty")
        if "summary" in value:
            raise InvalidArgument("deleted/purged MemoryRecord must not retain summary")
        if "contentRef" in value:
            raise InvalidArgument("deleted/purged MemoryRecord must not retain contentRef")
        if "deletionFence" not in value:
            raise InvalidArgument("deleted/purged MemoryRecord requires deletionFence")
    memory_id = get("memoryId")
    if type(memory_id) is not str or not _is_identifier(memory_id):
        memory_id = identifier(memory_id, "memoryId")
    scope, scope_id = get("scope"), get("scopeId", MISSING)
    if (
        type(scope) is not str
        or type(scope_id) is not str
        or scope not in SCOPE_ID_REQUIRED
        or not _is_identifier(scope_id)
    ):
        scope, scope_id = scope_pair(scope, scope_id)
    out: dict[str, Any] = {"schemaVersion": 1, "memoryId": memory_id, "scope": scope}
    if scope_id is not None:
        out["scopeId"] = scope_id
    category = get("category")
    if type(category) is not str or not _is_identifier(category):
        category = identifier(category, "category")
    out["category"] = category
    out["content"] = content
    if "contentRef" in value:
        out["contentRef"] = _content_ref(value["contentRef"])
    if "summary" in value:
        out["summary"] = bounded_string(value["summary"], "summary", 1, 16 * 1024)
    out["provenance"] = _fast_provenance(get("provenance"))
    out["evidenceRefs"] = _evidence_refs(get("evidenceRefs"))
    # a float strictly inside (0, 1) is a valid score as it is (never integral): inline
    confidence, importance = get("confidence"), get("importance")
    if type(confidence) is not float or not 0 < confidence < 1:
        confidence = _number(confidence, "confidence")
    out["confidence"] = confidence
    if type(importance) is not float or not 0 < importance < 1:
        importance = _number(importance, "importance")
    out["importance"] = importance
    tags = get("tags")
    out["tags"] = [] if type(tags) is list and not tags else _short_string_set(tags, "tags", 0)
    out["sensitivity"] = sensitivity
    out["allowedSinks"] = _short_string_set(get("allowedSinks"), "allowedSinks", 1)
    out["state"] = state
    retention = get("retentionPolicy")
    mode = retention.get("mode") if type(retention) is dict and len(retention) == 1 else None
    if type(mode) is str and mode in _BARE_MODES:
        out["retentionPolicy"] = {"mode": mode}
    else:
        out["retentionPolicy"] = retention_policy(retention)
    out["createdAt"] = _fast_timestamp(get("createdAt"), "createdAt")
    out["updatedAt"] = _fast_timestamp(get("updatedAt"), "updatedAt")
    if "lastAccessedAt" in value:
        out["lastAccessedAt"] = timestamp(value["lastAccessedAt"], "lastAccessedAt")
    access_count = get("accessCount")
    if type(access_count) is not int or not 0 <= access_count <= MAX_SAFE_INTEGER:
        access_count = bounded_integer(access_count, "accessCount")
    out["accessCount"] = access_count
    if "supersedes" in value:
        entries = _string_set(value["supersedes"], "supersedes", 0, 128, 160)
        out["supersedes"] = [identifier(e, "supersedes") for e in entries]
    revision = get("revision")
    if type(revision) is not int or not 1 <= revision <= MAX_SAFE_INTEGER:
        revision = bounded_integer(revision, "revision", 1)
    out["revision"] = revision
    if "deletionFence" in value:
        out["deletionFence"] = identifier(value["deletionFence"], "deletionFence")
    digest = _record_digest(out, profile)
    supplied = get("digest", MISSING)
    # a string equal to the computed digest (well-formed by construction) is that digest
    if (
        supplied is not MISSING
        and not (type(supplied) is str and supplied == digest)
        and digest_value(supplied) != digest
    ):
        raise DigestMismatch(
            "MemoryRecord digest does not match canonical content", details={"memoryId": memory_id}
        )
    out["digest"] = digest
    return out
