"""Compaction contracts (design 108 §8): request, lifecycle, event and receipt.

The §8.2 atomic-commit binding (session id, input head and digest, policy
version, model profile, strategy, output digest, artifact refs, usage receipt,
started/committed at) is carried in full by :class:`CompactionEvent`, the
committed rollout record.  :class:`CompactionReceipt` is what the caller gets
back (the peer's ``ContextCompactionReceipt``); it names the event by
``event_digest``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Final, Literal

from kernel.contracts._base import (
    Constraint,
    Count,
    Digest,
    Head,
    Identifier,
    JsonObject,
    JsonValue,
    ModelProfile,
    PolicyVersion,
    SchemaVersion,
    Sink,
    Timestamp,
    Tokens,
    WindowTokens,
    WireContract,
)
from kernel.contracts.items import ContentRef
from kernel.contracts.planning import (
    DroppedItems,
    ItemIds,
    Items,
    PartitionMap,
    ScopeAdmissions,
)

#: States of the compaction machine (§8.1), lower-case as on the wire.
CompactionState = Literal[
    "idle",
    "evaluating",
    "preparing",
    "summarizing",
    "degraded",
    "verifying",
    "committing",
    "committed",
    "aborted",
    "stale",
    "reconciliation_required",
]
CompactionStatus = Literal["committed", "degraded", "stale", "reconciliation_required"]
CommittedStatus = Literal["committed", "degraded"]
CompactionStrategy = Literal["deterministic-selection", "deterministic-fallback", "provider-backed"]
UsageOutcome = Literal["settled", "unknown", "pending", "not_metered"]

HeadRef = Annotated[str, Constraint(max_length=256)]
NonNegativeAmount = Annotated[float, Constraint(ge=0)]

COMPACTION_SCHEMA: Final = "chainlesschain.context-compaction/v1"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionRequest(WireContract):
    """``compactContext`` (the peer's ``ContextCompactRequest``)."""

    operation_id: Identifier
    session_id: Identifier
    model_window_tokens: WindowTokens
    reserved_output_tokens: Tokens
    safety_margin_tokens: Tokens | None = None
    recovery_reserve_tokens: Tokens | None = None
    sink: Sink
    scope_admissions: ScopeAdmissions
    partition_ceilings: PartitionMap | None = None
    partition_minimums: PartitionMap | None = None
    policy_version: PolicyVersion
    model_profile: ModelProfile
    memory_revision: Count | None = None
    allow_fallback: bool | None = None
    now: Timestamp | None = None
    metadata: JsonValue | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LifecycleEntry(WireContract):
    """One state the compaction passed through, with its time and diagnostic details."""

    state: CompactionState
    at: Timestamp
    details: JsonObject | None = None


Lifecycle = Annotated[tuple[LifecycleEntry, ...], Constraint(max_length=32)]
ArtifactRefs = Annotated[tuple[ContentRef, ...], Constraint(max_length=100_000)]


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageReceipt(WireContract):
    """Provider usage of a provider-backed summary; anything but ``settled`` forces
    ``reconciliation_required`` (§8.2: never treated as free and retried)."""

    outcome: UsageOutcome
    call_id: Identifier | None = None
    provider: Identifier | None = None
    model: ModelProfile | None = None
    input_tokens: Count | None = None
    output_tokens: Count | None = None
    cost_usd: NonNegativeAmount | None = None
    ledger_digest: Digest | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionReceipt(WireContract):
    """What ``compactContext`` returns (the peer's ``ContextCompactionReceipt``).

    ``committed`` / ``degraded`` carry ``new_head`` and ``event_digest``; ``stale``
    carries ``current_head``; ``reconciliation_required`` carries the binding it
    must be reconciled against (``policy_version``, ``model_profile``, ``started_at``).
    """

    schema: Literal["chainlesschain.context-compaction/v1"] = COMPACTION_SCHEMA
    schema_version: SchemaVersion = 1
    operation_id: Identifier
    session_id: Identifier
    status: CompactionStatus
    input_head: HeadRef | None = None
    current_head: HeadRef | None = None
    input_digest: Digest | None = None
    policy_version: PolicyVersion | None = None
    model_profile: ModelProfile | None = None
    started_at: Timestamp | None = None
    output_digest: Digest | None = None
    context_plan_digest: Digest | None = None
    memory_revision: Count | None = None
    selected_item_ids: ItemIds | None = None
    lifecycle: Lifecycle | None = None
    new_head: HeadRef | None = None
    event_digest: Digest | None = None
    digest: Digest


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionEvent(WireContract):
    """The committed compact rollout record, appended by CAS (§8.2).

    ``usage_receipt`` is always present on the wire (``null`` for local strategies).
    """

    schema: Literal["chainlesschain.context-compaction/v1"] = COMPACTION_SCHEMA
    schema_version: SchemaVersion = 1
    event_id: Identifier
    operation_id: Identifier
    session_id: Identifier
    status: CommittedStatus
    strategy: CompactionStrategy
    input_head: Head
    input_digest: Digest
    output_digest: Digest
    context_plan_digest: Digest
    memory_revision: Count
    policy_version: PolicyVersion
    model_profile: ModelProfile
    started_at: Timestamp
    committed_at: Timestamp
    artifact_refs: ArtifactRefs
    usage_receipt: UsageReceipt | None
    dropped: DroppedItems
    output_items: Items
    retained_item_ids: ItemIds
    receipt_template: JsonObject
    metadata: JsonValue | None = None
    digest: Digest
