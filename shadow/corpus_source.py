"""A fixture corpus as a lazy stream of scenario units (docs/fixtures.md, "Corpus sources").

:func:`open_source` opens, by what the path is:

* a **folder** in the ``legacy-capture/v1`` layout (``<scenario>/input.json``,
  ``<scenario>/<surface>.<entry>.json``, top-level metadata files such as
  ``MANIFEST.json``); a folder without scenario folders of its own but with a
  ``legacy-captures/`` folder is read there (the rule ``shadow run`` applies);
* a ``.tar``, ``.tar.gz`` / ``.tgz`` or ``.zip`` **archive** holding the same layout,
  optionally inside one wrapping folder (a single top-level folder without an
  ``input.json`` of its own), then optionally inside ``legacy-captures/``;
* a **sharded corpus**: a ``.json`` listing ``{"format": "shadow-corpus-shards/v1",
  "shards": [...]}`` of folders and archives, relative to the listing file.

Each source yields one :class:`Unit` per scenario — its ``*.json`` files read, not
parsed (:func:`shadow.fixtures.scenario_from_files` parses them) — one at a time: no more
than one scenario's bytes are held.  Nothing is ever extracted to disk.

Archives fail closed and never crash.  A member with an unsafe name (``..``, an absolute
name, a backslash, a drive letter, an empty component), a link, a device or another
special member, a member nested deeper than ``<scenario>/<file>`` and a member larger
than :data:`MAX_MEMBER_BYTES` quarantine the scenario they belong to (``Unit.error``), or
are listed by :meth:`CorpusSource.problems` when they belong to none.  An archive that
cannot be read (not an archive, a truncated or damaged tar or gzip stream, a zip without
its central directory) is an :class:`~shadow.errors.InputError` naming the archive and the
member; a damaged zip member (bad CRC, bad compressed data) quarantines its scenario only,
since the rest of a zip stays readable.
"""

from __future__ import annotations

import abc
import errno
import os
import re
import stat
import sys
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final

from shadow.boundary import MAX_STRING, loads, read_regular, regular_file_problem
from shadow.errors import FixtureError, InputError, describe
from shadow.fixtures import _is_dir, _top_level, read_scenario_folder

#: The largest archive member read (a capture, ``input.json`` or a metadata file): eight
#: times :data:`shadow.boundary.MAX_STRING`, room for the longest string strict JSON
#: accepts, escaped.  ``read_regular`` has no limit of its own; folders are read as today.
MAX_MEMBER_BYTES: Final = 8 * MAX_STRING
#: The most bytes one scenario of an archive may hold (the ``*.json`` members read).
MAX_UNIT_BYTES: Final = 4 * MAX_MEMBER_BYTES
SHARDS_FORMAT: Final = "shadow-corpus-shards/v1"
EXPECTED: Final = ("a fixture folder in the legacy-capture/v1 layout, a .tar, .tar.gz, .tgz "
                   "or .zip archive of one, or a shadow-corpus-shards/v1 listing (.json)")
_TAR_SUFFIXES: Final = (".tar", ".tar.gz", ".tgz")
_DRIVE: Final = re.compile(r"^[A-Za-z]:")
_SUBFOLDER: Final = ("only capture files in a scenario folder (the capture tool writes no "
                     "subfolder)")
_SAFE_NAME: Final = ("a safe archive member name (relative, '/'-separated, no '..', "
                     "backslash or drive letter)")


@dataclass(frozen=True, slots=True)
class Unit:
    """One scenario, read but not parsed."""

    name: str  # the scenario folder's name
    files: tuple[tuple[str, bytes], ...]  # (file name, bytes) of its *.json files, by name
    origin: str  # the shard or archive it came from (for messages), "" for a plain folder
    error: FixtureError | None = None  # a problem found reading it (files then empty)
    #: names of the scenario's regular archive members (any suffix, read or not); ``()``
    #: for a folder, whose files :meth:`CorpusSource.has_file` asks the file system for
    members: tuple[str, ...] = field(default=(), repr=False)


class CorpusSource(abc.ABC):
    """A corpus to read scenario by scenario; a context manager (:meth:`close`)."""

    label: str  # what to print: the path given
    root: str  # the corpus root (a folder's ``legacy-captures/`` when read there)
    origin: str  # Unit.origin of its units

    @abc.abstractmethod
    def count(self) -> int:
        """The number of scenario units, from a listing (no file body is read)."""

    @abc.abstractmethod
    def units(self, names: Container[str] | None = None) -> Iterator[Unit]:
        """The scenarios (only those ``names`` holds, when given), one at a time, in a
        deterministic order: by name for folders and zips, archive order for a tar."""

    @abc.abstractmethod
    def problems(self) -> list[FixtureError]:
        """Top-level entries that are quarantined (belonging to no scenario)."""

    @abc.abstractmethod
    def metadata_names(self) -> list[tuple[str, str]]:
        """(origin, name) of every top-level regular file (corpus metadata)."""

    @abc.abstractmethod
    def metadata(self, name: str, origin: str | None = None) -> bytes | None:
        """The top-level regular file ``name`` (of the shard ``origin``; default: the
        first that has it), None when absent; unreadable: an :class:`InputError`."""

    def metadata_files(self) -> list[tuple[str, str, bytes]]:
        """(origin, name, bytes) of every top-level regular file."""
        out = []
        for origin, name in self.metadata_names():
            data = self.metadata(name, origin)
            if data is not None:
                out.append((origin, name, data))
        return out

    def has_file(self, unit: Unit, name: str) -> bool:
        """Whether the scenario of ``unit`` holds a regular file ``name``."""
        return name in unit.members

    def nothing_to_judge(self) -> InputError | None:
        """The :class:`InputError` of a corpus with no scenario folder and no quarantined
        entry at all (nothing to judge is never a GO), None otherwise; it says when the
        path is one scenario folder given by mistake (``input.json`` at its top)."""
        if self.count() or self.problems():
            return None
        got = ("one scenario folder (input.json at its top)"
               if any(n == "input.json" for _, n in self.metadata_names())
               else "no scenario folder")
        return InputError(self.label, "", "a fixture folder holding <scenario>/input.json "
                          "folders", got)

    def close(self) -> None:  # noqa: B027  (nothing to release by default)
        """Release the open archive(s)."""

    def __enter__(self) -> CorpusSource:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


# --- folders --------------------------------------------------------------------------------


def _nested_root(root: Path) -> Path:
    """``shadow run``'s rule: a folder without a scenario folder of its own (one holding an
    ``input.json``) but with a ``legacy-captures/`` folder is read there."""
    nested = root / "legacy-captures"
    try:
        own = any(_is_dir(p) and (p / "input.json").is_file() for p in root.iterdir())
    except OSError:
        return root
    return nested if not own and _is_dir(nested) else root


class FolderSource(CorpusSource):
    """A corpus folder, read as :func:`shadow.fixtures.load_scenario` reads it."""

    def __init__(self, path: Path, origin: str = "") -> None:
        self.label = str(path)
        self._root = _nested_root(path)
        self.root = str(self._root)
        self.origin = origin
        dirs, self._odd, files = _top_level(self._root)
        self._dirs = [p.name for p in dirs]
        self._files = [p.name for p in files]

    def count(self) -> int:
        return len(self._dirs)

    def units(self, names: Container[str] | None = None) -> Iterator[Unit]:
        for name in self._dirs:
            if names is not None and name not in names:
                continue
            try:
                files = tuple(sorted(read_scenario_folder(self._root / name, name)))
            except FixtureError as exc:
                yield Unit(name, (), self.origin, exc)
                continue
            yield Unit(name, files, self.origin)

    def problems(self) -> list[FixtureError]:
        return list(self._odd)

    def metadata_names(self) -> list[tuple[str, str]]:
        return [(self.origin, n) for n in self._files]

    def metadata(self, name: str, origin: str | None = None) -> bytes | None:
        if name not in self._files or origin not in (None, self.origin):
            return None
        return read_regular(self._root / name, name)

    def has_file(self, unit: Unit, name: str) -> bool:
        try:
            return (self._root / unit.name / name).is_file()
        except (OSError, ValueError):
            return False


# --- archives: one member list, classified once ---------------------------------------------


@dataclass(frozen=True, slots=True)
class _Member:
    name: str  # as the archive spells it
    kind: str  # "file", "dir", or what else it is ("a symlink", "a device", …)
    size: int
    ref: Any  # what the archive's reader needs (a ZipInfo, a tar data offset)


def _shown(name: str) -> str:
    """A member name fit for a message (control characters escaped, at most 200)."""
    text = name if name.isprintable() else repr(name)[1:-1]
    return text if len(text) <= 200 else text[:200] + "…"


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
            raise InputError(path, "", "a readable tar archive",
                             f"{at} ({type(exc).__name__}: {exc})") from None
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


# --- shards ---------------------------------------------------------------------------------


class ShardedSource(CorpusSource):
    """A ``shadow-corpus-shards/v1`` listing: its shards' units in listing order (a scenario
    name two shards hold is yielded twice, with each shard's origin)."""

    def __init__(self, path: Path) -> None:
        self.label = self.root = str(path)
        self.origin = ""
        self._shards: list[CorpusSource] = []
        try:
            for origin, shard in _shard_paths(path):
                self._shards.append(_open_kind(shard, origin, listing=False))
        except BaseException:
            self.close()
            raise

    def count(self) -> int:
        return sum(s.count() for s in self._shards)

    def units(self, names: Container[str] | None = None) -> Iterator[Unit]:
        for shard in self._shards:
            yield from shard.units(names)

    def problems(self) -> list[FixtureError]:
        return [FixtureError(e.source, e.pointer, e.expected, f"{e.got} (in {s.origin})")
                for s in self._shards for e in s.problems()]

    def metadata_names(self) -> list[tuple[str, str]]:
        return [n for s in self._shards for n in s.metadata_names()]

    def metadata(self, name: str, origin: str | None = None) -> bytes | None:
        for shard in self._shards:
            if origin in (None, shard.origin):
                data = shard.metadata(name, origin)
                if data is not None:
                    return data
        return None

    def has_file(self, unit: Unit, name: str) -> bool:
        return any(s.has_file(unit, name) for s in self._shards if s.origin == unit.origin)

    def close(self) -> None:
        for shard in self._shards:
            shard.close()


def _shard_paths(path: Path) -> list[tuple[str, Path]]:
    """(origin, path) of every shard a listing names, each existing and no listing."""
    doc: Any = loads(read_regular(path), path)
    if not isinstance(doc, dict):
        raise InputError(path, "", f"a {SHARDS_FORMAT} listing (an object)", "another value")
    if doc.get("format") != SHARDS_FORMAT:
        raise InputError(path, "/format", repr(SHARDS_FORMAT),
                         "nothing" if "format" not in doc else describe(doc["format"]))
    for key in doc:
        if key not in ("format", "shards"):
            raise InputError(path, f"/{key}", "only the fields format and shards",
                             "another field")
    shards = doc.get("shards")
    if not isinstance(shards, list) or not shards:
        raise InputError(path, "/shards", "a non-empty array of shard paths",
                         "nothing" if shards is None else describe(shards))
    out: list[tuple[str, Path]] = []
    seen: dict[str, int] = {}
    for i, rel in enumerate(shards):
        ptr = f"/shards/{i}"
        if not isinstance(rel, str) or not rel:
            raise InputError(path, ptr, "a shard path (a non-empty string)", describe(rel))
        shard = path.parent / rel
        if Path(rel).is_absolute() or _DRIVE.match(rel):
            raise InputError(path, ptr, "a shard path relative to the listing file",
                             "an absolute path")
        kind = _kind(shard)
        if kind is None:
            raise InputError(path, ptr, "an existing shard (a folder, .tar, .tar.gz, .tgz or "
                             ".zip archive) relative to the listing file",
                             "no such folder or file")
        if kind == "listing":
            raise InputError(path, ptr, "a folder or an archive (a listing inside a listing "
                             "is refused)", "a shard listing")
        if kind == "unknown":
            raise InputError(path, ptr, "a folder, .tar, .tar.gz, .tgz or .zip archive",
                             f"a file named {_shown(shard.name)}")
        key = os.path.normcase(os.path.realpath(shard))
        if key in seen:
            raise InputError(path, ptr, "each shard once", f"the shard of /shards/{seen[key]}")
        seen[key] = i
        out.append((rel, shard))
    return out


def _kind(path: Path) -> str | None:
    """folder / tar / zip / listing / unknown by what the path is (None: nothing there)."""
    if _is_dir(path):
        return "folder"
    if not os.path.lexists(path):
        return None
    lower = path.name.lower()
    if lower.endswith(_TAR_SUFFIXES):
        return "tar"
    if lower.endswith(".zip"):
        return "zip"
    if lower.endswith(".json"):
        return "listing"
    return "unknown"


def _open_kind(path: Path, origin: str | None, listing: bool = True) -> CorpusSource:
    kind = _kind(path)
    if kind is None:
        raise InputError(path, "", EXPECTED, "no such folder or file")
    if kind == "folder":
        return FolderSource(path, "" if origin is None else origin)
    problem = regular_file_problem(path)
    if problem is not None:
        raise InputError(path, "", EXPECTED, problem)
    openers: dict[str, Callable[[Path, str | None], CorpusSource]] = {
        "tar": TarSource, "zip": ZipSource}
    if kind in openers:
        return openers[kind](path, origin)
    if kind == "listing" and listing:
        return ShardedSource(path)
    raise InputError(path, "", EXPECTED, f"a file named {_shown(path.name)}")


def open_source(path: str | Path) -> CorpusSource:
    """The corpus at ``path`` — a folder, an archive or a shard listing, by what it is
    (module docstring); a missing path, another kind of file, an unreadable archive or a
    bad listing is an :class:`InputError`."""
    return _open_kind(Path(path), None)


__all__ = ["EXPECTED", "MAX_MEMBER_BYTES", "MAX_UNIT_BYTES", "SHARDS_FORMAT", "ArchiveSource",
           "CorpusSource", "FolderSource", "ShardedSource", "TarSource", "Unit", "ZipSource",
           "open_source"]
