"""Parse wire JSON values into kernel contract dataclasses, or raise a typed InputError.

The values come from :func:`shadow.boundary.loads` (strict JSON: no BOM, no
duplicate keys, no NaN, bounded depth).  Validation is pydantic in strict mode
over *mirror* ``TypedDict`` types built mechanically from each kernel dataclass:
its wire names (``kernel.contracts.wire_fields``) and the ``Constraint``
metadata on its field types.  The same mirrors give the frozen JSON Schema v1
(``shadow.schemas``), so the schema files and this parser cannot disagree.
Each mirror carries an after-validator that builds the frozen kernel dataclass,
so one ``validate_python`` call returns kernel values; the dataclasses'
``__post_init__`` invariants surface as errors at the right pointer.

Every failure is an :class:`~shadow.errors.InputError` naming the source, the
JSON pointer (wire names), what was expected and what was found — as a type
name, length or number, never a string's content.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import typing_extensions as te
from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    PlainValidator,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from kernel.contracts import (
    SCHEMA_VERSION,
    Constraint,
    ContextItem,
    ContextPlanRequest,
    MemoryRecord,
    WireContract,
    wire_fields,
)
from kernel.errors import KernelError
from shadow.boundary import pointer_escape
from shadow.errors import InputError

C = TypeVar("C", bound=WireContract)

#: Markers left in generated JSON Schema for ``shadow.schemas`` to turn into ``$ref``s.
JSON_VALUE_MARK = "x-cmk-json"

_CONFIG = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)
# Runtime-built typing constructs (mypy cannot follow them statically).
_ANNOTATED: Any = Annotated
_TYPED_DICT: Any = te.TypedDict


# --- opaque JSON values ----------------------------------------------------------------------

def _kind(value: Any) -> str:
    """What a value is, for error messages: type names, lengths, numbers — never text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"an array of {len(value)} entries"
    if isinstance(value, dict):
        return "an object"
    return f"a Python {type(value).__name__}"


def _check_json(value: Any) -> Any:
    """Accept a JSON value as parsed (dict with str keys, list, str, int, finite float,
    bool, null); iterative, so depth is bounded only by the boundary loader."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        ptr, node = stack.pop()
        if node is None or isinstance(node, (bool, int, str)):
            continue
        if isinstance(node, float):
            if not math.isfinite(node):
                raise PydanticCustomError(
                    "json_value", "a finite number", {"pointer": ptr, "got": _kind(node)}
                )
        elif isinstance(node, list):
            stack.extend((f"{ptr}/{i}", v) for i, v in enumerate(node))
        elif isinstance(node, dict):
            for k, v in node.items():
                if not isinstance(k, str):
                    raise PydanticCustomError(
                        "json_value", "string object keys", {"pointer": ptr, "got": _kind(k)}
                    )
                stack.append((f"{ptr}/{pointer_escape(k)}", v))
        else:
            raise PydanticCustomError(
                "json_value", "a JSON value", {"pointer": ptr, "got": _kind(node)}
            )
    return value


def _check_json_object(value: Any) -> Any:
    if not isinstance(value, dict):
        raise PydanticCustomError(
            "json_value", "a JSON object", {"pointer": "", "got": _kind(value)}
        )
    return _check_json(value)


_JSON_VALUE = Annotated[
    Any, PlainValidator(_check_json), WithJsonSchema({JSON_VALUE_MARK: "value"})
]
_JSON_OBJECT = Annotated[
    Any, PlainValidator(_check_json_object), WithJsonSchema({JSON_VALUE_MARK: "object"})
]


def _check_schema_version(value: Any) -> int:
    if type(value) is int and value == SCHEMA_VERSION:
        return value
    raise PydanticCustomError(
        "schema_version", f"schemaVersion {SCHEMA_VERSION}", {"got": _kind(value)}
    )


_SCHEMA_VERSION = Annotated[
    int, PlainValidator(_check_schema_version), WithJsonSchema({"const": SCHEMA_VERSION})
]


# --- mirrors: kernel dataclass -> pydantic TypedDict -----------------------------------------

def _unique(items: list[Any]) -> tuple[Any, ...]:
    seen: set[Any] = set()
    for i, item in enumerate(items):
        if item in seen:
            raise PydanticCustomError(
                "unique_items", "distinct entries", {"pointer": f"/{i}", "got": "a duplicate"}
            )
        seen.add(item)
    return tuple(items)


def _split(tp: Any) -> tuple[Any, Constraint | None]:
    if te.get_origin(tp) is Annotated:
        base, *meta = te.get_args(tp)
        found = [m for m in meta if isinstance(m, Constraint)]
        return base, (found[0] if found else None)
    return tp, None


def _strip_none(tp: Any) -> tuple[Any, bool]:
    origin = te.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in te.get_args(tp) if a is not type(None)]
        if len(args) != len(te.get_args(tp)):
            if len(args) != 1:
                raise TypeError(f"unsupported union {tp!r}")
            return args[0], True
    return tp, False


def _translate(tp: Any) -> Any:
    """A kernel field type -> the pydantic type that validates its wire form."""
    base, c = _split(tp)
    if c is not None and c.json == "value":
        return _JSON_VALUE
    if c is not None and c.json == "object":
        return _JSON_OBJECT
    if isinstance(base, type) and issubclass(base, WireContract):
        return mirror(base)
    origin = te.get_origin(base)
    if origin is Literal:
        return base
    if origin is tuple:
        (item, *rest) = te.get_args(base)
        if rest != [Ellipsis]:
            raise TypeError(f"only tuple[X, ...] is supported, not {base!r}")
        meta: list[Any] = []
        if c is not None:
            unique: JsonDict | None = {"uniqueItems": True} if c.unique else None
            meta.append(Field(min_length=c.min_length, max_length=c.max_length,
                              json_schema_extra=unique))
        meta.append(AfterValidator(_unique if c is not None and c.unique else tuple))
        item_type: Any = list[_translate(item)]  # type: ignore[misc]
        return _ANNOTATED[(item_type, *meta)]
    if base is str:
        if c is None:
            return str
        extra: JsonDict | None = {"format": c.format} if c.format else None
        return Annotated[
            str,
            StringConstraints(min_length=c.min_length, max_length=c.max_length,
                              pattern=c.pattern),
            Field(json_schema_extra=extra),
        ]
    if base in (int, float):
        if c is None:
            return base
        return Annotated[base, Field(ge=c.ge, le=c.le)]
    if base is bool:
        return bool
    raise TypeError(f"no wire mapping for {tp!r}")


def _builder(cls: type[C]) -> Callable[[dict[str, Any]], C]:
    to_attr = {f.wire: f.name for f in wire_fields(cls)}

    def build(data: dict[str, Any]) -> C:
        try:
            return cls(**{to_attr[k]: v for k, v in data.items()})
        except KernelError as exc:
            field = exc.details.get("field")
            raise PydanticCustomError(
                "contract_invariant",
                exc.message,
                {"pointer": f"/{pointer_escape(field)}" if field else "", "got": ""},
            ) from None

    return build


_MIRRORS: dict[type, Any] = {}
_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def mirror(cls: type[WireContract]) -> Any:
    """The pydantic type (an annotated ``TypedDict`` named like ``cls``) for ``cls``."""
    cached = _MIRRORS.get(cls)
    if cached is None:
        cached = _MIRRORS[cls] = _build_mirror(cls)
    return cached


def _build_mirror(cls: type[WireContract]) -> Any:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields: dict[str, Any] = {}
    for f in wire_fields(cls):
        base, nullable = _strip_none(hints[f.name])
        pyd = _SCHEMA_VERSION if f.name == "schema_version" else _translate(base)
        if nullable and not f.optional:
            pyd = pyd | None
        fields[f.wire] = te.NotRequired[pyd] if f.optional else te.Required[pyd]
    td = _TYPED_DICT(cls.__name__, fields)
    td.__pydantic_config__ = _CONFIG
    td.__module__ = cls.__module__
    return Annotated[td, AfterValidator(_builder(cls))]


def adapter(cls: type[WireContract]) -> TypeAdapter[Any]:
    """The cached pydantic ``TypeAdapter`` validating ``cls``'s wire form."""
    cached = _ADAPTERS.get(cls)
    if cached is None:
        cached = _ADAPTERS[cls] = TypeAdapter(mirror(cls))
    return cached


# --- errors ----------------------------------------------------------------------------------

_TYPES = {
    "dict_type": "a JSON object",
    "list_type": "a JSON array",
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean",
    "finite_number": "a finite number",
}
_BOUNDS = {"greater_than_equal": ">=", "less_than_equal": "<=", "greater_than": ">",
           "less_than": "<"}
_BOUND_KEYS = {"greater_than_equal": "ge", "less_than_equal": "le", "greater_than": "gt",
               "less_than": "lt"}


def _expected(err: Any) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "missing":
        return "a required field"
    if kind == "extra_forbidden":
        return "no field of this name (unknown field)"
    if kind == "string_too_long":
        return f"a string of at most {ctx['max_length']} characters"
    if kind == "string_too_short":
        return f"a string of at least {ctx['min_length']} characters"
    if kind == "string_pattern_mismatch":
        return f"a string matching {ctx['pattern']}"
    if kind == "too_long":
        return f"at most {ctx['max_length']} entries"
    if kind == "too_short":
        return f"at least {ctx['min_length']} entries"
    if kind == "literal_error":
        return f"one of {ctx['expected']}"
    if kind in _BOUNDS:
        return f"a number {_BOUNDS[kind]} {ctx[_BOUND_KEYS[kind]]}"
    if kind in _TYPES:
        return _TYPES[kind]
    if kind == "contract_invariant":
        return f"that {err['msg']}"
    if kind in ("json_value", "unique_items", "schema_version"):
        return str(err["msg"])
    msg = str(err["msg"])
    return msg.removeprefix("Input should be ")


def _got(err: Any) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "missing":
        return "nothing"
    if kind == "extra_forbidden":
        return "an unknown field"
    if "got" in ctx:
        return str(ctx["got"])
    return _kind(err.get("input"))


def input_error(exc: ValidationError, source: str) -> InputError:
    """The first pydantic error as an InputError with a JSON pointer in wire names."""
    err = exc.errors(include_url=False)[0]
    pointer = "".join(f"/{pointer_escape(token)}" for token in err["loc"])
    pointer += str((err.get("ctx") or {}).get("pointer", ""))
    return InputError(source, pointer, _expected(err), _got(err))


# --- public API ------------------------------------------------------------------------------

def parse(contract: type[C], value: Any, source: str = "<input>") -> C:
    """Validate a parsed JSON value against ``contract`` and build the kernel dataclass."""
    if (
        isinstance(value, dict)
        and "schemaVersion" in value
        and any(f.name == "schema_version" for f in wire_fields(contract))
    ):
        version = value["schemaVersion"]
        if not (type(version) is int and version == SCHEMA_VERSION):
            raise InputError(source, "/schemaVersion", f"schemaVersion {SCHEMA_VERSION}",
                             f"unknown schemaVersion ({_kind(version)})")
    try:
        result: C = adapter(contract).validate_python(value)
    except ValidationError as exc:
        raise input_error(exc, source) from None
    return result


def parse_context_item(value: Any, source: str = "<input>") -> ContextItem:
    return parse(ContextItem, value, source)


def parse_memory_record(value: Any, source: str = "<input>") -> MemoryRecord:
    return parse(MemoryRecord, value, source)


def parse_plan_request(value: Any, source: str = "<input>") -> ContextPlanRequest:
    return parse(ContextPlanRequest, value, source)


__all__ = [
    "adapter",
    "input_error",
    "mirror",
    "parse",
    "parse_context_item",
    "parse_memory_record",
    "parse_plan_request",
]
