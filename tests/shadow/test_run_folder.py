"""The run folder is only ever seen complete: staged, locked, swapped (shadow/outdir.py).

Quick checks here; the kill -9 trials live in tests/test_crash_run.py (``nox -s slow``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from filelock import FileLock

from shadow import outdir
from shadow.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
RUN_FILES = ["evidence.json", "junit.xml", "report.html", "report.json", "report.md"]


def _small(tmp: Path) -> Path:
    root = tmp / "fx"
    for name in ("pending-approval", "ide-budget-zero"):
        shutil.copytree(FIXTURES / name, root / name)
    return root


def _run(fx: Path, out: Path, *extra: str) -> int:
    return main(["run", "--fixtures", str(fx), "--out", str(out), "--skip-determinism",
                 *extra])


def test_a_run_replaces_the_previous_one_whole_and_leaves_no_staging(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fx, out = _small(tmp_path), tmp_path / "reports" / "latest"
    _run(fx, out)
    first = json.loads((out / "report.json").read_text(encoding="utf-8"))
    (out / "stale-extra.txt").write_text("from an older tool version", encoding="utf-8")
    _run(fx, out, "--phase", "0")
    capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == RUN_FILES  # nothing of the old folder
    again = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert again["phase"] == 0 and first["phase"] == 1
    assert sorted(p.name for p in out.parent.iterdir()) == [".latest.lock", "latest"]


def test_a_second_run_into_a_locked_folder_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fx, out = _small(tmp_path), tmp_path / "latest"
    _run(fx, out)
    before = (out / "report.json").read_bytes()
    capsys.readouterr()
    with FileLock(str(tmp_path / ".latest.lock")):  # another run holds it
        assert _run(fx, out) == 2
    err = capsys.readouterr().err
    assert "another shadow run is writing into this folder" in err
    assert (out / "report.json").read_bytes() == before  # untouched
    assert _run(fx, out) in (0, 1)  # the lock is free again


def test_two_concurrent_runs_into_one_folder_never_mix(tmp_path: Path) -> None:
    fx, out = _small(tmp_path), tmp_path / "latest"
    cmd = [sys.executable, "-m", "shadow", "run", "--fixtures", str(fx), "--out", str(out),
           "--skip-determinism"]
    procs = [subprocess.Popen([*cmd, "--phase", str(n)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT) for n in (0, 3)]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    codes = sorted(r[0] for r in results)
    refused = [r for r in results if r[0] == 2]
    for r in refused:
        assert "another shadow run is writing into this folder" in r[2]
    assert len(refused) <= 1 and codes != [2, 2]
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    evidence = json.loads((out / "evidence.json").read_text(encoding="utf-8"))
    assert evidence["run"]["phase"] == report["phase"]  # one run's files, never a mix
    assert main(["gate", "--phase", str(report["phase"]), "--platforms",
                 evidence["environment"]["platform"], str(out)]) == (
        0 if report["verdict"] == "GO" else 1)


def test_a_folder_of_other_files_is_never_replaced(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fx, out = _small(tmp_path), tmp_path / "docs"
    out.mkdir()
    (out / "notes.md").write_text("mine", encoding="utf-8")
    assert _run(fx, out) == 2
    assert "not replaced" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.md"]
    afile = tmp_path / "file"
    afile.write_text("x", encoding="utf-8")
    assert _run(fx, afile) == 2


def test_a_swap_killed_between_its_two_renames_is_put_back(tmp_path: Path) -> None:
    out = tmp_path / "latest"
    aside = tmp_path / ".latest.old-abc"
    aside.mkdir()
    (aside / "report.json").write_text("{}", encoding="utf-8")
    partial = tmp_path / ".latest.partial-xyz"
    partial.mkdir()
    with outdir.staged(out) as stage:  # recovery runs under the lock, before staging
        assert (out / "report.json").is_file() and not aside.exists()
        assert not partial.exists() and stage.path.is_dir()
    assert not stage.path.exists()  # never committed: the staging folder is removed
    assert (out / "report.json").read_text(encoding="utf-8") == "{}"


def test_a_failing_run_leaves_the_previous_one(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    fx, out = _small(tmp_path), tmp_path / "latest"
    _run(fx, out)
    before = (out / "report.json").read_bytes()
    (fx / "pending-approval" / "cli.compress.json").unlink()
    bad = tmp_path / "missing.xml"
    assert _run(fx, out, "--attach", str(bad)) == 2  # refused before any replay
    assert (out / "report.json").read_bytes() == before
    started = time.monotonic()
    assert _run(fx, out, "--record-candidate", str(out / "report.json")) == 2
    assert time.monotonic() - started < 30
    capsys.readouterr()


def test_a_missing_cassette_is_a_broken_input_not_a_side_effect(tmp_path: Path) -> None:
    """A provider scenario replayed from a recordings folder without its cassette is
    quarantined with the rebuild command, never a provider request blamed on the kernel."""
    fixtures = tmp_path / "fx"
    shutil.copytree(ROOT / "fixtures" / "provider-summary-ok", fixtures / "provider-summary-ok")
    shutil.copytree(ROOT / "fixtures" / "short-session", fixtures / "short-session")
    empty = tmp_path / "recordings"
    empty.mkdir()
    out = tmp_path / "o"
    assert main(["run", "--fixtures", str(fixtures), "--recordings", str(empty),
                 "--out", str(out), "--skip-determinism"]) == 1
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    invalid = [d for d in report["divergences"] if d["reason_code"] == "fixture.invalid"]
    assert [d["fixture"] for d in invalid] == ["provider-summary-ok"]
    assert "shadow.providers.importer" in invalid[0]["detail"]["expected"]
    assert not [d for d in report["divergences"] if d["reason_code"] == "shadow.side_effect"]
