"""Fast paths for planning many ContextItems: batch normalisation and kernel-built digests.

Planning re-normalises and re-digests every candidate item (design 108 §18 forbids
skipping the digest check), so per-item overhead dominates a 10,000-item plan.  Two
fast paths keep it low without changing a single output byte:

* :func:`normalize_context_items` validates a list of raw items optimistically —
  identifiers checked by one regex over all of them, timestamps through a memo of the call,
  enumerations by set lookup — and builds exactly the dicts
  :func:`kernel.canonical.items.normalize_context_item` builds.  On *any* anomaly (an
  invalid field, an unusual but valid form such as ``5.0`` for ``5``, a supplied digest
  that differs) it discards its work and runs the exact per-item path from the first
  item, so errors are the exact path's errors, reported in the peer's order.
* :func:`kernel_value_digest` digests a value the kernel built itself — dict keys drawn
  from the fixed key sets below, strings, safe integers and booleans, no floats — as
  ``sha256(domain + "\\0" + encoder(value, sort_keys=True))`` with the encoder
  ``kernel.canonical.digest`` uses for its own fast paths.  For these key sets byte order equals
  both the peer's ``localeCompare("en")`` order and RFC 8785's UTF-16 order (checked at
  import against ``kernel.canonical.digest.peer_key_order``; if it ever differs, or the encoder
  is missing, or a string holds a lone surrogate, the call goes to
  ``kernel.canonical.digest.digest``).  ``tests/kernel/test_planner_properties.py`` checks
  equality with ``kernel.canonical.digest.digest`` for both profiles.
* :func:`context_item_batch` (what the planner uses) goes one step further for a
  *homogeneous* batch — every item with the same key set, and likewise every
  ``sourceRef`` and every ``provenance`` — and validates column by column: one
  ``itemgetter`` pass extracts the fields, exact ``type`` checks, set lookups and
  ``min``/``max`` run in C, distinct timestamps and sink lists are parsed once.  The
  digests are computed from the input dicts themselves (a shallow copy without
  ``digest``, with normalised values put in where the input's differ): every key and
  value of those dicts is then exactly what the normalized item holds, so the
  canonical bytes are the same.  Normalized item dicts are built only on demand
  (:meth:`ItemBatch.item`), i.e. for the items a plan selects.  Anything else takes
  the per-item paths above.  ``tests/kernel/test_planner_fastpath.py`` checks the
  columns, the built dicts (key order included) and the plans against the exact path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from itertools import chain, repeat
from operator import countOf, itemgetter
from typing import Any, Final

from kernel.canonical import digest as _digest
from kernel.canonical.checks import (
    bounded_string,
    timestamp,
)
from kernel.canonical.items import (
    _DIGEST,
    _ITEM_FIELDS,
    _KIND_SET,
    _PROVENANCE_FIELDS,
    _SOURCE_REF_FIELDS,
    CONTEXT_ITEM_DOMAIN,
    ITEM_KEYS_CANONICAL,
    _binding,
    _content_ref,
    _provenance,
    _source_ref,
    _string_set,
    normalize_context_item,
)
from kernel.vocabulary import (
    MAX_SAFE_INTEGER,
    SCOPE_ID_REQUIRED,
    SENSITIVITY,
    TRUST,
)

__all__ = ("ItemBatch", "context_item_batch", "normalize_context_items")

_ENCODE = _digest.ENCODERS.get("orjson")
_PREFIX: Final = _digest.DIGEST_PREFIX
_ITEM_DOMAIN: Final = CONTEXT_ITEM_DOMAIN.encode("utf-8") + b"\x00"
_ITEM_HEAD: Final = b'{"allowedSinks":['
_ITEM_SPLIT: Final = b',{"allowedSinks":['
_LIST_HEAD: Final = b'[{"allowedSinks":['


# --- batch normalisation ------------------------------------------------------------------

_ID_LIST = re.compile(
    r"(?:[A-Za-z0-9][A-Za-z0-9._:/-]{0,159}\n)*[A-Za-z0-9][A-Za-z0-9._:/-]{0,159}"
)
# The memos below belong to one call (created by :func:`_fast_items`, dropped when it
# returns): a batch repeats a few timestamps and sink lists, and no answer outlives it.


def _ts(raw: str, field: str, memo: dict[str, str]) -> str:
    """``timestamp(raw, field)`` for an exact ``str``, remembered in the call's ``memo``."""
    iso = memo[raw] = timestamp(raw, field)  # raises on anything invalid
    return iso


def _sinks(raw: list[Any], memo: dict[tuple[str, ...], tuple[str, ...]]) -> list[str]:
    if countOf(map(type, raw), str) != len(raw):
        raise TypeError("allowedSinks: exact path")  # the memo is keyed by equality
    key = tuple(raw)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = tuple(_string_set(raw, "allowedSinks", 1, 128, 128))
    return list(hit)


def _fast_items(raws: Sequence[Any]) -> list[dict[str, Any]] | None:
    """Optimistic normalisation of every item, or ``None`` on any doubt."""
    ids: list[str] = []
    add_ids = ids.extend
    outs: list[dict[str, Any]] = []
    add_out = outs.append
    supplied: list[Any] = []
    add_supplied = supplied.append
    ts_memo: dict[str, str] = {}
    ts_get = ts_memo.get
    sinks_memo: dict[tuple[str, ...], tuple[str, ...]] = {}
    kinds, trusts, sensitivities, scoped = _KIND_SET, TRUST, SENSITIVITY, SCOPE_ID_REQUIRED
    item_fields, src_fields, prov_fields = _ITEM_FIELDS, _SOURCE_REF_FIELDS, _PROVENANCE_FIELDS
    absent = _ABSENT
    try:
        for v in raws:
            if type(v) is not dict or not item_fields.issuperset(v):
                return None
            sv = v["schemaVersion"]
            kind = v["kind"]
            trust = v["trust"]
            sensitivity = v["sensitivity"]
            if (
                type(sv) is not int
                or sv != 1
                or type(kind) is not str
                or type(trust) is not str
                or type(sensitivity) is not str
                or kind not in kinds
                or trust not in trusts
                or sensitivity not in sensitivities
                or ("content" in v) == ("contentRef" in v)
            ):
                return None
            item_id = v["itemId"]
            scope = v["scope"]
            sr = v["sourceRef"]
            pv = v["provenance"]
            if (
                type(sr) is not dict
                or type(pv) is not dict
                or type(scope) is not str
                or not prov_fields.issuperset(pv)
            ):
                return None
            store = sr["store"]
            sid = sr["id"]
            source = pv["source"]
            if len(sr) == 2:
                src: dict[str, Any] = {"store": store, "id": sid}
            elif (
                len(sr) == 3
                and type(seq := sr.get("eventSequence")) is int
                and 0 <= seq <= MAX_SAFE_INTEGER
            ):
                src = {"store": store, "id": sid, "eventSequence": seq}
            elif src_fields.issuperset(sr):
                src = _source_ref(sr)
            else:
                return None
            observed = pv["observedAt"]
            if type(observed) is not str:
                return None
            observed_iso = ts_get(observed) or _ts(observed, "provenance.observedAt", ts_memo)
            n_prov = len(pv)
            if n_prov == 2:
                prov: dict[str, Any] = {"source": source, "observedAt": observed_iso}
            elif n_prov == 3 and "actor" in pv:
                actor = pv["actor"]
                add_ids((actor,))
                prov = {"source": source, "actor": actor, "observedAt": observed_iso}
            else:
                prov = _provenance(pv)
            sinks = v["allowedSinks"]
            if type(sinks) is not list:
                return None
            if len(sinks) == 1 and type(s0 := sinks[0]) is str and 0 < len(s0) <= 64:
                sinks_out = [s0]
            else:
                sinks_out = _sinks(sinks, sinks_memo)
            tokens = v["tokenEstimate"]
            priority = v["priority"]
            pinned = v["pinned"]
            if (
                type(tokens) is not int
                or not 1 <= tokens <= 16_777_216
                or type(priority) is not int
                or not 0 <= priority <= 1_000_000
                or (pinned is not True and pinned is not False)
            ):
                return None
            created = v["createdAt"]
            if type(created) is not str:
                return None
            created_iso = ts_get(created) or _ts(created, "createdAt", ts_memo)
            if scope in scoped:
                scope_id = v["scopeId"]
                add_ids((item_id, scope_id, store, sid, source))
                out: dict[str, Any] = {
                    "schemaVersion": 1,
                    "itemId": item_id,
                    "kind": kind,
                    "scope": scope,
                    "scopeId": scope_id,
                    "sourceRef": src,
                    "provenance": prov,
                    "trust": trust,
                    "sensitivity": sensitivity,
                    "allowedSinks": sinks_out,
                    "tokenEstimate": tokens,
                    "priority": priority,
                    "pinned": pinned,
                    "createdAt": created_iso,
                }
            elif scope == "global" and v.get("scopeId") is None:
                add_ids((item_id, store, sid, source))
                out = {
                    "schemaVersion": 1,
                    "itemId": item_id,
                    "kind": kind,
                    "scope": scope,
                    "sourceRef": src,
                    "provenance": prov,
                    "trust": trust,
                    "sensitivity": sensitivity,
                    "allowedSinks": sinks_out,
                    "tokenEstimate": tokens,
                    "priority": priority,
                    "pinned": pinned,
                    "createdAt": created_iso,
                }
            else:
                return None
            if "expiresAt" in v:
                expires = v["expiresAt"]
                if type(expires) is not str:
                    return None
                out["expiresAt"] = ts_get(expires) or _ts(expires, "expiresAt", ts_memo)
            if "binding" in v:
                out["binding"] = _binding(v["binding"])
            if "content" in v:
                content = v["content"]
                if type(content) is not str or len(content) > 2_097_152:
                    return None
                out["content"] = content
            else:
                out["contentRef"] = _content_ref(v["contentRef"])
            add_out(out)
            add_supplied(v.get("digest", absent))
        if ids:
            if countOf(map(type, ids), str) != len(ids):
                return None  # (join would take str subclasses)
            joined = "\n".join(ids)
            if joined.count("\n") != len(ids) - 1 or _ID_LIST.fullmatch(joined) is None:
                return None
        digests = _item_digests(outs)
        if digests is None:
            return None
        for out, digest, given in zip(outs, digests, supplied, strict=True):
            if given is not absent and (type(given) is not str or given != digest):
                return None  # a malformed or different digest: the exact path reports it
            out["digest"] = digest
    except Exception:  # any doubt: the exact path decides (and raises the right error)
        return None
    return outs


_ABSENT: Any = object()


def _item_digests(outs: list[dict[str, Any]]) -> list[str] | None:
    """Peer digests of normalized items: one encoder call for the whole batch, split at
    the item boundaries (every item's canonical JSON starts with ``{"allowedSinks":[``
    and a raw ``"`` only ever appears as JSON structure, never inside a string)."""
    if not ITEM_KEYS_CANONICAL or _ENCODE is None or not outs:
        return None
    body = _ENCODE(outs, True)
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
    """Columns of already normalized items (the per-item paths)."""
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


_REQUIRED: Final = _ITEM_FIELDS - {
    "scopeId",
    "expiresAt",
    "digest",
    "binding",
    "content",
    "contentRef",
}
_SOURCE_REQUIRED: Final = frozenset({"store", "id"})
_SOURCE_ORDER: Final = ("store", "id", "revision", "eventSequence", "digest", "uri")
_PROVENANCE_FAST: Final = frozenset({"source", "actor", "observedAt", "degraded"})
_PROVENANCE_REQUIRED: Final = frozenset({"source", "observedAt"})


def _columns(
    dicts: Sequence[Any], allowed: frozenset[str], required: frozenset[str]
) -> dict[str, tuple[Any, ...]] | None:
    """``{key: column}`` when every entry is a plain dict with one and the same key
    set (inside ``allowed``, holding ``required``); else ``None`` (or ``KeyError``)."""
    if set(map(type, dicts)) != {dict}:
        return None
    keys = tuple(dicts[0])
    if not (required.issubset(keys) and allowed.issuperset(keys)):
        return None
    if set(map(len, dicts)) != {len(keys)}:
        return None  # same length and all of the first one's keys: same key set
    # Tuples: the collector stops tracking a tuple of strings and ints, lists it keeps
    # traversing while the plan is built.
    return {key: tuple(map(itemgetter(key), dicts)) for key in keys}


def _all(columns: Sequence[Sequence[Any]], kind: type) -> bool:
    """Every value of every column is exactly of type ``kind`` (no subclass)."""
    return countOf(map(type, chain.from_iterable(columns)), kind) == sum(map(len, columns))


def _iso(column: Sequence[str], field: str) -> tuple[Sequence[str], bool]:
    """Normalised timestamps of a column (each distinct value parsed once) and whether
    any differs from its input."""
    memo = {raw: timestamp(raw, field) for raw in set(column)}
    if all(raw == iso for raw, iso in memo.items()):
        return column, False
    return [memo[raw] for raw in column], True


def _columnar(raws: list[Any]) -> ItemBatch | None:
    """The homogeneous-batch fast path (module docstring), or ``None`` on any doubt;
    may also raise (the caller treats that as doubt too)."""
    n = len(raws)
    cols = _columns(raws, _ITEM_FIELDS, _REQUIRED) if n else None
    if cols is None or ("content" in cols) == ("contentRef" in cols):
        return None
    col = cols.__getitem__
    ids, kinds, scopes, trusts = col("itemId"), col("kind"), col("scope"), col("trust")
    src = _columns(col("sourceRef"), _SOURCE_REF_FIELDS, _SOURCE_REQUIRED)
    prov = _columns(col("provenance"), _PROVENANCE_FAST, _PROVENANCE_REQUIRED)
    raw_sinks = col("allowedSinks")
    if src is None or prov is None or set(map(type, raw_sinks)) != {list}:
        return None
    single = set(map(len, raw_sinks)) == {1}
    firsts = tuple(map(itemgetter(0), raw_sinks)) if single else ()
    strings = [ids, kinds, scopes, trusts, col("sensitivity"), col("createdAt"), firsts]
    strings += [cols[k] for k in ("scopeId", "expiresAt", "digest", "content") if k in cols]
    strings += [src[k] for k in ("store", "id", "digest", "uri") if k in src]
    strings += [prov[k] for k in ("source", "actor", "observedAt") if k in prov]
    integers = [col("schemaVersion"), col("tokenEstimate"), col("priority")]
    integers += [src[k] for k in ("revision", "eventSequence") if k in src]
    flags = [col("pinned"), *([prov["degraded"]] if "degraded" in prov else [])]
    if not (_all(strings, str) and _all(integers, int) and _all(flags, bool)):
        return None  # exact types only: subclasses and 5.0-for-5 take the exact path
    tokens, priorities = col("tokenEstimate"), col("priority")
    if (
        set(col("schemaVersion")) != {1}
        or not set(kinds) <= _KIND_SET
        or not set(trusts) <= TRUST
        or not set(col("sensitivity")) <= SENSITIVITY
        or min(tokens) < 1
        or max(tokens) > 16_777_216
        or min(priorities) < 0
        or max(priorities) > 1_000_000
        or ("content" in cols and max(map(len, cols["content"])) > 2_097_152)
    ):
        return None
    for key in ("revision", "eventSequence"):
        if key in src and (min(src[key]) < 0 or max(src[key]) > MAX_SAFE_INTEGER):
            return None
    scope_set = set(scopes)
    scoped = "scopeId" in cols
    if scoped and scope_set <= SCOPE_ID_REQUIRED:
        scope_ids: Sequence[str | None] = cols["scopeId"]
    elif not scoped and scope_set == {"global"}:
        scope_ids = (None,) * n
    else:
        return None
    names = (
        ids,
        src["id"],
        set(src["store"]),
        set(prov["source"]),
        set(prov.get("actor", ())),
        set(cols["scopeId"] if scoped else ()),
    )
    joined = "\n".join(chain.from_iterable(names))
    if joined.count("\n") != sum(map(len, names)) - 1 or _ID_LIST.fullmatch(joined) is None:
        return None
    for value in set(src.get("digest", ())):
        if _DIGEST.fullmatch(value) is None:
            return None
    for value in set(src.get("uri", ())):
        bounded_string(value, "sourceRef.uri", 1, 4096)
    # Normalised values; ``fixes`` are the columns whose input differs from them.
    fixes: list[tuple[str, Sequence[Any]]] = []
    created, changed = _iso(col("createdAt"), "createdAt")
    if changed:
        fixes.append(("createdAt", created))
    observed, changed = _iso(prov["observedAt"], "provenance.observedAt")
    if changed:
        fixes.append(
            (
                "provenance",
                [{**p, "observedAt": o} for p, o in zip(col("provenance"), observed, strict=True)],
            )
        )
    expires: Sequence[str] | None = None
    if "expiresAt" in cols:
        expires, changed = _iso(cols["expiresAt"], "expiresAt")
        if changed:
            fixes.append(("expiresAt", expires))
    sinks: Sequence[str | tuple[str, ...]]
    if single and all(0 < len(s) <= 64 for s in set(firsts)):
        sinks = firsts
    else:
        if not _all(raw_sinks, str):
            return None
        entries = list(map(tuple, raw_sinks))
        memo: dict[tuple[str, ...], str | tuple[str, ...]] = {}
        for entry in set(entries):
            norm = _string_set(list(entry), "allowedSinks", 1, 128, 128)
            memo[entry] = norm[0] if len(norm) == 1 else tuple(norm)
        sinks = [memo[e] for e in entries]
        fixes.append(("allowedSinks", [[s] if type(s) is str else list(s) for s in sinks]))
    bindings: list[dict[str, Any]] | None = None
    if "binding" in cols:
        bindings = [_binding(b) for b in cols["binding"]]
        fixes.append(("binding", bindings))
    refs: list[dict[str, Any]] = []
    if "contentRef" in cols:
        refs = [_content_ref(r) for r in cols["contentRef"]]
        fixes.append(("contentRef", refs))
    encodable = raws
    if fixes or "digest" in cols:
        encodable = list(map(dict.copy, raws))
        if "digest" in cols:
            for _ in map(dict.pop, encodable, repeat("digest")):
                pass
        for key, values in fixes:
            for _ in map(dict.__setitem__, encodable, repeat(key), values):
                pass
    digests = _item_digests(encodable)
    if digests is None or ("digest" in cols and list(cols["digest"]) != digests):
        return None  # a different supplied digest: the exact path reports it
    sensitivities = col("sensitivity")
    sequences = src.get("eventSequence") or (MAX_SAFE_INTEGER,) * n
    source_keys = tuple(k for k in _SOURCE_ORDER if k in src)
    actor, degraded = "actor" in prov, "degraded" in prov

    def item(i: int) -> dict[str, Any]:
        raw = raws[i]
        source = raw["sourceRef"]
        provenance = raw["provenance"]
        out: dict[str, Any] = {"schemaVersion": 1, "itemId": ids[i], "kind": kinds[i]}
        out["scope"] = scopes[i]
        if scoped:
            out["scopeId"] = scope_ids[i]
        out["sourceRef"] = {k: source[k] for k in source_keys}
        prov_out: dict[str, Any] = {"source": provenance["source"]}
        if actor:
            prov_out["actor"] = provenance["actor"]
        prov_out["observedAt"] = observed[i]
        if degraded:
            prov_out["degraded"] = provenance["degraded"]
        out["provenance"] = prov_out
        out["trust"] = trusts[i]
        out["sensitivity"] = sensitivities[i]
        sink = sinks[i]
        out["allowedSinks"] = [sink] if type(sink) is str else list(sink)
        out["tokenEstimate"] = tokens[i]
        out["priority"] = priorities[i]
        out["pinned"] = raw["pinned"]
        out["createdAt"] = created[i]
        if expires is not None:
            out["expiresAt"] = expires[i]
        if bindings is not None:
            out["binding"] = dict(bindings[i])
        if refs:
            out["contentRef"] = dict(refs[i])
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
        pinned=col("pinned"),
        sequences=sequences,
        expires=expires,
        bindings=bindings,
        digests=digests,
        item=item,
    )


def context_item_batch(raws: Sequence[Any], *, profile: _digest.Profile = "peer") -> ItemBatch:
    """:func:`normalize_context_items` as an :class:`ItemBatch` (same errors)."""
    items: list[dict[str, Any]] | None = None
    if isinstance(raws, list):
        try:
            batch = _columnar(raws)
        except Exception:  # any doubt: the per-item paths decide
            batch = None
        if batch is not None:
            return batch
        items = _fast_items(raws)
    if items is None:
        items = [normalize_context_item(raw, profile=profile) for raw in raws]
    return _batch_from_items(items)


def normalize_context_items(
    raws: Sequence[Any], *, profile: _digest.Profile = "peer"
) -> list[dict[str, Any]]:
    """``[normalize_context_item(r, profile=profile) for r in raws]``, faster."""
    batch = context_item_batch(raws, profile=profile)
    return [batch.item(i) for i in range(len(batch.ids))]
