"""``shadow waive`` and ``shadow intend``: one reviewed skeleton entry per divergence id,
appended to a waiver file (docs/waivers.md) or an intended-difference file
(docs/intended-differences.md).

Each entry selects exactly its divergence's ``reason_code``, ``fixture`` and ``surface``
— literal names, never globs (a name holding a glob character is escaped) — and gets the
next free id (``W-NNN``, ``ID-NNN``: one more than the highest).  An intended rule also
pins the divergence's categorical detail values (:data:`shadow.reports.clusters.CATEGORICAL`)
as ``detail`` predicates, so it covers that kind of divergence only.  Several ids with the
same selector get one entry.

Refused (a :class:`~shadow.errors.UsageError`, exit 2, naming the id; nothing is written
when any id is refused): an id that is not a divergence of the report (legacy defects
never gate and are never waived); for a waiver, what :func:`shadow.waivers.waivable`
refuses (``fixture.invalid``, a NO-GO class, ``secret.leaked`` attributed to the candidate
or both) and a selector an active waiver of the file already has; for an intended rule,
a code :data:`shadow.intended.NEVER` names, a ``blocking`` divergence, and any divergence
not attributed ``none`` (rules apply only to unexplained divergences: evidence always
wins — a candidate fault, a legacy defect or a twin comparison is never "intended"; an
``intended`` one is covered already).  Also refused: an empty owner, reason, design or
rationale, text holding secret material (never echoed), a malformed date, an expiry that
is not after today (UTC) and a review date before today.

The file is written whole and atomically, in the layout it already has (its indent and
escaping, when re-serialising it reproduces its bytes; a new file or one in another layout
gets ``indent=1``, ``ensure_ascii=False``), existing entries unchanged and in order, and it
is parsed with :func:`shadow.waivers.parse` / :func:`shadow.intended.parse` before it is
written.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from shadow import codes
from shadow import intended as intended_mod
from shadow import waivers as waiver_mod
from shadow.boundary import load_path
from shadow.divergence import Divergence
from shadow.errors import InputError, UsageError
from shadow.explain import ID_RE, load_report, named

DEFAULT_WAIVERS: Final = "waivers.json"
_DATE: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
MAX_TEXT: Final = 2000


@dataclass(frozen=True, slots=True)
class Appended:
    path: Path
    created: bool
    entries: tuple[Mapping[str, Any], ...]
    covers: Mapping[str, tuple[str, ...]]  # entry id -> report divergence ids it selects
    notes: tuple[str, ...] = field(default=())


# --------------------------------------------------------------------------- checks


def _text(value: str | None, option: str) -> str:
    from shadow.canonical import has_secret

    text = (value or "").strip()
    if not text:
        raise UsageError(f"{option}: a non-empty text")
    if _CONTROL.search(text):
        raise UsageError(f"{option}: one line of printable text (no control characters)")
    if len(text) > MAX_TEXT:
        raise UsageError(f"{option}: at most {MAX_TEXT} characters, got {len(text)}")
    if has_secret(text):
        raise UsageError(f"{option}: the text holds secret material (not shown); a "
                         "reviewed file is no place for it")
    return text


def _date(value: str | None, option: str) -> dt.date:
    text = (value or "").strip()
    try:
        if not _DATE.fullmatch(text):
            raise ValueError
        return dt.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{option}: a date YYYY-MM-DD, got {named(text)}") from None


def _literal(name: str) -> str:
    """``name`` as an ``fnmatch`` pattern that matches exactly it."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def _lookup(report: Mapping[str, Any], ids: Sequence[str], src: Path,
            refuse: Callable[[Mapping[str, Any]], str | None]) -> list[Mapping[str, Any]]:
    """The report divergences ``ids`` name, in order (duplicates once); every id that
    is unknown or that ``refuse`` refuses is named in one UsageError."""
    by_id = {str(d.get("id")): d for d in report.get("divergences", [])}
    defects = {str(d.get("id")) for d in report.get("legacy_defects", [])}
    found, problems = [], []
    for raw in dict.fromkeys(ids):
        if not ID_RE.fullmatch(raw):
            problems.append(f"{named(raw)}: not a divergence id (d-<12 hex>)")
        elif raw in defects or raw.startswith("ld-"):
            problems.append(f"{raw}: a legacy defect — defects never gate; nothing to "
                            "waive or intend")
        elif raw not in by_id:
            problems.append(f"{raw}: no divergence with this id in {src}")
        else:
            why = refuse(by_id[raw])
            if why:
                problems.append(f"{raw}: {why}")
            else:
                found.append(by_id[raw])
    if not ids:
        problems.append("no divergence id given")
    if problems:
        raise UsageError("refused: " + "; ".join(problems))
    return found


# --------------------------------------------------------------------------- files


def _layouts() -> list[tuple[int | None, bool]]:
    return [(1, False), (2, False), (4, False), (1, True), (2, True), (4, True)]


def _dump(doc: Any, layout: tuple[int | None, bool]) -> str:
    return json.dumps(doc, indent=layout[0], ensure_ascii=layout[1])


def _read(path: Path, empty: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[int | None, bool],
                                                        bool, bool]:
    """(document, layout, file existed, layout reproduced)."""
    if not path.exists():
        return dict(empty), (1, False), False, True
    if path.is_dir():
        raise InputError(path, "", "a policy file to append to", "a folder")
    doc = load_path(path)
    text = path.read_text(encoding="utf-8")
    for layout in _layouts():
        dumped = _dump(doc, layout)
        if text in (dumped, dumped + "\n"):
            return doc, layout, True, True
    return doc, (1, False), True, False


def _write(path: Path, doc: Any, layout: tuple[int | None, bool]) -> None:
    text = _dump(doc, layout) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise InputError(path, "", "a writable policy file",
                         f"not writable ({type(exc).__name__})") from None


def _next_id(existing: Sequence[Any], prefix: str) -> Callable[[], str]:
    pat = re.compile(rf"{re.escape(prefix)}-([0-9]+)")
    nums = [int(m.group(1)) for e in existing if isinstance(e, Mapping)
            and isinstance(e.get("id"), str) and (m := pat.fullmatch(e["id"]))]
    state = {"n": max(nums, default=0)}

    def take() -> str:
        state["n"] += 1
        return f"{prefix}-{state['n']:03d}"

    return take


def _div(d: Mapping[str, Any]) -> Divergence:
    return Divergence(str(d["fixture"]), str(d["surface"]), str(d["reason_code"]),
                      str(d["severity"]), str(d.get("attribution", "none")),
                      tuple(d.get("item_ids", [])), dict(d.get("detail") or {}))


def _today(today: dt.date | None) -> dt.date:
    return today or dt.datetime.now(dt.UTC).date()


# --------------------------------------------------------------------------- waive


def _waiver_refusal(d: Mapping[str, Any]) -> str | None:
    if waiver_mod.waivable(_div(d)):
        return None
    code = str(d["reason_code"])
    if code == "fixture.invalid":
        return "fixture.invalid is never waivable (a quarantined fixture: its evidence is " \
               "missing)"
    if code in codes.NOGO_CODES:
        return f"{code} is a NO-GO class (design 108 §16): never waivable"
    if code in codes.ALWAYS_BLOCKING:
        return f"{code} is missing evidence (the candidate produced nothing): never waivable"
    if code == "unclassified":
        return "unclassified is never waivable (nothing judged that capture)"
    return f"{code} attributed to {d.get('attribution')} is never waivable"


def waive(ids: Sequence[str], *, owner: str, reason: str, expires: str,
          report: str | Path = "reports/latest", waivers: str | Path = DEFAULT_WAIVERS,
          today: dt.date | None = None) -> Appended:
    """Append one waiver per selector of ``ids`` to ``waivers`` (module docstring)."""
    owner, reason = _text(owner, "--owner"), _text(reason, "--reason")
    until = _date(expires, "--expires")
    now = _today(today)
    if until <= now:
        raise UsageError(f"--expires: a date after today ({now.isoformat()}, UTC): a waiver "
                         f"stops applying on its expiry date, got {until.isoformat()}")
    src, rep = load_report(report)
    found = _lookup(rep, ids, src, _waiver_refusal)
    path = Path(waivers)
    doc, layout, existed, same = _read(path, {"schema": waiver_mod.SCHEMA, "waivers": []})
    current = waiver_mod.parse(doc, str(path)) if existed else []
    entries = list(doc.get("waivers", []))
    take = _next_id(entries, "W")
    notes: list[str] = [] if same or not entries else [
        f"{path}: rewritten with indent=1 (its layout could not be reproduced)"]
    added: list[dict[str, Any]] = []
    covers: dict[str, tuple[str, ...]] = {}
    problems = []
    for d in found:
        sel = (str(d["reason_code"]), _literal(str(d["fixture"])), _literal(str(d["surface"])))
        same_sel = [w for w in current if (w.reason_code, w.fixture, w.surface) == sel]
        active = [w for w in same_sel if now < w.expires]
        if active:
            problems.append(f"{d['id']}: already waived by {active[0].id} (expires "
                            f"{active[0].expires.isoformat()}); pass --waivers {path} to "
                            "shadow run")
            continue
        if same_sel:
            notes.append(f"{d['id']}: {same_sel[0].id} had the same selector and has expired")
        prev = next((a for a in added if (a["reason_code"], a["fixture"], a["surface"]) == sel),
                    None)
        if prev is not None:
            continue
        entry = {"id": take(), "reason_code": sel[0], "fixture": sel[1], "surface": sel[2],
                 "owner": owner, "reason": reason, "expires": until.isoformat()}
        added.append(entry)
        w = waiver_mod.parse({"schema": waiver_mod.SCHEMA, "waivers": [entry]}, "<new>")[0]
        hits = [x for x in rep.get("divergences", []) if w.selects(_div(x))]
        covers[entry["id"]] = tuple(str(x["id"]) for x in hits if waiver_mod.waivable(_div(x)))
        refused = sum(1 for x in hits if not waiver_mod.waivable(_div(x)))
        if refused:
            notes.append(f"{entry['id']}: also selects {refused} never-waivable divergence(s) "
                         "of the case; those stay in the report (listed as refused)")
        others = [x for x in covers[entry["id"]] if x != d["id"]]
        if others:
            notes.append(f"{entry['id']}: the selector also covers {len(others)} other "
                         f"divergence(s) of the same code and case: {', '.join(others)}")
        if not codes.counts_against_candidate(str(d.get("attribution", "none"))):
            notes.append(f"{d['id']}: attributed {d.get('attribution')}: it never counts "
                         "against the candidate; the waiver only hides it")
    if problems:
        raise UsageError("refused: " + "; ".join(problems))
    if (until - now).days <= waiver_mod.WARNING_DAYS:
        notes.append(f"expires in {(until - now).days} days: the report will list it as "
                     "expiring")
    doc["waivers"] = [*entries, *added]
    waiver_mod.parse(doc, str(path))  # the file written loads
    _write(path, doc, layout)
    return Appended(path, not existed, tuple(added), covers, tuple(notes))


# --------------------------------------------------------------------------- intend


def _intend_refusal(d: Mapping[str, Any]) -> str | None:
    code, who = str(d["reason_code"]), str(d.get("attribution", "none"))
    detail = d.get("detail") or {}
    if code in intended_mod.NEVER:
        return (f"{code}: an intended difference never covers a NO-GO class, secret.leaked, "
                "missing evidence or a gate reason")
    if d.get("severity") == "blocking":
        return "blocking: an intended difference never covers a blocking divergence"
    if who in ("candidate", "both"):
        return (f"attributed to {who}: the evidence says the candidate is wrong — fix it "
                "(or waive it), never call it intended")
    if who == "baseline":
        return ("a legacy defect (attributed baseline): evidence wins, a rule never applies "
                "to it")
    if who == "twin":
        return "a twin comparison (legacy vs legacy): rules cover candidate divergences only"
    if who == "intended":
        return f"already covered by intended rule {detail.get('intended_rule', '?')}"
    return None


def _predicates(detail: Mapping[str, Any]) -> dict[str, list[Any]]:
    from shadow.reports.clusters import CATEGORICAL, TEXT, category_value

    out: dict[str, list[Any]] = {}
    for k in CATEGORICAL:
        if k in detail and (detail[k] is None or isinstance(detail[k], (str, bool))) \
                and category_value(detail[k]) != TEXT:
            out["/" + k.replace("~", "~0").replace("/", "~1")] = [detail[k]]
    return out


def intend(ids: Sequence[str], *, owner: str, design: str, rationale: str, review_by: str,
           report: str | Path = "reports/latest", intended: str | Path | None = None,
           today: dt.date | None = None) -> Appended:
    """Append one intended-difference rule per selector of ``ids`` (module docstring)."""
    owner, rationale = _text(owner, "--owner"), _text(rationale, "--rationale")
    design = _text(design, "--design")
    if "§" not in design:
        raise UsageError("--design: the design clause the kernel follows, e.g. '108 §7'")
    due = _date(review_by, "--review-by")
    now = _today(today)
    if due < now:
        raise UsageError(f"--review-by: today ({now.isoformat()}, UTC) or later, got "
                         f"{due.isoformat()}")
    src, rep = load_report(report)
    found = _lookup(rep, ids, src, _intend_refusal)
    path = Path(intended) if intended is not None else intended_mod.DEFAULT_PATH
    doc, layout, existed, same = _read(path, {"schema": intended_mod.SCHEMA, "rules": []})
    if existed:
        intended_mod.parse(doc, str(path))
    rules = list(doc.get("rules", []))
    take = _next_id(rules, "ID")
    notes: list[str] = [] if same or not rules else [
        f"{path}: rewritten with indent=1 (its layout could not be reproduced)"]
    added: list[dict[str, Any]] = []
    covers: dict[str, tuple[str, ...]] = {}
    for d in found:
        select = {"reason_code": [str(d["reason_code"])],
                  "surface": [_literal(str(d["surface"]))],
                  "fixture": [_literal(str(d["fixture"]))]}
        preds = _predicates(d.get("detail") or {})
        if preds:
            select["detail"] = preds  # type: ignore[assignment]
        if any(a["select"] == select for a in added):
            continue
        rule = {"id": take(), "select": select, "design": design, "rationale": rationale,
                "owner": owner, "review_by": due.isoformat()}
        added.append(rule)
        parsed = intended_mod.parse({"schema": intended_mod.SCHEMA, "rules": [rule]},
                                    "<new>")
        covers[str(rule["id"])] = tuple(
            str(x["id"]) for x in rep.get("divergences", [])
            if x.get("attribution", "none") == "none" and intended_mod.match(
                parsed, str(x["reason_code"]), str(x["fixture"]), str(x["surface"]),
                x.get("detail") or {}, str(x["severity"])) is not None)
    ev = src.parent / "evidence.json"
    if ev.is_file():
        try:
            used = (load_path(ev).get("identity") or {}).get("intended_digest")
        except (InputError, AttributeError):
            used = None
        if existed and isinstance(used, str) and used not in ("none",
                                                              intended_mod.file_digest(path)):
            notes.append(f"the run used other intended rules than {path}: pass --intended "
                         f"{path} to shadow run")
    doc["rules"] = [*rules, *added]
    intended_mod.parse(doc, str(path))  # the file written loads
    _write(path, doc, layout)
    return Appended(path, not existed, tuple(added), covers, tuple(notes))


__all__ = ["DEFAULT_WAIVERS", "Appended", "intend", "waive"]
