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
than :data:`shadow.corpus_archive.MAX_MEMBER_BYTES` quarantine the scenario they belong to
(``Unit.error``), or are listed by :meth:`CorpusSource.problems` when they belong to
none.  An archive that cannot be read (not an archive, a truncated or damaged tar or gzip
stream, a zip without its central directory) is an :class:`~shadow.errors.InputError`
naming the archive and the member; a damaged zip member (bad CRC, bad compressed data)
quarantines its scenario only, since the rest of a zip stays readable.  The archive
readers are :mod:`shadow.corpus_archive`.
"""

from __future__ import annotations

import abc
import os
import re
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from shadow.boundary import loads, read_regular, regular_file_problem
from shadow.errors import FixtureError, InputError, describe
from shadow.fixtures import _is_dir, _top_level, read_scenario_folder

SHARDS_FORMAT: Final = "shadow-corpus-shards/v1"
EXPECTED: Final = ("a fixture folder in the legacy-capture/v1 layout, a .tar, .tar.gz, .tgz "
                   "or .zip archive of one, or a shadow-corpus-shards/v1 listing (.json)")
_TAR_SUFFIXES: Final = (".tar", ".tar.gz", ".tgz")
_DRIVE: Final = re.compile(r"^[A-Za-z]:")


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


def _shown(name: str) -> str:
    """A member name fit for a message (control characters escaped, at most 200)."""
    text = name if name.isprintable() else repr(name)[1:-1]
    return text if len(text) <= 200 else text[:200] + "…"


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
    from shadow.corpus_archive import TarSource, ZipSource  # archives import this module

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


__all__ = ["EXPECTED", "SHARDS_FORMAT", "CorpusSource", "FolderSource", "ShardedSource", "Unit",
           "open_source"]
