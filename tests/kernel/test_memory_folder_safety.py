"""The memory store folder never writes outside itself, never blocks, never creates on read.

Issue 14 ("honest doubles, safe adapters"), probes against
:mod:`kernel.adapters.memory_folder.store`:

* **temp names** — a hard link or a symbolic link planted at the name an atomic replace
  used to stage under (``.tmp-<name>-<pid>``) must not make ``memory_search`` or
  ``consolidate`` write to a file outside the folder: temp files are created exclusively
  under a random name, and an existing path is never opened for writing by name;
* **final targets** — a link at ``memory_summary.md``, ``MEMORY.md``, the index file or the
  index directory is replaced or refused, never written through;
* **special files** — a FIFO, socket or device where a memory file is expected is refused
  (``path_rejected``, ``not_regular``) at once, never opened in a way that blocks;
* **read-only tools** — ``memory_list``, ``memory_read`` and ``summary_for_prompt`` create
  nothing (no folder, no area directory, no index); a search of a folder that does not
  exist creates nothing either.

Each test runs over the directory-fd walk (Linux, macOS) and over the by-path walk without
``O_NOFOLLOW`` (what Windows has), where the OS lets us create the links or FIFOs.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import kernel.adapters.memory_folder.paths as paths
import kernel.adapters.memory_folder.store as store
from kernel.adapters.memory_folder.paths import MemoryPathRejected
from kernel.adapters.memory_folder.store import MemoryFolder, MemoryNotFound
from tests.blocking import within

NOTES = "extensions/ad_hoc/notes"
SECRET = b"outside the memory folder: must never be truncated or overwritten\n"
TIMEOUT = 5.0


def _clock() -> datetime:
    return datetime(2026, 9, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture(params=["dir_fd", "by_path"])
def walk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``by_path``: no directory fds and no ``O_NOFOLLOW`` — the Windows code path."""
    if request.param == "dir_fd" and not paths.FD_WALK:
        pytest.skip("this platform has no directory-fd walk")
    if request.param == "by_path":
        monkeypatch.setattr(paths, "FD_WALK", False)
        monkeypatch.setattr(store, "FD_WALK", False)
        monkeypatch.setattr(paths, "_NOFOLLOW", 0)
    return str(request.param)


@pytest.fixture
def root(tmp_path: Path, walk: str) -> Path:
    root = tmp_path / "store"
    (root / "rollout_summaries").mkdir(parents=True)
    (root / NOTES).mkdir(parents=True)
    (root / "MEMORY.md").write_bytes(b"# Memory\n\n## Deploy\nUse canary deploys.\n")
    (root / "memory_summary.md").write_bytes(b"# Memory summary\n\n- Deploy\n")
    (root / "rollout_summaries" / "r.md").write_bytes(b"# Rollout\n\nrate_limit 200\n")
    return root


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_bytes(SECRET)
    return path


def _link(kind: str, target: Path, link: Path) -> None:
    try:
        if kind == "hardlink":
            os.link(target, link)
        else:
            os.symlink(target, link, target_is_directory=target.is_dir())
    except (OSError, NotImplementedError) as exc:  # Windows without the privilege
        pytest.skip(f"this OS refuses to create a {kind} here: {exc}")


def _mkfifo(path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform (POSIX only)")
    try:
        os.mkfifo(path)
    except OSError as exc:
        pytest.skip(f"this filesystem refuses a FIFO: {exc}")


def _tree(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root``: file bytes, or the kind of anything else."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        mode = path.lstat().st_mode
        key = path.relative_to(root).as_posix()
        out[key] = path.read_bytes() if stat.S_ISREG(mode) else stat.filemode(mode)[0]
    return out


def _temps(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob(".tmp-*"))


# --- probe 1: links at the temp names -------------------------------------------------------


def _predictable(root: Path) -> Iterator[Path]:
    """The names the folder staged its atomic replaces under before issue 14."""
    pid = os.getpid()
    (root / "index").mkdir(exist_ok=True)
    (root / "review").mkdir(exist_ok=True)
    yield root / "index" / f".tmp-lexical-v1.json-{pid}"
    yield root / f".tmp-memory_summary.md-{pid}"
    yield root / f".tmp-MEMORY.md-{pid}"
    yield root / "review" / f".tmp-leak.md.review.json-{pid}"


@pytest.mark.parametrize("kind", ["hardlink", "symlink"])
def test_a_link_at_a_temp_name_never_truncates_a_file_outside(
    root: Path, victim: Path, kind: str
) -> None:
    planted = list(_predictable(root))
    for path in planted:
        _link(kind, victim, path)
    folder = MemoryFolder(root, clock=_clock)
    found = folder.memory_search("canary")  # builds and persists the index
    assert [r["path"] for r in found["results"]] == ["MEMORY.md"]
    assert (root / "index" / "lexical-v1.json").is_file()
    (root / NOTES / "leak.md").write_bytes(b"# Leak\n\npassword=hunter2hunter2\n")
    folder.memory_add_note("Backups", "nightly")
    report = folder.consolidate()  # writes MEMORY.md, the summary and a .review.json
    assert [r["path"] for r in report["review"]] == [f"{NOTES}/leak.md"]
    assert (root / "review" / "leak.md.review.json").is_file()
    assert report["consolidated"] and "Backups" in (root / "MEMORY.md").read_text("utf-8")
    assert victim.read_bytes() == SECRET  # never truncated, never written
    for path in planted:  # left as they were: not ours to write through or remove
        assert os.path.lexists(path)
    assert _temps(root) == sorted(p.relative_to(root).as_posix() for p in planted)


def test_temp_files_are_private_and_never_left_behind(root: Path) -> None:
    folder = MemoryFolder(root, clock=_clock)
    folder.memory_search("canary")
    folder.memory_add_note("Backups", "nightly")
    folder.consolidate()
    assert _temps(root) == []
    if os.name == "posix":  # staged 0600: the bytes are never readable by others mid-write
        for name in ("MEMORY.md", "memory_summary.md", "index/lexical-v1.json"):
            assert stat.S_IMODE((root / name).stat().st_mode) & 0o077 == 0, name


def test_a_failed_replace_removes_its_temp_file(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise PermissionError(13, "replace refused")

    monkeypatch.setattr(paths.os, "replace", refuse)
    folder = MemoryFolder(root, clock=_clock)
    folder.memory_search("canary")  # the index is derived: persisting it may fail
    with pytest.raises(store.StoreFailure):
        folder.consolidate()
    monkeypatch.undo()
    assert _temps(root) == []


# --- probe 1: links at the final targets ----------------------------------------------------


@pytest.mark.parametrize("kind", ["hardlink", "symlink"])
def test_a_link_at_the_summary_is_replaced_never_written_through(
    root: Path, victim: Path, kind: str
) -> None:
    (root / "memory_summary.md").unlink()
    _link(kind, victim, root / "memory_summary.md")
    MemoryFolder(root, clock=_clock).consolidate()
    assert victim.read_bytes() == SECRET
    summary = root / "memory_summary.md"
    assert stat.S_ISREG(summary.lstat().st_mode) and summary.stat().st_nlink == 1
    assert summary.read_bytes() == b"# Memory summary\n\n- Deploy\n"


@pytest.mark.parametrize("kind", ["hardlink", "symlink"])
def test_a_link_at_a_review_record_is_replaced_never_written_through(
    root: Path, victim: Path, kind: str
) -> None:
    (root / "review").mkdir()
    _link(kind, victim, root / "review" / "leak.md.review.json")
    (root / NOTES / "leak.md").write_bytes(b"# Leak\n\npassword=hunter2hunter2\n")
    report = MemoryFolder(root, clock=_clock).consolidate()
    assert [r["review"] for r in report["review"]] == ["review/leak.md"]
    assert victim.read_bytes() == SECRET
    record = root / "review" / "leak.md.review.json"
    assert stat.S_ISREG(record.lstat().st_mode) and b"hunter2" not in record.read_bytes()


@pytest.mark.parametrize("kind", ["hardlink", "symlink"])
def test_a_link_at_memory_md_is_refused(root: Path, victim: Path, kind: str) -> None:
    (root / "MEMORY.md").unlink()
    _link(kind, victim, root / "MEMORY.md")
    with pytest.raises(MemoryPathRejected) as caught:
        MemoryFolder(root, clock=_clock).consolidate()
    assert caught.value.details["reason"] == kind
    assert victim.read_bytes() == SECRET
    assert os.path.lexists(root / "MEMORY.md")


@pytest.mark.parametrize("kind", ["hardlink", "symlink"])
def test_a_link_at_the_index_file_is_rebuilt_over(root: Path, victim: Path, kind: str) -> None:
    (root / "index").mkdir()
    _link(kind, victim, root / "index" / "lexical-v1.json")
    found = MemoryFolder(root, clock=_clock).memory_search("canary")
    assert [r["path"] for r in found["results"]] == ["MEMORY.md"]
    assert found["degraded"]["details"]["reasonCode"] == "index_corrupt"
    assert victim.read_bytes() == SECRET
    index = root / "index" / "lexical-v1.json"
    assert stat.S_ISREG(index.lstat().st_mode) and index.stat().st_nlink == 1
    again = MemoryFolder(root, clock=_clock).memory_search("canary")
    assert again["path"] == "index" and again["results"] == found["results"]


def test_a_linked_index_directory_is_never_written_into(root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _link("symlink", elsewhere, root / "index")
    found = MemoryFolder(root, clock=_clock).memory_search("canary")
    assert [r["path"] for r in found["results"]] == ["MEMORY.md"]
    assert list(elsewhere.iterdir()) == []


# --- probe 2: FIFOs, sockets, devices -------------------------------------------------------


@pytest.mark.parametrize("name", ["rollout_summaries/x.md", f"{NOTES}/x.md"])
def test_memory_read_of_a_fifo_is_refused_at_once(root: Path, name: str) -> None:
    fifo = root / name
    _mkfifo(fifo)
    folder = MemoryFolder(root, clock=_clock)
    with pytest.raises(MemoryPathRejected) as caught:
        within(TIMEOUT, lambda: folder.memory_read(name), fifo)
    assert caught.value.details["reason"] == "not_regular"
    assert name not in [e["path"] for e in folder.memory_list()["entries"]]


def test_fifos_at_the_fixed_names_never_block(root: Path) -> None:
    for name in ("MEMORY.md", "memory_summary.md"):
        (root / name).unlink()
        _mkfifo(root / name)
    (root / "index").mkdir()
    _mkfifo(root / "index" / "lexical-v1.json")
    folder = MemoryFolder(root, clock=_clock)
    fifos = (root / "MEMORY.md", root / "memory_summary.md", root / "index" / "lexical-v1.json")
    for call in (folder.summary_for_prompt, folder.consolidate):
        with pytest.raises(MemoryPathRejected) as caught:
            within(TIMEOUT, call, *fifos)
        assert caught.value.details["reason"] == "not_regular"
    found = within(TIMEOUT, lambda: folder.memory_search("rate_limit"), *fifos)
    assert [r["path"] for r in found["results"]] == ["rollout_summaries/r.md"]
    assert found["degraded"]["details"]["reasonCode"] == "index_corrupt"
    assert stat.S_ISREG((root / "index" / "lexical-v1.json").lstat().st_mode)  # rebuilt over


def test_a_socket_is_refused(root: Path, tmp_path: Path) -> None:
    if not hasattr(socket, "AF_UNIX"):
        pytest.skip("no Unix domain sockets on this platform")
    path = root / "rollout_summaries" / "s.md"
    if len(os.fsencode(path)) > 100:
        pytest.skip("the temporary path is too long for a socket address")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(os.fspath(path))
        with pytest.raises(MemoryPathRejected) as caught:
            within(TIMEOUT, lambda: MemoryFolder(root).memory_read("rollout_summaries/s.md"))
    assert caught.value.details["reason"] == "not_regular"


def test_a_device_is_refused(root: Path) -> None:
    path = root / "rollout_summaries" / "dev.md"
    try:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is
    except (AttributeError, OSError) as exc:
        pytest.skip(f"cannot create a device node here: {exc}")
    with pytest.raises(MemoryPathRejected) as caught:
        within(TIMEOUT, lambda: MemoryFolder(root).memory_read("rollout_summaries/dev.md"))
    assert caught.value.details["reason"] == "not_regular"


def test_a_directory_named_like_a_memory_file_is_refused(root: Path) -> None:
    (root / "rollout_summaries" / "d.md").mkdir()
    with pytest.raises(MemoryPathRejected) as caught:
        MemoryFolder(root).memory_read("rollout_summaries/d.md")
    assert caught.value.details["reason"] == "not_regular"


# --- probe 4: reading creates nothing -------------------------------------------------------


def test_read_only_tools_create_nothing(root: Path) -> None:
    bare = root.parent / "bare"
    bare.mkdir()
    (bare / "MEMORY.md").write_bytes(b"# Memory\n")
    before = _tree(bare)
    folder = MemoryFolder(bare, clock=_clock)
    assert folder.memory_list()["entries"][0]["path"] == "MEMORY.md"
    assert folder.memory_read("MEMORY.md")["content"] == "# Memory"
    assert folder.summary_for_prompt() == ""
    with pytest.raises(MemoryNotFound):
        folder.memory_read("rollout_summaries/none.md")
    with pytest.raises(MemoryNotFound):
        folder.memory_read(f"{NOTES}/none.md")
    assert folder.memory_list("rollout_summaries")["entries"] == []
    assert _tree(bare) == before  # no area directory, no index


def test_a_missing_folder_is_read_as_empty_and_never_created(tmp_path: Path, walk: str) -> None:
    missing = tmp_path / "nowhere" / "store"
    folder = MemoryFolder(missing, clock=_clock)
    assert folder.memory_list()["entries"] == []
    assert folder.summary_for_prompt() == ""
    with pytest.raises(MemoryNotFound):
        folder.memory_read("MEMORY.md")
    assert folder.memory_search("canary")["results"] == []
    assert not (tmp_path / "nowhere").exists()


def test_writers_create_the_layout_they_need(tmp_path: Path, walk: str) -> None:
    missing = tmp_path / "new" / "store"
    folder = MemoryFolder(missing, clock=_clock)
    note = folder.memory_add_note("Backups", "nightly")
    assert (missing / note["path"]).is_file()
    report = folder.consolidate()
    assert report["consolidated"] == [note["path"]]
    assert (missing / "MEMORY.md").is_file() and (missing / "memory_summary.md").is_file()
    fresh = MemoryFolder(tmp_path / "other", clock=_clock)
    assert fresh.consolidate()["consolidated"] == []
    assert (tmp_path / "other" / "memory_summary.md").read_bytes() == b"# Memory summary\n\n"


def test_a_store_root_that_is_a_file_is_a_store_failure(tmp_path: Path, walk: str) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"x")
    with pytest.raises(store.StoreFailure):
        MemoryFolder(path)
