"""The governed memory lifecycle (design 108 §9–§11): the lifecycle table and reducer, policy,
conflicts, consolidation, deletion and purge, recall and its index, and the use cases over
the ports (``MemoryKernel``).

Public modules:

* ``conflicts`` — the conflict relation
* ``consolidation`` — session evidence → candidate memories
* ``deletion`` — deletion and its reconciliation
* ``index`` — the recall index (in memory, rebuildable)
* ``lexical`` — the two analyzers and the matching model
* ``lifecycle`` — the memory transition table and ``transition_memory``
* ``policy`` — supersession, promotion, inherited policy
* ``purge`` — the purge step: every copy, its own request, a receipt each
* ``recall`` — ``recall_memory``, ``rank_memory_records``
* ``service`` — ``MemoryKernel``: propose, decide, recall, delete over ports
* ``soul`` — ``MemorySoulConfig``: the SOUL.md import preview, the artifact brief, personas
* ``summary_contributor`` — ``memory_summary.md`` as the one default memory packet

Modules import only public names from other packages; the names a module exports are
its ``__all__``.
"""

__all__ = (
    "conflicts",
    "consolidation",
    "deletion",
    "index",
    "lexical",
    "lifecycle",
    "policy",
    "purge",
    "recall",
    "service",
    "soul",
    "summary_contributor",
)
