"""``JSON.stringify(value, null, 2)`` in Python: the byte format of capture files.

Capture files are written by Node (``common.cjs``); the files this package writes itself
(``input.json``, ``MANIFEST.json``) must follow the same rules so that a recapture is
byte-identical: two-space indent, ``": "`` after keys, non-ASCII kept as is, ``\\u2028``
and ``\\u2029`` kept raw (JSON.stringify does not escape them), lone surrogates escaped,
and numbers printed the way JavaScript prints them (``1.0`` → ``1``, ``1e-07`` → ``1e-7``).
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["dumps", "number"]

_ESC = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
        "\t": "\\t"}


def _string(s: str) -> str:
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch in _ESC:
            out.append(_ESC[ch])
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def number(v: float | int) -> str:
    """A number as ``JSON.stringify`` prints it (NaN and infinities become ``null``)."""
    if isinstance(v, bool):
        raise TypeError("a bool is not a number here")
    if isinstance(v, int):
        return str(v)
    if not math.isfinite(v):
        return "null"
    if v == 0:
        return "0"
    if v.is_integer() and abs(v) < 1e21:
        return str(int(v))
    text = repr(v)
    if "e" not in text:
        return text
    mant, exp = text.split("e")
    sign = "-" if exp.startswith("-") else "+"
    digits = exp.lstrip("+-").lstrip("0") or "0"
    if sign == "+" and abs(v) < 1e21:
        return str(int(v))
    return f"{mant}e{sign}{digits}"


def _dump(v: Any, indent: str, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, (int, float)):
        out.append(number(v))
    elif isinstance(v, str):
        out.append(_string(v))
    elif isinstance(v, (list, tuple)):
        if not v:
            out.append("[]")
            return
        inner = indent + "  "
        out.append("[\n")
        for n, x in enumerate(v):
            out.append(inner)
            _dump(x, inner, out)
            out.append(",\n" if n < len(v) - 1 else "\n")
        out.append(indent + "]")
    elif isinstance(v, dict):
        if not v:
            out.append("{}")
            return
        inner = indent + "  "
        out.append("{\n")
        items = list(v.items())
        for n, (k, x) in enumerate(items):
            out.append(inner + _string(str(k)) + ": ")
            _dump(x, inner, out)
            out.append(",\n" if n < len(items) - 1 else "\n")
        out.append(indent + "}")
    else:
        raise TypeError(f"not a JSON value: {type(v).__name__}")


def dumps(value: Any) -> str:
    """The text of ``JSON.stringify(value, null, 2)`` plus the final newline captures end with."""
    out: list[str] = []
    _dump(value, "", out)
    return "".join(out) + "\n"


def loads(text: str) -> Any:
    """Parse JSON keeping key order (a plain ``json.loads``; here for symmetry)."""
    return json.loads(text)
