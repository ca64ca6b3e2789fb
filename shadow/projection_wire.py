"""Strict parsing of a projection file (``shadow-projection/v1``, docs/surfaces.md).

A recorded candidate is judged only on what its files say, so a file that does not match
the format is refused — an :class:`~shadow.errors.InputError` naming the file, the JSON
pointer and what was expected (``shadow run`` exits 2) — and never turned into a weaker
"candidate unavailable" finding or, worse, a GO.  Every field is type-checked, every
vocabulary field must hold a known word, unknown fields are refused and numbers must be
plain integers.  The fields and their meaning are documented in :mod:`shadow.projection`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from shadow.canonical import DROP_REASONS
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
    def __init__(self, src: str) -> None:
        self.src = src

    def fail(self, ptr: str, expected: str, got: Any) -> InputError:
        kind = "nothing" if got is _ABSENT else type(got).__name__
        if isinstance(got, str):
            kind = f"the string {got[:40]!r}"
        return InputError(self.src, ptr, expected, kind)

    def obj(self, v: Any, ptr: str, fields: frozenset[str] | None = None) -> Mapping[str, Any]:
        if not isinstance(v, Mapping):
            raise self.fail(ptr, "an object", v)
        if fields is not None:
            extra = sorted(set(v) - fields)
            if extra:
                raise InputError(self.src, f"{ptr}/{extra[0]}",
                                 "only the documented fields", "an unknown field")
        return v

    def str_(self, d: Mapping[str, Any], key: str, ptr: str, *, required: bool = True,
             vocab: tuple[str, ...] | frozenset[str] | None = None) -> str | None:
        if key not in d or d[key] is None:
            if required:
                raise self.fail(f"{ptr}/{key}", "a string", _ABSENT if key not in d else None)
            return None
        v = d[key]
        if not isinstance(v, str) or (required and not v):
            raise self.fail(f"{ptr}/{key}", "a non-empty string", v)
        if vocab is not None and v not in vocab:
            raise self.fail(f"{ptr}/{key}", "one of " + ", ".join(sorted(vocab)), v)
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

    def strs(self, d: Mapping[str, Any], key: str, ptr: str, *, nullable: bool = False
             ) -> tuple[str, ...] | None:
        if key not in d or d[key] is None:
            if nullable:
                return None
            if key not in d:
                return ()
        v = d.get(key)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.fail(f"{ptr}/{key}", "an array of strings", v)
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


_ABSENT: Final = object()
_HEX16: Final = re.compile(r"^[0-9a-f]{16}$")


def _typed(p: _P, value: Any, ptr: str, kind: str) -> None:
    """Check one documented value: ``int``, ``str``, ``bool``, ``strs``, ``ints``,
    ``obj``, ``int?`` / ``str?`` / ``bool?`` (nullable)."""
    if kind.endswith("?"):
        if value is None:
            return
        kind = kind[:-1]
    ok = {"int": lambda v: isinstance(v, int) and not isinstance(v, bool),
          "str": lambda v: isinstance(v, str),
          "bool": lambda v: isinstance(v, bool),
          "obj": lambda v: isinstance(v, Mapping),
          "strs": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
          "ints": lambda v: isinstance(v, list) and all(
              isinstance(x, int) and not isinstance(x, bool) for x in v)}[kind](value)
    if not ok:
        raise p.fail(ptr, {"int": "an integer", "str": "a string", "bool": "true or false",
                           "obj": "an object", "strs": "an array of strings",
                           "ints": "an array of integers"}[kind], value)


def _fields(p: _P, d: Mapping[str, Any], ptr: str, spec: Mapping[str, str]) -> None:
    for key, kind in spec.items():
        if key in d:
            _typed(p, d[key], f"{ptr}/{key}", kind)


_FACTS: Final = {"limits": "obj", "order": "str", "strategy": "strs", "match": "obj",
                 "sent_secrets": "ints", "provider_inputs": "strs", "error_detail": "obj",
                 "provider_history": "list", "chain": "str", "replay": "str",
                 "settlement": "str", "scope_history": "obj"}
_LIMITS: Final = {"messages": "int", "tokens": "int", "candidates": "int", "order": "str",
                  "partitions": "obj"}
_ERROR_DETAIL: Final = {"protectedItemIds": "strs", "requiredTokens": "int",
                        "selectableBudget": "int", "inputBudget": "int", "usedTokens": "int"}
_ITEM_DETAIL: Final = {"shingles": "obj", "claim": "str", "why": "str", "binding_lost": "bool",
                       "orphan": "bool", "declared": "int", "fields": "obj", "format": "str"}
_OP_DETAIL: Final = {"summarizer": "obj", "irrelevant": "strs", "selector": "obj",
                     "supersedes": "str", "source_scope": "str"}


def _facts(p: _P, raw: Any) -> dict[str, Any]:
    """Facts the engine reads are type-checked; other (surface) facts pass through."""
    d = p.obj(raw, "/facts")
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
            _typed(p, amount, f"/facts/limits/partitions/{part}", "int")
    if "error_detail" in d:
        _fields(p, d["error_detail"], "/facts/error_detail", _ERROR_DETAIL)
    for rid, scopes in (d.get("scope_history") or {}).items():
        if not isinstance(scopes, list):
            raise p.fail(f"/facts/scope_history/{rid}", "an array of scopes", scopes)
    return dict(d)


def _item_detail(p: _P, raw: Any, ptr: str) -> dict[str, Any]:
    d = p.obj(raw, ptr)
    _fields(p, d, ptr, _ITEM_DETAIL)
    if d.get("claim") is not None and d["claim"] not in ("verified", "falsified"):
        raise p.fail(f"{ptr}/claim", "verified or falsified", d["claim"])
    for unit, hashes in (d.get("shingles") or {}).items():
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
            {"truth": "str?", "degraded": "bool?", "sent_secret": "bool?"})
    return dict(d)


def _item(p: _P, raw: Any, ptr: str) -> PItem:
    d = p.obj(raw, ptr, _ITEM_FIELDS)
    digest = p.str_(d, "digest", ptr)
    if not _DIGEST.match(str(digest)):
        raise p.fail(f"{ptr}/digest", "a digest sha256:<64 hex>", digest)
    detail = d.get("detail", {})
    return PItem(
        id=str(p.str_(d, "id", ptr)), kind=str(p.str_(d, "kind", ptr)),
        origin=str(p.str_(d, "origin", ptr, vocab=("input", "derived"))), digest=str(digest),
        length=p.int_(d, "length", ptr, 0), role=p.str_(d, "role", ptr, required=False),
        tool_call_id=p.str_(d, "tool_call_id", ptr, required=False),
        tool_role=p.str_(d, "tool_role", ptr, required=False, vocab=("call", "result")),
        tool_outcome=p.str_(d, "tool_outcome", ptr, required=False),
        pinned=bool(p.bool_(d, "pinned", ptr)),
        trust=p.str_(d, "trust", ptr, required=False, vocab=TRUST),
        sensitivity=p.str_(d, "sensitivity", ptr, required=False, vocab=SENSITIVITY),
        altered=p.str_(d, "altered", ptr, required=False),
        covers=p.strs(d, "covers", ptr) or (),
        detail=_item_detail(p, detail, f"{ptr}/detail"))


def _drop(p: _P, raw: Any, ptr: str) -> Drop:
    d = p.obj(raw, ptr, frozenset({"id", "reason", "legacy_reason", "protected"}))
    return Drop(str(p.str_(d, "id", ptr)),
                str(p.str_(d, "reason", ptr, vocab=DROP_REASONS)),
                p.str_(d, "legacy_reason", ptr, required=False),
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
        degraded_reason=p.str_(d, "degraded_reason", ptr, required=False),
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
        id=str(p.str_(d, "id", ptr)), scope=str(p.str_(d, "scope", ptr)),
        scope_id=p.str_(d, "scope_id", ptr, required=False),
        state=str(p.str_(d, "state", ptr)),
        sensitivity=p.str_(d, "sensitivity", ptr, required=False, vocab=SENSITIVITY),
        digest=str(digest), category=p.str_(d, "category", ptr, required=False),
        shingles=p.strs(d, "shingles", ptr) or (),
        trust=p.str_(d, "trust", ptr, required=False, vocab=TRUST),
        content_sensitivity=p.str_(d, "content_sensitivity", ptr, required=False,
                                   vocab=SENSITIVITY))


def _op(p: _P, raw: Any, ptr: str) -> MemOp:
    d = p.obj(raw, ptr, frozenset({"index", "op", "status", "created", "updated", "deleted",
                                   "returned", "error", "detail"}))
    return MemOp(
        index=p.int_(d, "index", ptr), op=str(p.str_(d, "op", ptr)),
        status=str(p.str_(d, "status", ptr, vocab=("ok", "error", "noop"))),
        created=p.strs(d, "created", ptr) or (), updated=p.strs(d, "updated", ptr) or (),
        deleted=p.strs(d, "deleted", ptr) or (),
        returned=p.strs(d, "returned", ptr, nullable=True),
        error=p.str_(d, "error", ptr, required=False),
        detail=_op_detail(p, d.get("detail", {}), f"{ptr}/detail"))


def _memory(p: _P, raw: Any, ptr: str) -> MemoryProjection | None:
    if raw is None:
        return None
    d = p.obj(raw, ptr, frozenset({"records", "ops"}))
    return MemoryProjection(records=p.list_(d, "records", ptr, lambda x, q: _record(p, x, q)),
                            ops=p.list_(d, "ops", ptr, lambda x, q: _op(p, x, q)))


def _side(p: _P, raw: Any, ptr: str) -> SideEffect:
    d = p.obj(raw, ptr, frozenset({"kind", "target", "recorded"}))
    return SideEffect(str(p.str_(d, "kind", ptr, vocab=("provider_request", "write"))),
                      str(p.str_(d, "target", ptr)), bool(p.bool_(d, "recorded", ptr)))


def from_wire(doc: Any, src: str = "<projection>") -> Projection:
    """Parse one projection strictly; a bad file is an InputError naming the pointer."""
    p = _P(src)
    d = p.obj(doc, "", _TOP_FIELDS)
    if d.get("schema") != SCHEMA:
        raise p.fail("/schema", repr(SCHEMA), d.get("schema", _ABSENT))
    status = str(p.str_(d, "status", "", vocab=("ok", "error"))) if "status" in d else "ok"
    return Projection(
        fixture=str(p.str_(d, "fixture", "")), surface=str(p.str_(d, "surface", "")),
        producer=str(p.str_(d, "producer", "", vocab=("baseline", "candidate")))
        if "producer" in d else "candidate",
        status=status, error=p.str_(d, "error", "", required=False),
        input_ids=p.strs(d, "input_ids", "") or (),
        items=p.list_(d, "items", "", lambda x, q: _item(p, x, q), required=True),
        dropped=p.list_(d, "dropped", "", lambda x, q: _drop(p, x, q)),
        provider=_provider(p, d.get("provider"), "/provider"),
        memory=_memory(p, d.get("memory"), "/memory"),
        side_effects=p.list_(d, "side_effects", "", lambda x, q: _side(p, x, q)),
        writers=p.strs(d, "writers", "") or (),
        facts=_facts(p, d.get("facts", {})),
        noise=dict(p.obj(d.get("noise", {}), "/noise")))
