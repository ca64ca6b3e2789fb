"""Progress of long runs on stderr: a bar on a terminal, periodic plain lines otherwise.

The replay core only calls ``progress(done, total, label)``; drawing is this module's
business, and it never writes to stdout (the report lines and the verdict stay clean).

* On a terminal: a `rich <https://rich.readthedocs.io>`_ bar with the rate and the ETA
  when ``rich`` is installed (the ``[scale]`` extra), else a one-line bar of our own with
  the same figures.  Updates are throttled (~10 per second) and the line is cleared when
  the map finishes, so nothing is left behind.
* Anywhere else (CI logs, pipes): one plain line every ``every`` seconds —
  ``replay: 41000/100000 (41%), 212.3/s, ETA 4m38s`` — so a run shorter than that prints
  nothing, and no control character reaches a log.  Labels (fixture names) are shown on a
  terminal only.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from typing import Any, TextIO


def _eta(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class TerminalProgress:
    def __init__(self, stream: TextIO | None = None, *, title: str = "replay",
                 width: int = 28, interval: float = 0.1, every: float = 30.0,
                 force: bool = False, rich: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.tty = force or bool(isatty and isatty())
        self.title, self.width, self.interval, self.every = title, width, interval, every
        self.rich = (self.tty and stream is None
                     and importlib.util.find_spec("rich") is not None) if rich is None \
            else rich
        self._start: float | None = None
        self._last = 0.0
        self._bar: Any = None

    def _figures(self, done: int, total: int, now: float) -> str:
        assert self._start is not None
        took = max(now - self._start, 1e-9)
        rate = done / took
        eta = _eta((total - done) / rate) if rate > 0 and done < total else "0m00s"
        return f"{done}/{total} ({100 * done // total}%), {rate:.1f}/s, ETA {eta}"

    def __call__(self, done: int, total: int, label: str) -> None:
        if total <= 0:
            return
        now = time.monotonic()
        if self._start is None or done <= 1:
            self._start, self._last = now, now
        if not self.tty:
            if done >= total or now - self._last < self.every:
                return
            self._last = now
            self.stream.write(f"{self.title}: {self._figures(done, total, now)}\n")
            self.stream.flush()
            return
        if self.rich:
            self._draw_rich(done, total, label)
            return
        if done < total and now - self._last < self.interval:
            return
        self._last = now
        filled = self.width * done // total
        bar = "#" * filled + "-" * (self.width - filled)
        text = (f"\r{self.title} [{bar}] {self._figures(done, total, now)} "
                f"{label[:32]:<32}")
        self.stream.write(text)
        if done >= total:
            self.stream.write("\r" + " " * (len(text) - 1) + "\r")
        self.stream.flush()

    def close(self) -> None:
        """Take the bar down (a run that ended early, or never reached its total: names
        repeated across shards are not replayed)."""
        if self._bar is not None:
            self._bar[0].stop()
            self._bar = None
        elif self.tty and not self.rich and self._start is not None:
            self.stream.write("\r" + " " * (self.width + 110) + "\r")
            self.stream.flush()
        self._start = None

    def _draw_rich(self, done: int, total: int, label: str) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        if self._bar is None:
            bar = Progress(TextColumn("{task.description}"), BarColumn(),
                           MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                           TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                           TextColumn("{task.fields[label]}"),
                           console=Console(file=self.stream), transient=True)
            bar.start()
            self._bar = (bar, bar.add_task(self.title, total=total, rate="", label=""))
        bar, task = self._bar
        took = max(time.monotonic() - (self._start or 0.0), 1e-9)
        bar.update(task, completed=done, total=total, rate=f"{done / took:.1f}/s",
                   label=label[:32])
        if done >= total:
            bar.stop()
            self._bar = None
