"""CLI ``compactConversationWithProvider(messages, opts)`` (provider-backed) → projection.

Messages map exactly as for ``cli.compress`` (always with tool-pair repair).  The
provider outcome comes from the native fields: ``stats.degraded`` /
``degradedReason`` (category only: the text before the first ``:``),
``summaryUsage`` (usage known) or ``summaryUsageUnknown`` (unknown), ``usageEvent`` /
``usageUnknownEvent``, and a thrown ``AbortError`` (cancelled, aborted).  ``truth`` is
what the recorded exchange for this call says (``shadow.recorded_provider``): the
invariant checks compare the two, so a masked degradation or usage is caught.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shadow.boundary import mapping_at
from shadow.canonical import Canon
from shadow.fixtures import Capture
from shadow.projection import Projection, ProviderOutcome
from shadow.projection_wire import code_word
from shadow.recorded_provider import exchanges, secret_calls, truth_of
from shadow.surfaces.cli_compress import _cli_stats, project_chain


def category(reason: Any) -> str | None:
    if not isinstance(reason, str) or not reason:
        return None
    head = reason.split(":", 1)[0].strip()[:64]
    return code_word(head) if head else None


def _provider(canon: Canon, capture: Capture, k: int, out: Mapping[str, Any] | None,
              error: Any) -> ProviderOutcome:
    doc = canon.doc
    n = len(exchanges(doc, capture.surface, capture.entry))
    truth = truth_of(doc, capture.surface, capture.entry, k + 1)
    if isinstance(error, Mapping):
        name = str(error.get("name") or "Error")
        return ProviderOutcome(status="aborted" if name == "AbortError" else "failed",
                               requests=k + 1, recorded=min(n, k + 1), degraded=None,
                               cancelled=name == "AbortError", truth=truth)
    stats = mapping_at(out or {}, "stats")
    degraded = stats.get("degraded") if isinstance(stats.get("degraded"), bool) else None
    if stats.get("summaryUsageUnknown") is True or (out or {}).get("usageUnknownEvent"):
        usage = "unknown"
    elif isinstance(stats.get("summaryUsage"), Mapping) or (out or {}).get("usageEvent"):
        usage = "known"
    else:
        usage = None
    summarized = "summarize" in str(stats.get("strategy") or "")
    status = "degraded" if degraded else ("committed" if summarized else "none")
    return ProviderOutcome(status=status, requests=k + 1 if summarized else k,
                           recorded=min(n, k + 1), degraded=degraded,
                           degraded_reason=category(stats.get("degradedReason")), usage=usage,
                           cancelled=False, truth=truth)


def adapt(canon: Canon, capture: Capture, siblings: Mapping[str, Capture] | None = None
          ) -> Projection:
    facts: dict[str, Any] = {"order": "pinned_block"}
    sent = secret_calls(canon.doc, capture.surface, capture.entry)
    if sent:
        facts["sent_secrets"] = sent
    return project_chain(
        canon, capture, _cli_stats, pair_repair=True,
        provider_of=lambda k, out, err: _provider(canon, capture, k, out, err), facts=facts)
