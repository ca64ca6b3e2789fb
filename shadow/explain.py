"""``shadow explain``: a divergence's case — or every case of a fixture — with the baseline
and the candidate side by side, from a fresh replay of just that fixture.

``explain(target, surface, report=…, fixtures=…)`` takes a divergence id of the report
(``d-…``, or a legacy defect ``ld-…``) or a fixture name (and optionally one of its
surfaces).  It loads that one scenario (:func:`shadow.fixtures.load_corpus` with
``only``), replays it (:func:`shadow.replay.replay_fixture`: the candidate's projections
and the divergences with their stable ids) and rebuilds each case's baseline projection
with the surface adapter; the candidate projection is anchored as the engine judged it
(:func:`shadow.anchor.anchor`).  A twin case ``a~b`` puts the two legacy surfaces side by
side.

What is shown: one row per item (input items in input order, then derived items) with its
role and kind and, per side, ``kept #position``, ``derived <kind> #position`` or
``dropped <reason>`` and the first 8 hex digits of its content digest; memory records and
operations the same way; the divergences and legacy defects the report holds for the case
(id, code, severity, attribution, categorical detail).  **No content is ever shown**: a
projection holds digests and lengths only, and every other value printed (ids, reasons,
categories) passes :func:`shown`, which replaces anything that is not a short code word —
or that the kernel's secret detectors flag — by its length.

The replay is checked against the report: divergences of the report the replay does not
reproduce (another corpus, recordings or candidate) and replayed ones the report lacks
(waived, or new since the run) are counted in a note.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from shadow.errors import InputError, UsageError
from shadow.projection import Projection

ID_RE: Final = re.compile(r"(?:d|ld)-[0-9a-f]{12}(?:-[0-9]+)?")
_CODE: Final = re.compile(r"[A-Za-z0-9_.:@/+#~-]{1,80}")
_CELL: Final = 44  # widest cell of the terminal table
DEFAULT_REPORT: Final = "reports/latest"
MARKS: Final = {">>": "named by the divergence explained (or, for a fixture, by any "
                      "divergence of the case)",
                "*": "named by another divergence of the case",
                "~": "the two sides differ (no divergence of the report names it)"}


def shown(value: Any) -> str:
    """``value`` as it may be printed: a short code word as itself, anything else (free
    text, secret material) as ``(N chars)``; never a body."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    if _CODE.fullmatch(text):
        from shadow.canonical import has_secret

        if not has_secret(text):
            return text
    return f"({len(text)} chars)"


def named(arg: str) -> str:
    """A command-line argument echoed in an error (its length only when it is not a
    plain name)."""
    text = shown(arg)
    return repr(arg) if text == arg else f"an argument of {len(arg)} chars"


@dataclass(frozen=True, slots=True)
class Row:
    item: str  # the id (relative to the fixture) or op#N
    what: str  # role / kind
    left: str
    right: str
    mark: str  # a key of MARKS, or ""
    refs: tuple[int, ...] = ()  # numbers of the case's divergences naming it


@dataclass(frozen=True, slots=True)
class CaseView:
    fixture: str
    surface: str
    left: str  # column labels: baseline / candidate, or the two twin surfaces
    right: str
    summary: tuple[tuple[str, str, str], ...]  # (what, left, right)
    rows: tuple[Row, ...]
    divergences: tuple[Mapping[str, Any], ...]  # numbered 1..n in this order
    defects: tuple[Mapping[str, Any], ...]
    focus: str | None = None
    notes: tuple[str, ...] = field(default=())


# --------------------------------------------------------------------------- loading


def load_report(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """A report.json (or its run folder), loaded and checked."""
    from shadow.boundary import load_path
    from shadow.reports.validate import validate_report

    p = Path(path)
    src = p / "report.json" if p.is_dir() else p
    if not src.exists():
        raise InputError(src, "", "--report: a report.json or a run folder holding one "
                         "(written by shadow run)", "no such file")
    return src, validate_report(load_path(src), src)


def fixtures_root(path: str | Path) -> Path:
    """The fixture folder as ``shadow run`` reads it (a nested ``legacy-captures/``)."""
    root = Path(path)
    if not root.is_dir():
        raise InputError(root, "", "--fixtures: a fixture folder in the legacy-capture/v1 "
                         "layout", "no such folder")
    nested = root / "legacy-captures"
    if nested.is_dir() and not any(p.is_dir() and (p / "input.json").is_file()
                                   for p in root.iterdir()):
        return nested
    return root


def _entries(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*report.get("divergences", []), *report.get("legacy_defects", [])]


# --------------------------------------------------------------------------- cells


def _dig(digest: str) -> str:
    return digest.split(":", 1)[-1][:8]


def _short(item_id: str, fixture: str) -> str:
    return item_id[len(fixture) + 1:] if item_id.startswith(fixture + ":") else item_id


def _cell(p: Projection | None, item_id: str) -> tuple[str, tuple[Any, ...]]:
    """(the cell text, what is compared between the sides — the position excluded)."""
    if p is None:
        return "", ()
    for pos, it in enumerate(p.items, 1):
        if it.id == item_id:
            if it.origin == "derived":
                text = f"derived {shown(it.kind)} #{pos} {_dig(it.digest)}"
                if it.covers:
                    text += f" covers {len(it.covers)}"
                return text, ("derived", it.kind, it.digest, tuple(it.covers))
            text = f"kept #{pos} {_dig(it.digest)}"
            if it.altered:
                text += f" altered:{shown(it.altered)}"
            if it.pinned:
                text += " pinned"
            return text, ("kept", it.digest, it.altered)
    for d in p.dropped:
        if d.id == item_id:
            text = f"dropped {shown(d.reason)}"
            if d.legacy_reason and d.legacy_reason != d.reason:
                text += f" ({shown(d.legacy_reason)})"
            return text, ("dropped", d.reason)
    return "—", ("absent",)


def _what(item_id: str, canon_items: Mapping[str, Any], sides: Sequence[Projection | None]
          ) -> str:
    c = canon_items.get(item_id)
    if c is not None:
        text = f"{shown(c.role) if c.role else '-'}/{shown(c.kind)}"
        if c.tool_role:
            text += f" {shown(c.tool_role)}"
        return text + (" pinned" if c.pinned else "")
    for p in sides:
        it = p.item(item_id) if p is not None else None
        if it is not None:
            return f"{shown(it.role) if it.role else '-'}/{shown(it.kind)}"
    return "-"


def _item_ids(sides: Sequence[Projection | None]) -> list[str]:
    seen: dict[str, None] = {}
    for p in sides:
        if p is not None:
            seen.update(dict.fromkeys(p.input_ids))
    for p in sides:
        if p is not None:
            seen.update(dict.fromkeys(it.id for it in p.items))
            seen.update(dict.fromkeys(d.id for d in p.dropped))
    return list(seen)


def _mark(ids: Sequence[str], focus: set[str], other: set[str], differ: bool) -> str:
    if any(i in focus for i in ids):
        return ">>"
    if any(i in other for i in ids):
        return "*"
    return "~" if differ else ""


def _refs(ids: Sequence[str], divs: Sequence[Mapping[str, Any]]) -> tuple[int, ...]:
    return tuple(n for n, d in enumerate(divs, 1)
                 if any(i in d.get("item_ids", []) for i in ids))


def _op_indexes(d: Mapping[str, Any]) -> set[int]:
    """The memory operations a divergence's detail names (``index``, ``ops``)."""
    detail = d.get("detail") or {}
    out = {detail["index"]} if isinstance(detail.get("index"), int) else set()
    ops = detail.get("ops")
    if isinstance(ops, list):
        out |= {x for x in ops if isinstance(x, int) and not isinstance(x, bool)}
    return out


def _memory_rows(fixture: str, sides: Sequence[Projection | None], focus: set[str],
                 other: set[str], divs: Sequence[Mapping[str, Any]],
                 focus_id: str | None) -> list[Row]:
    mems = [p.memory if p is not None else None for p in sides]
    if not any(m is not None for m in mems):
        return []
    rows: list[Row] = []
    recs: dict[str, None] = {}
    for m in mems:
        if m is not None:
            recs.update(dict.fromkeys(r.id for r in m.records))
    for rid in recs:
        cells: list[str] = []
        sigs: list[tuple[Any, ...] | None] = []
        scope = "-"
        for m in mems:
            r = next((r for r in m.records if r.id == rid), None) if m is not None else None
            if r is None:
                cells.append("—" if m is not None else "")
                sigs.append(None)
                continue
            scope = shown(r.scope)
            text = f"{shown(r.state)} {_dig(r.digest)}"
            if r.category:
                text += f" {shown(r.category)}"
            cells.append(text)
            sigs.append((r.state, r.digest, r.scope, r.category))
        rows.append(Row(_short(rid, fixture), f"record {scope}", cells[0], cells[1],
                        _mark([rid], focus, other, sigs[0] != sigs[1]), _refs([rid], divs)))
    indexes = sorted({o.index for m in mems if m is not None for o in m.ops})
    for ix in indexes:
        cells = []
        sigs = []
        name = "-"
        touched: list[str] = []
        for m in mems:
            o = next((o for o in m.ops if o.index == ix), None) if m is not None else None
            if o is None:
                cells.append("—" if m is not None else "")
                sigs.append(None)
                continue
            name = shown(o.op)
            touched += [*o.created, *o.updated, *o.deleted, *(o.returned or ())]
            text = (f"{shown(o.status)} +{len(o.created)} ~{len(o.updated)} "
                    f"-{len(o.deleted)}")
            if o.returned is not None:
                text += f" returned {len(o.returned)}"
            if o.error:
                text += f" {shown(o.error)}"
            cells.append(text)
            sigs.append((o.op, o.status, o.created, o.updated, o.deleted, o.returned,
                         o.error))
        by_index = tuple(n for n, d in enumerate(divs, 1) if ix in _op_indexes(d))
        mark = _mark(touched, focus, other, sigs[0] != sigs[1])
        if by_index and mark != ">>":
            mark = ">>" if any(focus_id in (None, divs[n - 1].get("id"))
                               for n in by_index) else "*"
        rows.append(Row(f"op#{ix}", f"op {name}", cells[0], cells[1], mark,
                        tuple(sorted(set(by_index) | set(_refs(touched, divs))))))
    return rows


def _summary(p: Projection | None, failure: str | None) -> tuple[str, str, str]:
    if p is None:
        return failure or "no projection", "", ""
    status = shown(p.status) + (f" {shown(p.error)}" if p.error else "")
    output = f"{len(p.items)} items, {len(p.dropped)} dropped"
    if p.memory is not None:
        output += f", {len(p.memory.records)} records, {len(p.memory.ops)} ops"
    prov = "-"
    if p.provider is not None:
        v = p.provider
        prov = (f"{shown(v.status)} requests {v.requests}"
                + (f" degraded {shown(v.degraded_reason) if v.degraded_reason else 'yes'}"
                   if v.degraded else "")
                + (f" usage {shown(v.usage)}" if v.usage else ""))
    return status, output, prov


def build_case(fixture: str, surface: str, left: Projection | None, right: Projection | None,
               labels: tuple[str, str], failures: tuple[str | None, str | None],
               canon_items: Mapping[str, Any], divs: Sequence[Mapping[str, Any]],
               defects: Sequence[Mapping[str, Any]], focus: str | None,
               notes: Sequence[str] = ()) -> CaseView:
    """One case's view from its two projections (either may be missing: ``failures``)."""
    named_all = [*divs, *defects]
    focus_ids = {i for d in named_all if focus is None or d.get("id") == focus
                 for i in d.get("item_ids", [])}
    other_ids = {i for d in named_all for i in d.get("item_ids", [])} - focus_ids
    sides = (left, right)
    rows = []
    for iid in _item_ids(sides):
        (lt, ls), (rt, rs) = _cell(left, iid), _cell(right, iid)
        differ = left is not None and right is not None and ls != rs
        rows.append(Row(_short(iid, fixture), _what(iid, canon_items, sides), lt, rt,
                        _mark([iid], focus_ids, other_ids, differ), _refs([iid], named_all)))
    rows += _memory_rows(fixture, sides, focus_ids, other_ids, named_all, focus)
    sl, sr = _summary(left, failures[0]), _summary(right, failures[1])
    summary = tuple((what, a, b) for what, a, b in zip(("status", "output", "provider"), sl,
                                                          sr, strict=True))
    return CaseView(fixture, surface, labels[0], labels[1], summary, tuple(rows),
                    tuple(divs), tuple(defects), focus, tuple(notes))


# --------------------------------------------------------------------------- replay


def _replayed_ids(result: Any) -> dict[str, set[str]]:
    from shadow.divergence import with_ids

    out: dict[str, set[str]] = {}
    for w in with_ids([d.to_wire() for d in result.divergences]):
        out.setdefault(str(w["surface"]), set()).add(str(w["id"]))
    return out


def explain(target: str, surface: str | None = None, *, report: str | Path = DEFAULT_REPORT,
            fixtures: str | Path = "fixtures", recordings: str | None = None,
            candidate: str = "kernel") -> list[CaseView]:
    """The cases ``target`` (a divergence id or a fixture name) asks for (module
    docstring).  Unknown ids, fixtures and surfaces are a :class:`UsageError` naming
    them; a missing or malformed report, fixture folder or recordings an
    :class:`InputError`."""
    src, rep = load_report(report)
    entries = _entries(rep)
    focus: str | None = None
    if ID_RE.fullmatch(target):
        hit = next((e for e in entries if e.get("id") == target), None)
        if hit is None:
            raise UsageError(f"{target}: no divergence or legacy defect with this id in {src}")
        if surface is not None:
            raise UsageError(f"{target} is a divergence id: it takes no SURFACE "
                             "(its case is its own)")
        fixture, surface, focus = str(hit["fixture"]), str(hit["surface"]), target
    else:
        fixture = target
    if not fixture or fixture in (".", "..") or any(c in fixture for c in "/\\\0"):
        raise UsageError(f"{named(target)}: neither a divergence id of {src} nor a fixture "
                         "name")
    root = fixtures_root(fixtures)
    from shadow.fixtures import load_corpus

    corpus = load_corpus(root, only=[fixture])
    in_report = {str(e["fixture"]) for e in entries} | {
        str(c.get("fixture")) for c in rep.get("cases", [])}
    if not corpus.scenarios and not corpus.quarantined:
        if fixture in in_report:
            raise InputError(root / fixture, "", f"the scenario folder of fixture {fixture!r} "
                             f"({src} names it)", "no such folder")
        raise UsageError(f"{named(target)}: neither a divergence id of {src} nor a fixture "
                         f"of {root}")
    report_cases = sorted({str(c["surface"]) for c in rep.get("cases", [])
                           if c.get("fixture") == fixture}
                          | {str(e["surface"]) for e in entries if e["fixture"] == fixture})

    def of_case(sf: str) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
        ds = [d for d in rep.get("divergences", []) if d["fixture"] == fixture
              and d["surface"] == sf]
        ls = [d for d in rep.get("legacy_defects", []) if d["fixture"] == fixture
              and d["surface"] == sf]
        return ds, ls

    if not corpus.scenarios:  # quarantined: nothing to replay
        surfaces = [surface] if surface is not None else report_cases
        if surface is not None and surface not in report_cases:
            raise UsageError(f"{named(surface)}: not a case of fixture {fixture!r}; "
                             f"its cases: {', '.join(report_cases) or 'none'}")
        why = "; ".join(str(q) for q in corpus.quarantined)
        return [build_case(fixture, sf, None, None, ("baseline", "candidate"),
                           ("quarantined", "quarantined"), {}, *of_case(sf), focus,
                           (f"quarantined, nothing replayed: {why}",)) for sf in surfaces]
    return _replay_cases(fixture, surface, corpus.scenarios[0], rep, src, report_cases,
                         of_case, focus, recordings, candidate, in_report)


def _replay_cases(fixture: str, surface: str | None, scenario: Any, rep: Mapping[str, Any],
                  src: Path, report_cases: Sequence[str], of_case: Any, focus: str | None,
                  recordings: str | None, candidate: str, in_report: set[str]
                  ) -> list[CaseView]:
    from shadow.anchor import anchor
    from shadow.candidate import make_candidate
    from shadow.canonical import canonicalize
    from shadow.divergence.claims import canon_items
    from shadow.replay import replay_fixture
    from shadow.surfaces import adapter_for

    cand = make_candidate(candidate, recordings)
    result = replay_fixture(scenario, cand)
    cases = sorted(set(result.cases) | set(report_cases))
    if surface is not None and surface not in cases:
        raise UsageError(f"{named(surface)}: not a case of fixture {fixture!r}; its cases: "
                         + ", ".join(cases))
    canon = canonicalize(scenario.name, scenario.input)
    citems = canon_items(canon)
    siblings = {c.name: c for c in scenario.captures}
    baselines: dict[str, tuple[Projection | None, str | None]] = {}

    def baseline(name: str) -> tuple[Projection | None, str | None]:
        if name not in baselines:
            cap, adapter = siblings.get(name), adapter_for(name)
            if cap is None or adapter is None:
                baselines[name] = (None, "no capture" if cap is None else "no surface adapter")
            else:
                try:
                    baselines[name] = (adapter(canon, cap, siblings), None)
                except Exception as exc:  # the engine reports it as unclassified
                    baselines[name] = (None, f"adapter failed ({type(exc).__name__})")
        return baselines[name]

    replayed = _replayed_ids(result)
    notes_all = []
    rep_kind = (rep.get("candidate") or {}).get("kind")
    if rep_kind and rep_kind != cand.identity.get("kind"):
        notes_all.append(f"the report judged a {shown(rep_kind)} candidate; this replay "
                         f"uses {shown(cand.identity.get('kind'))} (--candidate)")
    if fixture not in in_report:
        notes_all.append(f"fixture {fixture!r} is not in {src}: no divergence listed")
    views = []
    for sf in ([surface] if surface is not None else cases):
        divs, defects = of_case(sf)
        notes = list(notes_all)
        mine = {str(d.get("id")) for d in divs}
        again = replayed.get(sf, set())
        lost, extra = len(mine - again), len(again - mine)
        if lost:
            notes.append(f"{lost} divergence(s) of the report not reproduced by this replay "
                         "(other fixtures, recordings or candidate than the run's)")
        if extra:
            notes.append(f"{extra} replayed divergence(s) not in the report (waived, or "
                         "new since the run)")
        if "~" in sf:
            x, y = sf.split("~", 1)
            (bx, fx_), (by, fy) = baseline(x), baseline(y)
            views.append(build_case(fixture, sf, bx, by, (x, y), (fx_, fy), citems, divs,
                                    defects, focus, notes))
            continue
        b, fb = baseline(sf)
        a = next((p for p in result.candidate_projections if p.surface == sf), None)
        fa = None if a is not None else "no projection (see the divergences)"
        if a is not None and b is not None and sf in siblings:
            try:
                a = anchor(a, b, canon, siblings[sf], siblings)
            except Exception:  # shown as the candidate wrote it
                notes.append("the candidate projection could not be anchored: shown as "
                             "written")
        views.append(build_case(fixture, sf, b, a, ("baseline", "candidate"), (fb, fa),
                                citems, divs, defects, focus, notes))
    return views


# --------------------------------------------------------------------------- rendering


def _fit(text: str, width: int = _CELL) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _div_line(n: int, d: Mapping[str, Any], focus: str | None) -> str:
    from shadow.reports.clusters import categorical

    detail = d.get("detail") or {}
    parts = [f"{n:>2}", shown(d.get("id")), shown(d.get("reason_code")),
             shown(d.get("severity")), shown(d.get("attribution", "none")),
             f"{len(d.get('item_ids', []))} item(s)"]
    values = [f"{k}={v}" for k, v in categorical(detail)]
    basis = detail.get("attribution_basis")
    if isinstance(basis, list) and basis:
        values.append("basis=" + ",".join(shown(b) for b in basis))
    if detail.get("intended_rule"):
        values.append(f"rule={shown(detail['intended_rule'])}")
    mark = ">>" if focus is not None and d.get("id") == focus else "  "
    return f"{mark} " + "  ".join(parts) + ("  " + " ".join(values) if values else "")


def render_text(views: Sequence[CaseView], *, color: bool = False) -> str:
    """The terminal form: one block per case (ANSI colour only when ``color``)."""
    bold, red, yellow, dim, reset = (("\x1b[1m", "\x1b[31;1m", "\x1b[33m", "\x1b[2m",
                                      "\x1b[0m") if color else ("",) * 5)
    out: list[str] = []
    for v in views:
        out.append(f"{bold}== {v.fixture} / {v.surface} =={reset}")
        out.append(f"{dim}item ids relative to {v.fixture}:  digests: first 8 hex of the "
                   f"content digest  (no content is shown){reset}")
        out += [f"note: {n}" for n in v.notes]
        head = ("mark", "item", "role/kind", v.left, v.right, "divergences")
        body = [("", what, "", a, b, "") for what, a, b in v.summary]
        body += [(r.mark, r.item, r.what, r.left, r.right, ",".join(map(str, r.refs)))
                 for r in v.rows]
        table = [tuple(_fit(c) for c in row) for row in (head, *body)]
        widths = [max(len(row[i]) for row in table) for i in range(len(head))]
        for k, row in enumerate(table):
            line = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            if k == 0:
                line = bold + line + reset
            elif row[0] == ">>":
                line = red + line + reset
            elif row[0] == "*":
                line = yellow + line + reset
            out.append(line)
            if k == len(v.summary):  # after the summary lines
                out.append("")
        used = sorted({r.mark for r in v.rows if r.mark}, key=list(MARKS).index)
        if used:
            out.append("marks: " + "; ".join(f"{m} {MARKS[m]}" for m in used))
        if any(r.refs for r in v.rows):
            out.append("divergences column: the numbers of the lists below")
        out.append(f"divergences ({len(v.divergences)}):" if v.divergences
                   else "divergences: none in the report")
        out += [_div_line(n, d, v.focus) for n, d in enumerate(v.divergences, 1)]
        if v.defects:
            out.append(f"legacy defects ({len(v.defects)}):")
            out += [_div_line(n, d, v.focus) for n, d in
                    enumerate(v.defects, len(v.divergences) + 1)]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


_CSS: Final = ("body{font:14px/1.4 system-ui,sans-serif;margin:20px;color:#1f2328}"
               "table{border-collapse:collapse;margin:8px 0}"
               "th,td{border:1px solid #d1d9e0;padding:2px 6px;text-align:left;"
               "font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}"
               "th{background:#f6f8fa}tr.m-focus{background:#ffebe9}"
               "tr.m-other{background:#fff8c5}tr.m-differ{background:#f6f8fa}"
               ".muted{color:#59636e}")
_ROW_CLASS: Final = {">>": "m-focus", "*": "m-other", "~": "m-differ", "": ""}


def render_html(views: Sequence[CaseView]) -> str:
    """One self-contained HTML document, a ``<section>`` per case: everything escaped,
    inline CSS only, no script, no external reference."""
    from shadow.reports.views import case_anchor

    def e(x: Any) -> str:
        return html.escape(str(x), quote=True)

    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           "<title>shadow explain</title>", f"<style>{_CSS}</style>", "</head>", "<body>"]
    for v in views:
        out.append(f'<section id="{e(case_anchor(v.fixture, v.surface))}">')
        out.append(f"<h2>{e(v.fixture)} / <code>{e(v.surface)}</code></h2>")
        out.append('<p class="muted">Item ids relative to the fixture; digests are the first '
                   "8 hex digits of the content digest; no content is shown.</p>")
        out += [f"<p>note: {e(n)}</p>" for n in v.notes]
        out.append("<table>")
        out.append(f"<tr><th>mark</th><th>item</th><th>role/kind</th><th>{e(v.left)}</th>"
                   f"<th>{e(v.right)}</th><th>divergences</th></tr>")
        for what, a, b in v.summary:
            out.append(f'<tr><td></td><td colspan="2">{e(what)}</td><td>{e(a)}</td>'
                       f"<td>{e(b)}</td><td></td></tr>")
        for r in v.rows:
            cls = _ROW_CLASS.get(r.mark, "")
            out.append(f'<tr{f" class={chr(34)}{cls}{chr(34)}" if cls else ""}>'
                       f"<td>{e(r.mark)}</td><td>{e(r.item)}</td><td>{e(r.what)}</td>"
                       f"<td>{e(r.left)}</td><td>{e(r.right)}</td>"
                       f"<td>{e(','.join(map(str, r.refs)))}</td></tr>")
        out.append("</table>")
        lines = [_div_line(n, d, v.focus) for n, d in
                 enumerate([*v.divergences, *v.defects], 1)]
        if lines:
            out.append("<h3>Divergences</h3>")
            out.append("<pre>" + e("\n".join(lines)) + "</pre>")
        else:
            out.append('<p class="muted">No divergence in the report for this case.</p>')
        out.append("</section>")
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


def write_html(path: str | Path, views: Sequence[CaseView]) -> Path:
    p = Path(path)
    if p.is_dir():
        raise InputError(p, "", "--html: a file to write", "a folder")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(render_html(views), encoding="utf-8", newline="\n")
    except OSError as exc:
        raise InputError(p, "", "--html: a writable file",
                         f"not writable ({type(exc).__name__})") from None
    return p


__all__ = ["CaseView", "Row", "build_case", "explain", "load_report", "render_html",
           "render_text", "shown", "write_html"]
