"""Argument wiring of the triage sub-commands: ``explain``, ``waive``, ``intend``
(:mod:`shadow.explain`, :mod:`shadow.triage`).  No logic here."""

from __future__ import annotations

import argparse
import os
import sys

_REPORT_HELP = ("the run's report.json, or the run folder holding it "
                "(default: reports/latest)")


def cmd_explain(args: argparse.Namespace) -> int:
    from shadow.explain import explain, render_text, write_html
    from shadow.run import default_recordings

    recordings = None if args.no_recordings else (args.recordings or default_recordings())
    views = explain(args.target, args.surface, report=args.report, fixtures=args.fixtures,
                    recordings=recordings, candidate=args.candidate)
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    sys.stdout.write(render_text(views, color=color))
    if args.html:
        print(f"html: {write_html(args.html, views)}")
    sys.stdout.flush()
    return 0


def _print_appended(res: object, noun: str, rerun: str) -> None:
    from shadow.triage import Appended

    assert isinstance(res, Appended)
    n = len(res.entries)
    state = "created" if res.created else "updated"
    print(f"{res.path}: {state}, {n} {noun}{'' if n == 1 else 's'} appended")
    for e in res.entries:
        sel = e.get("select", e)
        code = ", ".join(sel["reason_code"]) if isinstance(sel["reason_code"], list) \
            else sel["reason_code"]
        fixture = ", ".join(sel["fixture"]) if isinstance(sel["fixture"], list) \
            else sel["fixture"]
        surface = ", ".join(sel["surface"]) if isinstance(sel["surface"], list) \
            else sel["surface"]
        until = e.get("expires") or e.get("review_by")
        word = "expires" if "expires" in e else "review by"
        covers = res.covers.get(str(e["id"]), ())
        print(f"{e['id']}  {code}  fixture {fixture}  surface {surface}  {word} {until}"
              f"  covers {len(covers)} of the report: {', '.join(covers) or '-'}")
    for note in res.notes:
        print(f"note: {note}")
    print(f"next: {rerun}")


def cmd_waive(args: argparse.Namespace) -> int:
    from shadow.triage import waive

    res = waive(args.ids, owner=args.owner, reason=args.reason, expires=args.expires,
                report=args.report, waivers=args.waivers)
    _print_appended(res, "waiver", f"shadow run --waivers {res.path} (review the entry first)")
    return 0


def cmd_intend(args: argparse.Namespace) -> int:
    from shadow.intended import DEFAULT_PATH
    from shadow.triage import intend

    res = intend(args.ids, owner=args.owner, design=args.design, rationale=args.rationale,
                 review_by=args.review_by, report=args.report, intended=args.intended)
    bundled = res.path.resolve() == DEFAULT_PATH.resolve()
    rerun = "shadow run" if bundled else f"shadow run --intended {res.path}"
    _print_appended(res, "rule", f"{rerun} (review the rule first)")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    e = sub.add_parser(
        "explain", help="a divergence's case (or a fixture's cases): baseline and candidate "
        "side by side, from a replay of that fixture",
        description="Replay one fixture and show, per case, every item on the baseline and "
        "the candidate side (kept, dropped or derived, digest prefix), the divergent ones "
        "marked, and the case's divergences from the report. No content is ever shown. "
        "Exit 0, or 2 for an unknown id, fixture or surface.")
    e.add_argument("target", metavar="ID|FIXTURE",
                   help="a divergence id of the report (d-…, or a legacy defect ld-…) or a "
                        "fixture name")
    e.add_argument("surface", nargs="?", default=None, metavar="SURFACE",
                   help="with a FIXTURE: only this case (a capture such as cli.compress, or "
                        "a twin a~b)")
    e.add_argument("--report", default="reports/latest", metavar="DIR|REPORT_JSON",
                   help=_REPORT_HELP)
    e.add_argument("--fixtures", default="fixtures", metavar="DIR",
                   help="the fixture folder the run replayed (default: fixtures)")
    e.add_argument("--recordings", default=None, metavar="DIR",
                   help="recorded provider exchanges (default: recordings/ when it exists)")
    e.add_argument("--no-recordings", action="store_true",
                   help="replay provider answers from the captures, not recordings/")
    e.add_argument("--candidate", default="kernel", metavar="kernel|DIR",
                   help="the candidate the run judged: 'kernel' (default) or a recorded "
                        "candidate DIR")
    e.add_argument("--html", default=None, metavar="FILE",
                   help="also write the cases as one self-contained HTML file (escaped, no "
                        "script, no external reference)")
    e.set_defaults(func=cmd_explain)

    w = sub.add_parser(
        "waive", help="append a reviewed waiver per divergence id to a waiver file",
        description="Append one waiver per divergence id (its reason code, fixture and "
        "surface, no globs; the next free W-NNN) to a shadow-waivers/v1 file, creating it "
        "if absent. Refused with exit 2, writing nothing: ids not in the report, legacy "
        "defects, never-waivable divergences (fixture.invalid, a NO-GO class, a "
        "candidate's secret.leaked), an expiry not after today, an empty owner or reason.")
    w.add_argument("ids", nargs="+", metavar="ID", help="divergence ids of the report (d-…)")
    w.add_argument("--owner", required=True, metavar="O",
                   help="the team or person who owns the waiver")
    w.add_argument("--reason", required=True, metavar="R",
                   help="why the divergence is accepted for now (one line)")
    w.add_argument("--expires", required=True, metavar="YYYY-MM-DD",
                   help="the date the waiver stops applying (after today, UTC)")
    w.add_argument("--report", default="reports/latest", metavar="DIR|REPORT_JSON",
                   help=_REPORT_HELP)
    w.add_argument("--waivers", default="waivers.json", metavar="FILE",
                   help="the waiver file to append to (default: waivers.json in the current "
                        "folder; created if absent)")
    w.set_defaults(func=cmd_waive)

    i = sub.add_parser(
        "intend", help="append a reviewed intended-difference rule per divergence id",
        description="Append one intended-difference rule per divergence id (its reason "
        "code, fixture, surface and categorical detail values; the next free ID-NNN). "
        "Refused with exit 2, writing nothing: ids not in the report, and what a rule may "
        "never cover — a NO-GO class, secret.leaked, fixture.invalid, "
        "candidate.unavailable, a gate reason, a blocking divergence, or one attributed "
        "to anything but none (the candidate, the baseline, a twin, another rule).")
    i.add_argument("ids", nargs="+", metavar="ID", help="divergence ids of the report (d-…)")
    i.add_argument("--owner", required=True, metavar="O",
                   help="the team or person who owns the rule")
    i.add_argument("--design", required=True, metavar="CLAUSE",
                   help="the design clause that makes the kernel right, e.g. '108 §7'")
    i.add_argument("--rationale", required=True, metavar="R",
                   help="why the kernel's choice is the design's (one line)")
    i.add_argument("--review-by", required=True, metavar="YYYY-MM-DD",
                   help="the date the rule is due for review (today or later, UTC)")
    i.add_argument("--report", default="reports/latest", metavar="DIR|REPORT_JSON",
                   help=_REPORT_HELP)
    i.add_argument("--intended", default=None, metavar="FILE",
                   help="the rules file to append to (default: the bundled "
                        "shadow/policy/intended-differences.v1.json; created if absent)")
    i.set_defaults(func=cmd_intend)
