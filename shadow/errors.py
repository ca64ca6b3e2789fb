"""Shell error tree.  Whose fault each one is, in its name::

    ShadowError
     ├── InputError        bad input file / request: names file, JSON pointer, expectation
     │    └── FixtureError a capture or fixture that fails validation (quarantined in runs)
     ├── UsageError        bad command-line usage
     └── SideEffectError   a replay tried to reach something not recorded (shadow.side_effect)

Nothing here ever carries a message body or a secret: only paths, pointers,
type names, lengths and digests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class ShadowError(Exception):
    """Base of every error the shell reports to a user."""

    code = "shadow_error"


class InputError(ShadowError):
    """Input that does not match its contract."""

    code = "invalid_input"

    def __init__(self, source: str | Path, pointer: str, expected: str, got: str = "") -> None:
        self.source = str(source)
        self.pointer = pointer
        self.expected = expected
        self.got = got
        where = f"{self.source}: {pointer or '/'}"
        text = f"{where}: expected {expected}"
        if got:
            text += f", got {got}"
        super().__init__(text)

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str, str, str]]:
        # picklable across a process pool (the default pickles only ``args``)
        return self.__class__, (self.source, self.pointer, self.expected, self.got)

    def to_wire(self) -> dict[str, object]:
        return {
            "code": self.code,
            "message": str(self),
            "details": {
                "file": self.source,
                "pointer": self.pointer,
                "expected": self.expected,
                "got": self.got,
            },
        }


class FixtureError(InputError):
    code = "fixture.invalid"


class UsageError(ShadowError):
    code = "usage"


class SideEffectError(ShadowError):
    code = "shadow.side_effect"


def describe(value: Any) -> str:
    """A JSON value by type and size only: what an error may say about an input (never its
    text, which may be a message body or a secret)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
