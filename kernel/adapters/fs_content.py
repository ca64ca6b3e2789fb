"""Content-addressed ContentPort on the filesystem (design 108 §8.4).

Layout under ``root``::

    blobs/<h0h1>/<h2h3>/<sha256 hex>              the bytes, sharded by digest
    refs/<h0h1>/<h2h3>/<objectId>.json           ContentRef + access policy
    tmp/                                          write-to-temp staging

``objectId`` is ``<sha256 hex>.<policy fingerprint>`` (hex only: safe on
Windows and case-insensitive filesystems).  Identical bytes are stored once.

``put`` streams: the input (bytes, a binary file object, or an iterable of
chunks) is hashed and written in ``chunk_size`` pieces (1–4 MiB) to a temp
file, fsynced, then published with ``os.replace`` (atomic on POSIX and
Windows).  A 100 MiB result is never copied in memory: bytes input is sliced
through a ``memoryview``; streams are read chunk by chunk.  Large chunks are
hashed on a helper thread while the calling thread writes them (``hashlib`` and
``os.write`` release the GIL), so a put costs about one SHA-256 pass instead of
a hash plus a copy; at most three chunks are referenced at once (one hashed,
one queued and written, one being read), and the thread lives only for the
duration of one ``put`` (if every core was busy and it never ran, the caller
hashes instead and the thread exits as soon as it is scheduled, holding
nothing).  Everything that does not need the digest — creating both temp
files, the fsync of the blob, the policy fingerprint — runs while the last
chunk is hashed; after it only the shard directories (one ``mkdir`` each; a
shard made by this put is known empty, so no existence check), two renames and
the ref record remain.  ``get`` re-hashes
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
from collections.abc import Iterable, Iterator
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
#: Chunks at least this large are hashed on the helper thread (below, a thread costs
#: more than the overlap saves).
PARALLEL_MIN: Final = 256 * 1024
_HEX = frozenset("0123456789abcdef")


class _StreamHash:
    """SHA-256 of a chunk sequence; large chunks are hashed on a helper thread.

    Chunks are hashed in order: small leading chunks inline, then everything on
    the thread (started by the first large chunk).  ``queue`` holds one chunk, so a
    slow hash blocks the producer instead of buffering the stream.

    The helper is a bare ``_thread`` thread joined through a lock it releases as
    its last action: ``threading.Thread.start`` waits for the new thread to be
    scheduled (about 0.04 ms idle, a whole scheduler slice when the other cores are
    busy), which is a tenth of the hash of 1 MiB; here the caller goes on writing
    at once and only waits in :meth:`close`.  Whoever takes ``claim`` first hashes:
    if the helper has still not run when the caller is done (every core busy), the
    caller hashes the pending chunks itself instead of waiting a scheduler slice for
    it; the helper then finds the claim taken and exits at once, holding nothing.
    """

    def __init__(self) -> None:
        self._hasher = hashlib.sha256()
        self._queue: queue.Queue[bytes | memoryview | None] | None = None
        self._done: _thread.LockType | None = None  # held while the helper runs
        self._claim = _thread.allocate_lock()  # taken by whoever hashes the large chunks
        self._error: BaseException | None = None
        self._first: bytes | memoryview = b""  # handed to the helper without a queue trip

    def update(self, chunk: bytes | memoryview) -> None:
        if self._done is None:
            if len(chunk) < PARALLEL_MIN:
                self._hasher.update(chunk)
                return
            self._queue = queue.Queue(maxsize=1)
            done = _thread.allocate_lock()
            done.acquire()
            self._first = chunk
            _thread.start_new_thread(self._run, (done,))  # raises: no thread started
            self._done = done
            return
        assert self._queue is not None
        self._queue.put(chunk)

    def _hash(self, chunk: bytes | memoryview) -> None:
        if self._error is None:  # after a failure keep draining: never block the producer
            try:
                self._hasher.update(chunk)
            except BaseException as exc:
                self._error = exc

    def _run(self, done: _thread.LockType) -> None:
        try:
            if not self._claim.acquire(False):
                return  # the caller already hashed everything itself
            assert self._queue is not None
            first, self._first = self._first, b""
            self._hash(first)  # at once: the GIL is released while it runs
            del first  # hold no more than the chunk being hashed
            while (chunk := self._queue.get()) is not None:
                self._hash(chunk)
                del chunk
        finally:
            done.release()

    def close(self) -> None:
        """Stop the helper thread (idempotent; also on the error paths of ``put``)."""
        if self._done is None:
            return
        assert self._queue is not None
        if self._claim.acquire(False):  # the helper never ran: hash here, do not wait for it
            first, self._first = self._first, b""
            self._hash(first)
            while True:
                try:
                    chunk = self._queue.get_nowait()
                except queue.Empty:
                    break
                if chunk is not None:
                    self._hash(chunk)
        else:
            self._queue.put(None)
            self._done.acquire()  # released by the helper's last statement
        self._done = None

    def hexdigest(self) -> str:
        self.close()
        if self._error is not None:
            raise self._error
        return self._hasher.hexdigest()


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
    def _blob(self, hex_digest: str) -> Path:
        return self.root / "blobs" / hex_digest[:2] / hex_digest[2:4] / hex_digest

    def _ref(self, object_id: str) -> Path:
        head = object_id.split(".", 1)[0]
        if len(head) != 64 or not set(object_id.replace(".", "")) <= _HEX:
            raise ContentUnavailable("unknown content object", details={"objectId": object_id})
        return self.root / "refs" / head[:2] / head[2:4] / f"{object_id}.json"

    def _temp(self) -> tuple[int, str]:
        path = os.path.join(self._tmp, f"tmp-{os.getpid()}-{os.urandom(8).hex()}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        return os.open(path, flags, 0o644), path

    def _shard(self, parent: str) -> bool:
        """Make sure the shard directory ``parent`` exists; True when this call created
        it (then nothing can be published in it yet).  One ``mkdir`` in the usual case."""
        if parent in self._dirs:
            return False
        try:
            os.mkdir(parent)
            created = True
        except FileExistsError:
            created = False
        except FileNotFoundError:  # the upper shard level is new too
            os.makedirs(os.path.dirname(parent), exist_ok=True)
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
        hasher = _StreamHash()
        staged: list[_Staged] = []  # temp files: closed and removed unless published
        hashed = False  # True once every byte is written and hashed
        hex_digest = ""
        length = 0
        ref_temp: _Staged | None = None
        policy_suffix, summary, policy_record = "", "", {}
        try:
            try:
                blob_temp: _Staged | None = None
                write = os.write
                for chunk in _chunks(content, self.chunk_size):
                    hasher.update(chunk)  # large chunks: hashed meanwhile on the helper thread
                    if blob_temp is None:  # opened once hashing runs: the two overlap
                        blob_temp = self._stage(staged)
                    fd, view = blob_temp.fd, memoryview(chunk)
                    while view:
                        view = view[write(fd, view) :]
                    length += len(chunk)
                if blob_temp is None:  # empty content
                    blob_temp = self._stage(staged)
                # While the last chunk is hashed: flush the blob, stage the ref record.
                self._seal(blob_temp)
                ref_temp = self._stage(staged)
                # Digest-independent parts of the ref, also while the hash finishes.
                policy_suffix = object_id_for("", policy)  # ".<policy fingerprint>"
                summary, policy_record = ref_summary(policy), _policy_wire(policy)
                hex_digest = hasher.hexdigest()
            finally:
                hasher.close()
            hashed = True
            shard = os.path.join(self._blobs, hex_digest[:2], hex_digest[2:4])
            blob = os.path.join(shard, hex_digest)
            # A shard made just now is empty; otherwise the same bytes may be stored.
            if not self._shard(shard) and os.path.exists(blob):
                blob_temp.discard()  # content addressing: keep the published copy
            else:
                self._publish(blob_temp, blob)
        except OSError as exc:
            for temp in staged:
                temp.discard()
            # A concurrent writer published the same bytes first (Windows refuses to
            # replace a file another process has open): content addressing makes it ours.
            if not (hashed and self._blob(hex_digest).exists()):
                raise StoreFailure("cannot store content", details={}) from exc
            ref_temp = None
        except BaseException:
            for temp in staged:
                temp.discard()
            raise
        ref = ContentRef(
            store=self.store,
            object_id=hex_digest + policy_suffix,  # = object_id_for(hex_digest, policy)
            digest=DIGEST_PREFIX + hex_digest,
            byte_length=length,
            summary=summary,
            recoverable=True,
            mime_type=policy.mime_type,
            access_policy=policy.access_policy,
        )
        record = json.dumps({"ref": ref.to_wire(), "policy": policy_record}).encode("utf-8")
        try:
            if ref_temp is None:
                ref_temp = self._stage([])
            os.write(ref_temp.fd, record)
            self._seal(ref_temp)
            shard = os.path.join(self._refs, hex_digest[:2], hex_digest[2:4])
            self._shard(shard)
            self._publish(ref_temp, os.path.join(shard, f"{ref.object_id}.json"))
        except BaseException as exc:
            if ref_temp is not None:
                ref_temp.discard()
            if isinstance(exc, OSError):
                raise StoreFailure("cannot store content reference", details={}) from exc
            raise
        return ref

    def _stage(self, staged: list[_Staged]) -> _Staged:
        fd, path = self._temp()
        temp = _Staged(fd, path)
        staged.append(temp)
        return temp

    def _load(self, ref: ContentRef) -> ContentPolicy:
        try:
            record = json.loads(self._ref(ref.object_id).read_bytes())
        except FileNotFoundError:
            raise ContentUnavailable(
                "content reference is unavailable", details={"objectId": ref.object_id}
            ) from None
        except (OSError, ValueError) as exc:
            raise StoreFailure("content reference is unreadable", details={}) from exc
        return _policy_from_wire(record["policy"])

    def get(self, ref: ContentRef, access: AccessContext) -> bytes:
        policy = self._load(ref)
        check_access(policy, access, ref.object_id)
        hex_digest = ref.object_id.split(".", 1)[0]
        try:
            with open(self._blob(hex_digest), "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            raise ContentUnavailable(
                "content object is missing", details={"objectId": ref.object_id}
            ) from None
        except OSError as exc:
            raise StoreFailure("cannot read content", details={}) from exc
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
            path = self._ref(ref.object_id)
        except ContentUnavailable:
            return PurgeReceipt(self.store, ref.object_id, fence, existed=False)
        existed = path.exists()
        path.unlink(missing_ok=True)
        hex_digest = ref.object_id.split(".", 1)[0]
        siblings = list(path.parent.glob(f"{hex_digest}.*.json"))
        if not siblings:
            with contextlib.suppress(FileNotFoundError):
                self._blob(hex_digest).unlink()
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
