"""The in-memory session port hands out private copies: plain deep copies (a naive double).

A snapshot equals ``json_copy`` of the items it was given — same structure, same types, a
tuple still a tuple, a NaN still a NaN — and never shares state with the port.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.adapters.in_memory.session import InMemorySessionPort
from kernel.ports import json_copy

_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3)
    | st.tuples(inner)
    | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)


def same_types(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_types(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same_types(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def mutable_ids(value: Any) -> set[int]:
    """The ids of every dict and list inside ``value`` (two values share state when these
    meet)."""
    if isinstance(value, dict):
        return {id(value)}.union(*(mutable_ids(v) for v in value.values()))
    if isinstance(value, list | tuple):
        inner = set().union(*(mutable_ids(v) for v in value))
        return inner | {id(value)} if isinstance(value, list) else inner
    return set()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["itemId", "v", "w"]), _VALUES), max_size=4))
def test_a_snapshot_is_a_deep_copy_of_the_items_and_shares_nothing(
    items: list[dict[str, Any]],
) -> None:
    port = InMemorySessionPort()
    port.seed("s", items=items)
    snapshot = port.read_snapshot("s")
    assert snapshot is not None
    assert same_types(list(snapshot.items), json_copy(items))
    again = port.read_snapshot("s")
    assert again is not None
    assert not mutable_ids(list(snapshot.items)) & mutable_ids(list(again.items))
    assert not mutable_ids(list(snapshot.items)) & mutable_ids(items)
    assert same_types(port.evidence("s"), json_copy(items))


def test_values_json_cannot_carry_are_kept_as_given() -> None:
    for item in (
        {"itemId": "a", "pair": (1, 2)},
        {"itemId": "a", "score": math.nan},
        {"itemId": "a", "big": 2**80},
        {"itemId": "a", 1: "non-string key"},
    ):
        port = InMemorySessionPort()
        port.seed("s", items=[item])
        snapshot = port.read_snapshot("s")
        assert snapshot is not None
        assert same_types(list(snapshot.items), json_copy([item]))


def test_snapshots_are_private_and_follow_every_change() -> None:
    port = InMemorySessionPort()
    port.seed("s", items=[{"itemId": "a", "tags": ["x"]}, {"itemId": "t", "pair": (1, 2)}])
    first = port.read_snapshot("s")
    assert first is not None
    assert first.items[1]["pair"] == (1, 2)  # a tuple stays a tuple (deep-copied, not JSON)
    first.items[0]["tags"].append("mutated")
    second = port.read_snapshot("s")
    assert second is not None and second.items[0]["tags"] == ["x"]

    json_only = InMemorySessionPort()
    json_only.seed("s", items=[{"itemId": "a", "tags": ["x"]}])
    one = json_only.read_snapshot("s")
    assert one is not None
    one.items[0]["tags"].append("mutated")
    result = json_only.append_items("s", [{"itemId": "b", "tags": []}])
    assert result.ok
    two = json_only.read_snapshot("s")
    assert two is not None
    assert [i["itemId"] for i in two.items] == ["a", "b"] and two.items[0]["tags"] == ["x"]
    two.items[1]["tags"].append("mutated")
    three = json_only.read_snapshot("s")
    assert three is not None and three.items[1]["tags"] == []
    assert json_only.evidence("s") == [{"itemId": "a", "tags": ["x"]}, {"itemId": "b", "tags": []}]
