"""kill -9 of ``shadow run`` at random moments, into a folder holding an earlier run with the
opposite verdict (``nox -s slow``).

Each trial starts ``shadow run`` whose verdict is the opposite of the run the folder holds
(the live kernel, GO at phase 0, against a recorded candidate that splits a tool pair,
a NO-GO class at every phase), kills it with ``Process.kill()`` (SIGKILL; TerminateProcess on
Windows) after a random delay, and checks that the folder holds one complete run — its
report.json, evidence.json, report.md, report.html and junit.xml all of one run — and that
``shadow gate`` on it answers what that run's report says.  A killed swap may leave the
previous run aside for an instant; the next run (or :func:`shadow.outdir.recover`) puts it
back, which the trial checks as well.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from shadow import evidence, outdir
from shadow.cli import main

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
RUN_FILES = ["evidence.json", "junit.xml", "report.html", "report.json", "report.md"]
TRIALS = int(__import__('os').environ.get('SHADOW_CRASH_TRIALS', '70'))


def _corpus(tmp: Path) -> Path:
    """A copy of the bundled corpus (phase 0 needs a capture of every baseline surface)."""
    root = tmp / "fx"
    shutil.copytree(FIXTURES, root)
    return root


def _nogo_candidate(tmp: Path, fx: Path) -> Path:
    folder = tmp / "nogo-cand"
    assert main(["run", "--fixtures", str(fx), "--out", str(tmp / "rec"),
                 "--record-candidate", str(folder), "--skip-determinism"]) in (0, 1)
    for path in sorted(folder.glob("*/cli.compress.projection.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        tool = [it for it in doc["items"] if it.get("role") == "tool"]
        if tool:  # a tool result dropped, its call kept: tool_pair.split, a NO-GO class
            doc["items"] = [it for it in doc["items"] if it is not tool[0]]
            doc["dropped"] = [*doc["dropped"], {"id": tool[0]["id"], "reason": "input_budget"}]
            path.write_text(json.dumps(doc), encoding="utf-8")
            return folder
    raise AssertionError("no projection with a kept tool result")


def _args(fx: Path, out: Path, candidate: str) -> list[str]:
    return ["run", "--fixtures", str(fx), "--out", str(out), "--phase", "0",
            "--candidate", candidate, "--skip-determinism"]


def _complete(out: Path) -> dict[str, Any]:
    """The folder holds one complete run; returns its report."""
    assert sorted(p.name for p in out.iterdir()) == RUN_FILES
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    ev = json.loads((out / "evidence.json").read_text(encoding="utf-8"))
    assert ev["run"]["verdict"] == report["verdict"]
    assert ev["identity"]["candidate_digest"] == evidence.digest(
        {k: v for k, v in report["candidate"].items() if k != "corpus_digest"})
    assert f"Shadow report: {report['verdict']} (phase" in (out / "report.md").read_text(
        encoding="utf-8")
    assert f'<property name="verdict" value="{report["verdict"]}"/>' in (
        out / "junit.xml").read_text(encoding="utf-8")
    assert report["verdict"] in (out / "report.html").read_text(encoding="utf-8")
    return report


@pytest.mark.slow
def test_kill_9_at_random_moments_never_leaves_a_mixed_or_lying_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(20261201)
    fx = _corpus(tmp_path)
    nogo = str(_nogo_candidate(tmp_path, fx))
    out = tmp_path / "latest"
    assert main(_args(fx, out, "kernel")) == 0  # the earlier run: GO
    capsys.readouterr()
    started = time.monotonic()
    assert main(_args(fx, tmp_path / "timing", nogo)) == 1
    capsys.readouterr()
    duration = time.monotonic() - started + 1.5  # + interpreter start-up in a child
    outcomes = {"killed": 0, "finished": 0, "put_back": 0}
    platform = evidence.platform_name()
    for _ in range(TRIALS):
        before = _complete(out)
        candidate = nogo if before["verdict"] == "GO" else "kernel"
        child = subprocess.Popen([sys.executable, "-m", "shadow", *_args(fx, out, candidate)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 cwd=ROOT)
        time.sleep(rng.uniform(0.0, duration * 0.9))
        if child.poll() is None:
            child.kill()
            outcomes["killed"] += 1
        else:
            outcomes["finished"] += 1
        child.wait(timeout=60)
        if not out.exists():  # killed between the swap's two renames: put back
            with outdir.staged(out):
                pass
            outcomes["put_back"] += 1
        after = _complete(out)
        assert after["verdict"] in ("GO", "NO-GO")
        if child.returncode in (0, 1):  # it finished: its own run is the one in place
            assert after["verdict"] == ("GO" if child.returncode == 0 else "NO-GO")
        else:  # killed: the previous run or the new one, each whole
            assert after["candidate"] != before["candidate"] or after == before
        gated = main(["gate", "--phase", "0", "--platforms", platform, str(out)])
        capsys.readouterr()
        assert gated == (0 if after["verdict"] == "GO" else 1)
        leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".latest.")
                     and p.name != ".latest.lock"]
        if child.returncode not in (0, 1):
            assert all(n.startswith((".latest.partial-", ".latest.old-")) for n in leftovers)
    assert outcomes["killed"] >= min(50, TRIALS - 10), outcomes
    # the next run cleans what killed runs left behind
    final = main(_args(fx, out, "kernel"))
    assert final == 0, capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".latest.")] == [
        ".latest.lock"]
