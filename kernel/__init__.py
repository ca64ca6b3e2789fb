"""Canonical Context/Memory Kernel (design 108): the pure functional core.

Packages, one concept each (ADR 0013):

* ``kernel.vocabulary`` — scopes, trust, sensitivity, states, the identifier pattern and
  numeric limits, defined once;
* ``kernel.canonical`` — canonical JSON and digests, collation, timestamps, argument
  checks, the ContextItem / MemoryRecord normalisers;
* ``kernel.planning`` — ``plan_context`` under a token budget;
* ``kernel.packets`` — typed context packets, the assembler, trust and provider profiles;
* ``kernel.compaction`` — the compaction machine, invariants and use case;
* ``kernel.memory`` — the memory lifecycle, policy, deletion, recall and ``MemoryKernel``;
* ``kernel.contracts`` — the frozen v1 wire contracts; ``kernel.ports``,
  ``kernel.errors``, ``kernel.outcomes`` — ports, the error tree, typed outcomes;
* ``kernel.adapters`` — the only code here that touches disk.

Everything except ``kernel.adapters`` is free of I/O, clocks, randomness and
environment access; time, ids and randomness are passed in as values.  ``shadow`` (the
imperative shell) imports this package, never the reverse.  ``SCHEMA_VERSION`` is the
wire schema version every contract carries.
"""

SCHEMA_VERSION = 1
__all__ = ("SCHEMA_VERSION",)
