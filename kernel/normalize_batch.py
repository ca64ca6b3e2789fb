"""Fast paths for planning many ContextItems: batch normalisation and kernel-built digests.

Planning re-normalises and re-digests every candidate item (design 108 §18 forbids
skipping the digest check), so per-item overhead dominates a 10,000-item plan.  Two
fast paths keep it low without changing a single output byte:

* :func:`normalize_context_items` validates a list of raw items optimistically —
  identifiers checked by one regex over all of them, timestamps through a memo,
  enumerations by set lookup — and builds exactly the dicts
  :func:`kernel.normalize.normalize_context_item` builds.  On *any* anomaly (an
  invalid field, an unusual but valid form such as ``5.0`` for ``5``, a supplied digest
  that differs) it discards its work and runs the exact per-item path from the first
  item, so errors are the exact path's errors, reported in the peer's order.
* :func:`kernel_value_digest` digests a value the kernel built itself — dict keys drawn
  from the fixed key sets below, strings, safe integers and booleans, no floats — as
  ``sha256(domain + "\\0" + encoder(value, sort_keys=True))`` with the encoder
  ``kernel.digest`` uses for its own fast paths.  For these key sets byte order equals
  both the peer's ``localeCompare("en")`` order and RFC 8785's UTF-16 order (checked at
  import against ``kernel.digest.peer_key_order``; if it ever differs, or the encoder
  is missing, or a string holds a lone surrogate, the call goes to
  ``kernel.digest.digest``).  ``tests/kernel/test_planner_properties.py`` checks
  equality with ``kernel.digest.digest`` for both profiles.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any, Final

from kernel import digest as _digest
from kernel.normalize import (
    _ITEM_FIELDS,
    _KIND_SET,
    _PROVENANCE_FIELDS,
    _SOURCE_REF_FIELDS,
    CONTEXT_ITEM_DOMAIN,
    ITEM_KEYS_CANONICAL,
    MAX_SAFE_INTEGER,
    SCOPE_ID_REQUIRED,
    SENSITIVITY,
    TRUST,
    _binding,
    _content_ref,
    _provenance,
    _source_ref,
    _string_set,
    _timestamp,
    normalize_context_item,
)

__all__ = ["normalize_context_items"]

_ENCODE = _digest.ENCODERS.get("orjson")
_PREFIX: Final = _digest.DIGEST_PREFIX
_ITEM_DOMAIN: Final = CONTEXT_ITEM_DOMAIN.encode("utf-8") + b"\x00"
_ITEM_HEAD: Final = b'{"allowedSinks":['
_ITEM_SPLIT: Final = b',{"allowedSinks":['


# --- batch normalisation ------------------------------------------------------------------

_ID_LIST = re.compile(
    r"(?:[A-Za-z0-9][A-Za-z0-9._:/-]{0,159}\n)*[A-Za-z0-9][A-Za-z0-9._:/-]{0,159}"
)
_TS_MEMO: dict[str, str] = {}
_SINKS_MEMO: dict[tuple[str, ...], tuple[str, ...]] = {}
_MEMO_LIMIT: Final = 1 << 14


def _ts(raw: Any, field: str) -> str:
    iso = _timestamp(raw, field)  # raises on anything invalid
    if len(_TS_MEMO) >= _MEMO_LIMIT:
        _TS_MEMO.clear()
    _TS_MEMO[raw] = iso
    return iso


def _sinks(raw: list[Any]) -> list[str]:
    key = tuple(raw)
    hit = _SINKS_MEMO.get(key)
    if hit is None:
        hit = tuple(_string_set(raw, "allowedSinks", 1, 128, 128))
        if len(_SINKS_MEMO) >= _MEMO_LIMIT:
            _SINKS_MEMO.clear()
        _SINKS_MEMO[key] = hit
    return list(hit)


def _fast_items(raws: Sequence[Any]) -> list[dict[str, Any]] | None:
    """Optimistic normalisation of every item, or ``None`` on any doubt."""
    ids: list[str] = []
    add_ids = ids.extend
    outs: list[dict[str, Any]] = []
    add_out = outs.append
    supplied: list[Any] = []
    add_supplied = supplied.append
    ts_get = _TS_MEMO.get
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
            if type(sr) is not dict or type(pv) is not dict or not prov_fields.issuperset(pv):
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
            observed_iso = ts_get(observed) or _ts(observed, "provenance.observedAt")
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
                sinks_out = _sinks(sinks)
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
            created_iso = ts_get(created) or _ts(created, "createdAt")
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
                out["expiresAt"] = ts_get(expires) or _ts(expires, "expiresAt")
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
            joined = "\n".join(ids)
            if joined.count("\n") != len(ids) - 1 or _ID_LIST.fullmatch(joined) is None:
                return None
        digests = _item_digests(outs)
        if digests is None:
            return None
        for out, digest, given in zip(outs, digests, supplied, strict=True):
            if given is not absent and given != digest:
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
    parts = body[1:-1].split(_ITEM_SPLIT)
    if len(parts) != len(outs) or not parts[0].startswith(_ITEM_HEAD):
        return None
    base = hashlib.sha256(_ITEM_DOMAIN + _ITEM_HEAD)
    first = hashlib.sha256(_ITEM_DOMAIN)
    first.update(parts[0])
    result = [_PREFIX + first.hexdigest()]
    for part in parts[1:]:
        h = base.copy()
        h.update(part)
        result.append(_PREFIX + h.hexdigest())
    return result


def normalize_context_items(
    raws: Sequence[Any], *, profile: _digest.Profile = "peer"
) -> list[dict[str, Any]]:
    """``[normalize_context_item(r, profile=profile) for r in raws]``, faster."""
    if isinstance(raws, list):
        fast = _fast_items(raws)
        if fast is not None:
            return fast
    return [normalize_context_item(raw, profile=profile) for raw in raws]
