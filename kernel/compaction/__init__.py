"""Compaction (design 108 §8): the lifecycle machine, the invariants checked before a
compare-and-swap commit, the use case over the ports, summary validation, the
``thread/compact/start`` lifecycle and externalized-evidence rules.

Public modules:

* ``evidence`` — rules every ContentPort shares (access checks, object ids)
* ``invariants`` — ``check_invariants`` (hard invariants before commit)
* ``machine`` — the compaction state machine (a :class:`kernel.machine.Machine`)
* ``service`` — ``compact_context``, ``reconcile`` over the ports
* ``summary`` — validation of a summarizer's output
* ``thread`` — ``thread/compact/start`` lifecycle as values

Modules import only public names from other packages; the names a module exports are
its ``__all__``.
"""

__all__ = ("evidence", "invariants", "machine", "service", "summary", "thread")
