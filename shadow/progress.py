"""A one-line progress bar on stderr for long runs; silent when stderr is not a terminal.

The replay core only calls ``progress(done, total, label)``; drawing is this module's
business.  Updates are throttled (at most ~10 per second) and the line is cleared when
the map finishes, so logs and pipes never see control characters.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class TerminalProgress:
    def __init__(self, stream: TextIO | None = None, *, title: str = "replay",
                 width: int = 28, interval: float = 0.1, force: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = force or bool(isatty and isatty())
        self.title, self.width, self.interval = title, width, interval
        self._last = 0.0

    def __call__(self, done: int, total: int, label: str) -> None:
        if not self.enabled or total <= 0:
            return
        now = time.monotonic()
        if done < total and now - self._last < self.interval:
            return
        self._last = now
        filled = self.width * done // total
        bar = "#" * filled + "-" * (self.width - filled)
        text = f"\r{self.title} [{bar}] {done}/{total} {label[:40]:<40}"
        self.stream.write(text)
        if done >= total:
            self.stream.write("\r" + " " * (len(text) - 1) + "\r")
        self.stream.flush()
