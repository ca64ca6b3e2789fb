"""Peer profile against the JavaScript peer's digest vectors (digest-vectors.json).

Contract checked here, case by case:

* ``value_encoding == "json"``, no normalizer, accepted by the peer: our ``peer``
  profile returns exactly the peer's ``canonical_json`` and ``digest``, or raises
  ``NonPortableValue`` — and it may refuse only when some object key lies outside the
  portable key alphabet (``kernel.canonical.digest.peer_portable_key``). Values whose keys are
  all portable must agree exactly.
* Rejected by the peer: we raise ``InvalidArgument`` (or a subclass).
* Normalizer cases (context-item*, memory-record*): only the digest work is checked
  here — ``value`` (the normalized object without ``digest``) canonicalizes and
  digests under ``domain`` exactly as the peer did.
* Tagged JavaScript-only values: those with a faithful Python counterpart (``-0``,
  ``NaN``, ``±Infinity``, null-prototype objects, functions, Dates, Sets, RegExps,
  class instances, a ``toJSON`` method) agree or are refused as the peer refused
  them; the rest (``undefined``, holes, BigInt, Symbol, Map, boxed primitives, arrays
  with extra properties, symbol keys, non-enumerable properties, getters) cannot be
  written as Python values and are listed explicitly so a new tag fails the test.
* Every object in every case's ``canonical_json`` lists its portable keys in the
  order our collation model predicts (array-index keys first, numerically).
"""

from __future__ import annotations

import datetime
import json
import math
import re
from typing import Any

import pytest

from kernel.canonical import digest as D
from kernel.errors import InvalidArgument, NonPortableValue
from tests.conftest import peer_cases, require_case
from tests.peer.kd1 import portable_key

NAME = "digest-vectors.json"
pytestmark = pytest.mark.peer

INEXPRESSIBLE_TAGS = {
    "undefined", "hole", "bigint", "symbol", "Map", "String-object", "Number-object",
    "array-with-extra-property", "object-with-symbol-key", "object-with-non-enumerable",
    "object-with-getter",
}


def _kind(case: dict[str, Any]) -> str:
    if case["value_encoding"] == "tagged":
        return "tagged"
    return "normalizer" if "normalizer" in case else "plain"


def _select(kind: str) -> list[Any]:
    """Params of one kind; a missing file keeps its sentinel so the test fails."""
    return [
        param
        for param in peer_cases(NAME)
        if param.values[0] is None or kind in ("all", _kind(param.values[0]))
    ]


def _keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [*value, *(k for v in value.values() for k in _keys(v))]
    if isinstance(value, list):
        return [k for v in value for k in _keys(v)]
    return []


def _non_portable_keys(value: Any) -> list[str]:
    return [k for k in _keys(value) if not D._is_array_index(k) and not portable_key(k)]


def _check_accepted(value: Any, case: dict[str, Any]) -> str:
    """Agree exactly or refuse only for a non-portable key; returns the outcome."""
    try:
        canonical = D.canonical_json(value, "peer")
        digest = D.digest(value, case["domain"], "peer")
    except NonPortableValue as exc:
        assert _non_portable_keys(value), f"refused a value with only portable keys: {exc}"
        assert exc.details["key"] in {D._preview(k) for k in _non_portable_keys(value)}
        return "refused"
    assert canonical == case["canonical_json"]
    assert digest == case["digest"]
    return "agree"


@pytest.mark.parametrize("case", _select("plain"))
def test_plain_json_case(case: dict[str, Any] | None) -> None:
    case = require_case(case, NAME)
    if case["rejected"]:
        with pytest.raises(InvalidArgument):
            D.digest(case["value"], case["domain"], "peer")
        return
    outcome = _check_accepted(case["value"], case)
    if outcome == "refused":
        assert _non_portable_keys(case["value"])
    else:
        # Canonicalization is idempotent on the peer's own output.
        reparsed = json.loads(case["canonical_json"])
        assert D.digest(reparsed, case["domain"], "peer") == case["digest"]


@pytest.mark.parametrize("case", _select("normalizer"))
def test_normalizer_case_digest(case: dict[str, Any] | None) -> None:
    case = require_case(case, NAME)
    if case["rejected"]:
        return  # the normalizer refused the input; normalization is tested elsewhere
    assert case["normalized"]["digest"] == case["digest"]
    assert _check_accepted(case["value"], case) == "agree"
    assert D.digest_record(case["normalized"], case["domain"], "peer") == case["digest"]


class _Inexpressible(Exception):
    pass


class _ClassInstance:
    def __init__(self, entries: dict[str, Any]) -> None:
        self.__dict__.update(entries)


def _from_tagged(value: Any) -> Any:
    if isinstance(value, list):
        return [_from_tagged(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$js" not in value:
        return {k: _from_tagged(v) for k, v in value.items()}
    tag = value["$js"]
    simple = {"-0": -0.0, "NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
    if tag in simple:
        return simple[tag]
    if tag == "null-prototype":
        return _from_tagged(value["entries"])
    if tag == "class-instance":
        return _ClassInstance(value["entries"])
    if tag == "function":
        return lambda: None
    if tag == "object-with-toJSON-method":
        return {"toJSON": lambda: None}
    if tag == "Date":
        return datetime.datetime.fromisoformat(value["iso"].replace("Z", "+00:00"))
    if tag == "Set":
        return set()
    if tag == "RegExp":
        return re.compile("")
    assert tag in INEXPRESSIBLE_TAGS, f"unknown tag {tag!r}: decide how Python expresses it"
    raise _Inexpressible(tag)


@pytest.mark.parametrize("case", _select("tagged"))
def test_tagged_js_only_case(case: dict[str, Any] | None) -> None:
    case = require_case(case, NAME)
    try:
        value = _from_tagged(case["value"])
    except _Inexpressible:
        return  # no Python value denotes this JavaScript-only input
    if case["rejected"]:
        with pytest.raises(InvalidArgument):
            D.digest(value, case["domain"], "peer")
    else:
        _check_accepted(value, case)


def _objects(text: str) -> list[list[str]]:
    found: list[list[str]] = []

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found.append([k for k, _ in pairs])
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)
    return found


@pytest.mark.parametrize("case", _select("all"))
def test_peer_key_order_matches_collation_model(case: dict[str, Any] | None) -> None:
    case = require_case(case, NAME)
    if case["canonical_json"] is None:
        return
    for keys in _objects(case["canonical_json"]):
        index = [k for k in keys if D._is_array_index(k)]
        assert keys[: len(index)] == sorted(index, key=int)
        portable = [k for k in keys[len(index):] if D.peer_portable_key(k)]
        assert portable == sorted(portable, key=D._collation_key)
