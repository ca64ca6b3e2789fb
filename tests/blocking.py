"""Test support: run a call that must not block (a FIFO probe) under a deadline."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def within(seconds: float, fn: Callable[[], Any], *fifos: Path) -> Any:
    """``fn()``'s result (or its exception, re-raised) if it returns within ``seconds``;
    otherwise the test fails — after unblocking a reader stuck on one of ``fifos``."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # re-raised on the test's thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        for fifo in fifos:  # a writer end releases a reader blocked in open()
            with contextlib.suppress(OSError):  # nobody reads this one
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(seconds)
        pytest.fail(f"the call blocked for more than {seconds} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
