"""Triage tools on a small copy of the corpus (issue 13 item 5): ``shadow explain`` (by
id, by fixture, highlight, no colour off a terminal, canaries never printed, unknown
names exit 2), clusters (a partition of the unwaived divergences, exemplars that exist,
never a text) and ``shadow waive`` / ``shadow intend`` (valid entries appended in the
file's own layout, refusals exit 2 writing nothing, and a re-run that applies exactly the
entry written)."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from shadow import intended as intended_mod
from shadow import waivers as waiver_mod
from shadow.cli import main
from shadow.explain import render_text
from shadow.reports import clusters as clusters_mod
from tests.shadow.test_secret_canaries import (
    CANARY_KEY,
    CANARY_PASSWORD,
    CANARY_PLAIN,
    PLANTS,
    plant,
)

ROOT = Path(__file__).resolve().parents[2]
EXTRA = ("claude-3-5-sonnet", "orphan-tool-result")  # unplanted, many divergences
CANARIES = (CANARY_PLAIN, "CANARYk3y", "CanaryPw0rd", CANARY_KEY, CANARY_PASSWORD)
FAR, PAST = "2099-12-31", "2000-01-01"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    b = tmp_path_factory.mktemp("triage")
    root = plant(b)  # the canary corpus of test_secret_canaries
    for name in EXTRA:
        shutil.copytree(ROOT / "fixtures" / name, root / name)
    (b / "no-rules.json").write_text(json.dumps(
        {"schema": intended_mod.SCHEMA, "rules": []}, indent=1) + "\n", encoding="utf-8")
    return b


def _run(base: Path, out: str, *extra: str) -> dict[str, Any]:
    code = main(["run", "--fixtures", str(base / "fixtures"), "--out", str(base / out),
                 "--no-recordings", "--skip-determinism", *extra])
    assert code in (0, 1)
    doc: dict[str, Any] = json.loads((base / out / "report.json").read_text("utf-8"))
    return doc


@pytest.fixture(scope="module")
def report(base: Path) -> dict[str, Any]:
    """``shadow run`` with the bundled intended rules."""
    return _run(base, "run")


@pytest.fixture(scope="module")
def unexplained(base: Path) -> dict[str, Any]:
    """``shadow run`` with no intended rule: what the rules cover is attributed ``none``."""
    return _run(base, "run-none", "--intended", str(base / "no-rules.json"))


def _explain(base: Path, *args: str, report_dir: str = "run") -> list[str]:
    return ["explain", *args, "--report", str(base / report_dir), "--fixtures",
            str(base / "fixtures"), "--no-recordings"]


def _one(report: Mapping[str, Any], pred: Any) -> dict[str, Any]:
    """The first divergence matching ``pred`` whose selector (code, fixture, surface) no
    other divergence of the report shares: a literal waiver covers exactly it."""
    key = Counter((d["reason_code"], d["fixture"], d["surface"])
                  for d in report["divergences"])
    return next(d for d in report["divergences"] if pred(d)
                and key[(d["reason_code"], d["fixture"], d["surface"])] == 1)


# --------------------------------------------------------------------------- explain


def test_explain_by_id_shows_its_case_side_by_side_with_its_items_marked(
        base: Path, report: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    d = next(x for x in report["divergences"] if x["fixture"] == "claude-3-5-sonnet"
             and x["surface"] == "cli.compress" and x["item_ids"])
    assert main(_explain(base, d["id"])) == 0
    out = capsys.readouterr().out
    assert f"== {d['fixture']} / {d['surface']} ==" in out
    head = next(line for line in out.splitlines() if line.startswith("mark"))
    assert "baseline" in head and "candidate" in head and "role/kind" in head
    marked = [line for line in out.splitlines() if line.startswith(">>")]
    short = d["item_ids"][0].split(":", 1)[1]
    assert any(f" {short} " in line for line in marked)  # the divergent item, highlighted
    assert any(re.search(r"(kept|dropped|derived) ", line) for line in marked)
    listed = next(line for line in marked if d["id"] in line)  # the divergence itself
    for word in (d["reason_code"], d["severity"], d["attribution"]):
        assert word in listed
    others = [x for x in report["divergences"] if (x["fixture"], x["surface"])
              == (d["fixture"], d["surface"])]
    assert all(x["id"] in out for x in others)  # every divergence of the case is listed
    assert "\x1b[" not in out  # stdout is not a terminal: no ANSI colour


def test_explain_by_fixture_shows_every_case_and_html_is_self_contained(
        base: Path, report: dict[str, Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    fx = "orphan-tool-result"
    cases = sorted({c["surface"] for c in report["cases"] if c["fixture"] == fx})
    page = tmp_path / "explain.html"
    assert main(_explain(base, fx, "--html", str(page))) == 0
    out = capsys.readouterr().out
    assert [line[3:-3] for line in out.splitlines() if line.startswith("== ")] == [
        f"{fx} / {s}" for s in cases]
    assert f"html: {page}" in out
    html = page.read_text("utf-8")
    assert html.count("<section id=") == len(cases)
    assert "<script" not in html.lower() and not re.search(r"(?:src|href)\s*=", html, re.I)
    assert "url(" not in html and "@import" not in html
    one = cases[0]
    assert main(_explain(base, fx, one)) == 0
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("== ")] == [
        f"== {fx} / {one} =="]


def test_explain_never_prints_a_secret_canary(base: Path, report: dict[str, Any],
                                              tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    texts = []
    for i, (name, _word) in enumerate(PLANTS):
        page = tmp_path / f"{i}.html"
        assert main(_explain(base, name, "--html", str(page))) == 0
        texts.append(page.read_text("utf-8"))
    leaks = [d["id"] for d in report["divergences"] if d["reason_code"] == "secret.leaked"]
    assert leaks  # the planted keys reach a sink on the candidate side
    for i in leaks[:3]:
        assert main(_explain(base, i)) == 0
    captured = capsys.readouterr()
    texts += [captured.out, captured.err]
    assert sum(t.count("== ") for t in texts) > len(PLANTS)
    for text in texts:
        for canary in CANARIES:
            assert canary.lower() not in text.lower()


def test_explain_unknown_id_fixture_or_surface_is_exit_2_naming_it(
        base: Path, report: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    d = report["divergences"][0]
    for args, name in ((("d-000000000000",), "d-000000000000"),
                       (("no-such-fixture",), "no-such-fixture"),
                       (("orphan-tool-result", "cli.nowhere"), "cli.nowhere"),
                       ((d["id"], "cli.compress"), d["id"])):
        assert main(_explain(base, *args)) == 2
        err = capsys.readouterr().err
        assert name in err and "Traceback" not in err
    assert main(_explain(base, CANARY_KEY)) == 2  # a secret-looking argument: not echoed
    assert "CANARYk3y" not in capsys.readouterr().err
    assert main(["explain", d["id"], "--report", str(base / "missing")]) == 2
    assert "missing" in capsys.readouterr().err


def test_colour_only_when_asked() -> None:
    from shadow.explain import Row, build_case

    view = build_case("fx", "cli.compress", None, None, ("baseline", "candidate"),
                      ("no projection", "no projection"), {}, [], [], None)
    view = dataclasses.replace(view, rows=(Row("m0001", "user/message", "kept #1 00000000",
                                               "dropped duplicate", ">>", (1,)),))
    assert "\x1b[" in render_text([view], color=True)
    assert "\x1b[" not in render_text([view])


# --------------------------------------------------------------------------- clusters


def test_clusters_partition_the_unwaived_divergences(base: Path,
                                                     report: dict[str, Any]) -> None:
    divs = report["divergences"]
    cl = clusters_mod.clusters(divs)
    assert sum(c["count"] for c in cl) == len(divs) == report["totals"]["divergences"]
    ids = [i for c in cl for i in c["ids"]]
    assert sorted(ids) == sorted(d["id"] for d in divs)  # each divergence in one cluster
    assert all(c["exemplar"] == c["ids"][0] and c["exemplar"] in ids for c in cl)
    assert len({c["key"] for c in cl}) == len(cl)
    assert [c["count"] for c in cl] == sorted((c["count"] for c in cl), reverse=True)
    md = (base / "run" / "report.md").read_text("utf-8")
    html = (base / "run" / "report.html").read_text("utf-8")
    assert "### Clusters" in md and 'id="clusters"' in html
    for c in cl[:15]:
        assert f"(report.html#{c['exemplar']})" in md
    for c in cl:
        assert f'id="{c["key"]}"' in html and f'href="#{c["exemplar"]}"' in html
        assert f'id="{c["exemplar"]}"' in html  # the exemplar's anchor exists


def test_a_cluster_signature_never_holds_text_or_ids() -> None:
    secret = f"see {CANARY_KEY} here"
    divs = [{"id": f"d-{i:012x}", "fixture": f"fx{i}", "surface": "cli.compress",
             "reason_code": "unclassified", "severity": "major", "attribution": "none",
             "item_ids": [f"fx{i}:m0001"],
             "detail": {"problem": p, "count": i, "attribution_reason": f"text {i}"}}
            for i, p in enumerate(["surface adapter failed", secret, "surface adapter failed",
                                   {"nested": 1}])]
    cl = clusters_mod.clusters(divs)
    assert [c["count"] for c in cl] == [2, 2]  # ids, counts and free text never split
    assert {c["label"] for c in cl} == {"problem=surface adapter failed", "problem=<text>"}
    assert "CANARYk3y" not in json.dumps(cl)


# --------------------------------------------------------------------------- waive


def test_waive_appends_valid_entries_and_a_rerun_waives_exactly_them(
        base: Path, report: dict[str, Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    first = _one(report, lambda d: waiver_mod.waivable(_div(d))
                 and d["attribution"] == "baseline")
    second = _one(report, lambda d: waiver_mod.waivable(_div(d)) and d["id"] != first["id"]
                  and d["fixture"] != first["fixture"])
    path = tmp_path / "sub" / "waivers.json"
    args = ["--owner", "qa-team", "--reason", "accepted while the legacy is fixed",
            "--expires", FAR, "--report", str(base / "run"), "--waivers", str(path)]
    assert main(["waive", first["id"], *args]) == 0
    out = capsys.readouterr().out
    assert "W-001" in out and first["id"] in out and "created" in out
    text = path.read_text("utf-8")
    assert text.endswith("}\n") and text.startswith('{\n "schema": "shadow-waivers/v1"')
    (w,) = waiver_mod.load(path)
    assert (w.id, w.reason_code, w.fixture, w.surface, w.expires.isoformat()) == (
        "W-001", first["reason_code"], first["fixture"], first["surface"], FAR)
    assert main(["waive", second["id"], *args]) == 0
    assert "W-002" in capsys.readouterr().out
    again = path.read_text("utf-8")
    assert again.startswith(text[:text.rindex("  }\n ]")])  # W-001 untouched, W-002 after
    assert [x.id for x in waiver_mod.load(path)] == ["W-001", "W-002"]
    rerun = _run(base, "run-waived", "--waivers", str(path))
    before = {d["id"] for d in report["divergences"]}
    after = {d["id"] for d in rerun["divergences"]}
    assert before - after == {first["id"], second["id"]} and after <= before
    assert rerun["totals"]["waived"] == 2
    assert [a["id"] for a in rerun["waivers"]["applied"]] == ["W-001", "W-002"]


def _div(d: Mapping[str, Any]) -> Any:
    from shadow.triage import _div as div

    return div(d)


def test_waive_refusals_are_exit_2_and_write_nothing(
        base: Path, report: dict[str, Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    ok = _one(report, lambda d: waiver_mod.waivable(_div(d)))
    leak = next(d for d in report["divergences"] if d["reason_code"] == "secret.leaked"
                and d["attribution"] in ("candidate", "both"))
    nogo = next(d for d in report["divergences"] if d["reason_code"] == "tool_pair.mismatch")
    defect = report["legacy_defects"][0]
    doctored = tmp_path / "report.json"  # a quarantined fixture beside the real ones
    doc = json.loads((base / "run" / "report.json").read_text("utf-8"))
    doc["divergences"].append({"id": "d-ffffffffffff", "fixture": "broken", "surface":
                               "cli.compress.json", "reason_code": "fixture.invalid",
                               "severity": "blocking", "attribution": "none",
                               "item_ids": [], "detail": {}})
    doctored.write_text(json.dumps(doc), encoding="utf-8")
    path = tmp_path / "waivers.json"

    def waive(*ids: str, owner: str = "qa", reason: str = "r", expires: str = FAR,
              rep: Path = base / "run") -> str:
        assert main(["waive", *ids, "--owner", owner, "--reason", reason, "--expires",
                     expires, "--report", str(rep), "--waivers", str(path)]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and not path.exists()
        return err

    assert "d-000000000000" in waive("d-000000000000")
    assert defect["id"] in waive(defect["id"])
    assert leak["id"] in waive(ok["id"], leak["id"])  # one refused id: nothing written
    assert "NO-GO" in waive(nogo["id"])
    nothing = next(d for d in report["divergences"]
                   if d["reason_code"] == "candidate.unavailable")
    assert "never waivable" in waive(nothing["id"])
    assert "fixture.invalid" in waive("d-ffffffffffff", rep=doctored)
    assert "--expires" in waive(ok["id"], expires=PAST)
    assert "--expires" in waive(ok["id"], expires="2099-1-1")
    assert "--owner" in waive(ok["id"], owner="  ")
    assert "--reason" in waive(ok["id"], reason="")
    err = waive(ok["id"], reason=f"because {CANARY_KEY}")
    assert "secret" in err and "CANARYk3y" not in err
    assert main(["waive", ok["id"], "--owner", "qa", "--reason", "r", "--expires", FAR,
                 "--report", str(base / "run"), "--waivers", str(path)]) == 0
    capsys.readouterr()
    written = path.read_bytes()
    assert main(["waive", ok["id"], "--owner", "qa", "--reason", "r", "--expires", FAR,
                 "--report", str(base / "run"), "--waivers", str(path)]) == 2
    assert "already waived by W-001" in capsys.readouterr().err
    assert path.read_bytes() == written


# --------------------------------------------------------------------------- intend


def test_intend_appends_a_rule_in_the_file_layout_and_a_rerun_applies_it(
        base: Path, unexplained: dict[str, Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    d = _one(unexplained, lambda x: x["attribution"] == "none"
             and x["severity"] != "blocking")
    bundled = tmp_path / "bundled-copy.json"  # the bundled file's own layout (indent=2)
    shutil.copyfile(intended_mod.DEFAULT_PATH, bundled)
    old = bundled.read_text("utf-8")
    args = ["--owner", "kernel-team", "--design", "108 §7", "--rationale",
            "the kernel keeps input items verbatim", "--review-by", FAR,
            "--report", str(base / "run-none")]
    assert main(["intend", d["id"], *args, "--intended", str(bundled)]) == 0
    out = capsys.readouterr().out
    n = len(intended_mod.load(intended_mod.DEFAULT_PATH))
    new_id = f"ID-{n + 1:03d}"
    assert new_id in out and d["id"] in out
    new = bundled.read_text("utf-8")
    assert new.startswith(old[:old.rindex("}\n  ]\n}")])  # appended, nothing reformatted
    rules = intended_mod.load(bundled)
    assert len(rules) == n + 1 and rules[-1].id == new_id
    assert rules[-1].reason_codes == (d["reason_code"],)
    assert rules[-1].fixtures == (d["fixture"],) and rules[-1].surfaces == (d["surface"],)
    assert intended_mod.DEFAULT_PATH.read_text("utf-8") == old  # the bundled file untouched
    # a re-run with the rule (alone) applies it to exactly that divergence
    alone = tmp_path / "rules.json"
    shutil.copyfile(base / "no-rules.json", alone)
    assert main(["intend", d["id"], *args, "--intended", str(alone)]) == 0
    capsys.readouterr()
    (rule,) = intended_mod.load(alone)
    rerun = _run(base, "run-intended", "--intended", str(alone))
    now = {x["id"]: x for x in rerun["divergences"]}
    assert now[d["id"]]["attribution"] == "intended"
    assert now[d["id"]]["detail"]["intended_rule"] == rule.id == "ID-001"
    changed = {i for i, x in now.items() if x["attribution"] == "intended"}
    assert changed == {d["id"]}
    assert [r["id"] for r in rerun["intended"]["applied"]] == ["ID-001"]


def test_intend_refuses_what_a_rule_may_never_cover(
        base: Path, report: dict[str, Any], unexplained: dict[str, Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rules.json"

    def intend(*ids: str, design: str = "108 §7", review_by: str = FAR,
               rep: str = "run", rationale: str = "r") -> str:
        assert main(["intend", *ids, "--owner", "k", "--design", design, "--rationale",
                     rationale, "--review-by", review_by, "--report", str(base / rep),
                     "--intended", str(path)]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and not path.exists()
        return err

    by = {a: next(d for d in report["divergences"] if d["attribution"] == a)
          for a in ("baseline", "twin", "intended", "candidate", "both")}
    for a, d in by.items():
        assert d["id"] in intend(d["id"]), a
    assert "already covered by intended rule" in intend(by["intended"]["id"])
    leak = next(d for d in report["divergences"] if d["reason_code"] == "secret.leaked")
    assert "secret.leaked" in intend(leak["id"])
    blocking = next(d for d in unexplained["divergences"] if d["severity"] == "blocking")
    assert blocking["id"] in intend(blocking["id"], rep="run-none")
    ok = _one(unexplained, lambda x: x["attribution"] == "none"
              and x["severity"] != "blocking")
    assert "--design" in intend(ok["id"], design="ok", rep="run-none")
    assert "--review-by" in intend(ok["id"], review_by=PAST, rep="run-none")
    assert "--rationale" in intend(ok["id"], rationale=" ", rep="run-none")
    assert "d-000000000000" in intend("d-000000000000", rep="run-none")
    assert report["legacy_defects"][0]["id"] in intend(report["legacy_defects"][0]["id"])
