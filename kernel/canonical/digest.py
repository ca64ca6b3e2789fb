"""Canonical JSON and domain-tagged digests.

Every digest is ``"sha256:" + hex(sha256(utf8(domain + "\\u0000" + canonical_json)))``;
the two profiles differ only in how ``canonical_json`` is produced.

Profile ``jcs`` (default) — RFC 8785, the published JSON Canonicalization Scheme
    Keys are sorted by UTF-16 code units; numbers use the ECMAScript
    ``Number#toString`` form; strings escape only ``"``, ``\\``, ``\\b \\f \\n \\r \\t``
    and other C0 controls (as lowercase ``\\u00xx``). The ``rfc8785`` package is the
    reference and the exact path. A fast path (``orjson`` with sorted keys, or the
    standard ``json`` encoder when ``orjson`` is absent) is taken only for values it
    provably serialises to the same bytes: dict/list/tuple containers, strings, bools,
    ``None``, ints within ±(2**53 - 1), non-integral floats with ``1e-4 <= |x| < 2**52``,
    and object keys without surrogates or supplementary-plane characters (where code
    point order equals UTF-16 order). Anything else — other floats, big ints, keys
    outside the BMP, lone surrogates, subclasses, deep nesting — takes the exact
    path. ``tests/kernel/test_digest.py`` proves fast == ``rfc8785.dumps`` with
    hypothesis. As in ``rfc8785``, integers outside ±(2**53 - 1), non-finite floats and
    lone surrogates are refused (``InvalidArgument``).

Profile ``peer`` — the JavaScript peer's ``canonicalJson`` (``@chainlesschain/
context-memory-kernel`` 0.1.1, Node v20.20.2, ICU 78.2), byte for byte
    * Object keys are ordered as the peer orders them: array-index keys
      (``"0"`` … ``"4294967294"`` in canonical decimal form) first in numeric order,
      then the other keys by ``localeCompare(other, "en")``. That collation is
      reproduced exactly (:mod:`kernel.canonical.collation`, proven against Node v20.20.2 /
      ICU 78.2) for keys drawn from the *portable key alphabet*: printable ASCII
      (U+0020–U+007E) plus TAB, LF, VT, FF and CR, and the non-ASCII alphabet of
      :mod:`kernel.canonical.collation` — Latin-1 Supplement and Latin Extended-A, Greek and
      Coptic, Cyrillic, CJK Symbols and Punctuation, the fullwidth forms U+FF01–U+FF5E
      and the CJK Unified Ideographs U+4E00–U+9FFF (less a few characters that collate
      like another one or contract). For ASCII, ICU's root collation gives each
      character one collation element, so strings compare first by the sequence of
      primary weights — whitespace, then
      ``_ - , ; : ! ? . ' " ( ) [ ] { } @ * / \\ & # % ` ^ + < = > | ~ $``, then digits,
      then letters case-insensitively — and then by case at the tertiary level
      (lowercase before uppercase at the first difference); accents (``é``), expansions
      (``ß``, ``æ``), other scripts (after Latin) and ideographs (after every script, in
      radical-stroke order) follow ICU's three-level comparison. Distinct portable keys
      never tie (the collation elements form a uniquely decodable code). The ASCII rule
      was checked against ``localeCompare`` on Node v20.20.2/ICU 78.2 (75,001 strings
      sorted identically) and against every object in the peer's digest vectors; the
      wider alphabet by ``tests/kernel/test_collation.py``. **Any other key** (combining
      marks, ignorable controls, Hangul, kana, emoji …) depends on ICU data we do not
      carry and raises ``NonPortableValue`` naming the key — never a silently different
      digest.
    * Numbers follow JavaScript: every number is an IEEE-754 double printed with
      ``Number#toString`` (``1e+21``, ``1e-7``, ``0.000001``, ``5e-324``; ``-0`` → ``0``).
      A Python int beyond 2**53 stands for its nearest double (as an integer literal in
      the peer's input does), so ``123456789012345678901`` → ``123456789012345680000``.
      Non-finite numbers (and ints beyond the double range) are refused
      (``InvalidArgument``), as the peer refuses them.
    * Strings are escaped as ``JSON.stringify`` does, lone surrogates included
      (lowercase ``\\udxxx``); a Python string holding a surrogate *pair* as two code
      points is the same JavaScript string as the combined character.
    * Values must be plain JSON data (dict with str keys, list/tuple, str, int, float,
      bool, None); anything else is ``InvalidArgument``. A domain holding lone
      surrogates is ``NonPortableValue`` (Node would hash U+FFFD instead).
    The peer profile has a fast path too (dicts rebuilt in canonical key order, then
    serialised without sorting), proved equal to the exact serializer by hypothesis.

This module is pure: no I/O, clocks, randomness or environment access.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring
from operator import countOf
from types import MappingProxyType
from typing import Any, Final, Literal

import rfc8785

from kernel.canonical.collation import collation_key, is_collation_portable
from kernel.errors import InvalidArgument, NonPortableValue
from kernel.vocabulary import MAX_EXACT_INTEGER, MAX_SAFE_INTEGER

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency
    orjson = None  # type: ignore[assignment]

Profile = Literal["jcs", "peer"]
DEFAULT_DOMAIN: Final = "chainlesschain.context-memory/v1"
DIGEST_PREFIX: Final = "sha256:"
PROFILES: Final[tuple[Profile, ...]] = ("jcs", "peer")

#: The ASCII part of the peer profile's portable key alphabet in ICU root primary order.
#: Letters are listed lowercase; each uppercase letter shares its primary weight.
PEER_KEY_PRIMARY_ORDER: Final = (
    "\t\n\x0b\x0c\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz"
)

_MAX_ARRAY_INDEX: Final = 4294967294
_FAST_FLOAT_MAX: Final = 4503599627370496.0  # 2**52: every float at or above is integral

_PORTABLE_KEY = re.compile(r"[\t-\r -~]*")
_IGNORABLE_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_NOT_UTF16_ORDER_SAFE = re.compile("[\ud800-\udfff\U00010000-\U0010ffff]")


class _Decline(Exception):
    """Internal: the fast path cannot prove this value; use the exact path."""


# --------------------------------------------------------------------------- public API


def canonical_json(value: Any, profile: Profile = "jcs") -> str:
    """Canonical JSON text of ``value`` under ``profile``."""
    return _canonical_bytes(value, profile).decode("utf-8")


def digest(value: Any, domain: str = DEFAULT_DOMAIN, profile: Profile = "jcs") -> str:
    """``sha256:<hex>`` over ``utf8(domain + "\\u0000" + canonical_json(value))``."""
    body = _canonical_bytes(value, profile)
    return DIGEST_PREFIX + hashlib.sha256(_domain_bytes(domain, profile) + body).hexdigest()


def digest_record(
    record: Mapping[str, Any],
    domain: str = DEFAULT_DOMAIN,
    profile: Profile = "jcs",
    digest_field: str = "digest",
) -> str:
    """Digest of a record without its own top-level ``digest_field``."""
    if not isinstance(record, Mapping):
        raise InvalidArgument(
            "digest_record expects a mapping",
            details={"type": type(record).__name__},
        )
    return digest({k: v for k, v in record.items() if k != digest_field}, domain, profile)


def peer_portable_key(key: str) -> bool:
    """True if the peer profile reproduces ``localeCompare("en")`` for ``key`` exactly."""
    if _PORTABLE_KEY.fullmatch(key) is not None:
        return True
    return (
        not key.isascii()
        and _IGNORABLE_CONTROL.search(key) is None
        and is_collation_portable(key)
    )


def peer_key_order(keys: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The peer's order for the keys of one object (index keys first, then collation).

    Raises ``NonPortableValue`` for a non-index key outside the portable alphabet.
    """
    order = _peer_order(tuple(keys))
    if order is not None:
        return order
    for key in keys:
        if not isinstance(key, str):
            raise InvalidArgument(
                "canonical JSON object keys must be strings",
                details={"type": type(key).__name__, "profile": "peer"},
            )
        if not _is_array_index(key) and not peer_portable_key(key):
            raise _non_portable_key(key, "$")
    raise AssertionError("unreachable: _peer_order refused portable keys")  # pragma: no cover


# --------------------------------------------------------------------------- dispatch


def _canonical_bytes(value: Any, profile: str) -> bytes:
    if profile == "jcs":
        fast = _jcs_fast(value, _ENCODER)
        return fast if fast is not None else _jcs_exact(value)
    if profile == "peer":
        fast = _peer_fast(value, _ENCODER)
        return fast if fast is not None else _peer_exact(value).encode("utf-8")
    raise InvalidArgument(
        f"unknown digest profile {profile!r}", details={"profile": str(profile)[:40]}
    )


def _domain_bytes(domain: str, profile: str) -> bytes:
    if not isinstance(domain, str):
        raise InvalidArgument(
            "digest domain must be a string", details={"type": type(domain).__name__}
        )
    try:
        return domain.encode("utf-8") + b"\x00"
    except UnicodeEncodeError:
        error = NonPortableValue if profile == "peer" else InvalidArgument
        raise error(
            f"digest domain {_preview(domain)} contains a lone surrogate",
            details={"domain": _preview(domain), "profile": profile},
        ) from None


# --------------------------------------------------------------------------- encoders

Encoder = Callable[[Any, bool], bytes]


def _encode_json(value: Any, sort_keys: bool) -> bytes:
    text = json.dumps(
        value,
        sort_keys=sort_keys,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        check_circular=False,
    )
    return text.encode("utf-8")  # lone surrogates raise UnicodeEncodeError


def _encode_orjson(value: Any, sort_keys: bool) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0)


#: Fast-path encoders by name, preferred first; the property tests check every one.
ENCODERS: Final[Mapping[str, Encoder]] = MappingProxyType(
    {"orjson": _encode_orjson, "json": _encode_json}
    if orjson is not None
    else {"json": _encode_json}
)

#: Encoder used by the fast paths: ``orjson`` when installed, else ``json``.
_ENCODER: Encoder = next(iter(ENCODERS.values()))
_ENCODE_FAILURES: Final = (TypeError, ValueError, RecursionError, OverflowError)


# --------------------------------------------------------------------------- jcs


def _jcs_fast(value: Any, encoder: Encoder) -> bytes | None:
    """RFC 8785 bytes via ``encoder`` if ``value`` is provably in the safe subset."""
    try:
        if not _jcs_plain(value):
            return None
        return encoder(value, True)
    except _ENCODE_FAILURES:  # lone surrogate, orjson depth limit, deep recursion
        return None


def _jcs_plain(value: Any) -> bool:
    t = type(value)
    if t is dict:
        keys = "".join(value)  # TypeError for non-str keys
        if not keys.isascii() and _NOT_UTF16_ORDER_SAFE.search(keys):
            return False
        items = value.values()
    elif t is list or t is tuple:
        items = value
    else:
        return _jcs_plain_scalar(value, t)
    for item in items:
        t = type(item)
        if t is str or item is None or t is bool:
            continue
        if t is int:
            if -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                continue
            return False
        if not _jcs_plain(item):
            return False
    return True


def _jcs_plain_scalar(value: Any, t: type) -> bool:
    if t is str or value is None or t is bool:
        return True
    if t is int:
        return bool(-MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER)
    if t is float:
        return bool(1e-4 <= abs(value) < _FAST_FLOAT_MAX) and not value.is_integer()
    return False


def _jcs_exact(value: Any) -> bytes:
    try:
        return rfc8785.dumps(value)
    except (ValueError, TypeError, RecursionError) as exc:  # CanonicalizationError is a ValueError
        path, reason = _jcs_violation(value, "$") or ("$", str(exc))
        raise InvalidArgument(
            f"value is not RFC 8785 canonicalizable: {reason}",
            details={"path": path, "profile": "jcs"},
        ) from exc


def _jcs_violation(value: Any, path: str, depth: int = 0) -> tuple[str, str] | None:
    """First location rfc8785 refuses, for the error message (best effort)."""
    if depth > 200:
        return path, "value nests too deeply"
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        ok = -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
        return None if ok else (path, "integer outside ±(2**53 - 1); pass a float")
    if isinstance(value, float):
        return None if value - value == 0 else (path, "non-finite number")
    if isinstance(value, str):
        return (path, "lone surrogate in string") if _SURROGATE.search(value) else None
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if found := _jcs_violation(item, f"{path}[{i}]", depth + 1):
                return found
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return path, "object keys must be strings"
            if _SURROGATE.search(key):
                return f"{path}.{key}", "lone surrogate in key"
            if found := _jcs_violation(item, f"{path}.{key}", depth + 1):
                return found
        return None
    return path, f"unsupported type {type(value).__name__}"


# --------------------------------------------------------------------------- peer


def _peer_fast(value: Any, encoder: Encoder) -> bytes | None:
    """Peer bytes via ``encoder`` on a rebuilt copy, if provably identical."""
    try:
        return encoder(_peer_rebuild(value), False)
    except (_Decline, *_ENCODE_FAILURES):
        return None


def _peer_rebuild(value: Any) -> Any:
    """Copy of ``value`` with dicts in peer key order and JS-equivalent numbers."""
    t = type(value)
    if t is dict:
        order = _peer_order(tuple(value))
        if order is None:
            raise _Decline
        rebuilt = {}
        for key in order:
            item = value[key]
            t = type(item)
            exact_int = t is int and -MAX_EXACT_INTEGER <= item <= MAX_EXACT_INTEGER
            if t is str or item is None or t is bool or exact_int:
                rebuilt[key] = item
            else:
                rebuilt[key] = _peer_rebuild(item)
        return rebuilt
    if t is list or t is tuple:
        return [item if type(item) is str else _peer_rebuild(item) for item in value]
    if t is str or value is None or t is bool:
        return value
    if t is int:
        if -MAX_EXACT_INTEGER <= value <= MAX_EXACT_INTEGER:
            return value
        raise _Decline
    if t is float:
        if value.is_integer() and -MAX_EXACT_INTEGER <= value <= MAX_EXACT_INTEGER:
            return int(value)  # JS prints 1.0 as "1" and -0 as "0"
        if 1e-4 <= abs(value) < _FAST_FLOAT_MAX:
            return value
    raise _Decline


def _peer_order(keys: tuple[Any, ...]) -> tuple[str, ...] | None:
    """Peer key order for one object's keys, or None if any key is not portable.  Only a
    tuple of exact ``str`` reaches the cache: a key that merely compares equal to a cached
    one (a ``str`` subclass with its own ``__eq__``/``__hash__``) is never answered from it."""
    if countOf(map(type, keys), str) != len(keys):
        return None
    return _str_peer_order(keys)


@functools.lru_cache(maxsize=2048)
def _str_peer_order(keys: tuple[str, ...]) -> tuple[str, ...] | None:
    """:func:`_peer_order` of exact strings (``functools.lru_cache``: a pure function of a
    tuple of strings, answering with a tuple)."""
    indices: list[str] = []
    others: list[str] = []
    wide = False
    for key in keys:
        if _is_array_index(key):
            indices.append(key)
        elif _PORTABLE_KEY.fullmatch(key):
            others.append(key)
        elif peer_portable_key(key):
            others.append(key)
            wide = True
        else:
            return None
    indices.sort(key=int)
    others.sort(key=_collation_key)
    if wide:
        _refuse_ties(others)
    return (*indices, *others)


#: ICU root (``en``) sort key of a portable key (:func:`kernel.canonical.collation.collation_key`).
_collation_key: Final = collation_key


def _refuse_ties(ordered: list[str]) -> None:
    """Distinct portable keys never collate equal (``test_collation`` proves it); were
    two to tie, their order would be the peer's enumeration order, not a function of the
    keys — refuse rather than guess."""
    keys = [_collation_key(key) for key in ordered]
    for i in range(1, len(keys)):
        if keys[i] == keys[i - 1]:  # pragma: no cover - unreachable, see the docstring
            raise NonPortableValue(
                f"object keys {_preview(ordered[i - 1])} and {_preview(ordered[i])} "
                'collate as equal under localeCompare("en")',
                details={"key": _preview(ordered[i]), "profile": "peer"},
            )


def _is_array_index(key: str) -> bool:
    return (
        0 < len(key) <= 10
        and key.isascii()
        and key.isdigit()
        and (key == "0" or key[0] != "0")
        and int(key) <= _MAX_ARRAY_INDEX
    )


def _peer_exact(value: Any) -> str:
    out: list[str] = []
    problems: list[NonPortableValue] = []
    try:
        _peer_write(value, "$", out, problems)
    except RecursionError:
        raise InvalidArgument(
            "canonical JSON value nests too deeply", details={"profile": "peer"}
        ) from None
    if problems:
        raise problems[0]
    return "".join(out)


def _peer_write(value: Any, path: str, out: list[str], problems: list[NonPortableValue]) -> None:
    if value is None:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int):
        out.append(_peer_int_text(int(value), path))
    elif isinstance(value, float):
        out.append(_peer_float_text(float(value), path))
    elif isinstance(value, str):
        out.append(js_string_literal(value))
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _peer_write(item, f"{path}[{i}]", out, problems)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        for i, key in enumerate(_peer_exact_order(value, path, problems)):
            if i:
                out.append(",")
            out.append(js_string_literal(key))
            out.append(":")
            _peer_write(value[key], f"{path}.{key}", out, problems)
        out.append("}")
    else:
        raise InvalidArgument(
            "canonical JSON accepts only plain JSON values",
            details={"path": path, "type": type(value).__name__, "profile": "peer"},
        )


def _peer_exact_order(
    value: dict[Any, Any], path: str, problems: list[NonPortableValue]
) -> tuple[str, ...]:
    keys = tuple(value)
    for key in keys:
        if not isinstance(key, str):
            raise InvalidArgument(
                "canonical JSON object keys must be strings",
                details={"path": path, "type": type(key).__name__, "profile": "peer"},
            )
    order = _peer_order(tuple(str.__str__(k) for k in keys))
    if order is not None:
        return keys if keys == order else tuple(_reorder(keys, order))
    # Not portable: keep validating the values (a real fault beats non-portability),
    # then report the first non-portable key.
    for key in keys:
        if not _is_array_index(key) and not peer_portable_key(key):
            problems.append(_non_portable_key(key, path))
            break
    return tuple(sorted(keys))


def _reorder(keys: tuple[str, ...], order: tuple[str, ...]) -> list[str]:
    by_plain = {str.__str__(k): k for k in keys}
    return [by_plain[k] for k in order]


def _peer_int_text(value: int, path: str) -> str:
    if -MAX_EXACT_INTEGER <= value <= MAX_EXACT_INTEGER:
        return str(value)
    try:
        as_double = float(value)  # nearest double, ties to even, as JS parses literals
    except OverflowError:
        raise InvalidArgument(
            "canonical JSON cannot contain non-finite numbers",
            details={"path": path, "profile": "peer"},
        ) from None
    return js_number_text(as_double)


def _peer_float_text(value: float, path: str) -> str:
    if value - value != 0:
        raise InvalidArgument(
            "canonical JSON cannot contain non-finite numbers",
            details={"path": path, "profile": "peer"},
        )
    return js_number_text(value)


def js_number_text(value: float) -> str:
    """ECMAScript ``Number#toString`` of a finite double (also RFC 8785's number form)."""
    if value == 0:
        return "0"  # both zeros
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")  # shortest round-trip digits
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    significant = digits.lstrip("0")
    n = (int(exponent) if exponent else 0) + len(whole) - (len(digits) - len(significant))
    significant = significant.rstrip("0")
    k = len(significant)
    if k <= n <= 21:
        return sign + significant + "0" * (n - k)
    if 0 < n <= 21:
        return sign + significant[:n] + "." + significant[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + significant
    e = n - 1
    exp_text = ("e+" if e >= 0 else "e-") + str(abs(e))
    if k == 1:
        return sign + significant + exp_text
    return sign + significant[0] + "." + significant[1:] + exp_text


def js_string_literal(value: str) -> str:
    """``JSON.stringify`` of the JavaScript string that ``value`` denotes."""
    text: str = encode_basestring(value)
    if _SURROGATE.search(text) is None:
        return text
    # Adjacent surrogate code points form one JS character; lone ones are escaped.
    text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# --------------------------------------------------------------------------- messages


def _preview(text: str, limit: int = 40) -> str:
    shown = json.dumps(text[:limit], ensure_ascii=True)
    return shown + ("…" if len(text) > limit else "")


def _non_portable_key(key: str, path: str) -> NonPortableValue:
    return NonPortableValue(
        f"object key {_preview(key)} at {path} is outside the peer profile's portable "
        "key alphabet (printable ASCII, TAB, LF, VT, FF, CR and the alphabet of "
        "kernel.canonical.collation): its order under the peer's localeCompare(\"en\") depends "
        "on ICU collation data",
        details={"path": path, "key": _preview(key), "profile": "peer"},
    )
