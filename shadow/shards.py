"""The run's result shards: the map's rows appended in batches, read back whole or merged.

Results arrive from the executor in any order and are never all held in memory: every
``batch`` units the buffered rows of each table are sorted by ``fixture`` (Python str
order, stable: one fixture's rows keep their order) and written as one more part file
under ``<run folder>/.shards/<table>/part-NNNNN.<ext>``.  With the ``[scale]`` extra
installed the parts are Parquet (pyarrow, row groups of :data:`ROW_GROUP` rows); without it
they are JSON Lines — same rows, same reduction, so the reports do not depend on which (a
test checks it).  Two readers:

* :func:`frame` reads one table whole with pandas, unsorted (the reducer sorts by value,
  so neither the completion order nor the part boundaries reach a report);
* :func:`scan` merges the sorted parts of the selected tables (``heapq.merge``) and yields
  one fixture at a time, in name order, with all its rows: about one row group (Parquet)
  or one row (JSON Lines) per part is resident, never a whole table.  It needs parts
  written by this writer (sorted) and raises :class:`ValueError` on an unsorted one.

Tables (every column a string unless said; :func:`scan` gives a missing value as ``None``):

* ``fixtures``: ``fixture``, ``status`` (judged | quarantined | crashed | no_cassette),
  ``origin``,
  ``digest``, ``content_key``, ``synthetic`` (bool), ``comparisons`` (int)
* ``cases``: ``fixture``, ``surface``
* ``divergences`` and ``legacy_defects``: ``fixture``, ``wire`` (the divergence's JSON)
* ``quarantine``: ``fixture``, ``source``, ``pointer``, ``expected``, ``got``
* ``noise``: ``fixture``, ``rule``, ``values`` (int)
"""

from __future__ import annotations

import heapq
import importlib.util
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any, Final

import pandas as pd

from shadow.mapstep import UnitResult, wire_json

COLUMNS: Final[Mapping[str, tuple[tuple[str, str], ...]]] = {
    "fixtures": (("fixture", "str"), ("status", "str"), ("origin", "str"),
                 ("digest", "str"), ("content_key", "str"), ("synthetic", "bool"),
                 ("comparisons", "int")),
    "cases": (("fixture", "str"), ("surface", "str")),
    "divergences": (("fixture", "str"), ("wire", "str")),
    "legacy_defects": (("fixture", "str"), ("wire", "str")),
    "quarantine": (("fixture", "str"), ("source", "str"), ("pointer", "str"),
                   ("expected", "str"), ("got", "str")),
    "noise": (("fixture", "str"), ("rule", "str"), ("values", "int")),
}
DEFAULT_BATCH: Final = 2000
#: rows per Parquet row group, and per batch :func:`scan` reads from a part
ROW_GROUP: Final = 256
#: parts a table keeps after :meth:`ShardWriter.close` (:func:`compact`): the files one
#: scan of one table holds open.  An open Parquet part costs the reader about 0.7 MiB
#: (its metadata and one row group decoded), so a scan of three tables holds at most
#: ~35 MiB whatever the corpus size (and far fewer files than macOS's 256 or Windows's
#: 512); measured in docs/benchmarks.md, "Scale-out"
MAX_OPEN: Final = 16


def parquet_available() -> bool:
    """pyarrow is installed (the ``[scale]`` extra): shards are Parquet."""
    return importlib.util.find_spec("pyarrow") is not None


def rows(r: UnitResult) -> dict[str, list[dict[str, Any]]]:
    """One unit's rows, per table."""
    fx = r.fixture
    return {
        "fixtures": [{"fixture": fx, "status": r.status, "origin": r.origin,
                      "digest": r.digest, "content_key": r.content_key,
                      "synthetic": bool(r.synthetic), "comparisons": int(r.comparisons)}],
        "cases": [{"fixture": fx, "surface": c} for c in r.cases],
        "divergences": [{"fixture": fx, "wire": wire_json(d)} for d in r.divergences],
        "legacy_defects": [{"fixture": fx, "wire": wire_json(d)} for d in r.legacy_defects],
        "quarantine": [{"fixture": fx, **q} for q in r.quarantine],
        "noise": [{"fixture": fx, "rule": rid, "values": int(n)} for rid, n in r.noise],
    }


class ShardWriter:
    """Buffers rows and writes a part per table every ``batch`` units (and at ``close``)."""

    def __init__(self, root: Path, *, batch: int | None = None,
                 parquet: bool | None = None) -> None:
        self.root = Path(root)
        self.batch = max(1, batch or DEFAULT_BATCH)
        self.parquet = parquet_available() if parquet is None else parquet
        self._buf: dict[str, list[dict[str, Any]]] = {t: [] for t in COLUMNS}
        self._units = 0
        self._part = 0
        for t in COLUMNS:
            (self.root / t).mkdir(parents=True, exist_ok=True)

    def add(self, result: UnitResult) -> None:
        for table, rs in rows(result).items():
            self._buf[table].extend(rs)
        self._units += 1
        if self._units >= self.batch:
            self.flush()

    def flush(self) -> None:
        if not self._units:
            return
        for table, rs in self._buf.items():
            if rs:
                self._write(table, rs)
            self._buf[table] = []
        self._units = 0
        self._part += 1

    def close(self) -> None:
        """Write the last part, then merge the parts of any table that has more than
        :data:`MAX_OPEN` (:func:`compact`): a scan never opens more files than that."""
        self.flush()
        for t in COLUMNS:
            compact(self.root, t)

    def _write(self, table: str, rs: list[dict[str, Any]]) -> None:
        """One part of ``table``: ``rs`` sorted by fixture (stable), as :func:`scan` needs."""
        rs = sorted(rs, key=itemgetter("fixture"))
        _write_rows(self.root / table / f"part-{self._part:05d}", table, rs, self.parquet)


def _write_rows(stem: Path, table: str, rs: Iterable[dict[str, Any]], parquet: bool) -> None:
    """Rows (already in fixture order) as one part file, streamed: Parquet row groups of
    :data:`ROW_GROUP` rows, or JSON Lines."""
    if parquet:
        import pyarrow as pa
        import pyarrow.parquet as pq

        types = {"str": pa.string(), "bool": pa.bool_(), "int": pa.int64()}
        schema = pa.schema([(c, types[k]) for c, k in COLUMNS[table]])
        # no column statistics: nothing filters on them, and every open part keeps them
        with pq.ParquetWriter(stem.with_suffix(".parquet"), schema,
                              write_statistics=False) as out:
            it = iter(rs)
            while chunk := list(itertools.islice(it, ROW_GROUP)):
                out.write_table(pa.Table.from_pylist(chunk, schema=schema),
                                row_group_size=ROW_GROUP)
        return
    with stem.with_suffix(".jsonl").open("w", encoding="utf-8", newline="\n") as fh:
        for r in rs:
            fh.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")


def compact(root: Path, table: str, fanin: int | None = None) -> None:
    """Merge ``table``'s parts, ``fanin`` (default :data:`MAX_OPEN`) at a time, until at
    most ``fanin`` remain — each merged part is its parts' rows in (fixture, part, row)
    order, so a later scan yields exactly what it would have yielded before."""
    limit = max(2, fanin or MAX_OPEN)
    folder = Path(root) / table
    level = 0
    while len(parts := _parts(root, table)) > limit:
        level += 1
        staging = folder / f".level-{level}"
        staging.mkdir()
        cols = [c for c, _ in COLUMNS[table]]
        for i in range(0, len(parts), limit):
            chunk = parts[i:i + limit]
            merged = heapq.merge(*(_sorted_part(p, n, cols) for n, p in enumerate(chunk)))
            _write_rows(staging / f"part-{i // limit:05d}", table, (k[3] for k in merged),
                        chunk[0].suffix == ".parquet")
        for p in parts:
            p.unlink()
        for p in sorted(staging.iterdir()):
            p.rename(folder / p.name)
        staging.rmdir()


def _parts(root: Path, table: str) -> list[Path]:
    return sorted(p for p in (Path(root) / table).iterdir()
                  if p.suffix in (".parquet", ".jsonl"))


def frame(root: Path, table: str, columns: Iterable[str] | None = None) -> pd.DataFrame:
    """One table of the shards as a DataFrame (``columns`` only, when given), unsorted."""
    cols = list(columns) if columns is not None else [c for c, _ in COLUMNS[table]]
    frames = []
    for p in _parts(root, table):
        if p.suffix == ".parquet":
            frames.append(pd.read_parquet(p, columns=cols))
        else:
            with p.open(encoding="utf-8") as fh:
                recs = [json.loads(line) for line in fh if line.strip()]
            frames.append(pd.DataFrame.from_records(recs, columns=cols))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    return pd.concat(frames, ignore_index=True)


#: a part's row as merged: (fixture, part index, row index, row) — ties never reach the row
_Keyed = tuple[str, int, int, dict[str, Any]]


def _part_rows(path: Path, cols: list[str]) -> Iterator[dict[str, Any]]:
    """The rows of one part, read lazily: a batch of :data:`ROW_GROUP` rows (Parquet) or a
    line (JSON Lines) at a time."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        # pre_buffer=False: read a row group's column chunks as they are decoded, not all
        # of them ahead (one open part: ~0.7 MiB instead of ~1 MiB)
        pf = pq.ParquetFile(path, pre_buffer=False)
        try:
            for batch in pf.iter_batches(batch_size=ROW_GROUP, columns=cols):
                yield from batch.to_pylist()
        finally:
            pf.close()
        return
    with path.open(encoding="utf-8", newline="\n") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                yield {c: rec.get(c) for c in cols}


def _sorted_part(path: Path, index: int, cols: list[str]) -> Iterator[_Keyed]:
    prev: str | None = None
    for i, row in enumerate(_part_rows(path, cols)):
        fx = row["fixture"]
        if not isinstance(fx, str):
            raise ValueError(f"shard part {path}: row {i} has no fixture name")
        if prev is not None and fx < prev:
            raise ValueError(f"shard part {path} is not sorted by fixture ({fx!r} after "
                             f"{prev!r} at row {i}): scan reads only parts written by "
                             "shadow.shards.ShardWriter")
        prev = fx
        yield fx, index, i, row


def _table_groups(root: Path, table: str, index: int
                  ) -> Iterator[tuple[str, int, list[dict[str, Any]]]]:
    """``(fixture, table index, rows)`` per fixture of one table, in name order."""
    cols = [c for c, _ in COLUMNS[table]]
    merged = heapq.merge(*(_sorted_part(p, n, cols)
                           for n, p in enumerate(_parts(root, table))))
    for fx, group in groupby(merged, key=itemgetter(0)):
        yield fx, index, [k[3] for k in group]


def scan(root: Path, tables: Sequence[str] | None = None
         ) -> Iterator[tuple[str, dict[str, list[dict[str, Any]]]]]:
    """Every fixture of the selected ``tables`` (default: all), in ascending name order,
    with ``{table: its rows}`` (every selected table a key; ``[]`` when it has none).

    A fixture's rows keep the order they were added in (rows of one name in several parts:
    part order).  Each row has every column of its table, typed as :data:`COLUMNS` says.
    The parts must be sorted by fixture, as :class:`ShardWriter` writes them: an unsorted
    part (an older writer's) raises :class:`ValueError` naming it, never a wrong grouping.
    """
    names = list(COLUMNS) if tables is None else list(dict.fromkeys(tables))
    unknown = [t for t in names if t not in COLUMNS]
    if unknown:
        raise ValueError(f"unknown shard table(s) {unknown}; known: {sorted(COLUMNS)}")
    streams = [_table_groups(root, t, n) for n, t in enumerate(names)]
    for fx, groups in groupby(heapq.merge(*streams), key=itemgetter(0)):
        out: dict[str, list[dict[str, Any]]] = {t: [] for t in names}
        for _fx, n, rs in groups:
            out[names[n]] = rs
        yield fx, out
