"""The summarizer of the server's compaction turns: an OpenAI-compatible provider.

``shadow app-server --provider-url URL --provider-model NAME`` makes every
``thread/compact/start`` turn summarize its dropped items with
:class:`shadow.providers.OpenAICompatSummarizer` (one call, retries off, the kernel's
outcome mapping: docs/providers.md).  Without a fallback: a provider that refuses or is
unreachable aborts the turn and the thread is unchanged; an answer whose usage cannot be
settled is ``reconciliation_required``.  The turn's cancel hook reaches the HTTP exchange
(:class:`shadow.providers.openai_compat.CancellableTransport`), so ``turn/interrupt``
ends a call in flight.  The API key is read from the named environment variable and
nowhere else; it is never logged, and never sent over plain http to a host that is not
loopback.  Proxy and CA variables of the environment are not read (``trust_env`` off, as
for every provider client here).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Final

from kernel.ports import Summarizer
from shadow.app_server.threads import Provider

LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1"})


class ProviderSetupError(Exception):
    """The provider options do not make a provider (a usage error, exit 2)."""


def provider(url: str, model: str, *, key_env: str | None = None, timeout: float = 60.0,
             sink: str | None = None) -> Provider:
    """The per-turn summarizer factory for ``url`` (an OpenAI-compatible ``/v1`` base)."""
    import httpx

    from shadow.providers.openai_compat import (
        CancellableTransport,
        OpenAICompatClient,
        OpenAICompatSummarizer,
    )

    parsed = httpx.URL(url) if url.startswith(("http://", "https://")) else None
    if parsed is None or not parsed.host:
        raise ProviderSetupError("--provider-url must be an http:// or https:// URL")
    if not timeout > 0:
        raise ProviderSetupError("--provider-timeout must be a number of seconds above 0")
    key = None
    if key_env:
        if parsed.scheme == "http" and parsed.host not in LOOPBACK:
            raise ProviderSetupError("--provider-key-env with a plain http:// URL would send "
                                     "the key unencrypted: use https:// (or a loopback host)")
        key = os.environ.get(key_env)
        if not key:
            raise ProviderSetupError(f"environment variable {key_env} is not set")

    def for_turn(cancelled: Callable[[], bool]) -> Summarizer:
        client = OpenAICompatClient(
            base_url=url, api_key=key, timeout=httpx.Timeout(timeout),
            transport=CancellableTransport(httpx.HTTPTransport(retries=0), cancelled))
        return OpenAICompatSummarizer(client, model=model, sink=sink, cancelled=cancelled)

    return for_turn
