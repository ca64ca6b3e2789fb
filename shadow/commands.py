"""Sub-commands other than ``kernel``: argument wiring only."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def cmd_run(args: argparse.Namespace) -> int:
    from shadow.progress import TerminalProgress
    from shadow.run import default_recordings

    recordings = None if args.no_recordings else (args.recordings or default_recordings())
    bar = TerminalProgress()
    try:
        result = _execute_run(args, recordings, bar)
    finally:
        bar.close()
    args._exit = 0 if result.verdict == "GO" else 1  # a closed stdout still exits with it
    for line in result.lines:
        print(line)
    print(f"verdict: {result.verdict} (phase {result.report['phase']})")
    sys.stdout.flush()
    return 0 if result.verdict == "GO" else 1


def _execute_run(args: argparse.Namespace, recordings: str | None, bar: Any) -> Any:
    from shadow.run import RunOptions, execute

    return execute(RunOptions(
        fixtures=args.fixtures, out=args.out, recordings=recordings, phase=args.phase,
        surfaces=tuple(args.surface or ()), candidate=args.candidate,
        record_candidate=args.record_candidate, waivers=args.waivers,
        intended=args.intended, jobs=args.jobs, executor=args.executor,
        scheduler=args.scheduler, fixture_timeout=args.fixture_timeout,
        **({"noise": args.noise} if args.noise else {}),
        policy=args.policy, inventory=args.inventory, attach=tuple(args.attach or ()),
        previous=args.previous, determinism=not args.skip_determinism,
        progress=bar,
    ))


def cmd_codes(args: argparse.Namespace) -> int:
    from shadow import codes

    if args.json:
        print(json.dumps(codes.registry_json(), indent=1, ensure_ascii=False))
    else:
        for c in codes.codes():
            flag = "NO-GO" if c.nogo else "prot." if c.protection else ""
            print(f"{c.code:32s} {c.severity:8s} {flag:5s} {c.meaning}")
    return 0


def cmd_gate(args: argparse.Namespace) -> int:
    from shadow import gates

    result = gates.gate(args.evidence, args.phase, policy=args.policy,
                        platforms=args.platforms or (), release_matrix=args.release_matrix,
                        today=args.today)
    if args.out:
        gates.write(args.out, result)
    args._exit = 0 if result.verdict == "GO" else 1
    if args.json:
        print(json.dumps(result.to_wire(), sort_keys=True, indent=1, ensure_ascii=False))
    else:
        print(gates.render_text(result))
    return 0 if result.verdict == "GO" else 1


def cmd_report(args: argparse.Namespace) -> int:
    from shadow.reports import rerender

    verdict, paths = rerender(args.report, fmt=args.format, previous=args.previous,
                              out=args.out)
    args._exit = 0 if verdict == "GO" else 1
    for p in paths:
        print(f"report: {p}")
    print(f"verdict: {verdict}" + (" (no evidence.json beside the report: its verdict "
                                   "cannot be checked)" if verdict == "UNVERIFIED" else ""))
    return 0 if verdict == "GO" else 1


def cmd_diff(args: argparse.Namespace) -> int:
    from shadow.reports import diff_files

    text, regressions = diff_files(args.old, args.new, fmt=args.format)
    args._exit = 1 if regressions else 0
    print(text)
    sys.stdout.flush()
    return 1 if regressions else 0


def cmd_synth(args: argparse.Namespace) -> int:
    from shadow.synth import synth

    result = synth(args.sessions, args.seed, args.out, templates=args.templates)
    print(f"synthetic: {result.sessions} sessions ({result.files} files, "
          f"{len(result.templates)} templates) under {result.out}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    r = sub.add_parser("run", help="shadow run over the bundled fixtures; writes reports")
    r.add_argument("--fixtures", default="fixtures",
                   help="the corpus: a fixture folder (legacy-capture/v1 layout), a .tar, "
                        ".tar.gz or .zip of one, or a shadow-corpus-shards/v1 listing "
                        "(default: fixtures)")
    r.add_argument("--recordings", default=None, metavar="DIR",
                   help="recorded provider exchanges (vcrpy cassettes; default: recordings/ "
                        "when it exists)")
    r.add_argument("--no-recordings", action="store_true",
                   help="replay provider answers from the captures, not recordings/")
    r.add_argument("--out", default="reports/latest", metavar="DIR",
                   help="run folder for report.json, evidence.json, report.md, report.html, "
                        "junit.xml (default: reports/latest); replaced only when complete")
    r.add_argument("--phase", type=int, default=1, choices=range(0, 6), metavar="N",
                   help="the cutover phase 0..5 the verdict and exit code are for "
                        "(default: 1); the report shows every phase")
    r.add_argument("--surface", action="append", metavar="S",
                   help="only these captures/surfaces (glob; repeatable)")
    r.add_argument("--candidate", default="kernel", help="'kernel' or a recorded candidate DIR")
    r.add_argument("--record-candidate", default=None, metavar="DIR",
                   help="also write the candidate's projections to DIR")
    r.add_argument("--waivers", default=None, metavar="FILE",
                   help="reviewed waivers (shadow-waivers/v1, docs/waivers.md)")
    r.add_argument("--intended", default=None, metavar="FILE",
                   help="intended-difference rules (default: the bundled "
                        "shadow/policy/intended-differences.v1.json)")
    r.add_argument("--noise", default=None, metavar="FILE",
                   help="reviewed noise rules (shadow-noise-rules/v1, docs/noise.md; default: "
                        "the bundled shadow/policy/noise.v1.json)")
    r.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="workers for the replay (default: 1; at least 1): processes of "
                        "--executor process, LocalCluster workers of --executor dask")
    r.add_argument("--executor", choices=("serial", "process", "dask"), default=None,
                   help="where the map runs (default: serial, or process when --jobs > 1); "
                        "dask needs the [scale] extra (docs/scale.md)")
    r.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="a running Dask scheduler (tls://host:port, or tcp:// on loopback) "
                        "for --executor dask; its workers, not --jobs, size the run "
                        "(default: a LocalCluster of --jobs workers)")
    r.add_argument("--fixture-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="with --executor process or dask: a fixture still replaying after "
                        "this is replay.crashed (default: 600)")
    r.add_argument("--policy", default=None, metavar="FILE",
                   help="gate policy (default: shadow/policy/gate-policy.v1.json)")
    r.add_argument("--inventory", default=None, metavar="FILE",
                   help="writer inventory (default: the policy's inventory.default)")
    r.add_argument("--attach", action="append", metavar="JUNIT_XML",
                   help="record another test run's JUnit XML in evidence.json (repeatable)")
    r.add_argument("--previous", default=None, metavar="REPORT_JSON",
                   help="an older report.json: trend in report.md / report.html")
    r.add_argument("--skip-determinism", action="store_true",
                   help="do not replay a second time to check determinism")
    r.set_defaults(func=cmd_run)
    g = sub.add_parser("gate", help="judge evidence.json files for a cutover phase")
    g.add_argument("evidence", nargs="+", metavar="EVIDENCE",
                   help="evidence.json files, or folders holding them")
    g.add_argument("--phase", type=int, required=True, choices=range(0, 6), metavar="N",
                   help="the cutover phase 0..5 to judge (with every phase it inherits)")
    g.add_argument("--policy", default=None, metavar="FILE",
                   help="gate policy (default: shadow/policy/gate-policy.v1.json)")
    g.add_argument("--platforms", action="append", metavar="P[,P]",
                   help="required platforms (default: the policy's; linux,windows,macos)")
    g.add_argument("--release-matrix", default=None, metavar="FILE",
                   help="take required platforms from a release/required-evidence.v1.json")
    g.add_argument("--today", default=None, metavar="YYYY-MM-DD",
                   help="gate date for waiver expiry (default: today, UTC)")
    g.add_argument("--out", default=None, metavar="DIR", help="write gate.json and gate.md")
    g.add_argument("--json", action="store_true", help="print gate.json instead of text")
    g.set_defaults(func=cmd_gate)
    rp = sub.add_parser("report", help="re-render report formats from a report.json")
    rp.add_argument("report", metavar="REPORT_JSON", help="a report.json or its run folder")
    rp.add_argument("--format", default="all", choices=("md", "html", "junit", "json", "all"),
                    help="which format to write (default: all)")
    rp.add_argument("--previous", default=None, metavar="OLD_REPORT_JSON",
                    help="an older report.json: the trend section")
    rp.add_argument("--out", default=None, metavar="DIR",
                    help="output folder (default: the report's folder)")
    rp.set_defaults(func=cmd_report)
    d = sub.add_parser("diff", help="new, fixed and changed divergences between two reports")
    d.add_argument("old", metavar="OLD", help="the older report.json (or its run folder)")
    d.add_argument("new", metavar="NEW", help="the newer report.json (or its run folder)")
    d.add_argument("--format", default="text", choices=("text", "md", "json"),
                   help="output format (default: text)")
    d.set_defaults(func=cmd_diff)
    c = sub.add_parser("codes", help="print the reason-code registry")
    c.add_argument("--json", action="store_true", help="the registry as JSON")
    c.set_defaults(func=cmd_codes)
    from shadow.capture import command as capture_command  # capture (issue 15)

    capture_command.add_parser(sub)
    from shadow import triage_cli  # explain / waive / intend (triage, issue 13)

    triage_cli.add_commands(sub)
    from shadow import legacy_tools  # inventory / fence-check over a legacy checkout

    legacy_tools.add_commands(sub)
    sy = sub.add_parser(
        "synth", help="write a synthetic corpus for scale tests (never release evidence)",
        description="Write N synthetic sessions built from the bundled captures (seeded, "
        "text permuted, legacy behaviour kept; every input.json says synthetic: true) in the "
        "fixture layout, plus SYNTHETIC.json; shadow run replays it, the gate refuses it as "
        "evidence. --out is swapped in complete (a new or empty folder, or an earlier "
        "synthetic corpus). Exit codes: 0 written, 2 usage. See docs/scale.md.")
    sy.add_argument("--sessions", type=int, required=True, metavar="N",
                    help="number of sessions (at least 1)")
    sy.add_argument("--seed", type=int, required=True, metavar="S",
                    help="seed (an integer >= 0): the same N and S write identical bytes")
    sy.add_argument("--out", required=True, metavar="DIR", help="the corpus folder")
    sy.add_argument("--templates", default="fixtures", metavar="DIR",
                    help="the bundled captures the sessions are built from "
                         "(default: fixtures)")
    sy.set_defaults(func=cmd_synth)
