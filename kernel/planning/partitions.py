"""Input-budget partitions of a ContextPlan (design 108 §7) and their ceilings.

Seven partitions, in the design's order; every ContextItem kind maps to one of
the first six, ``recovery-reserve`` is the compaction/recovery reserve and holds
no items.  Derived ceilings follow the peer: ``floor(selectable × weight)``,
replaced by an explicit ceiling when one is given (``0`` included), then raised to
the partition's minimum; whatever the six ceilings leave of the selectable budget
is added to ``conversation`` — even when ``conversation`` was given explicitly
(the explicit value then only holds when the others already fill the budget).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from kernel.errors import InvalidArgument

__all__ = (
    "DEFAULT_PARTITION_WEIGHTS",
    "KIND_PARTITION",
    "PLAN_PARTITIONS",
    "RECOVERY_RESERVE",
    "SELECTABLE_PARTITIONS",
    "derive_ceilings",
    "normalize_partition_map",
)

RECOVERY_RESERVE: Final = "recovery-reserve"
SELECTABLE_PARTITIONS: Final = (
    "trusted-system",
    "working-state",
    "tools-and-skills",
    "conversation",
    "tool-evidence",
    "memory-and-rules",
)
PLAN_PARTITIONS: Final = (*SELECTABLE_PARTITIONS, RECOVERY_RESERVE)
_SELECTABLE_SET: Final = frozenset(SELECTABLE_PARTITIONS)

#: Which partition each ContextItem kind draws from.
KIND_PARTITION: Final[Mapping[str, str]] = MappingProxyType({
    "system-policy": "trusted-system",
    "task-state": "working-state",
    "tool-schema": "tools-and-skills",
    "skill": "tools-and-skills",
    "message": "conversation",
    "tool-evidence": "tool-evidence",
    "artifact-ref": "tool-evidence",
    "memory": "memory-and-rules",
    "project-rule": "memory-and-rules",
})

#: Default share of the selectable budget (sums to 1.0; flooring leaves a remainder).
DEFAULT_PARTITION_WEIGHTS: Final[Mapping[str, float]] = MappingProxyType({
    "trusted-system": 0.12,
    "working-state": 0.18,
    "tools-and-skills": 0.16,
    "conversation": 0.28,
    "tool-evidence": 0.14,
    "memory-and-rules": 0.12,
})


def _amount(value: Any, field: str, maximum: int) -> int:
    kind = type(value)
    if (kind is int or (kind is float and value.is_integer())) and 0 <= value <= maximum:
        return int(value)
    raise InvalidArgument(
        f"{field} must be an integer between 0 and {maximum}", details={"field": field}
    )


def normalize_partition_map(value: Any, field: str, input_budget: int) -> dict[str, int]:
    """``partitionCeilings`` / ``partitionMinimums``: known selectable partitions only,
    integer amounts in ``[0, inputBudget]``; entry order is kept."""
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"{field} must be an object", details={"field": field})
    unknown = [key for key in value if key not in _SELECTABLE_SET]
    if unknown:
        raise InvalidArgument(
            f"{field} contains unknown partitions", details={"field": field, "unknown": unknown}
        )
    return {key: _amount(amount, f"{field}.{key}", input_budget) for key, amount in value.items()}


def derive_ceilings(
    selectable_budget: int, explicit: Mapping[str, int], minimums: Mapping[str, int]
) -> dict[str, int]:
    """Ceilings of the six selectable partitions (see the module docstring)."""
    output: dict[str, int] = {}
    assigned = 0
    for partition in SELECTABLE_PARTITIONS:
        given = explicit.get(partition)
        # IEEE double product then floor, as the peer computes it.
        ceiling = (
            given
            if given is not None
            else math.floor(selectable_budget * DEFAULT_PARTITION_WEIGHTS[partition])
        )
        ceiling = max(minimums.get(partition, 0), ceiling)
        output[partition] = ceiling
        assigned += ceiling
    if assigned < selectable_budget:
        output["conversation"] += selectable_budget - assigned
    return output
