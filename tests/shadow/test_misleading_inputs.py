"""Inputs a careful tester used to make the harness mislead: each now refused or NO-GO.

Copies counted as evidence, a weakened policy under the old label (tests/shadow/test_gates),
a waived ``unclassified``, a hand-edited report re-rendered as GO, a capture deleted or
renamed aside, a recording written over the run folder or the corpus, a symlinked run
folder, ``--out`` at a file, a secret in a capture's error name, an empty ``--platforms``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from shadow.cli import main
from shadow.fixtures import load_corpus

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
KEY = "sk-proj-ABCDEFGHIJKLMNOPQRSTUV123456"


def _copy(tmp: Path, *names: str) -> Path:
    root = tmp / "fx"
    for n in names:
        shutil.copytree(FIXTURES / n, root / n)
    return root


def _quarantined(root: Path) -> list[tuple[str, str]]:
    return [(q.source, q.got) for q in load_corpus(root).quarantined]


def test_a_copied_scenario_is_not_more_evidence(tmp_path: Path) -> None:
    root = _copy(tmp_path, "short-session", "pending-approval")
    shutil.copytree(root / "short-session", root / "short-session-b")
    for f in (root / "short-session-b").glob("*.json"):
        doc = json.loads(f.read_text(encoding="utf-8"))
        doc["scenario"] = "short-session-b"
        f.write_text(json.dumps(doc), encoding="utf-8")
    assert _quarantined(root) == [("short-session-b/input.json", "a copy of short-session")]


def test_a_capture_the_manifest_lists_cannot_vanish(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "fx"
    shutil.copytree(FIXTURES, root)
    assert _quarantined(root) == []
    (root / "parallel-tool-calls" / "cli.compress.json").unlink()
    shutil.rmtree(root / "short-session")
    got = _quarantined(root)
    assert ("parallel-tool-calls/cli.compress.json", "no such file") in got
    assert ("short-session/input.json", "no such folder") in got
    assert main(["run", "--fixtures", str(root), "--out", str(tmp_path / "o"),
                 "--skip-determinism", "--phase", "0"]) == 1
    assert "quarantined: parallel-tool-calls/cli.compress.json" in capsys.readouterr().out


@pytest.mark.parametrize("aside", ["cli.compress.JSON", "old/cli.compress.json"])
def test_a_capture_renamed_or_moved_aside_is_quarantined(tmp_path: Path, aside: str) -> None:
    root = _copy(tmp_path, "pending-approval")
    target = root / "pending-approval" / aside
    target.parent.mkdir(exist_ok=True)
    os.replace(root / "pending-approval" / "cli.compress.json", target)
    assert [s for s, _ in _quarantined(root)] == [
        f"pending-approval/{aside.split('/')[0]}"]


def test_unclassified_is_never_waivable(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"schema": "shadow-waivers/v1", "waivers": [
        {"id": "W-001", "reason_code": "unclassified", "fixture": "*", "surface": "*",
         "owner": "x", "reason": "r", "expires": "2030-01-01"}]}), encoding="utf-8")
    root = _copy(tmp_path, "short-session")
    assert main(["run", "--fixtures", str(root), "--out", str(tmp_path / "o"),
                 "--waivers", str(w)]) == 2
    assert "/waivers/0/reason_code" in capsys.readouterr().err


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "o"
    assert main(["run", "--out", str(out), "--phase", "2"]) == 1
    return out


def test_a_hand_edited_report_is_never_re_rendered_as_go(
        run_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "edited"
    shutil.copytree(run_folder, folder)
    capsys.readouterr()
    assert main(["report", str(folder / "report.json"), "--out", str(tmp_path / "r0")]) == 1
    assert capsys.readouterr().out.endswith("verdict: NO-GO\n")  # verified, honest
    doc: dict[str, Any] = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    doc["verdict"] = "GO"
    for step in doc["ladder"]:
        step.update(verdict="GO", reasons=[], to_reach=[], to_reach_new=[],
                    requirements=[{**q, "status": "pass"} for q in step["requirements"]])
    (folder / "report.json").write_text(json.dumps(doc), encoding="utf-8")
    assert main(["report", str(folder / "report.json"), "--out", str(tmp_path / "r1")]) == 2
    assert "/verdict" in capsys.readouterr().err
    assert main(["gate", "--phase", "2", "--platforms", "linux", str(folder)]) == 2
    capsys.readouterr()
    (folder / "evidence.json").unlink()  # nothing to check it against: never a GO
    assert main(["report", str(folder / "report.json"), "--out", str(tmp_path / "r2")]) == 1
    assert "UNVERIFIED" in capsys.readouterr().out


def test_a_recording_never_lands_on_the_run_folder_or_the_corpus(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(tmp_path, "short-session")
    out = tmp_path / "o"
    for target in (out, root, root / "short-session", out / "rec", tmp_path):
        assert main(["run", "--fixtures", str(root), "--out", str(out),
                     "--record-candidate", str(target), "--skip-determinism"]) == 2, target
        assert "--record-candidate" in capsys.readouterr().err
    assert main(["run", "--fixtures", str(root), "--out", str(root / "o")]) == 2
    assert "inside --fixtures" in capsys.readouterr().err
    other = tmp_path / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("x", encoding="utf-8")
    assert main(["run", "--fixtures", str(root), "--out", str(out),
                 "--record-candidate", str(other), "--skip-determinism"]) == 2
    assert "not replaced" in capsys.readouterr().err


def test_a_new_recording_replaces_the_old_one_whole(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(tmp_path, "pending-approval")
    rec = tmp_path / "rec"
    args = ["run", "--fixtures", str(root), "--out", str(tmp_path / "o"),
            "--record-candidate", str(rec), "--skip-determinism"]
    main(args)
    assert (rec / "pending-approval" / "desktop.compress.projection.json").is_file()
    main([*args, "--surface", "cli.compress"])
    capsys.readouterr()
    names = sorted(p.name for p in (rec / "pending-approval").iterdir())
    assert names == ["cli.compress.projection.json"]  # no stale projection of the first


@pytest.mark.skipif(os.name != "posix", reason="symlinks need privileges on Windows")
def test_a_symlinked_run_folder_shares_the_lock_and_stays_a_link(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(tmp_path, "short-session")
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "links").mkdir()
    link = tmp_path / "links" / "link"
    link.symlink_to(real)
    with FileLock(str(tmp_path / ".real.lock")):
        assert main(["run", "--fixtures", str(root), "--out", str(link),
                     "--skip-determinism"]) == 2
    assert "another shadow run" in capsys.readouterr().err
    assert main(["run", "--fixtures", str(root), "--out", str(link),
                 "--skip-determinism"]) in (0, 1)
    capsys.readouterr()
    assert link.is_symlink() and (link / "report.json").is_file()
    assert sorted(p.name for p in (tmp_path / "links").iterdir()) == ["link"]


def test_out_at_a_file_is_an_input_error_for_every_command(
        run_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "README.md"
    afile.write_text("x", encoding="utf-8")
    for argv in (["gate", "--phase", "0", "--platforms", "linux", str(run_folder), "--out"],
                 ["report", str(run_folder / "report.json"), "--out"]):
        for target in (afile, afile / "x"):
            assert main([*argv, str(target)]) == 2
            err = capsys.readouterr().err
            assert "--out" in err and "internal error" not in err
    assert afile.read_text(encoding="utf-8") == "x"


def test_a_secret_in_a_capture_error_name_or_reason_never_reaches_a_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(tmp_path, "provider-failure", "memory-update-remove")
    cap = root / "provider-failure" / "cli.provider-compaction.json"
    text = cap.read_text(encoding="utf-8")
    assert "llm_query_failed:" in text
    cap.write_text(text.replace("llm_query_failed:", f"{KEY}:"), encoding="utf-8")
    mem = root / "memory-update-remove" / "session-core.memory.json"
    doc = json.loads(mem.read_text(encoding="utf-8"))

    def plant(x: Any) -> int:
        if isinstance(x, dict):
            if "name" in x and "message" in x:
                x["name"] = f"Error{KEY}"
                return 1
            return sum(plant(v) for v in x.values())
        return sum(plant(v) for v in x) if isinstance(x, list) else 0

    assert plant(doc) >= 1
    mem.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "o"
    main(["run", "--fixtures", str(root), "--out", str(out), "--skip-determinism"])
    printed = capsys.readouterr()
    assert KEY not in printed.out + printed.err
    for f in out.iterdir():
        assert KEY not in f.read_text(encoding="utf-8"), f.name


def test_an_empty_platform_list_is_a_usage_error(run_folder: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    for value in ("", ",,"):
        assert main(["gate", "--phase", "0", "--platforms", value, str(run_folder)]) == 2
        assert "--platforms" in capsys.readouterr().err
