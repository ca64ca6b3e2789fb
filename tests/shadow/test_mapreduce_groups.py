"""The reduce reads the judged fixtures back one at a time (ADR 0017): each group's rows
are its own, sorted by value, and a row whose divergence names another fixture is refused
(never a silently reordered report)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shadow.mapreduce import groups
from shadow.mapstep import UnitResult
from shadow.shards import ShardWriter


def _wire(fixture: str, code: str, items: tuple[str, ...] = ()) -> dict[str, object]:
    return {"fixture": fixture, "surface": "cli.compress", "reason_code": code,
            "severity": "minor", "attribution": "none", "item_ids": list(items),
            "detail": {}}


def _shards(root: Path, units: list[UnitResult]) -> Path:
    w = ShardWriter(root, batch=1, parquet=False)
    for u in units:
        w.add(u)
    w.close()
    return root


def test_groups_come_in_name_order_with_their_rows_sorted(tmp_path: Path) -> None:
    root = _shards(tmp_path / "s", [
        UnitResult("b", "judged", cases=("x", "a"),
                   divergences=(_wire("b", "item.order"), _wire("b", "digest.mismatch"))),
        UnitResult("a", "judged", cases=("y",), legacy_defects=(_wire("a", "item.order"),)),
        UnitResult("c", "judged", cases=("z",))])
    got = list(groups(root, lambda name: name != "c"))
    assert [g.fixture for g in got] == ["a", "b"]
    assert got[1].surfaces == ["a", "x"]
    assert [d.reason_code for d in got[1].divergences] == ["digest.mismatch", "item.order"]
    assert [d.fixture for d in got[0].legacy_defects] == ["a"] and not got[0].divergences
    only = list(groups(root, lambda name: True, ("cases",)))
    assert [g.surfaces for g in only] == [["y"], ["a", "x"], ["z"]]
    assert not any(g.divergences or g.legacy_defects for g in only)


def test_a_row_holding_another_fixtures_divergence_is_refused(tmp_path: Path) -> None:
    root = _shards(tmp_path / "s", [
        UnitResult("a", "judged", cases=("cli.compress",),
                   divergences=(_wire("zz", "item.order"),))])
    with pytest.raises(ValueError, match="inconsistent"):
        list(groups(root, lambda name: True))
