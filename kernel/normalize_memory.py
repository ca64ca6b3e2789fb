"""MemoryRecord normalisation (design 108 §6), byte-compatible with the peer.

Split out of :mod:`kernel.normalize` (whose scalar checks it uses); ``from
kernel.normalize import normalize_memory_record`` keeps working.  See that module's
docstring for the rules shared with ContextItems.

**Verified-record memo.**  A record is verified each time it crosses a boundary (read
from a port, handed to the reducer, committed to a port), and the same record often
crosses several in one operation — a deletion's tombstone is produced by the reducer,
committed, read back and purged.  Normalisation is a pure function of the JSON value, so
the outcome for a value already verified in this process is known: the memo holds the
SHA-256 of the compact JSON bytes of recent *outputs* (peer profile; at most
``_MEMO_LIMIT`` entries, about 3.5 MB, cleared when full).  A value whose own bytes hash
to a remembered output *is* that output — every field, every type (the serialiser refuses
subclasses, prints ``1``, ``1.0`` and ``true`` differently, and an output never holds
``null``, which is what a NaN would print as) and the digest it carries, which was checked
or computed when that output was produced.  Any other value, a changed byte anywhere,
takes the full path: field checks, secret scan, canonical digest, digest comparison.
Nothing is skipped for a value that has not been verified exactly as it is
(docs/adr/0005-verified-record-memo.md).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final

from kernel import digest as _digest
from kernel.errors import DigestMismatch, InvalidArgument
from kernel.memory_checks import _IDENTIFIER as _checks_identifier_pattern
from kernel.memory_checks import identifier as _checks_identifier
from kernel.normalize import (
    _CONTENT_REF_FIELDS,
    _IDENTIFIER,
    _MISSING,
    _PROVENANCE_FIELDS,
    _SOURCE_REF_FIELDS,
    MAX_SAFE_INTEGER,
    MEMORY_RECORD_DOMAIN,
    MEMORY_STATES,
    RETENTION_MODES,
    SCOPE_ID_REQUIRED,
    SENSITIVITY,
    _array,
    _content_ref,
    _digest_value,
    _identifier,
    _integer,
    _is_one,
    _known,
    _object,
    _provenance,
    _scope,
    _source_ref,
    _string,
    _string_set,
    _timestamp,
    kernel_value_digest,
    keys_sort_canonically,
)
from kernel.timestamps import _CACHE as _timestamp_cache

__all__ = [
    "contains_secret_material",
    "fast_identifier",
    "forget_verified_records",
    "memory_record_blob",
    "normalize_memory_record",
    "parse_stored_record",
    "purged_record",
    "tombstone_record",
    "verified_memory_record",
    "verified_stored_record",
]

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency
    _orjson = None  # type: ignore[assignment]

_RETENTION_FIELDS: Final = frozenset({"mode", "expiresAt", "maxAgeDays", "legalHoldId"})
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
#: Every dict a normalized MemoryRecord holds uses these key sets (all ASCII, byte order =
#: peer order), so its canonical JSON is the encoder's sorted-keys output whenever its two
#: floats are in the band both encoders print alike (:func:`_plain_number`).
_MEMORY_KEYS_CANONICAL: Final = keys_sort_canonically(
    (_MEMORY_FIELDS, _SOURCE_REF_FIELDS, _PROVENANCE_FIELDS, _CONTENT_REF_FIELDS,
     _RETENTION_FIELDS)
)
_PLAIN_FLOAT_MAX: Final = 4503599627370496.0  # 2**52, as kernel.digest's fast paths


def _plain_number(value: int | float) -> bool:
    """An int, or a float printed identically by ECMAScript ``Number#toString`` and the
    fast encoder (non-integral, ``1e-4 <= |x| < 2**52``: ``kernel.digest``'s own bound)."""
    return type(value) is int or 1e-4 <= abs(value) < _PLAIN_FLOAT_MAX


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
_FOLD_TO_ASCII: Final = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}


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


def _retention(raw: Any) -> dict[str, Any]:
    value = _object(raw, "retentionPolicy")
    _known(value, _RETENTION_FIELDS, "retentionPolicy")
    mode = value.get("mode")
    if type(mode) is not str or mode not in RETENTION_MODES:
        raise InvalidArgument("retentionPolicy.mode is invalid")
    if mode == "until_expired" and "expiresAt" not in value:
        raise InvalidArgument("until_expired retention requires expiresAt")
    if mode == "legal_hold" and "legalHoldId" not in value:
        raise InvalidArgument("legal_hold retention requires legalHoldId")
    out: dict[str, Any] = {"mode": mode}
    if "expiresAt" in value:
        out["expiresAt"] = _timestamp(value["expiresAt"], "retentionPolicy.expiresAt")
    if "maxAgeDays" in value:
        out["maxAgeDays"] = _integer(value["maxAgeDays"], "retentionPolicy.maxAgeDays", 1, 365_000)
    if "legalHoldId" in value:
        out["legalHoldId"] = _identifier(value["legalHoldId"], "retentionPolicy.legalHoldId")
    return out


_IDENTIFIER_MATCH: Final = _IDENTIFIER.fullmatch


_CHECKS_IDENTIFIER_MATCH: Final = _checks_identifier_pattern.fullmatch
#: Strings that passed :func:`fast_identifier` (validity is a function of the string alone;
#: a deletion checks its fence three times); at most 4,096, cleared when full.
_KNOWN_IDENTIFIERS: set[str] = set()


def fast_identifier(value: Any, field: str) -> str:
    """``kernel.memory_checks.identifier(value, field)`` (the API argument check, in the
    peer's wording): an exact ``str`` matching the identifier pattern (which bounds it to
    1–160 ASCII characters), or one that already matched, is returned as is; anything else
    takes the full check."""
    if type(value) is str:
        if value in _KNOWN_IDENTIFIERS:
            return value
        if _CHECKS_IDENTIFIER_MATCH(value) is not None:
            if len(_KNOWN_IDENTIFIERS) >= 4096:
                _KNOWN_IDENTIFIERS.clear()
            _KNOWN_IDENTIFIERS.add(value)
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
    match = _IDENTIFIER_MATCH
    for i, entry in enumerate(raw):
        # ``{store, id}`` of two identifiers is checked inline, anything else in full
        if type(entry) is dict and len(entry) == 2:
            store, ident = entry.get("store"), entry.get("id")
            if (
                type(store) is str
                and type(ident) is str
                and match(store) is not None
                and match(ident) is not None
            ):
                out.append({"store": store, "id": ident})
                continue
        out.append(_source_ref(entry, f"evidenceRefs[{i}]"))
    return out


#: Retention modes that need no further field (``{"mode": m}`` is complete).
_BARE_MODES: Final = frozenset(RETENTION_MODES - {"until_expired", "legal_hold"})
_TIMESTAMP_HIT: Final = _timestamp_cache.get


def _fast_timestamp(value: Any, field: str) -> str:
    """``_timestamp(value, field)``: a string of 20 to 32 characters (within the field's
    20–64 UTF-16 units whatever it holds) that the parser already converted is answered
    from the parser's own cache; anything else takes the full path."""
    if type(value) is str and 20 <= len(value) <= 32:
        hit = _TIMESTAMP_HIT(value)
        if hit is not None:
            return hit[1]
    return _timestamp(value, field)


def _fast_provenance(raw: Any) -> dict[str, Any]:
    """``_provenance(raw)``: ``{source, observedAt}`` (an identifier and a timestamp) is
    checked inline, anything else in full."""
    if type(raw) is dict and len(raw) == 2:
        source, observed = raw.get("source"), raw.get("observedAt")
        if type(source) is str and _IDENTIFIER_MATCH(source) is not None and (
            type(observed) is str and 20 <= len(observed) <= 32
        ):
            hit = _TIMESTAMP_HIT(observed)
            if hit is not None:
                return {"source": source, "observedAt": hit[1]}
    return _provenance(raw)


_MEMO_LIMIT: Final = 32_768
_VERIFIED: set[bytes] = set()
#: The compact JSON of the record verified or derived last (``[blob]``): a verified
#: output's bytes, so equal bytes are a hit without hashing them — the store's commit of
#: the record the reducer just built, byte for byte, is this case.
_RECENT: list[bytes] = [b""]


def _lookup(blob: bytes) -> bytes | None:
    """``None`` when ``blob`` is a verified output's bytes (the most recent one, or one
    whose SHA-256 the memo holds); otherwise its SHA-256, for :func:`_remember`."""
    if blob == _RECENT[0]:
        return None
    key = hashlib.sha256(blob).digest()
    return None if key in _VERIFIED else key


def _memo_key(raw: Any) -> bytes | None:
    """Compact JSON of ``raw`` when it is plain JSON data (no subclasses), else ``None``."""
    if _orjson is None or type(raw) is not dict:
        return None
    try:
        return _orjson.dumps(raw, option=_orjson.OPT_PASSTHROUGH_SUBCLASS)
    except TypeError:  # JSONEncodeError: a subclass, a lone surrogate, a huge int, …
        return None


def _remember(
    out: dict[str, Any], raw_blob: bytes | None = None, raw_key: bytes | None = None
) -> bytes | None:
    """Remember ``out``'s bytes as verified.  ``raw_blob`` / ``raw_key``: the input's bytes
    and their SHA-256, when known — a stored record is usually its own normal form, and
    then ``out``'s bytes are those bytes and their hash is not computed twice."""
    blob = _memo_key(out)
    if blob is not None:
        if len(_VERIFIED) >= _MEMO_LIMIT:
            _VERIFIED.clear()
        if raw_key is None or blob != raw_blob:
            raw_key = hashlib.sha256(blob).digest()
        _VERIFIED.add(raw_key)
        _RECENT[0] = blob
    return blob


def _remember_derived(out: dict[str, Any]) -> None:
    """Remember a record the reducer derived in normal form (a tombstone, a purged
    version) as the most recent output only: the store's commit of it, next, is a hit.
    It is not hashed into the memo: a tombstone is current only until the same deletion
    purges it, and the purged version is final; a later read of either (``reconcile``)
    verifies it in full."""
    blob = _memo_key(out)
    if blob is not None:
        _RECENT[0] = blob


def forget_verified_records() -> None:
    """Empty the memo (benchmarks measuring the cold path; tests)."""
    _VERIFIED.clear()
    _RECENT[0] = b""


def normalize_memory_record(raw: Any, *, profile: _digest.Profile = "peer") -> dict[str, Any]:
    """The peer's ``normalizeMemoryRecord``: validated wire dict with ``digest`` (a new
    object; the caller owns it)."""
    if profile != "peer":
        return _normalize(raw, profile)
    blob = _memo_key(raw)
    key = _lookup(blob) if blob is not None else None
    if blob is not None and key is None:
        out: dict[str, Any] = _orjson.loads(blob)
        return out
    out = _normalize(raw, profile)
    _remember(out, blob, key)
    return out


def verified_memory_record(raw: Any) -> Mapping[str, Any]:
    """``normalize_memory_record(raw)`` for a caller that only reads the result: on a memo
    hit ``raw`` itself (it *is* the normalized record), otherwise the new normalized
    record.  Never mutate or keep what it returns."""
    blob = _memo_key(raw)
    key = _lookup(blob) if blob is not None else None
    if blob is not None and key is None:
        verified: Mapping[str, Any] = raw
        return verified
    out = _normalize(raw, "peer")
    _remember(out, blob, key)
    return out


def parse_stored_record(blob: bytes) -> dict[str, Any] | None:
    """A store's compact JSON of a record, parsed as :func:`verified_stored_record` needs
    it (``None`` without ``orjson``: the caller reads the record the ordinary way)."""
    if _orjson is None:  # pragma: no cover - orjson is a declared dependency
        return None
    value = _orjson.loads(blob)
    return value if type(value) is dict else None


def verified_stored_record(
    blob: bytes, raw: dict[str, Any], *, remember: bool = True
) -> Mapping[str, Any]:
    """``verified_memory_record(raw)`` for ``raw = parse_stored_record(blob)`` (bytes a
    store holds): the memo is looked up by the hash of ``blob`` itself, which is not
    encoded again.  A hit means ``blob`` *is* a verified output's bytes, so its parse
    ``raw`` is that output; otherwise ``raw`` is verified in full — and remembered unless
    ``remember`` is false (a caller about to replace that version: a deletion).  Never
    mutate or keep what it returns."""
    key = _lookup(blob)
    if key is None:
        return raw
    out = _normalize(raw, "peer")
    if remember:
        _remember(out, blob, key)
    return out


def memory_record_blob(raw: Any) -> tuple[bytes, Mapping[str, Any]]:
    """``normalize_memory_record(raw)`` as compact JSON bytes (what a store keeps), and a
    mapping to read the normalized fields from — ``raw`` itself when it already was a
    verified record, so nothing is parsed; never store that mapping."""
    raw_blob = _memo_key(raw)
    key = _lookup(raw_blob) if raw_blob is not None else None
    if raw_blob is not None and key is None:  # e.g. the record the reducer just built
        return raw_blob, raw
    out = _normalize(raw, "peer")
    blob = _remember(out, raw_blob, key)
    if blob is None:  # pragma: no cover - only without orjson
        import json

        blob = json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return blob, out


# --- records the reducer derives from a verified record -------------------------------------
#
# A deletion turns a verified record into its tombstone and the tombstone into its purged
# version.  Both are built here directly in normal form: every field is either copied from
# the verified input, a constant of the design (tombstone provenance, sink, zeroed scores),
# or checked with the normalizer's own check (time, fence, revision); then the canonical
# digest is computed.  ``tests/kernel/test_memory_fastpaths.py`` holds both equal to
# normalizing the slow construction (``kernel.memory.tombstone``) on generated records.

TOMBSTONE_SOURCE: Final = "memory-tombstone"
TOMBSTONE_SINK: Final = "kernel.tombstone"


def _sealed_record(out: dict[str, Any], memory_id: str) -> dict[str, Any]:
    revision = out["revision"]
    if type(revision) is not int or not 1 <= revision <= MAX_SAFE_INTEGER:
        out["revision"] = _integer(revision, "revision", 1)
    plain = _MEMORY_KEYS_CANONICAL  # scores are ints 0 (tombstone) or copied: checked below
    if plain:
        confidence, importance = out["confidence"], out["importance"]
        plain = (type(confidence) is int or _plain_number(confidence)) and (
            type(importance) is int or _plain_number(importance)
        )
    out["digest"] = kernel_value_digest(out, MEMORY_RECORD_DOMAIN, "peer", plain)
    _remember_derived(out)  # the store's commit of it, next, is a hit
    return out


def tombstone_record(current: Mapping[str, Any], *, at: str, fence: str) -> dict[str, Any]:
    """``normalize_memory_record`` of the tombstone of ``current`` (a normalized record,
    peer profile): state ``deleted``, revision + 1, updated ``at``, body-free, ``fence``."""
    memory_id = current["memoryId"]
    at = _fast_timestamp(at, "updatedAt")
    out: dict[str, Any] = {
        "schemaVersion": 1,
        "memoryId": memory_id,
        "scope": current["scope"],
        "scopeId": current.get("scopeId", _MISSING),
        "category": "deleted",
        "content": "",
        "provenance": {"source": TOMBSTONE_SOURCE, "observedAt": at},
        "evidenceRefs": [{"store": TOMBSTONE_SOURCE, "id": memory_id, "digest": current["digest"]}],
        "confidence": 0,
        "importance": 0,
        "tags": [],
        "sensitivity": current["sensitivity"],
        "allowedSinks": [TOMBSTONE_SINK],
        "state": "deleted",
        "retentionPolicy": dict(current["retentionPolicy"]),
        "createdAt": current["createdAt"],
        "updatedAt": at,
        "accessCount": 0,
        "revision": current["revision"] + 1,
        # a string that already matched the identifier pattern (the command's fence) is
        # one; anything else takes the normalizer's check
        "deletionFence": (
            fence
            if type(fence) is str and fence in _KNOWN_IDENTIFIERS
            else _identifier(fence, "deletionFence")
        ),
    }
    if out["scopeId"] is _MISSING:  # present exactly when ``current`` has one
        del out["scopeId"]
    return _sealed_record(out, memory_id)


def purged_record(tombstone: Mapping[str, Any], *, at: str) -> dict[str, Any]:
    """``normalize_memory_record`` of the purged version of ``tombstone`` (a normalized
    ``deleted`` record, peer profile): state ``purged``, revision + 1, updated ``at``.
    The result shares its nested values with ``tombstone``: pass a record you own."""
    out = dict(tombstone)
    out.pop("digest", None)
    out["state"] = "purged"  # existing keys: their places are kept
    out["updatedAt"] = _fast_timestamp(at, "updatedAt")
    out["revision"] = tombstone["revision"] + 1
    return _sealed_record(out, out["memoryId"])


def _normalize(raw: Any, profile: _digest.Profile) -> dict[str, Any]:
    value = raw if type(raw) is dict else _object(raw, "MemoryRecord")
    if not _MEMORY_FIELDS.issuperset(value):
        _known(value, _MEMORY_FIELDS, "MemoryRecord")
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
    content = _string(get("content"), "content", 0 if tombstoned else 1, 4 * 1024 * 1024)
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
    if type(memory_id) is not str or _IDENTIFIER_MATCH(memory_id) is None:
        memory_id = _identifier(memory_id, "memoryId")
    scope, scope_id = get("scope"), get("scopeId", _MISSING)
    if (
        type(scope) is not str
        or type(scope_id) is not str
        or scope not in SCOPE_ID_REQUIRED
        or _IDENTIFIER_MATCH(scope_id) is None
    ):
        scope, scope_id = _scope(scope, scope_id)
    out: dict[str, Any] = {"schemaVersion": 1, "memoryId": memory_id, "scope": scope}
    if scope_id is not None:
        out["scopeId"] = scope_id
    category = get("category")
    if type(category) is not str or _IDENTIFIER_MATCH(category) is None:
        category = _identifier(category, "category")
    out["category"] = category
    out["content"] = content
    if "contentRef" in value:
        out["contentRef"] = _content_ref(value["contentRef"])
    if "summary" in value:
        out["summary"] = _string(value["summary"], "summary", 1, 16 * 1024)
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
        out["retentionPolicy"] = _retention(retention)
    out["createdAt"] = _fast_timestamp(get("createdAt"), "createdAt")
    out["updatedAt"] = _fast_timestamp(get("updatedAt"), "updatedAt")
    if "lastAccessedAt" in value:
        out["lastAccessedAt"] = _timestamp(value["lastAccessedAt"], "lastAccessedAt")
    access_count = get("accessCount")
    if type(access_count) is not int or not 0 <= access_count <= MAX_SAFE_INTEGER:
        access_count = _integer(access_count, "accessCount")
    out["accessCount"] = access_count
    if "supersedes" in value:
        entries = _string_set(value["supersedes"], "supersedes", 0, 128, 160)
        out["supersedes"] = [_identifier(e, "supersedes") for e in entries]
    revision = get("revision")
    if type(revision) is not int or not 1 <= revision <= MAX_SAFE_INTEGER:
        revision = _integer(revision, "revision", 1)
    out["revision"] = revision
    if "deletionFence" in value:
        out["deletionFence"] = _identifier(value["deletionFence"], "deletionFence")
    plain = (
        _MEMORY_KEYS_CANONICAL
        and (type(confidence) is int or _plain_number(confidence))
        and (type(importance) is int or _plain_number(importance))
    )
    digest = kernel_value_digest(out, MEMORY_RECORD_DOMAIN, profile, plain)
    supplied = get("digest", _MISSING)
    # a string equal to the computed digest (well-formed by construction) is that digest
    if (
        supplied is not _MISSING
        and not (type(supplied) is str and supplied == digest)
        and _digest_value(supplied) != digest
    ):
        raise DigestMismatch(
            "MemoryRecord digest does not match canonical content", details={"memoryId": memory_id}
        )
    out["digest"] = digest
    return out
