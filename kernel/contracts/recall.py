"""Memory recall contracts (design 108 §10): request, ranked hits and result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from kernel.contracts._base import (
    Constraint,
    Count,
    Digest,
    Identifier,
    Positive,
    Scope,
    Sink,
    Timestamp,
    Unit,
    WireContract,
    check_scope_id,
)
from kernel.contracts.items import Provenance
from kernel.contracts.memory import MemoryRecord
from kernel.contracts.planning import ScopeAdmissions

Query = Annotated[str, Constraint(min_length=1, max_length=32_768)]
RecallLimit = Annotated[int, Constraint(ge=1, le=1_000)]
RecallBudget = Annotated[int, Constraint(ge=1, le=1_048_576)]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRecallRequest(WireContract):
    """``recallMemory``: query, sink and admitted scopes; defaults limit 10, budget 4096."""

    query: Query
    sink: Sink
    scope_admissions: ScopeAdmissions
    limit: RecallLimit | None = None
    token_budget: RecallBudget | None = None
    now: Timestamp | None = None


#: The other side(s) of a hit's unresolved conflicts (§9.3), sorted; kernel extension,
#: written only when non-empty (``kernel.memory.recall``, canonical profile).
ConflictsWith = Annotated[tuple[Identifier, ...], Constraint(min_length=1, unique=True)]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallHit(WireContract):
    """One ranked memory: confidence, importance and relevance stay separate (§6.2).
    ``conflicts_with`` names the records it is in an unresolved conflict with that the
    same request could recall (absent when there are none)."""

    memory_id: Identifier
    scope: Scope
    scope_id: Identifier | None = None
    provenance: Provenance
    confidence: Unit
    importance: Unit
    relevance: Unit
    estimated_tokens: Positive
    truncated: bool
    record: MemoryRecord
    conflicts_with: ConflictsWith | None = None

    def __post_init__(self) -> None:
        check_scope_id(self.scope, self.scope_id)


RecallHits = Annotated[tuple[RecallHit, ...], Constraint(max_length=1_000)]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRecallResult(WireContract):
    query: str
    sink: str
    token_budget: Positive
    used_tokens: Count
    total_candidates: Count
    results: RecallHits
    digest: Digest
    memory_revision: Count
