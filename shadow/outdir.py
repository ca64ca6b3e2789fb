"""An output folder that is only ever seen complete: lock, stage, swap.

``shadow run --out DIR`` writes every file into a staging folder beside ``DIR``
(``.DIR.partial-*``) and swaps it into place only when the run is complete:

1. take ``.DIR.lock`` (:mod:`filelock`: an OS lock the kernel drops when the process dies,
   ``fcntl.flock`` on POSIX and ``msvcrt.locking`` on Windows, so a killed run never leaves
   a stale lock) — a second run into the same ``DIR`` is refused, never interleaved;
2. under the lock, put back a previous run a killed swap left aside and remove stale
   staging folders of killed runs;
3. write everything into the staging folder and ``fsync`` the files;
4. rename ``DIR`` aside (``.DIR.old-*``), rename the staging folder to ``DIR``, delete the
   old one.  Both renames are same-folder directory renames (atomic on POSIX and NTFS); a
   kill between them leaves no ``DIR`` and one ``.DIR.old-*``, which step 2 of the next
   run — or :func:`recover` — puts back.

So a reader of ``DIR`` sees the previous complete run, the new complete run, or (for the
instant between the two renames) nothing — never a mix of two runs.  ``DIR`` must be a
run folder: an existing non-empty folder without ``report.json`` is refused, so a typo
in ``--out`` never replaces someone's files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from filelock import FileLock, Timeout

from shadow.errors import InputError, UsageError

MARKER: Final = "report.json"  # a folder holding this is a run folder


def _siblings(out: Path, kind: str) -> list[Path]:
    if not out.parent.is_dir():
        return []
    prefix = f".{out.name}.{kind}-"
    return sorted(p for p in out.parent.iterdir() if p.name.startswith(prefix))


def recover(out: Path) -> None:
    """Put back a run a killed swap left aside; drop staging folders of killed runs.
    Call only while holding the lock."""
    old = _siblings(out, "old")
    if not out.exists() and old:
        os.replace(old[-1], out)
        old = old[:-1]
    for p in (*old, *_siblings(out, "partial")):
        shutil.rmtree(p, ignore_errors=True)


def ensure_dir(path: str | Path, what: str) -> Path:
    """``path`` as an existing writable folder (created with its parents), or an
    :class:`InputError` naming the argument: a file, or a place nothing can be written."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(p, "", f"{what}: a folder", "a file")
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = Path(tempfile.mkstemp(dir=p, prefix=".shadow-probe-")[1])
        probe.unlink()
    except OSError as exc:
        raise InputError(p, "", f"{what}: a writable folder",
                         f"not writable ({type(exc).__name__})") from None
    return p


def check_target(out: Path, marker: str = MARKER, what: str = "--out",
                 kind: str = "run") -> None:
    """``out`` may be replaced: absent, empty, or an earlier ``kind``'s folder (it holds
    ``marker``)."""
    if out.exists() and not out.is_dir():
        raise InputError(out, "", f"{what}: a folder for the {kind}'s files", "a file")
    if out.is_dir() and any(out.iterdir()) and not (out / marker).is_file():
        raise InputError(out, "", f"{what}: an empty folder or an earlier {kind}'s folder "
                         f"(holding {marker})", "a folder of other files (not replaced)")


def _fsync_tree(root: Path) -> None:
    for p in sorted(root.rglob("*")):
        if p.is_file():
            with p.open("rb") as fh:
                os.fsync(fh.fileno())
    if os.name == "posix":  # a directory cannot be opened for fsync on Windows
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class Staged:
    """The staging folder of one run; :meth:`commit` swaps it into place."""

    def __init__(self, out: Path, stage: Path) -> None:
        self.out, self.path = out, stage

    def commit(self) -> Path:
        _fsync_tree(self.path)
        aside = None
        if self.out.exists():
            aside = Path(tempfile.mkdtemp(dir=self.out.parent, prefix=f".{self.out.name}.old-"))
            aside.rmdir()
            os.replace(self.out, aside)
        os.replace(self.path, self.out)
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
        return self.out


@contextlib.contextmanager
def staged(out: str | Path, marker: str = MARKER, what: str = "--out",
           kind: str = "run") -> Iterator[Staged]:
    """Lock ``out``, yield a fresh staging folder; remove it if the run does not commit.

    A symlinked ``out`` is resolved first, so two runs through two links to one folder
    take one lock and the link keeps pointing at the run."""
    target = Path(out)
    if target.is_symlink() or any(p.is_symlink() for p in target.parents):
        target = target.resolve()
    check_target(target, marker, what, kind)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(target.parent / f".{target.name}.lock"), timeout=0)
    except OSError as exc:
        raise InputError(target, "", f"{what}: a writable folder",
                         f"not writable ({type(exc).__name__})") from None
    try:
        lock.acquire()
    except Timeout:
        raise UsageError(f"{what} {target.as_posix()}: another shadow {kind} is writing into "
                         f"this folder (lock held); wait for it or choose another {what}"
                         ) from None
    except OSError as exc:
        raise InputError(target, "", f"{what}: a writable folder",
                         f"not writable ({type(exc).__name__})") from None
    try:
        recover(target)
        check_target(target, marker, what, kind)
        try:
            stage = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.partial-"))
        except OSError as exc:
            raise InputError(target, "", f"{what}: a writable folder",
                             f"not writable ({type(exc).__name__})") from None
        run = Staged(target, stage)
        try:
            yield run
        finally:
            if stage.exists():
                shutil.rmtree(stage, ignore_errors=True)
    finally:
        lock.release()
