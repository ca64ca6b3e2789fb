"""``shadow capture`` argument wiring (exit 0 all captured, 1 a capture failed, 2 usage)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shadow.capture.noise import Learned
from shadow.capture.runner import CaptureError, CaptureOptions, capture, main_progress

__all__ = ["add_parser", "cmd_capture"]


def cmd_capture(args: argparse.Namespace) -> int:
    if args.repeat < 1 or args.timeout <= 0:
        print("shadow capture: error: --repeat needs N >= 1 and --timeout S > 0")
        return 2
    opts = CaptureOptions(
        legacy_root=Path(args.legacy_root), inputs=Path(args.inputs), out=Path(args.out),
        only=tuple(args.only or ()), jetbrains_classpath=args.jetbrains_classpath,
        repeat=args.repeat, timeout_s=args.timeout, node=args.node, java=args.java,
        javac=args.javac, legacy_commit=args.legacy_commit,
        noise_rules=Path(args.noise_rules) if args.noise_rules else None,
        keep_repeats=Path(args.keep_repeats) if args.keep_repeats else None)
    try:
        result = capture(opts, progress=main_progress)
    except CaptureError as exc:
        print(f"shadow capture: error: {exc}", file=sys.stderr)
        return 2
    written = sum(1 for o in result.outcomes if o.status != "capture-error")
    n = len(result.manifest["scenarios"])
    print(f"captured: {written} {_plural(written, 'file')} for {n} "
          f"{_plural(n, 'scenario')} under {opts.out}")
    for learned, merged in result.noise:
        print(f"noise rules: {len(learned.fields)} volatile fields; new (unreviewed): "
              f"{', '.join(merged.added) or 'none'}; confirmed: {len(merged.confirmed)} "
              f"(evidence now from this run's {_scenarios_of(learned)} scenarios); "
              f"unconfirmed (kept): {', '.join(merged.unconfirmed) or 'none'}; "
              f"problems: {len(learned.problems)}")
        for p in learned.problems:
            print(f"noise problem: {p.scenario}/{p.file}: {p.what}")
    for o in result.capture_errors:
        print(f"capture failed: {o.scenario}/{o.file}: {o.error.get('reason')}")
    return 1 if result.capture_errors else 0


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


def _scenarios_of(learned: Learned) -> int:
    return len({s for f in learned.fields for s in f.scenarios})


DESCRIPTION = (
    "Run the legacy entry points of your own checkout of the legacy monorepo on a folder "
    "of scenario inputs (one Node.js 20 / Java 17 subprocess per capture file, a sandboxed "
    "home, a deterministic clock and ids, no network) and write legacy-capture/v1 files and "
    "MANIFEST.json into --out, swapped in only when complete (--out: a fresh folder or an "
    "earlier capture's, never --inputs). Exit codes: 0 every file captured; 1 a capture "
    "failed (timeout, network attempt, harness error: listed in MANIFEST.json "
    "capture_errors, the scenario quarantined by shadow run); 2 usage (an entry point "
    "missing from the checkout, a bad --jetbrains-classpath, a broken input.json). "
    "See docs/user-guide.md, 'Capture from your legacy checkout'.")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    c = sub.add_parser("capture", help="run the legacy entry points of a checkout on inputs",
                       description=DESCRIPTION)
    c.add_argument("--legacy-root", required=True, metavar="DIR",
                   help="a checkout of the legacy monorepo (its JavaScript runs as it is)")
    c.add_argument("--inputs", required=True, metavar="DIR",
                   help="scenario folders holding input.json (e.g. fixtures)")
    c.add_argument("--out", required=True, metavar="DIR", help="where the captures go")
    c.add_argument("--only", nargs="+", metavar="SCENARIO", help="only these scenarios")
    c.add_argument("--jetbrains-classpath", default=None, metavar="CP",
                   help="the JetBrains plugin's classes (built by you), for ContextCenter")
    c.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="capture N times with other clocks and seeds and learn the noise "
                        "(default: 1)")
    c.add_argument("--noise-rules", default=None, metavar="FILE",
                   help="with --repeat (required then): the reviewed noise rules to merge "
                        "learned fields into, e.g. shadow/policy/noise.v1.json")
    c.add_argument("--keep-repeats", default=None, metavar="DIR",
                   help="with --repeat: keep the control runs in DIR/repeat-<k>/ "
                        "(default: temporary, removed once learned from)")
    c.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="seconds per capture before it is killed (default: 120)")
    c.add_argument("--legacy-commit", default=None, metavar="SHA",
                   help="the checkout's commit when it is not a git checkout")
    c.add_argument("--node", default="node", help="the Node.js 20 executable (default: node)")
    c.add_argument("--java", default="java", help="the Java 17 executable (default: java)")
    c.add_argument("--javac", default="javac",
                   help="the Java 17 compiler, for our one harness class (default: javac)")
    c.set_defaults(func=cmd_capture)
