"""Port adapters (SQLite, JSONL, filesystem content store, memory folder).

The only kernel-side code that touches disk.  Every adapter passes the shared
conformance suite in ``tests/conformance``.
"""
