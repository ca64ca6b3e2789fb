"""Canonical digests (placeholder interface; implemented by the digest work).

Profiles:
  * ``jcs`` (default): RFC 8785 canonical JSON, ``sha256:<hex>`` over
    ``utf8(domain + "\\u0000" + canonical_json)``.
  * ``peer``: reproduces the JavaScript peer's canonical JSON (ICU ``en`` key
    collation, JS number text); refuses values whose digest would depend on
    non-portable behaviour with ``NonPortableValue``.
"""

from __future__ import annotations

from typing import Any, Literal

Profile = Literal["jcs", "peer"]
DEFAULT_DOMAIN = "chainlesschain.context-memory/v1"


def canonical_json(value: Any, profile: Profile = "jcs") -> str:
    raise NotImplementedError


def digest(value: Any, domain: str = DEFAULT_DOMAIN, profile: Profile = "jcs") -> str:
    raise NotImplementedError
