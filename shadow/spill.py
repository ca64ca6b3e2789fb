"""Lists kept on disk (spill files), and JSON writers that splice them in byte for byte.

``shadow run`` builds ``report.json`` and ``evidence.json`` for 100,000+ sessions in bounded
memory (ADR 0017): each big list (cases, divergences, per-case rows) is appended, fixture by
fixture, to a :class:`Spill` — a JSON Lines file — and the documents hold the spill where the
list would be.  :func:`write_pretty` then writes exactly ``json.dumps(doc, sort_keys=True,
indent=1, ensure_ascii=False)`` and :func:`iter_canonical` yields exactly the bytes of
``shadow.evidence.canonical(doc)``, as if every spill (or :meth:`Spill.view`) were the list of
its elements, streaming the elements one by one, so the digests do not change.

Why this is exact: a subtree without a spill is written by one ``json.dumps`` call.  With
``indent=1`` the encoder writes a value nested at depth *d* as it writes it alone, except that
every line after the first starts with *d* more spaces; and every raw newline in its output is
one of those line breaks, because the encoder writes a newline inside a string as ``\\n``.
So ``text.replace("\\n", "\\n" + " " * d)`` is that value's text at depth *d*.  Only the
containers that hold a spill are written by hand, with the encoder's own punctuation (with an
indent: ``","`` + newline between items and ``": "`` after a key; canonical: ``","`` and
``":"``; ``[]`` / ``{}`` when empty) and its key order (``sorted(d.items())``).  A document
without a spill takes one gate (:func:`is_spliced`) and then the plain ``json.dumps`` call:
the exact fallback is the fast path.  ``tests/shadow/test_spill.py`` proves spliced = whole
for random documents.

A spill holds what ``json.loads`` gives back for each element: tuples come back as lists and
keys as strings (so give it string keys: ``{2: 0, 10: 0}`` would come back in another order).
A value ``json.dumps`` refuses, or a string with a lone surrogate (not UTF-8), raises at
``append`` and leaves the file as it was.  Nothing decoded is kept: every read streams the
file again, so ``s[i]`` is O(i) and a slice is read in one pass.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import operator
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO, overload

__all__ = [
    "Folder",
    "Spill",
    "SpillView",
    "Stream",
    "dumps_pretty",
    "is_spliced",
    "iter_canonical",
    "sha256_canonical",
    "write_pretty",
]

#: the size (in characters) at which the streaming writers hand a chunk on
CHUNK_CHARS = 1 << 16


def _line(value: Any) -> str:
    """One spill-file line: the canonical JSON of ``value``."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


class _Spilled(Sequence[Any]):
    """What a spill and its views share: a re-iterable sequence read from a file.

    Subclasses give ``__len__``, ``__iter__`` and ``__reversed__``, each streaming; nothing here
    holds more than the elements asked for.  Unhashable (it defines ``__eq__``), so never a key.
    """

    #: whether the elements are decoded JSON lines as they are (so hold no spill)
    _plain: bool = False

    def view(self, fn: Callable[[Any], Any]) -> SpillView:
        """A lazy, re-iterable sequence of ``fn(element)``, applied on every read."""
        return SpillView(self, fn)

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        n = len(self)
        if isinstance(index, slice):
            picked = range(n)[index]
            if not picked:
                return []
            if picked.step > 0:
                return list(itertools.islice(iter(self), picked.start, picked.stop, picked.step))
            out = list(itertools.islice(iter(self), picked[-1], picked[0] + 1, -picked.step))
            out.reverse()
            return out
        i = operator.index(index)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"{type(self).__name__} index out of range")
        return next(itertools.islice(iter(self), i, None))

    def __bool__(self) -> bool:
        return len(self) > 0

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes, bytearray)):
            return NotImplemented
        if len(self) != len(other):
            return False
        return all(a is b or a == b for a, b in zip(self, other, strict=True))

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        """The first position of ``value`` in ``[start, stop)``, in one pass of the file."""
        lo, hi, _ = slice(start, stop).indices(len(self))
        for i, element in enumerate(itertools.islice(iter(self), lo, hi), lo):
            if element is value or element == value:
                return i
        raise ValueError(f"value is not in the {type(self).__name__}")


class Spill(_Spilled):
    """A list of JSON values in a JSON Lines file: one canonical ``json.dumps`` a line, UTF-8.

    ``Spill(path)`` creates (or truncates) the file; :meth:`append` / :meth:`extend` add to it
    until :meth:`close`, after which it is read-only.  Reading while it is still open sees
    every element appended so far (each read flushes first and reads that many lines).
    """

    _plain = True

    def __init__(self, path: Path, *, owner: object = None) -> None:
        self._owner = owner  # what must live as long as the file (a Folder), if anything
        self._path = Path(path)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: TextIO | None = self._path.open("w", encoding="utf-8", newline="\n")
        self._len = 0

    @classmethod
    def of(cls, path: Path, values: Iterable[Any]) -> Spill:
        """A closed spill of ``values``."""
        spill = cls(path)
        try:
            spill.extend(values)
        finally:
            spill.close()
        return spill

    @property
    def path(self) -> Path:
        return self._path

    @property
    def closed(self) -> bool:
        return self._fh is None

    def append(self, value: Any) -> None:
        if self._fh is None:
            raise ValueError(f"{self._path}: spill is closed (read-only)")
        self._fh.write(_line(value) + "\n")
        self._len += 1

    def extend(self, values: Iterable[Any]) -> None:
        for value in values:
            self.append(value)

    def close(self) -> None:
        """End writing (again is a no-op)."""
        if self._fh is not None:
            fh, self._fh = self._fh, None
            fh.close()

    def __enter__(self) -> Spill:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Any]:
        if self._fh is not None:
            self._fh.flush()
        return self._read(self._len)

    def _read(self, n: int) -> Iterator[Any]:
        # newline="\n": only "\n" ends a line; json.dumps escapes "\n" and "\r" in strings but
        # writes U+2028, U+2029 and U+0085 as they are, and str.splitlines would split there
        read = 0
        with self._path.open(encoding="utf-8", newline="\n") as fh:
            for line in itertools.islice(fh, n):
                yield json.loads(line)
                read += 1
        if read < n:
            raise OSError(f"{self._path}: spill file holds {read} lines, expected {n}")

    def __reversed__(self) -> Iterator[Any]:
        if self._fh is not None:
            self._fh.flush()
        return self._read_reversed(self._len)

    def _read_reversed(self, n: int) -> Iterator[Any]:
        # the line starts (8 bytes an element, not the elements), then each line from its start
        starts = array("q")
        with self._path.open("rb") as fh:
            offset = 0
            for line in itertools.islice(fh, n):
                starts.append(offset)
                offset += len(line)
            if len(starts) < n:
                raise OSError(f"{self._path}: spill file holds {len(starts)} lines, expected {n}")
            for start in reversed(starts):
                fh.seek(start)
                yield json.loads(fh.readline().decode("utf-8"))

    def __repr__(self) -> str:
        return f"Spill({str(self._path)!r}, len={self._len})"


class SpillView(_Spilled):
    """``fn`` applied to each element of a spill (or of another view) on every read."""

    def __init__(self, source: _Spilled, fn: Callable[[Any], Any]) -> None:
        self._source = source
        self._fn = fn

    def __len__(self) -> int:
        return len(self._source)

    def __iter__(self) -> Iterator[Any]:
        return map(self._fn, self._source)

    def __reversed__(self) -> Iterator[Any]:
        return map(self._fn, reversed(self._source))

    def __repr__(self) -> str:
        name = getattr(self._fn, "__qualname__", type(self._fn).__name__)
        return f"SpillView({self._source!r}, fn={name})"


class Stream(_Spilled):
    """A re-iterable sequence of what ``make()`` yields each time it is called (rows read
    again from the run's shards, say), spliced by the writers as a spill is.  Its elements
    must hold no spill.  ``len`` is ``n`` when given, else one counting pass."""

    _plain = True

    def __init__(self, make: Callable[[], Iterable[Any]], n: int | None = None) -> None:
        self._make = make
        self._n = n

    def __len__(self) -> int:
        return self._n if self._n is not None else sum(1 for _ in self._make())

    def __iter__(self) -> Iterator[Any]:
        return iter(self._make())

    def __reversed__(self) -> Iterator[Any]:
        items: list[Any] = list(self._make())  # materialises: never used by the writers
        return iter(items[::-1])

    def __repr__(self) -> str:
        return f"Stream(len={self._n if self._n is not None else '?'})"


class Folder:
    """A temporary folder of spill files that exists as long as this object or any spill
    made by :meth:`spill` does (the files are removed when the last goes, or at exit)."""

    def __init__(self, parent: Path | None = None) -> None:
        import shutil
        import tempfile
        import weakref

        if parent is not None:
            Path(parent).mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=".shadow-spill-", dir=parent))
        self._done = weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)
        self._made: list[weakref.ref[Spill]] = []

    def spill(self, name: str) -> Spill:
        """A new spill file ``name.jsonl`` in this folder, keeping the folder alive."""
        import weakref

        made = Spill(self.path / f"{name}.jsonl", owner=self)
        self._made.append(weakref.ref(made))
        return made

    def cleanup(self) -> None:
        """Close every spill still open and remove the folder now (its spills can no
        longer be read): what a run that failed does, so that nothing is left behind —
        on Windows an open file could not be removed."""
        for ref in self._made:
            made = ref()
            if made is not None:
                made.close()
        self._done()


# --- the writers ---------------------------------------------------------------------------


_CONTAINERS = (dict, list, tuple, _Spilled)


def is_spliced(value: Any) -> bool:
    """Whether a spill or a view occurs anywhere in ``value`` (through dicts, lists, tuples)."""
    if isinstance(value, _Spilled):
        return True
    if isinstance(value, dict):
        children: Iterable[Any] = value.values()
    elif isinstance(value, (list, tuple)):
        children = value
    else:
        return False
    # a plain loop, not any(genexpr): this gate runs on every document, and the loop is ~1.5x
    # faster on a 20,000-row one
    for child in children:  # noqa: SIM110
        if isinstance(child, _CONTAINERS) and is_spliced(child):
            return True
    return False


class _Layout:
    """How one writer lays out JSON: the ``json.dumps`` of a plain value at a depth, and the
    punctuation of a container written by hand."""

    __slots__ = ("_encode", "key_sep", "pretty")

    def __init__(self, *, pretty: bool) -> None:
        self.pretty = pretty
        if pretty:
            encoder = json.JSONEncoder(sort_keys=True, indent=1, ensure_ascii=False)
        else:
            encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        # one encoder for the whole document: json.dumps(v, **kw) is JSONEncoder(**kw).encode(v)
        self._encode = encoder.encode
        self.key_sep = ": " if pretty else ":"

    def dump(self, value: Any, depth: int) -> str:
        text = self._encode(value)
        return text.replace("\n", "\n" + " " * depth) if self.pretty and depth else text

    def punctuation(self, depth: int, opener: str, closer: str) -> tuple[str, str, str]:
        """(before the first item, between items, after the last item) at ``depth``."""
        if not self.pretty:
            return opener, ",", closer
        inner = "\n" + " " * (depth + 1)
        return opener + inner, "," + inner, "\n" + " " * depth + closer


def _key(key: Any) -> str:
    if isinstance(key, str):
        return json.dumps(key, ensure_ascii=False)
    # a number, boolean or null key: the encoder's own conversion (a bad key raises as it does)
    return json.dumps({key: 0}, ensure_ascii=False, separators=(",", ":"))[1:-3]


def _spliced_parts(value: Any, depth: int, layout: _Layout) -> Iterator[str]:
    """The text of ``value``, which holds a spill, in pieces (a spill's in ~CHUNK_CHARS)."""
    if isinstance(value, _Spilled):
        yield from _spill_parts(value, depth, layout)
        return
    if isinstance(value, dict):
        first, between, last = layout.punctuation(depth, "{", "}")
        for i, (key, child) in enumerate(sorted(value.items())):
            head = (between if i else first) + _key(key) + layout.key_sep
            if is_spliced(child):
                yield head
                yield from _spliced_parts(child, depth + 1, layout)
            else:
                yield head + layout.dump(child, depth + 1)
        yield last
        return
    first, between, last = layout.punctuation(depth, "[", "]")
    for i, child in enumerate(value):
        if is_spliced(child):
            yield between if i else first
            yield from _spliced_parts(child, depth + 1, layout)
        else:
            yield (between if i else first) + layout.dump(child, depth + 1)
    yield last


def _spill_parts(spill: _Spilled, depth: int, layout: _Layout) -> Iterator[str]:
    first, between, last = layout.punctuation(depth, "[", "]")
    buf: list[str] = []
    size = 0
    sep = first
    empty = True
    # a spill's own elements are decoded JSON lines; a view's may hold a spill again
    plain = spill._plain
    for element in spill:
        empty = False
        if plain or not is_spliced(element):
            text = layout.dump(element, depth + 1)
            buf.append(sep)
            buf.append(text)
            size += len(text)
            if size >= CHUNK_CHARS:
                yield "".join(buf)
                buf.clear()
                size = 0
        else:
            buf.append(sep)
            yield "".join(buf)
            buf.clear()
            size = 0
            yield from _spliced_parts(element, depth + 1, layout)
        sep = between
    buf.append("[]" if empty else last)
    yield "".join(buf)


def _stream(value: Any, *, pretty: bool) -> Iterator[str]:
    """The text of a spliced ``value`` in chunks of about CHUNK_CHARS characters."""
    buf: list[str] = []
    size = 0
    for part in _spliced_parts(value, 0, _Layout(pretty=pretty)):
        buf.append(part)
        size += len(part)
        if size >= CHUNK_CHARS:
            yield "".join(buf)
            buf.clear()
            size = 0
    if buf:
        yield "".join(buf)


def write_pretty(value: Any, fh: TextIO) -> None:
    """Write ``json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False)`` into ``fh``,
    each spill or view in ``value`` written as the list of its elements (no final newline)."""
    if not is_spliced(value):
        fh.write(json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False))
        return
    for chunk in _stream(value, pretty=True):
        fh.write(chunk)


def dumps_pretty(value: Any) -> str:
    """:func:`write_pretty` into a string (for tests and small documents)."""
    out = io.StringIO()
    write_pretty(value, out)
    return out.getvalue()


def iter_canonical(value: Any) -> Iterator[bytes]:
    """Chunks whose concatenation is ``shadow.evidence.canonical(value)`` — ``json.dumps(value,
    sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` in UTF-8 — with each spill or
    view in ``value`` as the list of its elements.  Without one: exactly one chunk."""
    if not is_spliced(value):
        yield json.dumps(value, sort_keys=True, separators=(",", ":"),
                         ensure_ascii=False).encode("utf-8")
        return
    for chunk in _stream(value, pretty=False):
        yield chunk.encode("utf-8")


def sha256_canonical(value: Any, tag: bytes = b"") -> str:
    """``"sha256:"`` + the hex sha256 of ``tag`` + :func:`iter_canonical` (as
    ``shadow.evidence.digest``), fed chunk by chunk."""
    h = hashlib.sha256(tag)
    for chunk in iter_canonical(value):
        h.update(chunk)
    return "sha256:" + h.hexdigest()
