"""Compaction invariants verified before commit (design 108 §8.3).

``verify_compaction(original, candidate)`` compares the normalized items of the
fixed input head with the candidate output and returns every violation as a
value with a stable code.  The first four codes (and their order) are the
JavaScript peer's ``validateCompactionInvariants``; the rest refine them::

    protected_item_changed            a protected item (pinned, trusted policy, pending or
                                      recovery binding, …) is missing or its digest changed
    tool_pair_split                   some but not all members of a tool call group kept
    duplicate_output_item             an item id appears twice in the candidate
    identity_reused_with_new_digest   an original item id carries a different digest
    pinned_item_altered               a pinned item is missing or altered (refines the first)
    pending_binding_changed           a pending approval/question/human task/tool outcome
                                      binding is missing from the candidate or changed
    untrusted_summary_as_policy       a derived item claims system policy or more trust
                                      than its least trusted parent
    derived_widens_scope_or_sinks_or_lowers_sensitivity
                                      a derived item is unbound, leaves its parents' scope,
                                      allows sinks they do not, or is less sensitive

Compaction appends: the candidate may drop items from the *model input*, but
the raw evidence stays in the session log (the stores never delete).  Items
are plain JSON mappings (normalized ContextItems with their ``digest``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kernel.vocabulary import POLICY_TRUST, SENSITIVITY_ORDER, TRUST_ORDER

SUMMARY_KINDS: Final = frozenset({"message", "memory", "project-rule", "artifact-ref"})

PROTECTED_ITEM_CHANGED: Final = "protected_item_changed"
TOOL_PAIR_SPLIT: Final = "tool_pair_split"
DUPLICATE_OUTPUT_ITEM: Final = "duplicate_output_item"
IDENTITY_REUSED_WITH_NEW_DIGEST: Final = "identity_reused_with_new_digest"
PINNED_ITEM_ALTERED: Final = "pinned_item_altered"
PENDING_BINDING_CHANGED: Final = "pending_binding_changed"
UNTRUSTED_SUMMARY_AS_POLICY: Final = "untrusted_summary_as_policy"
DERIVED_WIDENS: Final = "derived_widens_scope_or_sinks_or_lowers_sensitivity"

#: Codes the peer reports (in this order); the others are this kernel's refinements.
PEER_CODES: Final = (
    PROTECTED_ITEM_CHANGED,
    TOOL_PAIR_SPLIT,
    DUPLICATE_OUTPUT_ITEM,
    IDENTITY_REUSED_WITH_NEW_DIGEST,
)
REFINED_CODES: Final = (
    PINNED_ITEM_ALTERED,
    PENDING_BINDING_CHANGED,
    UNTRUSTED_SUMMARY_AS_POLICY,
    DERIVED_WIDENS,
)
ALL_CODES: Final = PEER_CODES + REFINED_CODES

_PENDING_KEYS: Final = ("approvalId", "questionId", "humanTaskId")


@dataclass(frozen=True, slots=True)
class Violation:
    code: str
    item_id: str | None = None
    tool_call_id: str | None = None
    retained: tuple[str, ...] | None = None
    reason: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code}
        if self.item_id is not None:
            out["itemId"] = self.item_id
        if self.tool_call_id is not None:
            out["toolCallId"] = self.tool_call_id
        if self.retained is not None:
            out["retained"] = list(self.retained)
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True, slots=True)
class Verification:
    violations: tuple[Violation, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(v.code for v in self.violations)

    def to_wire(self, *, peer_only: bool = False) -> dict[str, Any]:
        shown = [v for v in self.violations if not peer_only or v.code in PEER_CODES]
        return {"ok": self.ok, "violations": [v.to_wire() for v in shown]}


# --------------------------------------------------------------------------- predicates


def binding_of(item: Mapping[str, Any]) -> Mapping[str, Any]:
    binding = item.get("binding")
    return binding if isinstance(binding, Mapping) else {}


def is_protected(item: Mapping[str, Any]) -> bool:
    """Never dropped silently (§7): the planner's protection rule, restated."""
    b = binding_of(item)
    return bool(
        item.get("pinned") is True
        or (item.get("kind") == "system-policy" and item.get("trust") in POLICY_TRUST)
        or b.get("requiredForRecovery")
        or b.get("taskState") in ("pending", "running", "waiting")
        or b.get("toolOutcome") in ("pending", "unknown")
        or b.get("approvalId")
        or b.get("questionId")
        or b.get("humanTaskId")
        or b.get("cwdIdentity")
        or b.get("worktreeIdentity")
        or b.get("permissionCeilingDigest")
        or "budgetRevision" in b
    )


def _must_survive(item: Mapping[str, Any]) -> bool:
    trusted_policy = item.get("kind") == "system-policy" and item.get("trust") in POLICY_TRUST
    return is_protected(item) or trusted_policy


def has_pending_binding(item: Mapping[str, Any]) -> bool:
    b = binding_of(item)
    return (
        any(b.get(key) for key in _PENDING_KEYS)
        or b.get("taskState") in ("pending", "running", "waiting")
        or b.get("toolOutcome") in ("pending", "unknown")
    )


def _pending_keys(item: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Identities a pending binding is known by (tool calls: id and role)."""
    b = binding_of(item)
    keys: list[tuple[str, Any]] = [(key, b[key]) for key in _PENDING_KEYS if b.get(key)]
    if b.get("toolCallId"):
        keys.append(("toolCallId", (b["toolCallId"], b.get("toolRole"))))
    return keys


def _carries(candidate_item: Mapping[str, Any], key: str, value: Any) -> bool:
    b = binding_of(candidate_item)
    if key == "toolCallId":
        return bool((b.get("toolCallId"), b.get("toolRole")) == value)
    return bool(b.get(key) == value)


def _rank(order: Sequence[str], value: Any) -> int:
    return order.index(value) if value in order else len(order)


def sink_intersection(parents: Iterable[Mapping[str, Any]]) -> frozenset[str] | None:
    """Sinks every parent allows; ``None`` stands for "any" (all parents allow ``*``)."""
    acc: frozenset[str] | None = None
    for parent in parents:
        sinks = frozenset(parent.get("allowedSinks") or ())
        if "*" in sinks:
            continue
        acc = sinks if acc is None else acc & sinks
    return acc


def sinks_widened(item_sinks: Iterable[str], parents: Sequence[Mapping[str, Any]]) -> bool:
    allowed = sink_intersection(parents)
    if allowed is None:
        return False
    return any(sink == "*" or sink not in allowed for sink in item_sinks)


# --------------------------------------------------------------------------- verification


def _by_id(items: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for item in items:
        out[str(item.get("itemId"))] = item  # last one wins, as a JS Map does
    return out


def _notable(item: Mapping[str, Any]) -> bool:
    """Whether an original item can be protected, pinned, pending or in a tool group;
    every other original item only matters by its id and digest."""
    return item.get("pinned") is True or item.get("kind") == "system-policy" or bool(
        binding_of(item)
    )


def _peer_checks(
    before: Mapping[str, Mapping[str, Any]],
    notable: Sequence[Mapping[str, Any]],
    after: Mapping[str, Mapping[str, Any]],
    candidate: Sequence[Mapping[str, Any]],
) -> list[Violation]:
    found: list[Violation] = []
    for item in notable:
        item_id = str(item.get("itemId"))
        if _must_survive(item) and (after.get(item_id) or {}).get("digest") != item.get("digest"):
            found.append(Violation(PROTECTED_ITEM_CHANGED, item_id=item_id))
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for item in notable:
        call_id = binding_of(item).get("toolCallId")
        if call_id:
            groups.setdefault(str(call_id), []).append(item)
    for call_id, group in groups.items():
        retained = tuple(str(i.get("itemId")) for i in group if str(i.get("itemId")) in after)
        if retained and len(retained) != len(group):
            found.append(Violation(TOOL_PAIR_SPLIT, tool_call_id=call_id, retained=retained))
    seen: set[str] = set()
    for item in candidate:
        item_id = str(item.get("itemId"))
        if item_id in seen:
            found.append(Violation(DUPLICATE_OUTPUT_ITEM, item_id=item_id))
        seen.add(item_id)
        previous = before.get(item_id)
        if previous is not None and previous.get("digest") != item.get("digest"):
            found.append(Violation(IDENTITY_REUSED_WITH_NEW_DIGEST, item_id=item_id))
    return found


def _pinned_and_pending(
    notable: Sequence[Mapping[str, Any]],
    after: Mapping[str, Mapping[str, Any]],
    candidate: Sequence[Mapping[str, Any]],
) -> list[Violation]:
    found: list[Violation] = []
    for item in notable:
        item_id = str(item.get("itemId"))
        kept = after.get(item_id)
        if item.get("pinned") is True and (kept or {}).get("digest") != item.get("digest"):
            found.append(Violation(PINNED_ITEM_ALTERED, item_id=item_id))
        if not has_pending_binding(item):
            continue
        binding = dict(binding_of(item))
        keys = _pending_keys(item)
        kept_same = any(
            dict(binding_of(c)) == binding
            and (c.get("itemId") == item_id or any(_carries(c, k, v) for k, v in keys))
            for c in candidate
        )
        tampered = any(
            _carries(c, key, value) and dict(binding_of(c)) != binding
            for key, value in keys
            for c in candidate
        )
        if not kept_same or tampered:
            reason = "changed" if tampered else "missing"
            found.append(Violation(PENDING_BINDING_CHANGED, item_id=item_id, reason=reason))
    return found


def _derived_checks(
    original: Sequence[Mapping[str, Any]],
    before: Mapping[str, Mapping[str, Any]],
    candidate: Sequence[Mapping[str, Any]],
) -> list[Violation]:
    by_digest: dict[str, Mapping[str, Any]] | None = None  # built for the first derived item
    found: list[Violation] = []
    for item in candidate:
        item_id = str(item.get("itemId"))
        if item_id in before:
            continue
        if by_digest is None:
            by_digest = {str(i.get("digest")): i for i in original}
        provenance = item.get("provenance")
        parent_digests = (
            list(provenance.get("parentDigests") or ()) if isinstance(provenance, Mapping) else []
        )
        parents = [by_digest[d] for d in parent_digests if d in by_digest]
        if item.get("kind") == "system-policy" or item.get("kind") not in SUMMARY_KINDS:
            found.append(Violation(UNTRUSTED_SUMMARY_AS_POLICY, item_id=item_id, reason="kind"))
        if not parent_digests or len(parents) != len(parent_digests):
            found.append(Violation(DERIVED_WIDENS, item_id=item_id, reason="unbound_parents"))
            continue
        least_trusted = max(_rank(TRUST_ORDER, p.get("trust")) for p in parents)
        if _rank(TRUST_ORDER, item.get("trust")) < least_trusted:
            found.append(Violation(UNTRUSTED_SUMMARY_AS_POLICY, item_id=item_id, reason="trust"))
        if any(
            p.get("scope") != item.get("scope") or p.get("scopeId") != item.get("scopeId")
            for p in parents
        ):
            found.append(Violation(DERIVED_WIDENS, item_id=item_id, reason="scope"))
        if sinks_widened(item.get("allowedSinks") or (), parents):
            found.append(Violation(DERIVED_WIDENS, item_id=item_id, reason="sinks"))
        most_sensitive = max(_rank(SENSITIVITY_ORDER, p.get("sensitivity")) for p in parents)
        if _rank(SENSITIVITY_ORDER, item.get("sensitivity")) < most_sensitive:
            found.append(Violation(DERIVED_WIDENS, item_id=item_id, reason="sensitivity"))
    return found


def verify_compaction(
    original: Sequence[Mapping[str, Any]], candidate: Sequence[Mapping[str, Any]]
) -> Verification:
    """All violations of the candidate against the fixed input (peer codes first)."""
    before, after = _by_id(original), _by_id(candidate)
    notable = [item for item in original if _notable(item)]
    violations = _peer_checks(before, notable, after, candidate)
    violations += _pinned_and_pending(notable, after, candidate)
    violations += _derived_checks(original, before, candidate)
    return Verification(tuple(violations))
