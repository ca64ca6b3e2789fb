"""Candidates that misbehave on purpose, for the executor fault tests.

They live in an importable module (not in a test function) because a spawn-started worker
process or a Dask worker unpickles them by name.  Each wraps the kernel candidate and
misbehaves on the fixtures whose name is in ``victims`` only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shadow.candidate import make_candidate


@dataclass(frozen=True)
class Misbehaving:
    victims: frozenset[str]
    how: str  # "exit" (the worker process dies) | "hang"
    recordings: str | None = None

    @property
    def identity(self) -> Mapping[str, Any]:
        return make_candidate("kernel", self.recordings).identity

    def project(self, canon: Any, capture: Any, siblings: Mapping[str, Any]) -> Any:
        if capture.file.split("/", 1)[0] in self.victims:
            if self.how == "exit":
                os._exit(3)
            time.sleep(3600)
        return make_candidate("kernel", self.recordings).project(canon, capture, siblings)


#: calls per (fixture, capture) in this process: the state a non-deterministic candidate keeps
_CALLS: dict[tuple[str, str], int] = {}


@dataclass(frozen=True)
class SecondTimeDifferent:
    """Projects ``victims`` normally once, then fails on them: a non-deterministic candidate
    the determinism rerun must catch (serial executor: one process, one counter)."""

    victims: frozenset[str]

    @property
    def identity(self) -> Mapping[str, Any]:
        return make_candidate("kernel", None).identity

    def project(self, canon: Any, capture: Any, siblings: Mapping[str, Any]) -> Any:
        key = (capture.file.split("/", 1)[0], capture.file)
        if key[0] in self.victims:
            _CALLS[key] = _CALLS.get(key, 0) + 1
            if _CALLS[key] > 1:
                raise RuntimeError("a different answer the second time")
        return make_candidate("kernel", None).project(canon, capture, siblings)
