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
duration of one ``put``.  ``get`` re-hashes
what it reads (``digest_mismatch`` on any difference), a missing object is
``content_unavailable``, and the stored policy is re-checked against the reader
(:func:`kernel.content.check_access`).  ``purge`` removes the ref and, when no
other ref shares it, the blob.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import threading
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
    """

    def __init__(self) -> None:
        self._hasher = hashlib.sha256()
        self._queue: queue.Queue[bytes | memoryview | None] | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def update(self, chunk: bytes | memoryview) -> None:
        if self._thread is None:
            if len(chunk) < PARALLEL_MIN:
                self._hasher.update(chunk)
                return
            self._queue = queue.Queue(maxsize=1)
            self._thread = threading.Thread(target=self._run, name="fs-content-sha256")
            self._thread.daemon = True
            self._thread.start()
        assert self._queue is not None
        self._queue.put(chunk)

    def _run(self) -> None:
        assert self._queue is not None
        while (chunk := self._queue.get()) is not None:
            if self._error is None:  # after a failure keep draining: never block the producer
                try:
                    self._hasher.update(chunk)
                except BaseException as exc:
                    self._error = exc

    def close(self) -> None:
        """Stop the helper thread (idempotent; also on the error paths of ``put``)."""
        if self._thread is not None:
            assert self._queue is not None
            self._queue.put(None)
            self._thread.join()
            self._thread = None

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

    def __init__(self, fd: int, path: Path) -> None:
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
            self.path.unlink(missing_ok=True)


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

    # ----------------------------------------------------------------- paths
    def _blob(self, hex_digest: str) -> Path:
        return self.root / "blobs" / hex_digest[:2] / hex_digest[2:4] / hex_digest

    def _ref(self, object_id: str) -> Path:
        head = object_id.split(".", 1)[0]
        if len(head) != 64 or not set(object_id.replace(".", "")) <= _HEX:
            raise ContentUnavailable("unknown content object", details={"objectId": object_id})
        return self.root / "refs" / head[:2] / head[2:4] / f"{object_id}.json"

    def _temp(self) -> tuple[int, Path]:
        name = f"tmp-{os.getpid()}-{os.urandom(8).hex()}"
        path = self.root / "tmp" / name
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        return os.open(path, flags, 0o644), path

    def _publish(self, staged: _Staged, final: Path) -> None:
        temp = staged.path
        try:
            if self.durable:
                os.fsync(staged.fd)
        finally:
            staged.close()
        parent = os.path.dirname(final)
        if parent not in self._dirs:
            os.makedirs(parent, exist_ok=True)
            self._dirs.add(parent)
        try:
            os.replace(temp, final)
        except FileNotFoundError:  # a shard directory removed behind our back
            if not os.path.exists(temp):
                raise
            os.makedirs(parent, exist_ok=True)
            os.replace(temp, final)

    # ----------------------------------------------------------------- port
    def put(self, content: ContentSource, policy: ContentPolicy) -> ContentRef:
        hasher = _StreamHash()
        staged: list[_Staged] = []  # temp files: closed and removed unless published
        hashed = False  # True once every byte is written and hashed
        hex_digest = ""
        length = 0
        ref_temp: _Staged | None = None
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
                ref_temp = self._stage(staged)  # created while the last chunk is hashed
                hex_digest = hasher.hexdigest()
            finally:
                hasher.close()
            hashed = True
            blob = self._blob(hex_digest)
            if os.path.exists(blob):  # same bytes already stored: keep the published copy
                blob_temp.discard()
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
            object_id=object_id_for(hex_digest, policy),
            digest=DIGEST_PREFIX + hex_digest,
            byte_length=length,
            summary=ref_summary(policy),
            recoverable=True,
            mime_type=policy.mime_type,
            access_policy=policy.access_policy,
        )
        record = json.dumps({"ref": ref.to_wire(), "policy": _policy_wire(policy)}).encode("utf-8")
        try:
            if ref_temp is None:
                ref_temp = self._stage([])
            os.write(ref_temp.fd, record)
            self._publish(ref_temp, self._ref(ref.object_id))
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
