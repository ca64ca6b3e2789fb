"""Canonical forms (design 108 §6): canonical JSON and domain-tagged digests, the peer's
collation, timestamps, argument checks and the ContextItem / MemoryRecord normalisers.

Public modules:

* ``checks`` — the argument checks, in the peer's wording (one family for every API)
* ``collation`` — ``collation_key`` (ICU root, the peer's ``localeCompare``)
* ``digest`` — canonical JSON, ``digest``, profiles
* ``item_batch`` — many ContextItems at once (the planner's batch path, digest-style fast path)
* ``jsjson`` — JavaScript ``JSON.stringify`` byte for byte (compact or indented)
* ``items`` — ``normalize_context_item``, the ContextItem field rules, ``kernel_digest`` and
  its gate (``CanonicalKeys``, ``canonical_keys``, ``proven_keys``)
* ``records`` — ``normalize_memory_record``, :class:`VerifiedRecord` (trusted by type)
* ``timestamps`` — ``parse_timestamp``, ``epoch_ms_to_iso``, ``iso_to_epoch_ms``

Modules import only public names from other packages; the names a module exports are
its ``__all__``.
"""

__all__ = ("checks", "collation", "digest", "item_batch", "items", "jsjson", "records",
           "timestamps")
