"""v1 contracts: wire round trips, agreement with our frozen schema and the peer's schema,
invariants, and the peer's own outputs parsed losslessly."""

from __future__ import annotations

import ast
import dataclasses
import json
import types
import typing
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

import jsonschema
import pytest
import typing_extensions as te
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kernel import contracts as k
from kernel.contracts import CONTRACTS, Constraint, WireContract, wire_fields
from kernel.errors import InvalidArgument
from shadow.boundary import loads
from shadow.errors import InputError
from shadow.schemas import PEER_DEF_NAMES, SCHEMA_DIR
from shadow.wire import parse
from tests.conftest import load_peer_vectors

ROOT = Path(__file__).resolve().parents[2]
PEER_SCHEMA_FILE = "schema/context-memory-kernel.schema.json"

SETTINGS = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FEWER = settings(SETTINGS, max_examples=8)

# --- strategies built from the contracts' own type hints and Constraint metadata ------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=6,
)
TIMESTAMPS = st.datetimes().map(
    lambda d: f"{d:%Y-%m-%dT%H:%M:%S}.{d.microsecond // 1000:03d}Z"
)
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
# Cheaper than st.from_regex for the two hot patterns (checked against them below).
IDENTIFIERS = st.builds(
    lambda head, tail: head + tail,
    st.sampled_from(_ALNUM),
    st.text(alphabet=_ALNUM + "._:/-", max_size=12)
    | st.text(alphabet=_ALNUM + "._:/-", min_size=150, max_size=159),
)
DIGESTS = st.binary(min_size=32, max_size=32).map(lambda b: "sha256:" + b.hex())
PATTERN_STRATEGIES = {k.IDENTIFIER_PATTERN: IDENTIFIERS, k.DIGEST_PATTERN: DIGESTS}


def _split(tp: Any) -> tuple[Any, Constraint | None]:
    if te.get_origin(tp) is Annotated:
        base, *meta = te.get_args(tp)
        return base, next((m for m in meta if isinstance(m, Constraint)), None)
    return tp, None


def _strip_none(tp: Any) -> tuple[Any, bool]:
    if te.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in te.get_args(tp) if a is not type(None)]
        if len(args) < len(te.get_args(tp)):
            return args[0], True
    return tp, False


def value_strategy(tp: Any) -> st.SearchStrategy[Any]:
    base, c = _split(tp)
    if c is not None and c.json == "value":
        return JSON_VALUES
    if c is not None and c.json == "object":
        return st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=3)
    if isinstance(base, type) and issubclass(base, WireContract):
        return st.deferred(lambda: contract_strategy(base))
    origin = te.get_origin(base)
    if origin is Literal:
        return st.sampled_from(te.get_args(base))
    if origin is tuple:
        item = te.get_args(base)[0]
        lo = (c.min_length if c else None) or 0
        hi = min((c.max_length if c else None) or 3, 3)
        return st.lists(value_strategy(item), min_size=lo, max_size=max(lo, hi),
                        unique=bool(c and c.unique)).map(tuple)
    if base is str:
        if c is not None and c.format == "date-time":
            return TIMESTAMPS
        if c is not None and c.pattern:
            if c.pattern in PATTERN_STRATEGIES:
                return PATTERN_STRATEGIES[c.pattern]
            return st.from_regex(c.pattern, fullmatch=True)
        lo = (c.min_length if c else None) or 0
        return st.text(min_size=lo, max_size=min((c.max_length if c else None) or 24, 24))
    if base is int:
        return st.integers(c.ge if c else None, c.le if c else None)  # type: ignore[arg-type]
    if base is float:
        return st.floats(c.ge if c else None, c.le if c else None, allow_nan=False,
                         allow_infinity=False)
    if base is bool:
        return st.booleans()
    raise TypeError(tp)


def repair(cls: type, kw: dict[str, Any]) -> dict[str, Any]:
    """Make generated fields satisfy the dataclass invariants instead of filtering."""
    if "scope" in kw and "scope_id" in kw:
        kw["scope_id"] = None if kw["scope"] == "global" else (kw["scope_id"] or "scope-1")
    if cls is k.ContextItem and (kw["content"] is None) == (kw["content_ref"] is None):
        kw["content_ref"] = None
        kw["content"] = kw["content"] if kw["content"] is not None else "body"
    if cls is k.ItemBinding and (kw["tool_role"] or kw["tool_outcome"]):
        kw["tool_call_id"] = kw["tool_call_id"] or "call-1"
    if cls is k.MemoryRecord and kw["state"] in ("deleted", "purged"):
        kw["content"] = ""
        kw["deletion_fence"] = kw["deletion_fence"] or "fence-1"
    if cls is k.RetentionPolicy and kw["mode"] == "until_expired":
        kw["expires_at"] = kw["expires_at"] or "2030-01-01T00:00:00.000Z"
    return kw


@cache
def contract_strategy(cls: type[WireContract]) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in wire_fields(cls):
        base, nullable = _strip_none(hints[f.name])
        strategy = value_strategy(base)
        fields[f.name] = st.none() | strategy if (f.optional or nullable) else strategy
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**repair(cls, kw)))


def ids(c: type) -> str:
    return c.__name__


# --- round trips -----------------------------------------------------------------------------

@pytest.mark.parametrize("contract", CONTRACTS, ids=ids)
@SETTINGS
@given(data=st.data())
def test_round_trip_and_frozen_schema(contract: type[WireContract], data: st.DataObject) -> None:
    """to_wire -> parse -> to_wire is the identity, also through JSON text and the strict
    loader, and every wire value is valid under our committed v1 schema file."""
    value = data.draw(contract_strategy(contract))
    wire = value.to_wire()
    assert parse(contract, wire) == value
    text = json.dumps(wire, ensure_ascii=False, allow_nan=False).encode()
    assert parse(contract, loads(text)).to_wire() == wire
    our_schema(contract.__name__).validate(wire)


PEER_MAPPED = [c for c in CONTRACTS if c.__name__ in PEER_DEF_NAMES]


@pytest.mark.peer
@pytest.mark.parametrize("contract", PEER_MAPPED, ids=ids)
@FEWER
@given(data=st.data())
def test_wire_output_is_valid_under_the_peer_schema(contract: type[WireContract],
                                                    data: st.DataObject) -> None:
    """Everything we emit, the peer's schema accepts (ours is never looser)."""
    wire = data.draw(contract_strategy(contract)).to_wire()
    peer_validator(PEER_DEF_NAMES[contract.__name__]).validate(wire)


@pytest.mark.peer
def test_sample_item_and_record_valid_under_peer_schema() -> None:
    peer_validator("ContextItem").validate(item().to_wire())
    peer_validator("ContextItem").validate(item(
        content=None, binding=k.ItemBinding(tool_call_id="call-1", tool_role="call"),
        content_ref=k.ContentRef(store="blobs", object_id="o-1", digest="sha256:" + "1" * 64,
                                 byte_length=10, summary="s", recoverable=False)).to_wire())
    peer_validator("MemoryRecord").validate(record().to_wire())
    peer_validator("MemoryRecord").validate(dataclasses.replace(
        record(), state="deleted", content="", deletion_fence="fence-1").to_wire())


MUTATIONS = ("drop_required", "add_unknown", "wrong_type")


@pytest.mark.parametrize("contract", CONTRACTS, ids=ids)
@FEWER
@given(data=st.data())
def test_parser_and_schema_reject_the_same_mutations(contract: type[WireContract],
                                                     data: st.DataObject) -> None:
    wire = data.draw(contract_strategy(contract)).to_wire()
    required = [f.wire for f in wire_fields(contract) if not f.optional]
    mutation = data.draw(st.sampled_from(
        [m for m in MUTATIONS if wire or m == "add_unknown"]
        if required else ["add_unknown", "wrong_type"] if wire else ["add_unknown"]
    ))
    bad = dict(wire)
    if mutation == "drop_required":
        del bad[data.draw(st.sampled_from(required))]
    elif mutation == "add_unknown":
        bad["unknownField"] = 1
    else:
        typed = sorted(k for k in bad if k not in any_json_fields(contract))
        assume(typed)  # arbitrary-JSON fields (e.g. ``metadata``) have no wrong type
        key = data.draw(st.sampled_from(typed))
        bad[key] = [] if not isinstance(bad[key], list) else {"not": "a list"}
    with pytest.raises(InputError):
        parse(contract, bad)
    with pytest.raises(jsonschema.ValidationError):
        our_schema(contract.__name__).validate(bad)


@cache
def any_json_fields(contract: type) -> frozenset[str]:
    """Wire names of fields typed as an arbitrary JSON value."""
    hints = typing.get_type_hints(contract, include_extras=True)
    out = set()
    for f in wire_fields(contract):
        text = repr(hints[f.name])
        if "json='value'" in text:
            out.add(f.wire)
    return frozenset(out)


@cache
def our_schema(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / f"{name}.json").read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


@cache
def peer_validator(def_name: str) -> jsonschema.Draft202012Validator:
    peer = load_peer_vectors(PEER_SCHEMA_FILE)
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{def_name}",
                                            "$defs": peer["$defs"]})


# --- wire names ------------------------------------------------------------------------------

@pytest.mark.peer
@pytest.mark.parametrize("contract", PEER_MAPPED, ids=ids)
def test_wire_names_cover_exactly_the_peer_properties(contract: type[WireContract]) -> None:
    peer_def = load_peer_vectors(PEER_SCHEMA_FILE)["$defs"][PEER_DEF_NAMES[contract.__name__]]
    ours = {f.wire for f in wire_fields(contract)}
    assert set(peer_def["properties"]) <= ours, "a peer field is missing"
    if peer_def.get("additionalProperties") is False:
        assert ours == set(peer_def["properties"]), "a closed peer contract gained a field"
    required = {f.wire for f in wire_fields(contract) if not f.optional}
    assert required == set(peer_def.get("required", []))


@SETTINGS
@given(identifier=IDENTIFIERS, digest=DIGESTS)
def test_fast_pattern_strategies_match_their_patterns(identifier: str, digest: str) -> None:
    import re

    assert re.fullmatch(k.IDENTIFIER_PATTERN, identifier) and len(identifier) <= 160
    assert re.fullmatch(k.DIGEST_PATTERN, digest)


def test_wire_name_rule() -> None:
    assert k.wire_name("item_id") == "itemId"
    assert k.wire_name("permission_ceiling_digest") == "permissionCeilingDigest"
    assert k.wire_name("tools_and_skills") == "tools-and-skills"
    assert k.wire_name("id") == "id"


def test_to_wire_omits_absent_optionals_and_keeps_required_nulls() -> None:
    admission = k.ScopeAdmission(scope="global")
    assert admission.to_wire() == {"scope": "global"}
    event = k.MemoryEvent(
        event_id="memory-event-1", type="memory.candidate.created", memory_id="mem-1",
        from_state=None, to_state="candidate", previous_revision=0, revision=1,
        record_digest="sha256:" + "2" * 64, at="2026-01-01T00:00:00.000Z",
        digest="sha256:" + "3" * 64,
    )
    wire = event.to_wire()
    assert wire["fromState"] is None and "authority" not in wire
    assert wire["schema"] == "chainlesschain.memory-event/v1"


# --- invariants, immutability, purity --------------------------------------------------------

def item(**overrides: Any) -> k.ContextItem:
    base: dict[str, Any] = dict(
        item_id="msg-1", kind="message", scope="session", scope_id="s-1",
        source_ref=k.SourceRef(store="session", id="e-1"),
        provenance=k.Provenance(source="user", observed_at="2026-01-01T00:00:00.000Z"),
        trust="user", sensitivity="internal", allowed_sinks=("provider.local",),
        token_estimate=3, priority=10, pinned=False, created_at="2026-01-01T00:00:00.000Z",
        digest="sha256:" + "0" * 64, content="hello",
    )
    base.update(overrides)
    return k.ContextItem(**base)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: item(content=None), None),
        (lambda: item(content_ref=k.ContentRef(
            store="blobs", object_id="o-1", digest="sha256:" + "1" * 64, byte_length=1,
            summary="s", recoverable=True)), None),
        (lambda: item(scope="global"), "scopeId"),
        (lambda: item(scope_id=None), "scopeId"),
        (lambda: k.ScopeAdmission(scope="global", scope_id="g"), "scopeId"),
        (lambda: k.ItemBinding(tool_role="result"), "toolCallId"),
        (lambda: k.RetentionPolicy(mode="until_expired"), "expiresAt"),
    ],
)
def test_invariants_raise_invalid_argument(build: Callable[[], object],
                                           field: str | None) -> None:
    with pytest.raises(InvalidArgument) as info:
        build()
    assert info.value.code == "invalid_argument"
    assert info.value.details.get("field") == field


def record(**overrides: Any) -> k.MemoryRecord:
    base: dict[str, Any] = dict(
        memory_id="mem-1", scope="project", scope_id="project-1", category="fact",
        content="uses pnpm", provenance=k.Provenance(source="user",
                                                     observed_at="2026-01-01T00:00:00.000Z"),
        evidence_refs=(k.SourceRef(store="session", id="e-1"),), confidence=0.9,
        importance=0.5, tags=("build",), sensitivity="internal", allowed_sinks=("cli",),
        state="active", retention_policy=k.RetentionPolicy(mode="durable"),
        created_at="2026-01-01T00:00:00.000Z", updated_at="2026-01-01T00:00:00.000Z",
        access_count=0, revision=2, digest="sha256:" + "4" * 64,
    )
    base.update(overrides)
    return k.MemoryRecord(**base)


def test_tombstone_invariants() -> None:
    active = record()
    with pytest.raises(InvalidArgument, match="content must be empty"):
        dataclasses.replace(active, state="deleted", deletion_fence="fence-1")
    with pytest.raises(InvalidArgument, match="requires deletionFence"):
        dataclasses.replace(active, state="purged", content="")


def test_contracts_are_frozen_slotted_and_hashable_when_scalar() -> None:
    value = item()
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.priority = 5  # type: ignore[misc]
    for contract in CONTRACTS:
        assert "__dict__" not in dir(contract), contract
        assert contract.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert hash(value) == hash(item())


def test_json_values_are_copied_out() -> None:
    entry = k.LifecycleEntry(state="preparing", at="2026-01-01T00:00:00.000Z",
                             details={"a": [1]})
    wire = entry.to_wire()
    wire["details"]["a"].append(2)
    assert entry.details == {"a": [1]}


#: ``functools`` (``lru_cache`` of a class's wire layout) and ``types`` (``MappingProxyType``
#: for immutable tables) replaced the module-level dicts the contracts once kept.
ALLOWED_KERNEL_IMPORTS = {"__future__", "dataclasses", "typing", "collections", "operator",
                          "functools", "types", "kernel"}


@pytest.mark.parametrize(
    "path",
    [*sorted((ROOT / "kernel" / "contracts").glob("*.py")), ROOT / "kernel" / "outcomes.py"],
    ids=lambda p: p.name,
)
def test_contract_modules_import_only_stdlib_typing(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        for name in names:
            assert name.split(".")[0] in ALLOWED_KERNEL_IMPORTS, f"{path.name}: {name}"


# --- the peer's own outputs parse losslessly -------------------------------------------------

def peer_outputs() -> Iterator[tuple[str, type[WireContract], Any]]:
    plan = load_peer_vectors("plan-vectors.json")
    for c in plan["cases"]:
        if "result" in c:
            yield c["id"], k.ContextPlan, c["result"]
    compaction = load_peer_vectors("compaction-vectors.json")
    for c in compaction["cases"]:
        for r in c["results"]:
            if r["ok"]:
                kind = k.CompactionReceipt if "schema" in r["value"] else k.ReconciliationReport
                yield c["id"], kind, r["value"]
        for e in c["sessionAfter"]["events"]:
            yield c["id"], k.CompactionEvent, e
        for e in c["sessionAfter"]["reconciliations"]:
            yield c["id"], k.CompactionReceipt, e
    memory = load_peer_vectors("memory-vectors.json")
    for c in memory["cases"]:
        if c["initial_result"].get("ok"):
            yield c["id"], k.MemoryRecord, c["initial_result"]["record"]
        for r in c["results"]:
            if r.get("ok") and "event" in r:
                yield c["id"], k.MemoryMutationReceipt, {
                    key: r[key] for key in ("record", "event", "receipt")}
            elif r.get("ok"):
                yield c["id"], k.MemoryRecord, r["record"]
    deletion = load_peer_vectors("deletion-vectors.json")
    by_op: dict[str, type[WireContract]] = {
        "proposeMemory": k.MemoryMutationReceipt, "decideMemory": k.MemoryMutationReceipt,
        "deleteMemory": k.DeletionReceipt, "recallMemory": k.MemoryRecallResult,
    }
    for c in deletion["cases"]:
        for s, r in zip(c["steps"], c["results"], strict=True):
            if r.get("ok") and s["op"] in by_op:
                yield c["id"], by_op[s["op"]], r["value"]
            elif r.get("ok") and s["op"] == "reconcile":
                kind = k.DeletionReceipt if "schema" in r["value"] else k.ReconciliationReport
                yield c["id"], kind, r["value"]
        for ev in c["after"]["events"]:
            yield c["id"], k.MemoryEvent, ev
    recall = load_peer_vectors("recall-vectors.json")
    for name, records in recall["record_sets"].items():
        for rec in records:
            yield name, k.MemoryRecord, rec
    for c in recall["cases"]:
        for hit in (c.get("result") or {}).get("results", []):
            yield c["id"], k.RecallHit, hit
    digest = load_peer_vectors("digest-vectors.json")
    for c in digest["cases"]:
        if c.get("normalized"):
            kind = k.ContextItem if c["normalizer"] == "normalizeContextItem" else k.MemoryRecord
            yield c["id"], kind, c["normalized"]


@pytest.mark.peer
def test_every_peer_output_parses_and_round_trips() -> None:
    seen: dict[str, int] = {}
    for case_id, contract, value in peer_outputs():
        parsed = parse(contract, value, f"peer:{case_id}")
        assert parsed.to_wire() == value, (case_id, contract.__name__)
        seen[contract.__name__] = seen.get(contract.__name__, 0) + 1
    assert set(seen) >= {
        "ContextPlan", "CompactionReceipt", "CompactionEvent", "MemoryRecord", "ContextItem",
        "MemoryMutationReceipt", "DeletionReceipt", "ReconciliationReport", "MemoryEvent",
        "MemoryRecallResult", "RecallHit",
    }, seen


# --- outcomes --------------------------------------------------------------------------------

def test_outcome_codes_are_the_design_table() -> None:
    from kernel import outcomes

    assert {
        "context_over_budget", "degraded", "reconciliation_required", "stale",
        "content_unavailable", "digest_mismatch", "scope_denied", "partial", "index_degraded",
    } == outcomes.OUTCOME_CODES
    for t in outcomes.OUTCOME_TYPES:
        assert dataclasses.is_dataclass(t) and not issubclass(t, BaseException)


@pytest.mark.peer
def test_over_budget_outcome_speaks_the_peer_error_shape() -> None:
    from kernel.outcomes import ContextOverBudget

    plan = load_peer_vectors("plan-vectors.json")
    errors = [c["error"] for c in plan["cases"]
              if "error" in c and c["error"]["code"] == "context_over_budget"
              and "protectedItemIds" in c["error"]["details"]]
    assert errors
    for err in errors:
        d = err["details"]
        outcome = ContextOverBudget(
            reason="protected_exceeds_budget", input_budget=d["inputBudget"],
            selectable_budget=d["selectableBudget"], used_tokens=d["usedTokens"],
            required_tokens=d["requiredTokens"], protected_item_ids=tuple(d["protectedItemIds"]),
            used_by_partition=tuple(d["usedByPartition"].items()),
        )
        wire = outcome.to_wire()
        assert (wire["code"], wire["message"]) == (err["code"], err["message"])
        assert {key: wire["details"][key] for key in d} == d


def test_outcomes_to_wire() -> None:
    from kernel.outcomes import Partial, Stale

    pending = k.StoreReceipt(store="search-index", status="pending",
                             error=k.StoreError(code="index_offline"))
    assert Partial(request_id="delete-1", pending=(pending,)).to_wire() == {
        "code": "partial",
        "message": "deletion incomplete: 1 store(s) pending",
        "details": {"requestId": "delete-1", "pending": [
            {"store": "search-index", "status": "pending", "error": {"code": "index_offline"}}
        ]},
    }
    stale = Stale(input_head="head:1", current_head="head:2").to_wire()
    assert stale["code"] == "stale" and stale["details"]["currentHead"] == "head:2"
