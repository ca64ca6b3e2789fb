"""Validation of a summarizer's output (provider-backed compaction, design 108 §8.2–8.3).

A summary is data, never authority.  Each derived item must:

* use a fresh identity (never an original item id);
* be a data kind (``message``, ``memory``, ``project-rule``, ``artifact-ref``)
  with no binding and not pinned — a summary cannot create control, pending,
  pinned, tool or system state;
* bind the digests of the dropped items it summarizes (``provenance.parentDigests``)
  and nothing outside them;
* stay in its parents' scope (``scope_denied``), not claim more trust than the
  least trusted parent, not be less sensitive than the most sensitive one
  (``derivation_policy_violation``), and allow no sink a parent forbids
  (``sink_denied``).

The usage receipt must be ``settled`` or explicitly ``not_metered``; anything
else is ``provider_usage_unsettled``, which compaction turns into a
``reconciliation_required`` receipt (never counted as zero cost, never retried).
Checks run in the peer's order: items first, then the usage receipt.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kernel.canonical.checks import (  # the shared argument checks, in the peer's wording
    bounded_string,
    known_fields,
    object_value,
)
from kernel.canonical.digest import Profile, canonical_json
from kernel.canonical.items import normalize_context_item
from kernel.compaction.invariants import SUMMARY_KINDS, sinks_widened
from kernel.errors import (
    DerivationPolicyViolation,
    InvalidArgument,
    KernelError,
    ScopeDenied,
    SinkDenied,
)
from kernel.vocabulary import SENSITIVITY_ORDER, TRUST_ORDER

PROVIDER_USAGE_UNSETTLED: Final = "provider_usage_unsettled"
USAGE_FIELDS: Final = frozenset(
    {
        "outcome",
        "callId",
        "provider",
        "model",
        "inputTokens",
        "outputTokens",
        "costUsd",
        "ledgerDigest",
    }
)
OUTPUT_FIELDS: Final = frozenset({"items", "usageReceipt", "degraded", "degradedReason"})
MAX_SUMMARY_ITEMS: Final = 1000
MAX_USAGE_BYTES: Final = 16 * 1024


# --------------------------------------------------------------------------- small checks


def json_byte_length(value: Any, field: str, maximum: int, profile: Profile) -> int:
    length = len(canonical_json(value, profile).encode("utf-8"))
    if length > maximum:
        raise InvalidArgument(
            f"{field} exceeds {maximum} bytes",
            details={"field": field, "length": length, "maximum": maximum},
        )
    return length


# --------------------------------------------------------------------------- summary


@dataclass(frozen=True, slots=True)
class SummaryOutput:
    items: tuple[dict[str, Any], ...]
    usage_receipt: dict[str, Any]
    degraded: bool
    degraded_reason: str | None


def normalize_usage_receipt(value: Any, profile: Profile) -> dict[str, Any]:
    receipt = object_value(value, "usageReceipt")
    known_fields(receipt, USAGE_FIELDS, "usageReceipt")
    if receipt.get("outcome") not in ("settled", "not_metered"):
        raise KernelError(
            "provider-backed compaction usage must be settled or explicitly not metered",
            code=PROVIDER_USAGE_UNSETTLED,
        )
    json_byte_length(receipt, "usageReceipt", MAX_USAGE_BYTES, profile)
    return dict(receipt)


def validate_derived_item(
    raw: Any,
    parents: Sequence[Mapping[str, Any]],
    original_ids: frozenset[str],
    profile: Profile,
) -> dict[str, Any]:
    item = normalize_context_item(raw, profile=profile)
    item_id = item["itemId"]
    details = {"itemId": item_id}
    if item_id in original_ids:
        raise DerivationPolicyViolation(
            "summary item cannot reuse an original ContextItem identity", details=details
        )
    if item["kind"] not in SUMMARY_KINDS or "binding" in item or item["pinned"]:
        raise DerivationPolicyViolation(
            "summary cannot create control, pending, pinned, tool, or system state",
            details={"itemId": item_id, "kind": item["kind"]},
        )
    parent_digests = item["provenance"].get("parentDigests") or []
    if not parent_digests:
        raise DerivationPolicyViolation(
            "summary provenance must bind parent digests", details=details
        )
    by_digest = {p["digest"]: p for p in parents}
    bound = [by_digest.get(d) for d in parent_digests]
    if any(p is None for p in bound):
        raise DerivationPolicyViolation(
            "summary provenance references content outside the dropped input", details=details
        )
    chosen = [p for p in bound if p is not None]
    if any(p["scope"] != item["scope"] or p.get("scopeId") != item.get("scopeId") for p in chosen):
        raise ScopeDenied("summary cannot widen or combine scopes", details=details)
    least_trusted = max(TRUST_ORDER.index(p["trust"]) for p in chosen)
    if TRUST_ORDER.index(item["trust"]) < least_trusted:
        raise DerivationPolicyViolation("summary cannot increase source trust", details=details)
    most_sensitive = max(SENSITIVITY_ORDER.index(p["sensitivity"]) for p in chosen)
    if SENSITIVITY_ORDER.index(item["sensitivity"]) < most_sensitive:
        raise DerivationPolicyViolation("summary cannot lower sensitivity", details=details)
    if sinks_widened(item["allowedSinks"], chosen):
        raise SinkDenied("summary cannot expand allowed sinks", details=details)
    return item


def normalize_summary_output(
    output: Any,
    parents: Sequence[Mapping[str, Any]],
    original_ids: frozenset[str],
    profile: Profile,
) -> SummaryOutput:
    value = object_value(output, "summarizer output")
    known_fields(value, OUTPUT_FIELDS, "summarizer output")
    items = value.get("items")
    if not isinstance(items, list) or len(items) > MAX_SUMMARY_ITEMS:
        raise InvalidArgument("summarizer output.items must be an array with at most 1000 items")
    degraded = value.get("degraded")
    if "degraded" in value and not isinstance(degraded, bool):
        raise InvalidArgument("summarizer output.degraded must be boolean")
    derived = tuple(validate_derived_item(i, parents, original_ids, profile) for i in items)
    usage = normalize_usage_receipt(value.get("usageReceipt"), profile)
    reason = None
    if "degradedReason" in value:
        reason = bounded_string(value["degradedReason"], "summarizer output.degradedReason", 1, 160)
    return SummaryOutput(derived, usage, degraded is True, reason)


# --------------------------------------------------------------------------- handoff text

#: The structured handoff a provider summary must be (design 108 §8.3: task continuity —
#: objective, constraints, decisions, files, tests, open side effects, checkpoints,
#: blockers and next steps).  ``objective`` is a string, every other field an array of
#: strings; nothing else.
HANDOFF_FIELDS: Final = (
    "objective",
    "constraints",
    "keyDecisions",
    "changedFiles",
    "tests",
    "unresolvedSideEffects",
    "checkpoints",
    "blockers",
    "nextSteps",
)
SUMMARY_INVALID_JSON: Final = "summary_invalid_json"
SUMMARY_SCHEMA_MISMATCH: Final = "summary_schema_mismatch"
MAX_HANDOFF_CHARS: Final = 1_000_000


def _handoff_field_ok(key: str, value: Any) -> bool:
    if key == "objective":
        return isinstance(value, str)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def validate_handoff(text: Any) -> tuple[dict[str, Any] | None, str | None, dict[str, Any]]:
    """Strictly parse a provider's handoff answer: ``(handoff, reason, detail)``.

    The answer must be exactly one JSON object — prose or Markdown fences around it,
    arrays and scalars are ``summary_invalid_json`` (``detail.json`` says which) — with
    every field of :data:`HANDOFF_FIELDS` of the right type and no other; otherwise
    ``summary_schema_mismatch`` with the ``missing`` and ``mistyped`` field names and the
    number of ``unknown`` ones (a provider-chosen key is never echoed; no value is).
    A provider summary that fails here is never committed as a semantic summary:
    compaction degrades to its fallback and says why (§17).
    """
    if not isinstance(text, str):
        return None, SUMMARY_INVALID_JSON, {"json": type(text).__name__}
    if len(text) > MAX_HANDOFF_CHARS:
        return None, SUMMARY_INVALID_JSON, {"json": "too_large", "length": len(text)}
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        start, end = text.find("{"), text.rfind("}")
        embedded = start >= 0 and end > start
        if embedded:
            try:
                json.loads(text[start:end + 1])
            except (ValueError, RecursionError):
                embedded = False
        return None, SUMMARY_INVALID_JSON, {"json": "prose_around_json" if embedded
                                            else "unparseable"}
    if not isinstance(doc, dict):
        return None, SUMMARY_INVALID_JSON, {"json": type(doc).__name__}
    missing = [k for k in HANDOFF_FIELDS if k not in doc]
    unknown = sum(1 for k in doc if k not in HANDOFF_FIELDS)  # a provider's key: counted only
    mistyped = [k for k in HANDOFF_FIELDS if k in doc and not _handoff_field_ok(k, doc[k])]
    if missing or unknown or mistyped:
        detail = {"missing": missing, "unknown": unknown, "mistyped": mistyped}
        return None, SUMMARY_SCHEMA_MISMATCH, {k: v for k, v in detail.items() if v}
    return {k: doc[k] for k in HANDOFF_FIELDS}, None, {}
