"""``shadow diff`` / trend: a waiver hides a divergence, it never fixes it; and a report read
back as input is checked field by field (``shadow.reports.validate``)."""

from __future__ import annotations

from typing import Any

import pytest

from shadow.errors import InputError
from shadow.reports.diff import diff_reports, render_text
from shadow.reports.validate import validate_report


def div(fixture: str, code: str = "digest.mismatch", surface: str = "desktop.compress",
        severity: str = "major", attribution: str = "none") -> dict[str, Any]:
    return {"fixture": fixture, "surface": surface, "reason_code": code, "severity": severity,
            "attribution": attribution, "item_ids": [f"{fixture}:m0001"], "detail": {}}


def report(divs: list[dict[str, Any]], applied: list[dict[str, Any]] | None = None
           ) -> dict[str, Any]:
    return {"schema": "shadow-report/v1", "verdict": "GO", "totals": {"divergences": len(divs)},
            "candidate": {}, "divergences": divs,
            "waivers": {"applied": applied or [], "expired": [], "unused": []}}


W = {"id": "W-1", "reason_code": "digest.*", "fixture": "a*", "surface": "desktop.*",
     "owner": "o", "reason": "r", "expires": "2030-01-01", "divergences": 1, "refused": 0}


def test_a_divergence_a_waiver_now_covers_is_waived_not_fixed() -> None:
    old = report([div("a1"), div("b1"), div("a2", code="tool_pair.split",
                                                severity="blocking", attribution="candidate"),
                  div("a3", code="secret.leaked", severity="blocking",
                      attribution="candidate")])
    new = report([], applied=[W, {**W, "id": "W-2", "reason_code": "*"}])
    d = diff_reports(old, new)
    assert [(x["fixture"], x["waiver"]) for x in d.waived] == [("a1", "W-1")]
    # b1: no waiver selects it; a2, a3: never waivable, so they can only have been fixed
    assert sorted(x["fixture"] for x in d.fixed) == ["a2", "a3", "b1"]
    wire = d.to_wire()
    assert wire["counts"]["waived"] == 1 and wire["counts"]["fixed"] == 3
    assert "waived: 1" in render_text(d)


def test_without_applied_waivers_a_gone_divergence_is_fixed() -> None:
    d = diff_reports(report([div("a1")]), report([]))
    assert len(d.fixed) == 1 and d.waived == ()


@pytest.mark.parametrize(("doc", "pointer"), [
    ([], ""),
    ({"schema": "shadow-report/v2", "divergences": []}, "/schema"),
    ({"divergences": {}}, "/divergences"),
    ({"divergences": [5]}, "/divergences/0"),
    ({"divergences": [{**div("a"), "fixture": 3}]}, "/divergences/0/fixture"),
    ({"divergences": [{k: v for k, v in div("a").items() if k != "surface"}]},
     "/divergences/0/surface"),
    ({"divergences": [div("a", code="no.such")]}, "/divergences/0/reason_code"),
    ({"divergences": [div("a", severity="fatal")]}, "/divergences/0/severity"),
    ({"divergences": [{**div("a"), "item_ids": "x"}]}, "/divergences/0/item_ids"),
    ({"divergences": [], "totals": {"blocking": -1}}, "/totals/blocking"),
    ({"divergences": [], "waivers": {"applied": [{**W, "expires": "soon"}]}},
     "/waivers/applied/0/expires"),
    ({"divergences": [], "waivers": {"applied": [{**W, "fixture": None}]}},
     "/waivers/applied/0/fixture"),
])
def test_a_malformed_report_names_the_source_and_pointer(doc: Any, pointer: str) -> None:
    with pytest.raises(InputError) as err:
        diff_reports(report([]), doc, sources=("old.json", "new.json"))
    assert (err.value.source, err.value.pointer) == ("new.json", pointer)


def test_a_whole_report_needs_its_required_fields() -> None:
    with pytest.raises(InputError) as err:
        validate_report({"schema": "shadow-report/v1", "divergences": []}, "r.json")
    assert err.value.pointer == "/verdict"
    assert validate_report(report([div("a")]), "r.json")["divergences"][0]["fixture"] == "a"
