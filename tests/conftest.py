"""Shared test plumbing.

Peer vectors: tests marked ``peer`` read the directory named by the environment
variable ``PEER_VECTORS_DIR`` (default ``tests/vectors/peer``) and *fail* —
never skip — when a file they need is missing, so the same tests run unchanged
on any other vector set of the same format.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def peer_vectors_dir() -> Path:
    raw = os.environ.get("PEER_VECTORS_DIR")
    return Path(raw) if raw else ROOT / "tests" / "vectors" / "peer"


@functools.cache
def _load(path_str: str) -> Any:
    with open(path_str, encoding="utf-8") as fh:
        return json.load(fh)


def load_peer_vectors(name: str) -> Any:
    """Load a peer vector file; a missing file is a test *failure*."""
    path = peer_vectors_dir() / name
    if not path.is_file():
        pytest.fail(
            f"peer vector file {name!r} is missing from {peer_vectors_dir()} "
            "(set PEER_VECTORS_DIR to a complete vector set)",
            pytrace=False,
        )
    return _load(str(path))


def peer_cases(name: str) -> list[Any]:
    """Cases for parametrisation at collection time.

    A missing file yields one sentinel case so the test runs and fails
    (``load_peer_vectors`` again) instead of being silently skipped.
    """
    path = peer_vectors_dir() / name
    if not path.is_file():
        return [pytest.param(None, id=f"{name}-MISSING")]
    doc = _load(str(path))
    cases = doc["cases"] if isinstance(doc, dict) and "cases" in doc else doc
    return [pytest.param(c, id=str(c.get("id", i))) for i, c in enumerate(cases)]


def require_case(case: Any, name: str) -> Any:
    if case is None:
        load_peer_vectors(name)  # fails with a clear message
    return case
