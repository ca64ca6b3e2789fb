"""Reports on a fixed small corpus: syrupy snapshots of every format (deterministic
bytes), JUnit counts that match report.json, a self-contained HTML file, re-rendering,
``shadow diff`` and the ``shadow run`` summary."""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from junitparser import Failure, JUnitXml
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from shadow import evidence, reports
from shadow.cli import main
from shadow.errors import InputError
from shadow.progress import TerminalProgress
from shadow.reports.diff import diff_reports
from shadow.run import RunOptions, execute

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
NOW = dt.datetime(2026, 9, 1, 12, 0, tzinfo=dt.UTC)
PREVIOUS = ("duplicate-user-messages", "ide-budget-zero", "pending-approval")
CURRENT = ("ide-budget-zero", "orphan-tool-result", "pending-approval")
GIT_COMMIT = evidence.git_commit  # the real one (the module fixture replaces it)


class _Text(SingleFileSnapshotExtension):
    _write_mode = WriteMode.TEXT


def _ext(suffix: str) -> type[SingleFileSnapshotExtension]:
    return type(f"Snap_{suffix}", (_Text,), {"file_extension": suffix})


def _waivers(path: Path) -> Path:
    doc = {"schema": "shadow-waivers/v1", "waivers": [
        {"id": "W-001", "reason_code": "digest.mismatch", "fixture": "*",
         "surface": "desktop.context-engineering", "owner": "desktop-team",
         "reason": "prompt cleaning for caching", "expires": "2026-09-20"},
        {"id": "W-002", "reason_code": "item.order", "fixture": "*", "surface": "*",
         "owner": "cli-team", "reason": "re-insertion order", "expires": "2026-08-01"},
        {"id": "W-003", "reason_code": "noise.*", "fixture": "nothing-*", "surface": "*",
         "owner": "qa", "reason": "never matches", "expires": "2027-01-01"}]}
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def _corpus(root: Path, names: tuple[str, ...], *, broken: bool = False) -> Path:
    for n in names:
        shutil.copytree(FIXTURES / n, root / n)
    if broken:  # a quarantined fixture: fixture.invalid is blocking -> NO-GO
        shutil.copytree(FIXTURES / "late-tool-result", root / "late-tool-result")
        (root / "late-tool-result" / "cli.compress.json").write_text(
            '{"format": 1}', encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def fixed_env() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evidence, "git_commit", lambda: "0" * 40)
        mp.setattr(evidence, "package_version", lambda: "0.0.0")
        mp.setattr(evidence, "environment", lambda: {
            "platform": "linux", "python": "3.11.0", "implementation": "CPython",
            "machine": "x86_64", "dirty": False, "sys_platform": "linux",
            "os_release": "Linux-6.1.0-x86_64", "path_sep": "/",
            "python_build": "main Jan 1 2026", "python_compiler": "GCC 12.2.0"})
        yield


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory: pytest.TempPathFactory, fixed_env: None) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("reports")
    old = execute(RunOptions(fixtures=str(_corpus(base / "old-fx", PREVIOUS)),
                             out=str(base / "old"), now=NOW - dt.timedelta(days=7)))
    new = execute(RunOptions(fixtures=str(_corpus(base / "new-fx", CURRENT, broken=True)),
                             out=str(base / "new"), now=NOW,
                             waivers=str(_waivers(base / "waivers.json")),
                             previous=str(old.report_path)))
    return {"old": old.report_path.parent, "new": new.report_path.parent}


def _read(d: Path, name: str) -> str:
    return (d / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(("name", "suffix"), [
    ("report.md", "md"), ("report.html", "html"), ("report.json", "json"),
    ("junit.xml", "xml")])
def test_every_format_matches_its_snapshot(run_dirs: dict[str, Path], snapshot: Any,
                                           name: str, suffix: str) -> None:
    assert _read(run_dirs["new"], name) == snapshot(extension_class=_ext(suffix))


def test_rendering_is_deterministic_and_shadow_report_rerenders_the_same_bytes(
        run_dirs: dict[str, Path], tmp_path: Path) -> None:
    new = run_dirs["new"]
    out = tmp_path / "again"
    code = main(["report", str(new / "report.json"), "--previous",
                 str(run_dirs["old"] / "report.json"), "--out", str(out)])
    assert code == 1  # the report it renders is NO-GO
    for name in ("report.json", "report.md", "report.html", "junit.xml"):
        assert _read(out, name) == _read(new, name), name
    assert main(["report", str(new), "--format", "md", "--out", str(tmp_path / "md")]) == 1
    assert [p.name for p in (tmp_path / "md").iterdir()] == ["report.md"]


def test_the_report_shows_verdict_blocking_reasons_waivers_trend_and_links(
        run_dirs: dict[str, Path]) -> None:
    rep = json.loads(_read(run_dirs["new"], "report.json"))
    html = _read(run_dirs["new"], "report.html")
    md = _read(run_dirs["new"], "report.md")
    assert rep["verdict"] == "NO-GO" and rep["blocking_reasons"] == ["fixture.invalid"]
    assert '<header class="banner nogo">' in html
    assert html.index('id="blocking"') < html.index('id="surfaces"')  # blocking first
    assert "<svg" in html and "expiring in 19 days" in html and "expired" in html
    assert "W-003" in html and "unused" in html
    # every divergence sits under an anchor of its case, linked to its fixture
    for d in rep["divergences"]:
        fx = re.sub(r"[^A-Za-z0-9_.-]", "_", d["fixture"])
        sf = re.sub(r"[^A-Za-z0-9_.-]", "_", d["surface"])
        assert f'id="c-{fx}--{sf}"' in html and f'href="#fx-{fx}"' in html
    anchors = set(re.findall(r'id="([^"]+)"', html))
    assert all(h in anchors for h in re.findall(r'href="#([^"]+)"', html))
    assert len(anchors) == len(re.findall(r'id="([^"]+)"', html))  # unique ids
    assert "Trend against the previous report" in md and "new**" in md
    assert len(md.encode("utf-8")) < 60_000


def test_html_has_no_external_references(run_dirs: dict[str, Path]) -> None:
    html = _read(run_dirs["new"], "report.html")
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.I)
    assert not re.search(r"<link[^>]*\bhref\s*=", html, re.I)
    assert "@import" not in html and "url(" not in html


def test_junit_parses_and_its_counts_match_report_json(run_dirs: dict[str, Path]) -> None:
    rep = json.loads(_read(run_dirs["new"], "report.json"))
    from shadow.gates import policy, rule

    xml = JUnitXml.fromfile(str(run_dirs["new"] / "junit.xml"))
    suites = {s.name: s for s in xml}
    gate = suites.pop("shadow.gate")
    cases = [(s.name, c) for s in suites.values() for c in s]
    assert len(cases) == len(rep["cases"])
    # the one failure rule, recomputed from the divergences at the report's phase
    judged = rule.judge_cases(policy.load(), rep["phase"],
                              [(c["fixture"], c["surface"]) for c in rep["cases"]],
                              rep["divergences"])
    failing = {(c["fixture"], c["surface"]) for c in judged if c["outcome"] == "fail"}
    assert failing == {(c["fixture"], c["surface"]) for c in rep["cases"]
                       if c["outcome"] == "fail"} != set()
    assert not any("~" in sf for _, sf in failing)  # twin cases never fail
    failed = {(c.classname, c.name) for _, c in cases
              if any(isinstance(r, Failure) for r in c.result)}
    assert failed == failing
    assert sum(s.tests for s in suites.values()) == len(rep["cases"])
    assert sum(s.failures for s in suites.values()) == len(failing)
    assert {(c.classname, c.name) for _, c in cases} == {
        (c["fixture"], c["surface"]) for c in rep["cases"]}
    # the gate suite: one testcase per requirement of the phase, failing iff it fails
    step = rep["ladder"][rep["phase"]]
    assert gate.tests == len(step["requirements"])
    assert gate.failures == sum(q["status"] != "pass" for q in step["requirements"])
    assert (xml.failures == 0) == (rep["verdict"] == "GO")


def test_evidence_binds_the_run_to_its_candidate(run_dirs: dict[str, Path]) -> None:
    ev = json.loads(_read(run_dirs["new"], "evidence.json"))
    rep = json.loads(_read(run_dirs["new"], "report.json"))
    ident = ev["identity"]
    assert ident["commit"] == "0" * 40 and ident["policy_version"] == "gate-policy/1"
    assert ident["corpus_digest"] == rep["candidate"]["corpus_digest"]
    assert ident["waivers_digest"].startswith("sha256:")
    assert ev["identity_digest"] == evidence.identity_digest(ident)
    assert ev["checks"]["replay.deterministic"]["status"] == "pass"
    assert ev["checks"]["schemas.frozen"]["status"] == "pass"
    assert ev["checks"]["inventory.valid"]["status"] == "pass"
    assert len(ev["cases"]) == len(rep["cases"])
    assert sum(s["cases"] for s in ev["surfaces"].values()) == len(rep["cases"])
    assert ev["run"]["by_severity"]["blocking"] == 1 and ev["environment"]["platform"] == "linux"


def test_git_missing_gives_unknown_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evidence, "_git", lambda *a: None)
    monkeypatch.delenv("GITHUB_SHA", raising=False)
    assert GIT_COMMIT() == "unknown"
    monkeypatch.setenv("GITHUB_SHA", "abc")
    assert GIT_COMMIT() == "abc"
    assert evidence.platform_name("win32") == "windows"
    assert evidence.platform_name("darwin") == "macos"


def test_shadow_diff(run_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    old = json.loads(_read(run_dirs["old"], "report.json"))
    new = json.loads(_read(run_dirs["new"], "report.json"))
    d = diff_reports(old, new)
    # three fixtures cannot pass the gate at any phase (too few fixtures): both NO-GO
    assert d.verdict == ("NO-GO", "NO-GO")
    assert {x["fixture"] for x in d.fixed} >= {"duplicate-user-messages"}
    assert {x["fixture"] for x in d.new} >= {"orphan-tool-result", "late-tool-result"}
    assert not diff_reports(new, new).new and diff_reports(new, new).unchanged == len(
        new["divergences"])
    assert main(["diff", str(run_dirs["old"]), str(run_dirs["new"])]) == 1  # new blocking
    text = capsys.readouterr().out
    assert text.startswith("verdict: NO-GO -> NO-GO\nnew: ")
    assert main(["diff", str(run_dirs["new"]), str(run_dirs["old"]), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "shadow-report-diff/v1"
    assert main(["diff", str(run_dirs["old"]), str(run_dirs["new"]), "--format", "md"]) == 1
    assert "## Shadow diff: NO-GO → NO-GO" in capsys.readouterr().out


def test_changed_divergences_are_paired() -> None:
    a = {"fixture": "f", "surface": "s", "reason_code": "item.order", "severity": "minor",
         "attribution": "none", "item_ids": ["x"], "detail": {}}
    b = {**a, "severity": "major", "item_ids": ["x", "y"]}
    d = diff_reports({"divergences": [a]}, {"divergences": [b]})
    assert not d.new and not d.fixed and d.changed[0].what == ["severity", "items"]


def test_shadow_run_prints_verdict_counts_and_paths(
        tmp_path: Path, fixed_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    fx = _corpus(tmp_path / "fx", ("pending-approval",))
    out = tmp_path / "latest"
    # one fixture cannot pass phase 1 (too few fixtures, surfaces without a capture): the
    # run says so, phase by phase, exactly as the gate would
    assert main(["run", "--fixtures", str(fx), "--out", str(out), "--skip-determinism"]) == 1
    text = capsys.readouterr().out
    assert "by severity: blocking 0, major " in text
    assert text.endswith("verdict: NO-GO (phase 1)\n")
    assert "phases: 0 NO-GO  1 NO-GO" in text and "to reach phase 1: " in text
    assert "by attribution: candidate 0, baseline " in text
    for name in ("report.json", "evidence.json", "report.md", "report.html", "junit.xml"):
        assert f"report: {out / name}" in text
    assert main(["run", "--fixtures", str(fx), "--out", str(out),
                 "--attach", str(tmp_path / "missing.xml")]) == 2
    assert main(["report", str(tmp_path / "nope.json")]) == 2


def test_attached_junit_is_summarised(tmp_path: Path) -> None:
    xml = tmp_path / "c.xml"
    xml.write_text('<testsuites><testsuite name="s"><testcase classname="a.b" name="t1"/>'
                   '<testcase classname="a.b" name="t2"><failure message="x"/></testcase>'
                   '<testcase classname="a.b" name="t3"><skipped/></testcase>'
                   '</testsuite></testsuites>', encoding="utf-8")
    got = evidence.read_junit(xml)
    assert [(t["id"], t["outcome"]) for t in got["testcases"]] == [
        ("a.b.t1", "passed"), ("a.b.t2", "failed"), ("a.b.t3", "skipped")]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_on_a_terminal_and_stays_quiet_otherwise() -> None:
    tty, pipe = _Tty(), io.StringIO()
    for stream in (tty, pipe):
        bar = TerminalProgress(stream, interval=0.0)
        for i in range(1, 4):
            bar(i, 3, f"fx-{i}")
    assert "[" in tty.getvalue() and "3/3" in tty.getvalue() and "/s, ETA" in tty.getvalue()
    assert tty.getvalue().endswith("\r")  # the line is cleared at the end
    assert pipe.getvalue() == ""  # a run shorter than `every` prints nothing to a log


def test_progress_off_a_terminal_is_plain_periodic_lines_without_labels() -> None:
    pipe = io.StringIO()
    bar = TerminalProgress(pipe, every=0.0)
    for i in range(1, 6):
        bar(i, 5, f"secret-fixture-{i}")
    lines = pipe.getvalue().splitlines()
    assert lines and all(line.startswith("replay: ") and "/s, ETA " in line for line in lines)
    assert "5/5" not in pipe.getvalue()  # the end is the report, not a progress line
    assert "secret-fixture" not in pipe.getvalue() and "\r" not in pipe.getvalue()


def test_a_report_of_another_schema_is_an_input_error(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text('{"schema": "x"}', encoding="utf-8")
    with pytest.raises(InputError):
        reports.load_report(p)
