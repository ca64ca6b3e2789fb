"""Context Planner (design 108 §7): ``plan_context(request) -> ContextPlan`` wire dict.

Pure and deterministic; byte-compatible with the peer's ``planContext`` under the
``"peer"`` digest profile.  The algorithm (see ``docs/planner.md``):

1. Validate the request in the peer's order; ``inputBudget = window − reservedOutput −
   safetyMargin`` and ``selectableBudget = inputBudget − recoveryReserve`` must be
   positive (``context_over_budget``).  Every item is normalized (digest re-verified).
2. Governance, per item: ``expired``, ``scope_denied``, ``sink_denied``,
   ``untrusted_system_policy`` (:mod:`kernel.drop_reasons`).
3. Admitted items are grouped by ``binding.toolCallId`` (tool call/result groups are
   atomic; a settled group must hold both roles once — ``invalid_argument``).
4. Groups are taken in total order (protected first, priority desc, then the first
   item's order key) and each is selected whole or dropped whole: ``input_budget`` when
   it exceeds the selectable budget, ``partition_ceiling`` when it exceeds a partition
   ceiling.  Protected groups ignore ceilings and are never dropped for budget: if one
   does not fit, the plan fails with ``context_over_budget`` (details name the items).
5. ``selected`` is sorted by the item order; ``dropped`` by itemId (peer collation);
   the plan digest covers the plan without ``digest`` (domain
   ``chainlesschain.context-plan/v1``).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping, Sequence
from typing import Any, Final

from kernel import digest as _digest
from kernel.drop_reasons import (
    EXPIRED,
    INPUT_BUDGET,
    PARTITION_CEILING,
    SCOPE_DENIED,
    SINK_DENIED,
    UNTRUSTED_SYSTEM_POLICY,
)
from kernel.errors import ContextOverBudget, InvalidArgument
from kernel.normalize import (
    _MISSING,
    CONTEXT_KINDS,
    ITEM_KEYS_CANONICAL,
    MAX_SAFE_INTEGER,
    _integer,
    _object,
    _scope,
    _string,
    identifier_collation_key,
    kernel_value_digest,
    keys_sort_canonically,
    peer_collation_key,
)
from kernel.normalize_batch import normalize_context_items
from kernel.partitions import (
    KIND_PARTITION,
    PLAN_PARTITIONS,
    RECOVERY_RESERVE,
    derive_ceilings,
    normalize_partition_map,
)
from kernel.timestamps import iso_to_epoch_ms, now_from_value

__all__ = [
    "CONTEXT_PLAN_DOMAIN",
    "CONTEXT_PLAN_SCHEMA",
    "is_protected",
    "item_order_key",
    "plan_context",
]

CONTEXT_PLAN_SCHEMA: Final = "chainlesschain.context-plan/v1"
CONTEXT_PLAN_DOMAIN: Final = "chainlesschain.context-plan/v1"
MAX_WINDOW_TOKENS: Final = 16_777_216
MAX_ITEMS: Final = 100_000

_REQUEST_FIELDS: Final = frozenset(
    {
        "modelWindowTokens",
        "reservedOutputTokens",
        "safetyMarginTokens",
        "recoveryReserveTokens",
        "items",
        "sink",
        "scopeAdmissions",
        "partitionCeilings",
        "partitionMinimums",
        "policyVersion",
        "modelProfile",
        "sessionHead",
        "memoryRevision",
        "now",
    }
)
_ADMISSION_FIELDS: Final = frozenset({"scope", "scopeId"})
_KIND_ORDER: Final = {kind: i for i, kind in enumerate(CONTEXT_KINDS)}
_TRUSTED: Final = ("host", "verified")
_LIVE_TASK: Final = ("pending", "running", "waiting")
_UNSETTLED: Final = ("pending", "unknown")
_PROTECTING_IDS: Final = (
    "approvalId",
    "questionId",
    "humanTaskId",
    "cwdIdentity",
    "worktreeIdentity",
    "permissionCeilingDigest",
)


def is_protected(item: Mapping[str, Any]) -> bool:
    """Never dropped for budget (§7): pinned items, trusted system policy, recovery
    bindings (live task state, pending/unknown tool outcomes, approvals, questions,
    HumanTasks, cwd/worktree identity, permission ceiling, budget revision)."""
    if item["pinned"]:
        return True
    if item["kind"] == "system-policy" and item["trust"] in _TRUSTED:
        return True
    binding = item.get("binding")
    if not binding:
        return False
    return bool(
        binding.get("requiredForRecovery")
        or binding.get("taskState") in _LIVE_TASK
        or binding.get("toolOutcome") in _UNSETTLED
        or any(binding.get(key) for key in _PROTECTING_IDS)
        or "budgetRevision" in binding
    )


def item_order_key(item: Mapping[str, Any], protected: bool | None = None) -> tuple[Any, ...]:
    """Total selection order: protected first, priority desc, kind (design order),
    ``sourceRef.eventSequence`` (absent last), then itemId in the peer's collation."""
    if protected is None:
        protected = is_protected(item)
    sequence = item["sourceRef"].get("eventSequence", MAX_SAFE_INTEGER)
    return (
        not protected,
        -item["priority"],
        _KIND_ORDER[item["kind"]],
        sequence,
        peer_collation_key(item["itemId"]),
    )


# --- request --------------------------------------------------------------------------------


def _admissions(value: Any) -> list[tuple[str, str | None]]:
    if not isinstance(value, list | tuple) or not 1 <= len(value) <= 128:
        raise InvalidArgument(
            "scopeAdmissions must contain 1-128 entries", details={"field": "scopeAdmissions"}
        )
    output: list[tuple[str, str | None]] = []
    for i, entry in enumerate(value):
        label = f"scopeAdmissions[{i}]"
        admission = _object(entry, label)
        unknown = [key for key in admission if key not in _ADMISSION_FIELDS]
        if unknown:
            raise InvalidArgument(
                f"{label} contains unknown fields", details={"field": label, "unknown": unknown}
            )
        output.append(
            _scope(admission.get("scope"), admission.get("scopeId", _MISSING), f"{label}.scope")
        )
    if len(set(output)) != len(output):
        raise InvalidArgument("scopeAdmissions must not contain duplicates")
    return output


def _or_zero(request: Mapping[str, Any], key: str) -> Any:
    value = request.get(key)
    return 0 if value is None else value  # JavaScript ``??``: null and absent both default


@dataclasses.dataclass(frozen=True, slots=True)
class _Request:
    """A validated ContextPlanRequest (items normalized, ceilings derived)."""

    input_budget: int
    recovery_reserve: int
    selectable_budget: int
    items: list[dict[str, Any]]
    ceilings: dict[str, int]
    minimums: dict[str, int]
    sink: str
    scope_admissions: list[tuple[str, str | None]]
    policy_version: str
    model_profile: str
    session_head: str
    memory_revision: int
    now_ms: int
    now_iso: str


def _normalize_request(raw: Any, profile: _digest.Profile) -> _Request:
    request = _object(raw, "ContextPlanRequest")
    unknown = [key for key in request if key not in _REQUEST_FIELDS]
    if unknown:
        raise InvalidArgument(
            "ContextPlanRequest contains unknown fields",
            details={"field": "ContextPlanRequest", "unknown": unknown},
        )
    window = _integer(request.get("modelWindowTokens"), "modelWindowTokens", 1, MAX_WINDOW_TOKENS)
    reserved = _integer(request.get("reservedOutputTokens"), "reservedOutputTokens", 0, window)
    safety = _integer(_or_zero(request, "safetyMarginTokens"), "safetyMarginTokens", 0, window)
    input_budget = window - reserved - safety
    if input_budget <= 0:
        raise ContextOverBudget(
            "model window leaves no input budget",
            details={
                "modelWindowTokens": window,
                "reservedOutputTokens": reserved,
                "safetyMarginTokens": safety,
            },
        )
    recovery = _integer(
        _or_zero(request, "recoveryReserveTokens"), "recoveryReserveTokens", 0, input_budget
    )
    selectable = input_budget - recovery
    if selectable <= 0:
        raise ContextOverBudget(
            "recovery reserve leaves no selectable input budget",
            details={"inputBudget": input_budget, "recoveryReserveTokens": recovery},
        )
    raw_items = request.get("items")
    if not isinstance(raw_items, list | tuple) or len(raw_items) > MAX_ITEMS:
        raise InvalidArgument(
            f"items must be an array with at most {MAX_ITEMS} entries", details={"field": "items"}
        )
    items = normalize_context_items(raw_items, profile=profile)
    seen: set[str] = set()
    for item in items:
        item_id = item["itemId"]
        if item_id in seen:
            raise InvalidArgument("ContextItem IDs must be unique", details={"itemId": item_id})
        seen.add(item_id)
    if "now" not in request:
        raise InvalidArgument(
            "now is required: the kernel reads no clock (pass the caller's time)",
            details={"field": "now"},
        )
    try:
        now_ms, now_iso = now_from_value(request["now"])
    except InvalidArgument as exc:
        if exc.code != "invalid_argument":
            raise
        raise InvalidArgument("now must be a valid timestamp", details={"field": "now"}) from None
    minimums: dict[str, int] = {}
    if "partitionMinimums" in request:
        minimums = normalize_partition_map(
            request["partitionMinimums"], "partitionMinimums", input_budget
        )
    explicit: dict[str, int] = {}
    if "partitionCeilings" in request:
        explicit = normalize_partition_map(
            request["partitionCeilings"], "partitionCeilings", input_budget
        )
    ceilings = derive_ceilings(selectable, explicit, minimums)
    sink = _string(request.get("sink"), "sink", 1, 128)
    admissions = _admissions(request.get("scopeAdmissions"))
    policy_version = _string(request.get("policyVersion"), "policyVersion", 1, 128)
    model_profile = _string(request.get("modelProfile"), "modelProfile", 1, 256)
    session_head = _string(request.get("sessionHead"), "sessionHead", 1, 256)
    memory_revision = _integer(request.get("memoryRevision"), "memoryRevision")
    return _Request(
        input_budget=input_budget,
        recovery_reserve=recovery,
        selectable_budget=selectable,
        items=items,
        ceilings=ceilings,
        minimums=minimums,
        sink=sink,
        scope_admissions=admissions,
        policy_version=policy_version,
        model_profile=model_profile,
        session_head=session_head,
        memory_revision=memory_revision,
        now_ms=now_ms,
        now_iso=now_iso,
    )


# --- planning -------------------------------------------------------------------------------


def _governance_reason(
    item: Mapping[str, Any], req: _Request, admitted: frozenset[tuple[str, str | None]]
) -> str | None:
    expires = item.get("expiresAt")
    if expires is not None and iso_to_epoch_ms(expires) <= req.now_ms:
        return EXPIRED
    if (item["scope"], item.get("scopeId")) not in admitted:
        return SCOPE_DENIED
    sinks = item["allowedSinks"]
    if "*" not in sinks and req.sink not in sinks:
        return SINK_DENIED
    if item["kind"] == "system-policy" and item["trust"] not in _TRUSTED:
        return UNTRUSTED_SYSTEM_POLICY
    return None


def _validate_tool_group(tool_call_id: str, members: Sequence[Mapping[str, Any]]) -> None:
    roles = {"call": 0, "result": 0}
    pending = False
    for item in members:
        binding = item["binding"]
        role = binding.get("toolRole")
        if role:
            roles[role] += 1
        if binding.get("toolOutcome") in _UNSETTLED:
            pending = True
    if not pending and (roles["call"] > 0) != (roles["result"] > 0):
        raise InvalidArgument(
            "settled tool evidence must contain both call and result",
            details={"toolCallId": tool_call_id, "itemIds": [i["itemId"] for i in members]},
        )
    if roles["call"] > 1 or roles["result"] > 1:
        raise InvalidArgument(
            "tool evidence cannot contain duplicate call/result roles",
            details={"toolCallId": tool_call_id},
        )


_PRIORITY_SPAN: Final = 1_000_000  # priorities are 0..1,000,000 (20 bits)
_Member = tuple[tuple[int, bytes], dict[str, Any], bool]


def plan_context(
    request: Mapping[str, Any], *, profile: _digest.Profile = "peer"
) -> dict[str, Any]:
    """Build a ContextPlan wire dict (see the module docstring); raises kernel errors."""
    req = _normalize_request(request, profile)
    admitted_scopes = frozenset(req.scope_admissions)
    now_ms = req.now_ms
    sink = req.sink
    dropped: list[tuple[bytes, dict[str, Any]]] = []
    singles: list[_Member] = []
    tool_groups: dict[str, list[_Member]] = {}  # first appearance order = validation order
    span, kind_order, max_seq = _PRIORITY_SPAN, _KIND_ORDER, MAX_SAFE_INTEGER
    collate = identifier_collation_key
    for item in req.items:
        binding = item.get("binding")
        kind = item["kind"]
        protected = bool(
            item["pinned"]
            or (kind == "system-policy" and item["trust"] in _TRUSTED)
            or (binding and is_protected(item))
        )
        key = (
            (((0 if protected else 1) << 20 | (span - item["priority"])) << 4 | kind_order[kind])
            << 54
            | item["sourceRef"].get("eventSequence", max_seq),
            collate(item["itemId"]),
        )
        # Governance (kernel.drop_reasons order).
        expires = item.get("expiresAt")
        if expires is not None and iso_to_epoch_ms(expires) <= now_ms:
            reason: str | None = EXPIRED
        elif (item["scope"], item.get("scopeId")) not in admitted_scopes:
            reason = SCOPE_DENIED
        elif "*" not in (sinks := item["allowedSinks"]) and sink not in sinks:
            reason = SINK_DENIED
        elif kind == "system-policy" and item["trust"] not in _TRUSTED:
            reason = UNTRUSTED_SYSTEM_POLICY
        else:
            if binding and (call_id := binding.get("toolCallId")):
                tool_groups.setdefault(call_id, []).append((key, item, protected))
            else:
                singles.append((key, item, protected))
            continue
        dropped.append(
            (
                key[1],
                {
                    "itemId": item["itemId"],
                    "digest": item["digest"],
                    "reason": reason,
                    "protected": protected,
                },
            )
        )

    # Groups: (sort key, members in item order, protected, tokens by partition, cost).
    # A single item's group key orders exactly as its item key, so without tool groups
    # the item keys are used directly; otherwise every group gets
    # (protected, max priority, first member's key).
    groups: list[tuple[Any, list[_Member], bool, dict[str, int], int]] = []
    for call_id, members in tool_groups.items():
        members.sort(key=_first)
        _validate_tool_group(call_id, [m[1] for m in members])
        protected = any(m[2] for m in members)
        by_partition: dict[str, int] = {}
        for m in members:
            part = KIND_PARTITION[m[1]["kind"]]
            by_partition[part] = by_partition.get(part, 0) + m[1]["tokenEstimate"]
        head = (0 if protected else 1, _PRIORITY_SPAN - max(m[1]["priority"] for m in members))
        groups.append(
            ((head, members[0][0]), members, protected, by_partition, sum(by_partition.values()))
        )
    if groups:
        for m in singles:
            item = m[1]
            groups.append(
                (
                    ((0 if m[2] else 1, _PRIORITY_SPAN - item["priority"]), m[0]),
                    [m],
                    m[2],
                    {KIND_PARTITION[item["kind"]]: item["tokenEstimate"]},
                    item["tokenEstimate"],
                )
            )
        groups.sort(key=_first)
    else:
        singles.sort(key=_first)

    used = dict.fromkeys(PLAN_PARTITIONS, 0)
    used[RECOVERY_RESERVE] = req.recovery_reserve
    ceilings = req.ceilings
    selectable = req.selectable_budget
    used_tokens = 0
    selected: list[_Member] = []

    def over_budget(members: list[_Member], cost: int) -> ContextOverBudget:
        return ContextOverBudget(
            "protected context exceeds input budget",
            details={
                "inputBudget": req.input_budget,
                "selectableBudget": selectable,
                "usedTokens": used_tokens,
                "requiredTokens": cost,
                "protectedItemIds": [m[1]["itemId"] for m in members],
                "usedByPartition": dict(used),
            },
        )

    def drop(members: list[_Member], reason: str) -> None:
        for m in members:
            dropped.append(
                (
                    m[0][1],
                    {
                        "itemId": m[1]["itemId"],
                        "digest": m[1]["digest"],
                        "reason": reason,
                        "protected": False,
                    },
                )
            )

    if not groups:  # every group is a single item: the same loop, unrolled
        for m in singles:
            item = m[1]
            cost = item["tokenEstimate"]
            if used_tokens + cost > selectable:
                if m[2]:
                    raise over_budget([m], cost)
                reason = INPUT_BUDGET
            else:
                part = KIND_PARTITION[item["kind"]]
                if m[2] or used[part] + cost <= ceilings[part]:
                    used_tokens += cost
                    used[part] += cost
                    selected.append(m)
                    continue
                reason = PARTITION_CEILING
            dropped.append(
                (
                    m[0][1],
                    {
                        "itemId": item["itemId"],
                        "digest": item["digest"],
                        "reason": reason,
                        "protected": False,
                    },
                )
            )
    else:
        for _, members, protected, by_partition, cost in groups:
            if used_tokens + cost > selectable:
                if protected:
                    raise over_budget(members, cost)
                drop(members, INPUT_BUDGET)
                continue
            if not protected and not all(
                used[part] + tokens <= ceilings[part] for part, tokens in by_partition.items()
            ):
                drop(members, PARTITION_CEILING)
                continue
            used_tokens += cost
            for part, tokens in by_partition.items():
                used[part] += tokens
            selected.extend(members)

    selected.sort(key=_first)
    dropped.sort(key=_first)
    selected_items = [m[1] for m in selected]
    plan: dict[str, Any] = {
        "schema": CONTEXT_PLAN_SCHEMA,
        "schemaVersion": 1,
        "sessionHead": req.session_head,
        "memoryRevision": req.memory_revision,
        "policyVersion": req.policy_version,
        "modelProfile": req.model_profile,
        "sink": sink,
        "inputBudget": req.input_budget,
        "selectableBudget": selectable,
        "selectedTokens": used_tokens,
        "partitions": {
            p: {
                "ceiling": req.recovery_reserve if p == RECOVERY_RESERVE else ceilings[p],
                "used": used[p],
            }
            for p in PLAN_PARTITIONS
        },
        "minimumShortfalls": {
            part: minimum - used[part]
            for part, minimum in req.minimums.items()
            if used[part] < minimum
        },
        "selected": selected_items,
        "selectedItemIds": [i["itemId"] for i in selected_items],
        "dropped": [d[1] for d in dropped],
        "createdAt": req.now_iso,
    }
    plan["digest"] = kernel_value_digest(plan, CONTEXT_PLAN_DOMAIN, profile, _PLAN_KEYS_CANONICAL)
    return plan


_first = operator.itemgetter(0)

#: Every dict key a plan holds (items aside): checked once, see ``kernel_value_digest``.
_PLAN_KEYS_CANONICAL: Final = ITEM_KEYS_CANONICAL and keys_sort_canonically(
    (
        frozenset(
            {
                "schema",
                "schemaVersion",
                "sessionHead",
                "memoryRevision",
                "policyVersion",
                "modelProfile",
                "sink",
                "inputBudget",
                "selectableBudget",
                "selectedTokens",
                "partitions",
                "minimumShortfalls",
                "selected",
                "selectedItemIds",
                "dropped",
                "createdAt",
                "digest",
            }
        ),
        frozenset(PLAN_PARTITIONS),
        frozenset({"ceiling", "used"}),
        frozenset({"itemId", "digest", "reason", "protected"}),
    )
)
