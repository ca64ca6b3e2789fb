"""MemoryRecord (design 108 §6.2), memory commands (§9, §15) and their receipts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from kernel.contracts._base import (
    MAX_CONTENT_CHARS,
    Constraint,
    Content,
    Count,
    Digest,
    Identifier,
    Reason,
    Revision,
    SchemaVersion,
    Scope,
    Sensitivity,
    ShortText,
    Summary,
    Tag,
    Timestamp,
    Unit,
    WireContract,
    check_scope_id,
    invalid,
)
from kernel.contracts.items import AllowedSinks, ContentRef, Provenance, SourceRef

MemoryState = Literal[
    "candidate",
    "active",
    "reinforced",
    "superseded",
    "archived",
    "expired",
    "deleted",
    "purged",
]
RetentionMode = Literal["ephemeral", "session", "durable", "until_expired", "legal_hold"]
MemoryDecisionType = Literal["activate", "reinforce", "supersede", "archive", "expire"]
MemoryOperation = Literal[
    "propose", "activate", "reinforce", "supersede", "archive", "expire", "delete", "purge"
]
#: Event discriminators the peer emits (design §13 names are a namespace until the
#: Agent Protocol Schema adopts them; both ``memory.active`` and ``memory.activated`` occur).
MemoryEventType = Literal[
    "memory.candidate.created",
    "memory.active",
    "memory.activated",
    "memory.reinforced",
    "memory.superseded",
    "memory.archived",
    "memory.expired",
    "memory.deleted",
    "memory.purged",
]

EvidenceRefs = Annotated[tuple[SourceRef, ...], Constraint(min_length=1, max_length=128)]
Tags = Annotated[tuple[Tag, ...], Constraint(max_length=128, unique=True)]
Supersedes = Annotated[tuple[Identifier, ...], Constraint(max_length=128, unique=True)]
MaxAgeDays = Annotated[int, Constraint(ge=1, le=365_000)]
ProposalContent = Annotated[str, Constraint(min_length=1, max_length=MAX_CONTENT_CHARS)]
LooseTags = Annotated[tuple[ShortText, ...], Constraint(max_length=128)]
LooseSinks = Annotated[tuple[ShortText, ...], Constraint(min_length=1, max_length=128)]
LooseEvidenceRefs = Annotated[tuple[SourceRef, ...], Constraint(max_length=128)]
LooseSupersedes = Annotated[tuple[Identifier, ...], Constraint(max_length=128)]
PreviousRevision = Count

TOMBSTONE_STATES: frozenset[MemoryState] = frozenset({"deleted", "purged"})


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPolicy(WireContract):
    mode: RetentionMode
    expires_at: Timestamp | None = None
    max_age_days: MaxAgeDays | None = None
    legal_hold_id: Identifier | None = None

    def __post_init__(self) -> None:
        if self.mode == "until_expired" and self.expires_at is None:
            raise invalid("until_expired retention requires expiresAt", "expiresAt")


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRecord(WireContract):
    """A durable memory (§6.2).  confidence, importance and relevance are never merged.

    A tombstone (``deleted`` / ``purged``) has empty ``content`` and a ``deletion_fence``.
    """

    schema_version: SchemaVersion = 1
    memory_id: Identifier
    scope: Scope
    scope_id: Identifier | None = None
    category: Identifier
    content: Content
    content_ref: ContentRef | None = None
    summary: Summary | None = None
    provenance: Provenance
    evidence_refs: EvidenceRefs
    confidence: Unit
    importance: Unit
    tags: Tags
    sensitivity: Sensitivity
    allowed_sinks: AllowedSinks
    state: MemoryState
    retention_policy: RetentionPolicy
    created_at: Timestamp
    updated_at: Timestamp
    last_accessed_at: Timestamp | None = None
    access_count: Count
    supersedes: Supersedes | None = None
    revision: Revision
    digest: Digest
    deletion_fence: Identifier | None = None

    def __post_init__(self) -> None:
        check_scope_id(self.scope, self.scope_id)
        if self.state in TOMBSTONE_STATES:
            if self.content != "":
                raise invalid("deleted/purged MemoryRecord content must be empty", "content")
            if self.deletion_fence is None:
                raise invalid("deleted/purged MemoryRecord requires deletionFence", "deletionFence")


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryProposalRequest(WireContract):
    """``proposeMemory``: a candidate with evidence; it inherits source sensitivity (§9.1)."""

    memory_id: Identifier | None = None
    scope: Scope
    scope_id: Identifier | None = None
    category: Identifier
    content: ProposalContent
    content_ref: ContentRef | None = None
    summary: Summary | None = None
    provenance: Provenance
    evidence_refs: EvidenceRefs
    confidence: Unit
    importance: Unit
    tags: LooseTags | None = None
    sensitivity: Sensitivity
    allowed_sinks: LooseSinks
    retention_policy: RetentionPolicy
    activate: bool | None = None
    created_at: Timestamp | None = None
    supersedes: LooseSupersedes | None = None

    def __post_init__(self) -> None:
        check_scope_id(self.scope, self.scope_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryDecisionRequest(WireContract):
    """``decideMemory``: one lifecycle command against an expected revision (CAS)."""

    memory_id: Identifier
    type: MemoryDecisionType
    expected_revision: Revision
    confidence_delta: Unit | None = None
    importance: Unit | None = None
    evidence_refs: LooseEvidenceRefs | None = None
    tags: LooseTags | None = None
    summary: Summary | None = None
    successor_memory_id: Identifier | None = None
    reason: Reason | None = None
    authority: Identifier | None = None
    at: Timestamp | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEvent(WireContract):
    """A committed lifecycle transition.  ``from_state`` is ``null`` on creation."""

    schema: Literal["chainlesschain.memory-event/v1"] = "chainlesschain.memory-event/v1"
    event_id: Identifier
    type: MemoryEventType
    memory_id: Identifier
    from_state: MemoryState | None
    to_state: MemoryState
    previous_revision: PreviousRevision
    revision: Revision
    record_digest: Digest
    at: Timestamp
    authority: Identifier | None = None
    reason: Reason | None = None
    successor_memory_id: Identifier | None = None
    digest: Digest


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryReceipt(WireContract):
    """The receipt of one committed memory mutation.  ``store_revision`` is the memory
    port's revision after the commit (the kernel API sets it; the pure reducer does not)."""

    schema: Literal["chainlesschain.memory-receipt/v1"] = "chainlesschain.memory-receipt/v1"
    operation: MemoryOperation
    status: Literal["committed"] = "committed"
    memory_id: Identifier
    previous_revision: PreviousRevision
    revision: Revision
    record_digest: Digest
    event_digest: Digest
    at: Timestamp
    store_revision: Count | None = None
    digest: Digest


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryMutationReceipt(WireContract):
    """What ``proposeMemory`` / ``decideMemory`` return: record, event and receipt."""

    record: MemoryRecord
    event: MemoryEvent
    receipt: MemoryReceipt
