"""Strict JSON at the boundary: bytes -> Python values, or a typed InputError.

Rejects what ``json`` would silently accept or crash on: a UTF-8 BOM, invalid
UTF-8, ``NaN``/``Infinity``, a number that is not a finite double (``1e400`` parses
as infinity, a 400-digit integer does not convert), duplicate object keys, nesting
deeper than ``MAX_DEPTH`` and strings longer than ``MAX_STRING``.  Every error names
the source, a JSON pointer (or line/column for syntax errors) and the expectation.

Files are read by :func:`read_regular`: only a regular, readable file is opened (a
FIFO, a directory, a symlink loop or a dangling symlink is an error, checked with
``stat`` first and opened non-blocking, so reading never hangs).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from shadow.errors import InputError

MAX_DEPTH = 256
_WORD = re.compile(r"^[A-Za-z0-9_.:@/-]{1,64}$")  # a key shown in an error; others by length
MAX_STRING = 16 * 1024 * 1024
_MAX_INT_DIGITS = 400  # longer than any integer a finite double can hold (~1.8e308)


def mapping_at(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``obj[key]`` when it is an object, else an empty one (a capture's optional section)."""
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def list_at(obj: Mapping[str, Any], key: str) -> list[Any]:
    """``obj[key]`` when it is an array, else an empty one."""
    value = obj.get(key)
    return value if isinstance(value, list) else []


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


class _HugeInt:
    """An integer literal too long to be a finite double (never converted)."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _parse_int(text: str) -> int | _HugeInt:
    digits = len(text.lstrip("-"))
    return _HugeInt(digits) if digits > _MAX_INT_DIGITS else int(text)


def _walk_leaves(value: Any, pointer: str = "") -> Iterator[tuple[str, Any]]:
    """(pointer, leaf) for every string and number leaf."""
    stack: list[tuple[str, Any]] = [(pointer, value)]
    while stack:
        ptr, node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                stack.append((join_pointer(ptr, k), v))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                stack.append((join_pointer(ptr, i), v))
        elif isinstance(node, (str, float, _HugeInt)) or (
                isinstance(node, int) and not isinstance(node, bool)):
            yield ptr, node


def _bad_number(value: Any) -> str | None:
    """Why a parsed number is not a finite double (None when it is one)."""
    if isinstance(value, _HugeInt):
        return f"an integer of {value.digits} digits"
    if isinstance(value, float):
        return None if math.isfinite(value) else "a number out of the double range"
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            return f"an integer of {len(str(abs(value)))} digits"
    return None


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
        value = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_pairs,
                           parse_int=_parse_int)
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
    for ptr, leaf in _walk_leaves(value):
        if isinstance(leaf, str):
            if len(leaf) > MAX_STRING:
                raise InputError(source, ptr, f"a string of at most {MAX_STRING} characters",
                                 f"{len(leaf)} characters")
            continue
        why = _bad_number(leaf)
        if why is not None:
            raise InputError(source, ptr, "a finite JSON number (a double)", why)
    return value


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _os_problem(exc: OSError, path: Path) -> str:
    if exc.errno == errno.ELOOP:
        return "a symlink loop"
    if isinstance(exc, FileNotFoundError):
        return "a dangling symlink" if os.path.islink(path) else "no such file"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, IsADirectoryError):
        return "a directory"
    return type(exc).__name__


def regular_file_problem(path: Path) -> str | None:
    """Why ``path`` is not a regular file one could open (None when it is one).

    Only ``stat``: never opens the path, so a FIFO cannot block."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return _os_problem(exc, path)
    except ValueError:  # e.g. an embedded NUL
        return "an invalid path"
    return None if stat.S_ISREG(mode) else _kind(mode)


def read_regular(path: Path, source: str | Path | None = None) -> bytes:
    """The bytes of a regular, readable file, or an :class:`InputError` naming
    ``source`` (default: the path) and what the path is instead."""
    src = path if source is None else source
    problem = regular_file_problem(path)
    if problem is not None:
        expected = "an existing file" if problem == "no such file" else "a regular readable file"
        raise InputError(src, "", expected, problem)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise InputError(src, "", "a regular readable file", _os_problem(exc, path)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # swapped between stat and open
            raise InputError(src, "", "a regular readable file", _kind(mode))
        if sys.platform != "win32" and hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(src, "", "a regular readable file", _os_problem(exc, path)) from None
    finally:
        os.close(fd)


def load_path(path: Path, source: str | Path | None = None) -> Any:
    """Strictly parse the JSON file at ``path`` (a regular readable file)."""
    src = path if source is None else source
    return loads(read_regular(path, src), src)
