"""Provider-backed summaries: a real OpenAI-compatible HTTP client, replayed from cassettes.

* :mod:`shadow.providers.openai_compat` — :class:`OpenAICompatClient` (httpx, retries off,
  explicit timeouts), the outcome mapping to :class:`ProviderOutcome`, and
  :class:`OpenAICompatSummarizer`, a ``kernel.ports.Summarizer``.
* :mod:`shadow.providers.cassettes` — read-only vcrpy replay of ``recordings/*.yaml``
  (``record_mode="none"``; an unrecorded request is ``shadow.side_effect`` and never reaches
  the network): :func:`replay_exchange`, :func:`replay_legacy_call`,
  :func:`summarizer_for_scenario`.
* :mod:`shadow.providers.importer` — ``python -m shadow.providers.importer fixtures
  recordings`` builds the cassettes from the captures' ``provider_responses``.

See ``docs/providers.md``.
"""

from shadow.providers.cassettes import (
    CLI_ENTRY,
    DESKTOP_ENTRY,
    chat_request,
    legacy_exchanges,
    replay_exchange,
    replay_legacy_call,
    summarizer_for_scenario,
)
from shadow.providers.openai_compat import (
    FALLBACK_STRATEGY,
    HANDOFF_FIELDS,
    OpenAICompatClient,
    OpenAICompatSummarizer,
    ProviderCancelled,
    ProviderOutcome,
    parse_handoff,
)

__all__ = [
    "CLI_ENTRY",
    "DESKTOP_ENTRY",
    "FALLBACK_STRATEGY",
    "HANDOFF_FIELDS",
    "OpenAICompatClient",
    "OpenAICompatSummarizer",
    "ProviderCancelled",
    "ProviderOutcome",
    "chat_request",
    "legacy_exchanges",
    "parse_handoff",
    "replay_exchange",
    "replay_legacy_call",
    "summarizer_for_scenario",
]
