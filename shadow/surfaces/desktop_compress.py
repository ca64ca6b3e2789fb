"""Desktop ``PromptCompressor.compress(messages, {preserveSystemMessage,
preserveLastUserMessage})`` → projection.

Native output ``{messages, originalTokens, compressedTokens, compressionRatio, strategy,
processingTime, tokensSaved}``.  Messages map back exactly (``_messages`` rules); a
``[历史对话总结]`` system message is a derived summary.  Drop reasons from ``strategy``
(``deduplication`` → ``duplicate``, ``truncation`` → ``input_budget`` — legacy detail
``truncate``: the ``maxHistoryMessages``/``maxTotalTokens`` cut, ``summarization`` →
``summarized``).  No tool-pair repair and no pins (known limits of the legacy).  When an
LLM manager is configured, the provider outcome is *derived*: Desktop reports neither
degradation nor usage, so ``degraded``/``usage`` are ``None`` and the status is
``committed`` when a summary is present, ``none`` otherwise; ``truth`` is the recorded
exchange.  ``processingTime`` and token counts are noise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shadow.boundary import mapping_at
from shadow.canonical import Canon
from shadow.fixtures import Capture
from shadow.projection import Projection, ProviderOutcome
from shadow.recorded_provider import exchanges, secret_calls, truth_of
from shadow.surfaces.cli_compress import project_chain

ENTRY = "desktop-app-vue/src/main/llm/prompt-compressor.js#PromptCompressor.compress"


def _stats(out: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any]]:
    noise = {k: out[k] for k in ("originalTokens", "compressedTokens", "compressionRatio",
                                 "tokensSaved", "processingTime") if k in out}
    return out.get("strategy") if isinstance(out.get("strategy"), str) else None, noise


def _configured(capture: Capture) -> bool:
    ctor = capture.options.get("constructor")
    return isinstance(ctor, Mapping) and bool(ctor.get("llmManager")) and \
        ctor.get("enableSummarization", True) is not False


def _provider(canon: Canon, capture: Capture, k: int, out: Mapping[str, Any] | None,
              error: Any) -> ProviderOutcome:
    n = len(exchanges(canon.doc, "desktop", ENTRY))
    truth = truth_of(canon.doc, "desktop", ENTRY, k + 1)
    summarized = "summarization" in str((out or {}).get("strategy") or "")
    if error is not None:
        return ProviderOutcome(status="failed", requests=min(n, k + 1), recorded=min(n, k + 1),
                               truth=truth)
    return ProviderOutcome(status="committed" if summarized else "none",
                           requests=min(n, k + 1) if truth is not None else 0,
                           recorded=min(n, k + 1), degraded=None, usage=None, truth=truth)


def limits(capture: Capture) -> dict[str, Any]:
    """Desktop's stated limits: ``maxHistoryMessages`` (default 10) for the recency cut,
    ``maxTotalTokens`` (default 4000) for summarization."""
    ctor = mapping_at(capture.options, "constructor")
    msgs, tokens = ctor.get("maxHistoryMessages") or 10, ctor.get("maxTotalTokens") or 4000
    out: dict[str, Any] = {"order": "recency"}
    if isinstance(msgs, int) and not isinstance(msgs, bool):
        out["messages"] = msgs
    if isinstance(tokens, int) and not isinstance(tokens, bool):
        out["tokens"] = tokens
    return out


def adapt(canon: Canon, capture: Capture, siblings: Mapping[str, Capture] | None = None
          ) -> Projection:
    provider_of = None
    facts: dict[str, Any] = {"limits": limits(capture)}
    if _configured(capture):
        def provider_of(k: int, out: Mapping[str, Any] | None, err: Any) -> ProviderOutcome:
            return _provider(canon, capture, k, out, err)
        sent = secret_calls(canon.doc, "desktop", ENTRY)
        if sent:
            facts["sent_secrets"] = sent
    return project_chain(canon, capture, _stats, pair_repair=False, provider_of=provider_of,
                         facts=facts)
