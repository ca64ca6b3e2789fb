"""Whole-corpus replay: every capture replays, every code is registered, the live kernel
breaks no invariant, and the report is byte-identical across runs and listings."""

from __future__ import annotations

import datetime as dt
import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from shadow import codes
from shadow.candidate import KernelCandidate, RecordedCandidate
from shadow.fixtures import load_corpus
from shadow.replay import reduce_results, replay_all, replay_fixture
from shadow.run import RunOptions, execute
from shadow.surfaces import adapter_for
from tests.shadow.findings import FINDINGS

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
NOW = dt.datetime(2026, 9, 1, 12, 0, tzinfo=dt.UTC)
#: codes only the single-projection invariant checks produce
INVARIANT_CODES = {
    "tool_pair.split", "tool_pair.mismatch", "pending.lost", "protected.dropped",
    "pinned.altered", "trust.escalated", "secret.leaked", "provider.cancel_swallowed",
    "provider.degraded_masked", "provider.usage_unknown_masked", "shadow.side_effect",
    "writer.dual", "memory.scope_expanded", "deletion.backfill", "deletion.overbroad",
    "deletion.receipt_mismatch", "memory.recall_mismatch", "session.chain_invalid",
    "session.replay_mismatch",
}


@functools.lru_cache(maxsize=1)
def corpus():  # type: ignore[no-untyped-def]
    return load_corpus(FIXTURES)


@functools.lru_cache(maxsize=1)
def results():  # type: ignore[no-untyped-def]
    return tuple(replay_all(corpus().scenarios, KernelCandidate()))


def test_every_bundled_capture_has_an_adapter_and_replays() -> None:
    c = corpus()
    assert not c.quarantined
    manifest = json.loads((FIXTURES / "MANIFEST.json").read_text(encoding="utf-8"))
    assert len(c.scenarios) == len(manifest["scenarios"])
    for s in c.scenarios:
        for cap in s.captures:
            assert adapter_for(cap.name) is not None, cap.file
    total_captures = sum(len(s.captures) for s in c.scenarios)
    twins = sum(r.comparisons for r in results()) - total_captures
    assert twins > 0  # cross-surface comparisons ran as well
    projected = {(p.fixture, p.surface) for r in results() for p in r.candidate_projections}
    assert len(projected) == total_captures


def test_every_divergence_has_a_registered_code_and_valid_fields() -> None:
    divs, defects, _, _ = reduce_results(results())
    assert divs and defects
    for d in (*divs, *defects):
        assert d.reason_code in codes.REGISTRY
        assert d.severity in codes.SEVERITIES
        assert d.attribution in codes.ATTRIBUTIONS
        if d.reason_code.startswith("noise."):
            assert d.severity == "info"
    for d in defects:
        assert d.attribution == "baseline" and d.severity != "blocking"


def test_live_kernel_breaks_no_invariant_on_any_fixture() -> None:
    divs, _, _, _ = reduce_results(results())
    broken = [d.to_wire() for d in divs
              if d.attribution in ("candidate", "both") and d.reason_code in INVARIANT_CODES]
    # only the named finding: the unrecorded Desktop summary request (tests/shadow/findings)
    assert {(d["fixture"], d["surface"]) for d in broken} == FINDINGS
    assert {d["reason_code"] for d in broken} == {"shadow.side_effect"}
    assert {(d.fixture, d.surface) for d in divs if d.severity == "blocking"} == FINDINGS
    crashed = [d.to_wire() for d in divs if d.reason_code == "candidate.unavailable"]
    assert crashed == []


def test_known_legacy_defects_are_named() -> None:
    _, defects, _, _ = reduce_results(results())
    found = {(d.fixture, d.surface, d.reason_code) for d in defects}
    for expected in [
        ("pending-approval", "cli.compress", "pending.lost"),
        ("secrets-in-tool-output", "cli.provider-compaction", "secret.leaked"),
        ("provider-cancelled", "desktop.compress", "provider.cancel_swallowed"),
        ("provider-invalid-json", "desktop.compress", "provider.degraded_masked"),
        ("provider-usage-unknown", "cli.provider-compaction", "provider.usage_unknown_masked"),
        ("memory-clear-scope", "session-core.memory", "deletion.overbroad"),
        ("memory-consolidate-trace", "session-core.memory", "memory.scope_expanded"),
        ("ide-budget-zero", "vscode.context-center", "protected.dropped"),
        ("parallel-tool-calls", "desktop.context-engineering", "tool_pair.mismatch"),
        ("prompt-injection-web-fetch", "cli.provider-compaction", "trust.escalated"),
        ("null-content-tool-calls", "cli.compress", "drop_reason.unjustified"),
        ("near-duplicate-test-results", "cli.compress", "drop_reason.unjustified"),
        ("pending-approval", "cli.compress", "item.reordered"),
        ("memory-consolidate-trace", "session-core.memory", "trust.escalated"),
    ]:
        assert expected in found, expected
    # a kept prior summary whose text came from no untrusted input is not an escalation
    assert ("replay-cc-summary", "cli.compress", "trust.escalated") not in found


def _report(tmp: Path, name: str, **kw: object) -> tuple[bytes, dict]:  # type: ignore[type-arg]
    res = execute(RunOptions(fixtures=str(kw.pop("fixtures", FIXTURES)), out=str(tmp / name),
                             now=NOW, **kw))  # type: ignore[arg-type]
    data = res.report_path.read_bytes()
    return data, json.loads(data)


def test_report_is_byte_identical_across_runs_and_listing_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, report = _report(tmp_path, "a")
    second, _ = _report(tmp_path, "b")
    assert first == second
    real_iterdir = Path.iterdir

    def reversed_iterdir(self: Path):  # type: ignore[no-untyped-def]
        return iter(sorted(real_iterdir(self), reverse=True))

    monkeypatch.setattr(Path, "iterdir", reversed_iterdir)
    third, _ = _report(tmp_path, "c")
    assert third == first
    assert report["schema"] == "shadow-report/v1"
    assert set(report) == {"schema", "verdict", "phase", "candidate", "totals",
                           "blocking_reasons", "divergences", "legacy_defects", "waivers",
                           "intended", "attribution", "generated_at", "cases", "ladder",
                           "noise_rules"}
    assert {"fixtures", "comparisons", "divergences", "blocking"} <= set(report["totals"])
    manifest = json.loads((FIXTURES / "MANIFEST.json").read_text(encoding="utf-8"))
    assert report["totals"]["fixtures"] == len(manifest["scenarios"])
    # the bundled corpus is NO-GO on its named finding (tests/shadow/findings.py)
    assert report["verdict"] == "NO-GO" and report["blocking_reasons"]
    keys = {"id", "fixture", "surface", "reason_code", "severity", "attribution", "item_ids",
            "detail"}
    assert all(set(d) == keys for d in report["divergences"] + report["legacy_defects"])


def test_reduce_is_order_independent() -> None:
    rs = list(results())
    a = reduce_results(rs)
    b = reduce_results(reversed(rs))
    assert [d.to_wire() for d in a[0]] == [d.to_wire() for d in b[0]]
    assert [d.to_wire() for d in a[1]] == [d.to_wire() for d in b[1]]


def test_map_step_is_picklable_and_pool_gives_the_same_result() -> None:
    import pickle

    from shadow.executors import MapOptions, run_map
    from shadow.fixtures import read_scenario_folder
    from shadow.mapstep import MapContext, Task, UnitResult

    names = ("parallel-tool-calls", "ide-duplicate-identity", "memory-clear-scope")
    some = [s for s in corpus().scenarios if s.name in names]
    pickle.dumps((some[0], KernelCandidate()))
    tasks = [Task(n, tuple(read_scenario_folder(FIXTURES / n, n))) for n in names]
    pooled: list[UnitResult] = []
    run_map(tasks, MapContext(KernelCandidate()), MapOptions(executor="process", jobs=2),
            len(tasks), pooled.append)
    serial = {s.name: [d.to_wire() for d in replay_fixture(s, KernelCandidate()).divergences]
              for s in some}
    assert {r.fixture: list(r.divergences) for r in pooled} == serial


def test_recorded_candidate_round_trip_gives_the_same_divergences(tmp_path: Path) -> None:
    rec = tmp_path / "cand"
    _, live = _report(tmp_path, "live", record_candidate=str(rec))
    _, again = _report(tmp_path, "again", candidate=str(rec))
    assert again["divergences"] == live["divergences"]
    assert again["candidate"]["kind"] == "recorded"
    assert RecordedCandidate(rec).identity["planner"] == "kernel.planning.planner.plan_context"


def test_surface_filter_limits_the_run(tmp_path: Path) -> None:
    _, rep = _report(tmp_path, "f", surfaces=("vscode.*", "jetbrains"))
    assert {d["surface"] for d in rep["divergences"]} <= {
        "vscode.context-center", "jetbrains.context-center",
        "vscode.context-center~jetbrains.context-center"}
    manifest = json.loads((FIXTURES / "MANIFEST.json").read_text(encoding="utf-8"))
    ide = [s for s in manifest["scenarios"] if s["kind"] == "ide"]
    assert rep["totals"]["comparisons"] == 3 * len(ide)  # both twins and their comparison


def test_cli_exit_codes_and_codes_json(tmp_path: Path) -> None:
    env_py = [sys.executable, "-m", "shadow"]
    ok = subprocess.run([*env_py, "run", "--fixtures", str(FIXTURES), "--out",
                         str(tmp_path / "o"), "--surface", "session-core"],
                        capture_output=True, text=True, cwd=ROOT, check=False)
    (tmp_path / "empty").mkdir()
    # one surface alone is not enough evidence for the gate at phase 1: the run says so
    assert ok.returncode == 1, ok.stderr
    assert "verdict: NO-GO (phase 1)" in ok.stdout and "to reach phase 1: " in ok.stdout
    for args in (["--surface", "no-such-surface"], ["--fixtures", ""], ["--jobs", "0"],
                 ["--fixtures", str(tmp_path / "empty")]):  # nothing selected / empty / jobs
        none = subprocess.run([*env_py, "run", "--out", str(tmp_path / "n"), *args],
                              capture_output=True, text=True, cwd=ROOT, check=False)
        assert none.returncode == 2, (args, none.stdout, none.stderr)
        assert "shadow: error:" in none.stderr and "internal error" not in none.stderr
    bad = subprocess.run([*env_py, "run", "--fixtures", str(tmp_path / "missing")],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    assert bad.returncode == 2
    usage = subprocess.run([*env_py, "run", "--phase", "9"], capture_output=True, text=True,
                           cwd=ROOT, check=False)
    assert usage.returncode == 2
    out = subprocess.run([*env_py, "codes", "--json"], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    listed = {c["code"] for c in json.loads(out.stdout)}
    assert listed == set(codes.REGISTRY)


REQUIRED_CODES = [
    "item.missing_in_candidate", "item.missing_in_baseline", "item.order",
    "item.derived_mismatch", "drop_reason.mismatch", "digest.mismatch", "tool_pair.split",
    "tool_pair.mismatch", "pending.lost", "task_state.mismatch", "protected.dropped",
    "pinned.altered", "trust.escalated", "secret.leaked", "summary.text_only",
    "provider.degraded_masked", "provider.usage_unknown_masked", "provider.cancel_swallowed",
    "memory.scope_expanded", "memory.sensitivity_lowered", "memory.state_mismatch",
    "memory.recall_mismatch", "deletion.backfill", "deletion.overbroad",
    "deletion.receipt_mismatch", "writer.dual", "shadow.side_effect", "noise.path_format",
    "noise.token_estimate", "noise.volatile_field", "fixture.invalid", "unclassified",
    "drop_reason.unjustified", "alteration.unjustified", "item.reordered",
    "system_policy.altered",
]


def test_registry_holds_every_required_code_and_docs_are_in_sync() -> None:
    assert set(REQUIRED_CODES) <= set(codes.REGISTRY)
    nogo = {"tool_pair.split", "tool_pair.mismatch", "pending.lost", "memory.scope_expanded",
            "deletion.backfill", "writer.dual", "shadow.side_effect"}
    assert nogo == codes.NOGO_CODES
    protections = {"protected.dropped", "pinned.altered", "trust.escalated", "secret.leaked",
                   "system_policy.altered", "memory.sensitivity_lowered",
                   "provider.degraded_masked", "provider.usage_unknown_masked",
                   "provider.cancel_swallowed", "deletion.overbroad",
                   "deletion.receipt_mismatch", "budget.exceeded"}
    assert protections == codes.PROTECTION_CODES
    for code in nogo | protections:
        assert codes.severity_for(code, "candidate") == "blocking"
        for who in ("baseline", "twin", "intended", "none"):
            assert codes.severity_for(code, who) != "blocking"
    doc = (ROOT / "docs" / "reason-codes.md").read_text(encoding="utf-8")
    assert codes.render_markdown() in doc


def test_a_bad_fixture_is_quarantined_reported_and_the_run_goes_on(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "fx"
    for name in ("short-session", "pending-approval"):
        shutil.copytree(FIXTURES / name, root / name)
    (root / "pending-approval" / "cli.compress.json").write_text('{"format": 1}',
                                                                 encoding="utf-8")
    _, rep = _report(tmp_path, "q", fixtures=root)
    assert rep["verdict"] == "NO-GO" and rep["blocking_reasons"] == ["fixture.invalid"]
    bad = [d for d in rep["divergences"] if d["reason_code"] == "fixture.invalid"]
    assert bad[0]["fixture"] == "pending-approval" and bad[0]["detail"]["pointer"]
    assert rep["totals"]["fixtures"] == 2 and rep["totals"]["comparisons"] >= 4
