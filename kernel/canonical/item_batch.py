"""Many ContextItems at once: the planner's columnar fast path (design 108 §18).

Planning re-normalises and re-digests every candidate item (design 108 §18 forbids
skipping the digest check), so per-item overhead dominates a 10,000-item plan.
:func:`context_item_batch` (what the planner and compaction use) has the shape of
:mod:`kernel.canonical.digest`'s fast paths — a gate, the exact fallback, a property
proof of equality, a test that the benchmark's shapes take it:

* **The gate** is :func:`_columnar`: it validates the batch column by column and returns
  ``None`` (declines) unless every item is a plain ``dict`` of exactly typed values that
  the exact path would accept unchanged or normalise in a way reproduced here.  Items
  need not share a key set: an optional field (``scopeId``, ``expiresAt``, ``binding``,
  ``digest``, ``content`` / ``contentRef``, optional ``sourceRef`` / ``provenance``
  fields) may be present on some items only (:class:`_Table`).  Each column is checked
  by exact ``type`` counts, set lookups and ``min``/``max``; identifiers by one regex over
  all of them; distinct timestamps and sink lists are parsed once, by the exact checks.
  A refusal by an exact check (:class:`~kernel.errors.InvalidArgument`, the check
  family's only refusal) is a decline, never an error of the fast path; nothing else is
  caught, so a bug in the fast path surfaces as itself.
* **The exact fallback** is :func:`kernel.canonical.items.normalize_context_item` on every
  item, from the first one: errors are the exact path's own, reported in the peer's order.
* **Digests** are computed from the input dicts themselves (a shallow copy without
  ``digest``, with normalised values put in where the input's differ): every key and value
  of those dicts is then exactly what the normalized item holds, and the item key sets
  sort canonically (:data:`kernel.canonical.items.ITEM_KEYS`), so one encoder call with
  sorted keys gives every item's canonical bytes, split at the item boundaries.
* Normalized item dicts are built on demand (:meth:`ItemBatch.item`), e.g. for the
  items a plan selects.

``tests/kernel/test_planner_fastpath.py`` holds the columns, the built dicts (key order
included), the errors and the plans equal to the exact path on generated batches
(homogeneous and with optional fields), and checks that the benchmark workloads' batches
(plan, and compaction's snapshot and selection) pass the gate.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain, repeat
from operator import countOf, itemgetter
from types import MappingProxyType
from typing import Any, Final, TypeVar

from kernel.canonical import digest as _digest
from kernel.canonical.checks import bounded_string, timestamp
from kernel.canonical.items import (
    _DIGEST,
    _ITEM_FIELDS,
    _KIND_SET,
    CONTEXT_ITEM_DOMAIN,
    ITEM_KEYS,
    _binding,
    _content_ref,
    _string_set,
    normalize_context_item,
)
from kernel.errors import InvalidArgument
from kernel.vocabulary import (
    IDENTIFIER,
    MAX_PRIORITY,
    MAX_SAFE_INTEGER,
    MAX_TOKENS,
    SCOPE_ID_REQUIRED,
    SENSITIVITY,
    TRUST,
)

__all__ = ("ItemBatch", "context_item_batch", "normalize_context_items")

_T = TypeVar("_T")

_ENCODE = _digest.ENCODERS.get("orjson")
_PREFIX: Final = _digest.DIGEST_PREFIX
_ITEM_DOMAIN: Final = CONTEXT_ITEM_DOMAIN.encode("utf-8") + b"\x00"
_ITEM_HEAD: Final = b'{"allowedSinks":['
_ITEM_SPLIT: Final = b',{"allowedSinks":['
_LIST_HEAD: Final = b'[{"allowedSinks":['

_ID_LIST = re.compile(f"(?:{IDENTIFIER.pattern}\n)*{IDENTIFIER.pattern}")


def _item_digests(outs: list[dict[str, Any]]) -> list[str] | None:
    """Peer digests of normalized items: one encoder call for the whole batch, split at
    the item boundaries (every item's canonical JSON starts with ``{"allowedSinks":[``
    and a raw ``"`` only ever appears as JSON structure, never inside a string).
    ``None`` when that cannot be shown: no proof that the item keys sort canonically, no
    ``orjson``, or the encoder refuses a value (a lone surrogate: the exact path escapes
    it under the peer profile and refuses it under JCS)."""
    if ITEM_KEYS is None or _ENCODE is None or not outs:
        return None
    try:
        body = _ENCODE(outs, True)
    except (TypeError, ValueError):  # orjson.JSONEncodeError: the encoder's refusal only
        return None
    parts = body.split(_ITEM_SPLIT)  # (no body[1:-1]: a copy of the whole body)
    if (
        len(parts) != len(outs)
        or not parts[0].startswith(_LIST_HEAD)
        or not parts[-1].endswith(b"]")
    ):
        return None
    parts[0] = parts[0][len(_LIST_HEAD) :]
    parts[-1] = parts[-1][:-1]
    new_hash = hashlib.sha256(_ITEM_DOMAIN + _ITEM_HEAD).copy
    result: list[str] = []
    append = result.append
    for part in parts:
        h = new_hash()
        h.update(part)
        append(_PREFIX + h.hexdigest())
    return result


# --- columns -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class ItemBatch:
    """Validated ContextItems as columns: index ``i`` is the ``i``-th input item.

    ``sinks[i]`` is the normalised ``allowedSinks`` — its only entry when it has one,
    else a tuple.  ``sequences[i]`` is ``sourceRef.eventSequence`` or
    ``MAX_SAFE_INTEGER``.  ``expires`` / ``bindings`` are ``None`` when no item has
    the field (else ``None`` entries where an item lacks it).  ``item(i)`` returns a
    fresh dict equal, key order included, to ``normalize_context_item(raws[i])``.
    """

    ids: Sequence[str]
    kinds: Sequence[str]
    trusts: Sequence[str]
    scopes: Sequence[str]
    scope_ids: Sequence[str | None]
    sinks: Sequence[str | tuple[str, ...]]
    tokens: Sequence[int]
    priorities: Sequence[int]
    pinned: Sequence[bool]
    sequences: Sequence[int]
    expires: Sequence[str | None] | None
    bindings: Sequence[Mapping[str, Any] | None] | None
    digests: Sequence[str]
    item: Callable[[int], dict[str, Any]]


def _batch_from_items(items: list[dict[str, Any]]) -> ItemBatch:
    """Columns of already normalized items (the exact path)."""
    max_seq = MAX_SAFE_INTEGER
    return ItemBatch(
        ids=[i["itemId"] for i in items],
        kinds=[i["kind"] for i in items],
        trusts=[i["trust"] for i in items],
        scopes=[i["scope"] for i in items],
        scope_ids=[i.get("scopeId") for i in items],
        sinks=[s[0] if len(s) == 1 else tuple(s) for s in (i["allowedSinks"] for i in items)],
        tokens=[i["tokenEstimate"] for i in items],
        priorities=[i["priority"] for i in items],
        pinned=[i["pinned"] for i in items],
        sequences=[i["sourceRef"].get("eventSequence", max_seq) for i in items],
        expires=[i.get("expiresAt") for i in items]
        if any("expiresAt" in i for i in items)
        else None,
        bindings=[i.get("binding") for i in items] if any("binding" in i for i in items) else None,
        digests=[i["digest"] for i in items],
        item=items.__getitem__,
    )


#: The exact type of every field the columnar path takes (a subclass, a ``5.0`` for ``5``
#: or a ``None`` scopeId is left to the exact path); the keys are the fields it knows.
_ITEM_TYPES: Final[Mapping[str, type]] = MappingProxyType(
    {
        "schemaVersion": int,
        "itemId": str,
        "kind": str,
        "scope": str,
        "scopeId": str,
        "sourceRef": dict,
        "provenance": dict,
        "trust": str,
        "sensitivity": str,
        "allowedSinks": list,
        "tokenEstimate": int,
        "priority": int,
        "pinned": bool,
        "createdAt": str,
        "expiresAt": str,
        "binding": dict,
        "content": str,
        "contentRef": dict,
        "digest": str,
    }
)
_ITEM_REQUIRED: Final = _ITEM_FIELDS - {
    "scopeId",
    "expiresAt",
    "digest",
    "binding",
    "content",
    "contentRef",
}
_SOURCE_TYPES: Final[Mapping[str, type]] = MappingProxyType(
    {"store": str, "id": str, "revision": int, "eventSequence": int, "digest": str, "uri": str}
)
_SOURCE_REQUIRED: Final = frozenset({"store", "id"})
_SOURCE_ORDER: Final = ("store", "id", "revision", "eventSequence", "digest", "uri")
#: ``parentDigests`` is left to the exact path.
_PROVENANCE_TYPES: Final[Mapping[str, type]] = MappingProxyType(
    {"source": str, "actor": str, "observedAt": str, "degraded": bool}
)
_PROVENANCE_REQUIRED: Final = frozenset({"source", "observedAt"})

#: Marks a field a row lacks in a column of a :class:`_Table`.
_ABSENT: Final[Any] = object()


@dataclasses.dataclass(frozen=True, slots=True)
class _Table:
    """Plain dicts as columns.  ``columns[key]`` holds every row's value, ``_ABSENT``
    where a row lacks ``key``; ``partial`` names the keys some rows lack.  Every present
    value is exactly of its field's type."""

    columns: Mapping[str, tuple[Any, ...]]
    partial: frozenset[str]

    def values(self, key: str) -> Sequence[Any]:
        """The values of the rows that have ``key``."""
        column = self.columns.get(key, ())
        if key in self.partial:
            return [v for v in column if v is not _ABSENT]
        return column

    def optional(self, key: str, default: Any) -> Sequence[Any] | None:
        """``key``'s column with ``default`` for the rows that lack it; ``None`` when no
        row has it."""
        column = self.columns.get(key)
        if column is None or key not in self.partial:
            return column
        return [default if v is _ABSENT else v for v in column]


def _table(
    rows: Sequence[Any], types: Mapping[str, type], required: frozenset[str]
) -> _Table | None:
    """``rows`` as a :class:`_Table` when every row is an exact ``dict`` whose keys are
    fields of ``types`` including ``required``, each value exactly of its field's type;
    else ``None``.  The first row's keys are read for every row; a key only later rows
    have is found by counting keys (``sum`` of the row lengths), so a batch sharing one
    key set is read in one pass per field."""
    n = len(rows)
    if not n or countOf(map(type, rows), dict) != n:
        return None
    first = tuple(rows[0])
    if not required.issubset(first) or not all(key in types for key in first):
        return None
    get = dict.get
    columns = {key: tuple(map(get, rows, repeat(key), repeat(_ABSENT))) for key in first}
    absent: dict[str, int] = {}
    present = n * len(first)
    for key in first:
        if key not in required and (missing := countOf(columns[key], _ABSENT)):
            absent[key] = missing
            present -= missing
    # A row lacking a required key fails its column's type count below.
    if present != sum(map(len, rows)):  # some row has a key the first one lacks
        extra = set().union(*rows).difference(first)
        if not all(key in types for key in extra):
            return None
        for key in extra:
            columns[key] = column = tuple(map(get, rows, repeat(key), repeat(_ABSENT)))
            absent[key] = countOf(column, _ABSENT)
    for key, column in columns.items():
        if countOf(map(type, column), types[key]) != n - absent.get(key, 0):
            return None
    # Tuples: the collector stops tracking a tuple of strings and ints, lists it keeps
    # traversing while the plan is built.
    return _Table(columns, frozenset(absent))


def _checked(check: Callable[[Any], _T], values: Iterable[Any]) -> list[_T] | None:
    """``[check(v) for v in values]`` with one of the exact checks, or ``None`` when it
    refuses a value: the batch is declined and the exact path reports that refusal, in
    the peer's order.  Only the check family's refusal is caught."""
    try:
        return [check(value) for value in values]
    except InvalidArgument:
        return None


def _iso(
    values: Sequence[str], field: str
) -> tuple[dict[str, str], bool] | None:
    """``{raw: normalised}`` for the distinct timestamps of a column (each parsed once by
    the exact check) and whether any differs from its input; ``None`` on a refusal."""
    distinct = list(set(values))
    parsed = _checked(lambda raw: timestamp(raw, field), distinct)
    if parsed is None:
        return None
    memo = dict(zip(distinct, parsed, strict=True))
    return memo, any(raw != iso for raw, iso in memo.items())


def _put(rows: list[dict[str, Any]], key: str, values: Sequence[Any]) -> None:
    """``rows[i][key] = values[i]``, except where ``values[i]`` is ``_ABSENT``."""
    if _ABSENT in values:
        for row, value in zip(rows, values, strict=True):
            if value is not _ABSENT:
                row[key] = value
    else:
        for _ in map(dict.__setitem__, rows, repeat(key), values):
            pass


def _exactly_one(table: _Table, a: str, b: str) -> bool:
    """Every row has exactly one of the fields ``a`` and ``b``."""
    col_a, col_b = table.columns.get(a), table.columns.get(b)
    if col_a is None or col_b is None:
        only = a if col_b is None else b
        return only in table.columns and only not in table.partial
    return all((x is _ABSENT) != (y is _ABSENT) for x, y in zip(col_a, col_b, strict=True))


def _scope_ids(table: _Table, scopes: Sequence[str]) -> Sequence[str | None] | None:
    """Each item's ``scopeId`` (``None`` for ``global``) when every scope that needs one
    has one and ``global`` has none; else ``None``."""
    column = table.columns.get("scopeId")
    if column is None:
        return (None,) * len(scopes) if set(scopes) == {"global"} else None
    if "scopeId" not in table.partial:
        return column if set(scopes) <= SCOPE_ID_REQUIRED else None
    needs = SCOPE_ID_REQUIRED
    for scope, scope_id in zip(scopes, column, strict=True):
        if not (scope in needs if scope_id is not _ABSENT else scope == "global"):
            return None
    return [None if s is _ABSENT else s for s in column]


def _columnar(raws: list[Any]) -> ItemBatch | None:
    """The gate and the columnar fast path (module docstring): the batch as columns, or
    ``None`` when it is not shown to be exactly what the exact path would build."""
    n = len(raws)
    table = _table(raws, _ITEM_TYPES, _ITEM_REQUIRED)
    if table is None or not _exactly_one(table, "content", "contentRef"):
        return None
    cols = table.columns
    col = cols.__getitem__
    src = _table(col("sourceRef"), _SOURCE_TYPES, _SOURCE_REQUIRED)
    prov = _table(col("provenance"), _PROVENANCE_TYPES, _PROVENANCE_REQUIRED)
    if src is None or prov is None:
        return None
    ids, kinds, scopes, trusts = col("itemId"), col("kind"), col("scope"), col("trust")
    sensitivities, tokens, priorities = col("sensitivity"), col("tokenEstimate"), col("priority")
    contents = table.values("content")
    if (
        set(col("schemaVersion")) != {1}
        or not set(kinds) <= _KIND_SET
        or not set(trusts) <= TRUST
        or not set(sensitivities) <= SENSITIVITY
        or min(tokens) < 1
        or max(tokens) > MAX_TOKENS
        or min(priorities) < 0
        or max(priorities) > MAX_PRIORITY
        or (contents and max(map(len, contents)) > 2_097_152)  # <= 4 Mi UTF-16 units
    ):
        return None
    for key in ("revision", "eventSequence"):
        values = src.values(key)
        if values and (min(values) < 0 or max(values) > MAX_SAFE_INTEGER):
            return None
    scope_ids = _scope_ids(table, scopes)
    if scope_ids is None:
        return None
    names = (
        ids,
        src.columns["id"],
        set(src.columns["store"]),
        set(prov.columns["source"]),
        set(prov.values("actor")),
        set(table.values("scopeId")),
    )
    joined = "\n".join(chain.from_iterable(names))
    if joined.count("\n") != sum(map(len, names)) - 1 or _ID_LIST.fullmatch(joined) is None:
        return None
    if not all(_DIGEST.fullmatch(value) for value in set(src.values("digest"))):
        return None
    uris = set(src.values("uri"))
    if uris and _checked(lambda uri: bounded_string(uri, "sourceRef.uri", 1, 4096), uris) is None:
        return None
    # Normalised values; ``fixes`` are the columns whose input differs from them
    # (``_ABSENT`` for the rows that lack the field).
    fixes: list[tuple[str, Sequence[Any]]] = []
    raw_created = col("createdAt")
    parsed = _iso(raw_created, "createdAt")
    if parsed is None:
        return None
    memo, changed = parsed
    created: Sequence[str] = [memo[raw] for raw in raw_created] if changed else raw_created
    if changed:
        fixes.append(("createdAt", created))
    raw_observed = prov.columns["observedAt"]
    parsed = _iso(raw_observed, "provenance.observedAt")
    if parsed is None:
        return None
    memo, changed = parsed
    observed: Sequence[str] = raw_observed
    if changed:
        observed = [memo[raw] for raw in raw_observed]
        fixes.append(
            (
                "provenance",
                [{**p, "observedAt": o} for p, o in zip(col("provenance"), observed, strict=True)],
            )
        )
    expires: Sequence[str | None] | None = None
    if "expiresAt" in cols:
        raw_expires = cols["expiresAt"]
        parsed = _iso(table.values("expiresAt"), "expiresAt")
        if parsed is None:
            return None
        memo, changed = parsed
        fixed = [raw if raw is _ABSENT else memo[raw] for raw in raw_expires]
        if changed:
            fixes.append(("expiresAt", fixed))
        expires = [None if e is _ABSENT else e for e in fixed]
    parsed_sinks = _sink_column(col("allowedSinks"))
    if parsed_sinks is None:
        return None
    sinks, changed = parsed_sinks
    if changed:
        fixes.append(("allowedSinks", [[s] if type(s) is str else list(s) for s in sinks]))
    bindings: list[Any] | None = None
    if "binding" in cols:
        bindings = _normalised_objects(cols["binding"], _binding)
        if bindings is None:
            return None
        fixes.append(("binding", bindings))
    refs: list[Any] | None = None
    if "contentRef" in cols:
        refs = _normalised_objects(cols["contentRef"], _content_ref)
        if refs is None:
            return None
        fixes.append(("contentRef", refs))
    encodable = raws
    if fixes or "digest" in cols:
        encodable = list(map(dict.copy, raws))
        if "digest" in cols:
            for _ in map(dict.pop, encodable, repeat("digest"), repeat(None)):
                pass
        for key, values in fixes:
            _put(encodable, key, values)
    digests = _item_digests(encodable)
    if digests is None:
        return None
    if "digest" in cols and not all(
        given is _ABSENT or given == digest
        for given, digest in zip(cols["digest"], digests, strict=True)
    ):
        return None  # a different or malformed supplied digest: the exact path reports it
    sequences = src.optional("eventSequence", MAX_SAFE_INTEGER) or (MAX_SAFE_INTEGER,) * n
    uniform_source = not src.partial
    source_keys = tuple(k for k in _SOURCE_ORDER if k in src.columns)
    actor, degraded = "actor" in prov.columns, "degraded" in prov.columns
    if bindings is not None:
        bindings = [None if b is _ABSENT else b for b in bindings]
    if refs is not None:
        refs = [None if r is _ABSENT else r for r in refs]
    pinned = col("pinned")

    def item(i: int) -> dict[str, Any]:
        raw = raws[i]
        source = raw["sourceRef"]
        provenance = raw["provenance"]
        out: dict[str, Any] = {"schemaVersion": 1, "itemId": ids[i], "kind": kinds[i]}
        out["scope"] = scopes[i]
        if (scope_id := scope_ids[i]) is not None:
            out["scopeId"] = scope_id
        keys = source_keys if uniform_source else [k for k in _SOURCE_ORDER if k in source]
        out["sourceRef"] = {k: source[k] for k in keys}
        prov_out: dict[str, Any] = {"source": provenance["source"]}
        if actor and "actor" in provenance:
            prov_out["actor"] = provenance["actor"]
        prov_out["observedAt"] = observed[i]
        if degraded and "degraded" in provenance:
            prov_out["degraded"] = provenance["degraded"]
        out["provenance"] = prov_out
        out["trust"] = trusts[i]
        out["sensitivity"] = sensitivities[i]
        sink = sinks[i]
        out["allowedSinks"] = [sink] if type(sink) is str else list(sink)
        out["tokenEstimate"] = tokens[i]
        out["priority"] = priorities[i]
        out["pinned"] = pinned[i]
        out["createdAt"] = created[i]
        if expires is not None and (expires_at := expires[i]) is not None:
            out["expiresAt"] = expires_at
        if bindings is not None and (binding := bindings[i]) is not None:
            out["binding"] = dict(binding)
        if refs is not None and (ref := refs[i]) is not None:
            out["contentRef"] = dict(ref)
        else:
            out["content"] = raw["content"]
        out["digest"] = digests[i]
        return out

    return ItemBatch(
        ids=ids,
        kinds=kinds,
        trusts=trusts,
        scopes=scopes,
        scope_ids=scope_ids,
        sinks=sinks,
        tokens=tokens,
        priorities=priorities,
        pinned=pinned,
        sequences=sequences,
        expires=expires,
        bindings=bindings,
        digests=digests,
        item=item,
    )


def _sink_column(
    raw_sinks: Sequence[list[Any]],
) -> tuple[Sequence[str | tuple[str, ...]], bool] | None:
    """Normalised ``allowedSinks`` per item (its only entry, or a tuple) and whether any
    list differs from its input; ``None`` on a refusal.  Lists of one exact string of
    1–64 characters (at most 128 UTF-16 units) are already normal."""
    firsts = tuple(map(itemgetter(0), raw_sinks)) if set(map(len, raw_sinks)) == {1} else ()
    if (
        firsts
        and countOf(map(type, firsts), str) == len(firsts)
        and all(0 < len(s) <= 64 for s in set(firsts))
    ):
        return firsts, False
    if countOf(map(type, chain.from_iterable(raw_sinks)), str) != sum(map(len, raw_sinks)):
        return None  # the memo below is keyed by equality: exact strings only
    entries = list(map(tuple, raw_sinks))
    distinct = list(set(entries))
    normalised = _checked(
        lambda entry: _string_set(list(entry), "allowedSinks", 1, 128, 128), distinct
    )
    if normalised is None:
        return None
    memo = {
        entry: norm[0] if len(norm) == 1 else tuple(norm)
        for entry, norm in zip(distinct, normalised, strict=True)
    }
    return [memo[e] for e in entries], True


def _normalised_objects(
    column: Sequence[Any], check: Callable[[Any], dict[str, Any]]
) -> list[Any] | None:
    """``check`` of each present nested object (``_ABSENT`` kept), ``None`` on a refusal."""
    present = [value for value in column if value is not _ABSENT]
    normalised = _checked(check, present)
    if normalised is None:
        return None
    if len(present) == len(column):
        return normalised
    it = iter(normalised)
    return [_ABSENT if value is _ABSENT else next(it) for value in column]


def context_item_batch(raws: Sequence[Any], *, profile: _digest.Profile = "peer") -> ItemBatch:
    """``normalize_context_item`` of every item, as an :class:`ItemBatch` (same values,
    same errors).  The columnar path's digests are profile-free: for the values it takes
    (strings without lone surrogates, safe integers, booleans; keys of
    :data:`~kernel.canonical.items.ITEM_KEYS`) both profiles give the same bytes."""
    if isinstance(raws, list) and profile in _digest.PROFILES:  # else the exact path refuses it
        batch = _columnar(raws)
        if batch is not None:
            return batch
    return _batch_from_items([normalize_context_item(raw, profile=profile) for raw in raws])


def normalize_context_items(
    raws: Sequence[Any], *, profile: _digest.Profile = "peer"
) -> list[dict[str, Any]]:
    """``[normalize_context_item(r, profile=profile) for r in raws]``, faster."""
    batch = context_item_batch(raws, profile=profile)
    return [batch.item(i) for i in range(len(batch.ids))]
