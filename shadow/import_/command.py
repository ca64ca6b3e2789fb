"""``shadow import-sessions``: argument wiring and printing only."""

from __future__ import annotations

import argparse
import sys

from shadow.import_.importer import import_sessions
from shadow.progress import TerminalProgress


def cmd_import_sessions(args: argparse.Namespace) -> int:
    result = import_sessions(args.paths, args.out, progress=TerminalProgress(title="import"))
    args._exit = result.exit_code
    for line in result.lines:
        print(line)
    sys.stdout.flush()
    return result.exit_code


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "import-sessions",
        help="turn CLI JSONL session stores into redacted fixtures (+ import-report.json)",
        description="Read CLI JSONL session stores (files, or folders searched for *.jsonl) "
                    "and write one redacted fixture per compact event into --out, with "
                    "MANIFEST.json and import-report.json. Exit codes: 0 everything "
                    "imported, 1 a session quarantined or a compact event skipped (the "
                    "rest is written), 2 usage or input error.")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="a session file (*.jsonl) or a folder of them (recursive)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="output folder: empty, or an earlier import's (holding "
                        "import-report.json); replaced only when complete")
    p.set_defaults(func=cmd_import_sessions)
