"""SQLite adapters (stdlib ``sqlite3``, WAL): the memory authority and the session store.

Public modules:

* ``connection`` — connections, transactions, queries, read-only opening
* ``memory_store`` — ``SqliteMemoryPort``
* ``session`` — ``SqliteSessionPort``

Modules import only public names from other packages; the names a module exports are
its ``__all__``.
"""

__all__ = ("connection", "memory_store", "session")
