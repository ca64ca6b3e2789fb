"""Failure outcomes of design 108 §17 as typed result values (never exceptions).

==========================  =================================  ==========================
outcome (``code``)          the kernel must return              and must never
==========================  =================================  ==========================
ContextOverBudget           ``context_over_budget`` + per-      silently cut safety / task
(``context_over_budget``)   partition detail                    state
Degraded (``degraded``)     the fallback strategy, named        pass it off as a semantic
                                                                summary
ReconciliationRequired      ``reconciliation_required``         treat it as free and retry
Stale (``stale``)           the current head                    overwrite newer events
ContentUnavailable /        which object / which digest         continue with wrong content
DigestMismatch
ScopeDeniedOutcome          ``scope_denied``                    fall back across scopes
(``scope_denied``)
Partial (``partial``)       the pending per-store receipts      report "fully deleted"
IndexDegraded               rebuild / lexical fallback          treat index rows as the
(``index_degraded``)                                            authoritative memory
==========================  =================================  ==========================

Each outcome has a stable ``code`` (the contract) and ``to_wire()`` giving
``{"code", "message", "details"}``, the same shape as a peer error record, with
camelCase detail keys.  Messages name no bodies and no secrets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Final, Literal

from kernel.contracts import wire_fields, wire_value
from kernel.contracts.compaction import CompactionStrategy
from kernel.contracts.deletion import StoreReceipt
from kernel.contracts.planning import PlanPartition


class Outcome:
    """Base of the §17 failure outcomes."""

    __slots__ = ()
    code: ClassVar[str] = "outcome"

    @property
    def message(self) -> str:
        return self.code.replace("_", " ")

    def details(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in wire_fields(type(self)):
            value = getattr(self, f.name)
            if value is not None:
                out[f.wire] = wire_value(value)
        return out

    def to_wire(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details()}


OverBudgetReason = Literal["no_input_budget", "no_selectable_budget", "protected_exceeds_budget"]

_OVER_BUDGET_MESSAGES: Final[Mapping[str, str]] = MappingProxyType({
    "no_input_budget": "model window leaves no input budget",
    "no_selectable_budget": "recovery reserve leaves no selectable input budget",
    "protected_exceeds_budget": "protected context exceeds input budget",
})


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextOverBudget(Outcome):
    """Protected state cannot fit; ``used_by_partition`` is the per-partition detail."""

    code: ClassVar[str] = "context_over_budget"
    reason: OverBudgetReason
    model_window_tokens: int | None = None
    reserved_output_tokens: int | None = None
    safety_margin_tokens: int | None = None
    recovery_reserve_tokens: int | None = None
    input_budget: int | None = None
    selectable_budget: int | None = None
    used_tokens: int | None = None
    required_tokens: int | None = None
    protected_item_ids: tuple[str, ...] | None = None
    used_by_partition: tuple[tuple[PlanPartition, int], ...] | None = None

    @property
    def message(self) -> str:
        return _OVER_BUDGET_MESSAGES[self.reason]

    def details(self) -> dict[str, Any]:
        out = Outcome.details(self)
        if self.used_by_partition is not None:
            out["usedByPartition"] = dict(self.used_by_partition)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Degraded(Outcome):
    """A provider summary failed and a safe local fallback was used instead."""

    code: ClassVar[str] = "degraded"
    fallback_strategy: CompactionStrategy
    reason_code: str
    operation_id: str | None = None

    @property
    def message(self) -> str:
        return f"summary degraded to {self.fallback_strategy}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconciliationRequired(Outcome):
    """A provider / effect / store result is unknown; reconcile before going on."""

    code: ClassVar[str] = "reconciliation_required"
    operation_id: str
    reason_code: str
    subject: Literal["compaction", "deletion"] | None = None

    @property
    def message(self) -> str:
        return f"operation {self.operation_id} requires reconciliation"


@dataclass(frozen=True, slots=True, kw_only=True)
class Stale(Outcome):
    """The session head moved under a CAS; recompute on ``current_head``."""

    code: ClassVar[str] = "stale"
    input_head: str
    current_head: str | None
    operation_id: str | None = None

    @property
    def message(self) -> str:
        return "session head changed; recompute against the current head"


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentUnavailable(Outcome):
    """A referenced content object is missing or not readable."""

    code: ClassVar[str] = "content_unavailable"
    store: str
    object_id: str
    digest: str | None = None
    reason_code: str | None = None

    @property
    def message(self) -> str:
        return f"content object {self.object_id} is unavailable in {self.store}"


@dataclass(frozen=True, slots=True, kw_only=True)
class DigestMismatch(Outcome):
    """A supplied digest differs from the recomputed one; the content is not used."""

    code: ClassVar[str] = "digest_mismatch"
    subject: str
    subject_id: str
    expected: str
    actual: str

    @property
    def message(self) -> str:
        return f"{self.subject} digest does not match canonical content"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScopeDeniedOutcome(Outcome):
    """The memory scope does not match; no cross-scope fallback happened."""

    code: ClassVar[str] = "scope_denied"
    scope: str
    scope_id: str | None = None
    memory_id: str | None = None
    reason_code: str | None = None

    @property
    def message(self) -> str:
        return f"scope {self.scope} is not admitted"


@dataclass(frozen=True, slots=True, kw_only=True)
class Partial(Outcome):
    """Some required copies were not purged; ``pending`` lists their receipts."""

    code: ClassVar[str] = "partial"
    request_id: str
    pending: tuple[StoreReceipt, ...]

    @property
    def message(self) -> str:
        return f"deletion incomplete: {len(self.pending)} store(s) pending"


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexDegraded(Outcome):
    """A search index is damaged; results come from the rebuild or a lexical scan."""

    code: ClassVar[str] = "index_degraded"
    index: str
    fallback: Literal["rebuild", "lexical"]
    reason_code: str | None = None

    @property
    def message(self) -> str:
        return f"index {self.index} degraded; using {self.fallback} fallback"


OUTCOME_TYPES: Final[tuple[type[Outcome], ...]] = (
    ContextOverBudget,
    Degraded,
    ReconciliationRequired,
    Stale,
    ContentUnavailable,
    DigestMismatch,
    ScopeDeniedOutcome,
    Partial,
    IndexDegraded,
)
OUTCOME_CODES: Final[frozenset[str]] = frozenset(t.code for t in OUTCOME_TYPES)

AnyOutcome = (
    ContextOverBudget
    | Degraded
    | ReconciliationRequired
    | Stale
    | ContentUnavailable
    | DigestMismatch
    | ScopeDeniedOutcome
    | Partial
    | IndexDegraded
)

__all__ = (
    "OUTCOME_CODES",
    "OUTCOME_TYPES",
    "AnyOutcome",
    "ContentUnavailable",
    "ContextOverBudget",
    "Degraded",
    "DigestMismatch",
    "IndexDegraded",
    "Outcome",
    "Partial",
    "ReconciliationRequired",
    "ScopeDeniedOutcome",
    "Stale",
)
