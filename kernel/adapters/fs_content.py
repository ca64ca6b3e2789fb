"""Content-addressed ContentPort on the filesystem (design 108 §8.4).

Layout under ``root``::

    blobs/<h0h1>/<sha256 hex>                    the bytes, sharded by digest
    refs/<h0h1>/<objectId>.json                  the access policy of one ref
    tmp/                                          write-to-temp staging

``objectId`` is ``<sha256 hex>.<policy fingerprint>`` (hex only: safe on
Windows and case-insensitive filesystems).  Identical bytes are stored once.
One shard level of 256 directories (git's layout): a store in use has them all,
so publishing costs no ``mkdir`` (ADR 0008).  Stores written by the earlier
two-level layout (``blobs/<h0h1>/<h2h3>/…``) are still read and purged.

``put`` streams: the input (bytes, a binary file object, or an iterable of
chunks) is hashed and written in ``chunk_size`` pieces (1–4 MiB) to a temp
file, fsynced (``durable``), then published with ``os.replace`` (atomic on
POSIX and Windows).  A 100 MiB result is never copied in memory: bytes input is
sliced through a ``memoryview``; streams are read chunk by chunk.

The calling thread hashes; from the first chunk of 256 KiB up, a helper thread
does all the file work meanwhile — creating the temp file, writing every chunk,
the fsync, the ref record's temp file (its content is the policy only, known
before the digest) — because ``hashlib`` and ``os.write`` release the GIL.  The
hash never waits for a thread to be scheduled, so a put costs about one SHA-256
pass; after the digest only two renames remain.  At most three chunks are
referenced at once (one hashed, one queued, one being written); the helper
lives only for the duration of one ``put``, and if it has not run by the time
the hash is done (every core busy) the caller does the writing itself and the
helper exits at once when it is scheduled, holding nothing.  ``get`` re-hashes
what it reads (``digest_mismatch`` on any difference), a missing object is
``content_unavailable``, and the stored policy is re-checked against the reader
(:func:`kernel.content.check_access`).  ``purge`` removes the ref and, when no
other ref shares it, the blob.
"""

from __future__ import annotations

import _thread
import contextlib
import hashlib
import json
import os
import queue
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from kernel.content import DIGEST_PREFIX, check_access, object_id_for, ref_summary
from kernel.errors import ContentUnavailable, DigestMismatch, InvalidArgument, StoreFailure
from kernel.ports import (
    AccessContext,
    ContentPolicy,
    ContentRef,
    ContentSource,
    PurgeReceipt,
)

MIB: Final = 1024 * 1024
#: From a chunk this large on, the file work moves to a helper thread (below, starting
#: a thread costs more than the overlap saves).
PARALLEL_MIN: Final = 256 * 1024
_HEX = frozenset("0123456789abcdef")


def _chunks(content: ContentSource, size: int) -> Iterator[bytes | memoryview]:
    if isinstance(content, bytes | bytearray | memoryview):
        view = memoryview(content).cast("B")
        for start in range(0, len(view), size):
            yield view[start : start + size]
        return
    read = getattr(content, "read", None)
    if callable(read):
        while True:
            block = read(size)
            if not block:
                return
            yield block
        return
    for block in content:  # an iterable of chunks
        if not isinstance(block, bytes | bytearray | memoryview):
            raise InvalidArgument("content chunks must be bytes", details={})
        yield block


def _policy_wire(policy: ContentPolicy) -> dict[str, Any]:
    return {
        "scope": policy.scope,
        "scopeId": policy.scope_id,
        "sensitivity": policy.sensitivity,
        "allowedSinks": list(policy.allowed_sinks),
        "mimeType": policy.mime_type,
        "summary": policy.summary,
        "truncated": policy.truncated,
        "expiresAt": policy.expires_at,
        "requiresApproval": policy.requires_approval,
        "accessPolicy": policy.access_policy,
    }


def _policy_from_wire(value: dict[str, Any]) -> ContentPolicy:
    return ContentPolicy(
        scope=value["scope"],
        scope_id=value.get("scopeId"),
        sensitivity=value["sensitivity"],
        allowed_sinks=tuple(value.get("allowedSinks") or ()),
        mime_type=value.get("mimeType"),
        summary=value.get("summary") or "Stored content",
        truncated=bool(value.get("truncated")),
        expires_at=value.get("expiresAt"),
        requires_approval=bool(value.get("requiresApproval")),
        access_policy=value.get("accessPolicy"),
    )


class _Staged:
    """A temp file being written: ``discard`` closes and removes it (idempotent)."""

    __slots__ = ("_open", "fd", "path")

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path
        self._open = True

    def close(self) -> None:
        if self._open:
            self._open = False
            os.close(self.fd)

    def discard(self) -> None:
        try:
            self.close()
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)


class _Files:
    """The file work of one ``put``: the blob's temp file and the ref record's.

    Everything here is independent of the digest, so it runs beside the hash (on the
    helper thread for large content).  ``staged`` lists every temp file created, for
    the caller to discard unless published."""

    __slots__ = ("blob", "policy", "port", "ref", "staged", "suffix", "summary")

    def __init__(self, port: FsContentPort, policy: ContentPolicy) -> None:
        self.port = port
        self.policy = policy
        self.staged: list[_Staged] = []
        self.blob: _Staged | None = None
        self.ref: _Staged | None = None
        self.suffix = ""  # ".<policy fingerprint>"
        self.summary = ""

    def write(self, chunk: bytes | memoryview) -> None:
        if self.blob is None:
            self.blob = self.port._stage(self.staged)
        fd, view, write = self.blob.fd, memoryview(chunk), os.write
        while view:
            view = view[write(fd, view) :]

    def finish(self) -> None:
        """Seal the blob; stage and seal the ref record (the policy); derive the ref's
        policy parts."""
        if self.blob is None:  # empty content
            self.blob = self.port._stage(self.staged)
        self.port._seal(self.blob)
        self.suffix = object_id_for("", self.policy)
        self.summary = ref_summary(self.policy)
        self.ref = self.stage_ref()

    def stage_ref(self) -> _Staged:
        ref = self.port._stage(self.staged)
        os.write(ref.fd, _record(self.policy))
        self.port._seal(ref)
        return ref


def _record(policy: ContentPolicy) -> bytes:
    return json.dumps({"policy": _policy_wire(policy)}, sort_keys=True).encode("utf-8")


class _Helper:
    """The process's long-lived file-work thread for bytes puts (started on first use).

    Handing a job to a waiting thread costs the caller a lock release (≈ 2 µs); starting
    a thread costs it ≈ 25–90 µs, a sixth of the hash of 1 MiB.  While the helper is
    busy (another thread's put) a job gets a thread of its own instead, so concurrent
    puts never queue behind each other.  A job never waits for its caller, so the helper
    cannot deadlock with one; a forked child starts its own helper (the pid changes).
    """

    _lock = _thread.allocate_lock()
    _jobs: queue.SimpleQueue[tuple[Callable[[_thread.LockType], None], _thread.LockType]]
    _pid = -1  # the process the helper runs in
    _idle = False  # set by the helper while it waits for a job

    @classmethod
    def run(cls, fn: Callable[[_thread.LockType], None], done: _thread.LockType) -> None:
        """Run ``fn(done)`` on the helper, or on a new thread while it is busy."""
        with cls._lock:
            if cls._pid != os.getpid():
                cls._jobs, cls._pid, cls._idle = queue.SimpleQueue(), os.getpid(), False
                _thread.start_new_thread(cls._loop, (cls._jobs,))  # raises: none started
            elif cls._idle:
                cls._idle = False
                cls._jobs.put((fn, done))
                return
        _thread.start_new_thread(fn, (done,))

    @classmethod
    def _loop(
        cls, jobs: queue.SimpleQueue[tuple[Callable[[_thread.LockType], None], _thread.LockType]]
    ) -> None:
        while True:
            with cls._lock:
                cls._idle = True
            fn, done = jobs.get()
            fn(done)  # never raises: errors are kept on the job
            del fn, done  # hold nothing of the caller's between jobs

    @classmethod
    def _forget(cls) -> None:
        """In a forked child: no helper runs there, and the lock may be held forever."""
        cls._lock, cls._pid, cls._idle = _thread.allocate_lock(), -1, False


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere the pid check above suffices
    os.register_at_fork(after_in_child=_Helper._forget)


class _Writer:
    """Runs a put's :class:`_Files` work on a helper thread while the caller hashes.

    Bytes input: every chunk is known at once, the job goes to :class:`_Helper` and
    never waits for the caller.  Streams: chunks are written in order as they are
    read; ``queue`` holds one chunk, so a slow disk blocks the producer instead of
    buffering the stream, and the job gets a thread of its own (a bare ``_thread``
    thread: ``threading.Thread.start`` waits until the new thread is scheduled).  A
    job reports through ``done``, released as its last action.  Whoever takes
    ``claim`` first does the file work: if the helper has still not started it when
    the caller has hashed everything (every core busy), the caller writes the pending
    chunks itself; the helper then finds the claim taken and drops the job at once,
    holding nothing.
    """

    __slots__ = ("_claim", "_done", "_first", "_queue", "_rest", "error", "files")

    def __init__(
        self,
        files: _Files,
        first: bytes | memoryview,
        rest: Iterator[bytes | memoryview] | None = None,
    ) -> None:
        """``rest``: every further chunk, known now (bytes input); ``None``: they come
        through :meth:`feed`."""
        self.files = files
        self.error: BaseException | None = None
        self._rest = rest
        self._queue: queue.Queue[bytes | memoryview | None] | None = None
        self._claim = _thread.allocate_lock()
        self._first: bytes | memoryview | None = first  # handed over without a queue trip
        done = _thread.allocate_lock()
        done.acquire()
        if rest is None:
            self._queue = queue.Queue(maxsize=1)
            _thread.start_new_thread(self._run, (done,))  # raises: no thread started
        else:
            _Helper.run(self._run, done)
        self._done: _thread.LockType | None = done

    def feed(self, chunk: bytes | memoryview) -> None:
        assert self._queue is not None
        self._queue.put(chunk)

    def _work(self, chunks: Iterable[bytes | memoryview]) -> None:
        try:
            first, self._first = self._first, None
            if first is not None:
                self.files.write(first)
                del first  # hold no more than the chunk being written
            for chunk in chunks:
                self.files.write(chunk)
                del chunk
            self.files.finish()
        except BaseException as exc:
            self.error = exc
            for _ in chunks:  # keep draining: never block the producer
                pass

    def _run(self, done: _thread.LockType) -> None:
        try:
            if self._claim.acquire(False):
                self._work(self._rest if self._rest is not None else self._fed())
        finally:
            done.release()

    def _fed(self) -> Iterator[bytes | memoryview]:
        assert self._queue is not None
        return iter(self._queue.get, None)

    def _pending(self) -> Iterator[bytes | memoryview]:
        if self._queue is None:
            return
        while True:
            try:
                chunk = self._queue.get_nowait()
            except queue.Empty:
                return
            if chunk is not None:
                yield chunk

    def close(self, *, complete: bool) -> None:
        """Wait for the file work (``complete``: every chunk has been fed) or stop it;
        idempotent.  Never leaves the helper running."""
        if self._done is None:
            return
        if self._claim.acquire(False):  # the helper never ran: do it here, do not wait
            if complete:
                self._work(self._rest if self._rest is not None else self._pending())
            else:
                self._first = self._rest = None
                for _ in self._pending():
                    pass
        else:
            if self._queue is not None:
                self._queue.put(None)
            self._done.acquire()  # released by the helper's last statement
        self._done = None


class FsContentPort:
    """ContentPort over a directory; safe for concurrent writers (atomic renames)."""

    def __init__(
        self,
        root: str | Path,
        *,
        store: str = "fs-content",
        chunk_size: int = 4 * MIB,
        durable: bool = True,
    ) -> None:
        if not MIB <= chunk_size <= 4 * MIB:
            raise InvalidArgument("chunk_size must be 1-4 MiB", details={"field": "chunk_size"})
        self.root = Path(root)
        self.store = store
        self.chunk_size = chunk_size
        self.durable = durable
        for sub in ("blobs", "refs", "tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self._dirs: set[str] = set()  # shard directories known to exist (never removed)
        self._blobs = os.path.join(self.root, "blobs")
        self._refs = os.path.join(self.root, "refs")
        self._tmp = os.path.join(self.root, "tmp")

    # ----------------------------------------------------------------- paths
    def _blob_paths(self, hex_digest: str) -> tuple[Path, Path]:
        """(current, legacy two-level) location of a blob."""
        blobs = self.root / "blobs" / hex_digest[:2]
        return blobs / hex_digest, blobs / hex_digest[2:4] / hex_digest

    def _ref_paths(self, object_id: str) -> tuple[Path, Path]:
        head = object_id.split(".", 1)[0]
        if len(head) != 64 or not set(object_id.replace(".", "")) <= _HEX:
            raise ContentUnavailable("unknown content object", details={"objectId": object_id})
        refs = self.root / "refs" / head[:2]
        name = f"{object_id}.json"
        return refs / name, refs / head[2:4] / name

    def _temp(self) -> tuple[int, str]:
        path = os.path.join(self._tmp, f"tmp-{os.getpid()}-{os.urandom(8).hex()}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        return os.open(path, flags, 0o644), path

    def _stage(self, staged: list[_Staged]) -> _Staged:
        fd, path = self._temp()
        temp = _Staged(fd, path)
        staged.append(temp)
        return temp

    def _shard(self, parent: str) -> bool:
        """Make sure the shard directory ``parent`` exists; True when this call created
        it (then nothing can be published in it yet).  No system call once known."""
        if parent in self._dirs:
            return False
        try:
            os.mkdir(parent)
            created = True
        except FileExistsError:
            created = False
        self._dirs.add(parent)
        return created

    def _seal(self, staged: _Staged) -> None:
        """Flush (``durable``) and close a fully written temp file."""
        try:
            if self.durable:
                os.fsync(staged.fd)
        finally:
            staged.close()

    def _publish(self, staged: _Staged, final: str) -> None:
        """Rename a sealed temp file to ``final`` (its shard already made by ``_shard``)."""
        try:
            os.replace(staged.path, final)
        except FileNotFoundError:  # a shard directory removed behind our back
            if not os.path.exists(staged.path):
                raise
            os.makedirs(os.path.dirname(final), exist_ok=True)
            os.replace(staged.path, final)

    # ----------------------------------------------------------------- port
    def put(self, content: ContentSource, policy: ContentPolicy) -> ContentRef:
        files = _Files(self, policy)
        hasher = hashlib.sha256()
        hashed = False  # True once every byte is written and hashed
        hex_digest = ""
        length = 0
        try:
            writer: _Writer | None = None
            try:
                if (
                    isinstance(content, bytes | bytearray | memoryview)
                    and (view := memoryview(content).cast("B")).nbytes >= PARALLEL_MIN
                ):  # every chunk is known now: the helper never waits for the caller
                    pieces = list(_chunks(view, self.chunk_size))
                    writer = _Writer(files, pieces[0], iter(pieces[1:]))
                    for piece in pieces:
                        hasher.update(piece)
                    length, content = len(view), b""
                    del pieces, piece
                for chunk in _chunks(content, self.chunk_size):
                    if writer is not None:
                        writer.feed(chunk)  # written meanwhile on the helper thread
                    elif len(chunk) >= PARALLEL_MIN:
                        writer = _Writer(files, chunk)
                    else:
                        files.write(chunk)
                    hasher.update(chunk)
                    length += len(chunk)
                if writer is None:
                    files.finish()
                else:
                    writer.close(complete=True)
                    if writer.error is not None:
                        raise writer.error
            finally:
                if writer is not None:
                    writer.close(complete=False)
            hex_digest = hasher.hexdigest()
            hashed = True
            assert files.blob is not None and files.ref is not None
            shard = os.path.join(self._blobs, hex_digest[:2])
            blob = os.path.join(shard, hex_digest)
            # A shard made just now is empty; otherwise the same bytes may be stored.
            self._shard(shard)
            self._publish(files.blob, blob)
        except OSError as exc:
            for temp in files.staged:
                temp.discard()
            # A concurrent writer published the same bytes first (Windows refuses to
            # replace a file another process has open): content addressing makes it ours.
            if not (hashed and any(p.exists() for p in self._blob_paths(hex_digest))):
                raise StoreFailure("cannot store content", details={}) from exc
            files.ref = None
        except BaseException:
            for temp in files.staged:
                temp.discard()
            raise
        object_id = hex_digest + files.suffix  # = object_id_for(hex_digest, policy)
        try:
            if files.ref is None:
                files.staged = []
                files.ref = files.stage_ref()
            shard = os.path.join(self._refs, hex_digest[:2])
            self._shard(shard)
            self._publish(files.ref, os.path.join(shard, f"{object_id}.json"))
        except BaseException as exc:
            for temp in files.staged:
                temp.discard()
            if isinstance(exc, OSError):
                raise StoreFailure("cannot store content reference", details={}) from exc
            raise
        return ContentRef(
            store=self.store,
            object_id=object_id,
            digest=DIGEST_PREFIX + hex_digest,
            byte_length=length,
            summary=files.summary,
            recoverable=True,
            mime_type=policy.mime_type,
            access_policy=policy.access_policy,
        )

    def _load(self, ref: ContentRef) -> ContentPolicy:
        for path in self._ref_paths(ref.object_id):
            try:
                record = json.loads(path.read_bytes())
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                raise StoreFailure("content reference is unreadable", details={}) from exc
            return _policy_from_wire(record["policy"])
        raise ContentUnavailable(
            "content reference is unavailable", details={"objectId": ref.object_id}
        )

    def get(self, ref: ContentRef, access: AccessContext) -> bytes:
        policy = self._load(ref)
        check_access(policy, access, ref.object_id)
        hex_digest = ref.object_id.split(".", 1)[0]
        data: bytes | None = None
        for path in self._blob_paths(hex_digest):
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
                break
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StoreFailure("cannot read content", details={}) from exc
        if data is None:
            raise ContentUnavailable(
                "content object is missing", details={"objectId": ref.object_id}
            )
        hasher = hashlib.sha256()
        view = memoryview(data)
        for start in range(0, len(view), self.chunk_size):
            hasher.update(view[start : start + self.chunk_size])
        actual = DIGEST_PREFIX + hasher.hexdigest()
        if actual != ref.digest or len(data) != ref.byte_length:
            raise DigestMismatch("content digest mismatch", details={"objectId": ref.object_id})
        return data

    def purge(self, ref: ContentRef, fence: str) -> PurgeReceipt:
        try:
            paths = self._ref_paths(ref.object_id)
        except ContentUnavailable:
            return PurgeReceipt(self.store, ref.object_id, fence, existed=False)
        existed = False
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                existed = True
        hex_digest = ref.object_id.split(".", 1)[0]
        if not any(any(path.parent.glob(f"{hex_digest}.*.json")) for path in paths):
            for blob in self._blob_paths(hex_digest):
                with contextlib.suppress(FileNotFoundError):
                    blob.unlink()
        return PurgeReceipt(self.store, ref.object_id, fence, existed=existed)

    def sweep_temps(self) -> int:
        """Remove staging files left by a crashed writer; returns how many."""
        removed = 0
        for temp in (self.root / "tmp").iterdir():
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()
                removed += 1
        return removed

    def object_ids(self) -> list[str]:
        return sorted(p.name[: -len(".json")] for p in (self.root / "refs").rglob("*.json"))

    def blobs(self) -> Iterable[Path]:
        return sorted(p for p in (self.root / "blobs").rglob("*") if p.is_file())
