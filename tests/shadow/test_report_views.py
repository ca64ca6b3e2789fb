"""The renderers read the report's long lists through views (ADR 0017, step 4): a list
that is not a ``list`` (a disk-backed spill) renders the same bytes, is read as a stream,
and is refused when out of order instead of giving a silently wrong report."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from shadow import reports
from shadow.reports import views
from shadow.run import RunOptions, execute

ROOT = Path(__file__).resolve().parents[2]
NOW = dt.datetime(2026, 9, 1, 12, 0, tzinfo=dt.UTC)
LONG = ("cases", "divergences", "legacy_defects")


class Stream(Sequence[Any]):
    """A sequence that is not a list and counts how often it is read whole."""

    def __init__(self, items: list[Any]) -> None:
        self._items = items
        self.passes = 0

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Any]:
        self.passes += 1
        return iter(list(self._items))

    def __getitem__(self, i: Any) -> Any:
        raise AssertionError("the renderers never index a long list")


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("views") / "run"
    return execute(RunOptions(fixtures=str(ROOT / "fixtures"), out=str(out), now=NOW,
                              determinism=False))


@pytest.fixture(scope="module")
def run(result: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    return result.report, result.evidence


def test_a_streamed_report_renders_the_same_bytes(run: tuple[dict[str, Any],
                                                              dict[str, Any]]) -> None:
    report, evidence = run
    assert report["divergences"] and report["legacy_defects"] and report["cases"]
    streamed = {**report, **{k: Stream(report[k]) for k in LONG}}
    for fmt in reports.FORMATS:
        whole = reports.render(report, fmt, evidence=evidence)
        assert reports.render(streamed, fmt, evidence=evidence) == whole, fmt
        assert "".join(reports.generate(streamed, fmt, evidence=evidence)) == whole


def test_the_long_lists_are_read_a_bounded_number_of_times(
        run: tuple[dict[str, Any], dict[str, Any]]) -> None:
    report, evidence = run
    streamed = {**report, **{k: Stream(report[k]) for k in LONG}}
    ctx = reports.context(streamed, evidence=evidence)
    for fmt in reports.FORMATS:
        reports.render(streamed, fmt, ctx=ctx)
    suites = len(ctx["junit_suites"])
    blocking = len(ctx["blocking_groups"])
    for k in LONG:  # counted once, then each view read as a stream: never per element
        assert 1 <= streamed[k].passes <= 8 + 3 * suites + 2 * blocking, k


def test_an_out_of_order_stream_is_refused(run: tuple[dict[str, Any],
                                                       dict[str, Any]]) -> None:
    report, _ = run
    backwards = {**report, "divergences": Stream(list(reversed(report["divergences"])))}
    with pytest.raises(ValueError, match="/divergences"):
        reports.context(backwards)
    cases = {**report, "cases": Stream(list(reversed(report["cases"])))}
    with pytest.raises(ValueError, match="/cases"):
        reports.context(cases)


def test_an_edited_in_memory_report_is_put_in_case_order(
        run: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """A report.json read from disk whose lists list the cases backwards (each case's own
    divergences in their order) renders as the run wrote it: sorted by fixture and
    surface, stable."""
    import itertools

    report, evidence = run

    def backwards(items: list[Any]) -> list[Any]:
        blocks = [list(g) for _, g in itertools.groupby(
            items, key=lambda x: (x["fixture"], x["surface"]))]
        return [x for b in reversed(blocks) for x in b]

    shuffled = {**report, **{k: backwards(report[k]) for k in LONG}}
    assert shuffled["divergences"] != report["divergences"]
    for fmt in reports.FORMATS:
        assert reports.render(shuffled, fmt, evidence=evidence) == \
            reports.render(report, fmt, evidence=evidence)


def test_lazy_views_index_and_slice_like_lists() -> None:
    items = [{"n": i} for i in range(7)]
    lazy = views.Lazy(lambda: iter(items), len(items))
    assert len(lazy) == 7 and bool(lazy) and list(lazy) == items
    assert lazy[:3] == items[:3] and lazy[2:6:2] == items[2:6:2] and lazy[-1] == items[-1]
    assert lazy[0] == items[0] and lazy[5:] == items[5:]
    with pytest.raises(IndexError):
        lazy[7]
    assert not views.Lazy(lambda: iter(()), 0)
    odd = views.records([{"fixture": "f", "surface": "s", "reason_code": "c",
                          "severity": "minor", "n": i} for i in range(7)],
                        keep=lambda d: d["n"] % 2 == 1)
    assert [r["id"] for r in odd] == ["d-2", "d-4", "d-6"] and len(odd) == 3
    assert repr(lazy) == "Lazy(len=7)"  # never the contents


def test_a_run_keeps_its_long_lists_on_disk_and_writes_them_exactly(result: Any) -> None:
    """ADR 0017: the run's cases, divergences, legacy defects and per-case evidence rows
    are spills, not lists in memory, and report.json / evidence.json hold exactly what
    json.dumps of the materialised documents gives (so their digests are unchanged)."""
    import json

    from shadow import evidence as evidence_mod
    from shadow.spill import Spill

    report, evidence = result.report, result.evidence
    for k in LONG:
        assert isinstance(report[k], Spill) and not isinstance(report[k], list), k
    assert isinstance(evidence["cases"], Spill)
    whole = {k: (list(v) if isinstance(v, Spill) else v) for k, v in report.items()}
    out = result.report_path.parent
    assert (out / "report.json").read_text(encoding="utf-8") == \
        json.dumps(whole, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    ev = {k: (list(v) if isinstance(v, Spill) else v) for k, v in evidence.items()}
    assert (out / "evidence.json").read_text(encoding="utf-8") == \
        json.dumps(ev, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    assert ev["evidence_digest"] == evidence_mod.evidence_digest(ev)  # over the plain lists
    assert ev["run"]["results_digest"] == evidence_mod.results_digest(
        whole["divergences"], whole["legacy_defects"],
        [(c["fixture"], c["surface"]) for c in whole["cases"]],
        whole["totals"]["comparisons"])



def test_a_run_that_fails_leaves_no_spill_behind(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))

    def broken(*a: Any, **k: Any) -> Any:
        raise RuntimeError("the disk filled up")

    monkeypatch.setattr(reports, "write", broken)
    with pytest.raises(RuntimeError, match="disk") as failure:
        execute(RunOptions(fixtures=str(ROOT / "fixtures"), out=str(tmp_path / "run"),
                           now=NOW, determinism=False))
    # removed by the run itself, not by garbage collection: the traceback still holds
    # every frame of the failed run (and so its spills)
    assert failure.tb is not None
    assert list(temp.iterdir()) == []  # the spills were closed and removed
    assert not (tmp_path / "run").exists()  # and no run folder was swapped in
