"""Trust, sensitivity and sinks (design 108 §12.1–§12.2).

Provenance/trust is stored apart from the message *role*.  Web pages, MCP
servers, tool output and imported memory stay data even when their text says
"system" or "approved": they can never become system policy, and anything
derived from them inherits the lowest trust of its parents.

Orders (low → high)::

    trust:        untrusted < external < user < verified < host
    sensitivity:  public < internal < personal < secret < restricted

``Trust`` and ``Sensitivity`` are ``StrEnum`` (their value is the wire string)
whose ``<``/``<=``/``>``/``>=`` compare by *rank*, never alphabetically.

Sinks are ``:``-separated hierarchical names: ``provider`` allows every remote
model provider, ``provider:openai`` only that one.  A sink set is what a value
may flow to; deriving intersects sets in this hierarchy, so a derived item's
sinks only ever shrink.  Each sink *class* (first segment) also has a
sensitivity ceiling that ``check_sink`` re-checks right before sending (§12.2
"re-run allowed-sink and classification checks before sending to a remote
provider").
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final, Protocol

from kernel.errors import InvalidArgument, SinkDenied
from kernel.vocabulary import SENSITIVITY_ORDER, TRUST_ASCENDING, Sensitivity, Trust

__all__ = (
    "SINK_SENSITIVITY_CEILING",
    "Labelled",
    "Sensitivity",
    "SinkCheck",
    "SourceKind",
    "Trust",
    "TrustLabel",
    "can_be_system_policy",
    "check_sink",
    "derive",
    "intersect_sinks",
    "max_sensitivity",
    "min_trust",
    "require_sink",
    "sink_allowed",
    "source_trust",
    "tool_source_kind",
)

def _trust(value: str) -> Trust:
    try:
        return Trust(value)
    except ValueError:
        raise InvalidArgument(
            f"unknown trust level {value!r}", details={"trust": value, "known": TRUST_ASCENDING}
        ) from None


def _sensitivity(value: str) -> Sensitivity:
    try:
        return Sensitivity(value)
    except ValueError:
        raise InvalidArgument(
            f"unknown sensitivity {value!r}",
            details={"sensitivity": value, "known": SENSITIVITY_ORDER},
        ) from None


def min_trust(levels: Iterable[str]) -> Trust:
    """Lowest trust of ``levels`` (non-empty)."""
    items = [_trust(v) for v in levels]
    if not items:
        raise InvalidArgument("min_trust of an empty collection")
    return min(items, key=lambda t: t.rank)


def max_sensitivity(levels: Iterable[str]) -> Sensitivity:
    """Highest sensitivity of ``levels`` (non-empty)."""
    items = [_sensitivity(v) for v in levels]
    if not items:
        raise InvalidArgument("max_sensitivity of an empty collection")
    return max(items, key=lambda s: s.rank)


# --------------------------------------------------------------------------- sinks

_SINK_RE: Final = re.compile(r"[a-z0-9][a-z0-9._-]*(?::[A-Za-z0-9._/@+-]+)*")


def _check_sink_name(sink: str) -> str:
    if not _SINK_RE.fullmatch(sink):
        raise InvalidArgument(f"malformed sink name {sink!r}", details={"sink": sink})
    return sink


def _covers(allowed: str, sink: str) -> bool:
    return sink == allowed or sink.startswith(allowed + ":")


def sink_allowed(allowed_sinks: Collection[str], sink: str) -> bool:
    """True when some entry of ``allowed_sinks`` is ``sink`` or a hierarchical parent of it."""
    return any(_covers(a, sink) for a in allowed_sinks)


def intersect_sinks(a: Collection[str], b: Collection[str]) -> frozenset[str]:
    """Meet of two sink sets in the sink hierarchy.

    For every sink ``x``: ``x`` is allowed by the result iff it is allowed by
    both ``a`` and ``b`` (``{"provider"} ∩ {"provider:openai"} = {"provider:openai"}``).
    """
    return frozenset({s for s in a if sink_allowed(b, s)} | {s for s in b if sink_allowed(a, s)})


#: Highest sensitivity each sink class accepts.  Unknown classes get ``internal``.
SINK_SENSITIVITY_CEILING: Final[Mapping[str, Sensitivity]] = MappingProxyType(
    {
        "local": Sensitivity.RESTRICTED,  # stays inside the host process / device
        "ui": Sensitivity.SECRET,  # shown to the user who owns it
        "provider": Sensitivity.PERSONAL,  # remote model provider
        "memory": Sensitivity.PERSONAL,  # §12.2: secrets never enter MemoryRecord bodies
        "summary": Sensitivity.PERSONAL,  # compaction summariser input
        "log": Sensitivity.INTERNAL,  # logs/traces carry digests and categories
        "trace": Sensitivity.INTERNAL,
        "telemetry": Sensitivity.PUBLIC,
    }
)
_DEFAULT_CEILING: Final = Sensitivity.INTERNAL


# --------------------------------------------------------------------------- labels


@dataclass(frozen=True, slots=True)
class TrustLabel:
    """The governance label of one item: trust, sensitivity, allowed sinks."""

    trust: Trust
    sensitivity: Sensitivity
    allowed_sinks: frozenset[str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "trust", _trust(self.trust))
        object.__setattr__(self, "sensitivity", _sensitivity(self.sensitivity))
        sinks = self.allowed_sinks
        if isinstance(sinks, str):
            raise InvalidArgument("allowed_sinks must be a collection of sink names, not a str")
        object.__setattr__(self, "allowed_sinks", frozenset(_check_sink_name(s) for s in sinks))

    def to_wire(self) -> dict[str, object]:
        return {
            "trust": self.trust.value,
            "sensitivity": self.sensitivity.value,
            "allowedSinks": sorted(self.allowed_sinks),
        }


class Labelled(Protocol):
    """Anything carrying a sensitivity and allowed sinks (items, packets, contexts)."""

    @property
    def sensitivity(self) -> str: ...

    @property
    def allowed_sinks(self) -> Collection[str]: ...


def derive(parents: Iterable[TrustLabel]) -> TrustLabel:
    """Label of an item derived from ``parents`` (summaries, merges, recalls).

    trust = min, sensitivity = max, allowed sinks = intersection.  An LLM rewrite
    never raises trust (§12.1).  No parents is a caller bug: a derived item must
    have provenance.
    """
    items = list(parents)
    if not items:
        raise InvalidArgument("derive() needs at least one parent label")
    sinks: frozenset[str] = items[0].allowed_sinks
    for label in items[1:]:
        sinks = intersect_sinks(sinks, label.allowed_sinks)
    return TrustLabel(
        trust=min_trust(p.trust for p in items),
        sensitivity=max_sensitivity(p.sensitivity for p in items),
        allowed_sinks=sinks,
    )


@dataclass(frozen=True, slots=True)
class SinkCheck:
    """Result of a sink check (a value, not an exception).

    ``reason``: ``allowed`` | ``sink_not_allowed`` | ``sensitivity_exceeds_sink``.
    """

    sink: str
    allowed: bool
    reason: str
    sensitivity: Sensitivity
    ceiling: Sensitivity


def check_sink(item: Labelled, sink: str) -> SinkCheck:
    """Re-check, right before sending, that ``item`` may flow to ``sink``.

    Two conditions: the sink is in the item's allowed sinks (hierarchically),
    and the item's sensitivity is within the sink class's ceiling
    (``SINK_SENSITIVITY_CEILING``) — ``secret``/``restricted`` content never goes
    to a remote provider whatever its allowed sinks say.
    """
    _check_sink_name(sink)
    sensitivity = _sensitivity(item.sensitivity)
    ceiling = SINK_SENSITIVITY_CEILING.get(sink.split(":", 1)[0], _DEFAULT_CEILING)
    if not sink_allowed(item.allowed_sinks, sink):
        return SinkCheck(sink, False, "sink_not_allowed", sensitivity, ceiling)
    if sensitivity > ceiling:
        return SinkCheck(sink, False, "sensitivity_exceeds_sink", sensitivity, ceiling)
    return SinkCheck(sink, True, "allowed", sensitivity, ceiling)


def require_sink(item: Labelled, sink: str) -> None:
    """Like ``check_sink`` but raises ``SinkDenied`` (for shells that must not send)."""
    result = check_sink(item, sink)
    if not result.allowed:
        raise SinkDenied(
            f"sink {sink!r} denied: {result.reason}",
            details={
                "sink": sink,
                "reason": result.reason,
                "sensitivity": result.sensitivity.value,
                "ceiling": result.ceiling.value,
            },
        )


# --------------------------------------------------------------------------- sources


class SourceKind(StrEnum):
    """Where content came from; decides its trust ceiling with the role."""

    HOST_POLICY = "host_policy"  # rebuilt from authoritative host configuration
    VERIFIED_CONFIG = "verified_config"  # host-verified project rules / signed config
    USER_INPUT = "user_input"  # typed by the user
    MODEL_OUTPUT = "model_output"  # the agent's own turns
    MEMORY = "memory"  # kernel-governed memory record
    TOOL = "tool"  # local tool output (shell, file read, diagnostics)
    IMPORTED_MEMORY = "imported_memory"  # memory imported from another system
    MCP = "mcp"  # third-party MCP server
    WEB = "web"  # fetched web page / search result
    UNKNOWN = "unknown"


_SOURCE_TRUST: Final[Mapping[SourceKind, Trust]] = MappingProxyType(
    {
        SourceKind.HOST_POLICY: Trust.HOST,
        SourceKind.VERIFIED_CONFIG: Trust.VERIFIED,
        SourceKind.USER_INPUT: Trust.USER,
        SourceKind.MODEL_OUTPUT: Trust.USER,
        SourceKind.MEMORY: Trust.USER,
        SourceKind.TOOL: Trust.EXTERNAL,
        SourceKind.IMPORTED_MEMORY: Trust.EXTERNAL,
        SourceKind.MCP: Trust.UNTRUSTED,
        SourceKind.WEB: Trust.UNTRUSTED,
        SourceKind.UNKNOWN: Trust.UNTRUSTED,
    }
)

_ROLE_CEILING: Final[Mapping[str, Trust]] = MappingProxyType(
    {
        "system": Trust.HOST,
        "developer": Trust.HOST,
        "user": Trust.USER,
        "assistant": Trust.USER,
        "tool": Trust.EXTERNAL,
        "function": Trust.EXTERNAL,
    }
)


def _source_kind(value: str) -> SourceKind:
    try:
        return SourceKind(value)
    except ValueError:
        raise InvalidArgument(
            f"unknown source kind {value!r}",
            details={"sourceKind": value, "known": [k.value for k in SourceKind]},
        ) from None


def source_trust(role: str, source_kind: str) -> Trust:
    """Trust ceiling for content with message ``role`` from ``source_kind``.

    ``min(source trust, role ceiling)``: neither a ``system`` role nor words in
    the text can lift web/MCP/tool/imported content above external/untrusted;
    only ``host_policy`` content in a ``system``/``developer`` role is ``host``.
    Unknown roles get ``untrusted``; an unknown source kind is a caller bug.
    """
    base = _SOURCE_TRUST[_source_kind(source_kind)]
    ceiling = _ROLE_CEILING.get(role, Trust.UNTRUSTED)
    return base if base.rank <= ceiling.rank else ceiling


def can_be_system_policy(trust: str) -> bool:
    """Only ``host`` content may be rendered as system policy."""
    return _trust(trust) is Trust.HOST


_WEB_TOOL_RE: Final = re.compile(
    r"(?:^|[_.-])(?:web|fetch|browse|browser|http|url|crawl|scrape)(?:$|[_.-])",
    re.IGNORECASE,
)


def tool_source_kind(tool_name: str) -> SourceKind:
    """Source kind of a tool result by tool name (``mcp__*`` → MCP, fetch/web/browse → WEB)."""
    if tool_name.startswith("mcp__") or tool_name.startswith("mcp."):
        return SourceKind.MCP
    if _WEB_TOOL_RE.search(tool_name):
        return SourceKind.WEB
    return SourceKind.TOOL
