"""Phase gates on synthetic evidence: every phase passes on complete evidence and fails,
with the right reason code, on a missing platform, a mixed candidate, an expired waiver,
too few fixtures and a candidate-attributed NO-GO divergence."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from shadow import codes, evidence, gates
from shadow.cli import main
from shadow.errors import InputError
from shadow.evidence import EvidenceInputs, collect
from shadow.gates import policy as policy_mod
from shadow.gates.stats import min_fixtures_for, wilson_upper

ROOT = Path(__file__).resolve().parents[2]
TODAY = "2026-09-01"
PLATFORMS = ("linux", "windows", "macos")
SURFACES = ("cli", "desktop", "vscode", "jetbrains", "session-core", "sdk", "app-server")
GATE_CODES = ("evidence.missing", "evidence.missing_platform", "evidence.mixed_candidate",
              "evidence.insufficient", "evidence.platform_mismatch", "policy.version_mismatch",
              "policy.check_failed", "policy.divergence_threshold", "policy.nogo_class",
              "policy.waiver_expired")
CONFORMANCE = [f"tests.conformance.{m}.test_x" for m in (
    "test_session_ports", "test_tombstone", "test_fail_closed")]


def case(fixture: str, surface: str, worst: str = "clean", nogo: tuple[str, ...] = (),
         by_code: dict[str, int] | None = None) -> dict[str, Any]:
    return {"fixture": fixture, "surface": surface, "worst": worst,
            "by_severity": {} if worst == "clean" else {worst: 1},
            "by_code": by_code or {}, "nogo": list(nogo)}


def make(platform: str = "linux", *, fixtures: int = 12, commit: str = "c0ffee",
         cases: list[dict[str, Any]] | None = None, applied: list[dict[str, Any]] | None = None,
         policy_version: str = "gate-policy/1", results: str = "sha256:r",
         policy_digest: str | None = None,
         active_writers: tuple[str, ...] = (), check_status: str = "pass",
         testcases: list[str] | None = None, failing_test: bool = False) -> dict[str, Any]:
    identity = {"commit": commit, "package_version": "0.1.0", "corpus_digest": "sha256:c",
                "recordings_digest": "sha256:r", "policy_version": policy_version,
                "policy_digest": policy_digest or policy_mod.load().digest,
                "candidate_digest": "sha256:k", "waivers_digest": "none", "surfaces": []}
    if cases is None:
        cases = [case(f"{s}-{i:02d}", f"{s}.entry") for s in SURFACES for i in range(fixtures)]
    tcs = [{"id": t, "outcome": "passed"} for t in (testcases or CONFORMANCE)]
    if failing_test:
        tcs[0]["outcome"] = "failed"
    return {
        "schema": evidence.SCHEMA, "identity": identity,
        "identity_digest": evidence.identity_digest(identity),
        "environment": environment(platform),
        "run": {"verdict": "GO", "phase": 1, "totals": {"quarantined": 0},
                "results_digest": results},
        "cases": cases,
        "waivers": {"applied": applied or [], "expired": [], "unused": []},
        "checks": {"inventory.valid": {"status": check_status,
                                       "active_legacy_writers": list(active_writers)},
                   "schemas.frozen": {"status": "pass"},
                   "replay.deterministic": {"status": "pass"}},
        "inventory": None,
        "attachments": [{"file": "conformance.xml", "digest": "sha256:x", "testcases": tcs}],
    }


_SYS = {"linux": ("linux", "/", "Linux-6.1.0-x86_64-with-glibc2.36"),
        "windows": ("win32", "\\", "Windows-10-10.0.19045-SP0"),
        "macos": ("darwin", "/", "macOS-14.5-arm64-arm-64bit")}


def environment(platform: str) -> dict[str, Any]:
    """What a run on ``platform`` records (distinct per platform, as real runs are)."""
    sys_platform, sep, release = _SYS[platform]
    return {"platform": platform, "python": "3.11.9", "implementation": "CPython",
            "machine": "x86_64", "dirty": False, "sys_platform": sys_platform,
            "os_release": release, "path_sep": sep,
            "python_compiler": "MSC v.1937 64 bit (AMD64)" if platform == "windows"
            else "GCC 12.2.0",
            "python_build": f"main {platform}"}


def synth_report(cases: list[dict[str, Any]], comparisons: int) -> dict[str, Any]:
    """A report.json whose per-case summaries are ``cases`` (worst, by_code, nogo): one
    candidate-attributed divergence per counted code, the first at the case's worst."""
    from shadow.divergence import with_ids

    divs = []
    for c in cases:
        counted = dict(c.get("by_code", {}))
        if c["worst"] != "clean" and not counted:
            counted = {"item.order": 1}
        first = True
        for code, n in sorted(counted.items()):
            for _ in range(n):
                sev = "blocking" if code in c.get("nogo", []) else \
                    c["worst"] if first and c["worst"] != "clean" else "info"
                first = False
                divs.append({"fixture": c["fixture"], "surface": c["surface"],
                             "reason_code": code, "severity": sev, "attribution": "candidate",
                             "item_ids": [], "detail": {}})
    return {"schema": "shadow-report/v1", "verdict": "GO", "phase": 1, "candidate": {},
            "totals": {"comparisons": comparisons, "quarantined": 0},
            "cases": [{"fixture": c["fixture"], "surface": c["surface"]} for c in cases],
            "divergences": with_ids(divs), "legacy_defects": [],
            "generated_at": "2026-09-01T00:00:00Z"}


def seal(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The evidence as a run would write it, with the report.json it summarises: the
    per-case rows and the results digest recomputed, the evidence digest sealed.  The
    ``results`` marker of :func:`make` stands for different results on one platform."""
    doc = copy.deepcopy(doc)
    marker = doc["run"]["results_digest"]
    report = synth_report(doc["cases"], 0 if marker == "sha256:r" else len(marker))
    doc["cases"] = evidence.case_summaries(report)
    doc["run"]["results_digest"] = evidence.results_digest(
        report["divergences"], [], [(c["fixture"], c["surface"]) for c in report["cases"]],
        report["totals"]["comparisons"])
    return evidence.seal(doc), report


def write_all(tmp: Path, docs: list[dict[str, Any]]) -> list[str]:
    paths = []
    for i, d in enumerate(docs):
        p = tmp / f"{i}-{d['environment']['platform']}" / "evidence.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        sealed, report = seal(d)
        p.write_text(json.dumps(sealed), encoding="utf-8")
        (p.parent / "report.json").write_text(json.dumps(report), encoding="utf-8")
        paths.append(str(p))
    return paths


def judge(tmp: Path, docs: list[dict[str, Any]], phase: int, **kw: Any) -> gates.GateResult:
    return gates.gate(write_all(tmp, docs), phase, today=TODAY, **kw)


def codes_of(result: gates.GateResult) -> set[str]:
    return {r.code for r in result.reasons}


ALL = list(range(6))


def test_gate_codes_are_registered_blocking_and_not_divergence_classes() -> None:
    for c in GATE_CODES:
        rc = codes.get(c)
        assert rc.severity == "blocking" and not rc.nogo
    assert not set(GATE_CODES) & codes.NOGO_CODES


def test_the_bundled_policy_loads_and_every_phase_inherits_the_previous() -> None:
    pol = policy_mod.load()
    assert pol.platforms == PLATFORMS
    assert [p.phase for p in pol.chain(5)] == ALL
    assert set(pol.attachments) == {"conformance.session_store",
                                    "conformance.tombstone_replica", "legacy.fail_closed"}


@pytest.mark.parametrize("phase", ALL)
def test_complete_evidence_from_three_platforms_passes(tmp_path: Path, phase: int) -> None:
    result = judge(tmp_path, [make(p) for p in PLATFORMS], phase)
    assert result.verdict == "GO", gates.render_text(result)
    assert result.platforms_present == ("linux", "macos", "windows")
    assert all(q.status == "pass" for q in result.requirements)


@pytest.mark.parametrize("phase", ALL)
def test_a_missing_platform_is_no_go(tmp_path: Path, phase: int) -> None:
    result = judge(tmp_path, [make("linux"), make("windows")], phase)
    assert result.verdict == "NO-GO"
    assert codes_of(result) == {"evidence.missing_platform"}
    assert result.reasons[0].detail["platform"] == "macos"


@pytest.mark.parametrize("phase", ALL)
def test_a_mixed_candidate_is_no_go(tmp_path: Path, phase: int) -> None:
    docs = [make("linux"), make("windows"), make("macos", commit="deadbeef")]
    result = judge(tmp_path, docs, phase)
    assert "evidence.mixed_candidate" in codes_of(result)
    mixed = next(r for r in result.reasons if r.code == "evidence.mixed_candidate")
    assert mixed.detail["differing"] == {"commit": ["c0ffee", "deadbeef"]}
    assert result.identity is None


@pytest.mark.parametrize("phase", ALL)
def test_an_expired_waiver_is_no_go_in_every_phase(tmp_path: Path, phase: int) -> None:
    w = {"id": "W-1", "reason_code": "digest.mismatch", "fixture": "*", "surface": "*",
         "owner": "o", "reason": "r", "expires": "2026-08-31", "divergences": 3, "refused": 0}
    result = judge(tmp_path, [make(p, applied=[w]) for p in PLATFORMS], phase)
    assert codes_of(result) == {"policy.waiver_expired"}
    # the day before it expires the same evidence passes, with a warning
    ok = judge(tmp_path, [make(p, applied=[w]) for p in PLATFORMS], phase)
    ok = gates.gate(list(ok.files), phase, today="2026-08-30")
    assert ok.verdict == "GO" and "W-1" in ok.warnings[0]


@pytest.mark.parametrize(("phase", "expected"), [
    (0, set()), (1, {"evidence.insufficient"}), (2, {"evidence.insufficient"}),
    (3, {"evidence.insufficient"}), (4, {"evidence.insufficient"}),
    (5, {"evidence.insufficient"})])
def test_too_few_fixtures_is_insufficient_evidence(tmp_path: Path, phase: int,
                                                   expected: set[str]) -> None:
    result = judge(tmp_path, [make(p, fixtures=4) for p in PLATFORMS], phase)
    assert codes_of(result) == expected
    if expected:
        row = next(s for s in result.surfaces if s.status == "insufficient")
        assert row.fixtures == 4 and row.failing == 0


def test_enough_fixtures_but_a_loose_bound_is_still_insufficient(tmp_path: Path) -> None:
    pol = json.loads(policy_mod.DEFAULT_PATH.read_text(encoding="utf-8"))
    pol["phases"][2]["rates"][0]["min_fixtures"] = 5  # 8 clean fixtures: bound 0.253 > 0.25
    pfile = tmp_path / "policy.json"
    pfile.write_text(json.dumps(pol), encoding="utf-8")
    digest = policy_mod.load(pfile).digest  # the evidence was produced under this policy
    result = judge(tmp_path, [make(p, fixtures=8, policy_digest=digest) for p in PLATFORMS], 2,
                   policy=str(pfile))
    assert codes_of(result) == {"evidence.insufficient"}
    assert "upper bound 0.253 > 0.25" in result.reasons[0].message


@pytest.mark.parametrize("phase", ALL)
def test_no_fixture_for_a_baseline_surface_is_missing_evidence(tmp_path: Path,
                                                               phase: int) -> None:
    cases = [case(f"{s}-{i:02d}", f"{s}.entry") for s in SURFACES if s != "vscode"
             for i in range(12)]
    result = judge(tmp_path, [make(p, cases=cases) for p in PLATFORMS], phase)
    assert "evidence.missing" in codes_of(result)


@pytest.mark.parametrize("phase", ALL)
def test_a_candidate_attributed_nogo_divergence_is_no_go_in_every_phase(
        tmp_path: Path, phase: int) -> None:
    base = make("linux")
    bad = copy.deepcopy(base)
    bad["cases"][0] = case("cli-00", "cli.entry", "blocking", ("tool_pair.split",),
                           {"tool_pair.split": 1})
    bad["run"]["results_digest"] = "sha256:r"
    result = judge(tmp_path, [bad, make("windows"), make("macos")], phase)
    got = codes_of(result)
    assert "policy.nogo_class" in got
    nogo = next(r for r in result.reasons if r.code == "policy.nogo_class")
    assert nogo.phase is None and nogo.detail["cases"] == ["cli-00/cli.entry"]
    if phase >= 1:  # also an unwaived blocking divergence and a failing case
        assert "policy.check_failed" in got


def test_major_divergences_fail_the_phase_that_judges_their_surface(tmp_path: Path) -> None:
    docs = []
    for p in PLATFORMS:
        d = make(p)
        d["cases"][SURFACES.index("desktop") * 12] = case("desktop-00", "desktop.entry",
                                                          "major", by_code={"item.order": 1})
        docs.append(d)
    assert judge(tmp_path, docs, 2).verdict == "GO"  # phase 2 judges cli and session-core
    result = judge(tmp_path, docs, 3)
    assert codes_of(result) == {"policy.divergence_threshold"}
    assert result.reasons[0].detail == {"surface": "desktop", "fixtures": 12, "failing": 1,
                                        "upper_bound": round(wilson_upper(1, 12), 4),
                                        "fail_at": "major"}


def test_twin_comparisons_never_count_against_the_candidate(tmp_path: Path) -> None:
    docs = [make(p) for p in PLATFORMS]
    for d in docs:
        d["cases"].append(case("cli-00", "cli.entry~desktop.entry", "major"))
    assert judge(tmp_path, docs, 4).verdict == "GO"


def test_different_results_on_one_candidate_is_a_platform_mismatch(tmp_path: Path) -> None:
    docs = [make("linux"), make("windows", results="sha256:other"), make("macos")]
    result = judge(tmp_path, docs, 1)
    assert codes_of(result) == {"evidence.platform_mismatch"}


def test_evidence_under_other_rules_with_the_same_label_is_refused(tmp_path: Path) -> None:
    pol = json.loads(policy_mod.DEFAULT_PATH.read_text(encoding="utf-8"))
    for ph in pol["phases"]:  # weakened rules that keep the version label
        for r in ph["rates"]:
            r.update(min_fixtures=1, max_upper_bound=1.0)
    pfile = tmp_path / "relaxed.json"
    pfile.write_text(json.dumps(pol), encoding="utf-8")
    relaxed = policy_mod.load(pfile)
    assert relaxed.version == "gate-policy/1" and relaxed.digest != policy_mod.load().digest
    docs = [make(p, fixtures=2, policy_digest=relaxed.digest) for p in PLATFORMS]
    result = judge(tmp_path, docs, 3)  # the bundled policy judges: refused, not relaxed
    assert "policy.version_mismatch" in codes_of(result)
    assert judge(tmp_path, docs, 3, policy=str(pfile)).verdict == "GO"
    # and the same rules in another layout (indentation, key order) are the same policy
    pfile.write_text(json.dumps(pol, indent=3), encoding="utf-8")
    assert policy_mod.load(pfile).digest == relaxed.digest


def test_evidence_from_another_policy_version_is_refused(tmp_path: Path) -> None:
    docs = [make(p, policy_version="gate-policy/0") for p in PLATFORMS]
    assert codes_of(judge(tmp_path, docs, 0)) == {"policy.version_mismatch"}


@pytest.mark.parametrize(("kw", "phase", "expected"), [
    ({"check_status": "fail"}, 0, "policy.check_failed"),
    ({"check_status": "missing"}, 0, "evidence.missing"),
    ({"testcases": ["tests.other.test_y"]}, 2, "evidence.missing"),
    ({"failing_test": True}, 2, "policy.check_failed"),
    ({"active_writers": ("cli-context-memory",)}, 5, "policy.check_failed"),
])
def test_checks_and_attachments(tmp_path: Path, kw: dict[str, Any], phase: int,
                                expected: str) -> None:
    result = judge(tmp_path, [make(p, **kw) for p in PLATFORMS], phase)
    assert expected in codes_of(result), gates.render_text(result)
    if "active_writers" in kw:
        assert judge(tmp_path, [make(p, **kw) for p in PLATFORMS], 4).verdict == "GO"


def test_unclassified_and_side_effects_fail_phase_1(tmp_path: Path) -> None:
    for code in ("unclassified", "shadow.side_effect"):
        docs = [make(p) for p in PLATFORMS]
        for d in docs:
            d["cases"][0] = case("cli-00", "cli.entry", "minor", by_code={code: 1})
        assert judge(tmp_path, docs, 0).verdict == "GO"
        result = judge(tmp_path, docs, 1)
        assert codes_of(result) == {"policy.check_failed"}, code


def test_platforms_can_be_narrowed_or_taken_from_the_peer_release_matrix(
        tmp_path: Path) -> None:
    docs = [make("linux")]
    assert judge(tmp_path, docs, 1, platforms=["linux"]).verdict == "GO"
    matrix = ROOT / "tests/vectors/peer/release/required-evidence.v1.json"
    result = judge(tmp_path, docs, 1, release_matrix=str(matrix))
    assert result.platforms_required == PLATFORMS
    assert codes_of(result) == {"evidence.missing_platform"}


def test_wilson_upper_bound() -> None:
    assert wilson_upper(0, 0) == 1.0
    assert wilson_upper(0, 5) == pytest.approx(0.3511, abs=1e-4)
    assert wilson_upper(0, 9) < 0.25 < wilson_upper(0, 8)
    assert wilson_upper(5, 5) == 1.0
    assert wilson_upper(1, 100) == pytest.approx(0.04358, abs=1e-4)  # z = 1.645
    assert min_fixtures_for(0.25) == 9 and min_fixtures_for(1.0) == 0
    with pytest.raises(ValueError):
        wilson_upper(3, 2)


@pytest.mark.parametrize(("edit", "pointer"), [
    (lambda d: d.update(extra=1), "/extra"),
    (lambda d: d["phases"].pop(), "/phases"),
    (lambda d: d["phases"][1]["checks"].append("nope"), "/phases/1/checks/4"),
    (lambda d: d["phases"][2]["rates"][0].update(fail_at="fatal"), "/phases/2/rates/0/fail_at"),
    (lambda d: d["phases"][0].update(inherits=0), "/phases/0/inherits"),
    (lambda d: d.update(platforms=["beos"]), "/platforms/0"),
])
def test_a_bad_policy_is_an_input_error_naming_the_pointer(edit: Any, pointer: str) -> None:
    doc = json.loads(policy_mod.DEFAULT_PATH.read_text(encoding="utf-8"))
    edit(doc)
    with pytest.raises(InputError) as exc:
        policy_mod.parse(doc, "p.json")
    assert exc.value.pointer == pointer


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = write_all(tmp_path, [make(p) for p in PLATFORMS])
    assert main(["gate", "--phase", "3", "--today", TODAY, *paths]) == 0
    assert "phase 3 (Desktop canonical): GO" in capsys.readouterr().out
    out = tmp_path / "g"
    assert main(["gate", "--phase", "3", "--today", TODAY, "--platforms", "linux,windows",
                 "--out", str(out), "--json", paths[0]]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "NO-GO" and doc["platforms"]["present"] == ["linux"]
    assert json.loads((out / "gate.json").read_text(encoding="utf-8")) == doc
    assert "evidence.missing_platform" in (out / "gate.md").read_text(encoding="utf-8")
    tampered = json.loads(Path(paths[0]).read_text(encoding="utf-8"))
    tampered["identity"]["commit"] = "other"
    Path(paths[0]).write_text(json.dumps(tampered), encoding="utf-8")
    assert main(["gate", "--phase", "0", *paths]) == 2  # edited evidence: input error
    assert main(["gate", "--phase", "0", str(tmp_path / "nowhere")]) == 2
    assert main(["gate", "--phase", "9", *paths]) == 2
    assert main(["gate", "--phase", "0", "--platforms", "beos", paths[1]]) == 2
    capsys.readouterr()


# -- evidence integrity: what the gate recomputes and cross-checks ---------------------------


def _sealed_three(tmp: Path) -> list[Path]:
    return [Path(p) for p in write_all(tmp, [make(p) for p in PLATFORMS])]


def _refused(paths: list[Path], pointer: str) -> InputError:
    with pytest.raises(InputError) as exc:
        gates.gate([str(p) for p in paths], 1, today=TODAY)
    assert exc.value.pointer == pointer, str(exc.value)
    return exc.value


def test_the_sealed_fixture_evidence_passes(tmp_path: Path) -> None:
    assert gates.gate([str(p) for p in _sealed_three(tmp_path)], 4, today=TODAY).verdict == "GO"


def test_an_edited_case_is_refused_by_the_evidence_digest(tmp_path: Path) -> None:
    paths = _sealed_three(tmp_path)
    doc = json.loads(paths[0].read_text(encoding="utf-8"))
    doc["cases"][0]["nogo"] = []  # NO-GO -> GO by hand: the evidence digest no longer holds
    doc["cases"][0]["worst"] = "minor"
    paths[0].write_text(json.dumps(doc), encoding="utf-8")
    _refused(paths, "/evidence_digest")


def test_an_edited_and_resealed_case_is_refused_against_its_report(tmp_path: Path) -> None:
    paths = _sealed_three(tmp_path)
    doc = json.loads(paths[0].read_text(encoding="utf-8"))
    doc["cases"][0]["worst"] = "minor"
    paths[0].write_text(json.dumps(evidence.seal(doc)), encoding="utf-8")
    _refused(paths, "/cases")


def test_an_edited_divergence_in_the_report_is_refused(tmp_path: Path) -> None:
    docs = [make(p) for p in PLATFORMS]
    for d in docs:
        d["cases"][0] = case("cli-00", "cli.entry", "blocking", ("tool_pair.split",),
                             {"tool_pair.split": 1})
    paths = [Path(p) for p in write_all(tmp_path, docs)]
    rpath = paths[0].parent / "report.json"
    report = json.loads(rpath.read_text(encoding="utf-8"))
    report["divergences"][0]["attribution"] = "baseline"  # the NO-GO "becomes" a legacy defect
    rpath.write_text(json.dumps(report), encoding="utf-8")
    _refused(paths, "/divergences")
    rpath.unlink()  # and without its report the evidence cannot be checked: refused too
    _refused(paths, "")


def test_a_relabelled_platform_copy_is_refused(tmp_path: Path) -> None:
    paths = _sealed_three(tmp_path)
    linux = json.loads(paths[0].read_text(encoding="utf-8"))
    assert linux["environment"]["platform"] == "linux"

    def forge(**env: str) -> None:
        for n, target in ((1, "macos"), (2, "windows")):
            copy_ = copy.deepcopy(linux)
            copy_["environment"].update(platform=target, **(env if target == "windows"
                                                            else {}))
            paths[n].write_text(json.dumps(evidence.seal(copy_)), encoding="utf-8")
            (paths[n].parent / "report.json").write_text(
                (paths[0].parent / "report.json").read_text(encoding="utf-8"),
                encoding="utf-8")

    forge()  # one Linux evidence copied as macos and windows, only the label changed
    err = _refused(paths, "/environment/platform")
    assert "relabelled" in str(err)
    # the label's own fields changed too: cross-checked against the recorded environment
    for env, pointer in (({"sys_platform": "win32"}, "/environment/path_sep"),
                         ({"sys_platform": "win32", "path_sep": "\\"},
                          "/environment/os_release"),
                         ({"sys_platform": "win32", "path_sep": "\\",
                           "os_release": "Windows-10"}, "/environment/python_compiler")):
        for n, target in ((1, "macos"), (2, "windows")):
            copy_ = copy.deepcopy(linux)
            copy_["environment"].update(platform=target, os_release="Linux-" + target,
                                        python_compiler="GCC 12.2.0")
            if target == "windows":
                copy_["environment"].update(env)
            else:
                copy_["environment"].update(sys_platform="darwin",
                                            os_release="macOS-14.5-arm64")
                copy_["environment"]["python_compiler"] = "Clang 15"
            paths[n].write_text(json.dumps(evidence.seal(copy_)), encoding="utf-8")
        _refused(paths, pointer)


@pytest.mark.parametrize(("edit", "pointer"), [
    (lambda d: d.update(environment=[]), "/environment"),
    (lambda d: d["environment"].pop("sys_platform"), "/environment/sys_platform"),
    (lambda d: d.update(cases={}), "/cases"),
    (lambda d: d["cases"].__setitem__(0, 7), "/cases/0"),
    (lambda d: d["cases"][0].update(worst=3), "/cases/0/worst"),
    (lambda d: d["cases"][0].update(by_code={"x": "1"}), "/cases/0/by_code/x"),
    (lambda d: d["cases"][0].update(nogo="tool_pair.split"), "/cases/0/nogo"),
    (lambda d: d.update(checks=[]), "/checks"),
    (lambda d: d["checks"].update(x=1), "/checks/x"),
    (lambda d: d.update(waivers={"applied": {}}), "/waivers/applied"),
    (lambda d: d.update(attachments={}), "/attachments"),
    (lambda d: d["attachments"][0].update(testcases=[{"id": 1}]),
     "/attachments/0/testcases/0/id"),
    (lambda d: d["run"].update(results_digest=None), "/run/results_digest"),
    (lambda d: d.update(run=[]), "/run"),
])
def test_structurally_wrong_evidence_is_an_input_error_with_its_pointer(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, pointer: str) -> None:
    paths = _sealed_three(tmp_path)
    doc = json.loads(paths[0].read_text(encoding="utf-8"))
    edit(doc)
    paths[0].write_text(json.dumps(evidence.seal(doc)), encoding="utf-8")
    _refused(paths, pointer)
    assert main(["gate", "--phase", "1", *map(str, paths)]) == 2
    err = capsys.readouterr().err
    assert pointer in err and "internal error" not in err and "Traceback" not in err


# -- writer inventory (phase 0 and phase 5) -------------------------------------------------

PEER_INVENTORY = ROOT / "tests/vectors/peer/inventory/writers.v1.json"


def ours(**over: Any) -> dict[str, Any]:
    doc = {"schema": "shadow-writer-inventory/v1", "surfaces": ["cli", "desktop"],
           "writers": [
               {"id": "cli-compressor", "surface": "cli", "role": "legacy_writer",
                "stage": "shadow", "entry_points": ["PromptCompressor.compress"],
                "stores": ["jsonl"], "files": ["packages/cli/src/harness/prompt-compressor.js"]},
               {"id": "desktop-memory", "surface": "desktop", "role": "legacy_writer",
                "stage": "retired", "entry_points": [], "stores": [], "files": []}]}
    doc.update(over)
    return doc


def test_both_inventory_formats_read_into_one_model() -> None:
    from shadow import inventory

    peer = inventory.load(PEER_INVENTORY)
    assert peer.format == "peer" and "sdk" in peer.surfaces
    assert peer.active_legacy_writers(["legacy_read_only", "retired"]) == []
    assert {w.id for w in peer.active_legacy_writers(["retired"])} == {
        "cli-context-memory", "desktop-context-memory", "session-core-memory-authority"}
    mine = inventory.parse(ours(), "inv.json")
    assert mine.format == "shadow"
    assert [w.id for w in mine.active_legacy_writers(["retired"])] == ["cli-compressor"]


@pytest.mark.parametrize(("doc", "pointer"), [
    (ours(schema="x"), "/schema"),
    (ours(surfaces=["cli", "desktop", "vscode"]), "/surfaces/2"),
    (ours(writers=[]), "/writers"),
    (ours(writers=[*ours()["writers"], ours()["writers"][0]]), "/writers/2/id"),
    (ours(writers=[{**ours()["writers"][0], "stage": "beta"}, ours()["writers"][1]]),
     "/writers/0/stage"),
    (ours(writers=[{**ours()["writers"][0], "surface": "ide"}, ours()["writers"][1]]),
     "/writers/0/surface"),
])
def test_an_invalid_inventory_names_the_pointer(doc: dict[str, Any], pointer: str) -> None:
    from shadow import inventory

    with pytest.raises(InputError) as exc:
        inventory.parse(doc, "inv.json")
    assert exc.value.pointer == pointer


def test_the_run_records_an_invalid_inventory_as_a_failed_check(tmp_path: Path) -> None:
    bad = tmp_path / "inv.json"
    bad.write_text(json.dumps(ours(writers=[])), encoding="utf-8")
    check, summary = evidence.check_inventory(str(bad), ("retired",))
    assert check["status"] == "fail" and "/writers" in check["detail"] and summary is None
    check, _ = evidence.check_inventory(str(tmp_path / "none.json"), ("retired",))
    assert check["status"] == "missing"
    good = tmp_path / "ours.json"
    good.write_text(json.dumps(ours()), encoding="utf-8")
    check, summary = evidence.check_inventory(str(good), ("retired",))
    assert check["active_legacy_writers"] == ["cli-compressor"] and summary is not None


def test_the_noise_rules_a_run_applied_are_part_of_its_identity(tmp_path: Path) -> None:
    """Two runs with different noise rules are two candidates at the gate (issue 15)."""
    rules = tmp_path / "noise.json"
    rules.write_text('{"schema": "shadow-noise-rules/v1", "rules": []}\n', encoding="utf-8")
    report = {"candidate": {"corpus_digest": "sha256:c"}, "verdict": "GO", "phase": 1,
              "totals": {}, "cases": [], "divergences": [], "legacy_defects": [],
              "blocking_reasons": [], "generated_at": "x", "waivers": {}}

    def ident(noise: Path | None) -> dict[str, Any]:
        doc = collect(EvidenceInputs(report=report, policy_version="p", policy_digest="d",
                                     recordings=None, waivers=None, inventory=None,
                                     inactive_stages=(), noise=noise, check_schemas=False))
        return dict(doc["identity"])

    a, b = ident(rules), ident(None)
    assert a["noise_digest"].startswith("sha256:") and b["noise_digest"] == "none"
