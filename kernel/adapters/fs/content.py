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

By default a put hashes and writes on the caller's thread and starts no thread
(ADR 0012).  ``executor=`` (a :class:`concurrent.futures.Executor` the caller owns —
its size and lifetime are the caller's) opts in to overlapping the two for bytes input
of at least ``PARALLEL_MIN``: the file work (temp file, writes, fsync, the ref record's
temp file — all independent of the digest) is submitted to it while the caller hashes;
if the job has not started by the time the hash is done (the pool is busy), it is
cancelled and the caller writes itself, so a put never waits behind other work.
Streams always run on the caller's thread.

The directories are made by the first ``put``: reading a store (``get``,
``object_ids``, ``purge`` of an absent ref) creates nothing.  ``get`` re-hashes
what it reads (``digest_mismatch`` on any difference), a missing object is
``content_unavailable``, a ref or blob that is not a regular file (a FIFO, a
device) is ``store_failure`` without blocking, and the stored policy is
re-checked against the reader (:func:`kernel.compaction.evidence.check_access`).  ``purge``
removes the ref and, when no other ref shares it, the blob.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Final

from kernel.adapters.fs.files import read_regular
from kernel.compaction.evidence import (
    DIGEST_PREFIX,
    check_access,
    object_id_for,
    policy_from_wire,
    policy_wire,
    ref_summary,
)
from kernel.errors import ContentUnavailable, DigestMismatch, InvalidArgument, StoreFailure
from kernel.ports import (
    AccessContext,
    ContentPolicy,
    ContentRef,
    ContentSource,
    PurgeReceipt,
)

MIB: Final = 1024 * 1024
#: With an ``executor``, bytes input from this size on has its file work submitted to it
#: (below, handing a job over costs more than the overlap saves).
PARALLEL_MIN: Final = 256 * 1024
_HEX = frozenset("0123456789abcdef")


def content_chunks(content: ContentSource, size: int) -> Iterator[bytes | memoryview]:
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

    Everything here is independent of the digest, so it can run beside the hash (on an
    ``executor``, when the port has one).  ``staged`` lists every temp file created, for
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

    def write_all(self, chunks: list[bytes | memoryview]) -> None:
        """Every chunk, then :meth:`finish` (one job on an executor)."""
        for chunk in chunks:
            self.write(chunk)
        self.finish()

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
    return json.dumps({"policy": policy_wire(policy)}, sort_keys=True).encode("utf-8")


class FsContentPort:
    """ContentPort over a directory; safe for concurrent writers (atomic renames)."""

    def __init__(
        self,
        root: str | Path,
        *,
        store: str = "fs-content",
        chunk_size: int = 4 * MIB,
        durable: bool = True,
        executor: Executor | None = None,
    ) -> None:
        """``executor``: opt in to overlapping a large bytes put's file work with its hash
        (module docstring); ``None`` (the default) does everything on the caller's thread."""
        if not MIB <= chunk_size <= 4 * MIB:
            raise InvalidArgument("chunk_size must be 1-4 MiB", details={"field": "chunk_size"})
        self.root = Path(root)
        self.store = store
        self.chunk_size = chunk_size
        self.durable = durable
        self.executor = executor
        if os.path.lexists(self.root) and not self.root.is_dir():
            raise StoreFailure("the content store root is not a directory", details={})
        self._ready = False  # blobs/, refs/, tmp/ made (by the first put, never by a read)
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

    def _prepare(self) -> None:
        """The store's directories, made before the first write."""
        if not self._ready:
            for sub in (self._blobs, self._refs, self._tmp):
                os.makedirs(sub, exist_ok=True)
            self._ready = True

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
            self._prepare()
            if (
                self.executor is not None
                and isinstance(content, bytes | bytearray | memoryview)
                and (view := memoryview(content).cast("B")).nbytes >= PARALLEL_MIN
            ):
                length = self._put_overlapped(files, hasher, view, self.executor)
                del view
            else:
                for chunk in content_chunks(content, self.chunk_size):
                    hasher.update(chunk)
                    files.write(chunk)
                    length += len(chunk)
                files.finish()
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

    def _put_overlapped(
        self, files: _Files, hasher: hashlib._Hash, view: memoryview, executor: Executor
    ) -> int:
        """Hash ``view`` here while ``executor`` does the file work; returns the length.

        A job the pool has not started when the hash is done is cancelled and done here
        (never wait behind other work), as is one a shut-down pool refuses; a job that
        started is waited for, and its error raised.  Every chunk reference is dropped
        before returning."""
        pieces = list(content_chunks(view, self.chunk_size))
        try:
            try:
                job: Future[None] | None = executor.submit(files.write_all, pieces)
            except RuntimeError:  # the pool is shut down: the caller does the file work
                job = None
            try:
                for piece in pieces:
                    hasher.update(piece)
            finally:
                mine = job is None or job.cancel()  # True: it never ran, and never will
                error = None if mine or job is None else job.exception()  # waits if started
            if mine:
                files.write_all(pieces)
            elif error is not None:
                raise error
            return view.nbytes
        finally:
            pieces.clear()  # the job's argument too: no view of the caller's buffer stays

    def _load(self, ref: ContentRef) -> ContentPolicy:
        for path in self._ref_paths(ref.object_id):
            try:
                raw = read_regular(path)
                if raw is None:
                    raise ValueError("not a regular file")
                record = json.loads(raw)
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                raise StoreFailure("content reference is unreadable", details={}) from exc
            return policy_from_wire(record["policy"])
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
                data = read_regular(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StoreFailure("cannot read content", details={}) from exc
            if data is None:
                raise StoreFailure("content object is not a regular file", details={})
            break
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
        if not os.path.isdir(self._tmp):
            return removed
        for temp in (self.root / "tmp").iterdir():
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()
                removed += 1
        return removed

    def object_ids(self) -> list[str]:
        return sorted(p.name[: -len(".json")] for p in (self.root / "refs").rglob("*.json"))

    def blobs(self) -> Iterable[Path]:
        return sorted(p for p in (self.root / "blobs").rglob("*") if p.is_file())
