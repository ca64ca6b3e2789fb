"""Archive corpus sources: ``.tar``, ``.tar.gz`` / ``.tgz`` and ``.zip`` (the rules are
:mod:`shadow.corpus_source`'s module docstring).

One member list per archive, each member classified once (a file, a folder, or what else
it is); members are checked (unsafe names, links, devices, depth, size) and read, never
extracted.  A compressed tar is read in one forward pass.
"""

from __future__ import annotations

import abc
import errno
import os
import stat
import sys
import tarfile
import zipfile
import zlib
from collections.abc import Container, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from shadow.boundary import MAX_STRING
from shadow.corpus_source import (
    _DRIVE,
    CorpusSource,
    Unit,
    _shown,
)
from shadow.errors import FixtureError, InputError

#: The largest archive member read (a capture, ``input.json`` or a metadata file): eight
#: times :data:`shadow.boundary.MAX_STRING`, room for the longest string strict JSON
#: accepts, escaped.  ``read_regular`` has no limit of its own; folders are read as today.
MAX_MEMBER_BYTES: Final = 8 * MAX_STRING
#: The most bytes one scenario of an archive may hold (the ``*.json`` members read).
MAX_UNIT_BYTES: Final = 4 * MAX_MEMBER_BYTES
_SUBFOLDER: Final = ("only capture files in a scenario folder (the capture tool writes no "
                     "subfolder)")
_SAFE_NAME: Final = ("a safe archive member name (relative, '/'-separated, no '..', "
                     "backslash or drive letter)")


# --- one member list, classified once -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Member:
    name: str  # as the archive spells it
    kind: str  # "file", "dir", or what else it is ("a symlink", "a device", …)
    size: int
    ref: Any  # what the archive's reader needs (a ZipInfo, a tar data offset)



def _hidden(name: str) -> bool:
    return name.startswith(".")


def _plain(part: str) -> bool:
    return bool(part) and part not in (".", "..") and "\\" not in part and \
        "\0" not in part and not _DRIVE.match(part)


def _split(name: str) -> tuple[tuple[str, ...], str | None]:
    """(the name's components, why it is unsafe or None); ``()`` for the archive root."""
    rest = name[:-1] if name.endswith("/") else name  # a zip folder
    while rest.startswith("./"):
        rest = rest[2:]
    if name and rest in ("", "."):
        return (), None
    parts = tuple(rest.split("/"))
    if not name:
        return parts, "an empty name"
    if "\\" in rest:
        return parts, "a backslash in the name"
    if rest.startswith("/"):
        return parts, "an absolute name"
    if _DRIVE.match(rest):
        return parts, "a drive letter"
    if "\0" in rest:
        return parts, "a NUL character in the name"
    if ".." in parts:
        return parts, "a '..' component"
    if any(p in ("", ".") for p in parts):
        return parts, "an empty or '.' component"
    return parts, None


def _prefix(members: list[tuple[tuple[str, ...], _Member]]) -> tuple[str, ...]:
    """The folder the corpus is in: an optional single wrapping folder (one top-level
    folder holding no ``input.json`` of its own), then ``legacy-captures/`` when that level
    has no scenario of its own (``shadow run``'s rule for folders)."""
    tops = {p[0] for p, _ in members if p and _plain(p[0]) and not _hidden(p[0])}
    prefix: tuple[str, ...] = ()
    if len(tops) == 1:
        (top,) = tops
        holds = any(p[0] == top and (len(p) > 1 or m.kind == "dir") for p, m in members)
        if holds and not any(p == (top, "input.json") for p, _ in members):
            prefix = (top,)
    n = len(prefix)
    own = any(len(p) == n + 2 and p[:n] == prefix and p[n + 1] == "input.json"
              and m.kind == "file" for p, m in members)
    nested = any(len(p) > n and p[:n] == prefix and p[n] == "legacy-captures"
                 and (len(p) > n + 1 or m.kind == "dir") for p, m in members)
    return (*prefix, "legacy-captures") if nested and not own else prefix


@dataclass(slots=True)
class _Group:
    """One scenario of an archive, before it is read."""

    name: str
    reads: list[tuple[str, _Member]] = field(default_factory=list)  # its *.json members
    members: list[str] = field(default_factory=list)  # its regular members' names
    errors: list[tuple[str, FixtureError]] = field(default_factory=list)  # (entry, problem)

    def refuse(self, entry: str, expected: str, got: str) -> None:
        self.errors.append((entry, FixtureError(f"{self.name}/{_shown(entry)}", "",
                                                expected, got)))


def _too_big(size: int) -> str | None:
    return f"{size} bytes" if size > MAX_MEMBER_BYTES else None


class ArchiveSource(CorpusSource):
    """What tar and zip archives share: the members classified into scenarios, metadata
    files and problems once, when opened (for a zip from its central directory, for a tar
    from a pass over its headers); bodies are read by :meth:`_read`."""

    kind = "archive"

    def __init__(self, path: Path, origin: str | None) -> None:
        self.label = self.root = str(path)
        self.origin = self.label if origin is None else origin
        self._groups: dict[str, _Group] = {}
        self._meta: dict[str, _Member] = {}
        self._problems: list[FixtureError] = []

    def _classify(self, listed: list[_Member], by_name: bool) -> None:
        split = [(_split(m.name), m) for m in listed]
        prefix = _prefix([(p, m) for (p, why), m in split if why is None])
        n = len(prefix)
        for (parts, why), m in split:
            rel = parts[n:] if parts[:n] == prefix else None
            if why is not None:
                if rel is not None and len(rel) > 1 and _plain(rel[0]) and not _hidden(rel[0]):
                    self._group(rel[0]).refuse("/".join(rel[1:]), _SAFE_NAME, why)
                else:
                    self._problem(m.name, _SAFE_NAME, why)
            elif rel:
                self._place(rel, m)
        if by_name:
            self._groups = dict(sorted(self._groups.items()))

    def _problem(self, name: str, expected: str, got: str) -> None:
        self._problems.append(FixtureError(_shown(name), "", expected, got))

    def _group(self, name: str) -> _Group:
        group = self._groups.get(name)
        if group is None:
            group = self._groups[name] = _Group(name)
        return group

    def _place(self, rel: tuple[str, ...], m: _Member) -> None:
        top = rel[0]
        if _hidden(top):
            return
        if len(rel) == 1:
            if m.kind == "dir":
                self._group(top)
            elif m.kind != "file":
                self._problem(top, "a scenario folder or a regular corpus metadata file",
                              f"{m.kind} member")
            elif (big := _too_big(m.size)) is not None:
                self._problem(top, f"a member of at most {MAX_MEMBER_BYTES} bytes", big)
            elif top in self._meta:
                self._problem(top, "one member of each name", "two members of that name")
            else:
                self._meta[top] = m
            return
        group, entry = self._group(top), rel[1]
        if _hidden(entry):
            return
        if len(rel) > 2 or m.kind == "dir":
            group.refuse(entry, _SUBFOLDER, "a folder")
        elif m.kind != "file":
            group.refuse(entry, "a regular file (no link, device or special member in a "
                         "corpus archive)", f"{m.kind} member")
        elif entry.lower().endswith(".json") and not entry.endswith(".json"):
            group.refuse(entry, "a capture named <surface>.<entry>.json (lower-case .json)",
                         "another spelling of .json")
        elif entry in group.members:
            group.refuse(entry, "one member of each name in a scenario",
                         "two members of that name")
        else:
            group.members.append(entry)
            if entry.endswith(".json"):
                if (big := _too_big(m.size)) is not None:
                    group.refuse(entry, f"a member of at most {MAX_MEMBER_BYTES} bytes", big)
                group.reads.append((entry, m))

    @staticmethod
    def _read_order(read: tuple[str, _Member]) -> Any:
        """The order a scenario's members are read in (the unit lists them by name)."""
        return (read[0] != "input.json", read[0])

    @abc.abstractmethod
    def _read(self, m: _Member, where: str) -> bytes:
        """The bytes of a regular member (``where``: its corpus-relative name): damage that
        leaves the rest of the archive readable is a :class:`FixtureError` naming
        ``where`` (its scenario is quarantined), other damage an :class:`InputError`
        naming the archive and the member."""

    def count(self) -> int:
        return len(self._groups)

    def problems(self) -> list[FixtureError]:
        return list(self._problems)

    def units(self, names: Container[str] | None = None) -> Iterator[Unit]:
        for group in self._groups.values():
            if names is not None and group.name not in names:
                continue
            yield self._unit(group)

    def _unit(self, group: _Group) -> Unit:
        members = tuple(sorted(group.members))
        if group.errors:
            return Unit(group.name, (), self.origin, min(group.errors, key=lambda e: e[0])[1],
                        members)
        total = sum(m.size for _, m in group.reads)
        if total > MAX_UNIT_BYTES:
            err = FixtureError(f"{group.name}/input.json", "", f"a scenario of at most "
                               f"{MAX_UNIT_BYTES} bytes", f"{total} bytes")
            return Unit(group.name, (), self.origin, err, members)
        files = []
        for entry, m in sorted(group.reads, key=self._read_order):
            try:
                files.append((entry, self._read(m, f"{group.name}/{entry}")))
            except FixtureError as exc:  # only this scenario is damaged
                return Unit(group.name, (), self.origin, exc, members)
        return Unit(group.name, tuple(sorted(files)), self.origin, None, members)

    def metadata_names(self) -> list[tuple[str, str]]:
        return [(self.origin, n) for n in sorted(self._meta)]

    def metadata(self, name: str, origin: str | None = None) -> bytes | None:
        m = self._meta.get(name)
        if m is None or origin not in (None, self.origin):
            return None
        return self._read(m, name)


def _open_regular(path: Path) -> IO[bytes]:
    """``path`` opened for reading when it is a regular file (a FIFO is never opened)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        got = "permission denied" if isinstance(exc, PermissionError) else (
            "a symlink loop" if exc.errno == errno.ELOOP else type(exc).__name__)
        raise InputError(path, "", "a regular readable archive file", got) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(path, "", "a regular readable archive file", "a special file")
    if sys.platform != "win32" and hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


_ZIP_ERRORS: Final = (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError,
                      EOFError, OSError, ValueError)


class ZipSource(ArchiveSource):
    """A ``.zip`` archive: its central directory is the listing (no body read to count)."""

    def __init__(self, path: Path, origin: str | None = None) -> None:
        super().__init__(path, origin)
        self._file = _open_regular(path)
        try:
            self._zip = zipfile.ZipFile(self._file)
            self._classify([self._member(i) for i in self._zip.infolist()], by_name=True)
        except _ZIP_ERRORS as exc:
            self._file.close()
            raise InputError(path, "", "a readable zip archive",
                             f"{type(exc).__name__}: {exc}") from None
        except BaseException:
            self._file.close()
            raise

    @staticmethod
    def _member(info: zipfile.ZipInfo) -> _Member:
        mode = info.external_attr >> 16 if info.create_system == 3 else 0
        kind = "file"
        if stat.S_ISLNK(mode):
            kind = "a symlink"
        elif info.filename.endswith("/") or stat.S_ISDIR(mode):
            kind = "dir"
        elif stat.S_IFMT(mode) and not stat.S_ISREG(mode):
            kind = "a special"
        elif info.flag_bits & 0x1:
            kind = "an encrypted"
        return _Member(info.filename, kind, info.file_size, info)

    def _read(self, m: _Member, where: str) -> bytes:
        try:
            with self._zip.open(m.ref) as f:
                data = f.read(MAX_MEMBER_BYTES + 1)
        except _ZIP_ERRORS as exc:
            raise FixtureError(where, "", "a readable archive member", f"a damaged member "
                               f"of {self.origin} ({type(exc).__name__}: {exc})") from None
        if len(data) > MAX_MEMBER_BYTES:
            raise FixtureError(where, "", f"a member of at most {MAX_MEMBER_BYTES} bytes",
                               "more bytes than its header says")
        return data

    def close(self) -> None:
        self._zip.close()
        self._file.close()


_TAR_ERRORS: Final = (tarfile.TarError, EOFError, OSError, zlib.error, ValueError)


def _tar_kind(info: tarfile.TarInfo) -> str:
    if info.isdir():
        return "dir"
    if info.issym():
        return "a symlink"
    if info.islnk():
        return "a hard link"
    if info.ischr() or info.isblk():
        return "a device"
    if info.isfifo():
        return "a FIFO"
    if info.issparse():
        return "a sparse"
    return "file" if info.isreg() else "a special"


class TarSource(ArchiveSource):
    """A ``.tar``, ``.tar.gz`` or ``.tgz`` archive: one pass over its headers when opened
    (bodies skipped), then each scenario's members read in archive order.

    A compressed stream cannot seek backwards without decompressing again from byte 0, so
    a compressed tar is read in one forward pass: the members of each scenario by offset,
    and a member of a later scenario passed on the way (a scenario spread through the
    archive) is held until its scenario is yielded.  Only a new pass over the units (or a
    metadata file behind the stream) goes back."""

    def __init__(self, path: Path, origin: str | None = None) -> None:
        super().__init__(path, origin)
        self._file = _open_regular(path)
        self._ahead: dict[int, bytes] = {}  # offset -> bytes read ahead (compressed)
        self._plan: list[_Member] = []  # the pass's members still to read, by offset
        last = ""
        try:
            self._tar = tarfile.open(fileobj=self._file, mode="r:*")  # noqa: SIM115
            listed = []
            while (info := self._tar.next()) is not None:
                self._tar.members.clear()  # type: ignore[attr-defined]  # or it keeps all
                last = info.name
                listed.append(_Member(info.name, _tar_kind(info), info.size, info.offset_data))
            self._check_end(last)
            self._classify(listed, by_name=False)
            assert self._tar.fileobj is not None
            self._tar.fileobj.seek(0)  # the first pass then reads forward only
        except _TAR_ERRORS as exc:
            self.close()
            at = f"damaged or truncated after member {_shown(last)}" if last else \
                "not a tar archive, or damaged at its first member"
            first = (str(exc).splitlines() or [""])[0].rstrip(":")  # tarfile lists methods
            raise InputError(path, "", "a readable tar archive",
                             f"{at} ({type(exc).__name__}: {first})") from None
        except BaseException:  # an InputError of _check_end included
            self.close()
            raise
        self._compressed = self._tar.fileobj is not self._file

    def _check_end(self, last: str) -> None:
        """tarfile stops quietly at a header it cannot read: what follows the last member
        must be the end-of-archive marker (zero blocks), else the archive is damaged."""
        f = self._tar.fileobj
        assert f is not None
        f.seek(self._tar.offset)
        seen = 0
        while chunk := f.read(1 << 16):
            if chunk.strip(b"\0"):
                seen = -1
                break
            seen += len(chunk)
        if seen < tarfile.BLOCKSIZE:
            after = f"after member {_shown(last)}" if last else "at its start"
            raise InputError(self.label, "", "a readable tar archive (ending with its "
                             "end-of-archive marker)", "unreadable data " + after
                             if seen < 0 else "a truncated archive " + after)

    @staticmethod
    def _read_order(read: tuple[str, _Member]) -> Any:
        return read[1].ref  # by offset: no seek back within a scenario

    def units(self, names: Container[str] | None = None) -> Iterator[Unit]:
        if self._compressed:  # the members this pass reads, by offset
            self._ahead.clear()
            self._plan = sorted((m for g in self._groups.values()
                                 if (names is None or g.name in names) and not g.errors
                                 and sum(m.size for _, m in g.reads) <= MAX_UNIT_BYTES
                                 for _, m in g.reads), key=lambda m: -m.ref)
        yield from super().units(names)

    def _read(self, m: _Member, where: str) -> bytes:
        if not self._compressed:
            return self._seek_read(m)
        if (data := self._ahead.pop(m.ref, None)) is not None:
            return data
        while self._plan and self._plan[-1].ref < m.ref:  # passed on the way: kept
            n = self._plan.pop()
            self._ahead[n.ref] = self._seek_read(n)
        if self._plan and self._plan[-1].ref == m.ref:
            self._plan.pop()
        return self._seek_read(m)

    def _seek_read(self, m: _Member) -> bytes:
        f = self._tar.fileobj
        assert f is not None
        try:
            if f.tell() != m.ref:
                f.seek(m.ref)
            data = f.read(m.size)
        except _TAR_ERRORS as exc:
            data, why = b"", f" ({type(exc).__name__}: {exc})"
        else:
            why = ""
        if len(data) != m.size:
            raise InputError(self.label, "", "a readable tar archive",
                             f"damaged or truncated at member {_shown(m.name)}{why}")
        return bytes(data)

    def close(self) -> None:
        if (tar := getattr(self, "_tar", None)) is not None:
            tar.close()
        self._file.close()
