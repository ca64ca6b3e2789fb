"""Command-line entry point: parse, call one function, print.  No logic here."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from shadow import kernel_rpc
from shadow.boundary import loads
from shadow.errors import InputError, ShadowError

EXIT_GO, EXIT_NOGO, EXIT_USAGE = 0, 1, 2


def _stdin_bytes() -> bytes:
    return sys.stdin.buffer.read()


def _write(text: str) -> None:
    sys.stdout.buffer.write(text.encode("utf-8") + b"\n")
    sys.stdout.flush()


def cmd_kernel_call(args: argparse.Namespace) -> int:
    try:
        params = loads(_stdin_bytes(), "<stdin>")
    except InputError as exc:
        _write(kernel_rpc.dumps({"error": exc.to_wire()}))
        return EXIT_USAGE
    out = kernel_rpc.call(args.method, params)
    _write(kernel_rpc.dumps(out.get("result", out)))
    return EXIT_USAGE if "error" in out else EXIT_GO


def cmd_kernel_batch(args: argparse.Namespace) -> int:
    text = _stdin_bytes().decode("utf-8", errors="replace")
    for line in kernel_rpc.batch(text.splitlines()):
        _write(line)
    return EXIT_GO


def cmd_app_server(args: argparse.Namespace) -> int:
    from shadow.app_server.server import main as serve

    provider = None
    if (args.provider_url or args.provider_model or args.provider_key_env
            or args.provider_timeout is not None):
        if not (args.provider_url and args.provider_model):
            print("shadow app-server: the --provider-* options need --provider-url and "
                  "--provider-model", file=sys.stderr)
            return 2
        provider = {"url": args.provider_url, "model": args.provider_model,
                    "key_env": args.provider_key_env,
                    "timeout": 60.0 if args.provider_timeout is None else args.provider_timeout}
    return serve(args.sessions, args.memory, args.config, args.session_store, provider)


def _silence_stdout() -> None:
    """After EPIPE, point stdout at devnull so the interpreter's final flush stays quiet."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def build_parser() -> argparse.ArgumentParser:
    from shadow import __version__

    parser = argparse.ArgumentParser(
        prog="shadow", description="context-kernel-parity: shadow evaluation of the "
        "design 108 Context/Memory Kernel against the legacy surfaces. "
        "Exit codes: 0 GO, 1 NO-GO, 2 usage or input error.")
    parser.add_argument("--version", action="version",
                        version=f"shadow (context-kernel-parity) {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    k = sub.add_parser("kernel", help="drive the kernel with JSON (language-agnostic entry)")
    ksub = k.add_subparsers(dest="kernel_command", required=True)
    kc = ksub.add_parser("call", help="one JSON request on stdin -> one JSON result on stdout")
    kc.add_argument("method", help="a kernel method (see docs/kernel-rpc.md)")
    kc.set_defaults(func=cmd_kernel_call)
    kb = ksub.add_parser("batch", help='JSON Lines {"id","method","params"} on stdin')
    kb.set_defaults(func=cmd_kernel_batch)
    a = sub.add_parser("app-server", help="the kernel behind JSON-RPC 2.0 over stdio, one "
                       "JSON object per line (docs/app-server.md)")
    a.add_argument("--sessions", metavar="PATH", help="the session store whose sessions "
                   "are the threads (thread/*): a JSONL folder, or with --session-store "
                   "sqlite a SQLite file; without it thread methods answer -32000")
    a.add_argument("--session-store", choices=("jsonl", "sqlite"), default="jsonl",
                   help="the kind of --sessions (default: jsonl)")
    a.add_argument("--memory", metavar="DIR", help="the memory store folder the four memory "
                   "tools read (memory/list, read, search, addNote); without it they answer "
                   "-32000")
    a.add_argument("--config", metavar="FILE", help="the app configuration file whose "
                   "memory.soul the soul/* methods read and write (never the memory folder)")
    a.add_argument("--provider-url", metavar="URL", help="an OpenAI-compatible API base "
                   "(e.g. https://api.openai.com/v1): compaction turns summarize their "
                   "dropped items with it, and turn/interrupt cancels a call in flight; "
                   "without it compaction is deterministic (no summarizer)")
    a.add_argument("--provider-model", metavar="NAME", help="the model of --provider-url")
    a.add_argument("--provider-key-env", metavar="VAR", help="the environment variable "
                   "holding the API key (read from there only; none sent without it)")
    a.add_argument("--provider-timeout", metavar="SECONDS", type=float, default=None,
                   help="the connect, read-gap, write and pool timeouts of one provider call "
                   "(httpx's per-phase limits, not a total; default: 60)")
    a.set_defaults(func=cmd_app_server)

    from shadow import commands  # registers run / codes / gate / report / diff when present

    commands.add_commands(sub)
    from shadow.import_ import command as import_command  # import-sessions (issue 15)

    import_command.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse usage errors -> exit 2
        return int(exc.code or 0) and EXIT_USAGE
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # a closed pipe (`shadow diff … | head`): end quietly, with the verdict's exit code
        _silence_stdout()
        return int(getattr(args, "_exit", EXIT_GO))
    except InputError as exc:
        print(f"shadow: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ShadowError as exc:
        print(f"shadow: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("shadow: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # never a traceback to a user
        print(f"shadow: internal error ({type(exc).__name__}); rerun with SHADOW_DEBUG=1",
              file=sys.stderr)
        import os

        if os.environ.get("SHADOW_DEBUG"):
            raise
        return EXIT_USAGE
