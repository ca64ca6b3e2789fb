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
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.adapters.fs_content import MIB, PARALLEL_MIN, FsContentPort
from kernel.adapters.memory_content import InMemoryContentPort
from kernel.content import object_id_for
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
    """OS threads of this process (``_thread`` helpers are not in ``threading``)."""
    task = Path("/proc/self/task")
    return len(list(task.iterdir())) if task.is_dir() else threading.active_count()


def _settled_threads(baseline: int) -> int:
    deadline = time.monotonic() + 2.0  # a released helper may take a moment to exit
    while (count := _live_threads()) > baseline and time.monotonic() < deadline:
        time.sleep(0.005)
    return count


def _baseline_threads(tmp_path: Path) -> int:
    """Thread count once the process's long-lived bytes helper exists (one per process,
    started by the first large bytes put): puts must never add threads beyond it."""
    FsContentPort(tmp_path / "warm", durable=False).put(bytes(PARALLEL_MIN), POLICY)
    count, deadline = _live_threads(), time.monotonic() + 2.0
    while time.monotonic() < deadline:  # the first use's own job thread exits
        time.sleep(0.02)
        if (now := _live_threads()) == count:
            break
        count = now
    return count


def test_bytes_puts_reuse_one_helper_and_concurrent_puts_never_queue(tmp_path: Path) -> None:
    baseline = _baseline_threads(tmp_path)
    port = FsContentPort(tmp_path / "c", chunk_size=MIB, durable=False)
    payloads = [os.urandom(PARALLEL_MIN + i) for i in range(8)]
    for data in payloads[:4]:  # sequential: the helper is idle each time
        assert port.get(port.put(data, POLICY), READER) == data
    assert _settled_threads(baseline) <= baseline
    refs: dict[int, ContentRef] = {}

    def put(i: int) -> None:  # concurrent: a busy helper means a thread of one's own
        refs[i] = port.put(payloads[i] * 4, POLICY)

    workers = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for i, ref in refs.items():
        assert ref.digest == "sha256:" + hashlib.sha256(payloads[i] * 4).hexdigest()
        assert port.get(ref, READER) == payloads[i] * 4
    assert len(refs) == 8 and list((tmp_path / "c" / "tmp").iterdir()) == []
    assert _settled_threads(baseline) <= baseline


def test_a_bytes_put_lets_go_of_the_callers_buffer(tmp_path: Path) -> None:
    port = FsContentPort(tmp_path / "c", durable=False)
    data = bytearray(os.urandom(2 * MIB))
    port.put(data, POLICY)
    deadline = time.monotonic() + 2.0
    while True:  # no memoryview of it is left on the helper: the buffer can be resized
        try:
            data.extend(b"x")
            break
        except BufferError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)


@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize("first", [1000, 2 * MIB])  # inline hash / helper thread started
def test_a_stream_breaking_mid_put_leaves_no_temp_files_and_no_thread(
    tmp_path: Path, durable: bool, first: int
) -> None:
    port = FsContentPort(tmp_path / "c", chunk_size=MIB, durable=durable)

    def broken() -> Any:
        yield bytes(first)
        yield bytes(MIB)
        raise OSError("connection reset mid-stream")

    baseline = _baseline_threads(tmp_path)
    with pytest.raises(KernelError) as info:
        port.put(broken(), POLICY)
    assert info.value.code == "store_failure"
    assert list((tmp_path / "c" / "tmp").iterdir()) == []
    assert list(port.blobs()) == [] and port.object_ids() == []
    assert _settled_threads(baseline) <= baseline

    class Interrupted(Exception):
        pass

    def interrupted() -> Any:
        yield bytes(first)
        raise Interrupted

    with pytest.raises(Interrupted):  # not an OSError: propagates as is, still cleaned up
        port.put(interrupted(), POLICY)
    assert list((tmp_path / "c" / "tmp").iterdir()) == []
    assert _settled_threads(baseline) <= baseline
    ref = port.put(iter([bytes(first), bytes(MIB)]), POLICY)  # the store still works
    assert port.get(ref, READER) == bytes(first + MIB)
    assert list((tmp_path / "c" / "tmp").iterdir()) == []


def test_a_failing_disk_write_mid_put_leaves_no_temp_files_and_no_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = FsContentPort(tmp_path / "c", chunk_size=MIB)
    real_write = os.write
    calls = itertools.count()

    def flaky_write(fd: int, data: Any) -> int:
        if next(calls) == 1:  # the second chunk: written by the helper while the caller hashes
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    baseline = _baseline_threads(tmp_path)
    monkeypatch.setattr(os, "write", flaky_write)
    with pytest.raises(KernelError) as info:
        port.put(bytes(3 * MIB), POLICY)
    assert info.value.code == "store_failure"
    monkeypatch.undo()
    assert list((tmp_path / "c" / "tmp").iterdir()) == []
    assert list(port.blobs()) == [] and port.object_ids() == []
    assert _settled_threads(baseline) <= baseline


@pytest.mark.parametrize("shape", ["bytes", "stream"])
@pytest.mark.parametrize("chunks", [1, 2])
def test_the_caller_writes_itself_when_the_helper_is_never_scheduled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: int, shape: str
) -> None:
    from kernel.adapters import fs_content

    baseline = _baseline_threads(tmp_path)
    real_start = fs_content._thread.start_new_thread
    scheduled = threading.Event()  # the helper is stuck behind busy cores until set

    def late_start(fn: Any, args: tuple[Any, ...]) -> int:
        def late() -> None:
            scheduled.wait(timeout=10)
            fn(*args)

        return real_start(late, ())

    def late_run(fn: Any, done: Any) -> None:  # the long-lived helper, just as late
        late_start(fn, (done,))

    monkeypatch.setattr(fs_content._thread, "start_new_thread", late_start)
    monkeypatch.setattr(fs_content._Helper, "run", staticmethod(late_run))
    port = FsContentPort(tmp_path / "c", chunk_size=MIB, durable=False)
    data = os.urandom(chunks * MIB)
    source: Any = data if shape == "bytes" else iter([data[:MIB], data[MIB:]])
    started = time.monotonic()
    try:
        ref = port.put(source, POLICY)
        assert time.monotonic() - started < 5  # did not wait for the helper
    finally:
        scheduled.set()
    assert ref.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    assert port.get(ref, READER) == data
    assert list((tmp_path / "c" / "tmp").iterdir()) == []
    assert _settled_threads(baseline) <= baseline  # it exits once it runs


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


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork only")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # 3.12+: fork with threads running
def test_a_forked_child_starts_its_own_helper(tmp_path: Path) -> None:
    port = FsContentPort(tmp_path / "c", durable=False)
    port.put(os.urandom(2 * MIB), POLICY)  # the parent's long-lived helper exists now
    data = os.urandom(2 * MIB)
    pid = os.fork()
    if pid == 0:  # the child: the parent's helper thread does not exist here
        code = 1
        try:
            ref = FsContentPort(tmp_path / "c", durable=False).put(data, POLICY)
            code = 0 if ref.digest == "sha256:" + hashlib.sha256(data).hexdigest() else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 20
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:  # a child waiting for a helper that is not there
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's put did not finish")
        time.sleep(0.01)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    ref = port.put(data, POLICY)  # the parent's helper still serves the parent
    assert port.get(ref, READER) == data
