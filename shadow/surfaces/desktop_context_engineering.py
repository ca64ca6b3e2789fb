"""Desktop ``ContextEngineering.buildOptimizedPrompt({systemPrompt, messages, tools, …})``
→ projection.

Input binding: ``systemPrompt = input.messages[0].content``, ``messages =
input.messages.slice(1)``.  Output ``{messages, metadata}``: a cleaned system prompt
(dates, uuids and session ids replaced — mapped to ``<scenario>:m0000`` with
``altered: "cleaned"``, so its digest differs), the history, then reminders (derived).
The builder keeps only ``role``, ``content`` and ``tool_calls``: tool messages lose
``tool_call_id`` and are matched by content in occurrence order with their binding
marked lost (a ``tool_pair.mismatch`` legacy defect); ``pinned`` is dropped from the
wire.  ``metadata`` (cache breakpoints, part lengths) is noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shadow.boundary import mapping_at
from shadow.canonical import Canon
from shadow.fixtures import Capture
from shadow.projection import Projection
from shadow.surfaces._messages import Source
from shadow.surfaces.cli_compress import project_chain


def _stats(out: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any]]:
    meta = mapping_at(out, "metadata")
    return None, {k: meta[k] for k in sorted(meta) if not isinstance(meta[k], (dict, list))}


def _cleaned(m: Mapping[str, Any], sources: Sequence[Source], used: set[int]
             ) -> tuple[int, str] | None:
    if m.get("role") == "system" and 0 not in used and sources and \
            sources[0].msg.get("role") == "system" and sources[0].seq == 0:
        return 0, "cleaned"
    return None


def adapt(canon: Canon, capture: Capture, siblings: Mapping[str, Capture] | None = None
          ) -> Projection:
    return project_chain(canon, capture, _stats, pair_repair=False, rewrite=_cleaned)
