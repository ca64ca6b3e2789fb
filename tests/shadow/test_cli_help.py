"""Every sub-command and every option of ``shadow`` has help text, and ``--version`` works."""

from __future__ import annotations

import argparse

import pytest

from shadow import __version__
from shadow.cli import build_parser, main


def _parsers(parser: argparse.ArgumentParser, path: str = "shadow"
             ) -> list[tuple[str, argparse.ArgumentParser]]:
    out = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _parsers(sub, f"{path} {name}")
    return out


def test_every_option_and_command_has_help() -> None:
    missing = []
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    if not (choice.help or "").strip():
                        missing.append(f"{path} {choice.dest}")
            elif not (action.help or "").strip() and action.help != argparse.SUPPRESS:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"shadow (context-kernel-parity) {__version__}"
    assert main(["--version"]) == 0
