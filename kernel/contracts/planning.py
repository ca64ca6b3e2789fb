"""Context planning contracts (design 108 §7): request, plan, partitions, drop entries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Final, Literal

from kernel.contracts._base import (
    MAX_ITEMS,
    Constraint,
    Count,
    Digest,
    Head,
    Identifier,
    ModelProfile,
    PolicyVersion,
    Positive,
    SchemaVersion,
    Sink,
    Timestamp,
    Tokens,
    WindowTokens,
    WireContract,
)
from kernel.contracts.items import ContextItem, ScopeAdmission

#: The selectable input-budget partitions, in the design's order (§7).
Partition = Literal[
    "trusted-system",
    "working-state",
    "tools-and-skills",
    "conversation",
    "tool-evidence",
    "memory-and-rules",
]
#: ``Partition`` plus the compaction / recovery reserve (the plan reports all seven).
PlanPartition = Literal[
    "trusted-system",
    "working-state",
    "tools-and-skills",
    "conversation",
    "tool-evidence",
    "memory-and-rules",
    "recovery-reserve",
]
PARTITIONS: Final[tuple[Partition, ...]] = (
    "trusted-system",
    "working-state",
    "tools-and-skills",
    "conversation",
    "tool-evidence",
    "memory-and-rules",
)
PLAN_PARTITIONS: Final[tuple[PlanPartition, ...]] = (*PARTITIONS, "recovery-reserve")

#: Why an item left the plan; governance reasons first, then budget reasons (§7, §14).
DropReason = Literal[
    "expired",
    "scope_denied",
    "sink_denied",
    "untrusted_system_policy",
    "input_budget",
    "partition_ceiling",
]

ScopeAdmissions = Annotated[tuple[ScopeAdmission, ...], Constraint(min_length=1, max_length=128)]
Items = Annotated[tuple[ContextItem, ...], Constraint(max_length=MAX_ITEMS)]
ItemIds = Annotated[tuple[Identifier, ...], Constraint(max_length=MAX_ITEMS)]


def _attr(partition: str) -> str:
    return partition.replace("-", "_")


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMap(WireContract):
    """Tokens per partition (ceilings, minimums, shortfalls); absent = not given."""

    trusted_system: Count | None = None
    working_state: Count | None = None
    tools_and_skills: Count | None = None
    conversation: Count | None = None
    tool_evidence: Count | None = None
    memory_and_rules: Count | None = None

    def get(self, partition: Partition) -> int | None:
        value: int | None = getattr(self, _attr(partition))
        return value

    def items(self) -> tuple[tuple[Partition, int], ...]:
        """The given entries, in partition order."""
        out: list[tuple[Partition, int]] = []
        for p in PARTITIONS:
            value = self.get(p)
            if value is not None:
                out.append((p, value))
        return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextPlanRequest(WireContract):
    """``planContext``: window, reserves, candidate items, sink and admitted scopes."""

    model_window_tokens: WindowTokens
    reserved_output_tokens: Tokens
    safety_margin_tokens: Tokens | None = None
    recovery_reserve_tokens: Tokens | None = None
    items: Items
    sink: Sink
    scope_admissions: ScopeAdmissions
    partition_ceilings: PartitionMap | None = None
    partition_minimums: PartitionMap | None = None
    policy_version: PolicyVersion
    model_profile: ModelProfile
    session_head: Head
    memory_revision: Count
    now: Timestamp | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionUsage(WireContract):
    ceiling: Count
    used: Count


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanPartitions(WireContract):
    """Ceiling and use of all seven partitions (``recovery-reserve`` = the reserve)."""

    trusted_system: PartitionUsage
    working_state: PartitionUsage
    tools_and_skills: PartitionUsage
    conversation: PartitionUsage
    tool_evidence: PartitionUsage
    memory_and_rules: PartitionUsage
    recovery_reserve: PartitionUsage

    def get(self, partition: PlanPartition) -> PartitionUsage:
        usage: PartitionUsage = getattr(self, _attr(partition))
        return usage


@dataclass(frozen=True, slots=True, kw_only=True)
class DroppedItem(WireContract):
    """An item left out of a plan, with its drop reason; ``protected`` items are reported."""

    item_id: Identifier
    digest: Digest
    reason: DropReason
    protected: bool


DroppedItems = Annotated[tuple[DroppedItem, ...], Constraint(max_length=MAX_ITEMS)]


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextPlan(WireContract):
    """The planner's output (§7): selected items in final order, drops with reasons."""

    schema: Literal["chainlesschain.context-plan/v1"] = "chainlesschain.context-plan/v1"
    schema_version: SchemaVersion = 1
    session_head: Head
    memory_revision: Count
    policy_version: PolicyVersion
    model_profile: ModelProfile
    sink: Sink
    input_budget: Positive
    selectable_budget: Positive
    selected_tokens: Count
    partitions: PlanPartitions
    minimum_shortfalls: PartitionMap | None = None
    selected: Items
    selected_item_ids: ItemIds
    dropped: DroppedItems
    created_at: Timestamp
    digest: Digest
