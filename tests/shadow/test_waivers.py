"""Waivers: selectors, expiry, unused reporting, and NO-GO divergences that cannot be
waived."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from shadow.divergence import make
from shadow.errors import InputError
from shadow.run import RunOptions, execute
from shadow.waivers import Waiver, apply, load, parse

ROOT = Path(__file__).resolve().parents[2]
TODAY = dt.date(2026, 9, 1)


def waiver(**kw: str) -> dict[str, str]:
    base = {"id": "W-1", "reason_code": "digest.mismatch", "fixture": "*",
            "surface": "desktop.context-engineering", "owner": "desktop-team",
            "reason": "prompt cleaning is intended", "expires": "2027-01-01"}
    return {**base, **kw}


def doc(*ws: dict[str, str]) -> dict[str, object]:
    return {"schema": "shadow-waivers/v1", "waivers": list(ws)}


DIVS = [
    make("a", "desktop.context-engineering", "digest.mismatch", "none", ["a:m0000"]),
    make("b", "cli.compress", "digest.mismatch", "none", ["b:m0001"]),
    make("a", "cli.compress", "tool_pair.split", "candidate", ["a:m0003"]),
    make("a", "cli.compress", "secret.leaked", "candidate", ["a:m0004"]),
]


def test_selector_applies_by_code_and_globs() -> None:
    out = apply(DIVS, parse(doc(waiver())), TODAY)
    assert [d.fixture for d in out.waived] == ["a"]
    assert len(out.kept) == 3
    assert out.report["applied"][0]["id"] == "W-1"
    assert out.report["applied"][0]["divergences"] == 1
    assert out.report["expired"] == [] and out.report["unused"] == []


def test_expired_waivers_stop_applying_and_are_reported() -> None:
    out = apply(DIVS, parse(doc(waiver(expires="2026-09-01"))), TODAY)
    assert not out.waived
    assert [w["id"] for w in out.report["expired"]] == ["W-1"]


def test_unused_waivers_are_reported() -> None:
    out = apply(DIVS, parse(doc(waiver(fixture="zzz*"))), TODAY)
    assert not out.waived and [w["id"] for w in out.report["unused"]] == ["W-1"]


def test_selectors_of_never_waivable_classes_are_refused_at_load() -> None:
    for code in ("*", "tool_pair.*", "tool_pair.split", "fixture.invalid", "fixture.*",
                 "*.lost", "writer.dual", "[a-z]*"):
        with pytest.raises(InputError) as err:
            parse(doc(waiver(reason_code=code, surface="*")), "w.json")
        assert err.value.source == "w.json" and err.value.pointer == "/waivers/0/reason_code"
        assert "waivable" in err.value.expected


def test_never_waivable_divergences_are_kept_and_reported_as_refused() -> None:
    divs = [*DIVS, make("a", "cli.compress", "secret.leaked", "baseline", ["a:m0005"])]
    bypass = Waiver("W-2", "tool_pair.split", "*", "*", "o", "r", dt.date(2027, 1, 1))
    ws = [bypass, *parse(doc(waiver(id="W-3", reason_code="secret.leaked", surface="*")))]
    out = apply(divs, ws, TODAY)
    kept = {(d.reason_code, d.attribution) for d in out.kept}
    assert ("tool_pair.split", "candidate") in kept  # a NO-GO class: never
    assert ("secret.leaked", "candidate") in kept  # the candidate's leak: never
    assert ("secret.leaked", "baseline") not in kept  # the legacy's own leak: waivable
    refused = {w["id"]: w for w in out.report["refused"]}
    assert refused["W-2"]["refused"] == 1 and refused["W-2"]["divergences"] == 0
    assert refused["W-3"]["refused"] == 1 and refused["W-3"]["divergences"] == 1
    assert [w["id"] for w in out.report["applied"]] == ["W-3"]
    assert out.report["unused"] == []  # refused is not unused


def test_expiring_waivers_are_reported_within_the_warning_days() -> None:
    ws = parse(doc(waiver(id="W-SOON", expires="2026-09-20"),
                   waiver(id="W-EDGE", expires="2026-10-01", fixture="zzz"),
                   waiver(id="W-LATER", expires="2026-10-02", fixture="zzz")))
    out = apply(DIVS, ws, TODAY)
    assert [(w["id"], w["days_left"]) for w in out.report["expiring"]] == [
        ("W-EDGE", 30), ("W-SOON", 19)]
    assert [w["id"] for w in apply(DIVS, ws, TODAY, warning_days=5).report["expiring"]] == []
    assert set(out.report) == {"applied", "refused", "expired", "expiring", "unused"}


@pytest.mark.parametrize("bad, pointer", [
    ({"schema": "x", "waivers": []}, "/schema"),
    (doc(waiver(expires="soon")), "/waivers/0/expires"),
    (doc(waiver(reason_code="no.such.code")), "/waivers/0/reason_code"),
    (doc(waiver(owner="")), "/waivers/0/owner"),
    (doc(waiver(), waiver()), "/waivers/1/id"),
    (doc({**waiver(), "extra": "x"}), "/waivers/0/extra"),
])
def test_bad_waiver_files_are_typed_errors(bad: dict[str, object], pointer: str) -> None:
    with pytest.raises(InputError) as err:
        parse(bad, "w.json")
    assert err.value.pointer == pointer


def test_run_with_waivers_file(tmp_path: Path) -> None:
    path = tmp_path / "waivers.json"
    path.write_text(json.dumps(doc(
        waiver(id="W-CE", reason_code="digest.mismatch", surface="desktop.context-engineering"),
        waiver(id="W-OLD", reason_code="item.order", expires="2020-01-01"),
        waiver(id="W-NONE", reason_code="noise.*", fixture="no-such-fixture"))),
        encoding="utf-8")
    assert [w.id for w in load(path)] == ["W-CE", "W-OLD", "W-NONE"]
    res = execute(RunOptions(fixtures=str(ROOT / "fixtures"), out=str(tmp_path / "o"),
                             waivers=str(path), surfaces=("desktop.context-engineering",),
                             now=dt.datetime(2026, 9, 1, tzinfo=dt.UTC)))
    w = res.report["waivers"]
    assert [x["id"] for x in w["applied"]] == ["W-CE"] and w["applied"][0]["divergences"] > 0
    assert [x["id"] for x in w["expired"]] == ["W-OLD"]
    assert [x["id"] for x in w["unused"]] == ["W-NONE"]
    assert not [d for d in res.report["divergences"] if d["reason_code"] == "digest.mismatch"]
