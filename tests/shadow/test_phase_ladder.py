"""``shadow run --phase N`` answers what ``shadow gate --phase N --platforms <this>`` answers
on the run's own evidence, for every phase, on the bundled corpus and on a broken
candidate; and the run's cases, JUnit and banner agree with that one failure rule.

The ladder's mechanics are checked on the bundled corpus less the scenarios with a known,
named finding against the live kernel (``FINDINGS``: a NO-GO the evidence shows, kept in
the corpus and asserted as such below), so that phases 0 and 1 pass there."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from shadow import evidence
from shadow.cli import main
from shadow.gates import policy, rule
from tests.shadow.findings import FINDINGS, FINDINGS_MAJOR

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
RECORDINGS = ROOT / "recordings"
PHASES = range(6)
THIS = evidence.platform_name()
@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled fixtures without the scenarios of ``FINDINGS`` (manifest filtered)."""
    dst = tmp_path_factory.mktemp("corpus") / "fixtures"
    dst.mkdir()
    skip = {f for f, _s in FINDINGS}
    manifest = json.loads((FIXTURES / "MANIFEST.json").read_text(encoding="utf-8"))
    manifest["scenarios"] = [s for s in manifest["scenarios"] if s["id"] not in skip]
    manifest["errored"] = [e for e in manifest["errored"] if e["scenario"] not in skip]
    for s in manifest["scenarios"]:
        shutil.copytree(FIXTURES / s["id"], dst / s["id"])
    for extra in FIXTURES.glob("_*.json"):
        shutil.copyfile(extra, dst / extra.name)
    (dst / "MANIFEST.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                       encoding="utf-8")
    return dst


@pytest.fixture(scope="module")
def broken_candidate(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> Path:
    """The live kernel, recorded, then made to alter one tool result on two CLI surfaces:
    a ``major`` divergence against the candidate (``alteration.unjustified``) — GO where
    only blocking fails a case (phase 1), NO-GO where CLI cases fail at ``major``."""
    base = tmp_path_factory.mktemp("broken")
    folder = base / "cand"
    assert main(["run", "--fixtures", str(corpus), "--recordings", str(RECORDINGS),
                 "--out", str(base / "rec"), "--record-candidate", str(folder),
                 "--skip-determinism"]) in (0, 1)
    changed = 0
    for surface in ("cli.compress", "cli.jsonl-session"):
        path = folder / "pending-approval" / f"{surface}.projection.json"
        doc = json.loads(path.read_text(encoding="utf-8"))
        for it in doc["items"]:
            if it["id"] == "pending-approval:m0003":
                it["digest"] = "sha256:" + "1" * 64
                changed += 1
        path.write_text(json.dumps(doc), encoding="utf-8")
    assert changed == 2
    return folder


def _run_and_gate(out: Path, phase: int, *extra: str, capsys: pytest.CaptureFixture[str],
                  fixtures: Path = FIXTURES) -> tuple[int, int, dict[str, Any]]:
    ran = main(["run", "--fixtures", str(fixtures), "--recordings", str(RECORDINGS),
                "--out", str(out), "--phase", str(phase), *extra])
    capsys.readouterr()
    gated = main(["gate", "--phase", str(phase), "--platforms", THIS, str(out)])
    text = capsys.readouterr().out
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert text.startswith(f"phase {phase} (")
    return ran, gated, report


@pytest.mark.parametrize("phase", PHASES)
def test_run_exit_code_equals_the_gate_on_its_own_evidence(
        tmp_path: Path, phase: int, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ran, gated, report = _run_and_gate(tmp_path / "o", phase, capsys=capsys, fixtures=corpus)
    assert ran == gated, report["ladder"][phase]["reasons"]
    assert report["verdict"] == ("GO" if ran == 0 else "NO-GO")
    assert report["ladder"][phase]["verdict"] == report["verdict"]
    # the corpus without the named findings passes phases 0 and 1 on the live kernel
    assert (ran == 0) == (phase <= 1)


def test_the_bundled_corpus_fails_phase_1_on_exactly_its_named_findings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ran, gated, report = _run_and_gate(tmp_path / "o", 1, capsys=capsys)
    assert ran == gated == 1
    failing = {(c["fixture"], c["surface"]) for c in report["cases"] if c["outcome"] == "fail"}
    assert failing == FINDINGS
    codes_ = {d["reason_code"] for d in report["divergences"]
              if (d["fixture"], d["surface"]) in FINDINGS and d["severity"] == "blocking"}
    assert codes_ == {"shadow.side_effect"}
    ran, gated, report = _run_and_gate(tmp_path / "o2", 2, capsys=capsys)
    assert ran == gated == 1
    failing = {(c["fixture"], c["surface"]) for c in report["cases"] if c["outcome"] == "fail"}
    assert failing == FINDINGS | FINDINGS_MAJOR
    # issue 15: the corpus meets every surface's floor for phases 1-3
    insufficient = [r for step in report["ladder"][:4] for r in step["reasons"]
                    if r["code"] == "evidence.insufficient"]
    assert insufficient == []
    # issue 17: phase 4 has sdk and app-server evidence from the bundled corpus, and the
    # server and the SDK never differ from the in-process kernel (no served case fails)
    assert main(["gate", "--phase", "4", "--platforms", THIS, "--json",
                 str(tmp_path / "o2")]) == 1
    rows = {r["surface"]: r for r in json.loads(capsys.readouterr().out)["surfaces"]
            if r["phase"] == 4}
    for served in ("sdk", "app-server"):
        assert rows[served]["fixtures"] >= 10 and rows[served]["failing"] == 0, rows[served]
        assert rows[served]["status"] == "pass"
    assert not [d for d in report["divergences"]
                if d["surface"].split(".", 1)[0] in ("sdk", "app-server")]


@pytest.mark.parametrize("phase", PHASES)
def test_a_broken_candidate_exit_code_equals_the_gate_too(
        tmp_path: Path, phase: int, broken_candidate: Path, corpus: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    ran, gated, report = _run_and_gate(tmp_path / "o", phase, "--candidate",
                                       str(broken_candidate), capsys=capsys, fixtures=corpus)
    assert ran == gated
    failing = {(c["fixture"], c["surface"]) for c in report["cases"] if c["outcome"] == "fail"}
    if phase >= 2:  # CLI cases fail at major from phase 2 on
        assert ran == 1
        assert failing == {("pending-approval", "cli.compress"),
                           ("pending-approval", "cli.jsonl-session")} | FINDINGS_MAJOR
        codes_ = {r["code"] for r in report["ladder"][phase]["reasons"]}
        assert "policy.divergence_threshold" in codes_
    else:
        assert ran == 0 and not failing
    # one rule: the report's case outcomes are recomputed from its divergences alone
    judged = rule.judge_cases(policy.load(), phase,
                              [(c["fixture"], c["surface"]) for c in report["cases"]],
                              report["divergences"])
    assert judged == report["cases"]
    assert report["totals"]["failing_cases"] == len(failing)
    junit = (tmp_path / "o" / "junit.xml").read_text(encoding="utf-8")
    assert ('failures="0"' in junit.split("\n")[1]) == (ran == 0)


def test_the_ladder_lists_what_each_phase_still_needs(
        tmp_path: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--fixtures", str(corpus), "--out", str(tmp_path / "o"),
                 "--phase", "2"]) == 1
    text = capsys.readouterr().out
    report = json.loads((tmp_path / "o" / "report.json").read_text(encoding="utf-8"))
    assert [s["verdict"] for s in report["ladder"]] == ["GO", "GO", "NO-GO", "NO-GO",
                                                       "NO-GO", "NO-GO"]
    two = report["ladder"][2]
    assert any("attach JUnit XML" in a and "--attach" in a for a in two["to_reach"])
    # the corpus meets every floor of phases 1-3 (issue 15): nothing asks for more fixtures
    assert not [a for r in report["ladder"][:4] for a in r["to_reach"] if a.startswith("add ")]
    assert "phases: 0 GO  1 GO  2 NO-GO" in text and "verdict: NO-GO (phase 2)" in text
    md = (tmp_path / "o" / "report.md").read_text(encoding="utf-8")
    assert "### Phase ladder" in md and "**To reach phase 2**" in md
    assert "NO-GO at phase 2" in md


def test_attaching_the_conformance_results_moves_the_ladder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    xml = tmp_path / "conformance.xml"
    xml.write_text('<testsuites><testsuite name="c">'
                   '<testcase classname="tests.conformance.test_session_ports" name="t1"/>'
                   '<testcase classname="tests.conformance.test_jsonl_legacy" name="t2"/>'
                   "</testsuite></testsuites>", encoding="utf-8")
    assert main(["run", "--out", str(tmp_path / "o"), "--phase", "2",
                 "--attach", str(xml)]) == 1
    capsys.readouterr()
    report = json.loads((tmp_path / "o" / "report.json").read_text(encoding="utf-8"))
    two = report["ladder"][2]
    assert not any("attach JUnit XML" in a for a in two["to_reach"])
    assert {q["name"]: q["status"] for q in two["requirements"]}[
        "conformance.session_store"] == "pass"
