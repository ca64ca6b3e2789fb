"""ContextItem / MemoryRecord normalisation (design 108 §6), byte-compatible with the peer.

``normalize_context_item(raw)`` and ``normalize_memory_record(raw)`` validate a raw
wire object exactly as the peer's ``normalizeContextItem`` / ``normalizeMemoryRecord``
do — same checks, same order, so the first fault reported is the peer's — and return
the normalized wire dict with its ``digest``:

* lengths are counted in UTF-16 code units (JavaScript ``String#length``);
* integers must be safe integers (``Number.isSafeInteger``: ``5.0`` is ``5``,
  ``true`` is not a number);
* ``allowedSinks`` / ``tags`` / ``parentDigests`` / ``supersedes`` are sorted with the
  peer's ``localeCompare("en")`` (:func:`peer_collation_key`, i.e.
  :func:`kernel.canonical.collation.collation_key`: exact for ASCII, Latin-1, Latin Extended-A,
  Greek, Cyrillic, CJK punctuation and ideographs; ``NonPortableValue`` for other text);
* timestamps are normalised by :func:`kernel.canonical.timestamps.parse_timestamp`;
* a supplied ``digest`` must be well-formed (``invalid_argument``) and equal to the
  recomputed one (``digest_mismatch``).

Errors are :mod:`kernel.errors` exceptions with the peer's codes; values whose peer
result depends on engine heuristics raise :class:`~kernel.errors.NonPortableValue`.
The digest profile is a parameter (``"peer"`` reproduces the peer's bytes).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import countOf
from typing import Any, Final

from kernel.canonical import digest as _digest
from kernel.canonical.checks import (
    MISSING,
    PROVENANCE_FIELDS,
    SOURCE_REF_FIELDS,
    boolean_value,
    bounded_integer,
    bounded_string,
    digest_value,
    identifier,
    known_fields,
    object_value,
    scope_pair,
    source_ref,
    timestamp,
)
from kernel.canonical.collation import ASCII_PRIMARY, ASCII_TERTIARY
from kernel.canonical.collation import collation_key as peer_collation_key
from kernel.errors import DigestMismatch, InvalidArgument
from kernel.vocabulary import (
    DIGEST,
    IDENTIFIER,
    MAX_CONTENT_CHARS,
    MAX_PRIORITY,
    MAX_SAFE_INTEGER,
    MAX_TOKENS,
    SENSITIVITY,
    TRUST,
)

__all__ = (
    "CONTEXT_ITEM_DOMAIN",
    "CONTEXT_KINDS",
    "ITEM_KEYS",
    "MEMORY_RECORD_DOMAIN",
    "CanonicalKeys",
    "canonical_keys",
    "identifier_collation_key",
    "kernel_digest",
    "normalize_context_item",
    "peer_collation_key",
    "proven_keys",
)

CONTEXT_ITEM_DOMAIN: Final = "chainlesschain.context-item/v1"
MEMORY_RECORD_DOMAIN: Final = "chainlesschain.memory-record/v1"

CONTEXT_KINDS: Final = (
    "system-policy",
    "tool-schema",
    "skill",
    "task-state",
    "message",
    "tool-evidence",
    "memory",
    "project-rule",
    "artifact-ref",
)
_KIND_SET: Final = frozenset(CONTEXT_KINDS)

_IDENTIFIER: Final = IDENTIFIER
_DIGEST: Final = DIGEST

_ITEM_FIELDS: Final = frozenset(
    {
        "schemaVersion",
        "itemId",
        "kind",
        "scope",
        "scopeId",
        "sourceRef",
        "provenance",
        "trust",
        "sensitivity",
        "allowedSinks",
        "tokenEstimate",
        "priority",
        "pinned",
        "createdAt",
        "expiresAt",
        "digest",
        "content",
        "contentRef",
        "binding",
    }
)
_SOURCE_REF_FIELDS: Final = SOURCE_REF_FIELDS
_PROVENANCE_FIELDS: Final = PROVENANCE_FIELDS
_CONTENT_REF_FIELDS: Final = frozenset(
    {
        "store",
        "objectId",
        "digest",
        "byteLength",
        "mimeType",
        "summary",
        "recoverable",
        "accessPolicy",
    }
)
_BINDING_FIELDS: Final = frozenset(
    {
        "taskState",
        "toolCallId",
        "toolRole",
        "toolOutcome",
        "approvalId",
        "questionId",
        "humanTaskId",
        "requiredForRecovery",
        "cwdIdentity",
        "worktreeIdentity",
        "permissionCeilingDigest",
        "budgetRevision",
    }
)

# --- digests of kernel-built values ----------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False, eq=False)
class CanonicalKeys:
    """Proof that plain byte order is both profiles' key order for every object whose
    keys are drawn from :attr:`names` (ASCII keys, none an array index, and sorted bytes
    equal to the peer's ``localeCompare("en")`` order — a total order, so every subset
    sorts alike; RFC 8785's UTF-16 order equals byte order for ASCII).

    Only :func:`canonical_keys` makes one, after checking: calling the class raises
    ``TypeError`` and it cannot be subclassed, so holding one *is* the check
    (:func:`kernel_digest` takes it instead of a caller's ``True``)."""

    names: frozenset[str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a CanonicalKeys is made by kernel.canonical.items.canonical_keys only")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError("CanonicalKeys cannot be subclassed")


_set_names: Final = CanonicalKeys.__dict__["names"].__set__


def canonical_keys(key_sets: Iterable[Iterable[str]]) -> CanonicalKeys | None:
    """A :class:`CanonicalKeys` for the union of ``key_sets`` when it holds, else ``None``."""
    names = frozenset(chain.from_iterable(key_sets))
    ordered = sorted(names)
    if not all(type(key) is str and key.isascii() for key in ordered):
        return None
    try:
        if tuple(ordered) != _digest.peer_key_order(ordered):
            return None
    except InvalidArgument:  # a non-portable key: not provably canonical
        return None
    proof: CanonicalKeys = object.__new__(CanonicalKeys)
    _set_names(proof, names)
    return proof


try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency
    _orjson = None  # type: ignore[assignment]
#: ``kernel.canonical.digest``'s ``orjson`` encoder (``orjson.dumps(value, option=OPT_SORT_KEYS)``)
#: as its two parts, so the fast path below makes one call; ``None`` without ``orjson``.
_DUMPS: Any = _orjson.dumps if "orjson" in _digest.ENCODERS else None
_SORT_KEYS: Final = _orjson.OPT_SORT_KEYS if _DUMPS is not None else 0


def proven_keys(value: Any) -> CanonicalKeys | None:
    """The gate of :func:`kernel_digest` checked on ``value`` itself: a
    :class:`CanonicalKeys` when every object in it has exact-``str`` keys, every scalar is
    a ``str``, a ``bool``, ``None`` or a safe integer, and all its keys together sort
    canonically; else ``None`` (the exact path).  For values the kernel did not build
    alone (a deletion receipt holds what stores answered and what a store gave back)."""
    key_sets: list[tuple[str, ...]] = []
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is dict:
            keys = tuple(item)
            if countOf(map(type, keys), str) != len(keys):
                return None
            key_sets.append(keys)
            pending.extend(item.values())
        elif kind is list:
            pending.extend(item)
        elif kind is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                return None
        elif kind is not str and kind is not bool and item is not None:
            return None
    return _proof_of(tuple(key_sets))


@functools.lru_cache(maxsize=512)
def _proof_of(key_sets: tuple[tuple[str, ...], ...]) -> CanonicalKeys | None:
    """:func:`canonical_keys` of exact strings (``functools.lru_cache``: a pure function of
    tuples of ``str``, answering with an immutable proof; equal tuples of exact strings are
    equal content, so nothing that merely compares equal is answered from it)."""
    return canonical_keys(key_sets)


def kernel_digest(
    value: Any, domain: str, profile: _digest.Profile, keys: CanonicalKeys | None
) -> str:
    """``kernel.canonical.digest.digest(value, domain, profile)`` for a value the kernel built.

    The gate is ``keys``: a :class:`CanonicalKeys` whose names hold every dict key of
    ``value`` (``None``: the exact path).  The value's scalars must be strings, booleans,
    ``None``, safe integers (±(2**53 - 1)) and floats that both encoders print alike
    (non-integral, ``1e-4 <= |x| < 2**52``), as every normalized value is.  Then the
    canonical JSON of both profiles is the sorted-keys output of the encoder
    ``kernel.canonical.digest`` uses for its own fast paths; a value the encoder refuses
    (a lone surrogate) goes to the exact path, which decides (escapes it, or refuses it
    under JCS).  Properties in ``tests/kernel/test_planner_properties.py`` and
    ``tests/kernel/test_canonical_keys.py`` hold it equal to the exact path.
    """
    if type(keys) is CanonicalKeys:
        return _sorted_keys_digest(value, domain, profile)
    return _digest.digest(value, domain, profile)


def _sorted_keys_digest(value: Any, domain: str, profile: _digest.Profile) -> str:
    """The fast path of :func:`kernel_digest` (its gate passed)."""
    if _DUMPS is None or profile not in ("peer", "jcs") or type(domain) is not str:
        return _digest.digest(value, domain, profile)  # the exact path decides (or refuses)
    try:
        body = _DUMPS(value, option=_SORT_KEYS)  # the ``orjson`` encoder, called directly
        prefix = _domain_prefix(domain)
    except (TypeError, ValueError):  # the encoder's refusal; a domain that is not UTF-8
        return _digest.digest(value, domain, profile)
    return _DIGEST_PREFIX + _sha256(prefix + body).hexdigest()


_DIGEST_PREFIX: Final = _digest.DIGEST_PREFIX
_sha256: Final = hashlib.sha256


def _domain_bytes(domain: str) -> bytes:
    """``domain`` UTF-8 + NUL."""
    return domain.encode("utf-8") + b"\x00"


#: :func:`_domain_bytes` of an exact ``str`` (the kernel uses a handful of domains):
#: ``functools.lru_cache`` over a pure function of an immutable string.
_domain_prefix: Final = functools.lru_cache(maxsize=64)(_domain_bytes)


# --- peer collation (String#localeCompare(other, "en"), ICU root, tertiary strength) -----
# kernel.canonical.collation holds the ICU 78.2 root tables and their proof; ASCII sorts through its
# translate-only fast path, the rest of the reproduced alphabet (Latin-1, Latin
# Extended-A, Greek, Cyrillic, CJK punctuation, fullwidth forms, CJK ideographs) through
# the general key, and anything else is NonPortableValue.
_PRIMARY: Final = ASCII_PRIMARY
_TERTIARY: Final = ASCII_TERTIARY


def identifier_collation_key(identifier: str) -> bytes:
    """:func:`peer_collation_key` of a validated identifier (ASCII, no ignorables)."""
    raw = identifier.encode("ascii")
    return raw.translate(_PRIMARY) + b"\x00" + raw.translate(_TERTIARY)


# The same tables with LF kept as LF: validated identifiers never contain LF, and no
# identifier character has a weight of 0x0A, so LF can separate many keys at once.
_PRIMARY_LF: Final = _PRIMARY[:10] + b"\n" + _PRIMARY[11:]
_TERTIARY_LF: Final = _TERTIARY[:10] + b"\n" + _TERTIARY[11:]


def identifier_collation_keys(identifiers: Sequence[str]) -> list[bytes]:
    """Sort keys ordering *distinct* validated identifiers exactly as
    :func:`identifier_collation_key` orders them, computed for all at once.

    Without upper-case letters the tertiary weights are all equal, and two distinct
    identifiers always differ in their primary weights, so the primary weights alone
    are the key (a proper prefix sorts first in both forms)."""
    if not identifiers:
        return []
    raw = "\n".join(identifiers).encode("ascii")
    primary = raw.translate(_PRIMARY_LF).split(b"\n")
    if raw.lower() == raw:
        return primary
    tertiary = raw.translate(_TERTIARY_LF).split(b"\n")
    return list(map(b"\x00".join, zip(primary, tertiary, strict=True)))


# --- scalar checks (messages and details follow the peer) ---------------------------------


def _array(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _string_set(
    value: Any, field: str, min_items: int = 0, max_items: int = 128, item_max: int = 160
) -> list[str]:
    if not _array(value) or not min_items <= len(value) <= max_items:
        raise InvalidArgument(
            f"{field} must contain {min_items}-{max_items} strings", details={"field": field}
        )
    output = [bounded_string(entry, f"{field}[{i}]", 1, item_max) for i, entry in enumerate(value)]
    if len(set(output)) != len(output):
        raise InvalidArgument(f"{field} must not contain duplicates", details={"field": field})
    if len(output) > 1:
        output.sort(key=peer_collation_key)
    return output


# --- nested objects -----------------------------------------------------------------------


def _provenance(raw: Any, field: str = "provenance") -> dict[str, Any]:
    value = object_value(raw, field)
    known_fields(value, _PROVENANCE_FIELDS, field)
    out: dict[str, Any] = {"source": identifier(value.get("source"), f"{field}.source")}
    if (v := value.get("actor", MISSING)) is not MISSING:
        out["actor"] = identifier(v, f"{field}.actor")
    out["observedAt"] = timestamp(value.get("observedAt"), f"{field}.observedAt")
    if (v := value.get("parentDigests", MISSING)) is not MISSING:
        entries = _string_set(v, f"{field}.parentDigests", 0, 128, 71)
        out["parentDigests"] = [digest_value(e, f"{field}.parentDigests") for e in entries]
    if (v := value.get("degraded", MISSING)) is not MISSING:
        out["degraded"] = boolean_value(v, f"{field}.degraded")
    return out


def _content_ref(raw: Any, field: str = "contentRef") -> dict[str, Any]:
    value = object_value(raw, field)
    known_fields(value, _CONTENT_REF_FIELDS, field)
    out: dict[str, Any] = {
        "store": identifier(value.get("store"), f"{field}.store"),
        "objectId": identifier(value.get("objectId"), f"{field}.objectId"),
        "digest": digest_value(value.get("digest"), f"{field}.digest"),
        "byteLength": bounded_integer(value.get("byteLength"), f"{field}.byteLength", 0, 1024**4),
    }
    if (v := value.get("mimeType", MISSING)) is not MISSING:
        out["mimeType"] = bounded_string(v, f"{field}.mimeType", 1, 256)
    out["summary"] = bounded_string(value.get("summary"), f"{field}.summary", 1, 16 * 1024)
    out["recoverable"] = boolean_value(value.get("recoverable"), f"{field}.recoverable")
    if (v := value.get("accessPolicy", MISSING)) is not MISSING:
        out["accessPolicy"] = identifier(v, f"{field}.accessPolicy")
    return out


_TASK_STATES: Final = frozenset({"pending", "running", "waiting", "terminal"})
_TOOL_ROLES: Final = frozenset({"call", "result"})
_TOOL_OUTCOMES: Final = frozenset({"pending", "succeeded", "failed", "unknown"})


def _binding(raw: Any, field: str = "binding") -> dict[str, Any]:
    value = object_value(raw, field)
    known_fields(value, _BINDING_FIELDS, field)
    out: dict[str, Any] = {}
    if (v := value.get("taskState", MISSING)) is not MISSING:
        if type(v) is not str or v not in _TASK_STATES:
            raise InvalidArgument(
                f"{field}.taskState is invalid", details={"field": f"{field}.taskState"}
            )
        out["taskState"] = v
    if (v := value.get("toolCallId", MISSING)) is not MISSING:
        out["toolCallId"] = identifier(v, f"{field}.toolCallId")
    if (v := value.get("toolRole", MISSING)) is not MISSING:
        if type(v) is not str or v not in _TOOL_ROLES:
            raise InvalidArgument(f"{field}.toolRole is invalid")
        out["toolRole"] = v
    if (v := value.get("toolOutcome", MISSING)) is not MISSING:
        if type(v) is not str or v not in _TOOL_OUTCOMES:
            raise InvalidArgument(f"{field}.toolOutcome is invalid")
        out["toolOutcome"] = v
    if (out.get("toolRole") or out.get("toolOutcome")) and not out.get("toolCallId"):
        raise InvalidArgument("toolRole/toolOutcome requires toolCallId", details={"field": field})
    for key in ("approvalId", "questionId", "humanTaskId", "cwdIdentity", "worktreeIdentity"):
        if (v := value.get(key, MISSING)) is not MISSING:
            out[key] = identifier(v, f"{field}.{key}")
    if (v := value.get("permissionCeilingDigest", MISSING)) is not MISSING:
        out["permissionCeilingDigest"] = digest_value(v, f"{field}.permissionCeilingDigest")
    if (v := value.get("budgetRevision", MISSING)) is not MISSING:
        out["budgetRevision"] = bounded_integer(v, f"{field}.budgetRevision")
    if (v := value.get("requiredForRecovery", MISSING)) is not MISSING:
        out["requiredForRecovery"] = boolean_value(v, f"{field}.requiredForRecovery")
    return out


#: Every dict a normalized ContextItem holds draws its keys from these names.
ITEM_KEYS: Final = canonical_keys(
    (_ITEM_FIELDS, _SOURCE_REF_FIELDS, _PROVENANCE_FIELDS, _CONTENT_REF_FIELDS, _BINDING_FIELDS)
)


# --- ContextItem --------------------------------------------------------------------------


def _is_one(value: Any) -> bool:
    return (type(value) is int or type(value) is float) and value == 1


def normalize_context_item(raw: Any, *, profile: _digest.Profile = "peer") -> dict[str, Any]:
    """The peer's ``normalizeContextItem``: validated wire dict with ``digest``."""
    value = object_value(raw, "ContextItem")
    known_fields(value, _ITEM_FIELDS, "ContextItem")
    get = value.get
    if not _is_one(get("schemaVersion")):
        raise InvalidArgument("ContextItem schemaVersion must be 1")
    kind = get("kind")
    if type(kind) is not str or kind not in _KIND_SET:
        raise InvalidArgument("ContextItem kind is invalid", details={"kind": kind})
    trust = get("trust")
    if type(trust) is not str or trust not in TRUST:
        raise InvalidArgument("ContextItem trust is invalid", details={"trust": trust})
    sensitivity = get("sensitivity")
    if type(sensitivity) is not str or sensitivity not in SENSITIVITY:
        raise InvalidArgument(
            "ContextItem sensitivity is invalid", details={"sensitivity": sensitivity}
        )
    if ("content" in value) == ("contentRef" in value):
        raise InvalidArgument("ContextItem must contain exactly one of content or contentRef")
    item_id = identifier(get("itemId"), "itemId")
    scope, scope_id = scope_pair(get("scope"), get("scopeId", MISSING))
    out: dict[str, Any] = {"schemaVersion": 1, "itemId": item_id, "kind": kind, "scope": scope}
    if scope_id is not None:
        out["scopeId"] = scope_id
    out["sourceRef"] = source_ref(get("sourceRef"))
    out["provenance"] = _provenance(get("provenance"))
    out["trust"] = trust
    out["sensitivity"] = sensitivity
    out["allowedSinks"] = _string_set(get("allowedSinks"), "allowedSinks", 1, 128, 128)
    out["tokenEstimate"] = bounded_integer(get("tokenEstimate"), "tokenEstimate", 1, MAX_TOKENS)
    out["priority"] = bounded_integer(get("priority"), "priority", 0, MAX_PRIORITY)
    out["pinned"] = boolean_value(get("pinned"), "pinned")
    out["createdAt"] = timestamp(get("createdAt"), "createdAt")
    if "expiresAt" in value:
        out["expiresAt"] = timestamp(value["expiresAt"], "expiresAt")
    if "binding" in value:
        out["binding"] = _binding(value["binding"])
    if "content" in value:
        out["content"] = bounded_string(value["content"], "content", 0, MAX_CONTENT_CHARS)
    else:
        out["contentRef"] = _content_ref(value["contentRef"])
    digest = kernel_digest(out, CONTEXT_ITEM_DOMAIN, profile, ITEM_KEYS)
    supplied = get("digest", MISSING)
    if supplied is not MISSING and digest_value(supplied) != digest:
        raise DigestMismatch(
            "ContextItem digest does not match canonical content", details={"itemId": item_id}
        )
    out["digest"] = digest
    return out
