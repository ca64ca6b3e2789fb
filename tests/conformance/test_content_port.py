"""ContentPort conformance over the in-memory model and the filesystem store."""

from __future__ import annotations

import hashlib
import io
import itertools
import os
import re
import threading
import time
import tracemalloc
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.adapters.fs.content import MIB, PARALLEL_MIN, FsContentPort
from kernel.adapters.in_memory.content import InMemoryContentPort
from kernel.compaction.evidence import object_id_for
from kernel.errors import ContentUnavailable, DigestMismatch, KernelError, ScopeDenied, SinkDenied
from kernel.ports import AccessContext, ContentPolicy, ContentPort, ContentRef

POLICY = ContentPolicy(
    scope="session",
    scope_id="s1",
    sensitivity="personal",
    allowed_sinks=("provider.local",),
    mime_type="text/plain",
    summary="tool output",
)
READER = AccessContext(
    scope="session", scope_id="s1", sink="provider.local", now="2026-08-20T00:00:00.000Z"
)


@pytest.fixture(params=["memory", "fs"])
def port(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        return InMemoryContentPort()
    return FsContentPort(tmp_path / "content", chunk_size=MIB)


def test_ports_satisfy_the_protocol(port: Any) -> None:
    assert isinstance(port, ContentPort)


@pytest.mark.parametrize("shape", ["bytes", "file", "chunks"])
def test_put_get_round_trip(port: Any, shape: str) -> None:
    data = b"result line\n" * 50_000
    source: Any = {
        "bytes": data,
        "file": io.BytesIO(data),
        "chunks": iter([data[:100], data[100:300_001], data[300_001:]]),
    }[shape]
    ref = port.put(source, POLICY)
    assert ref.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    assert ref.byte_length == len(data) and ref.recoverable and ref.mime_type == "text/plain"
    assert re.fullmatch(r"[0-9a-f]{64}\.[0-9a-f]{16}", ref.object_id)  # Windows-safe
    assert ref.object_id == object_id_for(hashlib.sha256(data).hexdigest(), POLICY)
    assert port.get(ref, READER) == data
    assert ContentRef.from_wire(ref.to_wire()) == ref


def test_missing_and_purged_objects_are_unavailable(port: Any) -> None:
    ref = port.put(b"abc", POLICY)
    ghost = ContentRef("x", "f" * 64 + "." + "0" * 16, "sha256:" + "f" * 64, 3, "s")
    with pytest.raises(ContentUnavailable):
        port.get(ghost, READER)
    receipt = port.purge(ref, "fence-1")
    assert receipt.status == "purged" and receipt.existed and receipt.fence == "fence-1"
    with pytest.raises(ContentUnavailable) as info:
        port.get(ref, READER)
    assert info.value.code == "content_unavailable"
    assert port.purge(ref, "fence-1").existed is False


def test_a_ref_with_the_wrong_digest_is_refused(port: Any) -> None:
    ref = port.put(b"payload", POLICY)
    forged = ContentRef(
        ref.store, ref.object_id, "sha256:" + "0" * 64, ref.byte_length, ref.summary
    )
    with pytest.raises(DigestMismatch) as info:
        port.get(forged, READER)
    assert info.value.code == "digest_mismatch"


def test_corrupted_blob_is_digest_mismatch(tmp_path: Path) -> None:
    port = FsContentPort(tmp_path / "c")
    ref = port.put(b"original bytes", POLICY)
    (blob,) = port.blobs()
    blob.write_bytes(b"tampered bytes")
    with pytest.raises(DigestMismatch):
        port.get(ref, READER)
    blob.unlink()
    with pytest.raises(ContentUnavailable):
        port.get(ref, READER)


def test_read_back_rechecks_scope_sensitivity_sinks_expiry_and_approval(port: Any) -> None:
    ref = port.put(b"x", POLICY)
    with pytest.raises(ScopeDenied):
        port.get(ref, AccessContext("session", "s2", "provider.local"))
    with pytest.raises(ScopeDenied):
        port.get(ref, AccessContext("session", "s1", "provider.local", clearance="internal"))
    with pytest.raises(SinkDenied):
        port.get(ref, AccessContext("session", "s1", "provider.cloud"))
    expiring = ContentPolicy(scope="session", scope_id="s1", expires_at="2026-01-01T00:00:00.000Z")
    with pytest.raises(ContentUnavailable):
        port.get(port.put(b"y", expiring), READER)
    gated = ContentPolicy(scope="session", scope_id="s1", requires_approval=True)
    gated_ref = port.put(b"z", gated)
    with pytest.raises(KernelError) as info:
        port.get(gated_ref, READER)
    assert info.value.code == "approval_required"
    approved = AccessContext("session", "s1", "provider.local", approved=True)
    assert port.get(gated_ref, approved) == b"z"


def test_summary_never_hides_truncation_expiry_or_approval(port: Any) -> None:
    policy = ContentPolicy(
        summary="build log",
        truncated=True,
        expires_at="2027-01-01T00:00:00.000Z",
        requires_approval=True,
    )
    summary = port.put(b"log", policy).summary
    assert "build log" in summary and "[truncated]" in summary
    assert "2027-01-01" in summary and "approval" in summary


def test_same_bytes_are_stored_once_but_keep_both_policies(tmp_path: Path) -> None:
    port = FsContentPort(tmp_path / "c")
    a = port.put(b"shared", POLICY)
    b = port.put(b"shared", ContentPolicy(scope="session", scope_id="s9"))
    assert a.digest == b.digest and a.object_id != b.object_id
    assert len(list(port.blobs())) == 1
    port.purge(a, "f")
    assert port.get(b, AccessContext("session", "s9", "x")) == b"shared"
    port.purge(b, "f")
    assert list(port.blobs()) == []


def test_put_leaves_no_temp_files_and_sweeps_crash_leftovers(tmp_path: Path) -> None:
    port = FsContentPort(tmp_path / "c")
    port.put(b"abc" * 1000, POLICY)
    assert list((tmp_path / "c" / "tmp").iterdir()) == []
    (tmp_path / "c" / "tmp" / "tmp-1-dead").write_bytes(b"partial")
    assert port.sweep_temps() == 1


def test_chunk_size_is_bounded(tmp_path: Path) -> None:
    with pytest.raises(KernelError):
        FsContentPort(tmp_path / "c", chunk_size=64)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=3000), cuts=st.lists(st.integers(0, 3000), max_size=5))
def test_chunking_never_changes_the_ref(tmp_path: Path, data: bytes, cuts: list[int]) -> None:
    port = FsContentPort(tmp_path / "h", durable=False)
    bounds = sorted({0, len(data), *[c for c in cuts if c <= len(data)]})
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)]
    whole = port.put(data, POLICY)
    pieces = port.put(iter(chunks), POLICY)
    assert whole == pieces
    assert port.get(pieces, READER) == data


def test_a_100_mib_result_is_never_held_twice(tmp_path: Path) -> None:
    size = 100 * MIB
    data = bytes(size)  # allocated before tracing starts: the caller's copy
    port = FsContentPort(tmp_path / "big", chunk_size=4 * MIB, durable=False)
    tracemalloc.start()
    try:
        ref = port.put(data, POLICY)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ref.byte_length == size
    assert peak < 2 * 4 * MIB + 16 * MIB, peak

    def stream() -> Any:
        for _ in range(size // (4 * MIB)):
            yield bytes(4 * MIB)

    tracemalloc.start()
    try:
        streamed = port.put(stream(), POLICY)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert streamed.digest == ref.digest
    assert peak < 3 * 4 * MIB + 16 * MIB, peak


def _live_threads() -> int:
    """OS threads of this process (a bare ``_thread`` thread is not in ``threading``)."""
    task = Path("/proc/self/task")
    return len(list(task.iterdir())) if task.is_dir() else threading.active_count()


@pytest.fixture
def no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting a thread of any kind fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a put started a thread")

    import _thread

    monkeypatch.setattr(_thread, "start_new_thread", refuse)
    monkeypatch.setattr(threading.Thread, "start", refuse)


@pytest.fixture(params=["caller", "executor"])
def executor(request: pytest.FixtureRequest) -> Iterator[ThreadPoolExecutor | None]:
    """``caller``: the default (hash and write on the calling thread); ``executor``: the
    opt-in overlap on a pool the caller owns."""
    if request.param == "caller":
        yield None
        return
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="content-put") as pool:
        yield pool


@pytest.mark.parametrize("shape", ["bytes", "file", "chunks"])
def test_a_put_hashes_and_writes_on_the_callers_thread(
    tmp_path: Path, no_threads: None, shape: str
) -> None:
    port = FsContentPort(tmp_path / "c", chunk_size=MIB)
    data = os.urandom(3 * MIB + 5)
    source: Any = {"bytes": data, "file": io.BytesIO(data),
                   "chunks": iter([data[:MIB], data[MIB:]])}[shape]  # fmt: skip
    before = _live_threads()
    ref = port.put(source, POLICY)
    assert ref.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    assert port.get(ref, READER) == data
    assert _live_threads() == before  # no helper thread stays behind either
    assert list((tmp_path / "c" / "tmp").iterdir()) == []


def test_an_executor_takes_the_file_work_of_large_bytes_only(tmp_path: Path) -> None:
    class Counting(ThreadPoolExecutor):
        submitted = 0

        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            Counting.submitted += 1
            return super().submit(fn, *args, **kwargs)

    with Counting(max_workers=1) as pool:
        port = FsContentPort(tmp_path / "c", chunk_size=MIB, durable=False, executor=pool)
        plain = FsContentPort(tmp_path / "p", chunk_size=MIB, durable=False)
        for data in (os.urandom(3 * MIB), os.urandom(PARALLEL_MIN)):
            assert port.put(data, POLICY) == plain.put(data, POLICY)
        assert Counting.submitted == 2
        for source in (b"small", io.BytesIO(bytes(2 * MIB)), iter([bytes(2 * MIB)])):
            port.put(source, POLICY)  # small bytes and streams: the caller's thread
        assert Counting.submitted == 2


def test_concurrent_puts(tmp_path: Path, executor: ThreadPoolExecutor | None) -> None:
    port = FsContentPort(tmp_path / "c", chunk_size=MIB, durable=False, executor=executor)
    payloads = [os.urandom(PARALLEL_MIN + i) * 4 for i in range(8)]
    refs: dict[int, ContentRef] = {}

    def put(i: int) -> None:
        refs[i] = port.put(payloads[i], POLICY)

    workers = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for i, ref in refs.items():
        assert ref.digest == "sha256:" + hashlib.sha256(payloads[i]).hexdigest()
        assert port.get(ref, READER) == payloads[i]
    assert len(refs) == 8 and list((tmp_path / "c" / "tmp").iterdir()) == []


def test_a_bytes_put_lets_go_of_the_callers_buffer(
    tmp_path: Path, executor: ThreadPoolExecutor | None
) -> None:
    port = FsContentPort(tmp_path / "c", durable=False, executor=executor)
    data = bytearray(os.urandom(2 * MIB))
    port.put(data, POLICY)
    data.extend(b"x")  # no memoryview of it is left anywhere: the buffer can be resized


@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize("first", [1000, 2 * MIB])
def test_a_stream_breaking_mid_put_leaves_no_temp_files(
    tmp_path: Path, durable: bool, first: int, executor: ThreadPoolExecutor | None
) -> None:
    port = FsContentPort(tmp_path / "c", chunk_size=MIB, durable=durable, executor=executor)

    def broken() -> Any:
        yield bytes(first)
        yield bytes(MIB)
        raise OSError("connection reset mid-stream")

    with pytest.raises(KernelError) as info:
        port.put(broken(), POLICY)
    assert info.value.code == "store_failure"
    assert list((tmp_path / "c" / "tmp").iterdir()) == []
    assert list(port.blobs()) == [] and port.object_ids() == []

    class Interrupted(Exception):
        pass

    def interrupted() -> Any:
        yield bytes(first)
        raise Interrupted

    with pytest.raises(Interrupted):  # not an OSError: propagates as is, still cleaned up
        port.put(interrupted(), POLICY)
    assert list((tmp_path / "c" / "tmp").iterdir()) == []
    ref = port.put(iter([bytes(first), bytes(MIB)]), POLICY)  # the store still works
    assert port.get(ref, READER) == bytes(first + MIB)
    assert list((tmp_path / "c" / "tmp").iterdir()) == []


def test_a_failing_disk_write_mid_put_leaves_no_temp_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, executor: ThreadPoolExecutor | None
) -> None:
    port = FsContentPort(tmp_path / "c", chunk_size=MIB, executor=executor)
    real_write = os.write
    calls = itertools.count()

    def flaky_write(fd: int, data: Any) -> int:
        if next(calls) == 1:  # the second chunk
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", flaky_write)
    with pytest.raises(KernelError) as info:
        port.put(bytes(3 * MIB), POLICY)
    assert info.value.code == "store_failure"
    monkeypatch.undo()
    assert list((tmp_path / "c" / "tmp").iterdir()) == []
    assert list(port.blobs()) == [] and port.object_ids() == []


@pytest.mark.parametrize("chunks", [1, 2])
def test_a_busy_executor_never_delays_a_put(tmp_path: Path, chunks: int) -> None:
    """The pool's only worker is stuck elsewhere: the put's job is taken back (never
    started) and the caller writes itself instead of waiting."""
    release = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(release.wait, 10)
        port = FsContentPort(tmp_path / "c", chunk_size=MIB, durable=False, executor=pool)
        data = os.urandom(chunks * MIB)
        started = time.monotonic()
        try:
            ref = port.put(data, POLICY)
            assert time.monotonic() - started < 5  # did not wait for the worker
        finally:
            release.set()
    assert ref.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    assert port.get(ref, READER) == data
    assert list((tmp_path / "c" / "tmp").iterdir()) == []


def test_stores_in_the_earlier_two_level_layout_are_still_read_and_purged(
    tmp_path: Path,
) -> None:
    port = FsContentPort(tmp_path / "c")
    ref = port.put(b"written before the layout change", POLICY)
    head = ref.object_id[:64]
    for kind, name in (("blobs", head), ("refs", f"{ref.object_id}.json")):
        current = tmp_path / "c" / kind / head[:2] / name
        legacy = current.parent / head[2:4] / name
        legacy.parent.mkdir()
        current.rename(legacy)
    assert port.object_ids() == [ref.object_id]
    assert port.get(ref, READER) == b"written before the layout change"
    receipt = port.purge(ref, "fence-1")
    assert receipt.existed and list(port.blobs()) == [] and port.object_ids() == []
    with pytest.raises(ContentUnavailable):
        port.get(ref, READER)


def test_a_blob_is_one_shard_level_deep(tmp_path: Path) -> None:
    port = FsContentPort(tmp_path / "c")
    ref = port.put(b"abc", POLICY)
    head = ref.object_id[:64]
    assert list(port.blobs()) == [tmp_path / "c" / "blobs" / head[:2] / head]
    assert (tmp_path / "c" / "refs" / head[:2] / f"{ref.object_id}.json").is_file()
