"""Kernel error tree.

Failure *outcomes* of the design (§17: ``context_over_budget``, ``stale``,
``degraded``, ``reconciliation_required``, ``partial`` …) are result values in
``kernel.outcomes``; exceptions here are for calls the kernel refuses::

    KernelError                      code: str, message: str, details: dict
     ├── InvalidArgument             caller bug / bad input (``invalid_argument``)
     │    └── NonPortableValue        value whose peer digest depends on JS-only
     │                                behaviour or ICU collation (``non_portable_value``)
     ├── ContextOverBudget           protected state cannot fit (``context_over_budget``)
     ├── DigestMismatch              a supplied digest differs (``digest_mismatch``)
     ├── RevisionConflict            expected revision / fence / CAS lost (``revision_conflict``)
     ├── IllegalTransition           a state machine refused an event (``illegal_transition``;
     │                                carries ``machine``, ``state``, ``event``)
     ├── ScopeDenied                 scope / sensitivity widening (``scope_denied``)
     ├── SinkDenied                  sink widening (``sink_denied``)
     ├── ReplicaTombstoneFenced      replica tried to revive a deletion
     ├── DerivationPolicyViolation   summary broke derivation rules
     ├── LegacyWriterFenced          writer rejected by the authority registry
     ├── ContentUnavailable          content object missing (``content_unavailable``)
     └── StoreFailure                an adapter's backing store failed (whose fault: the store)

Each error carries a stable ``code`` (the wire contract, same as the peer's),
a human ``message`` that never contains message bodies or secrets, and
JSON-serialisable ``details``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar


class KernelError(Exception):
    """Base class; ``code`` is the stable contract."""

    default_code: ClassVar[str] = "kernel_error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code: str = code or self.default_code
        self.message: str = message
        self.details: dict[str, Any] = dict(details or {})

    def to_wire(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class InvalidArgument(KernelError):
    default_code = "invalid_argument"


class NonPortableValue(InvalidArgument):
    default_code = "non_portable_value"


class ContextOverBudget(KernelError):
    default_code = "context_over_budget"


class DigestMismatch(KernelError):
    default_code = "digest_mismatch"


class RevisionConflict(KernelError):
    default_code = "revision_conflict"


class IllegalTransition(KernelError):
    """A :class:`kernel.machine.Machine` refused ``event`` in ``state``: a caller bug (or a
    stored state no table allows).  ``machine``, ``state`` and ``event`` are names from
    the machine's table, never record content; ``details`` holds the three unless a
    machine's wire contract gives its own (the memory lifecycle's ``{from, to}``)."""

    default_code = "illegal_transition"

    def __init__(
        self,
        machine: str,
        state: str,
        event: str,
        *,
        message: str | None = None,
        code: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            message or f"{machine}: event {event} is not allowed in state {state}",
            code=code,
            details={"machine": machine, "state": state, "event": event}
            if details is None
            else details,
        )
        self.machine: str = machine
        self.state: str = state
        self.event: str = event


class ScopeDenied(KernelError):
    default_code = "scope_denied"


class SinkDenied(KernelError):
    default_code = "sink_denied"


class ReplicaTombstoneFenced(KernelError):
    default_code = "replica_tombstone_fenced"


class DerivationPolicyViolation(KernelError):
    default_code = "derivation_policy_violation"


class LegacyWriterFenced(KernelError):
    default_code = "legacy_writer_fenced"


class ContentUnavailable(KernelError):
    default_code = "content_unavailable"


class StoreReadOnly(InvalidArgument):
    """A write through a store opened read-only (the caller's bug)."""

    default_code = "store_read_only"


class StoreFailure(KernelError):
    default_code = "store_failure"
