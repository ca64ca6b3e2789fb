"""Planner invariants (design 108 §7, §14) as hypothesis properties.

* determinism: the same request gives a byte-identical plan and digest, whatever the
  order of its items;
* protected items are never dropped for budget (the plan fails instead);
* tool call/result groups are selected or dropped whole;
* nothing untrusted lands in the trusted-system partition;
* selected tokens stay within the selectable budget and add up;
* the fast paths (batch normalisation, kernel-built digests) equal the exact ones.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.canonical import digest as kdigest
from kernel.canonical.item_batch import normalize_context_items
from kernel.canonical.items import (
    CONTEXT_ITEM_DOMAIN,
    ITEM_KEYS,
    kernel_digest,
    normalize_context_item,
)
from kernel.errors import ContextOverBudget, KernelError
from kernel.planning.partitions import KIND_PARTITION
from kernel.planning.planner import CONTEXT_PLAN_DOMAIN, is_protected, plan_context
from tests.kernel.plan_requests import draw_plan_request

KINDS = list(KIND_PARTITION)
TRUSTS = ["host", "verified", "user", "external", "untrusted"]
SINKS = ["provider.local", "Provider.Local", "cli", "ide.vscode", "*", "sink_9", "mcp:server-1"]
SCOPES = [("session", "s-1"), ("session", "s-2"), ("user", "u-1"), ("global", None)]
NOW = "2026-08-29T00:00:00.000Z"
STAMPS = [
    "2026-08-28T00:00:00.000Z",
    "2026-08-29T00:00:00.000Z",
    "2026-08-29T08:00:00.000+08:00",
    "2026-08-30T12:00:00Z",
    "2026-08-29T00:00:00.000417Z",
    "Sat, 29 Aug 2026 00:00:00 GMT",
]

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def raw_item(
    draw: st.DrawFn, item_id: str, binding: dict[str, Any] | None = None
) -> dict[str, Any]:
    scope, scope_id = draw(st.sampled_from(SCOPES))
    item: dict[str, Any] = {
        "schemaVersion": 1,
        "itemId": item_id,
        "kind": draw(st.sampled_from(KINDS)),
        "scope": scope,
        "sourceRef": {"store": "session-log", "id": f"src-{item_id}"},
        "provenance": {"source": "fixture", "observedAt": draw(st.sampled_from(STAMPS))},
        "trust": draw(st.sampled_from(TRUSTS)),
        "sensitivity": "internal",
        "allowedSinks": draw(st.lists(st.sampled_from(SINKS), min_size=1, max_size=3, unique=True)),
        "tokenEstimate": draw(st.integers(1, 400)),
        "priority": draw(st.sampled_from([0, 1, 50, 50, 100, 1000])),
        "pinned": draw(st.booleans()) and draw(st.booleans()),
        "createdAt": draw(st.sampled_from(STAMPS)),
        "content": draw(st.text(max_size=12)),
    }
    if scope_id is not None:
        item["scopeId"] = scope_id
    if draw(st.booleans()):
        item["sourceRef"]["eventSequence"] = draw(st.integers(0, 50))
    if draw(st.integers(0, 5)) == 0:
        item["expiresAt"] = draw(st.sampled_from(STAMPS))
    extra = draw(
        st.sampled_from(
            [
                None,
                None,
                None,
                {"taskState": "running"},
                {"requiredForRecovery": True},
                {"budgetRevision": 0},
                {"taskState": "terminal"},
            ]
        )
    )
    if binding is not None or extra is not None:
        item["binding"] = {**(extra or {}), **(binding or {})}
    if draw(st.booleans()):  # shuffle key order, as the peer's vectors do
        keys = list(item)
        random.Random(draw(st.integers(0, 9))).shuffle(keys)
        item = {k: item[k] for k in keys}
    return item


@st.composite
def plan_request(draw: st.DrawFn) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for n in range(draw(st.integers(0, 24))):
        items.append(draw(raw_item(f"item-{n:02d}")))
    for g in range(draw(st.integers(0, 4))):
        call_id = f"call-{g}"
        if draw(st.booleans()):  # a settled call/result pair
            outcome = draw(st.sampled_from(["succeeded", "failed"]))
            pair = [
                draw(
                    raw_item(
                        f"tool-{g}-{role}",
                        {"toolCallId": call_id, "toolRole": role, "toolOutcome": outcome},
                    )
                )
                for role in ("call", "result")
            ]
            if draw(st.integers(0, 4)):  # usually governed alike (else: an orphan error)
                for key in ("scope", "scopeId", "allowedSinks", "expiresAt", "kind", "trust"):
                    pair[1].pop(key, None)
                    if key in pair[0]:
                        pair[1][key] = pair[0][key]
            items.extend(pair)
        else:  # an unsettled call (protected)
            items.append(
                draw(
                    raw_item(
                        f"tool-{g}-call",
                        {
                            "toolCallId": call_id,
                            "toolRole": "call",
                            "toolOutcome": draw(st.sampled_from(["pending", "unknown"])),
                        },
                    )
                )
            )
    window = draw(st.integers(64, 6000))
    request = draw_plan_request(draw, items, window)
    cap = max(0, window - request["reservedOutputTokens"] - request["safetyMarginTokens"])
    if draw(st.booleans()):
        request["partitionCeilings"] = {
            "conversation": draw(st.integers(0, min(cap, 500))),
            "tool-evidence": draw(st.integers(0, min(cap, 500))),
        }
    if draw(st.booleans()):
        request["partitionMinimums"] = {"working-state": draw(st.integers(0, min(cap, 200)))}
    return request


def _plan_or_error(request: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "plan", plan_context(request)
    except KernelError as exc:
        return "error", exc.to_wire()


@SETTINGS
@given(plan_request(), st.randoms(use_true_random=False))
def test_deterministic_and_order_independent(request: dict[str, Any], rnd: random.Random) -> None:
    first = _plan_or_error(request)
    again = _plan_or_error(copy.deepcopy(request))
    assert first == again
    if first[0] == "plan":
        shuffled = dict(request, items=rnd.sample(request["items"], len(request["items"])))
        plan = plan_context(shuffled)
        assert plan == first[1]
        assert kdigest.canonical_json(plan, "peer") == kdigest.canonical_json(first[1], "peer")
        body = {k: v for k, v in plan.items() if k != "digest"}
        assert plan["digest"] == kdigest.digest(body, CONTEXT_PLAN_DOMAIN, "peer")


@SETTINGS
@given(plan_request())
def test_budget_invariants(request: dict[str, Any]) -> None:
    try:
        plan = plan_context(request)
    except ContextOverBudget as exc:
        # Either no budget at all, or a protected group did not fit: it is named.
        assert (
            "protectedItemIds" in exc.details
            or "inputBudget" in exc.details
            or ("modelWindowTokens" in exc.details)
        )
        return
    except KernelError:
        return  # invalid requests (e.g. an orphaned tool result) are not this property's
    items = {i["itemId"]: i for i in plan["selected"]}
    # Protected items are never dropped for budget.
    for entry in plan["dropped"]:
        if entry["reason"] in ("input_budget", "partition_ceiling"):
            assert entry["protected"] is False
    normalized = {i["itemId"]: normalize_context_item(i) for i in request["items"]}
    for entry in plan["dropped"]:
        if entry["reason"] in ("input_budget", "partition_ceiling"):
            assert not is_protected(normalized[entry["itemId"]])
    # Tool groups are all-or-nothing (governance may remove a whole unsettled group).
    groups: dict[str, set[str]] = {}
    for item in normalized.values():
        call_id = (item.get("binding") or {}).get("toolCallId")
        if call_id:
            groups.setdefault(call_id, set()).add(item["itemId"])
    for members in groups.values():
        chosen = members & items.keys()
        assert chosen in (set(), members)
    # Nothing untrusted in the trusted-system partition.
    for item in plan["selected"]:
        if KIND_PARTITION[item["kind"]] == "trusted-system":
            assert item["trust"] in ("host", "verified")
    # Budgets add up.
    assert plan["selectedTokens"] == sum(i["tokenEstimate"] for i in plan["selected"])
    assert plan["selectedTokens"] <= plan["selectableBudget"]
    used = {p: 0 for p in plan["partitions"]}
    for item in plan["selected"]:
        used[KIND_PARTITION[item["kind"]]] += item["tokenEstimate"]
    for part, usage in plan["partitions"].items():
        if part != "recovery-reserve":
            assert usage["used"] == used[part]
    assert set(plan["selectedItemIds"]) | {d["itemId"] for d in plan["dropped"]} == set(normalized)


@SETTINGS
@given(st.lists(raw_item("x"), min_size=1, max_size=6), st.sampled_from(["peer", "jcs"]))
def test_fast_digests_equal_kernel_digest(raws: list[dict[str, Any]], profile: str) -> None:
    for raw in raws:
        item = normalize_context_item(raw, profile=profile)  # type: ignore[arg-type]
        body = {k: v for k, v in item.items() if k != "digest"}
        assert item["digest"] == kdigest.digest(body, CONTEXT_ITEM_DOMAIN, profile)  # type: ignore[arg-type]
        assert ITEM_KEYS is not None
        assert kernel_digest(body, CONTEXT_ITEM_DOMAIN, profile, ITEM_KEYS) == item["digest"]  # type: ignore[arg-type]


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except KernelError as exc:
        return exc.to_wire()


_MUTATIONS = [
    ("tokenEstimate", 5.0),
    ("tokenEstimate", 0),
    ("tokenEstimate", True),
    ("priority", -1),
    ("schemaVersion", 1.0),
    ("schemaVersion", True),
    ("pinned", 1),
    ("kind", ["message"]),
    ("itemId", "bad id"),
    ("itemId", "ok.id-2"),
    ("scope", "global"),
    ("scopeId", None),
    ("allowedSinks", []),
    ("allowedSinks", ["a", "a"]),
    ("allowedSinks", ["b", "A", "a"]),
    ("createdAt", "2026-08-29"),
    ("createdAt", "2026-02-30T00:00:00Z"),
    ("content", "\ud800"),
    ("digest", "sha256:" + "0" * 64),
    ("digest", None),
    ("provenance", {"source": "s", "observedAt": NOW, "actor": "a"}),
    ("provenance", {"source": "s", "observedAt": NOW, "actor": 5}),
    ("sourceRef", {"store": "s", "id": "i", "eventSequence": -1}),
    ("sourceRef", {"store": "s", "id": "i", "uri": "x"}),
    ("sourceRef", {"store": "s", "id": "i", "bogus": 1}),
    ("scope", "agent"),
    ("digest", "SHA256:x"),
    ("extra", 1),
    ("sourceRef", {"store": "s", "id": "i", "eventSequence": 2.0}),
    ("provenance", {"source": "s", "observedAt": NOW, "degraded": True}),
]


@SETTINGS
@given(
    st.lists(raw_item("y"), min_size=1, max_size=5),
    st.lists(st.tuples(st.integers(0, 4), st.sampled_from(_MUTATIONS)), max_size=3),
)
def test_batch_normalizer_equals_exact(
    raws: list[dict[str, Any]], mutations: list[tuple[int, tuple[str, Any]]]
) -> None:
    raws = [dict(r, itemId=f"y-{i}") for i, r in enumerate(raws)]
    for index, (key, value) in mutations:
        if index < len(raws):
            raws[index][key] = value
    exact = _outcome(lambda: [normalize_context_item(r) for r in raws])
    assert _outcome(normalize_context_items, raws) == exact


def test_peer_benchmark_shape_selects_something() -> None:
    items = [
        {
            "schemaVersion": 1,
            "itemId": f"plan-1000-{i}",
            "kind": "message",
            "scope": "session",
            "scopeId": "benchmark-session",
            "sourceRef": {"store": "benchmark", "id": f"source-{i}"},
            "provenance": {"source": "benchmark", "actor": "benchmark-user", "observedAt": NOW},
            "trust": "user",
            "sensitivity": "internal",
            "allowedSinks": ["provider.local"],
            "tokenEstimate": 8 + i % 32,
            "priority": i % 101,
            "pinned": False,
            "createdAt": NOW,
            "content": f"benchmark context {i}",
        }
        for i in range(1000)
    ]
    request = {
        "modelWindowTokens": 4096,
        "reservedOutputTokens": 512,
        "safetyMarginTokens": 256,
        "recoveryReserveTokens": 256,
        "items": items,
        "sink": "provider.local",
        "scopeAdmissions": [{"scope": "session", "scopeId": "benchmark-session"}],
        "policyVersion": "benchmark-v1",
        "modelProfile": "benchmark-model",
        "sessionHead": "head:benchmark-session",
        "memoryRevision": 0,
        "now": NOW,
    }
    plan = plan_context(request)
    assert plan["selectedItemIds"]
    assert plan["selectedTokens"] <= plan["selectableBudget"] == 3072
    assert plan == plan_context(copy.deepcopy(request))


@pytest.mark.parametrize("profile", ["peer", "jcs"])
def test_plan_digest_profile_is_a_parameter(profile: str) -> None:
    request = {
        "modelWindowTokens": 100,
        "reservedOutputTokens": 10,
        "items": [],
        "sink": "cli",
        "scopeAdmissions": [{"scope": "global"}],
        "policyVersion": "p",
        "modelProfile": "m",
        "sessionHead": "h",
        "memoryRevision": 0,
        "now": NOW,
    }
    plan = plan_context(request, profile=profile)  # type: ignore[arg-type]
    body = {k: v for k, v in plan.items() if k != "digest"}
    assert plan["digest"] == kdigest.digest(body, CONTEXT_PLAN_DOMAIN, profile)  # type: ignore[arg-type]


def test_typed_api_round_trips_the_wire_plan() -> None:
    """``kernel.planning.types.plan`` on a typed request == ``plan_context`` on its wire form."""
    from kernel.contracts import ContextPlanRequest, ScopeAdmission
    from kernel.planning.types import context_item_from_wire, plan, plan_from_wire

    raws = [
        {
            "schemaVersion": 1,
            "itemId": f"t-{i}",
            "kind": kind,
            "scope": "session",
            "scopeId": "s-1",
            "sourceRef": {"store": "log", "id": f"e-{i}", "eventSequence": i},
            "provenance": {"source": "fixture", "observedAt": NOW},
            "trust": trust,
            "sensitivity": "internal",
            "allowedSinks": ["cli", "Provider.Local", "provider.local"],
            "tokenEstimate": 10 + i,
            "priority": i % 3,
            "pinned": i == 4,
            "createdAt": NOW,
            "content": f"c{i}",
            **(
                {"binding": {"toolCallId": "k", "toolRole": "call", "toolOutcome": "pending"}}
                if kind == "tool-evidence"
                else {}
            ),
        }
        for i, (kind, trust) in enumerate(
            [
                ("message", "user"),
                ("system-policy", "host"),
                ("system-policy", "external"),
                ("tool-evidence", "host"),
                ("task-state", "user"),
                ("memory", "user"),
            ]
        )
    ]
    items = tuple(context_item_from_wire(normalize_context_item(r)) for r in raws)
    typed = ContextPlanRequest(
        model_window_tokens=200,
        reserved_output_tokens=20,
        safety_margin_tokens=10,
        recovery_reserve_tokens=10,
        items=items,
        sink="cli",
        scope_admissions=(ScopeAdmission(scope="session", scope_id="s-1"),),
        policy_version="p",
        model_profile="m",
        session_head="h",
        memory_revision=1,
        now=NOW,
    )
    wire = plan_context(typed.to_wire())
    result = plan(typed)
    assert result.to_wire() == wire
    assert plan_from_wire(wire) == result
    assert [d["reason"] for d in wire["dropped"]] == ["untrusted_system_policy"]
