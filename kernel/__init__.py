"""Canonical Context/Memory Kernel (design 108): the pure functional core.

Everything in this package except ``kernel.adapters`` is free of I/O, clocks,
randomness and environment access; time, ids and randomness are passed in as
values.  ``shadow`` (the imperative shell) imports this package, never the
reverse.
"""

SCHEMA_VERSION = 1
__all__ = ("SCHEMA_VERSION",)
