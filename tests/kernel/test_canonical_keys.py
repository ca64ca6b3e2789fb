"""``kernel_digest``'s gate is a proof, not a caller's flag.

* :class:`kernel.canonical.items.CanonicalKeys` is made by ``canonical_keys`` only (the
  class cannot be called or subclassed), and only for names whose byte order is the
  peer's order — so every subset of them sorts alike under both profiles;
* ``kernel_digest`` equals the exact ``kernel.canonical.digest.digest`` on generated
  values built from proven names, outputs and errors, for both profiles;
* the fast path is taken where the benchmarks need it: the item, record and plan key
  proofs exist, and the benchmark plan's every key is among the plan proof's names;
* ``proven_keys`` checks a value itself (a deletion receipt holds what stores answered):
  what it proves digests as the exact path, and the deletion benchmark's receipts pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.deletion_bench import deletion
from benchmarks.recall_bench import bench_records
from benchmarks.workloads import plan_request
from kernel.canonical import digest as D
from kernel.canonical import records as R
from kernel.canonical.item_batch import normalize_context_items
from kernel.canonical.items import (
    ITEM_KEYS,
    CanonicalKeys,
    canonical_keys,
    kernel_digest,
    normalize_context_item,
    proven_keys,
)
from kernel.errors import KernelError
from kernel.memory import lifecycle as L
from kernel.memory.deletion import RECEIPT_DOMAIN
from kernel.planning import planner as P


def test_only_the_checker_makes_a_proof() -> None:
    with pytest.raises(TypeError):
        CanonicalKeys(frozenset({"a"}))  # type: ignore[call-arg]
    with pytest.raises(TypeError):

        class Forged(CanonicalKeys):  # the class statement itself raises
            pass

    proof = canonical_keys([{"a", "b"}])
    assert proof is not None and proof.names == frozenset({"a", "b"})
    with pytest.raises(AttributeError):
        proof.names = frozenset({"B", "a"})  # type: ignore[misc]


@pytest.mark.parametrize(
    "names",
    [
        {"a", "B"},  # bytes: B < a; the peer: a < B
        {"1", "10", "9"},  # array-index keys come first, in numeric order
        {"é", "f"},  # not ASCII
        {"a_b", "a-b"},  # bytes: - < _; the peer: _ < -
        {"\x00"},  # an ignorable control: not portable
    ],
)
def test_no_proof_where_byte_order_is_not_the_peer_order(names: set[str]) -> None:
    assert canonical_keys([names]) is None


def test_a_mixture_of_sets_is_proved_as_their_union() -> None:
    assert canonical_keys([{"fooBar"}, {"fooa"}]) is None  # bytes: B < a; the peer: a < B
    assert canonical_keys([{"fooBar", "fooCar"}]) is not None


def test_the_benchmarks_proofs_exist() -> None:
    """A missing proof silently sends every digest to the exact path: a dead fast path."""
    assert ITEM_KEYS is not None
    assert R._MEMORY_KEYS is not None
    assert P._PLAN_KEYS is not None
    assert ITEM_KEYS.names <= P._PLAN_KEYS.names


def _keys(value: Any) -> set[str]:
    if type(value) is dict:
        return set(value).union(*map(_keys, value.values()))
    if type(value) is list:
        return set().union(*map(_keys, value))
    return set()


def test_the_benchmark_plan_is_digested_on_the_fast_path() -> None:
    """Every key of the benchmark's plan is a proven name, no value is refused by the
    encoder, and the digest equals the exact path's."""
    assert P._PLAN_KEYS is not None
    plan = P.plan_context(plan_request(2_000))
    body = {k: v for k, v in plan.items() if k != "digest"}
    assert _keys(body) <= P._PLAN_KEYS.names
    assert D._ENCODER(body, True)  # not refused
    for profile in D.PROFILES:
        assert kernel_digest(body, P.CONTEXT_PLAN_DOMAIN, profile, P._PLAN_KEYS) == D.digest(
            body, P.CONTEXT_PLAN_DOMAIN, profile
        )
    assert plan["digest"] == D.digest(body, P.CONTEXT_PLAN_DOMAIN, "peer")


def test_the_benchmark_records_take_the_record_fast_path() -> None:
    """The recall/deletion benchmarks' records pass ``_record_digest``'s score check."""
    assert R._MEMORY_KEYS is not None
    for raw in bench_records(200):
        record = R.normalize_memory_record(raw)
        assert _keys(record) <= R._MEMORY_KEYS.names
        assert R._plain_number(record["confidence"]) and R._plain_number(record["importance"])


_NAMES = sorted(
    (ITEM_KEYS.names if ITEM_KEYS is not None else frozenset())
    | (P._PLAN_KEYS.names if P._PLAN_KEYS is not None else frozenset())
)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53 - 1), 2**53 - 1)  # safe integers: what every check allows
    | st.text(max_size=8)  # lone surrogates included: the encoder refuses, the exact path decides
    | st.floats(min_value=1e-4, max_value=1e6).filter(lambda x: not x.is_integer())
)
_VALUES = st.recursive(
    _SCALARS,
    lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(st.sampled_from(_NAMES), kids, max_size=6),
    max_leaves=20,
)


def _outcome(fn: Callable[[], str]) -> Any:
    try:
        return ("ok", fn())
    except KernelError as exc:
        return ("error", exc.code, exc.details)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(_NAMES), _VALUES, max_size=8), st.sampled_from(D.PROFILES))
def test_kernel_digest_equals_the_exact_digest(value: dict[str, Any], profile: Any) -> None:
    proof = canonical_keys([_NAMES])
    assert proof is not None
    exact = _outcome(lambda: D.digest(value, "test.domain/v1", profile))
    assert _outcome(lambda: kernel_digest(value, "test.domain/v1", profile, proof)) == exact
    assert _outcome(lambda: kernel_digest(value, "test.domain/v1", profile, None)) == exact


@settings(max_examples=200, deadline=None)
@given(st.sets(st.sampled_from(_NAMES)))
def test_every_subset_of_proven_names_sorts_as_the_peer_orders(names: set[str]) -> None:
    assert tuple(sorted(names)) == D.peer_key_order(sorted(names))


# --------------------------------------------------------------------------- proven_keys
_ANY_KEYS = st.text(max_size=6) | st.sampled_from(_NAMES)
_ANY_SCALARS = (
    _SCALARS
    | st.integers(-(2**60), 2**60)  # beyond the safe range too
    | st.floats(allow_nan=False, allow_infinity=False)  # integral, tiny and huge floats
)
_ANY_VALUES = st.recursive(
    _ANY_SCALARS,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(_ANY_KEYS, kids, max_size=5),
    max_leaves=24,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_ANY_KEYS, _ANY_VALUES, max_size=8))
def test_a_value_proven_by_itself_digests_as_the_exact_path(value: dict[str, Any]) -> None:
    """``proven_keys`` checks the value it gates (keys, scalars, nesting): whatever it
    proves, the fast digest equals the exact one; whatever it refuses goes the exact way."""
    exact = _outcome(lambda: D.digest(value, "test.domain/v1", "peer"))
    proof = proven_keys(value)
    assert _outcome(lambda: kernel_digest(value, "test.domain/v1", "peer", proof)) == exact


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1.0},  # a float: the encoder prints 1.0, the peer 1
        {"a": 2**53 + 1},  # beyond the safe integers
        {"stores": [{"error": {"code": "x", "Detail": 1}}]},  # a nested key out of order
        {"a": (1, 2)},  # a tuple is not a JSON array here
        {"é": 1},  # not ASCII
    ],
)
def test_proven_keys_refuses_what_the_fast_path_cannot_print(value: dict[str, Any]) -> None:
    assert proven_keys(value) is None


def test_the_deletion_benchmark_receipts_take_the_fast_path() -> None:
    """Every receipt of the deletion workload passes the gate, so a regression that
    switched the fast path off fails here; the lifecycle's event and receipt proofs exist."""
    run, _extra = deletion(100)
    run.setup()  # type: ignore[attr-defined]
    receipts = run()
    assert isinstance(receipts, list) and len(receipts) == 100
    for receipt in receipts:
        body = {k: v for k, v in receipt.items() if k != "digest"}
        assert proven_keys(body) is not None
        assert kernel_digest(body, RECEIPT_DOMAIN, "peer", proven_keys(body)) == receipt["digest"]
    assert L._EVENT_KEYS is not None and L._RECEIPT_KEYS is not None


@pytest.mark.parametrize("domain", ["lone \ud800 surrogate", 5, None])
def test_a_bad_domain_is_refused_as_the_exact_path_refuses_it(domain: Any) -> None:
    value = {"kind": "message"}
    exact = _outcome(lambda: D.digest(value, domain, "peer"))
    assert exact[0] == "error"
    assert _outcome(lambda: kernel_digest(value, domain, "peer", ITEM_KEYS)) == exact


def test_the_batch_path_refuses_an_unknown_profile_as_the_exact_path() -> None:
    raw = plan_request(1)["items"][0]
    with pytest.raises(KernelError) as exact:
        normalize_context_item(raw, profile="bogus")  # type: ignore[arg-type]
    with pytest.raises(KernelError) as batch:
        normalize_context_items([raw], profile="bogus")  # type: ignore[arg-type]
    assert (batch.value.code, batch.value.details) == (exact.value.code, exact.value.details)
