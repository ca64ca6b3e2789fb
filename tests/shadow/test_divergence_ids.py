"""Ids of a run judged fixture by fixture are the ones the whole list gets, even when two
fixtures' divergences share a 48-bit base id (shadow.divergence.ids)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shadow.divergence as div_mod
from shadow.divergence import with_ids
from shadow.divergence.ids import IdCheck

ROOT = Path(__file__).resolve().parents[2]


def _tiny(fixture: str, surface: str, code: str, item_ids: Sequence[str],
          prefix: str = "d") -> str:
    """A stable id with 16 possible values: collisions across fixtures are the rule."""
    key = "\0".join([fixture, surface, code, *sorted(item_ids)]).encode("utf-8")
    return f"{prefix}-{hashlib.sha256(key).hexdigest()[:1]}{'0' * 11}"


wire = st.fixed_dictionaries({
    "surface": st.sampled_from(["cli.compress", "desktop.memory"]),
    "reason_code": st.sampled_from(["item.order", "digest.mismatch"]),
    "item_ids": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2)})
corpus = st.dictionaries(st.text("abcdef", min_size=1, max_size=4),
                         st.lists(wire, max_size=5), max_size=8)


@settings(max_examples=80, deadline=None)
@given(corpus)
def test_per_fixture_ids_renumbered_equal_the_whole_list(fixtures: dict[str, Any]) -> None:
    mp = pytest.MonkeyPatch()
    mp.setattr(div_mod, "stable_id", _tiny)
    try:
        per = {fx: [{**w, "fixture": fx} for w in ws] for fx, ws in sorted(fixtures.items())}
        whole = with_ids([w for ws in per.values() for w in ws])
        check = IdCheck("d")
        parts = []
        for ws in per.values():
            ided = with_ids(ws)
            check.add(ided)
            parts.extend(ided)
        got = list(check.renumber(parts, check.shared()))
    finally:
        mp.undo()
    assert got == whole
    assert len({w["id"] for w in got}) == len(got)  # never a repeated id
    for (fx, old), new in check.renamed.items():
        assert any(w["fixture"] == fx and w["id"] == old for w in parts) and new != old


def test_without_a_shared_base_nothing_is_renamed() -> None:
    check = IdCheck("ld")
    check.add(with_ids([{"fixture": "a", "surface": "s", "reason_code": "c",
                         "item_ids": ["1"]}], "ld"))
    check.add(with_ids([{"fixture": "b", "surface": "s", "reason_code": "c",
                         "item_ids": ["1"]}], "ld"))
    assert check.shared() == set() and check.renamed == {}


def test_a_case_keeps_its_failing_ids_in_step_and_sorted() -> None:
    check = IdCheck("d")
    check.renamed[("fx", "d-f00000000000")] = "d-f00000000000-2"
    case = {"fixture": "fx", "surface": "s", "outcome": "fail",
            "failing": ["d-a00000000000", "d-f00000000000"]}
    assert check.rename_case(case)["failing"] == ["d-a00000000000", "d-f00000000000-2"]
    assert check.rename_case({"fixture": "fx", "surface": "s"}) == \
        {"fixture": "fx", "surface": "s"}


def test_a_run_whose_fixtures_share_base_ids_reports_unique_ids(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end on the bundled corpus with 16 possible ids: the report's ids are the
    whole list's numbering (unique), and every case's failing ids name its divergences."""
    from shadow.run import RunOptions, execute

    monkeypatch.setattr(div_mod, "stable_id", _tiny)
    res = execute(RunOptions(fixtures=str(ROOT / "fixtures"), out=str(tmp_path / "run"),
                             now=dt.datetime(2026, 9, 1, tzinfo=dt.UTC),
                             determinism=False))
    report = json.loads(res.report_path.read_text(encoding="utf-8"))
    divs = report["divergences"]
    plain = [{k: v for k, v in d.items() if k != "id"} for d in divs]
    assert [d["id"] for d in divs] == [d["id"] for d in with_ids(plain)]
    assert len({d["id"] for d in divs}) == len(divs) > 16
    by_case: dict[tuple[str, str], set[str]] = {}
    for d in divs:
        by_case.setdefault((d["fixture"], d["surface"]), set()).add(d["id"])
    for c in report["cases"]:
        assert set(c["failing"]) <= by_case.get((c["fixture"], c["surface"]), set())
        assert c["failing"] == sorted(c["failing"])
    defects = report["legacy_defects"]
    assert len({d["id"] for d in defects}) == len(defects)
