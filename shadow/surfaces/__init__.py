"""Surface adapters: one module per legacy surface, each ``adapt(canon, capture) ->
Projection``.  ``ADAPTERS`` maps a capture name (``<surface>.<entry-slug>``) to its
adapter; ``adapter_for`` also accepts new captures whose name extends a known one
(``cli.compress.raw-wire`` → ``cli.compress``).  Cross-surface pairs (same input, same
job) are listed in ``TWINS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from shadow.canonical import Canon
from shadow.fixtures import Capture
from shadow.projection import Projection
from shadow.surfaces import (
    cli_compress,
    cli_jsonl_session,
    cli_provider_compaction,
    desktop_compress,
    desktop_context_engineering,
    ide_context_center,
    session_core_memory,
)

#: ``adapt(canon, capture, siblings)``: ``siblings`` are the scenario's other captures
#: (by name), for a surface that persists another one's result (the JSONL store).
Adapter = Callable[[Canon, Capture, Mapping[str, Capture]], Projection]

ADAPTERS: Final[dict[str, Adapter]] = {
    "cli.compress": cli_compress.adapt,
    "cli.provider-compaction": cli_provider_compaction.adapt,
    "cli.jsonl-session": cli_jsonl_session.adapt,
    "desktop.compress": desktop_compress.adapt,
    "desktop.context-engineering": desktop_context_engineering.adapt,
    "vscode.context-center": ide_context_center.adapt,
    "jetbrains.context-center": ide_context_center.adapt,
    "session-core.memory": session_core_memory.adapt,
}

#: Surfaces that consumed the same input for the same job and must agree (§14).
TWINS: Final[tuple[tuple[str, str], ...]] = (
    ("vscode.context-center", "jetbrains.context-center"),
    ("cli.compress", "desktop.compress"),
    ("cli.compress", "cli.compress.raw-wire"),
    ("cli.provider-compaction", "cli.provider-compaction.raw-wire"),
)


def adapter_for(capture_name: str) -> Adapter | None:
    if capture_name in ADAPTERS:
        return ADAPTERS[capture_name]
    best = max((k for k in ADAPTERS if capture_name.startswith(k + ".")), key=len, default=None)
    return ADAPTERS[best] if best else None
