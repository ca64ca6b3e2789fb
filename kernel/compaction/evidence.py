"""Externalized evidence rules (design 108 §8.4) shared by every ContentPort.

* :func:`ref_summary` — the summary a ContentRef carries never hides that the
  content was truncated, expires, or needs approval to read: those facts are
  always appended as bracketed markers.
* :func:`check_access` — reading content back re-checks the scope, sensitivity
  and allowed sinks it was stored under, its expiry and its approval
  requirement; a refusal is an exception with the failure-semantics code
  (``scope_denied``, ``sink_denied``, ``content_unavailable``,
  ``approval_required``).
* :func:`object_id_for` — a Windows-safe object id: the content digest's hex
  plus a short digest of the access policy, so identical bytes stored under two
  policies share one blob but keep two policies.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from kernel.canonical.timestamps import iso_to_epoch_ms
from kernel.errors import ContentUnavailable, KernelError, ScopeDenied, SinkDenied
from kernel.ports import AccessContext, ContentPolicy
from kernel.vocabulary import SENSITIVITY_ORDER

DIGEST_PREFIX: Final = "sha256:"


def ref_summary(policy: ContentPolicy) -> str:
    markers = []
    if policy.truncated:
        markers.append("[truncated]")
    if policy.expires_at is not None:
        markers.append(f"[expires {policy.expires_at}]")
    if policy.requires_approval:
        markers.append("[approval required to read]")
    text = policy.summary.strip() or "Stored content"
    return " ".join([text, *markers])


def policy_wire(policy: ContentPolicy) -> dict[str, Any]:
    """The policy as a JSON object (the store's record; sinks in the policy's order)."""
    return {
        "scope": policy.scope,
        "scopeId": policy.scope_id,
        "sensitivity": policy.sensitivity,
        "allowedSinks": list(policy.allowed_sinks),
        "mimeType": policy.mime_type,
        "summary": policy.summary,
        "truncated": policy.truncated,
        "expiresAt": policy.expires_at,
        "requiresApproval": policy.requires_approval,
        "accessPolicy": policy.access_policy,
    }


def policy_from_wire(value: Mapping[str, Any]) -> ContentPolicy:
    """:func:`policy_wire`'s inverse (absent optional fields take their defaults)."""
    return ContentPolicy(
        scope=value["scope"],
        scope_id=value.get("scopeId"),
        sensitivity=value["sensitivity"],
        allowed_sinks=tuple(value.get("allowedSinks") or ()),
        mime_type=value.get("mimeType"),
        summary=value.get("summary") or "Stored content",
        truncated=bool(value.get("truncated")),
        expires_at=value.get("expiresAt"),
        requires_approval=bool(value.get("requiresApproval")),
        access_policy=value.get("accessPolicy"),
    )


def policy_fingerprint(policy: ContentPolicy) -> str:
    body = {**policy_wire(policy), "allowedSinks": sorted(policy.allowed_sinks)}
    raw = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(raw).hexdigest()


def object_id_for(content_hex: str, policy: ContentPolicy) -> str:
    return f"{content_hex}.{policy_fingerprint(policy)[:16]}"


def _rank(value: str) -> int:
    return SENSITIVITY_ORDER.index(value) if value in SENSITIVITY_ORDER else len(SENSITIVITY_ORDER)


def check_access(policy: ContentPolicy, access: AccessContext, object_id: str) -> None:
    """Raise unless ``access`` may read content stored under ``policy``."""
    details = {"objectId": object_id}
    if policy.scope != access.scope or policy.scope_id != access.scope_id:
        raise ScopeDenied("content belongs to another scope", details=details)
    if _rank(policy.sensitivity) > _rank(access.clearance):
        raise ScopeDenied("content is more sensitive than the reader's clearance", details=details)
    if "*" not in policy.allowed_sinks and access.sink not in policy.allowed_sinks:
        raise SinkDenied("content may not flow to this sink", details=details)
    expired = policy.expires_at is not None and access.now is not None
    if expired and iso_to_epoch_ms(str(policy.expires_at)) <= iso_to_epoch_ms(str(access.now)):
        raise ContentUnavailable("content reference has expired", details=details)
    if policy.requires_approval and not access.approved:
        raise KernelError(
            "reading this content requires approval", code="approval_required", details=details
        )
