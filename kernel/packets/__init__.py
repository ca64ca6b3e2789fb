"""Typed context packets (second seed §4; design 108 §12): the assembler, its anticorruption
detectors, trust/sensitivity/sinks and provider context profiles.

Public modules:

* ``anticorruption`` — secret, prompt-injection and local-path detectors
* ``assembler`` — ``ContextPacket``, ``ContextAssembler``
* ``profiles`` — ``ProviderContextProfile`` and ``plan_budget``
* ``trust`` — trust labels, sinks and their checks

Modules import only public names from other packages; the names a module exports are
its ``__all__``.
"""

__all__ = ("anticorruption", "assembler", "profiles", "trust")
