"""kernel.canonical.digest: published vectors, the fast-path proof, framing and refusals.

The RFC 8785 vectors (tests/vectors/digests.json) are generated from the reference
``rfc8785`` package by tests/vectors/make_digest_vectors.py, so they are independent
of the implementation under test. The hypothesis properties prove that the fast
paths are byte-identical to the exact paths on every value they accept.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.canonical import digest as D
from kernel.errors import InvalidArgument, NonPortableValue

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "vectors" / "digests.json"
GENERATOR = ROOT / "tests" / "vectors" / "make_digest_vectors.py"
ENCODERS = sorted(D.ENCODERS)
PROPERTY = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _vectors() -> dict[str, Any]:
    with VECTORS.open(encoding="utf-8") as fh:
        doc: dict[str, Any] = json.load(fh)
    return doc


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_digest_vectors", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _framed(domain: str, canonical: str) -> str:
    data = (domain + "\u0000" + canonical).encode("utf-8")
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _reference(value: Any) -> bytes | None:
    try:
        return rfc8785.dumps(value)
    except (ValueError, TypeError):  # CanonicalizationError, lone surrogate in a key
        return None


# --------------------------------------------------------------------------- vectors


def test_vector_file_header_and_size() -> None:
    doc = _vectors()
    assert doc["format"] == "cmk-digest-vectors/v1"
    assert doc["profile"] == "jcs"
    assert doc["framing"] == "sha256(utf8(domain + U+0000 + canonical_json))"
    assert len(doc["cases"]) >= 40
    assert len({c["id"] for c in doc["cases"]}) == len(doc["cases"])


def test_vector_file_is_generated_deterministically() -> None:
    generator = _generator()
    first = generator.render()
    assert first == generator.render()
    assert VECTORS.read_text(encoding="utf-8") == first, "run make_digest_vectors.py"
    assert first.endswith("}\n")


@pytest.mark.parametrize("case", _vectors()["cases"], ids=lambda c: c["id"])
def test_vector(case: dict[str, Any]) -> None:
    value, domain = case["value"], case["domain"]
    assert D.canonical_json(value) == case["canonical"]
    assert D.digest(value, domain) == case["digest"]
    assert _framed(domain, case["canonical"]) == case["digest"]
    for name in ENCODERS:
        fast = D._jcs_fast(value, D.ENCODERS[name])
        assert fast is None or fast.decode("utf-8") == case["canonical"], name


def test_rfc8785_published_examples() -> None:
    # RFC 8785 §3.2.2 and §3.2.3, transcribed from the RFC (not from any library).
    example = {
        "numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
        "literals": [None, True, False],
    }
    assert D.canonical_json(example) == (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    sorting = {"€": 0, "\r": 1, "דּ": 2, "1": 3, "😀": 4, "\u0080": 5, "ö": 6}
    assert list(json.loads(D.canonical_json(sorting))) == [
        "\r", "1", "\u0080", "ö", "€", "😀", "דּ",
    ]


# --------------------------------------------------------------------------- strategies

TRICKY_CHARS = [
    "\x00", "\x08", "\x1f", "\x7f", "\x80", "\u2028", "\u2029", "\ud800", "\udbff",
    "\udc00", "\udfff", "\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0001f600",
    "\U0010ffff", '"', "\\", "/", "\u0301", "é", "A", "a", "Z", "_", "-", "0", "9", " ",
]
chars = st.one_of(st.characters(), st.sampled_from(TRICKY_CHARS))
texts = st.text(chars, max_size=8)
ints = st.one_of(
    st.integers(-1000, 1000),
    st.integers(-(2**53) - 4, -(2**53) + 4),
    st.integers(2**53 - 4, 2**53 + 4),
    st.integers(-(2**70), 2**70),
)
floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e-3, max_value=1e-3),
    st.floats(min_value=-(2.0**54), max_value=2.0**54),
    st.sampled_from([-0.0, 1e-4, 9.999999999999999e-5, 1e-7, 1e-6, 1e16, 1e21, 2.0**52,
                     4503599627370495.5, 2.0**53, 5e-324, 1.7976931348623157e308]),
)
scalars = st.one_of(st.none(), st.booleans(), ints, floats, texts)
json_values = st.recursive(
    scalars,
    lambda kids: st.one_of(
        st.lists(kids, max_size=5),
        st.dictionaries(texts, kids, max_size=5),
        st.lists(kids, max_size=3).map(tuple),
    ),
    max_leaves=20,
)

# Values the fast path should accept: the shapes of ContextItems and MemoryRecords.
plain_keys = st.text(st.characters(max_codepoint=0xD7FF), max_size=10)
plain_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.floats(min_value=1e-4, max_value=2.0**51).filter(lambda x: not x.is_integer()),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
)
plain_values = st.recursive(
    plain_scalars,
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(plain_keys, kids, max_size=6),
    max_leaves=25,
)


# --------------------------------------------------------------------------- fast path proof


@PROPERTY
@given(json_values)
def test_jcs_fast_path_is_rfc8785_on_every_value(value: Any) -> None:
    expected = _reference(value)
    for name in ENCODERS:
        fast = D._jcs_fast(value, D.ENCODERS[name])
        assert fast is None or fast == expected, name
    if expected is None:
        with pytest.raises(InvalidArgument):
            D.canonical_json(value)
    else:
        assert D.canonical_json(value).encode("utf-8") == expected


@PROPERTY
@given(plain_values)
def test_jcs_fast_path_accepts_plain_values_and_matches(value: Any) -> None:
    expected = rfc8785.dumps(value)
    for name in ENCODERS:
        assert D._jcs_fast(value, D.ENCODERS[name]) == expected, name


@PROPERTY
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_js_number_text_is_rfc8785_number_form(x: float) -> None:
    assert D.js_number_text(x) == rfc8785.dumps(x).decode("ascii")


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0.0, "0"), (-0.0, "0"), (1.0, "1"), (-1.5, "-1.5"), (0.1, "0.1"),
        (1e21, "1e+21"), (1e20, "100000000000000000000"), (1e-7, "1e-7"),
        (1e-6, "0.000001"), (1.234e-6, "0.000001234"), (5e-324, "5e-324"),
        (123456789012345680000.0, "123456789012345680000"), (1.5e-323, "1.5e-323"),
        (6.02214076e23, "6.02214076e+23"), (1.7976931348623157e308, "1.7976931348623157e+308"),
        (0.30000000000000004, "0.30000000000000004"), (-1e-7, "-1e-7"), (1e-5, "0.00001"),
    ],
)
def test_js_number_text_table(number: float, text: str) -> None:
    assert D.js_number_text(number) == text


@pytest.mark.parametrize("profile", D.PROFILES)
def test_context_item_sized_records_take_the_fast_path(profile: str) -> None:
    record = _generator().CONTEXT_ITEM
    fast = D._jcs_fast if profile == "jcs" else D._peer_fast
    for name in ENCODERS:
        assert fast(record, D.ENCODERS[name]) is not None, (profile, name)


# --------------------------------------------------------------------------- framing


@PROPERTY
@given(plain_values, st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))
def test_digest_framing_and_determinism(value: Any, domain: str) -> None:
    canonical = D.canonical_json(value)
    assert D.digest(value, domain) == _framed(domain, canonical)
    assert D.digest(value, domain) == D.digest(json.loads(canonical), domain)


@PROPERTY
@given(st.dictionaries(plain_keys, plain_scalars, min_size=2, max_size=8), st.randoms())
def test_digest_ignores_insertion_order(value: dict[str, Any], rnd: Any) -> None:
    items = list(value.items())
    rnd.shuffle(items)
    assert D.digest(dict(items)) == D.digest(value)


def test_domain_separation() -> None:
    value = {"a": 1}
    domains = ["", "a", "a\u0000", "chainlesschain.context-item/v1",
               "chainlesschain.memory-record/v1", D.DEFAULT_DOMAIN]
    for profile in D.PROFILES:
        digests = {D.digest(value, d, profile) for d in domains}
        assert len(digests) == len(domains), profile
    assert D.digest(value) == D.digest(value, D.DEFAULT_DOMAIN, "jcs")
    # The NUL separator keeps (domain, body) pairs apart.
    assert D.digest("b", "a") != D.digest("ab", "")


def test_digest_record_excludes_its_own_digest_field() -> None:
    record = dict(_generator().CONTEXT_ITEM)
    for profile in D.PROFILES:
        plain = D.digest(record, "d", profile)
        with_field = {**record, "digest": "sha256:" + "0" * 64}
        assert D.digest_record(with_field, "d", profile) == plain
        assert D.digest_record(record, "d", profile) == plain
        tampered = {**record, "checksum": "x"}
        assert D.digest_record(tampered, "d", profile, digest_field="checksum") == plain
        assert D.digest_record(tampered, "d", profile) != plain
        # Only the top-level field is excluded.
        nested = {**record, "sourceRef": {**record["sourceRef"], "digest": "y"}}
        assert D.digest_record(nested, "d", profile) != plain


def test_digest_record_rejects_non_mappings() -> None:
    with pytest.raises(InvalidArgument):
        D.digest_record([1, 2])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (math.nan, "$"),
        ({"a": [1, math.inf]}, "$.a[1]"),
        (2**53, "$"),
        ({"n": -(2**53)}, "$.n"),
        ("x\ud800", "$"),
        ({"k\udc00": 1}, "$.k\udc00"),
        ({1: "a"}, "$"),
        ({"s": {1, 2}}, "$.s"),
        (b"bytes", "$"),
    ],
)
def test_jcs_refuses_what_rfc8785_refuses(value: Any, path: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        D.canonical_json(value)
    assert info.value.code == "invalid_argument"
    assert info.value.details["path"] == path
    assert not isinstance(info.value, NonPortableValue)


def test_unknown_profile_and_bad_domain_are_invalid_arguments() -> None:
    with pytest.raises(InvalidArgument):
        D.canonical_json(1, "xml")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        D.digest(1, 5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument) as info:
        D.digest(1, "\ud800")
    assert not isinstance(info.value, NonPortableValue)
    with pytest.raises(NonPortableValue):
        D.digest(1, "\ud800", "peer")


def test_deep_nesting_is_refused_not_crashing() -> None:
    value: Any = 1
    for _ in range(5000):
        value = [value]
    for profile in D.PROFILES:
        with pytest.raises(InvalidArgument):
            D.canonical_json(value, profile)  # type: ignore[arg-type]


def test_moderate_nesting_beyond_orjson_depth_uses_exact_path() -> None:
    value: Any = {"k": 0.5}
    for _ in range(300):
        value = [value]
    expected = rfc8785.dumps(value).decode("utf-8")
    assert D.canonical_json(value) == expected
    assert D.canonical_json(value, "peer") == expected


def test_subclasses_take_the_exact_path() -> None:
    class Text(str):
        pass

    class Mapping(dict[str, Any]):
        pass

    value = Mapping({Text("b"): Text("x"), "a": True})
    assert D.canonical_json(value) == '{"a":true,"b":"x"}'
    assert D.canonical_json(value, "peer") == '{"a":true,"b":"x"}'


# --------------------------------------------------------------------------- peer profile

# localeCompare(other, "en") order of these keys, produced by Node v20.20.2 / ICU 78.2
# (the peer's runtime): shuffled, then `keys.sort((a, b) => a.localeCompare(b, "en"))`.
ICU_EN_ORDER = [
    "", "\t", "\n", "\u000b", "\f", "\r", " ", "_", "__proto__", "_a", "_B", "-", "-1", "-a",
    ",", ";", ":", "!", "?", ".", "'", "\"", "(", ")", "[", "]", "{", "}", "@", "*", "/", "\\",
    "&", "#", "%", "`", "^", "+", "<", "=", ">", "|", "~", "~a", "$", "$a", "0", "01", "1",
    "1.5", "1a", "1e3", "2", "3", "4", "4294967295", "5", "6", "7", "8", "9", "a", "A", "a\tb",
    "a\nb", "a\u000bb", "a\fb", "a\rb", "a b", "a_b", "a-b", "a:b", "a.b", "a/b", "a~", "a$",
    "a1", "a10", "a2", "aa", "aA", "Aa", "AA", "ab", "aB", "Ab", "AB", "accessCount",
    "allowedSinks", "b", "B", "binding", "c", "C", "category", "co op", "co_op", "co-op",
    "Co-op", "co.op", "confidence", "constructor", "content", "coop", "createdAt", "d", "D",
    "deletionFence", "digest", "e", "E", "evidenceRefs", "expiresAt", "f", "F", "g", "G", "h",
    "H", "hasOwnProperty", "i", "I", "importance", "item_1", "item-1", "Item-1", "item-10",
    "item-9", "item:1", "item.1", "item/1", "item1", "itemId", "j", "J", "k", "K", "key", "kEy",
    "kEY", "Key", "KEy", "KEY", "kind", "l", "L", "lastAccessedAt", "m", "M", "memoryId", "n",
    "N", "o", "O", "p", "P", "pinned", "priority", "provenance", "q", "Q", "r", "R",
    "retentionPolicy", "revision", "s", "S", "schemaVersion", "scope", "scopeId", "sensitivity",
    "sourceRef", "state", "summary", "supersedes", "t", "T", "tags", "tokenEstimate", "toString",
    "trust", "u", "U", "updatedAt", "v", "V", "valueOf", "w", "W", "x", "X", "x_1", "x-1", "x1",
    "X1", "y", "Y", "z", "Z",
]
PORTABLE_CHARS = "".join(chr(c) for c in range(0x20, 0x7F)) + "\t\n\x0b\x0c\r"


def test_icu_oracle_order_is_reproduced() -> None:
    assert len(set(ICU_EN_ORDER)) == len(ICU_EN_ORDER)
    assert set(PORTABLE_CHARS) <= set(ICU_EN_ORDER), "oracle covers every portable char"
    non_index = [k for k in ICU_EN_ORDER if not D._is_array_index(k)]
    assert list(D.peer_key_order(list(reversed(ICU_EN_ORDER)))) == (
        ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", *non_index]
    )
    assert sorted(reversed(non_index), key=D._collation_key) == non_index


def test_peer_array_index_keys_come_first_in_numeric_order() -> None:
    value = {"b": 1, "10": 2, "4294967295": 3, "2": 4, "4294967294": 5, "01": 6, "0": 7}
    assert D.canonical_json(value, "peer") == (
        '{"0":7,"2":4,"10":2,"4294967294":5,"01":6,"4294967295":3,"b":1}'
    )


portable_keys = st.one_of(
    st.text(st.sampled_from(PORTABLE_CHARS), max_size=6),
    st.integers(0, 2**32).map(str),
    st.sampled_from(["01", "-1", "1.5", "1e3", "4294967294", "4294967295"]),
)
peer_values = st.recursive(
    scalars,
    lambda kids: st.one_of(
        st.lists(kids, max_size=5),
        st.dictionaries(st.one_of(portable_keys, texts), kids, max_size=5),
        st.dictionaries(portable_keys, kids, max_size=5),
    ),
    max_leaves=20,
)


@PROPERTY
@given(peer_values)
def test_peer_fast_path_equals_exact_serializer(value: Any) -> None:
    try:
        expected: bytes | None = D._peer_exact(value).encode("utf-8")
    except InvalidArgument:
        expected = None
    for name in ENCODERS:
        fast = D._peer_fast(value, D.ENCODERS[name])
        assert fast is None or fast == expected, name


@PROPERTY
@given(st.dictionaries(portable_keys, plain_scalars, max_size=8), st.randoms())
def test_peer_portable_keys_are_never_refused_and_order_free(
    value: dict[str, Any], rnd: Any
) -> None:
    items = list(value.items())
    rnd.shuffle(items)
    text = D.canonical_json(dict(items), "peer")
    assert text == D.canonical_json(value, "peer")
    for name in ENCODERS:
        assert D._peer_fast(value, D.ENCODERS[name]) == text.encode("utf-8")


lowercase_keyed_values = st.recursive(
    plain_scalars,
    lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(st.text(st.sampled_from("abcxyz"), max_size=4), kids, max_size=5),
    max_leaves=20,
)


@PROPERTY
@given(lowercase_keyed_values)
def test_peer_and_jcs_agree_where_their_rules_coincide(value: Any) -> None:
    # Same numbers and escaping; with lowercase-letter keys the key orders coincide too.
    assert D.canonical_json(value, "peer") == D.canonical_json(value)


def test_peer_numbers_follow_javascript() -> None:
    assert D.canonical_json([-0.0, 1.0, 2**53, 2**53 + 1, 123456789012345678901], "peer") == (
        "[0,1,9007199254740992,9007199254740992,123456789012345680000]"
    )
    assert D.canonical_json([1e21, 1e-7, 1e-6, 5e-324], "peer") == "[1e+21,1e-7,0.000001,5e-324]"
    for bad in (math.nan, math.inf, -math.inf, 10**400):
        with pytest.raises(InvalidArgument) as info:
            D.canonical_json({"a": [bad]}, "peer")
        assert not isinstance(info.value, NonPortableValue)
        assert info.value.details["path"] == "$.a[0]"


def test_peer_strings_follow_json_stringify() -> None:
    assert D.canonical_json("\x00\x1f\b\f\n\r\t\"\\/\x7f\u2028", "peer") == (
        '"\\u0000\\u001f\\b\\f\\n\\r\\t\\"\\\\/\x7f\u2028"'
    )
    assert D.canonical_json(["\ud83d", "x\udE00y", "\ude00\ud83d"], "peer") == (
        '["\\ud83d","x\\ude00y","\\ude00\\ud83d"]'
    )
    # A surrogate pair held as two code points is the same JS string as the character.
    assert D.canonical_json("\ud83d\ude00", "peer") == '"\U0001f600"'
    assert D.digest("\ud83d\ude00", profile="peer") == D.digest("\U0001f600", profile="peer")


@pytest.mark.parametrize(
    "key", ["\u30a2", "e\u0301", "a\u0000", "\x01a", "\u1e9e", "\U0001f600", "\uac00", "é\u0301"]
)
def test_peer_refuses_non_portable_keys_by_name(key: str) -> None:
    with pytest.raises(NonPortableValue) as info:
        D.digest({"ok": 1, "nested": {key: 1}}, profile="peer")
    error = info.value
    assert error.code == "non_portable_value"
    assert error.details["path"] == "$.nested"
    assert error.details["key"] == json.dumps(key)
    assert json.dumps(key) in error.message
    assert D.digest({key: 1}) is not None  # the jcs profile takes any key


def test_peer_refusal_names_truncated_key() -> None:
    key = "\u30a2" * 100
    with pytest.raises(NonPortableValue) as info:
        D.canonical_json({key: 1}, "peer")
    assert info.value.details["key"] == json.dumps("\u30a2" * 40) + "…"


def test_peer_real_fault_beats_non_portability() -> None:
    with pytest.raises(InvalidArgument) as info:
        D.canonical_json({"\u30a2": 1, "z": math.nan}, "peer")
    assert not isinstance(info.value, NonPortableValue)
    with pytest.raises(InvalidArgument) as info:
        D.canonical_json({"\u30a2": object()}, "peer")
    assert not isinstance(info.value, NonPortableValue)
    assert info.value.details["path"] == "$.\u30a2"


@pytest.mark.parametrize("value", [{1: 2}, {"a": {3}}, b"x", object(), [1, lambda: 0]])
def test_peer_refuses_non_json_values(value: Any) -> None:
    with pytest.raises(InvalidArgument) as info:
        D.canonical_json(value, "peer")
    assert not isinstance(info.value, NonPortableValue)


def test_peer_key_order_refuses_non_portable() -> None:
    assert D.peer_key_order(["b", "A", "a", "1"]) == ("1", "a", "A", "b")
    with pytest.raises(NonPortableValue):
        D.peer_key_order(["b", "\u30a2"])
    assert D.peer_portable_key("a b\t~") and not D.peer_portable_key("a\x00")
    # kernel.canonical.collation's alphabet (proven in tests/kernel/test_collation.py) is portable.
    assert D.peer_key_order(["中", "b", "ß", "ä", "β", "A", "a", "ж"]) == (
        "a", "A", "ä", "b", "ß", "β", "ж", "中"
    )
    assert not D.peer_portable_key("é\x00") and not D.peer_portable_key("\u00ad")
