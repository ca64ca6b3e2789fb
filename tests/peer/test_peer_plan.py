"""``plan_context`` against the peer's ``planContext``, case by case (plan-vectors.json).

For every case the whole result must equal the peer's plan — selected items and their
order, ``dropped`` (ids, reasons, protected flags, order), partitions, budgets,
``minimumShortfalls``, ``createdAt`` and the plan digest — or, when the peer failed,
our error must carry the peer's code (and, since they match today, its message and
details).  Cases selected by a rule of ``tests/vectors/peer/KNOWN_DIFFERENCES.md``
assert that rule's documented outcome instead.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kernel.errors import KernelError, NonPortableValue
from kernel.planning.planner import plan_context
from tests.conftest import peer_cases, require_case
from tests.peer.kd1 import non_portable_set
from tests.peer.test_peer_normalize import exact_timestamp_form

PLANS = "plan-vectors.json"
pytestmark = pytest.mark.peer

_PLAN_FIELDS = (
    "schema",
    "schemaVersion",
    "sessionHead",
    "memoryRevision",
    "policyVersion",
    "modelProfile",
    "sink",
    "inputBudget",
    "selectableBudget",
    "selectedTokens",
    "partitions",
    "minimumShortfalls",
    "selectedItemIds",
    "dropped",
    "selected",
    "createdAt",
    "digest",
)


# --- KNOWN_DIFFERENCES predicates ---------------------------------------------------------


def _items(case: dict[str, Any]) -> list[dict[str, Any]]:
    request = case["request"]
    if not isinstance(request, dict) or not isinstance(request.get("items"), list):
        return []
    return [i for i in request["items"] if isinstance(i, dict)]


def kd1_non_portable_collation(case: dict[str, Any]) -> bool:
    """KD-1: an item's allowedSinks (2+ strings) holds text outside the reproduced
    collation alphabet (:mod:`tests.peer.kd1`)."""
    return any(non_portable_set(item.get("allowedSinks")) for item in _items(case))


def kd2_legacy_timestamp(case: dict[str, Any]) -> bool:
    """KD-2: ``now`` or an item timestamp in a V8-legacy form outside the exact set."""
    request = case["request"]
    stamps: list[Any] = []
    if isinstance(request, dict):
        stamps.append(request.get("now"))
    for item in _items(case):
        stamps += [item.get("createdAt"), item.get("expiresAt")]
        provenance = item.get("provenance")
        if isinstance(provenance, dict):
            stamps.append(provenance.get("observedAt"))
    return any(isinstance(t, str) and not exact_timestamp_form(t) for t in stamps)


def kd3_js_coerced_now(case: dict[str, Any]) -> bool:
    """KD-3: ``now`` present but neither a string nor a number (JavaScript would coerce)."""
    request = case["request"]
    if not isinstance(request, dict) or "now" not in request:
        return False
    now = request["now"]
    return isinstance(now, bool) or not isinstance(now, str | int | float)


def kd4_absent_now(case: dict[str, Any]) -> bool:
    """KD-4: the request has no ``now`` (the peer reads its clock; the kernel reads none)."""
    request = case["request"]
    return isinstance(request, dict) and "now" not in request and "error" not in case


def known_difference(case: dict[str, Any]) -> str | None:
    for rule, applies in (
        ("KD-1", kd1_non_portable_collation),
        ("KD-2", kd2_legacy_timestamp),
        ("KD-3", kd3_js_coerced_now),
        ("KD-4", kd4_absent_now),
    ):
        if applies(case):
            return rule
    return None


# --- the cases --------------------------------------------------------------------------


@pytest.mark.parametrize("case", peer_cases(PLANS))
def test_plan_matches_peer(case: Any) -> None:
    case = require_case(case, PLANS)
    rule = known_difference(case)
    if rule in ("KD-1", "KD-2", "KD-3"):
        with pytest.raises(NonPortableValue):
            plan_context(case["request"])
        return
    if rule == "KD-4":
        with pytest.raises(KernelError) as raised:
            plan_context(case["request"])
        assert raised.value.code == "invalid_argument"
        assert raised.value.details == {"field": "now"}
        return
    if "error" in case:
        with pytest.raises(KernelError) as raised:
            plan_context(case["request"])
        expected = case["error"]
        assert raised.value.code == expected["code"], raised.value.to_wire()
        if expected["code"] == "context_over_budget":
            assert raised.value.details.get("protectedItemIds") == expected["details"].get(
                "protectedItemIds"
            )
        assert raised.value.to_wire() == expected
        return
    plan = plan_context(case["request"])
    expected = case["result"]
    # Field by field first, for a readable failure; then the whole plan.
    for field in _PLAN_FIELDS:
        assert plan.get(field) == expected.get(field), field
    assert plan == expected


def test_item_order_does_not_change_the_plan() -> None:
    """Shuffled items give the byte-identical plan (the peer's order is total)."""
    cases = [
        p.values[0]
        for p in peer_cases(PLANS)
        if p.values[0] is not None
        and "result" in p.values[0]
        and known_difference(p.values[0]) is None
    ]
    assert cases
    rng = random.Random(20260829)
    for case in rng.sample(cases, min(40, len(cases))):
        request = dict(case["request"])
        items = list(request["items"])
        rng.shuffle(items)
        request["items"] = items
        assert plan_context(request) == case["result"], case["id"]


def test_counts_are_reported(capsys: pytest.CaptureFixture[str]) -> None:
    cases = [p.values[0] for p in peer_cases(PLANS) if p.values[0] is not None]
    tally: dict[str, int] = {}
    for c in cases:
        key = known_difference(c) or ("error" if "error" in c else "plan")
        tally[key] = tally.get(key, 0) + 1
    with capsys.disabled():
        print(f"\n[peer plans] {len(cases)} cases: {tally}")
    assert tally.get("plan", 0) + tally.get("error", 0) >= 1
