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
through a ``memoryview``; streams are read chunk by chunk.  ``get`` re-hashes
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

    def _publish(self, fd: int, temp: Path, final: Path) -> None:
        try:
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(temp, final)

    # ----------------------------------------------------------------- port
    def put(self, content: ContentSource, policy: ContentPolicy) -> ContentRef:
        hasher = hashlib.sha256()
        length = 0
        hashed = False  # True once every byte is written and hashed
        hex_digest = ""
        fd, temp = self._temp()
        try:
            try:
                for chunk in _chunks(content, self.chunk_size):
                    hasher.update(chunk)
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view) :]
                    length += len(chunk)
            except BaseException:
                os.close(fd)
                raise
            hex_digest = hasher.hexdigest()
            hashed = True
            blob = self._blob(hex_digest)
            if blob.exists():  # same bytes already stored: keep the published copy
                os.close(fd)
                temp.unlink(missing_ok=True)
            else:
                self._publish(fd, temp, blob)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            # A concurrent writer published the same bytes first (Windows refuses to
            # replace a file another process has open): content addressing makes it ours.
            if not (hashed and self._blob(hex_digest).exists()):
                raise StoreFailure("cannot store content", details={}) from exc
        except BaseException:
            temp.unlink(missing_ok=True)
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
        fd, temp = self._temp()
        try:
            os.write(fd, record)
            self._publish(fd, temp, self._ref(ref.object_id))
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise StoreFailure("cannot store content reference", details={}) from exc
        return ref

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
