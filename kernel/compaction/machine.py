"""Compaction lifecycle state machine (design 108 §8.1), h11 style.

The whole machine is the table below: ``TRANSITIONS`` maps a state and an event
type to the next state, ``ON_ENTER`` names the effects the shell must carry out
when a state is entered.  ``step(machine, event)`` is the only reducer; it is
pure, returns the new frozen machine and a tuple of frozen effect values, and
raises :class:`kernel.errors.IllegalTransition` (naming machine, state and
event) for anything the table does not allow::

    IDLE ─requested─► EVALUATING ─snapshot read─► PREPARING ─┬─candidate built──► VERIFYING
                                                             └─summary requested─► SUMMARIZING
    SUMMARIZING ─candidate built─► VERIFYING        (summary accepted, degraded or fallback)
    SUMMARIZING ─outcome unknown─► RECONCILIATION_REQUIRED
    VERIFYING ─verified─► COMMITTING ─cas committed─► COMMITTED
                                     ─cas lost──────► STALE ─retry─► IDLE (same operation id)
                                     ─outcome unknown► RECONCILIATION_REQUIRED
    any precondition failure / cancellation ─► ABORTED

``SUMMARIZING`` is optional (provider-backed compaction only).  ``degraded`` is
not a state: it is a lifecycle note recorded while summarizing, and the
operation still commits (with status ``degraded``).  A lost CAS never
overwrites: the machine goes to ``STALE`` carrying the current head.

Lifecycle notifications (``context.compaction.started|committed|aborted|
reconciliation_required``) are :class:`Announce` effects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from kernel.machine import Machine


class State(StrEnum):
    IDLE = "idle"
    EVALUATING = "evaluating"
    PREPARING = "preparing"
    SUMMARIZING = "summarizing"
    VERIFYING = "verifying"
    COMMITTING = "committing"
    COMMITTED = "committed"
    ABORTED = "aborted"
    RECONCILIATION_REQUIRED = "reconciliation_required"
    STALE = "stale"


# --------------------------------------------------------------------------- events
# Past tense: each records something that already happened in the shell.


@dataclass(frozen=True, slots=True)
class CompactionRequested:
    operation_id: str
    session_id: str
    at: str


@dataclass(frozen=True, slots=True)
class SnapshotRead:
    input_head: str
    input_digest: str
    at: str


@dataclass(frozen=True, slots=True)
class SummaryRequested:
    """The plan dropped items and a summarizer is configured."""

    at: str


@dataclass(frozen=True, slots=True)
class SummaryDegraded:
    """The summarizer answered but flagged its output as degraded."""

    at: str
    code: str


@dataclass(frozen=True, slots=True)
class FallbackSelected:
    """The summarizer failed and the request allows the deterministic fallback."""

    code: str


@dataclass(frozen=True, slots=True)
class CandidateBuilt:
    at: str


@dataclass(frozen=True, slots=True)
class CandidateVerified:
    at: str


@dataclass(frozen=True, slots=True)
class InvariantsViolated:
    codes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CasCommitted:
    at: str
    new_head: str


@dataclass(frozen=True, slots=True)
class CasLost:
    at: str
    current_head: str | None


@dataclass(frozen=True, slots=True)
class OutcomeUnknown:
    """A provider call or a commit ended without a known outcome."""

    at: str
    code: str


@dataclass(frozen=True, slots=True)
class ReconciliationLost:
    """Recording the reconciliation receipt lost its own CAS."""

    current_head: str | None


@dataclass(frozen=True, slots=True)
class Reconciled:
    """The unknown outcome was settled; the operation closes without a commit."""

    at: str
    code: str


@dataclass(frozen=True, slots=True)
class CompactionFailed:
    """A precondition failed; ``at`` is None when no lifecycle entry is recorded."""

    code: str
    at: str | None = None


@dataclass(frozen=True, slots=True)
class Cancelled:
    at: str


@dataclass(frozen=True, slots=True)
class RetryRequested:
    """After STALE the caller recomputes from the new head (same operation id)."""


Event: TypeAlias = (
    CompactionRequested
    | SnapshotRead
    | SummaryRequested
    | SummaryDegraded
    | FallbackSelected
    | CandidateBuilt
    | CandidateVerified
    | InvariantsViolated
    | CasCommitted
    | CasLost
    | OutcomeUnknown
    | ReconciliationLost
    | Reconciled
    | CompactionFailed
    | Cancelled
    | RetryRequested
)

# --------------------------------------------------------------------------- effects
# Imperative: each asks the shell to do one thing.  The table names effect *types*; the
# reducer builds each value from the machine it has just entered (``of``).


@dataclass(frozen=True, slots=True)
class Announce:
    """Emit a lifecycle notification ``context.compaction.<name>``."""

    name: str
    operation_id: str
    session_id: str
    code: str | None = None

    @classmethod
    def of(cls, m: CompactionMachine) -> Announce:
        return cls(ANNOUNCED[m.state], m.operation_id, m.session_id, m.code)


@dataclass(frozen=True, slots=True)
class ReadSnapshot:
    session_id: str

    @classmethod
    def of(cls, m: CompactionMachine) -> ReadSnapshot:
        return cls(m.session_id)


@dataclass(frozen=True, slots=True)
class BuildPlan:
    input_head: str

    @classmethod
    def of(cls, m: CompactionMachine) -> BuildPlan:
        return cls(m.input_head)


@dataclass(frozen=True, slots=True)
class InvokeSummarizer:
    operation_id: str

    @classmethod
    def of(cls, m: CompactionMachine) -> InvokeSummarizer:
        return cls(m.operation_id)


@dataclass(frozen=True, slots=True)
class VerifyCandidate:
    operation_id: str

    @classmethod
    def of(cls, m: CompactionMachine) -> VerifyCandidate:
        return cls(m.operation_id)


@dataclass(frozen=True, slots=True)
class AppendCompaction:
    expected_head: str

    @classmethod
    def of(cls, m: CompactionMachine) -> AppendCompaction:
        return cls(m.input_head)


@dataclass(frozen=True, slots=True)
class PersistReconciliation:
    expected_head: str

    @classmethod
    def of(cls, m: CompactionMachine) -> PersistReconciliation:
        return cls(m.input_head)


@dataclass(frozen=True, slots=True)
class ReturnReceipt:
    status: str

    @classmethod
    def of(cls, m: CompactionMachine) -> ReturnReceipt:
        return cls(m.status)


Effect: TypeAlias = (
    Announce
    | ReadSnapshot
    | BuildPlan
    | InvokeSummarizer
    | VerifyCandidate
    | AppendCompaction
    | PersistReconciliation
    | ReturnReceipt
)


#: An effect class: the table holds these; its ``of`` builds the value.
EffectType: TypeAlias = (
    type[Announce]
    | type[ReadSnapshot]
    | type[BuildPlan]
    | type[InvokeSummarizer]
    | type[VerifyCandidate]
    | type[AppendCompaction]
    | type[PersistReconciliation]
    | type[ReturnReceipt]
)

# --------------------------------------------------------------------------- the table

S = State

TRANSITIONS: Final[Mapping[State, Mapping[type[Any], State]]] = MappingProxyType({
    S.IDLE: MappingProxyType({CompactionRequested: S.EVALUATING}),
    S.EVALUATING: MappingProxyType({
        SnapshotRead: S.PREPARING,
        CompactionFailed: S.ABORTED,
        Cancelled: S.ABORTED,
    }),
    S.PREPARING: MappingProxyType({
        SummaryRequested: S.SUMMARIZING,
        CandidateBuilt: S.VERIFYING,
        CompactionFailed: S.ABORTED,
        Cancelled: S.ABORTED,
    }),
    S.SUMMARIZING: MappingProxyType({
        SummaryDegraded: S.SUMMARIZING,
        FallbackSelected: S.SUMMARIZING,
        CandidateBuilt: S.VERIFYING,
        OutcomeUnknown: S.RECONCILIATION_REQUIRED,
        CompactionFailed: S.ABORTED,
        Cancelled: S.ABORTED,
    }),
    S.VERIFYING: MappingProxyType({
        CandidateVerified: S.COMMITTING,
        InvariantsViolated: S.ABORTED,
        CompactionFailed: S.ABORTED,
        Cancelled: S.ABORTED,
    }),
    S.COMMITTING: MappingProxyType({
        CasCommitted: S.COMMITTED,
        CasLost: S.STALE,
        OutcomeUnknown: S.RECONCILIATION_REQUIRED,
    }),
    S.RECONCILIATION_REQUIRED: MappingProxyType({
        ReconciliationLost: S.STALE,
        Reconciled: S.ABORTED,
    }),
    S.STALE: MappingProxyType({RetryRequested: S.IDLE}),
    S.COMMITTED: MappingProxyType({}),
    S.ABORTED: MappingProxyType({}),
})

#: The effects of entering a state (a transition that stays in its state has none) ...
ON_ENTER: Final[Mapping[State, tuple[EffectType, ...]]] = MappingProxyType({
    S.EVALUATING: (Announce, ReadSnapshot),
    S.PREPARING: (BuildPlan,),
    S.SUMMARIZING: (InvokeSummarizer,),
    S.VERIFYING: (VerifyCandidate,),
    S.COMMITTING: (AppendCompaction,),
    S.COMMITTED: (Announce, ReturnReceipt),
    S.ABORTED: (Announce,),
    S.RECONCILIATION_REQUIRED: (Announce, PersistReconciliation, ReturnReceipt),
    S.STALE: (ReturnReceipt,),
})
#: ... except on these edges: a commit whose outcome is unknown (the store raised during
#: the compare-and-swap) announces and leaves the store's error to the caller; only
#: ``reconcile`` can later tell whether it landed, so nothing is persisted or returned.
EDGE_EFFECTS: Final[Mapping[tuple[State, type[Any]], tuple[EffectType, ...]]] = MappingProxyType({
    (S.COMMITTING, OutcomeUnknown): (Announce,),
})

MACHINE: Final[Machine[State, type[Any], EffectType]] = Machine(
    name="compaction",
    initial=S.IDLE,
    table=TRANSITIONS,
    effects={
        (source, kind): EDGE_EFFECTS.get((source, kind), ON_ENTER.get(target, ()))
        for source, row in TRANSITIONS.items()
        for kind, target in row.items()
        if target is not source
    },
)
MACHINE_NAME: Final = MACHINE.name

#: States no event leaves.
TERMINAL: Final = MACHINE.terminal

#: Lifecycle notification announced on entering a state.
ANNOUNCED: Final[Mapping[State, str]] = MappingProxyType({
    S.EVALUATING: "started",
    S.COMMITTED: "committed",
    S.ABORTED: "aborted",
    S.RECONCILIATION_REQUIRED: "reconciliation_required",
})

# --------------------------------------------------------------------------- machine


@dataclass(frozen=True, slots=True)
class LifecycleEntry:
    state: str
    at: str
    details: Mapping[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "at": self.at}
        if self.details is not None:
            out["details"] = dict(self.details)
        return out


@dataclass(frozen=True, slots=True)
class CompactionMachine:
    """Everything the reducer knows about one compaction operation."""

    state: State = State.IDLE
    operation_id: str = ""
    session_id: str = ""
    input_head: str = ""
    input_digest: str = ""
    lifecycle: tuple[LifecycleEntry, ...] = ()
    degraded: bool = False
    code: str | None = None
    current_head: str | None = None
    new_head: str | None = None
    violations: tuple[str, ...] = ()

    @property
    def status(self) -> str:
        """Receipt status for the current state."""
        if self.state is State.COMMITTED and self.degraded:
            return "degraded"
        return self.state.value

    def lifecycle_wire(self) -> list[dict[str, Any]]:
        return [entry.to_wire() for entry in self.lifecycle]


def _entry(
    state: str, at: str | None, details: Mapping[str, Any] | None = None
) -> tuple[LifecycleEntry, ...]:
    return () if at is None else (LifecycleEntry(state, at, details),)


def _apply(m: CompactionMachine, event: Event, target: State) -> CompactionMachine:
    """Data changes and lifecycle entries of one transition (pure)."""
    r = dataclasses.replace
    match event:
        case CompactionRequested(operation_id=op, session_id=sid, at=at):
            return CompactionMachine(
                state=target,
                operation_id=op,
                session_id=sid,
                lifecycle=_entry(target.value, at),
            )
        case SnapshotRead(input_head=head, input_digest=digest, at=at):
            return r(
                m,
                state=target,
                input_head=head,
                input_digest=digest,
                lifecycle=m.lifecycle + _entry(target.value, at, {"inputDigest": digest}),
            )
        case SummaryDegraded(at=at, code=code):
            return r(
                m,
                state=target,
                degraded=True,
                code=code,
                lifecycle=m.lifecycle + _entry("degraded", at, {"code": code}),
            )
        case FallbackSelected(code=code):
            return r(m, state=target, degraded=True, code=code)
        case SummaryRequested(at=at) | CandidateBuilt(at=at) | CandidateVerified(at=at):
            return r(m, state=target, lifecycle=m.lifecycle + _entry(target.value, at))
        case InvariantsViolated(codes=codes):
            return r(m, state=target, violations=codes, code="invariant_violation")
        case CasCommitted(at=at, new_head=head):
            return r(
                m, state=target, new_head=head, lifecycle=m.lifecycle + _entry("committed", at)
            )
        case CasLost(at=at, current_head=head):
            return r(
                m, state=target, current_head=head, lifecycle=m.lifecycle + _entry("stale", at)
            )
        case OutcomeUnknown(at=at, code=code):
            return r(
                m,
                state=target,
                code=code,
                lifecycle=m.lifecycle + _entry(target.value, at, {"code": code}),
            )
        case ReconciliationLost(current_head=head):
            return r(m, state=target, current_head=head)
        case Cancelled(at=at):
            return r(
                m,
                state=target,
                code="cancelled",
                lifecycle=m.lifecycle + _entry("aborted", at, {"code": "cancelled"}),
            )
        case Reconciled(at=at, code=code) | CompactionFailed(code=code, at=at):
            return r(
                m,
                state=target,
                code=code,
                lifecycle=m.lifecycle + _entry("aborted", at, {"code": code}),
            )
        case RetryRequested():
            return CompactionMachine(operation_id=m.operation_id, session_id=m.session_id)
    raise TypeError(f"not a compaction event: {type(event).__name__}")  # pragma: no cover


def step(machine: CompactionMachine, event: Event) -> tuple[CompactionMachine, tuple[Effect, ...]]:
    """The reducer: ``(state, event) -> (state, effects)``; pure and total over the table
    (:class:`kernel.errors.IllegalTransition` for an event it does not list)."""
    target, kinds = MACHINE.step(machine.state, type(event))
    nxt = _apply(machine, event, target)
    return nxt, tuple(kind.of(nxt) for kind in kinds)


def run(events: tuple[Event, ...] | list[Event]) -> tuple[CompactionMachine, tuple[Effect, ...]]:
    """Fold ``step`` over events from IDLE; returns the final machine and all effects."""
    machine = CompactionMachine()
    effects: list[Effect] = []
    for event in events:
        machine, produced = step(machine, event)
        effects.extend(produced)
    return machine, tuple(effects)


def state_diagram() -> str:
    """Mermaid state diagram drawn from the table (used by docs/compaction.md)."""
    return MACHINE.diagram()


def effects_table() -> str:
    """The Markdown table of what entering each state asks of the shell (docs/compaction.md),
    drawn from :data:`ON_ENTER` and :data:`EDGE_EFFECTS`."""
    rows = ["| entering | effects |", "|---|---|"]
    for state, kinds in ON_ENTER.items():
        rows.append(f"| `{state}` | {', '.join(f'`{k.__name__}`' for k in kinds)} |")
    for (source, event), kinds in EDGE_EFFECTS.items():
        target = TRANSITIONS[source][event]
        names = ", ".join(f"`{k.__name__}`" for k in kinds)
        rows.append(f"| `{target}` from `{source}` by `{event.__name__}` | {names} only |")
    return "\n".join(rows)
