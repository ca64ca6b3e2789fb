"""Sub-commands other than ``kernel``: argument wiring only."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_run(args: argparse.Namespace) -> int:
    from shadow.selfcheck import run_selfcheck

    verdict, lines = run_selfcheck(Path(args.out))
    for line in lines:
        print(line)
    print(f"verdict: {verdict}")
    sys.stdout.flush()
    return 0 if verdict == "GO" else 1


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    r = sub.add_parser("run", help="shadow run over the bundled fixtures; writes reports")
    r.add_argument("--fixtures", default="fixtures")
    r.add_argument("--out", default="reports/latest")
    r.set_defaults(func=cmd_run)
