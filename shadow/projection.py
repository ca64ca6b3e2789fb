"""The canonical projection: what one producer (a legacy surface or the candidate) did
with one fixture, reduced to identities, digests, categories and lengths.

Every surface adapter maps a native legacy output to a :class:`Projection`; every
candidate produces one for the same (fixture, surface).  The divergence engine
only ever compares projections.  A projection never holds a message body or a
secret: content is represented by a domain-tagged digest and a length.

JSON format (``shadow-projection/v1``) — the format a recorded candidate folder
holds (``<DIR>/<fixture>/<surface>.projection.json``; see docs/surfaces.md)::

    {"schema": "shadow-projection/v1", "fixture": str, "surface": str,
     "producer": "baseline" | "candidate", "status": "ok" | "error",
     "error": str | null,                       # an error category, never a message
     "input_ids": [str],                        # identities offered to the surface
     "items": [{"id", "kind", "origin": "input"|"derived", "digest", "length",
                "role"?, "tool_call_id"?, "tool_role"?, "tool_outcome"?, "pinned"?,
                "trust"?, "sensitivity"?, "altered"?, "covers"?: [str], "detail"?: {}}],
     "dropped": [{"id", "reason", "legacy_reason"?, "protected"?}],
     "provider": null | {"status", "requests", "recorded", "degraded", "degraded_reason",
                         "usage", "cancelled", "truth"},
     "memory": null | {"records": [{"id", "scope", "scope_id", "state", "sensitivity",
                                    "digest", "category", "shingles"?, "trust"?,
                                    "content_sensitivity"?}],
                       "ops": [{"index", "op", "status", "created", "updated", "deleted",
                                "returned", "error"}]},
     "side_effects": [{"kind", "target", "recorded"}],
     "writers": [str], "facts": {}, "noise": {}}

An item's ``detail`` may carry ``shingles`` — ``{unit: [16-hex hash, …]}``, the sketch of
a derived or altered item's text (per summary field and list element) from which the
divergence engine judges where the text came from (``shadow.divergence.provenance``) —
and, for an altered input item, ``claim`` (``verified`` | ``falsified``) and ``why``: the
adapter's verdict on the transformation the producer claims.  ``facts`` may carry
``limits`` (the producer's stated limits: ``messages``, ``tokens``, ``order``),
``order`` (``priority`` | ``pinned_block``: a documented output order),
``provider_history`` (the provider outcomes of a multi-call capture's earlier calls, in
the ``provider`` shape),
``sent_secrets`` (recorded provider calls whose request held secret material),
``provider_inputs`` (ids the candidate sent to its summarizer) and ``error_detail``
(ids and counts of a refusal, e.g. ``context_over_budget``).  None of these is a body.

Keys are written sorted, so the bytes of a projection are a function of its value.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final

SCHEMA: Final = "shadow-projection/v1"
CONTENT_DOMAIN: Final = "shadow.content/v1"
DERIVED_KINDS: Final = frozenset(
    {"summary", "collapse-marker", "compressed-ref", "rewrite", "reminder"})


def content_digest(text: str | None) -> str:
    """Digest of one piece of content as the model would see it.

    ``sha256:`` + hex over ``utf8(domain + NUL + text)`` — the same framing as the
    kernel's domain-tagged digests, applied to the raw string (no JSON layer, so a
    1 MiB tool result costs one hash pass).
    """
    h = hashlib.sha256()
    h.update(CONTENT_DOMAIN.encode("utf-8") + b"\0")
    h.update((text or "").encode("utf-8", errors="surrogatepass"))
    return "sha256:" + h.hexdigest()


def value_digest(value: Any, domain: str = "shadow.value/v1") -> str:
    """Digest of a small JSON value (sorted keys, compact separators)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    h = hashlib.sha256(domain.encode("utf-8") + b"\0" + text.encode("utf-8", "surrogatepass"))
    return "sha256:" + h.hexdigest()


@dataclass(frozen=True, slots=True)
class PItem:
    """One item kept in a producer's output, in output order."""

    id: str
    kind: str
    origin: str  # "input" | "derived"
    digest: str
    length: int
    role: str | None = None
    tool_call_id: str | None = None
    tool_role: str | None = None
    tool_outcome: str | None = None
    pinned: bool = False
    trust: str | None = None
    sensitivity: str | None = None
    altered: str | None = None  # category of the transformation when content changed
    covers: tuple[str, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Drop:
    id: str
    reason: str  # canonical drop reason
    legacy_reason: str | None = None
    protected: bool = False


@dataclass(frozen=True, slots=True)
class ProviderOutcome:
    status: str  # none | committed | degraded | reconciliation_required | aborted | failed
    requests: int = 0
    recorded: int = 0
    degraded: bool | None = None  # None: the surface does not report it
    degraded_reason: str | None = None
    usage: str | None = None  # known | unknown | None (not reported)
    cancelled: bool = False
    truth: str | None = None  # what the recording says: ok | invalid | no-usage | error | cancelled


@dataclass(frozen=True, slots=True)
class MemRecord:
    id: str
    scope: str
    scope_id: str | None
    state: str  # active | candidate | deleted | ...
    sensitivity: str | None
    digest: str
    category: str | None = None
    shingles: tuple[str, ...] = ()  # sketch of the content (shadow.divergence.provenance)
    trust: str | None = None  # the trust the record is recalled at (None: ordinary memory)
    content_sensitivity: str | None = None  # what the content itself shows (the detector)


@dataclass(frozen=True, slots=True)
class MemOp:
    index: int
    op: str
    status: str  # ok | error | noop
    created: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    returned: tuple[str, ...] | None = None  # ids a read returned, in order
    error: str | None = None  # category, never a message
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MemoryProjection:
    records: tuple[MemRecord, ...] = ()
    ops: tuple[MemOp, ...] = ()


@dataclass(frozen=True, slots=True)
class SideEffect:
    kind: str  # provider_request | write
    target: str
    recorded: bool


@dataclass(frozen=True, slots=True)
class Projection:
    fixture: str
    surface: str
    producer: str  # baseline | candidate
    status: str = "ok"  # ok | error
    error: str | None = None
    input_ids: tuple[str, ...] = ()
    items: tuple[PItem, ...] = ()
    dropped: tuple[Drop, ...] = ()
    provider: ProviderOutcome | None = None
    memory: MemoryProjection | None = None
    side_effects: tuple[SideEffect, ...] = ()
    writers: tuple[str, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)
    noise: Mapping[str, Any] = field(default_factory=dict)

    @property
    def output_digest(self) -> str:
        """Identity + content digest of the whole ordered output (the fast-path key)."""
        return value_digest(projection_key(self), "shadow.projection-output/v1")

    def item(self, item_id: str) -> PItem | None:
        for it in self.items:
            if it.id == item_id:
                return it
        return None


_OUTCOME_FIELDS: Final = frozenset(f.name for f in fields(ProviderOutcome))


def provider_calls(p: Projection) -> list[ProviderOutcome | None]:
    """The provider outcome of each call of a capture, call 1 first: the earlier calls of a
    multi-call capture (``facts.provider_history``; an entry that is not an outcome is
    None), then the projection's own last call (``provider``, None when not reported)."""
    history = p.facts.get("provider_history") if isinstance(p.facts, Mapping) else None
    calls: list[ProviderOutcome | None] = [
        ProviderOutcome(**h) if isinstance(h, Mapping) and set(h) <= _OUTCOME_FIELDS else None
        for h in (history if isinstance(history, list) else ())]
    calls.append(p.provider)
    return calls


def projection_key(p: Projection) -> dict[str, Any]:
    """Everything that decides equality of two projections (producer excluded)."""
    wire = to_wire(p)
    for k in ("producer", "fixture", "surface", "noise"):
        wire.pop(k, None)
    return wire


# --------------------------------------------------------------------------- wire format


def _item_wire(it: PItem) -> dict[str, Any]:
    out: dict[str, Any] = {"id": it.id, "kind": it.kind, "origin": it.origin,
                           "digest": it.digest, "length": it.length}
    for name in ("role", "tool_call_id", "tool_role", "tool_outcome", "trust", "sensitivity",
                 "altered"):
        v = getattr(it, name)
        if v is not None:
            out[name] = v
    if it.pinned:
        out["pinned"] = True
    if it.covers:
        out["covers"] = list(it.covers)
    if it.detail:
        out["detail"] = dict(it.detail)
    return out


def _plain(obj: Any) -> Any:
    if isinstance(obj, tuple):
        return [_plain(x) for x in obj]
    if isinstance(obj, Mapping):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def _dc_wire(obj: Any) -> dict[str, Any]:
    return {f.name: _plain(getattr(obj, f.name)) for f in fields(obj)}


def to_wire(p: Projection) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "fixture": p.fixture,
        "surface": p.surface,
        "producer": p.producer,
        "status": p.status,
        "error": p.error,
        "input_ids": list(p.input_ids),
        "items": [_item_wire(it) for it in p.items],
        "dropped": [
            {k: v for k, v in _dc_wire(d).items() if v not in (None, False)} for d in p.dropped
        ],
        "provider": _dc_wire(p.provider) if p.provider is not None else None,
        "memory": (
            {"records": [_dc_wire(r) for r in p.memory.records],
             "ops": [_dc_wire(o) for o in p.memory.ops]}
            if p.memory is not None else None
        ),
        "side_effects": [_dc_wire(s) for s in p.side_effects],
        "writers": list(p.writers),
        "facts": _plain(dict(p.facts)),
        "noise": _plain(dict(p.noise)),
    }


def dumps(p: Projection) -> str:
    return json.dumps(to_wire(p), sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def from_wire(d: Any, src: str = "<projection>", *, candidate: bool = False) -> Projection:
    """Parse the documented JSON format strictly (:mod:`shadow.projection_wire`); a bad
    file is an InputError naming the file and the JSON pointer."""
    from shadow.projection_wire import from_wire as parse

    return parse(d, src, candidate=candidate)


def with_producer(p: Projection, producer: str) -> Projection:
    from dataclasses import replace

    return replace(p, producer=producer)


def ids(items: Iterable[PItem]) -> list[str]:
    return [it.id for it in items]


def by_id(items: Sequence[PItem]) -> dict[str, PItem]:
    return {it.id: it for it in items}
