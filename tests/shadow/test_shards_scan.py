"""``shards.scan`` (ADR 0017, step 1): sorted parts merged one fixture at a time.

The scan yields exactly the rows ``frame`` reads, grouped per fixture in name order, with
every selected table a key; the grouping does not depend on the batch size, the
completion order or the shard format; it reads each part lazily (a row group or a line at
a time) and refuses a part that is not sorted.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shadow import shards
from shadow.mapstep import UnitResult

FORMATS = [False, *([True] if shards.parquet_available() else [])]
FORMAT_IDS = ["jsonl", *(["parquet"] if shards.parquet_available() else [])]
PY_TYPES = {"str": str, "bool": bool, "int": int}
Grouped = list[tuple[str, dict[str, list[dict[str, Any]]]]]

CHARS = st.characters(blacklist_categories=("Cs",))  # any code point a file can hold
TEXT = st.text(CHARS, max_size=5)
NAMES = st.one_of(st.text(CHARS, min_size=1, max_size=6),
                  st.sampled_from(["a", "a0", "ä", "Z", "日本", "a\u2028b", "é"]))
WIRE = st.fixed_dictionaries({"code": TEXT, "n": st.integers(-5, 5)})


def _unit(name: str) -> st.SearchStrategy[UnitResult]:
    return st.builds(
        UnitResult, fixture=st.just(name),
        status=st.sampled_from(["judged", "quarantined", "crashed", "no_cassette"]),
        origin=TEXT, digest=TEXT, content_key=TEXT, synthetic=st.booleans(),
        comparisons=st.integers(-(2**63), 2**63 - 1),
        cases=st.lists(TEXT, max_size=3).map(tuple),
        divergences=st.lists(WIRE, max_size=3).map(tuple),
        legacy_defects=st.lists(WIRE, max_size=2).map(tuple),
        quarantine=st.lists(st.fixed_dictionaries(
            {k: TEXT for k in ("source", "pointer", "expected", "got")}), max_size=2).map(tuple),
        noise=st.lists(st.tuples(TEXT, st.integers(0, 2**40)), max_size=3).map(tuple))


UNITS = st.lists(NAMES, unique=True, max_size=10).flatmap(
    lambda names: st.tuples(*(_unit(n) for n in names)))


def _write(root: Path, units: Any, *, batch: int, parquet: bool) -> Path:
    w = shards.ShardWriter(root, batch=batch, parquet=parquet)
    for u in units:
        w.add(u)
    w.close()
    return root


def _from_frames(root: Path) -> Grouped:
    """What ``frame`` reads, grouped per fixture (frame order), fixtures ascending."""
    per: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for t in shards.COLUMNS:
        for rec in shards.frame(root, t).to_dict("records"):
            per.setdefault(str(rec["fixture"]), {u: [] for u in shards.COLUMNS})[t].append(rec)
    return sorted(per.items())


def _from_units(units: Any) -> Grouped:
    """The ground truth: each unit's own rows (``shards.rows``), names ascending."""
    return sorted((u.fixture, shards.rows(u)) for u in units)


def _check_types(got: Grouped) -> None:
    for _fx, tables in got:
        for t, rs in tables.items():
            for r in rs:
                assert list(r) == [c for c, _ in shards.COLUMNS[t]], (t, r)
                for c, kind in shards.COLUMNS[t]:
                    assert type(r[c]) is PY_TYPES[kind], (t, c, r[c])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(units=UNITS, data=st.data())
def test_scan_groups_exactly_the_rows_frame_reads(units: Any, data: st.DataObject) -> None:
    truth = _from_units(units)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(2):
            batch = data.draw(st.integers(1, 4), label=f"batch {i}")
            order = data.draw(st.permutations(units), label=f"completion order {i}")
            row_group = data.draw(st.sampled_from([1, 2, 256]), label=f"row group {i}")
            for parquet in FORMATS:
                root = Path(tmp) / f"{i}-{parquet}"
                with mock.patch.object(shards, "ROW_GROUP", row_group):
                    _write(root, order, batch=batch, parquet=parquet)
                    got = list(shards.scan(root))
                assert got == _from_frames(root)
                assert got == truth  # the same grouping for every batch, order and format
                assert [fx for fx, _ in got] == sorted({u.fixture for u in units})
                assert all(list(tables) == list(shards.COLUMNS) for _, tables in got)
                _check_types(got)


@pytest.mark.parametrize("parquet", FORMATS, ids=FORMAT_IDS)
def test_a_fixture_in_one_table_only_has_empty_lists_elsewhere(tmp_path: Path,
                                                               parquet: bool) -> None:
    w = shards.ShardWriter(tmp_path, batch=1, parquet=parquet)
    w.add(UnitResult("b", "judged", comparisons=3, cases=("messages",)))
    # a quarantine row without a fixtures row (scan does not join, it groups)
    w._write("quarantine", [{"fixture": "a", "source": "s", "pointer": "/p", "expected": "e",
                             "got": "g"}])
    w.close()
    got = list(shards.scan(tmp_path))
    assert [fx for fx, _ in got] == ["a", "b"]
    assert got[0][1] == {**{t: [] for t in shards.COLUMNS}, "quarantine": [
        {"fixture": "a", "source": "s", "pointer": "/p", "expected": "e", "got": "g"}]}
    assert got[1][1]["quarantine"] == []
    assert got[1][1]["cases"] == [{"fixture": "b", "surface": "messages"}]


@pytest.mark.parametrize("parquet", FORMATS, ids=FORMAT_IDS)
def test_tables_selects_the_tables_and_their_fixtures(tmp_path: Path, parquet: bool) -> None:
    units = [UnitResult("q", "quarantined", quarantine=({"source": "s", "pointer": "",
                                                         "expected": "", "got": ""},)),
             UnitResult("j", "judged", cases=("ide", "messages"), noise=(("r1", 2),)),
             UnitResult("k", "judged", noise=(("r2", 5),))]
    _write(tmp_path, units, batch=2, parquet=parquet)
    got = list(shards.scan(tmp_path, ["noise", "cases"]))
    assert got == [
        ("j", {"noise": [{"fixture": "j", "rule": "r1", "values": 2}],
               "cases": [{"fixture": "j", "surface": "ide"},
                         {"fixture": "j", "surface": "messages"}]}),
        ("k", {"noise": [{"fixture": "k", "rule": "r2", "values": 5}], "cases": []})]
    assert [fx for fx, _ in shards.scan(tmp_path, ["quarantine"])] == ["q"]
    assert [fx for fx, _ in shards.scan(tmp_path, [])] == []
    assert [fx for fx, _ in shards.scan(tmp_path)] == ["j", "k", "q"]
    with pytest.raises(ValueError, match="unknown shard table"):
        list(shards.scan(tmp_path, ["cases", "nope"]))


def _unsorted_part(root: Path, parquet: bool) -> Path:
    shards.ShardWriter(root, parquet=parquet)  # the table folders
    recs = [{"fixture": f, "surface": "messages"} for f in ("a", "c", "b")]
    if parquet:
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = root / "cases" / "part-00001.parquet"
        pq.write_table(pa.Table.from_pylist(recs), path)
        return path
    path = root / "cases" / "part-00001.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return path


@pytest.mark.parametrize("parquet", FORMATS, ids=FORMAT_IDS)
def test_an_unsorted_part_is_refused_by_name(tmp_path: Path, parquet: bool) -> None:
    _write(tmp_path, [UnitResult("a", "judged", cases=("ide",))], batch=5, parquet=parquet)
    bad = _unsorted_part(tmp_path, parquet)
    with pytest.raises(ValueError, match=re.escape(str(bad)) + ".*not sorted by fixture"):
        list(shards.scan(tmp_path))
    with pytest.raises(ValueError, match=re.escape(bad.name)):
        list(shards.scan(tmp_path, ["cases"]))
    assert [fx for fx, _ in shards.scan(tmp_path, ["fixtures"])] == ["a"]  # other tables
    assert len(shards.frame(tmp_path, "cases")) == 4  # frame never needed the order


def test_parts_are_sorted_by_fixture_and_keep_a_fixtures_row_order(tmp_path: Path) -> None:
    units = [UnitResult(n, "judged", cases=(f"{n}-2", f"{n}-1", f"{n}-3"))
             for n in ("b", "é", "a", "B", "aa")]
    _write(tmp_path, units, batch=10, parquet=False)
    (part,) = (tmp_path / "cases").iterdir()
    recs = [json.loads(line) for line in part.read_text(encoding="utf-8").splitlines()]
    assert [r["fixture"] for r in recs] == sorted(r["fixture"] for r in recs)
    assert [r["surface"] for r in recs if r["fixture"] == "é"] == ["é-2", "é-1", "é-3"]


# --- boundedness ------------------------------------------------------------------------------

N_UNITS, BATCH, TINY = 400, 50, 4  # 8 parts per table, rows read 4 at a time


def _many() -> list[UnitResult]:
    return [UnitResult(f"fx-{i:04d}", "judged", comparisons=i,
                       cases=("ide", "messages", "memory"), noise=(("r", i),))
            for i in reversed(range(N_UNITS))]  # completion order: reversed names


@pytest.mark.parametrize("parquet", FORMATS, ids=FORMAT_IDS)
def test_scan_reads_every_part_incrementally(tmp_path: Path, parquet: bool,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shards, "ROW_GROUP", TINY)
    _write(tmp_path, _many(), batch=BATCH, parquet=parquet)
    n_parts = sum(len(list((tmp_path / t).iterdir())) for t in shards.COLUMNS)
    assert n_parts == 3 * (N_UNITS // BATCH)  # fixtures, cases, noise; no empty part
    pulled: dict[Path, int] = {}
    done: set[Path] = set()
    real = shards._part_rows

    def counting(path: Path, cols: list[str]) -> Iterator[dict[str, Any]]:
        pulled[path] = 0
        for row in real(path, cols):
            pulled[path] += 1
            yield row
        done.add(path)

    batches: list[int] = []
    if parquet:
        import pyarrow.parquet as pq

        class Spy(pq.ParquetFile):
            def iter_batches(self, *a: Any, **kw: Any) -> Iterator[Any]:
                for b in super().iter_batches(*a, **kw):
                    batches.append(b.num_rows)
                    yield b

        for p in (tmp_path / "cases").iterdir():
            meta = pq.ParquetFile(p).metadata
            assert meta.num_row_groups == 3 * BATCH // TINY + (3 * BATCH % TINY > 0)
            assert all(meta.row_group(g).num_rows <= TINY for g in range(meta.num_row_groups))
        monkeypatch.setattr(pq, "ParquetFile", Spy)
    monkeypatch.setattr(shards, "_part_rows", counting)

    it = shards.scan(tmp_path)
    fx, first = next(it)
    assert fx == "fx-0000" and len(first["cases"]) == 3
    assert len(pulled) == n_parts and not done  # every part opened, none read through
    # at most this fixture's 3 case rows, the next one's (merged ahead) and one more
    assert max(pulled.values()) <= 7 and sum(pulled.values()) <= n_parts + 12
    yielded, worst = sum(map(len, first.values())), 0
    for _fx, tables in it:
        yielded += sum(map(len, tables.values()))
        worst = max(worst, sum(pulled.values()) - yielded)  # read, not yet handed out
    assert yielded == sum(pulled.values()) == N_UNITS * 5 and done == set(pulled)
    assert worst <= n_parts + 12  # about a row per part, plus the next fixture's rows
    if parquet:
        assert batches and max(batches) <= TINY  # one row group per part materialized


@pytest.mark.parametrize("parquet", FORMATS, ids=FORMAT_IDS)
def test_many_parts_are_merged_down_so_a_scan_opens_few_files(
        tmp_path: Path, parquet: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of 10^6 sessions writes 500 parts a table: ``close`` merges them, MAX_OPEN at a
    time (here 3, in two levels), and a scan then yields exactly what it yielded before."""
    units = _many()
    before = list(shards.scan(_write(tmp_path / "before", units, batch=1, parquet=parquet)))
    monkeypatch.setattr(shards, "MAX_OPEN", 3)
    monkeypatch.setattr(shards, "ROW_GROUP", TINY)
    root = _write(tmp_path / "after", units, batch=1, parquet=parquet)
    for t in shards.COLUMNS:
        files = list((root / t).iterdir())
        assert len(files) <= 3 and all(p.is_file() for p in files), t  # no staging left
    opened: list[Path] = []
    real = shards._part_rows
    monkeypatch.setattr(shards, "_part_rows",
                        lambda p, cols: (opened.append(p), real(p, cols))[1])
    assert list(shards.scan(root)) == before == _from_units(units)
    assert len(opened) <= 3 * 3  # three tables with rows, at most MAX_OPEN parts each
