"""The memory summary contributor (second seed §1): ``memory_summary.md`` is the only
memory injected into a turn by default, and only as a :class:`ContextPacket` through the
assembler (:func:`kernel.packets.assembler.assemble`: sink admission, trust, dedup,
anticorruption, the 1,000-token packet cap).

``MEMORY.md``, ``rollout_summaries/`` and the notes are never contributed: the model
reads them only through the memory tools.  The packet cites its file
(``memory_summary.md``), is keyed by the file's digest (a changed summary is another
cache key) and is invalidated when its source changes.  Pure: the caller reads the file
(``MemoryFolder.summary_for_prompt``) and passes its text and digest.
"""

from __future__ import annotations

from typing import Final

from kernel.errors import InvalidArgument
from kernel.packets.assembler import DEFAULT_PACKET_TOKEN_CAP, ContextPacket, PacketRole
from kernel.packets.trust import SourceKind
from kernel.vocabulary import Sensitivity, Trust

SUMMARY_FILE: Final = "memory_summary.md"
SOURCE: Final = SourceKind.MEMORY  # kernel-governed memory: user trust at most
INVALIDATION: Final = f"source_change:{SUMMARY_FILE}"


def memory_summary_packet(text: str, digest: str, *,
                          allowed_sinks: frozenset[str] = frozenset({"provider"}),
                          sensitivity: Sensitivity = Sensitivity.PERSONAL
                          ) -> ContextPacket | None:
    """The summary as the turn's one default memory packet (``None`` when there is none).

    ``digest`` is the file's digest (``sha256:…``): the packet's id and cache key derive
    from it.  The budget is the assembler's packet cap (1k tokens): a longer summary is
    truncated by the assembler, never passed whole."""
    if not isinstance(text, str):
        raise InvalidArgument("the memory summary must be text", details={"field": "text"})
    if not isinstance(digest, str) or not digest.startswith("sha256:") or len(digest) < 19:
        raise InvalidArgument("the memory summary's digest must be a sha256 digest",
                              details={"field": "digest"})
    if not text.strip():
        return None
    return ContextPacket(
        packet_id=f"memory-summary-{digest[7:19]}", source=SOURCE, scope="user",
        role=PacketRole.USER, trust_level=Trust.USER, sensitivity=sensitivity,
        allowed_sinks=allowed_sinks,
        token_budget=DEFAULT_PACKET_TOKEN_CAP, cache_key=f"{SUMMARY_FILE}@{digest}",
        invalidation=INVALIDATION, citation=SUMMARY_FILE, content=text)
