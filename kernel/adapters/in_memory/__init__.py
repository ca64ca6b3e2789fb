"""Naive in-memory ports: the models the conformance suites trust (plain dicts, deep copies).

Public modules:

* ``content`` — ``InMemoryContentPort``
* ``memory_store`` — ``InMemoryMemoryPort``
* ``projection`` — ``InMemoryProjectionStore`` (a PurgePort)
* ``session`` — ``InMemorySessionPort``

Modules import only public names from other packages; the names a module exports are
its ``__all__``.
"""

__all__ = ("content", "memory_store", "projection", "session")
