"""Strict JSON at the boundary: bytes -> Python values, or a typed InputError.

Rejects what ``json`` would silently accept or crash on: a UTF-8 BOM, invalid
UTF-8, ``NaN``/``Infinity``, duplicate object keys, nesting deeper than
``MAX_DEPTH`` and strings longer than ``MAX_STRING``.  Every error names the
source, a JSON pointer (or line/column for syntax errors) and the expectation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shadow.errors import InputError

MAX_DEPTH = 256
_WORD = re.compile(r"^[A-Za-z0-9_.:@/-]{1,64}$")  # a key shown in an error; others by length
MAX_STRING = 16 * 1024 * 1024


def pointer_escape(token: str | int) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def join_pointer(base: str, token: str | int) -> str:
    return f"{base}/{pointer_escape(token)}"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _scan_depth(text: str) -> int:
    """Maximum bracket nesting outside strings (cheap pre-check before json)."""
    depth = best = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > best:
                best = depth
                if best > MAX_DEPTH:
                    return best
        elif ch in "]}":
            depth -= 1
    return best


def _walk_strings(value: Any, pointer: str = "") -> Iterator[tuple[str, str]]:
    stack: list[tuple[str, Any]] = [(pointer, value)]
    while stack:
        ptr, node = stack.pop()
        if isinstance(node, str):
            yield ptr, node
        elif isinstance(node, dict):
            for k, v in node.items():
                stack.append((join_pointer(ptr, k), v))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                stack.append((join_pointer(ptr, i), v))


def decode_text(data: bytes, source: str | Path) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        raise InputError(source, "", "UTF-8 JSON without a byte-order mark", "a UTF-8 BOM")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            source, "", "valid UTF-8", f"invalid byte at offset {exc.start}"
        ) from None


def loads(data: bytes | str, source: str | Path = "<input>") -> Any:
    """Parse one JSON document strictly."""
    text = decode_text(data, source) if isinstance(data, bytes) else data
    if text.startswith("\ufeff"):
        raise InputError(source, "", "JSON without a byte-order mark", "a BOM")
    if _scan_depth(text) > MAX_DEPTH:
        raise InputError(source, "", f"nesting depth at most {MAX_DEPTH}", "deeper nesting")
    try:
        value = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_pairs)
    except _DuplicateKey as exc:
        key = repr(exc.key) if _WORD.match(exc.key) else f"of {len(exc.key)} characters"
        raise InputError(source, "", "unique object keys", f"a duplicate key {key}") from None
    except json.JSONDecodeError as exc:
        raise InputError(
            source, "", "well-formed JSON", f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except ValueError as exc:  # parse_constant
        raise InputError(source, "", "finite JSON numbers", str(exc)) from None
    except RecursionError:
        raise InputError(
            source, "", f"nesting depth at most {MAX_DEPTH}", "deeper nesting"
        ) from None
    for ptr, s in _walk_strings(value):
        if len(s) > MAX_STRING:
            raise InputError(source, ptr, f"a string of at most {MAX_STRING} characters",
                             f"{len(s)} characters")
    return value


def load_path(path: Path) -> Any:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(path, "", "an existing file", "no such file") from None
    except OSError as exc:
        raise InputError(path, "", "a readable file", type(exc).__name__) from None
    return loads(data, path)
