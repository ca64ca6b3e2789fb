"""Strict parsing of a projection file (``shadow-projection/v1``, docs/surfaces.md).

A recorded candidate is judged only on what its files say, so a file that does not match
the format is refused — an :class:`~shadow.errors.InputError` naming the file, the JSON
pointer and what was expected (``shadow run`` exits 2) — and never turned into a weaker
"candidate unavailable" finding or, worse, a GO.  Every field is type-checked, every
vocabulary field must hold a known word, unknown fields are refused and numbers must be
plain integers.  The fields and their meaning are documented in :mod:`shadow.projection`.

Nothing a file says may carry free text into a report: identities must be id-shaped
(:data:`ID`), outcome and reason words code-shaped (:data:`CODE`), and no string may hold a
lone surrogate (it cannot be written as UTF-8).  A *candidate* file (``candidate=True``)
is stricter still: it may not state a ``legacy_reason`` (only the baseline adapters
translate a legacy's own words), carry surface facts the engine does not read, or list
two memory operations with one index.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from shadow.boundary import join_pointer
from shadow.canonical import DROP_REASONS, SCOPE_WIDTH, has_secret
from shadow.errors import InputError
from shadow.projection import (
    SCHEMA,
    Drop,
    MemOp,
    MemoryProjection,
    MemRecord,
    PItem,
    Projection,
    ProviderOutcome,
    SideEffect,
)

_DIGEST: Final = re.compile(r"^sha256:[0-9a-f]{64}$")
#: an identity: item, record, tool call, scope id, side-effect target (no spaces, no text)
ID: Final = re.compile(r"^[A-Za-z0-9_.:~@+/\\#=-]{1,200}$")
#: an outcome, reason, kind or role word (``invalid_summary:summary_invalid_json``)
CODE: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}(:[A-Za-z0-9_.-]{1,64})?$")


def code_word(value: object, fallback: str = "unrecognised") -> str:
    """``value`` as a report may show it: a code-shaped word that no secret detector
    flags, else ``fallback`` (a capture's error name or reason may hold anything, and a
    key is code-shaped too)."""
    if isinstance(value, str) and CODE.match(value) and not has_secret(value):
        return value
    return fallback
_UNIT: Final = re.compile(r"^([A-Za-z0-9_]{1,64}(/[0-9]{1,6})?)?$")  # "": the whole text
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
TRUST: Final = ("host", "verified", "user", "external", "untrusted")
SENSITIVITY: Final = ("public", "internal", "personal", "secret", "restricted")
_ITEM_FIELDS: Final = frozenset({"id", "kind", "origin", "digest", "length", "role",
                                 "tool_call_id", "tool_role", "tool_outcome", "pinned",
                                 "trust", "sensitivity", "altered", "covers", "detail"})
_TOP_FIELDS: Final = frozenset({"schema", "fixture", "surface", "producer", "status",
                                "error", "input_ids", "items", "dropped", "provider",
                                "memory", "side_effects", "writers", "facts", "noise"})
_PROVIDER_STATUS: Final = ("none", "committed", "degraded", "reconciliation_required",
                           "aborted", "failed")


class _P:
    def __init__(self, src: str, candidate: bool = False) -> None:
        self.src = src
        self.candidate = candidate

    def fail(self, ptr: str, expected: str, got: Any) -> InputError:
        kind = "nothing" if got is _ABSENT else type(got).__name__
        if isinstance(got, str):  # a word is shown; anything else only by its length
            kind = f"the string {got!r}" if CODE.match(got) and len(got) <= 40 else \
                f"a string of {len(got)} characters"
        return InputError(self.src, ptr, expected, kind)

    def obj(self, v: Any, ptr: str, fields: frozenset[str] | None = None) -> Mapping[str, Any]:
        if not isinstance(v, Mapping):
            raise self.fail(ptr, "an object", v)
        if fields is not None:
            extra = sorted(set(v) - fields)
            if extra:
                raise InputError(self.src, key_pointer(ptr, extra[0]),
                                 "only the documented fields", "an unknown field")
        return v

    def str_(self, d: Mapping[str, Any], key: str, ptr: str, *, required: bool = True,
             vocab: tuple[str, ...] | frozenset[str] | None = None,
             shape: re.Pattern[str] | None = None) -> str | None:
        if key not in d or d[key] is None:
            if required:
                raise self.fail(f"{ptr}/{key}", "a string", _ABSENT if key not in d else None)
            return None
        v = d[key]
        if not isinstance(v, str) or (required and not v):
            raise self.fail(f"{ptr}/{key}", "a non-empty string", v)
        if vocab is not None and v not in vocab:
            raise self.fail(f"{ptr}/{key}", "one of " + ", ".join(sorted(vocab)), v)
        if shape is not None and not shape.match(v):
            raise self.fail(f"{ptr}/{key}", _SHAPES.get(shape.pattern, "a code word"), v)
        return v

    def int_(self, d: Mapping[str, Any], key: str, ptr: str, default: int | None = None
             ) -> int:
        if key not in d and default is not None:
            return default
        v = d.get(key, _ABSENT)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise self.fail(f"{ptr}/{key}", "a non-negative integer", v)
        return v

    def bool_(self, d: Mapping[str, Any], key: str, ptr: str, *, nullable: bool = False
              ) -> bool | None:
        if key not in d:
            return None if nullable else False
        v = d[key]
        if v is None and nullable:
            return None
        if not isinstance(v, bool):
            raise self.fail(f"{ptr}/{key}", "true or false", v)
        return v

    def strs(self, d: Mapping[str, Any], key: str, ptr: str, *, nullable: bool = False,
             shape: re.Pattern[str] | None = None) -> tuple[str, ...] | None:
        if key not in d or d[key] is None:
            if nullable:
                return None
            if key not in d:
                return ()
        v = d.get(key)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.fail(f"{ptr}/{key}", "an array of strings", v)
        if shape is not None:
            for i, x in enumerate(v):
                if not shape.match(x):
                    raise self.fail(f"{ptr}/{key}/{i}", _SHAPES.get(shape.pattern, "a code"),
                                    x)
        return tuple(v)

    def list_(self, d: Mapping[str, Any], key: str, ptr: str, each: Callable[[Any, str], Any],
              *, required: bool = False) -> tuple[Any, ...]:
        if key not in d:
            if required:
                raise self.fail(f"{ptr}/{key}", "an array", _ABSENT)
            return ()
        v = d[key]
        if v is None and not required:
            return ()
        if not isinstance(v, list):
            raise self.fail(f"{ptr}/{key}", "an array", v)
        return tuple(each(x, f"{ptr}/{key}/{i}") for i, x in enumerate(v))


def key_pointer(ptr: str, key: Any) -> str:
    """``ptr/key`` when the key is a word; else ``ptr`` alone (a file's key may be text)."""
    k = str(key)
    return join_pointer(ptr, k) if CODE.match(k) or (ID.match(k) and len(k) <= 64) else ptr


_ABSENT: Final = object()
_SHAPES: Final = {ID.pattern: "an identity (letters, digits and _.:~@+/\\#=-, at most 200)",
                  CODE.pattern: "a code word (letters, digits, _ . -, at most 64)"}
_HEX16: Final = re.compile(r"^[0-9a-f]{16}$")


def _typed(p: _P, value: Any, ptr: str, kind: str) -> None:
    """Check one documented value: ``int``, ``str``, ``code`` (a :data:`CODE` word),
    ``bool``, ``strs``, ``ids`` (:data:`ID` strings), ``ints``, ``obj``, ``int?`` /
    ``str?`` / ``code?`` / ``bool?`` (nullable)."""
    if kind.endswith("?"):
        if value is None:
            return
        kind = kind[:-1]
    ok = {"int": lambda v: isinstance(v, int) and not isinstance(v, bool),
          "str": lambda v: isinstance(v, str),
          "code": lambda v: isinstance(v, str) and bool(CODE.match(v)),
          "ids": lambda v: isinstance(v, list) and all(
              isinstance(x, str) and bool(ID.match(x)) for x in v),
          "bool": lambda v: isinstance(v, bool),
          "obj": lambda v: isinstance(v, Mapping),
          "strs": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
          "ints": lambda v: isinstance(v, list) and all(
              isinstance(x, int) and not isinstance(x, bool) for x in v)}[kind](value)
    if not ok:
        raise p.fail(ptr, {"int": "an integer", "str": "a string", "bool": "true or false",
                           "code": _SHAPES[CODE.pattern],
                           "ids": "an array of identities (" + _SHAPES[ID.pattern] + ")",
                           "obj": "an object", "strs": "an array of strings",
                           "ints": "an array of integers"}[kind], value)


def _fields(p: _P, d: Mapping[str, Any], ptr: str, spec: Mapping[str, str]) -> None:
    for key, kind in spec.items():
        if key in d:
            _typed(p, d[key], f"{ptr}/{key}", kind)


_FACTS: Final = {"limits": "obj", "order": "code", "strategy": "strs", "match": "obj",
                 "sent_secrets": "ints", "provider_inputs": "ids", "error_detail": "obj",
                 "provider_history": "list", "chain": "code", "replay": "code",
                 "settlement": "code", "scope_history": "obj"}
_LIMITS: Final = {"messages": "int", "tokens": "int", "candidates": "int", "order": "code",
                  "partitions": "obj"}
_ERROR_DETAIL: Final = {"protectedItemIds": "ids", "requiredTokens": "int",
                        "selectableBudget": "int", "inputBudget": "int", "usedTokens": "int"}
_ITEM_DETAIL: Final = {"shingles": "obj", "claim": "code", "why": "code",
                       "binding_lost": "bool", "orphan": "bool", "declared": "int",
                       "fields": "obj", "format": "code"}
_OP_DETAIL: Final = {"summarizer": "obj", "irrelevant": "ids", "selector": "obj",
                     "supersedes": "str", "source_scope": "code", "target": "str"}


def _facts(p: _P, raw: Any) -> dict[str, Any]:
    """Facts the engine reads are type-checked; other (surface) facts pass through."""
    d = p.obj(raw, "/facts", frozenset(_FACTS) if p.candidate else None)
    for key, kind in _FACTS.items():
        if key not in d:
            continue
        ptr = f"/facts/{key}"
        if kind == "list":
            if not isinstance(d[key], list):
                raise p.fail(ptr, "an array", d[key])
            for i, h in enumerate(d[key]):
                _provider(p, h, f"{ptr}/{i}")
        else:
            _typed(p, d[key], ptr, kind)
    if "limits" in d:
        _fields(p, d["limits"], "/facts/limits", _LIMITS)
        for part, amount in (d["limits"].get("partitions") or {}).items():
            _typed(p, amount, key_pointer("/facts/limits/partitions", part), "int")
    if "error_detail" in d:
        _fields(p, d["error_detail"], "/facts/error_detail", _ERROR_DETAIL)
    for rid, scopes in (d.get("scope_history") or {}).items():
        if not isinstance(scopes, list):
            raise p.fail(key_pointer("/facts/scope_history", rid), "an array of scopes", scopes)
        if not ID.match(str(rid)):
            raise p.fail("/facts/scope_history", "record identities as keys", str(rid))
    return dict(d)


def _item_detail(p: _P, raw: Any, ptr: str) -> dict[str, Any]:
    d = p.obj(raw, ptr)
    _fields(p, d, ptr, _ITEM_DETAIL)
    if d.get("claim") is not None and d["claim"] not in ("verified", "falsified"):
        raise p.fail(f"{ptr}/claim", "verified or falsified", d["claim"])
    for unit, value in (d.get("fields") or {}).items():
        if not _UNIT.match(unit) or not isinstance(value, str) or not _DIGEST.match(value):
            raise p.fail(key_pointer(f"{ptr}/fields", unit), "a summary field name and its digest",
                         value if _UNIT.match(unit) else unit)
    for unit, hashes in (d.get("shingles") or {}).items():
        if not _UNIT.match(unit):
            raise p.fail(f"{ptr}/shingles", "summary unit names (field or field/index)", unit)
        if not isinstance(hashes, list) or not all(isinstance(h, str) and _HEX16.match(h)
                                                   for h in hashes):
            raise p.fail(f"{ptr}/shingles/{unit}", "an array of 16-hex hashes", hashes)
    return dict(d)


def _op_detail(p: _P, raw: Any, ptr: str) -> dict[str, Any]:
    d = p.obj(raw, ptr)
    _fields(p, d, ptr, _OP_DETAIL)
    if "receipt" in d and not isinstance(d["receipt"], (bool, int)) and d["receipt"] is not None:
        raise p.fail(f"{ptr}/receipt", "true, false or a count", d["receipt"])
    _fields(p, d.get("summarizer") or {}, f"{ptr}/summarizer",
            {"truth": "code?", "degraded": "bool?", "sent_secret": "bool?"})
    for key in ("supersedes", "target"):
        ref = d.get(key)
        if ref is not None and not (isinstance(ref, str) and ID.match(ref)):
            raise p.fail(f"{ptr}/{key}", _SHAPES[ID.pattern], ref)
    for key, value in (d.get("selector") or {}).items():
        if not CODE.match(str(key)) or not (value is None or isinstance(value, (bool, int)) or (
                isinstance(value, str) and ID.match(value))):
            raise p.fail(key_pointer(f"{ptr}/selector", key), "a scope, id or flag", value)
    return dict(d)


def _item(p: _P, raw: Any, ptr: str) -> PItem:
    d = p.obj(raw, ptr, _ITEM_FIELDS)
    digest = p.str_(d, "digest", ptr)
    if not _DIGEST.match(str(digest)):
        raise p.fail(f"{ptr}/digest", "a digest sha256:<64 hex>", digest)
    detail = d.get("detail", {})
    return PItem(
        id=str(p.str_(d, "id", ptr, shape=ID)), kind=str(p.str_(d, "kind", ptr, shape=CODE)),
        origin=str(p.str_(d, "origin", ptr, vocab=("input", "derived"))), digest=str(digest),
        length=p.int_(d, "length", ptr, 0),
        role=p.str_(d, "role", ptr, required=False, shape=CODE),
        tool_call_id=p.str_(d, "tool_call_id", ptr, required=False, shape=ID),
        tool_role=p.str_(d, "tool_role", ptr, required=False, vocab=("call", "result")),
        tool_outcome=p.str_(d, "tool_outcome", ptr, required=False, shape=CODE),
        pinned=bool(p.bool_(d, "pinned", ptr)),
        trust=p.str_(d, "trust", ptr, required=False, vocab=TRUST),
        sensitivity=p.str_(d, "sensitivity", ptr, required=False, vocab=SENSITIVITY),
        altered=p.str_(d, "altered", ptr, required=False, shape=CODE),
        covers=p.strs(d, "covers", ptr, shape=ID) or (),
        detail=_item_detail(p, detail, f"{ptr}/detail"))


def _drop(p: _P, raw: Any, ptr: str) -> Drop:
    d = p.obj(raw, ptr, frozenset({"id", "reason", "protected"} | (
        set() if p.candidate else {"legacy_reason"})))
    return Drop(str(p.str_(d, "id", ptr, shape=ID)),
                str(p.str_(d, "reason", ptr, vocab=DROP_REASONS)),
                p.str_(d, "legacy_reason", ptr, required=False, shape=CODE),
                bool(p.bool_(d, "protected", ptr)))


def _provider(p: _P, raw: Any, ptr: str) -> ProviderOutcome | None:
    if raw is None:
        return None
    d = p.obj(raw, ptr, frozenset({"status", "requests", "recorded", "degraded",
                                   "degraded_reason", "usage", "cancelled", "truth"}))
    return ProviderOutcome(
        status=str(p.str_(d, "status", ptr, vocab=_PROVIDER_STATUS)),
        requests=p.int_(d, "requests", ptr, 0), recorded=p.int_(d, "recorded", ptr, 0),
        degraded=p.bool_(d, "degraded", ptr, nullable=True),
        degraded_reason=p.str_(d, "degraded_reason", ptr, required=False, shape=CODE),
        usage=p.str_(d, "usage", ptr, required=False, vocab=("known", "unknown", "none")),
        cancelled=bool(p.bool_(d, "cancelled", ptr)),
        truth=p.str_(d, "truth", ptr, required=False,
                     vocab=("ok", "invalid", "no-usage", "error", "cancelled")))


def _record(p: _P, raw: Any, ptr: str) -> MemRecord:
    d = p.obj(raw, ptr, frozenset({"id", "scope", "scope_id", "state", "sensitivity",
                                   "digest", "category", "shingles", "trust",
                                   "content_sensitivity"}))
    for i, h in enumerate(d.get("shingles") or ()):
        if not isinstance(h, str) or not _HEX16.match(h):
            raise p.fail(f"{ptr}/shingles/{i}", "a 16-hex hash", h)
    digest = p.str_(d, "digest", ptr)
    if not _DIGEST.match(str(digest)):
        raise p.fail(f"{ptr}/digest", "a digest sha256:<64 hex>", digest)
    return MemRecord(
        id=str(p.str_(d, "id", ptr, shape=ID)),
        scope=str(p.str_(d, "scope", ptr, vocab=tuple(SCOPE_WIDTH))),
        scope_id=p.str_(d, "scope_id", ptr, required=False, shape=ID),
        state=str(p.str_(d, "state", ptr, shape=CODE)),
        sensitivity=p.str_(d, "sensitivity", ptr, required=False, vocab=SENSITIVITY),
        digest=str(digest), category=p.str_(d, "category", ptr, required=False, shape=CODE),
        shingles=p.strs(d, "shingles", ptr) or (),
        trust=p.str_(d, "trust", ptr, required=False, vocab=TRUST),
        content_sensitivity=p.str_(d, "content_sensitivity", ptr, required=False,
                                   vocab=SENSITIVITY))


def _op(p: _P, raw: Any, ptr: str) -> MemOp:
    d = p.obj(raw, ptr, frozenset({"index", "op", "status", "created", "updated", "deleted",
                                   "returned", "error", "detail"}))
    return MemOp(
        index=p.int_(d, "index", ptr), op=str(p.str_(d, "op", ptr, shape=CODE)),
        status=str(p.str_(d, "status", ptr, vocab=("ok", "error", "noop"))),
        created=p.strs(d, "created", ptr, shape=ID) or (),
        updated=p.strs(d, "updated", ptr, shape=ID) or (),
        deleted=p.strs(d, "deleted", ptr, shape=ID) or (),
        returned=p.strs(d, "returned", ptr, nullable=True, shape=ID),
        error=p.str_(d, "error", ptr, required=False, shape=CODE),
        detail=_op_detail(p, d.get("detail", {}), f"{ptr}/detail"))


def _memory(p: _P, raw: Any, ptr: str) -> MemoryProjection | None:
    if raw is None:
        return None
    d = p.obj(raw, ptr, frozenset({"records", "ops"}))
    ops = p.list_(d, "ops", ptr, lambda x, q: _op(p, x, q))
    seen: set[int] = set()
    for n, o in enumerate(ops):
        if p.candidate and o.index in seen:
            raise p.fail(f"{ptr}/ops/{n}/index", "one entry per operation index", o.index)
        seen.add(o.index)
    return MemoryProjection(records=p.list_(d, "records", ptr, lambda x, q: _record(p, x, q)),
                            ops=ops)


def _side(p: _P, raw: Any, ptr: str) -> SideEffect:
    d = p.obj(raw, ptr, frozenset({"kind", "target", "recorded"}))
    return SideEffect(str(p.str_(d, "kind", ptr, vocab=("provider_request", "write"))),
                      str(p.str_(d, "target", ptr, shape=ID)), bool(p.bool_(d, "recorded", ptr)))


def _no_surrogates(p: _P, doc: Any) -> None:
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        ptr, node = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                raise InputError(p.src, ptr, "text without lone surrogates (valid Unicode)",
                                 "a lone surrogate")
        elif isinstance(node, Mapping):
            for k, v in node.items():
                if isinstance(k, str) and _SURROGATE.search(k):
                    raise InputError(p.src, ptr, "keys without lone surrogates",
                                     "a lone surrogate")
                stack.append((key_pointer(ptr, k), v))
        elif isinstance(node, list):
            stack.extend((join_pointer(ptr, i), v) for i, v in enumerate(node))


def _noise(p: _P, raw: Any) -> dict[str, Any]:
    d = p.obj(raw, "/noise")
    if p.candidate:
        for key, value in d.items():
            if not CODE.match(str(key)) or not (
                    (isinstance(value, int) and not isinstance(value, bool))
                    or (isinstance(value, str) and (CODE.match(value) or ID.match(value)))):
                raise p.fail(key_pointer("/noise", key), "a count or a code word", value)
    return dict(d)


def from_wire(doc: Any, src: str = "<projection>", *, candidate: bool = False) -> Projection:
    """Parse one projection strictly; a bad file is an InputError naming the pointer.
    ``candidate``: the file is a recorded candidate's (the stricter rules above)."""
    p = _P(src, candidate)
    _no_surrogates(p, doc)
    d = p.obj(doc, "", _TOP_FIELDS)
    if d.get("schema") != SCHEMA:
        raise p.fail("/schema", repr(SCHEMA), d.get("schema", _ABSENT))
    status = str(p.str_(d, "status", "", vocab=("ok", "error"))) if "status" in d else "ok"
    if p.candidate and (d.get("error") is None) != (status == "ok"):
        raise p.fail("/error", "an error code exactly when status is error",
                     d.get("error", _ABSENT))
    return Projection(
        fixture=str(p.str_(d, "fixture", "")), surface=str(p.str_(d, "surface", "")),
        producer=str(p.str_(d, "producer", "", vocab=("baseline", "candidate")))
        if "producer" in d else "candidate",
        status=status, error=p.str_(d, "error", "", required=False, shape=CODE),
        input_ids=p.strs(d, "input_ids", "", shape=ID) or (),
        items=p.list_(d, "items", "", lambda x, q: _item(p, x, q), required=True),
        dropped=p.list_(d, "dropped", "", lambda x, q: _drop(p, x, q)),
        provider=_provider(p, d.get("provider"), "/provider"),
        memory=_memory(p, d.get("memory"), "/memory"),
        side_effects=p.list_(d, "side_effects", "", lambda x, q: _side(p, x, q)),
        writers=p.strs(d, "writers", "", shape=ID) or (),
        facts=_facts(p, d.get("facts", {})),
        noise=_noise(p, d.get("noise", {})))
