"""Wire machinery shared by every v1 contract: constraints, scalar types, ``to_wire``.

Contracts are plain frozen, slotted dataclasses with snake_case fields.  Their
wire (JSON) names are camelCase, derived mechanically by :func:`wire_name`
(with a short override table for the peer's kebab-case partition keys).

Constraints that the peer's JSON Schema puts on a value (identifier pattern,
string and array lengths, integer ranges, uniqueness) are recorded as pure data
in ``typing.Annotated`` metadata (:class:`Constraint`).  The kernel never
interprets them at run time beyond what ``__post_init__`` guarantees; the shell
(``shadow.wire`` / ``shadow.schemas``) turns them into boundary validation and
the frozen JSON Schema v1 files, so both come from this one declaration.

Field rules, read by ``to_wire`` and by the shell alike:

* a field whose default is ``None`` is optional: ``None`` means "absent" and the
  key is omitted on the wire;
* every other field is required on the wire, including those with a constant
  default for convenience (``schema_version = 1``, ``schema = "…/v1"``); if its
  type admits ``None`` the key is always written, as ``null`` when ``None``
  (e.g. ``MemoryEvent.fromState``).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable, Hashable, Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, cast

from kernel import SCHEMA_VERSION as SCHEMA_VERSION
from kernel import vocabulary
from kernel.errors import InvalidArgument
from kernel.vocabulary import MAX_CONTENT_CHARS as MAX_CONTENT_CHARS
from kernel.vocabulary import MAX_ITEMS as MAX_ITEMS
from kernel.vocabulary import MAX_PRIORITY as MAX_PRIORITY
from kernel.vocabulary import MAX_SAFE_INTEGER as MAX_SAFE_INTEGER
from kernel.vocabulary import MAX_TOKENS as MAX_TOKENS

IDENTIFIER_PATTERN: Final = f"^{vocabulary.IDENTIFIER.pattern}$"
DIGEST_PATTERN: Final = f"^{vocabulary.DIGEST.pattern}$"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Constraint:
    """Wire constraints of a value (pure data; the shell enforces them at the boundary).

    ``min_length``/``max_length`` count characters for strings and entries for
    sequences; ``ge``/``le`` bound numbers; ``unique`` asks for distinct entries;
    ``format`` is a JSON Schema annotation; ``json`` marks an opaque JSON value
    (``"value"``) or JSON object (``"object"``).
    """

    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    ge: int | float | None = None
    le: int | float | None = None
    unique: bool = False
    format: str | None = None
    json: Literal["value", "object"] | None = None


# --- scalar wire types (names follow the peer schema's $defs where it has them) ------------

Identifier = Annotated[str, Constraint(min_length=1, max_length=160, pattern=IDENTIFIER_PATTERN)]
Digest = Annotated[str, Constraint(pattern=DIGEST_PATTERN)]
Timestamp = Annotated[str, Constraint(max_length=64, format="date-time")]
Sink = Annotated[str, Constraint(min_length=1, max_length=128)]
Tag = Annotated[str, Constraint(min_length=1, max_length=128)]
ShortText = Annotated[str, Constraint(max_length=128)]
PolicyVersion = Annotated[str, Constraint(min_length=1, max_length=128)]
ModelProfile = Annotated[str, Constraint(min_length=1, max_length=256)]
Head = Annotated[str, Constraint(min_length=1, max_length=256)]
Summary = Annotated[str, Constraint(min_length=1, max_length=16_384)]
Reason = Annotated[str, Constraint(min_length=1, max_length=2_048)]
Selector = Annotated[str, Constraint(min_length=1, max_length=512)]
Code = Annotated[str, Constraint(min_length=1, max_length=128)]
Content = Annotated[str, Constraint(max_length=MAX_CONTENT_CHARS)]

Count = Annotated[int, Constraint(ge=0, le=MAX_SAFE_INTEGER)]
Revision = Annotated[int, Constraint(ge=1, le=MAX_SAFE_INTEGER)]
Positive = Annotated[int, Constraint(ge=1, le=MAX_SAFE_INTEGER)]
Tokens = Annotated[int, Constraint(ge=0, le=MAX_TOKENS)]
WindowTokens = Annotated[int, Constraint(ge=1, le=MAX_TOKENS)]
Unit = Annotated[float, Constraint(ge=0, le=1)]

SchemaVersion = Literal[1]

#: An opaque JSON value / object, carried as parsed (dicts, lists, scalars); treat as read-only.
JsonValue = Annotated[Any, Constraint(json="value")]
JsonObject = Annotated[Mapping[str, Any], Constraint(json="object")]

# --- enumerations (design 108 §6) -----------------------------------------------------------

Scope = Literal["turn", "session", "agent", "project", "user", "global"]
Trust = Literal["host", "verified", "user", "external", "untrusted"]
Sensitivity = Literal["public", "internal", "personal", "secret", "restricted"]

#: Narrow to wide: promotion to a later scope is an audited transition (§6.3).
SCOPE_ORDER: Final = cast("tuple[Scope, ...]", vocabulary.SCOPE_ORDER)
#: Most to least trusted; derived content inherits the *lowest* trust (§12.1).
TRUST_ORDER: Final = cast("tuple[Trust, ...]", vocabulary.TRUST_ORDER)
#: Least to most sensitive; sensitivity never lowers (§9.1).
SENSITIVITY_ORDER: Final = cast("tuple[Sensitivity, ...]", vocabulary.SENSITIVITY_ORDER)


# --- wire names ------------------------------------------------------------------------------

#: Field names whose wire name is not the mechanical lowerCamelCase form.
WIRE_NAME_OVERRIDES: Final[Mapping[str, str]] = MappingProxyType({
    "trusted_system": "trusted-system",
    "working_state": "working-state",
    "tools_and_skills": "tools-and-skills",
    "tool_evidence": "tool-evidence",
    "memory_and_rules": "memory-and-rules",
    "recovery_reserve": "recovery-reserve",
})


def wire_name(field_name: str) -> str:
    """``item_id`` -> ``itemId``; overrides for the peer's kebab-case partition keys."""
    override = WIRE_NAME_OVERRIDES.get(field_name)
    if override is not None:
        return override
    head, *rest = field_name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclasses.dataclass(frozen=True, slots=True)
class WireField:
    """One contract field: Python name, wire name, and whether the key may be absent
    (``optional``: the field's default is ``None``)."""

    name: str
    wire: str
    optional: bool


_SCALARS: Final = frozenset({str, int, bool, float})


def wire_fields(cls: type) -> tuple[WireField, ...]:
    """The wire layout of a contract class, in declaration order (cached: a class's
    dataclass fields are fixed when it is defined, and the tuple is immutable)."""
    return _cached_fields(cast(Hashable, cls))


@functools.lru_cache(maxsize=256)
def _cached_fields(cls: Any) -> tuple[WireField, ...]:
    return tuple(
        WireField(f.name, wire_name(f.name), f.default is None) for f in dataclasses.fields(cls)
    )


def wire_value(value: Any) -> Any:
    """A contract value as plain JSON data (tuples -> lists, contracts -> dicts, copies)."""
    if type(value) in _SCALARS or value is None:
        return value
    if isinstance(value, WireContract):
        return value.to_wire()
    if isinstance(value, (tuple, list)):
        return [v if type(v) in _SCALARS else wire_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: wire_value(v) for k, v in value.items()}
    return value


_Plan = tuple[Callable[[Any], tuple[Any, ...]], tuple[tuple[str, bool], ...]]


@functools.lru_cache(maxsize=256)
def _plan(cls: Any) -> _Plan:
    """How ``to_wire`` reads a class: one getter for every field and the wire layout
    (``functools.lru_cache`` over :func:`wire_fields`; both parts are immutable)."""
    fields = wire_fields(cls)
    names = [f.name for f in fields]
    getter = operator.attrgetter(*names)
    get_all: Callable[[Any], tuple[Any, ...]] = (
        getter if len(names) > 1 else (lambda obj: (getter(obj),))
    )
    return get_all, tuple((f.wire, f.optional) for f in fields)


class WireContract:
    """Base of every v1 contract: ``to_wire()`` gives the peer-compatible JSON object."""

    __slots__ = ()

    def to_wire(self) -> dict[str, Any]:
        get_all, layout = _plan(cast(Hashable, type(self)))
        out: dict[str, Any] = {}
        for (wire, optional), value in zip(layout, get_all(self), strict=True):
            if value is None:
                if optional:
                    continue
            elif type(value) not in _SCALARS:
                value = wire_value(value)
            out[wire] = value
        return out


def check_scope_id(scope: str, scope_id: str | None) -> None:
    """Invariant ``scope_id_required_except_global`` (peer wording)."""
    if scope == "global":
        if scope_id is not None:
            raise InvalidArgument(
                "global scope must not include scopeId", details={"field": "scopeId"}
            )
    elif scope_id is None:
        raise InvalidArgument(f"{scope} scope requires scopeId", details={"field": "scopeId"})


def invalid(message: str, field: str | None = None) -> InvalidArgument:
    """An ``InvalidArgument`` naming the offending wire field (raised by ``__post_init__``)."""
    return InvalidArgument(message, details={"field": field} if field else None)
