"""One corpus ledger: ``load_corpus`` and ``shadow run``'s stream decide the corpus-wide
rules (a name in two shards, a copy under another name, the capture MANIFEST) the same
way — the same corpus digest and the same quarantine, message for message."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from shadow.corpus_ledger import QUARANTINED, copies_of
from shadow.corpus_source import SHARDS_FORMAT
from shadow.fixtures import MANIFEST_FORMAT, load_corpus
from shadow.run import RunOptions, execute

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
SMALL = ("short-session", "pending-approval")


def _copy(dst: Path, names: tuple[str, ...] = SMALL) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for n in names:
        shutil.copytree(FIXTURES / n, dst / n)
    return dst


def _renamed(src: Path, dst: Path) -> None:
    """``src`` copied as ``dst``: the scenario field of every file renamed (same content)."""
    dst.mkdir()
    for p in sorted(src.iterdir()):
        doc = json.loads(p.read_text(encoding="utf-8"))
        doc["scenario"] = dst.name
        (dst / p.name).write_text(json.dumps(doc), encoding="utf-8")


def two_shards(tmp: Path) -> Path:
    """short-session in both shards (a tar.gz and a folder), a copy in the second."""
    part1 = _copy(tmp / "p1", ("short-session",))
    with tarfile.open(tmp / "part-1.tar.gz", "w:gz") as t:
        for p in sorted(part1.rglob("*")):
            t.add(p, arcname=p.relative_to(part1).as_posix(), recursive=False)
    part2 = _copy(tmp / "part-2")
    _renamed(part2 / "pending-approval", part2 / "pending-approval-copy")
    listing = tmp / "corpus.json"
    listing.write_text(json.dumps({"format": SHARDS_FORMAT,
                                   "shards": ["part-1.tar.gz", "part-2"]}))
    return listing


def a_copy(tmp: Path) -> Path:
    corpus = _copy(tmp / "c")
    _renamed(corpus / "short-session", corpus / "another-session")
    _renamed(corpus / "short-session", corpus / "zz-session")
    return corpus


def _manifest(corpus: Path, scenarios: list[dict[str, object]]) -> None:
    (corpus / "MANIFEST.json").write_text(json.dumps({"format": MANIFEST_FORMAT,
                                                      "scenarios": scenarios}))


def manifest_gaps(tmp: Path) -> Path:
    """A listed scenario and a listed capture that are not there."""
    corpus = _copy(tmp / "m")
    (corpus / "short-session" / "desktop.compress.json").unlink()
    _manifest(corpus, [
        {"id": "short-session", "surfaces": [{"file": "cli.compress.json"},
                                             {"file": "desktop.compress.json"},
                                             {"file": "cli.jsonl-session.json",
                                              "status": "capture-error"}]},
        {"id": "gone-session", "surfaces": [{"file": "cli.compress.json"}]},
        {"id": "pending-approval"}])
    (corpus / "short-session" / "cli.jsonl-session.json").unlink()
    return corpus


def a_listed_fifo(tmp: Path) -> Path:
    """A top-level FIFO the MANIFEST lists: quarantined once, as the FIFO."""
    corpus = _copy(tmp / "f")
    os.mkfifo(corpus / "X")
    _manifest(corpus, [{"id": "X", "surfaces": [{"file": "cli.compress.json"}]},
                       {"id": "short-session"}])
    return corpus


CORPORA: dict[str, Callable[[Path], Path]] = {
    "two shards": two_shards, "a copy": a_copy, "manifest gaps": manifest_gaps,
    "a listed FIFO": a_listed_fifo}


@pytest.mark.parametrize("case", list(CORPORA))
def test_load_corpus_and_the_stream_agree(case: str, tmp_path: Path) -> None:
    if case == "a listed FIFO" and (sys.platform == "win32" or not hasattr(os, "mkfifo")):
        pytest.skip("POSIX file types")
    corpus = CORPORA[case](tmp_path / "in")
    loaded = load_corpus(corpus)
    assert loaded.quarantined  # every case quarantines something
    r = execute(RunOptions(fixtures=str(corpus), out=str(tmp_path / "out"), now=NOW,
                           determinism=False))
    assert r.report["candidate"]["corpus_digest"] == loaded.digest
    invalid = sorted((d["fixture"], d["surface"], d["detail"]["pointer"],
                      d["detail"]["expected"], d["detail"]["got"])
                     for d in r.report["divergences"] if d["reason_code"] == "fixture.invalid")
    want = []
    for q in loaded.quarantined:
        fixture, _, file = q.source.partition("/")
        want.append((fixture, file or q.source, q.pointer, q.expected, q.got))
    assert invalid == sorted(want)
    assert {s.name for s in loaded.scenarios} <= {c["fixture"] for c in r.report["cases"]}


def test_what_each_case_quarantines(tmp_path: Path) -> None:
    got = {case: [(q.source, q.got) for q in load_corpus(make(tmp_path / case)).quarantined]
           for case, make in CORPORA.items()
           if case != "a listed FIFO" or hasattr(os, "mkfifo")}
    assert got["two shards"] == [
        ("pending-approval-copy/input.json", "a copy of pending-approval"),
        ("short-session/input.json", "also in part-1.tar.gz")]
    assert got["a copy"] == [("short-session/input.json", "a copy of another-session"),
                             ("zz-session/input.json", "a copy of another-session")]
    assert got["manifest gaps"] == [
        ("gone-session/input.json", "no such folder"),
        ("short-session/cli.jsonl-session.json",
         "no such file: the capture failed (MANIFEST capture_errors)"),
        ("short-session/desktop.compress.json", "no such file")]
    if "a listed FIFO" in got:
        # load_corpus's rule: X is there (as a FIFO), so no "X/input.json: no such folder"
        assert [s for s, _ in got["a listed FIFO"]] == ["X", "X/cli.compress.json"]


def test_copies_go_by_name_order_and_skip_the_quarantined() -> None:
    rows = [("b", "judged", "d1", "k"), ("a", "no_cassette", "d2", "k"),
            ("c", QUARANTINED, "", "k"), ("d", "crashed", "d3", ""), ("e", "judged", "", "")]
    assert copies_of(rows) == {"b": "a"}
