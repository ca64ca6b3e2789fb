"""ContextItem (design 108 §6.1) and the records it is built from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from kernel.contracts._base import (
    MAX_PRIORITY,
    MAX_TOKENS,
    Constraint,
    Content,
    Count,
    Digest,
    Identifier,
    SchemaVersion,
    Scope,
    Sensitivity,
    Sink,
    Summary,
    Timestamp,
    Trust,
    WireContract,
    check_scope_id,
    invalid,
)

ItemKind = Literal[
    "system-policy",
    "tool-schema",
    "skill",
    "task-state",
    "message",
    "tool-evidence",
    "memory",
    "project-rule",
    "artifact-ref",
]
TaskState = Literal["pending", "running", "waiting", "terminal"]
ToolRole = Literal["call", "result"]
ToolOutcome = Literal["pending", "succeeded", "failed", "unknown"]

Uri = Annotated[str, Constraint(min_length=1, max_length=4096)]
MimeType = Annotated[str, Constraint(min_length=1, max_length=256)]
ParentDigests = Annotated[tuple[Digest, ...], Constraint(max_length=128, unique=True)]
AllowedSinks = Annotated[tuple[Sink, ...], Constraint(min_length=1, max_length=128, unique=True)]
TokenEstimate = Annotated[int, Constraint(ge=1, le=MAX_TOKENS)]
Priority = Annotated[int, Constraint(ge=0, le=MAX_PRIORITY)]


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceRef(WireContract):
    """Where a value came from: store, id and (optionally) revision / sequence / digest."""

    store: Identifier
    id: Identifier
    revision: Count | None = None
    event_sequence: Count | None = None
    digest: Digest | None = None
    uri: Uri | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance(WireContract):
    """Who observed a value and when; kept apart from message role (§12.1)."""

    source: Identifier
    actor: Identifier | None = None
    observed_at: Timestamp
    parent_digests: ParentDigests | None = None
    degraded: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentRef(WireContract):
    """Externalised body (§8.4): digest, byte length, store identity and access policy."""

    store: Identifier
    object_id: Identifier
    digest: Digest
    byte_length: Count
    mime_type: MimeType | None = None
    summary: Summary
    recoverable: bool
    access_policy: Identifier | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemBinding(WireContract):
    """Recovery bindings of an item (the peer's ``ContextMemoryBinding``, §7 protected state)."""

    task_state: TaskState | None = None
    tool_call_id: Identifier | None = None
    tool_role: ToolRole | None = None
    tool_outcome: ToolOutcome | None = None
    approval_id: Identifier | None = None
    question_id: Identifier | None = None
    human_task_id: Identifier | None = None
    required_for_recovery: bool | None = None
    cwd_identity: Identifier | None = None
    worktree_identity: Identifier | None = None
    permission_ceiling_digest: Digest | None = None
    budget_revision: Count | None = None

    def __post_init__(self) -> None:
        if (self.tool_role is not None or self.tool_outcome is not None) and (
            self.tool_call_id is None
        ):
            raise invalid("toolRole/toolOutcome requires toolCallId", "toolCallId")


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextItem(WireContract):
    """The smallest unit of the candidate context pool (§6.1).

    ``pinned`` only means "not dropped by ordinary compaction"; it never makes
    content trusted.  Exactly one of ``content`` / ``content_ref`` is set, and
    ``scope_id`` is set unless ``scope`` is ``global``.
    """

    schema_version: SchemaVersion = 1
    item_id: Identifier
    kind: ItemKind
    scope: Scope
    scope_id: Identifier | None = None
    source_ref: SourceRef
    provenance: Provenance
    trust: Trust
    sensitivity: Sensitivity
    allowed_sinks: AllowedSinks
    token_estimate: TokenEstimate
    priority: Priority
    pinned: bool
    created_at: Timestamp
    expires_at: Timestamp | None = None
    digest: Digest
    content: Content | None = None
    content_ref: ContentRef | None = None
    binding: ItemBinding | None = None

    def __post_init__(self) -> None:
        if (self.content is None) == (self.content_ref is None):
            raise invalid("ContextItem must contain exactly one of content or contentRef")
        check_scope_id(self.scope, self.scope_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScopeAdmission(WireContract):
    """One scope (plus id) a caller admits into a plan or recall (§12.2)."""

    scope: Scope
    scope_id: Identifier | None = None

    def __post_init__(self) -> None:
        check_scope_id(self.scope, self.scope_id)
