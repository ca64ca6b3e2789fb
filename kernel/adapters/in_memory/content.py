"""In-memory ContentPort: the model the content conformance suite trusts."""

from __future__ import annotations

import hashlib

from kernel.adapters.fs.content import content_chunks
from kernel.compaction.evidence import DIGEST_PREFIX, check_access, object_id_for, ref_summary
from kernel.errors import ContentUnavailable, DigestMismatch
from kernel.ports import AccessContext, ContentPolicy, ContentRef, ContentSource, PurgeReceipt


class InMemoryContentPort:
    def __init__(self, *, store: str = "in-memory-content") -> None:
        self.store = store
        self.blobs: dict[str, bytes] = {}
        self.refs: dict[str, tuple[ContentRef, ContentPolicy]] = {}

    def put(self, content: ContentSource, policy: ContentPolicy) -> ContentRef:
        data = b"".join(bytes(chunk) for chunk in content_chunks(content, 1024 * 1024))
        hex_digest = hashlib.sha256(data).hexdigest()
        self.blobs.setdefault(hex_digest, data)
        ref = ContentRef(
            store=self.store,
            object_id=object_id_for(hex_digest, policy),
            digest=DIGEST_PREFIX + hex_digest,
            byte_length=len(data),
            summary=ref_summary(policy),
            mime_type=policy.mime_type,
            access_policy=policy.access_policy,
        )
        self.refs[ref.object_id] = (ref, policy)
        return ref

    def get(self, ref: ContentRef, access: AccessContext) -> bytes:
        entry = self.refs.get(ref.object_id)
        if entry is None:
            raise ContentUnavailable(
                "content reference is unavailable", details={"objectId": ref.object_id}
            )
        check_access(entry[1], access, ref.object_id)
        data = self.blobs.get(ref.object_id.split(".", 1)[0])
        if data is None:
            raise ContentUnavailable(
                "content object is missing", details={"objectId": ref.object_id}
            )
        if DIGEST_PREFIX + hashlib.sha256(data).hexdigest() != ref.digest or len(data) != (
            ref.byte_length
        ):
            raise DigestMismatch("content digest mismatch", details={"objectId": ref.object_id})
        return data

    def purge(self, ref: ContentRef, fence: str) -> PurgeReceipt:
        existed = self.refs.pop(ref.object_id, None) is not None
        hex_digest = ref.object_id.split(".", 1)[0]
        if not any(oid.split(".", 1)[0] == hex_digest for oid in self.refs):
            self.blobs.pop(hex_digest, None)
        return PurgeReceipt(self.store, ref.object_id, fence, existed=existed)
