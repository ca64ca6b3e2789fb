"""Registry of the planner's drop reasons (design 108 §7, peer ``planContext``).

A ContextPlan lists every candidate item it did not select in ``dropped`` with one
reason from this registry.  Governance reasons are checked per item, in the order
below, before any budget is spent; budget reasons are checked per tool group (or
single item) in the deterministic selection order.  The wire strings are the peer's.

Protected items (see :func:`kernel.planning.planner.is_protected`) may still be dropped for a
governance reason — they are listed with ``protected: true`` — but never for a
budget reason: a protected group that does not fit the selectable budget makes the
whole plan fail with ``context_over_budget`` instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal

DropReasonCode = Literal[
    "expired",
    "scope_denied",
    "sink_denied",
    "untrusted_system_policy",
    "input_budget",
    "partition_ceiling",
]


@dataclasses.dataclass(frozen=True, slots=True)
class DropReason:
    code: DropReasonCode
    stage: Literal["governance", "budget"]
    meaning: str
    applies_to_protected: bool


_REASONS: Final = (
    DropReason(
        "expired",
        "governance",
        "the item's expiresAt is at or before the plan's now (expiresAt <= now).",
        True,
    ),
    DropReason(
        "scope_denied",
        "governance",
        "the item's (scope, scopeId) is not one of the request's scopeAdmissions.",
        True,
    ),
    DropReason(
        "sink_denied",
        "governance",
        "neither '*' nor the request's sink is among the item's allowedSinks.",
        True,
    ),
    DropReason(
        "untrusted_system_policy",
        "governance",
        "a system-policy item whose trust is not host or verified: untrusted text never "
        "becomes policy, pinned or not (§6.1, §12.1).",
        True,
    ),
    DropReason(
        "input_budget",
        "budget",
        "the item's group does not fit the remaining selectable budget "
        "(inputBudget minus the recovery reserve).",
        False,
    ),
    DropReason(
        "partition_ceiling",
        "budget",
        "the group fits the global budget but would exceed the ceiling of a partition "
        "it uses; protected groups are exempt from this check.",
        False,
    ),
)

DROP_REASONS: Final[Mapping[str, DropReason]] = MappingProxyType({r.code: r for r in _REASONS})
GOVERNANCE_ORDER: Final = tuple(r.code for r in _REASONS if r.stage == "governance")
BUDGET_ORDER: Final = tuple(r.code for r in _REASONS if r.stage == "budget")

EXPIRED: Final = "expired"
SCOPE_DENIED: Final = "scope_denied"
SINK_DENIED: Final = "sink_denied"
UNTRUSTED_SYSTEM_POLICY: Final = "untrusted_system_policy"
INPUT_BUDGET: Final = "input_budget"
PARTITION_CEILING: Final = "partition_ceiling"

__all__ = (
    "BUDGET_ORDER",
    "DROP_REASONS",
    "EXPIRED",
    "GOVERNANCE_ORDER",
    "INPUT_BUDGET",
    "PARTITION_CEILING",
    "SCOPE_DENIED",
    "SINK_DENIED",
    "UNTRUSTED_SYSTEM_POLICY",
    "DropReason",
    "DropReasonCode",
)
