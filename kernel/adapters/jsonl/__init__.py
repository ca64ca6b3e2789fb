"""JSONL session transcripts, compatible with the legacy CLI.

Public modules:

* ``chain`` — the legacy transcript hash chain and a cross-platform file lock
* ``messages`` — legacy replay messages ↔ canonical ContextItems
* ``session`` — ``JsonlSessionPort``

Modules import only public names from other packages; the names a module exports are
its ``__all__``.
"""

__all__ = ("chain", "messages", "session")
