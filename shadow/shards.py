"""The run's result shards: the map's rows appended in batches, read back with pandas.

Results arrive from the executor in any order and are never all held in memory: every
``batch`` units the buffered rows of each table are written as one more part file under
``<run folder>/.shards/<table>/part-NNNNN.<ext>``.  With the ``[scale]`` extra installed
the parts are Parquet (pyarrow); without it they are JSON Lines — same rows, same
reduction, so the reports do not depend on which (a test checks it).  The reducer
(:func:`frame`) reads one table at a time and sorts by value, so neither the completion
order nor the part boundaries reach a report.

Tables (every column a string unless said):

* ``fixtures``: ``fixture``, ``status`` (judged | quarantined | crashed | no_cassette),
  ``origin``,
  ``digest``, ``content_key``, ``synthetic`` (bool), ``comparisons`` (int)
* ``cases``: ``fixture``, ``surface``
* ``divergences`` and ``legacy_defects``: ``fixture``, ``wire`` (the divergence's JSON)
* ``quarantine``: ``fixture``, ``source``, ``pointer``, ``expected``, ``got``
* ``noise``: ``fixture``, ``rule``, ``values`` (int)
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterable, Mapping
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
        self.flush()

    def _write(self, table: str, rs: list[dict[str, Any]]) -> None:
        stem = self.root / table / f"part-{self._part:05d}"
        if self.parquet:
            import pyarrow as pa
            import pyarrow.parquet as pq

            types = {"str": pa.string(), "bool": pa.bool_(), "int": pa.int64()}
            schema = pa.schema([(c, types[k]) for c, k in COLUMNS[table]])
            pq.write_table(pa.Table.from_pylist(rs, schema=schema),
                           stem.with_suffix(".parquet"))
            return
        with stem.with_suffix(".jsonl").open("w", encoding="utf-8", newline="\n") as fh:
            for r in rs:
                fh.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")


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
