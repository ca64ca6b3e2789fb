"""JavaScript ``JSON.stringify`` for JSON data, byte for byte.

Object keys in JavaScript enumeration order (array-index keys first, ascending, then
insertion order), numbers as ``Number#toString`` of an IEEE-754 double, strings escaped
as V8 does (control characters, lone surrogates as ``\\udxxx``; U+2028/U+2029 and other
non-ASCII kept raw).  ``js_stringify(value)`` is the compact form the legacy CLI hashes
(``kernel.adapters.jsonl.chain``); ``js_stringify(value, indent=2)`` is
``JSON.stringify(value, null, 2)``, the form legacy capture files are written in.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Final

from kernel.vocabulary import MAX_EXACT_INTEGER

__all__ = ("js_key_order", "js_number", "js_string", "js_stringify")

_INDEX_KEY = re.compile(r"0|[1-9][0-9]*")
_MAX_INDEX: Final = 4294967294
_ESCAPE = re.compile('["\\\\\x00-\x1f\ud800-\udfff]')
_SHORT: Final = MappingProxyType({'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f",
                                  "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def _is_index(key: str) -> bool:
    return _INDEX_KEY.fullmatch(key) is not None and int(key) <= _MAX_INDEX


def js_key_order(keys: list[str]) -> list[str]:
    """JavaScript own-property order: integer-index keys ascending, then insertion order."""
    index = sorted((k for k in keys if _is_index(k)), key=int)
    return index + [k for k in keys if not _is_index(k)]


def _escape_char(match: re.Match[str]) -> str:
    ch = match.group(0)
    return _SHORT.get(ch) or f"\\u{ord(ch):04x}"


def js_string(text: str) -> str:
    """A JSON string literal as ``JSON.stringify`` writes it."""
    # Surrogate pairs held as two code points form one JS character: join them first.
    if re.search("[\ud800-\udbff][\udc00-\udfff]", text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return '"' + _ESCAPE.sub(_escape_char, text) + '"'


def js_number(value: int | float) -> str:
    """``Number#toString`` of ``value`` taken as an IEEE-754 double."""
    x = float(value) if isinstance(value, int) and abs(value) > MAX_EXACT_INTEGER else value
    if isinstance(x, int):
        return str(x)
    if not math.isfinite(x):
        return "null"  # JSON.stringify writes non-finite numbers as null
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    t = Decimal(repr(abs(x))).normalize().as_tuple()
    digits = "".join(map(str, t.digits))
    k = len(digits)
    n = k + int(t.exponent)  # value = 0.digits × 10**n
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mantissa}e{'+' if e > 0 else '-'}{abs(e)}"
    return sign + body


def js_stringify(value: Any, indent: int | None = None) -> str:
    """``JSON.stringify(value)`` — or ``JSON.stringify(value, null, indent)`` — for JSON
    data (dict, list, tuple, str, int, float, bool, None)."""
    return _stringify(value, " " * indent if indent else "", "")


def _stringify(value: Any, step: str, at: str) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return js_string(value)
    if isinstance(value, int | float):
        return js_number(value)
    inner = at + step
    open_, sep, close = ("\n" + inner, ",\n" + inner, "\n" + at) if step else ("", ",", "")
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        return "[" + open_ + sep.join(_stringify(v, step, inner) for v in value) + close + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        keys = js_key_order([str(k) for k in value])
        lookup = {str(k): v for k, v in value.items()}
        colon = ": " if step else ":"
        return "{" + open_ + sep.join(js_string(k) + colon + _stringify(lookup[k], step, inner)
                                      for k in keys) + close + "}"
    raise TypeError(f"not JSON data: {type(value).__name__}")
