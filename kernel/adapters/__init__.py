"""Port adapters: the only kernel-side code that touches disk.

Subpackages, one per medium:

* ``in_memory`` — naive in-memory ports (plain dicts, deep copies): the models the
  conformance suites trust;
* ``sqlite`` — the SQLite memory authority and session store (stdlib ``sqlite3``, WAL);
* ``jsonl`` — JSONL session transcripts, compatible with the legacy CLI;
* ``fs`` — the content-addressed filesystem ContentPort;
* ``memory_folder`` — the file-based memory store folder and its tools.

Every adapter passes the shared conformance suite in ``tests/conformance``.  Only
``shadow/bootstrap.py`` wires adapters to the kernel.
"""

__all__ = ("fs", "in_memory", "jsonl", "memory_folder", "sqlite")
