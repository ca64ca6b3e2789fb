"""Reports: ``report.json`` -> pandas tables -> jinja2 templates.

Formats (``FORMATS``; files written by :func:`write`):

* ``md``    ``report.md``   — fits a PR comment and ``$GITHUB_STEP_SUMMARY`` (< 60 KB);
* ``html``  ``report.html`` — one self-contained file (inline CSS and SVG, no script, no
  external reference), works offline;
* ``junit`` ``junit.xml``   — one testcase per fixture × surface; a case fails on an
  unwaived ``blocking`` or ``major`` divergence that counts against the candidate (the one
  failure rule, ``codes.fails``: legacy defects, intended differences and twin comparisons
  never fail a case; waived ones are not in the report).

``report.json`` itself is written by :mod:`shadow.run`; ``shadow report`` re-renders any
format from it.  Rendering is a pure function of (report, evidence, previous report):
no clock, no environment, sorted everywhere — the snapshot tests hold the bytes.
"""

from __future__ import annotations

import datetime as dt
import heapq
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import jinja2
from markupsafe import Markup

from shadow import codes, spill
from shadow.boundary import load_path
from shadow.errors import InputError
from shadow.reports import svg, tables, views

REPORT_SCHEMA: Final = "shadow-report/v1"
FORMATS: Final = ("md", "html", "junit")
FILES: Final = {"md": "report.md", "html": "report.html", "junit": "junit.xml"}
_TEMPLATES: Final = {"md": "report.md.j2", "html": "report.html.j2", "junit": "junit.xml.j2"}
MD_LIMIT: Final = 25  # rows per list in report.md (the HTML has them all)


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).resolve().parent / "templates")),
        autoescape=lambda name: name is not None and name.endswith((".html.j2", ".xml.j2")),
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
        trim_blocks=True, lstrip_blocks=True)
    env.filters["md"] = md_cell
    env.filters["short"] = lambda s, n=19: s if len(str(s)) <= n else str(s)[:n] + "…"
    return env


def md_cell(value: Any) -> str:
    """Make a value safe inside a Markdown table cell."""
    text = str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return text.replace("<", "&lt;").replace(">", "&gt;")


def load_report(path: str | Path) -> dict[str, Any]:
    """A ``report.json``, validated (file and JSON pointer on any structural problem)."""
    from shadow.reports.validate import validate_report

    return validate_report(load_path(Path(path)), str(path))


def context(report: Mapping[str, Any], *, evidence: Mapping[str, Any] | None = None,
            previous: Mapping[str, Any] | None = None, warn_days: int = 30) -> dict[str, Any]:
    """Everything the templates need: counts from one pass over the report's lists, and
    lazy views of the lists themselves (:mod:`shadow.reports.views`), so a report of any
    size renders in the memory its vocabulary needs."""
    divs = views.by_fixture(report.get("divergences", []), views._fs)
    defects = views.by_fixture(report.get("legacy_defects", []), views._fs)
    listed = views.by_fixture(report.get("cases", []), views._fs)
    tally = views.Tally(divs, defects)
    per_surface: dict[str, list[int]] = {}
    suites: dict[str, list[int]] = {}
    # each case once, as the templates show it, into its suite's spill: JUnit reads its
    # suites one by one, the HTML all of them merged back into case order
    folder = spill.Folder()
    by_suite: dict[str, spill.Spill] = {}
    n_cases = failing = n_fixtures = 0
    last = None
    try:
        for c in views.case_stream(listed, divs):
            n_cases += 1
            bad = int(c["status"] == "fail")
            failing += bad
            if c["fixture"] != last:
                n_fixtures, last = n_fixtures + 1, c["fixture"]
            top = c["surface"].split(".", 1)[0]
            for key, table in ((c["surface"], per_surface), (top, suites)):
                row = table.setdefault(key, [0, 0])
                row[0] += 1
                row[1] += bad
            if top not in by_suite:
                by_suite[top] = folder.spill(f"suite-{len(by_suite)}")
            by_suite[top].append(c)
    except BaseException:  # an out-of-order list: no spill left open
        folder.cleanup()
        raise
    for sp in by_suite.values():
        sp.close()

    def cases() -> Iterator[dict[str, Any]]:
        return heapq.merge(*by_suite.values(), key=lambda c: (c["fixture"], c["surface"]))

    def blocking(code: str, n: int) -> views.Lazy:
        return views.records(divs, keep=lambda d: d["severity"] == "blocking"
                             and d["reason_code"] == code, n=n)

    blocking_groups = [{"code": c, "meaning": codes.get(c).meaning, "nogo": codes.get(c).nogo,
                        "anchor": views.code_anchor(c), "items": blocking(c, n)}
                       for c, n in sorted(tally.blocking.items())]
    mat = tally.matrix()
    ladder = list(report.get("ladder", []))
    current = next((s for s in ladder if s.get("phase") == report.get("phase")), None)
    platform = (evidence or {}).get("environment", {}).get("platform", "this platform")
    return {
        "ladder": ladder, "ladder_current": current, "platform": platform,
        "gate_cases": list(current.get("requirements", [])) if current else [],
        "report": report, "verdict": report.get("verdict", "?"),
        "phase": report.get("phase", "?"), "generated_at": report.get("generated_at", ""),
        "candidate": sorted((k, v) for k, v in report.get("candidate", {}).items()),
        "totals": sorted(report.get("totals", {}).items()),
        "blocking_reasons": list(report.get("blocking_reasons", [])),
        "blocking_groups": blocking_groups, "blocking_count": sum(tally.blocking.values()),
        "severity_counts": [{"severity": s, "count": tally.severity.get(s, 0)}
                            for s in codes.SEVERITIES],
        "surfaces": tally.surfaces({k: (v[0], v[1]) for k, v in per_surface.items()}),
        "matrix": mat,
        "chart": Markup(svg.stacked_bars(mat)),  # built from escaped parts
        "legacy_defects": views.records(defects, "ld"),
        "clusters": tally.clusters.result(),  # by signature, largest first
        "waivers": tables.waiver_tables(report, warn_days),
        "attribution": tables.attribution_table(report),
        "trend": tables.trend(previous, report),
        "fixtures": views.Lazy(lambda: views.fixture_stream(cases()), n_fixtures),
        "cases": views.Lazy(cases, n_cases),
        "case_count": n_cases, "failing_cases": failing,
        "evidence": tables.evidence_view(evidence),
        "glossary": [{**codes.get(c).to_wire(), "anchor": views.code_anchor(c)}
                     for c in sorted(tally.codes, key=views.code_order)],
        "md_limit": MD_LIMIT,
        "junit_suites": [{"name": name, "tests": n, "failures": bad,
                          "cases": by_suite[name]} for name, (n, bad) in sorted(suites.items())],
    }


def render(report: Mapping[str, Any], fmt: str, *, evidence: Mapping[str, Any] | None = None,
           previous: Mapping[str, Any] | None = None, ctx: Mapping[str, Any] | None = None
           ) -> str:
    return "".join(generate(report, fmt, evidence=evidence, previous=previous, ctx=ctx))


def generate(report: Mapping[str, Any], fmt: str, *, evidence: Mapping[str, Any] | None = None,
             previous: Mapping[str, Any] | None = None, ctx: Mapping[str, Any] | None = None
             ) -> Iterator[str]:
    """``fmt`` rendered piece by piece (jinja2's ``generate``): written as it comes, a
    report of any size never exists whole in memory."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r}")
    ctx = ctx if ctx is not None else context(report, evidence=evidence, previous=previous)
    return _env().get_template(_TEMPLATES[fmt]).generate(**ctx)


def write(out: str | Path, report: Mapping[str, Any], *,
          evidence: Mapping[str, Any] | None = None, previous: Mapping[str, Any] | None = None,
          formats: Iterable[str] = FORMATS) -> list[Path]:
    """Render ``formats`` into ``out``; returns the written paths in ``FORMATS`` order."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = context(report, evidence=evidence, previous=previous)
    wanted = set(formats)
    paths = []
    for fmt in FORMATS:
        if fmt in wanted:
            p = out / FILES[fmt]
            with p.open("w", encoding="utf-8", newline="\n") as fh:
                fh.writelines(generate(report, fmt, ctx=ctx))
            paths.append(p)
    return paths


def render_gate_md(gate: Mapping[str, Any]) -> str:
    """``gate.md`` from ``gate.json`` (a :class:`shadow.gates.GateResult` on the wire)."""
    return _env().get_template("gate.md.j2").render(gate=gate)


def _resolve_report(path: str | Path) -> Path:
    p = Path(path)
    return p / "report.json" if p.is_dir() else p


def rerender(report_path: str | Path, *, fmt: str = "all", previous: str | None = None,
             out: str | Path | None = None) -> tuple[str, list[Path]]:
    """``shadow report``: re-render ``fmt`` from a report.json (+ evidence.json beside it)."""
    from shadow.run import render as render_json

    src = _resolve_report(report_path)
    report = load_report(src)
    ev_path = src.parent / "evidence.json"
    evidence = load_path(ev_path) if ev_path.is_file() else None
    verified = evidence is not None and verify(report, evidence, ev_path)
    prev = load_report(_resolve_report(previous)) if previous else None
    target = Path(out) if out is not None else src.parent
    from shadow.outdir import ensure_dir

    ensure_dir(target, "--out")
    formats = FORMATS if fmt == "all" else tuple(f for f in (fmt,) if f in FORMATS)
    paths = write(target, report, evidence=evidence, previous=prev, formats=formats)
    if fmt in ("json", "all") and target.resolve() != src.parent.resolve():
        j = target / "report.json"
        j.write_text(render_json(report), encoding="utf-8", newline="\n")
        paths.insert(0, j)
    return (str(report.get("verdict", "?")) if verified else "UNVERIFIED"), paths


def verify(report: Mapping[str, Any], evidence: Any, ev_path: Path) -> bool:
    """A report.json re-rendered must be the one its evidence.json seals: the evidence's
    digests, its results and per-case rows, its verdict and — when the evidence was judged
    under the bundled policy — the phase ladder and every case outcome recomputed.  Any
    difference is an input error naming the field (an edited report is never re-rendered
    as GO)."""
    from shadow.gates import merge, rule
    from shadow.gates import policy as policy_mod

    f = merge.parse(evidence, ev_path.as_posix())
    merge.check_report(f, ev_path)
    policy = policy_mod.load()
    if f.identity.get("policy_digest") != policy.digest:
        return True  # judged under another policy file: digests and results checked
    src = (ev_path.parent / "report.json").as_posix()
    phase = int(report.get("phase", -1))
    cases = rule.judge_cases(policy, phase, [(c["fixture"], c["surface"])
                                             for c in report.get("cases", [])],
                             report.get("divergences", []))
    if cases != list(report.get("cases", [])):
        raise InputError(src, "/cases", "the case outcomes the one failure rule gives",
                         "other outcomes (edited report?)")
    try:
        day = dt.date.fromisoformat(str(report.get("generated_at", ""))[:10])
    except ValueError:
        raise InputError(src, "/generated_at", "an ISO-8601 date", "another value") from None
    steps = rule.ladder(policy, evidence, f.platform, day, ev_path.as_posix())
    if steps != report.get("ladder") or steps[phase]["verdict"] != report.get("verdict"):
        raise InputError(src, "/ladder", "the phase ladder its evidence.json gives",
                         "another ladder or verdict (edited report?)")
    return True


def diff_files(old: str | Path, new: str | Path, *, fmt: str = "text") -> tuple[str, bool]:
    """``shadow diff``: (rendered diff, whether NEW brings new blocking divergences)."""
    import json

    from shadow.reports.diff import diff_reports, render_text

    d = diff_reports(load_report(_resolve_report(old)), load_report(_resolve_report(new)))
    if fmt == "json":
        text = json.dumps(d.to_wire(), sort_keys=True, indent=1, ensure_ascii=False)
    elif fmt == "md":
        text = _env().get_template("diff.md.j2").render(
            d=d.to_wire(), limit=MD_LIMIT * 2).rstrip("\n")
    else:
        text = render_text(d)
    return text, bool(d.regressions)
