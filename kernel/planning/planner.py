"""Context Planner (design 108 §7): ``plan_context(request) -> ContextPlan`` wire dict.

Pure and deterministic; byte-compatible with the peer's ``planContext`` under the
``"peer"`` digest profile.  The algorithm (see ``docs/planner.md``):

1. Validate the request in the peer's order; ``inputBudget = window − reservedOutput −
   safetyMargin`` and ``selectableBudget = inputBudget − recoveryReserve`` must be
   positive (``context_over_budget``).  Every item is normalized (digest re-verified).
2. Governance, per item: ``expired``, ``scope_denied``, ``sink_denied``,
   ``untrusted_system_policy`` (:mod:`kernel.planning.drop_reasons`).
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

Implementation: the items arrive as columns (:func:`kernel.canonical.item_batch.
context_item_batch`, which re-verifies every digest); governance is decided once per
distinct value (scope pair, sink list, expiry); the selection order is one packed int
per item plus the itemId collation key, sorted stably in two passes; normalized item
dicts are built only for the selected items.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from kernel.canonical import digest as _digest
from kernel.canonical.checks import (
    MISSING,
    bounded_integer,
    bounded_string,
    object_value,
    scope_pair,
)
from kernel.canonical.item_batch import ItemBatch, context_item_batch
from kernel.canonical.items import (
    CONTEXT_KINDS,
    ITEM_KEYS,
    canonical_keys,
    identifier_collation_keys,
    kernel_digest,
    peer_collation_key,
)
from kernel.canonical.timestamps import iso_to_epoch_ms, now_from_value
from kernel.errors import ContextOverBudget, InvalidArgument
from kernel.planning.drop_reasons import (
    EXPIRED,
    INPUT_BUDGET,
    PARTITION_CEILING,
    SCOPE_DENIED,
    SINK_DENIED,
    UNTRUSTED_SYSTEM_POLICY,
)
from kernel.planning.partitions import (
    KIND_PARTITION,
    PLAN_PARTITIONS,
    RECOVERY_RESERVE,
    derive_ceilings,
    normalize_partition_map,
)
from kernel.vocabulary import MAX_ITEMS, MAX_PRIORITY, MAX_SAFE_INTEGER, MAX_TOKENS, POLICY_TRUST

__all__ = (
    "CONTEXT_PLAN_DOMAIN",
    "CONTEXT_PLAN_SCHEMA",
    "PLAN_POLICY_FIELDS",
    "is_protected",
    "item_order_key",
    "plan_context",
)

CONTEXT_PLAN_SCHEMA: Final = "chainlesschain.context-plan/v1"
CONTEXT_PLAN_DOMAIN: Final = "chainlesschain.context-plan/v1"
MAX_WINDOW_TOKENS: Final = MAX_TOKENS

#: The request's budget and policy fields, in the request's order (compaction passes these
#: through to the plan it asks for).
PLAN_POLICY_FIELDS: Final = (
    "modelWindowTokens",
    "reservedOutputTokens",
    "safetyMarginTokens",
    "recoveryReserveTokens",
    "sink",
    "scopeAdmissions",
    "partitionCeilings",
    "partitionMinimums",
    "policyVersion",
    "modelProfile",
)
_REQUEST_FIELDS: Final = frozenset(PLAN_POLICY_FIELDS) | {
    "items", "sessionHead", "memoryRevision", "now"
}
_ADMISSION_FIELDS: Final = frozenset({"scope", "scopeId"})
_KIND_ORDER: Final = MappingProxyType({kind: i for i, kind in enumerate(CONTEXT_KINDS)})
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
    if item["kind"] == "system-policy" and item["trust"] in POLICY_TRUST:
        return True
    return _binding_protects(item.get("binding"))


def _binding_protects(binding: Mapping[str, Any] | None) -> bool:
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
        admission = object_value(entry, label)
        unknown = [key for key in admission if key not in _ADMISSION_FIELDS]
        if unknown:
            raise InvalidArgument(
                f"{label} contains unknown fields", details={"field": label, "unknown": unknown}
            )
        output.append(
            scope_pair(admission.get("scope"), admission.get("scopeId", MISSING), f"{label}.scope")
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
    items: ItemBatch
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
    request = object_value(raw, "ContextPlanRequest")
    unknown = [key for key in request if key not in _REQUEST_FIELDS]
    if unknown:
        raise InvalidArgument(
            "ContextPlanRequest contains unknown fields",
            details={"field": "ContextPlanRequest", "unknown": unknown},
        )
    get = request.get
    window = bounded_integer(get("modelWindowTokens"), "modelWindowTokens", 1, MAX_WINDOW_TOKENS)
    reserved = bounded_integer(get("reservedOutputTokens"), "reservedOutputTokens", 0, window)
    safety = bounded_integer(
        _or_zero(request, "safetyMarginTokens"), "safetyMarginTokens", 0, window
    )
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
    recovery = bounded_integer(
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
    items = context_item_batch(raw_items, profile=profile)
    if len(set(items.ids)) != len(items.ids):
        seen: set[str] = set()
        for item_id in items.ids:
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
    sink = bounded_string(request.get("sink"), "sink", 1, 128)
    admissions = _admissions(request.get("scopeAdmissions"))
    policy_version = bounded_string(request.get("policyVersion"), "policyVersion", 1, 128)
    model_profile = bounded_string(request.get("modelProfile"), "modelProfile", 1, 256)
    session_head = bounded_string(request.get("sessionHead"), "sessionHead", 1, 256)
    memory_revision = bounded_integer(request.get("memoryRevision"), "memoryRevision")
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


def _governance(batch: ItemBatch, req: _Request) -> list[str | None]:
    """Admission drops per item, in the order of :mod:`kernel.planning.drop_reasons`; each check
    is decided once per distinct value and only visits the items when one fails."""
    reasons: list[str | None] = [None] * len(batch.ids)
    if batch.expires is not None:
        now_ms = req.now_ms
        dead = {e for e in set(batch.expires) if e is not None and iso_to_epoch_ms(e) <= now_ms}
        if dead:
            for i, expires in enumerate(batch.expires):
                if expires in dead:
                    reasons[i] = EXPIRED
    admitted = frozenset(req.scope_admissions)
    scopes, scope_ids = set(batch.scopes), set(batch.scope_ids)
    if len(scopes) == 1 == len(scope_ids):
        pairs: Iterable[tuple[str, str | None]] = ((scopes.pop(), scope_ids.pop()),)
    else:
        pairs = zip(batch.scopes, batch.scope_ids, strict=True)
    if not admitted.issuperset(pairs):
        for i, pair in enumerate(zip(batch.scopes, batch.scope_ids, strict=True)):
            if pair not in admitted and reasons[i] is None:
                reasons[i] = SCOPE_DENIED
    sink = req.sink
    denied = {
        s
        for s in set(batch.sinks)
        if not (s in ("*", sink) if type(s) is str else "*" in s or sink in s)
    }
    if denied:
        for i, sinks in enumerate(batch.sinks):
            if sinks in denied and reasons[i] is None:
                reasons[i] = SINK_DENIED
    if "system-policy" in batch.kinds:
        for i, (kind, trust) in enumerate(zip(batch.kinds, batch.trusts, strict=True)):
            if kind == "system-policy" and trust not in POLICY_TRUST and reasons[i] is None:
                reasons[i] = UNTRUSTED_SYSTEM_POLICY
    return reasons


def _protected(batch: ItemBatch) -> Sequence[bool]:
    if batch.bindings is None and "system-policy" not in batch.kinds:
        return batch.pinned
    bindings = batch.bindings or [None] * len(batch.ids)
    return [
        bool(pinned or (kind == "system-policy" and trust in POLICY_TRUST) or _binding_protects(b))
        for pinned, kind, trust, b in zip(
            batch.pinned, batch.kinds, batch.trusts, bindings, strict=True
        )
    ]


_PRIORITY_SPAN: Final = MAX_PRIORITY  # priorities are 0..1,000,000 (20 bits)


def _order_keys(batch: ItemBatch, protected: Sequence[bool]) -> list[int]:
    """:func:`item_order_key` without the itemId, packed into one int:
    ``(not protected, -priority, kind order, eventSequence)`` as 1+20+4+54 bits.  When
    no item is protected and all share one kind (:func:`_one_unprotected_kind`, the gate)
    the constant high bits are computed once; else :func:`_packed_order_keys`."""
    kind = _one_unprotected_kind(batch.kinds, protected)
    if kind is None:
        return _packed_order_keys(batch, protected)
    top = ((1 << 20 | _PRIORITY_SPAN) << 4 | _KIND_ORDER[kind]) << 54
    return [top - (p << 58) + s for p, s in zip(batch.priorities, batch.sequences, strict=True)]


def _one_unprotected_kind(kinds: Sequence[str], protected: Sequence[bool]) -> str | None:
    """The kind every item has, when no item is protected; else ``None``."""
    if True in protected:
        return None
    distinct = set(kinds)
    return distinct.pop() if len(distinct) == 1 else None


def _packed_order_keys(batch: ItemBatch, protected: Sequence[bool]) -> list[int]:
    """The packed order keys, item by item (the exact path of :func:`_order_keys`)."""
    span, kind_order = _PRIORITY_SPAN, _KIND_ORDER
    return [
        (((0 if pr else 1) << 20 | (span - p)) << 4 | kind_order[k]) << 54 | s
        for pr, p, k, s in zip(
            protected, batch.priorities, batch.kinds, batch.sequences, strict=True
        )
    ]


def _validate_tool_group(tool_call_id: str, members: Sequence[int], batch: ItemBatch) -> None:
    roles = {"call": 0, "result": 0}
    pending = False
    bindings = batch.bindings or ()
    for i in members:
        binding = bindings[i] or {}
        role = binding.get("toolRole")
        if role:
            roles[role] += 1
        if binding.get("toolOutcome") in _UNSETTLED:
            pending = True
    if not pending and (roles["call"] > 0) != (roles["result"] > 0):
        raise InvalidArgument(
            "settled tool evidence must contain both call and result",
            details={"toolCallId": tool_call_id, "itemIds": [batch.ids[i] for i in members]},
        )
    if roles["call"] > 1 or roles["result"] > 1:
        raise InvalidArgument(
            "tool evidence cannot contain duplicate call/result roles",
            details={"toolCallId": tool_call_id},
        )


# A group: (sort key, member indices in item order, protected, tokens by partition, cost).
_Group = tuple[Any, list[int], bool, tuple[tuple[str, int], ...], int]


def plan_context(
    request: Mapping[str, Any], *, profile: _digest.Profile = "peer"
) -> dict[str, Any]:
    """Build a ContextPlan wire dict (see the module docstring); raises kernel errors."""
    req = _normalize_request(request, profile)
    batch = req.items
    ids, kinds, tokens = batch.ids, batch.kinds, batch.tokens
    reasons = _governance(batch, req)
    protected = _protected(batch)
    keys = _order_keys(batch, protected)
    collation = identifier_collation_keys(ids)
    by_id = sorted(range(len(ids)), key=collation.__getitem__)
    order = sorted(by_id, key=keys.__getitem__)  # stable: (key, itemId collation)

    def rank(i: int) -> tuple[int, bytes]:
        return keys[i], collation[i]

    tool_groups: dict[str, list[int]] = {}  # first appearance order = validation order
    if batch.bindings is not None:
        for i, binding in enumerate(batch.bindings):
            if reasons[i] is None and binding and (call_id := binding.get("toolCallId")):
                tool_groups.setdefault(call_id, []).append(i)

    used = dict.fromkeys(PLAN_PARTITIONS, 0)
    used[RECOVERY_RESERVE] = req.recovery_reserve
    ceilings = req.ceilings
    selectable = req.selectable_budget
    used_tokens = 0
    selected: list[int] = []

    def over_budget(members: list[int], cost: int) -> ContextOverBudget:
        return ContextOverBudget(
            "protected context exceeds input budget",
            details={
                "inputBudget": req.input_budget,
                "selectableBudget": selectable,
                "usedTokens": used_tokens,
                "requiredTokens": cost,
                "protectedItemIds": [ids[i] for i in members],
                "usedByPartition": dict(used),
            },
        )

    # One selection loop over units in selection order: each tool group sorts by
    # (protected, max priority, its first member's key), and a single item's group key
    # orders exactly as its item key — so the singles, already in item order, are merged
    # with the (few) sorted groups, and no per-item key is built when there is no group.
    groups: list[_Group] = []
    grouped: set[int] = set()
    for call_id, members in tool_groups.items():
        members.sort(key=rank)
        _validate_tool_group(call_id, members, batch)
        protect = any(protected[i] for i in members)
        by_partition: dict[str, int] = {}
        for i in members:
            part = KIND_PARTITION[kinds[i]]
            by_partition[part] = by_partition.get(part, 0) + tokens[i]
        head = (0 if protect else 1, _PRIORITY_SPAN - max(batch.priorities[i] for i in members))
        cost = sum(by_partition.values())
        groups.append(((head, rank(members[0])), members, protect,
                       tuple(by_partition.items()), cost))
        grouped.update(members)
    groups.sort(key=_first)
    partition_of = KIND_PARTITION
    pending = iter(groups)
    next_group = next(pending, None)

    def single_key(i: int) -> Any:
        return ((0 if protected[i] else 1, _PRIORITY_SPAN - batch.priorities[i]), rank(i))

    def consider(members: Sequence[int], protect: bool,
                 parts: Sequence[tuple[str, int]], cost: int) -> None:
        nonlocal used_tokens
        if used_tokens + cost > selectable:
            if protect:
                raise over_budget(list(members), cost)
            reason = INPUT_BUDGET
        elif not protect and not all(used[part] + amount <= ceilings[part]
                                     for part, amount in parts):
            reason = PARTITION_CEILING
        else:
            used_tokens += cost
            for part, amount in parts:
                used[part] += amount
            selected.extend(members)
            return
        for i in members:
            reasons[i] = reason

    for i in order:
        if reasons[i] is not None or i in grouped:
            continue
        while next_group is not None and next_group[0] < single_key(i):
            consider(*next_group[1:])
            next_group = next(pending, None)
        consider((i,), protected[i], ((partition_of[kinds[i]], tokens[i]),), tokens[i])
    while next_group is not None:
        consider(*next_group[1:])
        next_group = next(pending, None)
    if groups:
        selected.sort(key=rank)

    digests = batch.digests
    plan: dict[str, Any] = {
        "schema": CONTEXT_PLAN_SCHEMA,
        "schemaVersion": 1,
        "sessionHead": req.session_head,
        "memoryRevision": req.memory_revision,
        "policyVersion": req.policy_version,
        "modelProfile": req.model_profile,
        "sink": req.sink,
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
        "selected": [batch.item(i) for i in selected],
        "selectedItemIds": [ids[i] for i in selected],
        "dropped": [
            {"itemId": ids[i], "digest": digests[i], "reason": r, "protected": protected[i]}
            for i in by_id
            if (r := reasons[i]) is not None
        ],
        "createdAt": req.now_iso,
    }
    plan["digest"] = kernel_digest(plan, CONTEXT_PLAN_DOMAIN, profile, _PLAN_KEYS)
    return plan


_first = operator.itemgetter(0)

#: Every dict key a plan holds, its items' included (see ``kernel_digest``).
_PLAN_KEY_SETS: Final = (
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
_PLAN_KEYS: Final = (
    None if ITEM_KEYS is None else canonical_keys((ITEM_KEYS.names, *_PLAN_KEY_SETS))
)
