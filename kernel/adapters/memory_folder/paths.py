"""Path safety for the memory store folder (second seed, "1. 文件化记忆 current").

The memory tools take *relative* paths from a model or a user; every one goes through
:func:`check_relative_path` (pure string rules) and then :func:`open_beneath` (the
filesystem walk).  Rejected, each with its own ``reason``:

==================  ==========================================================================
``empty``           empty path, or an empty segment (``a//b``)
``too_long``        over 1,024 characters, or a segment over 255 UTF-8 bytes
``nul``             a NUL byte (before or after decoding)
``control``         another C0 control, DEL or a C1 control
``encoded``         percent-encoding (``%2e%2e%2f``, ``%252e``…): decoded, every layer is
                    checked — a traversal found inside is reported as ``traversal`` — and a
                    path that still needs decoding is refused (the tools take plain paths)
``absolute``        ``/etc/passwd``, ``\\rooted``
``unc``             ``\\\\server\\share``, ``//server/share``, ``\\\\?\\C:\\…``, ``\\\\.\\pipe``
``drive``           ``C:``, ``c:notes``, ``C:\\…``; any ``:`` (NTFS alternate streams too)
``traversal``       a ``..`` segment, with ``/`` or ``\\`` separators, in any decoded layer or
                    after NFKC folding (``．．／``)
``hidden``          a segment starting with ``.`` (``.git``, ``.env``, ``.``)
``reserved_name``   Windows device names (``CON``, ``NUL.md``, ``COM1``, ``LPT9``, ``COM¹``)
``trailing_dot``    a segment ending in ``.`` or space (Windows strips them: aliasing)
``confusable``      look-alike separators (``∕`` U+2215, ``⁄``, ``／``, ``＼``, ``⧵``, ``﹨``)
``outside_area``    not inside one of the memory areas the tool may touch
``extension``       a file that is not ``.md`` / ``.txt``
``symlink``         a symbolic link anywhere on the path (found by the walk)
``not_regular``     a device, FIFO or socket; ``hardlink``: a file with several links
==================  ==========================================================================

``\\`` is treated as a separator everywhere (a Windows path is checked as such on every
platform).  The walk opens each directory relative to its parent with ``O_NOFOLLOW`` (and
``O_DIRECTORY``) where the platform supports ``dir_fd``, so a component swapped for a link
after the check is still refused; elsewhere it checks each component with ``lstat``.

A memory file is ``lstat``-ed before it is opened — anything but a regular file with one
link is refused without opening it — and read opens add ``O_NONBLOCK`` where it exists, so a
FIFO swapped in after the check cannot block either.  Writes never open an existing path by
name: a new note is created ``O_CREAT|O_EXCL``; an atomic replace stages under a *random*
name created ``O_CREAT|O_EXCL`` (mode 0600), fsyncs it and ``os.replace``-s it onto the
target — which renames over a link at the target, never through it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from kernel.errors import InvalidArgument

__all__ = [
    "FD_WALK",
    "MemoryPathRejected",
    "check_relative_path",
    "ensure_dirs",
    "move_beneath",
    "open_beneath",
    "replace_beneath",
    "walk_beneath",
    "write_all",
]

MAX_PATH: Final = 1024
MAX_SEGMENT_BYTES: Final = 255
FILE_SUFFIXES: Final = (".md", ".txt")
_PERCENT: Final = re.compile(r"%[0-9A-Fa-f]{2}")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SEPARATORS: Final = re.compile(r"[/\\]")
_DRIVE: Final = re.compile(r"^[A-Za-z]:")
_CONFUSABLE: Final = frozenset("\u2215\u2044\uff0f\uff3c\u29f5\ufe68\u29f8\u2216")
_RESERVED: Final = frozenset(
    {"con", "prn", "aux", "nul", "conin$", "conout$", "clock$"}
    | {f"{d}{n}" for d in ("com", "lpt") for n in (*"123456789", "\u00b9", "\u00b2", "\u00b3")}
)
_DECODE_ROUNDS: Final = 4


class MemoryPathRejected(InvalidArgument):
    """A memory tool path broke a safety rule (the caller's fault); ``details["reason"]``
    names the rule, ``details["path"]`` is a bounded ASCII preview."""

    default_code = "path_rejected"


def _reject(reason: str, path: str, message: str) -> MemoryPathRejected:
    preview = ascii(path[:120])
    return MemoryPathRejected(message, details={"reason": reason, "path": preview})


def _segments_ok(path: str, original: str) -> list[str]:
    """Rules on one (decoded) form of the path; returns its segments."""
    if "\x00" in path:
        raise _reject("nul", original, "memory path contains a NUL byte")
    if _CONTROL.search(path):
        raise _reject("control", original, "memory path contains a control character")
    if path.startswith(("//", "\\\\", "/\\", "\\/")):
        raise _reject("unc", original, "UNC and device paths are not accepted")
    if path.startswith(("/", "\\")):
        raise _reject("absolute", original, "memory paths must be relative")
    if _DRIVE.match(path):
        raise _reject("drive", original, "drive-letter paths are not accepted")
    segments = _SEPARATORS.split(path)
    if any(s == ".." for s in segments):
        raise _reject("traversal", original, "memory path must not leave the store ('..')")
    if ":" in path:
        raise _reject("drive", original, "memory path must not contain ':'")
    return segments


def check_relative_path(path: object, *, allow_empty: bool = False) -> tuple[str, ...]:
    """The path's segments, or :class:`MemoryPathRejected` naming the broken rule."""
    if not isinstance(path, str):
        raise MemoryPathRejected(
            "memory path must be a string", details={"reason": "type", "path": ascii(path)[:40]}
        )
    if path == "" and allow_empty:
        return ()
    if path == "":
        raise _reject("empty", path, "memory path is empty")
    if len(path) > MAX_PATH:
        raise _reject("too_long", path, f"memory path is longer than {MAX_PATH} characters")
    layers = [path]
    current = path
    for _ in range(_DECODE_ROUNDS):
        if not _PERCENT.search(current):
            break
        current = _percent_decode(current)
        layers.append(current)
    folded = unicodedata.normalize("NFKC", path)
    for form in (folded, *layers):
        _segments_ok(form, path)
    if any(c in _CONFUSABLE for c in path):
        raise _reject("confusable", path, "memory path contains a look-alike separator")
    if len(layers) > 1:
        raise _reject("encoded", path, "percent-encoded memory paths are not accepted")
    segments = _SEPARATORS.split(path)
    for seg in segments:
        if seg == "":
            raise _reject("empty", path, "memory path has an empty segment")
        if seg.startswith("."):
            raise _reject("hidden", path, "hidden files and directories are not accepted")
        if seg.endswith((".", " ")):
            raise _reject("trailing_dot", path, "a path segment must not end in '.' or space")
        if len(seg.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES:
            raise _reject("too_long", path, "a path segment is longer than 255 bytes")
        stem = seg.split(".", 1)[0].rstrip(" ").lower()
        if stem in _RESERVED:
            raise _reject("reserved_name", path, "Windows reserved device names are refused")
    return tuple(segments)


def _percent_decode(text: str) -> str:
    """Decode ``%XX`` as UTF-8 bytes; invalid UTF-8 (overlong ``%c0%ae``) → U+FFFD."""
    raw = bytearray()
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "%" and _PERCENT.match(text, i):
            raw.append(int(text[i + 1 : i + 3], 16))
            i += 3
            continue
        if raw:
            out.append(raw.decode("utf-8", "replace"))
            raw.clear()
        out.append(text[i])
        i += 1
    if raw:
        out.append(raw.decode("utf-8", "replace"))
    return "".join(out)


# --- the filesystem walk ------------------------------------------------------------------

#: Directory-fd walking (``openat`` with ``O_NOFOLLOW``): Linux, macOS, BSD; not Windows.
FD_WALK: Final = (
    os.open in os.supports_dir_fd
    and os.stat in os.supports_dir_fd
    and os.listdir in os.supports_fd
    and hasattr(os, "O_NOFOLLOW")
)
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY: Final = getattr(os, "O_DIRECTORY", 0)
_BINARY: Final = getattr(os, "O_BINARY", 0)
#: Opening a FIFO for reading blocks until a writer comes; with O_NONBLOCK it returns at
#: once (and the fstat check then refuses it).  No effect on regular files.
_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)
_TEMP_TRIES: Final = 16


def _check_stat(st: os.stat_result, path: str, final: bool) -> None:
    """``final``: the memory file itself — a regular file with one link, nothing else;
    otherwise a directory on the way to it."""
    if stat.S_ISLNK(st.st_mode):
        raise _reject("symlink", path, "symbolic links are not followed in the memory store")
    if final:
        if not stat.S_ISREG(st.st_mode):
            raise _reject("not_regular", path, "only regular files can be memory files")
        if st.st_nlink > 1:
            raise _reject("hardlink", path, "hard-linked files are not accepted")
    elif not stat.S_ISDIR(st.st_mode):
        raise _reject("not_found", path, "a parent of the memory path is not a directory")


@contextmanager
def walk_beneath(root: str, segments: tuple[str, ...]) -> Iterator[int]:
    """A directory fd for ``root/segments`` reached without following any link (``-1``
    where the platform has no directory-fd walk: the components were ``lstat``-checked)."""
    display = "/".join(segments)
    if not FD_WALK:  # checked by path; there is no directory fd to hand out (-1)
        current = root
        for seg in segments:
            current = os.path.join(current, seg)
            _check_stat(os.lstat(current), display, final=False)
        yield -1
        return
    fd = os.open(root, os.O_RDONLY | _DIRECTORY)
    try:
        for seg in segments:
            try:
                nxt = os.open(seg, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=fd)
            except OSError:
                _check_stat(os.lstat(seg, dir_fd=fd), display, final=False)
                raise
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def open_beneath(root: str, segments: tuple[str, ...], flags: int, mode: int = 0o644) -> int:
    """Open the file ``root/segments`` without following links anywhere on the path.

    An existing file is ``lstat``-checked before it is opened (a link, a hard-linked file,
    a FIFO, socket, device or directory is refused unopened) and checked again on the open
    descriptor; a read-only open adds ``O_NONBLOCK``, so a FIFO put there in between does
    not block.  ``FileNotFoundError`` when it does not exist (and ``flags`` do not create
    it)."""
    display = "/".join(segments)
    flags |= _NOFOLLOW | _BINARY
    if flags & (os.O_WRONLY | os.O_RDWR) == 0:
        flags |= _NONBLOCK
    if not FD_WALK:
        current = root
        for i, seg in enumerate(segments):
            current = os.path.join(current, seg)
            if os.path.lexists(current):
                _check_stat(os.lstat(current), display, final=i == len(segments) - 1)
        return _checked(os.open(current, flags, mode), display)
    with walk_beneath(root, segments[:-1]) as parent:
        name = segments[-1]
        with contextlib.suppress(FileNotFoundError):  # to be created, or the open says so
            _check_stat(os.stat(name, dir_fd=parent, follow_symlinks=False), display, True)
        try:
            fd = os.open(name, flags, mode, dir_fd=parent)
        except OSError:
            _check_stat(os.stat(name, dir_fd=parent, follow_symlinks=False), display, True)
            raise
        return _checked(fd, display)


def _checked(fd: int, display: str) -> int:
    """``fd`` if it is a regular file with one link (closed and refused otherwise)."""
    try:
        _check_stat(os.fstat(fd), display, final=True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def ensure_dirs(root: str, segments: tuple[str, ...]) -> None:
    """Create ``root/segments`` directories one by one, never through a link."""
    if not FD_WALK:
        current = root
        for seg in segments:
            current = os.path.join(current, seg)
            if os.path.lexists(current):
                _check_stat(os.lstat(current), "/".join(segments), final=False)
            else:
                os.mkdir(current)
        return
    for i in range(len(segments)):
        with walk_beneath(root, segments[:i]) as parent:
            try:
                os.mkdir(segments[i], dir_fd=parent)
            except FileExistsError:
                _check_stat(os.lstat(segments[i], dir_fd=parent), "/".join(segments), False)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (short writes continued) and fsync it."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


def replace_beneath(root: str, segments: tuple[str, ...], data: bytes) -> None:
    """Atomically replace the file ``root/segments`` with ``data``.

    The bytes are staged in a new file of a random name (``.tmp-<name>-<random>``, created
    ``O_CREAT|O_EXCL``, mode 0600: never an existing path, never through a link planted at a
    predictable name), fsynced, then ``os.replace``-d onto the target in the same directory
    — a link at the target is replaced, never followed.  On any failure the staged file is
    removed."""
    parent, name = segments[:-1], segments[-1]
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY
    with walk_beneath(root, parent) as dir_fd:
        base = os.path.join(root, *parent)
        for _ in range(_TEMP_TRIES):
            temp = f".tmp-{name}-{secrets.token_hex(8)}"
            try:
                if FD_WALK:
                    fd = os.open(temp, flags, 0o600, dir_fd=dir_fd)
                else:
                    fd = os.open(os.path.join(base, temp), flags, 0o600)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(f"no free temporary name for {'/'.join(segments)}")
        try:
            try:
                write_all(fd, data)
            finally:
                os.close(fd)
            if FD_WALK:
                os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            else:
                os.replace(os.path.join(base, temp), os.path.join(base, name))
        except BaseException:
            with contextlib.suppress(OSError):
                if FD_WALK:
                    os.unlink(temp, dir_fd=dir_fd)
                else:
                    os.unlink(os.path.join(base, temp))
            raise


def move_beneath(root: str, src: tuple[str, ...], dst: tuple[str, ...]) -> None:
    """Move ``src`` to ``dst`` without ever replacing an existing ``dst``
    (``FileExistsError`` if it exists)."""
    if FD_WALK:
        with walk_beneath(root, src[:-1]) as sdir, walk_beneath(root, dst[:-1]) as ddir:
            os.link(src[-1], dst[-1], src_dir_fd=sdir, dst_dir_fd=ddir, follow_symlinks=False)
            os.unlink(src[-1], dir_fd=sdir)
        return
    target = os.path.join(root, *dst)
    if os.path.lexists(target):
        raise FileExistsError(target)
    os.rename(os.path.join(root, *src), target)
