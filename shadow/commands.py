"""Sub-commands other than ``kernel``: argument wiring only."""

from __future__ import annotations

import argparse
import json
import sys


def cmd_run(args: argparse.Namespace) -> int:
    from shadow.run import RunOptions, execute

    result = execute(RunOptions(
        fixtures=args.fixtures, out=args.out, recordings=args.recordings, phase=args.phase,
        surfaces=tuple(args.surface or ()), candidate=args.candidate,
        record_candidate=args.record_candidate, waivers=args.waivers, jobs=args.jobs,
    ))
    for line in result.lines:
        print(line)
    print(f"verdict: {result.verdict}")
    sys.stdout.flush()
    return 0 if result.verdict == "GO" else 1


def cmd_codes(args: argparse.Namespace) -> int:
    from shadow import codes

    if args.json:
        print(json.dumps(codes.registry_json(), indent=1, ensure_ascii=False))
    else:
        for c in codes.codes():
            print(f"{c.code:32s} {c.severity:8s} {'NO-GO' if c.nogo else '':5s} {c.meaning}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    r = sub.add_parser("run", help="shadow run over the bundled fixtures; writes reports")
    r.add_argument("--fixtures", default="fixtures",
                   help="fixture folder (legacy-capture/v1 layout)")
    r.add_argument("--recordings", default=None, help="recorded provider exchanges")
    r.add_argument("--out", default="reports/latest")
    r.add_argument("--phase", type=int, default=1, choices=range(0, 6), metavar="N")
    r.add_argument("--surface", action="append", metavar="S",
                   help="only these captures/surfaces (glob; repeatable)")
    r.add_argument("--candidate", default="kernel", help="'kernel' or a recorded candidate DIR")
    r.add_argument("--record-candidate", default=None, metavar="DIR",
                   help="also write the candidate's projections to DIR")
    r.add_argument("--waivers", default=None, metavar="FILE")
    r.add_argument("--jobs", type=int, default=1, help="worker processes for the map step")
    r.set_defaults(func=cmd_run)
    c = sub.add_parser("codes", help="print the reason-code registry")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_codes)
