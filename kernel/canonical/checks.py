"""Argument checks of the memory API, in the peer's wording (design 108 §6.2, §15).

The peer's contract helpers (``boundedString``, ``identifier``, ``stringSet`` …) check
commands, proposals and deletion requests before a record is normalized; these are
the same checks with the same messages and ``details``, so the first fault the peer
reports is the one this kernel reports.  Pure; lengths count UTF-16 code units
(JavaScript ``String#length``).  String sets are validated here and sorted by the
record normalizer (``kernel.canonical.items``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kernel.canonical.timestamps import epoch_ms_to_iso, parse_timestamp
from kernel.errors import InvalidArgument
from kernel.ports import Clock
from kernel.vocabulary import (
    DIGEST,
    IDENTIFIER,
    MAX_SAFE_INTEGER,
    RETENTION_MODES,
    SCOPE_ID_REQUIRED,
    SCOPES,
)

MISSING: Any = object()


def js_length(text: str) -> int:
    """``String#length`` (UTF-16 code units)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


def object_value(value: Any, label: str) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    raise InvalidArgument(f"{label} must be an object", details={"field": label})


def known_fields(value: Mapping[str, Any], fields: frozenset[str], label: str) -> None:
    if not fields.issuperset(value):
        unknown = [key for key in value if key not in fields]
        raise InvalidArgument(
            f"{label} contains unknown fields", details={"field": label, "unknown": unknown}
        )


def bounded_string(value: Any, field: str, lo: int = 0, hi: int = 4096) -> str:
    """``value`` as an exact ``str`` of ``lo``–``hi`` UTF-16 code units (a ``str`` subclass
    is copied to a plain ``str``).  ``len`` bounds the UTF-16 length from below and twice
    it from above, so most strings are decided without encoding."""
    if type(value) is str:
        n = len(value)
        if lo <= n and 2 * n <= hi:
            return value
        if lo <= js_length(value) <= hi:
            return value
    elif isinstance(value, str):
        return bounded_string(str(value), field, lo, hi)
    raise InvalidArgument(
        f"{field} must be a string between {lo} and {hi} characters", details={"field": field}
    )


def identifier(value: Any, field: str) -> str:
    text = bounded_string(value, field, 1, 160)
    if IDENTIFIER.fullmatch(text) is None:
        raise InvalidArgument(f"{field} is not a safe identifier", details={"field": field})
    return text


def bounded_integer(value: Any, field: str, lo: int = 0, hi: int = MAX_SAFE_INTEGER) -> int:
    """A safe integer (``Number.isSafeInteger``; an integral float counts) in ``lo``–``hi``."""
    kind = type(value)
    integral = kind is int or (kind is float and value.is_integer())
    if integral and lo <= value <= hi and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return int(value)
    raise InvalidArgument(
        f"{field} must be an integer between {lo} and {hi}", details={"field": field}
    )


def bounded_number(value: Any, field: str) -> int | float:
    kind = type(value)
    if (kind is int or kind is float) and 0 <= value <= 1:
        return int(value) if kind is float and value.is_integer() else value
    raise InvalidArgument(
        f"{field} must be a finite number between 0 and 1", details={"field": field}
    )


def boolean_value(value: Any, field: str) -> bool:
    if value is True or value is False:
        return bool(value)
    raise InvalidArgument(f"{field} must be a boolean", details={"field": field})


def timestamp(value: Any, field: str) -> str:
    return parse_timestamp(bounded_string(value, field, 20, 64), field)[1]


def string_set(
    value: Any, field: str, lo: int = 0, hi: int = 128, item_max: int = 128
) -> list[str]:
    """Validated distinct strings in input order (the normalizer sorts them)."""
    if not isinstance(value, list | tuple) or not lo <= len(value) <= hi:
        raise InvalidArgument(f"{field} must contain {lo}-{hi} strings", details={"field": field})
    out = [bounded_string(v, f"{field}[{i}]", 1, item_max) for i, v in enumerate(value)]
    if len(set(out)) != len(out):
        raise InvalidArgument(f"{field} must not contain duplicates", details={"field": field})
    return out


def scope_pair(scope: Any, scope_id: Any, field: str = "scope") -> tuple[str, str | None]:
    """``(scope, scopeId)``; every scope but ``global`` needs a scopeId, ``global`` has
    none (an absent or ``None`` scopeId)."""
    if type(scope) is not str or scope not in SCOPES:
        raise InvalidArgument(f"{field} is invalid", details={"field": field, "scope": scope})
    if scope in SCOPE_ID_REQUIRED:
        return scope, identifier(None if scope_id is MISSING else scope_id, f"{field}Id")
    if scope_id is not MISSING and scope_id is not None:
        raise InvalidArgument(
            "global scope must not include scopeId", details={"field": f"{field}Id"}
        )
    return scope, None


def assert_scope(scope: Any, scope_id: Any, field: str = "scope") -> dict[str, str]:
    """``{scope, scopeId?}`` (:func:`scope_pair` as the wire object)."""
    name, instance = scope_pair(scope, scope_id, field)
    return {"scope": name} if instance is None else {"scope": name, "scopeId": instance}


SOURCE_REF_FIELDS: Final = frozenset({"store", "id", "revision", "eventSequence", "digest", "uri"})
PROVENANCE_FIELDS: Final = frozenset({"source", "actor", "observedAt", "parentDigests", "degraded"})


def source_ref(raw: Any, field: str = "sourceRef") -> dict[str, Any]:
    value = object_value(raw, field)
    known_fields(value, SOURCE_REF_FIELDS, field)
    out: dict[str, Any] = {
        "store": identifier(value.get("store"), f"{field}.store"),
        "id": identifier(value.get("id"), f"{field}.id"),
    }
    for key in ("revision", "eventSequence"):
        if key in value:
            out[key] = bounded_integer(value[key], f"{field}.{key}")
    if "digest" in value:
        out["digest"] = digest_value(value["digest"], f"{field}.digest")
    if "uri" in value:
        out["uri"] = bounded_string(value["uri"], f"{field}.uri", 1, 4096)
    return out


def digest_value(value: Any, field: str = "digest") -> str:
    text = bounded_string(value, field, 71, 71)
    if DIGEST.fullmatch(text) is None:
        raise InvalidArgument(f"{field} must be a sha256 digest", details={"field": field})
    return text


def provenance(raw: Any, field: str = "provenance") -> dict[str, Any]:
    value = object_value(raw, field)
    known_fields(value, PROVENANCE_FIELDS, field)
    out: dict[str, Any] = {"source": identifier(value.get("source"), f"{field}.source")}
    if "actor" in value:
        out["actor"] = identifier(value["actor"], f"{field}.actor")
    out["observedAt"] = timestamp(value.get("observedAt"), f"{field}.observedAt")
    if "parentDigests" in value:
        parents = string_set(value["parentDigests"], f"{field}.parentDigests", 0, 128, 71)
        out["parentDigests"] = [digest_value(p, f"{field}.parentDigests") for p in parents]
    if "degraded" in value:
        out["degraded"] = boolean_value(value["degraded"], f"{field}.degraded")
    return out


RETENTION_FIELDS: Final = frozenset({"mode", "expiresAt", "maxAgeDays", "legalHoldId"})


def retention_policy(raw: Any) -> dict[str, Any]:
    value = object_value(raw, "retentionPolicy")
    known_fields(value, RETENTION_FIELDS, "retentionPolicy")
    mode = value.get("mode")
    if type(mode) is not str or mode not in RETENTION_MODES:
        raise InvalidArgument("retentionPolicy.mode is invalid")
    if mode == "until_expired" and "expiresAt" not in value:
        raise InvalidArgument("until_expired retention requires expiresAt")
    if mode == "legal_hold" and "legalHoldId" not in value:
        raise InvalidArgument("legal_hold retention requires legalHoldId")
    out: dict[str, Any] = {"mode": mode}
    if "expiresAt" in value:
        out["expiresAt"] = timestamp(value["expiresAt"], "retentionPolicy.expiresAt")
    if "maxAgeDays" in value:
        out["maxAgeDays"] = bounded_integer(
            value["maxAgeDays"], "retentionPolicy.maxAgeDays", 1, 365_000
        )
    if "legalHoldId" in value:
        out["legalHoldId"] = identifier(value["legalHoldId"], "retentionPolicy.legalHoldId")
    return out


def iso_now(clock: Clock) -> str:
    """``new Date(clock()).toISOString()``."""
    epoch = clock()
    if isinstance(epoch, bool) or not isinstance(epoch, int):
        raise InvalidArgument("clock returned an invalid timestamp")
    return epoch_ms_to_iso(epoch)


def js_falsy(value: Any) -> bool:
    if value is None or value is False or value == "":
        return True
    return type(value) in (int, float) and (value == 0 or value != value)
