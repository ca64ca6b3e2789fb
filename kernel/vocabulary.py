"""The kernel's vocabulary (design 108 §6), defined once.

Public API:

* :class:`Scope`, :class:`Trust`, :class:`Sensitivity`, :class:`MemoryState`,
  :class:`RetentionMode` — ``StrEnum``; a member's value is its wire string.  ``Trust``
  and ``Sensitivity`` compare by *rank* (``<``, ``<=``, ``>``, ``>=``), never
  alphabetically.
* The orders, as tuples of plain strings (wire values, so digests and JSON never see an
  enum member): :data:`SCOPE_ORDER` (narrow → wide), :data:`TRUST_ORDER` (most → least
  trusted), :data:`TRUST_ASCENDING` (least → most), :data:`SENSITIVITY_ORDER` (least →
  most sensitive); the sets :data:`SCOPES`, :data:`SCOPE_ID_REQUIRED`, :data:`TRUST`,
  :data:`SENSITIVITY`, :data:`POLICY_TRUST`, :data:`MEMORY_STATES`, :data:`RETENTION_MODES`.
* The identifier and digest patterns (:data:`IDENTIFIER`, :data:`DIGEST`) and the
  numeric limits :data:`MAX_SAFE_INTEGER` (JavaScript's ``Number.MAX_SAFE_INTEGER``,
  2**53 - 1: the peer's integers are IEEE doubles) and :data:`MAX_EXACT_INTEGER` (2**53);
  the size limits :data:`MAX_TOKENS`, :data:`MAX_PRIORITY`, :data:`MAX_CONTENT_CHARS`,
  :data:`MAX_ITEMS`.

Every other module imports these; none spells a scope list, an order, the identifier
regex or the integer limit again (``tests/test_package_structure.py`` checks).
"""

from __future__ import annotations

import re
from enum import StrEnum
from types import MappingProxyType
from typing import Final

__all__ = (
    "DIGEST",
    "IDENTIFIER",
    "MAX_CONTENT_CHARS",
    "MAX_EXACT_INTEGER",
    "MAX_ITEMS",
    "MAX_PRIORITY",
    "MAX_SAFE_INTEGER",
    "MAX_TOKENS",
    "MEMORY_STATES",
    "POLICY_TRUST",
    "RETENTION_MODES",
    "SCOPES",
    "SCOPE_ID_REQUIRED",
    "SCOPE_ORDER",
    "SENSITIVITY",
    "SENSITIVITY_ORDER",
    "TRUST",
    "TRUST_ASCENDING",
    "TRUST_ORDER",
    "MemoryState",
    "RetentionMode",
    "Scope",
    "Sensitivity",
    "Trust",
)

#: ``Number.MAX_SAFE_INTEGER``: the largest integer every peer number holds exactly.
MAX_SAFE_INTEGER: Final = 9_007_199_254_740_991
#: 2**53: every integer of at most this magnitude is an exact double (prints as itself in
#: JavaScript); beyond it a JavaScript number is the nearest double.
MAX_EXACT_INTEGER: Final = MAX_SAFE_INTEGER + 1
#: The largest token count (a window, an estimate): 2**24.
MAX_TOKENS: Final = 16_777_216
#: The largest priority of a ContextItem.
MAX_PRIORITY: Final = 1_000_000
#: The longest content, in UTF-16 code units (4 Mi).
MAX_CONTENT_CHARS: Final = 4_194_304
#: The most items one plan (or batch) takes.
MAX_ITEMS: Final = 100_000
#: A safe identifier: ids, scope ids, names (1–160 characters, no leading punctuation).
IDENTIFIER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,159}")
#: A content digest on the wire.
DIGEST: Final = re.compile(r"sha256:[a-f0-9]{64}")


class Scope(StrEnum):
    """Where a value lives, narrow to wide; promotion widens and is audited (§6.3)."""

    TURN = "turn"
    SESSION = "session"
    AGENT = "agent"
    PROJECT = "project"
    USER = "user"
    GLOBAL = "global"


class MemoryState(StrEnum):
    CANDIDATE = "candidate"
    ACTIVE = "active"
    REINFORCED = "reinforced"
    SUPERSEDED = "superseded"
    ARCHIVED = "archived"
    EXPIRED = "expired"
    DELETED = "deleted"
    PURGED = "purged"


class RetentionMode(StrEnum):
    EPHEMERAL = "ephemeral"
    SESSION = "session"
    DURABLE = "durable"
    UNTIL_EXPIRED = "until_expired"
    LEGAL_HOLD = "legal_hold"


#: Narrow to wide.
SCOPE_ORDER: Final[tuple[str, ...]] = tuple(s.value for s in Scope)
SCOPES: Final = frozenset(SCOPE_ORDER)
#: Every scope but ``global`` names its instance (``scopeId``).
SCOPE_ID_REQUIRED: Final = SCOPES - {Scope.GLOBAL.value}
MEMORY_STATES: Final = frozenset(s.value for s in MemoryState)
RETENTION_MODES: Final = frozenset(m.value for m in RetentionMode)

#: Least to most trusted (the rank order).
TRUST_ASCENDING: Final[tuple[str, ...]] = ("untrusted", "external", "user", "verified", "host")
#: Most to least trusted; derived content inherits the *lowest* trust (§12.1).
TRUST_ORDER: Final[tuple[str, ...]] = tuple(reversed(TRUST_ASCENDING))
TRUST: Final = frozenset(TRUST_ORDER)
#: Least to most sensitive; sensitivity never lowers (§9.1).
SENSITIVITY_ORDER: Final[tuple[str, ...]] = (
    "public",
    "internal",
    "personal",
    "secret",
    "restricted",
)
SENSITIVITY: Final = frozenset(SENSITIVITY_ORDER)
#: The trust levels whose ``system-policy`` items are policy; any other is data (§12.1).
POLICY_TRUST: Final = frozenset({"host", "verified"})

_TRUST_RANK: Final = MappingProxyType({v: i for i, v in enumerate(TRUST_ASCENDING)})
_SENSITIVITY_RANK: Final = MappingProxyType({v: i for i, v in enumerate(SENSITIVITY_ORDER)})


class Trust(StrEnum):
    """How far content may steer the agent; compares by rank."""

    UNTRUSTED = "untrusted"
    EXTERNAL = "external"
    USER = "user"
    VERIFIED = "verified"
    HOST = "host"

    @property
    def rank(self) -> int:
        return _TRUST_RANK[self.value]

    def __lt__(self, other: str) -> bool:
        return self.rank < Trust(other).rank

    def __le__(self, other: str) -> bool:
        return self.rank <= Trust(other).rank

    def __gt__(self, other: str) -> bool:
        return self.rank > Trust(other).rank

    def __ge__(self, other: str) -> bool:
        return self.rank >= Trust(other).rank


class Sensitivity(StrEnum):
    """Data classification; compares by rank."""

    PUBLIC = "public"
    INTERNAL = "internal"
    PERSONAL = "personal"
    SECRET = "secret"
    RESTRICTED = "restricted"

    @property
    def rank(self) -> int:
        return _SENSITIVITY_RANK[self.value]

    def __lt__(self, other: str) -> bool:
        return self.rank < Sensitivity(other).rank

    def __le__(self, other: str) -> bool:
        return self.rank <= Sensitivity(other).rank

    def __gt__(self, other: str) -> bool:
        return self.rank > Sensitivity(other).rank

    def __ge__(self, other: str) -> bool:
        return self.rank >= Sensitivity(other).rank
