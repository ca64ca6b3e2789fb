"""Shared file plumbing of the filesystem adapters: reading a file without blocking.

``open()`` of a FIFO for reading blocks until a writer comes, and of a device may act on
the device; a store's path that is not a regular file is therefore refused before it is
opened, and again on the descriptor of a non-blocking open (a FIFO swapped in between
cannot block either).
"""

from __future__ import annotations

import os
import stat
from typing import Final

_READ_FLAGS: Final = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def read_regular(path: str | os.PathLike[str]) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (links followed); ``None`` for a FIFO,
    socket, device or directory.  ``FileNotFoundError`` / ``OSError`` as the OS says."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        return None
    fd = os.open(path, _READ_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        chunks = []  # one read of the whole file, then the end (a growing file: more)
        while chunk := os.read(fd, max(info.st_size, 1 << 16)):
            chunks.append(chunk)
        return b"".join(chunks)  # one chunk: that very object, not a copy
    finally:
        os.close(fd)
