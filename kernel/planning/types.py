"""Typed planner API over the frozen v1 contracts.

``plan(request: ContextPlanRequest) -> ContextPlan`` is :func:`kernel.planning.planner.plan_context`
for callers holding contract dataclasses: the request goes to the wire form, the
planner works on plain dicts (fast), and the plan comes back as a frozen
:class:`~kernel.contracts.ContextPlan` whose ``to_wire()`` is the planner's dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from kernel.canonical import digest as _digest
from kernel.contracts import (
    ContentRef,
    ContextItem,
    ContextPlan,
    ContextPlanRequest,
    ItemBinding,
    PartitionMap,
    Provenance,
    SourceRef,
    wire_fields,
)
from kernel.contracts.planning import DroppedItem, PartitionUsage, PlanPartitions
from kernel.planning.planner import plan_context

__all__ = ("context_item_from_wire", "plan", "plan_from_wire")

_C = TypeVar("_C")


def _flat(cls: type[_C], value: Mapping[str, Any]) -> _C:
    """A contract whose fields are scalars (or arrays of scalars) from its wire dict."""
    kwargs = {
        f.name: tuple(value[f.wire]) if isinstance(value[f.wire], list) else value[f.wire]
        for f in wire_fields(cls)
        if f.wire in value
    }
    return cls(**kwargs)


def context_item_from_wire(value: Mapping[str, Any]) -> ContextItem:
    """A normalized ContextItem wire dict as a :class:`ContextItem`."""
    nested: dict[str, Any] = {
        "sourceRef": _flat(SourceRef, value["sourceRef"]),
        "provenance": _flat(Provenance, value["provenance"]),
    }
    if "contentRef" in value:
        nested["contentRef"] = _flat(ContentRef, value["contentRef"])
    if "binding" in value:
        nested["binding"] = _flat(ItemBinding, value["binding"])
    kwargs: dict[str, Any] = {}
    for f in wire_fields(ContextItem):
        if f.wire in nested:
            kwargs[f.name] = nested[f.wire]
        elif f.wire in value:
            raw = value[f.wire]
            kwargs[f.name] = tuple(raw) if isinstance(raw, list) else raw
    return ContextItem(**kwargs)


def plan_from_wire(value: Mapping[str, Any]) -> ContextPlan:
    """A ContextPlan wire dict (as :func:`plan_context` returns it) as a :class:`ContextPlan`."""
    partitions = PlanPartitions(
        **{
            f.name: _flat(PartitionUsage, value["partitions"][f.wire])
            for f in wire_fields(PlanPartitions)
        }
    )
    return ContextPlan(
        schema=value["schema"],
        schema_version=value["schemaVersion"],
        session_head=value["sessionHead"],
        memory_revision=value["memoryRevision"],
        policy_version=value["policyVersion"],
        model_profile=value["modelProfile"],
        sink=value["sink"],
        input_budget=value["inputBudget"],
        selectable_budget=value["selectableBudget"],
        selected_tokens=value["selectedTokens"],
        partitions=partitions,
        minimum_shortfalls=_flat(PartitionMap, value["minimumShortfalls"]),
        selected=tuple(context_item_from_wire(item) for item in value["selected"]),
        selected_item_ids=tuple(value["selectedItemIds"]),
        dropped=tuple(_flat(DroppedItem, entry) for entry in value["dropped"]),
        created_at=value["createdAt"],
        digest=value["digest"],
    )


def plan(request: ContextPlanRequest, *, profile: _digest.Profile = "peer") -> ContextPlan:
    """Plan a typed request; raises the same :mod:`kernel.errors` as ``plan_context``."""
    return plan_from_wire(plan_context(request.to_wire(), profile=profile))
