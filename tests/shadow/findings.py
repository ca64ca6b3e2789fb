"""Known findings of the bundled corpus against the live kernel (issue 15's fresh evidence).

Each is a NO-GO the evidence shows, kept in the corpus on purpose and named here so tests
that need a clean corpus can leave it out and tests of the corpus can assert it exactly.
Fixing one means removing it here (and the test that asserts it then says so).
"""

from __future__ import annotations

from typing import Final

#: cases failing phase 1 (blocking): on a long Desktop session the kernel summarizes where
#: the Desktop truncates first, and asks a provider the legacy never asked — an unrecorded
#: request, design 108 §16 ``shadow.side_effect``
FINDINGS: Final = frozenset({("provider-cancelled-long-session", "desktop.compress")})

#: cases failing at ``major`` (phase 2 on): after a crash tore the last event, the kernel
#: verifies the whole lines and compacts the recovered session where the legacy store
#: refuses to read it until its next append repairs the tail
FINDINGS_MAJOR: Final = frozenset({("session-store-crash-torn-tail", "cli.jsonl-session")})
