"""The context planner's specification, written plainly (design 108 §6).

:func:`reference_plan` is the planner's algorithm on normalized dicts, with no batch
columns, no fast paths and one loop per step, in the order ``kernel.planning.planner``'s docstring
gives. :func:`kernel.planning.planner.plan_context` is the implementation users call; hypothesis
properties (``tests/kernel/test_planner_fastpath.py``) hold it equal to this function on
arbitrary requests, plan and error alike, and the benchmark's own request is checked here
too. The specification lives in the kernel so the next engineer reads it beside the code
it constrains, not in a test.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernel.canonical import digest as kdigest
from kernel.canonical.items import normalize_context_item, peer_collation_key
from kernel.canonical.timestamps import iso_to_epoch_ms
from kernel.errors import ContextOverBudget, InvalidArgument
from kernel.planning.drop_reasons import (
    EXPIRED,
    INPUT_BUDGET,
    PARTITION_CEILING,
    SCOPE_DENIED,
    SINK_DENIED,
    UNTRUSTED_SYSTEM_POLICY,
)
from kernel.planning.partitions import KIND_PARTITION, PLAN_PARTITIONS, RECOVERY_RESERVE
from kernel.planning.planner import (
    CONTEXT_PLAN_DOMAIN,
    CONTEXT_PLAN_SCHEMA,
    _normalize_request,
    is_protected,
    item_order_key,
)

__all__ = ("reference_plan",)


def reference_plan(request: Mapping[str, Any], profile: kdigest.Profile = "peer"
                   ) -> dict[str, Any]:
    """The planner's algorithm, written plainly: the specification
    :func:`kernel.planning.planner.plan_context` is tested against (same plan, same errors)."""
    req = _normalize_request(request, profile)  # the request checks are shared code
    items = [normalize_context_item(raw, profile=profile) for raw in request["items"]]
    admitted = set(req.scope_admissions)
    dropped: list[tuple[dict[str, Any], str, bool]] = []
    singles: list[tuple[Any, dict[str, Any], bool]] = []
    groups: dict[str, list[tuple[Any, dict[str, Any], bool]]] = {}
    for item in items:
        protected = is_protected(item)
        key = item_order_key(item, protected)
        sinks = item["allowedSinks"]
        reason = None
        if "expiresAt" in item and iso_to_epoch_ms(item["expiresAt"]) <= req.now_ms:
            reason = EXPIRED
        elif (item["scope"], item.get("scopeId")) not in admitted:
            reason = SCOPE_DENIED
        elif "*" not in sinks and req.sink not in sinks:
            reason = SINK_DENIED
        elif item["kind"] == "system-policy" and item["trust"] not in ("host", "verified"):
            reason = UNTRUSTED_SYSTEM_POLICY
        if reason is not None:
            dropped.append((item, reason, protected))
        elif call_id := (item.get("binding") or {}).get("toolCallId"):
            groups.setdefault(call_id, []).append((key, item, protected))
        else:
            singles.append((key, item, protected))
    units = []
    for call_id, members in groups.items():
        members.sort(key=lambda m: m[0])
        bindings = [m[1]["binding"] for m in members]
        calls = sum(b.get("toolRole") == "call" for b in bindings)
        results = sum(b.get("toolRole") == "result" for b in bindings)
        pending = any(b.get("toolOutcome") in ("pending", "unknown") for b in bindings)
        if not pending and (calls > 0) != (results > 0):
            raise InvalidArgument(
                "settled tool evidence must contain both call and result",
                details={"toolCallId": call_id, "itemIds": [m[1]["itemId"] for m in members]},
            )
        if calls > 1 or results > 1:
            raise InvalidArgument(
                "tool evidence cannot contain duplicate call/result roles",
                details={"toolCallId": call_id},
            )
        protected = any(m[2] for m in members)
        head = (not protected, -max(m[1]["priority"] for m in members))
        units.append(((head, members[0][0]), members, protected))
    for m in singles:
        units.append((((not m[2], -m[1]["priority"]), m[0]), [m], m[2]))
    units.sort(key=lambda u: u[0])
    used = dict.fromkeys(PLAN_PARTITIONS, 0)
    used[RECOVERY_RESERVE] = req.recovery_reserve
    used_tokens = 0
    selected: list[tuple[Any, dict[str, Any], bool]] = []
    for _, members, protected in units:
        by_partition: dict[str, int] = {}
        for m in members:
            part = KIND_PARTITION[m[1]["kind"]]
            by_partition[part] = by_partition.get(part, 0) + m[1]["tokenEstimate"]
        cost = sum(by_partition.values())
        if used_tokens + cost > req.selectable_budget:
            if protected:
                raise ContextOverBudget(
                    "protected context exceeds input budget",
                    details={
                        "inputBudget": req.input_budget,
                        "selectableBudget": req.selectable_budget,
                        "usedTokens": used_tokens,
                        "requiredTokens": cost,
                        "protectedItemIds": [m[1]["itemId"] for m in members],
                        "usedByPartition": dict(used),
                    },
                )
            dropped += [(m[1], INPUT_BUDGET, False) for m in members]
        elif not protected and any(used[p] + t > req.ceilings[p] for p, t in by_partition.items()):
            dropped += [(m[1], PARTITION_CEILING, False) for m in members]
        else:
            used_tokens += cost
            for p, t in by_partition.items():
                used[p] += t
            selected += members
    selected.sort(key=lambda m: m[0])
    dropped.sort(key=lambda d: peer_collation_key(d[0]["itemId"]))
    plan: dict[str, Any] = {
        "schema": CONTEXT_PLAN_SCHEMA,
        "schemaVersion": 1,
        "sessionHead": req.session_head,
        "memoryRevision": req.memory_revision,
        "policyVersion": req.policy_version,
        "modelProfile": req.model_profile,
        "sink": req.sink,
        "inputBudget": req.input_budget,
        "selectableBudget": req.selectable_budget,
        "selectedTokens": used_tokens,
        "partitions": {
            p: {
                "ceiling": req.recovery_reserve if p == RECOVERY_RESERVE else req.ceilings[p],
                "used": used[p],
            }
            for p in PLAN_PARTITIONS
        },
        "minimumShortfalls": {
            p: minimum - used[p] for p, minimum in req.minimums.items() if used[p] < minimum
        },
        "selected": [m[1] for m in selected],
        "selectedItemIds": [m[1]["itemId"] for m in selected],
        "dropped": [
            {"itemId": d["itemId"], "digest": d["digest"], "reason": r, "protected": p}
            for d, r, p in dropped
        ],
        "createdAt": req.now_iso,
    }
    plan["digest"] = kdigest.digest(plan, CONTEXT_PLAN_DOMAIN, profile)
    return plan
