"""MemoryRecord normalisation (design 108 §6), byte-compatible with the peer.

Split out of :mod:`kernel.normalize` (whose scalar checks it uses); ``from
kernel.normalize import normalize_memory_record`` keeps working.  See that module's
docstring for the rules shared with ContextItems.
"""

from __future__ import annotations

import re
from typing import Any, Final

from kernel import digest as _digest
from kernel.errors import DigestMismatch, InvalidArgument
from kernel.normalize import (
    _MISSING,
    MEMORY_RECORD_DOMAIN,
    MEMORY_STATES,
    RETENTION_MODES,
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
)

__all__ = ["contains_secret_material", "normalize_memory_record"]

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
_MEMORY_KEYS_CANONICAL: Final = False  # records hold floats (confidence): exact path


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


def contains_secret_material(content: str) -> bool:
    """The peer's secret-material detector (same patterns, JavaScript ``/iu`` semantics)."""
    return any(p.search(content) is not None for p in _SECRET_PATTERNS)


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


def _evidence_refs(raw: Any) -> list[dict[str, Any]]:
    if not _array(raw) or not 1 <= len(raw) <= 128:
        raise InvalidArgument("evidenceRefs must contain 1-128 entries")
    return [_source_ref(entry, f"evidenceRefs[{i}]") for i, entry in enumerate(raw)]


def normalize_memory_record(raw: Any, *, profile: _digest.Profile = "peer") -> dict[str, Any]:
    """The peer's ``normalizeMemoryRecord``: validated wire dict with ``digest``."""
    value = _object(raw, "MemoryRecord")
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
    memory_id = _identifier(get("memoryId"), "memoryId")
    scope, scope_id = _scope(get("scope"), get("scopeId", _MISSING))
    out: dict[str, Any] = {"schemaVersion": 1, "memoryId": memory_id, "scope": scope}
    if scope_id is not None:
        out["scopeId"] = scope_id
    out["category"] = _identifier(get("category"), "category")
    out["content"] = content
    if "contentRef" in value:
        out["contentRef"] = _content_ref(value["contentRef"])
    if "summary" in value:
        out["summary"] = _string(value["summary"], "summary", 1, 16 * 1024)
    out["provenance"] = _provenance(get("provenance"))
    out["evidenceRefs"] = _evidence_refs(get("evidenceRefs"))
    out["confidence"] = _number(get("confidence"), "confidence")
    out["importance"] = _number(get("importance"), "importance")
    out["tags"] = _string_set(get("tags"), "tags", 0, 128, 128)
    out["sensitivity"] = sensitivity
    out["allowedSinks"] = _string_set(get("allowedSinks"), "allowedSinks", 1, 128, 128)
    out["state"] = state
    out["retentionPolicy"] = _retention(get("retentionPolicy"))
    out["createdAt"] = _timestamp(get("createdAt"), "createdAt")
    out["updatedAt"] = _timestamp(get("updatedAt"), "updatedAt")
    if "lastAccessedAt" in value:
        out["lastAccessedAt"] = _timestamp(value["lastAccessedAt"], "lastAccessedAt")
    out["accessCount"] = _integer(get("accessCount"), "accessCount")
    if "supersedes" in value:
        entries = _string_set(value["supersedes"], "supersedes", 0, 128, 160)
        out["supersedes"] = [_identifier(e, "supersedes") for e in entries]
    out["revision"] = _integer(get("revision"), "revision", 1)
    if "deletionFence" in value:
        out["deletionFence"] = _identifier(value["deletionFence"], "deletionFence")
    digest = kernel_value_digest(out, MEMORY_RECORD_DOMAIN, profile, _MEMORY_KEYS_CANONICAL)
    supplied = get("digest", _MISSING)
    if supplied is not _MISSING and _digest_value(supplied) != digest:
        raise DigestMismatch(
            "MemoryRecord digest does not match canonical content", details={"memoryId": memory_id}
        )
    out["digest"] = digest
    return out
