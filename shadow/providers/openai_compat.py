"""A real HTTP Summarizer for OpenAI-compatible chat-completions APIs (design 108 §8.2, §17).

:class:`OpenAICompatClient` sends one ``POST {base_url}/chat/completions`` with httpx —
retries off (``HTTPTransport(retries=0)``, no redirects), every timeout explicit — and maps
what happened to a :class:`ProviderOutcome`.  :class:`OpenAICompatSummarizer` implements
``kernel.ports.Summarizer`` on top of it.  In tests and shadow runs the client talks only to
vcrpy cassettes (``shadow.providers.cassettes``); it never needs an API key there.

Outcome mapping (the failure-semantics table, §17)::

    what happened                                  status                   usage
    200, usage reported, strict handoff            committed                settled | not_metered
    200, metered provider, usage missing           reconciliation_required  unknown
    200, invalid JSON / not an object              degraded (+ fallback)    settled | not_metered
    200, handoff fields missing / wrong types      degraded (+ fallback)    settled | not_metered
    request never reached the provider (connect)   degraded (+ fallback)    none
    provider answered 4xx / 5xx                    degraded (+ fallback)    none
    sent, answer lost (timeout, reset, 502/504)    reconciliation_required  unknown
    cancelled by the caller                        aborted                  none (unknown
                                                                            once sent)

``degraded`` always names :data:`FALLBACK_STRATEGY` and is never presented as a semantic
summary; ``reconciliation_required`` is never counted as zero cost and never retried here.
Nothing in an outcome's ``repr``, ``to_wire`` or any exception message carries a prompt,
a reply or a key: ids, digests, lengths and status codes only.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import math
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from kernel.canonical.digest import digest
from kernel.compaction import summary as _handoff
from kernel.compaction.invariants import sink_intersection
from kernel.ports import SummarizerFailure, SummaryCancelled
from kernel.vocabulary import SENSITIVITY_ORDER, TRUST_ORDER
from shadow.errors import SideEffectError

__all__ = [
    "FALLBACK_STRATEGY",
    "HANDOFF_FIELDS",
    "CancellableTransport",
    "OpenAICompatClient",
    "OpenAICompatSummarizer",
    "ProviderCancelled",
    "ProviderConfigError",
    "ProviderOutcome",
    "handoff_request",
    "outcome_from_error",
    "outcome_from_response",
    "parse_handoff",
    "request_digest",
]

#: The structured handoff every summary must be: the kernel's schema (one authority).
HANDOFF_FIELDS: Final = _handoff.HANDOFF_FIELDS
FALLBACK_STRATEGY: Final = "deterministic-fallback"
DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV: Final = "OPENAI_API_KEY"
DEFAULT_TIMEOUT: Final = httpx.Timeout(connect=10.0, read=120.0, write=30.0, pool=5.0)
REQUEST_DOMAIN: Final = "shadow.provider-request/v1"
USAGE_DOMAIN: Final = "shadow.provider-usage/v1"
SUMMARY_ITEM_DOMAIN: Final = "shadow.provider-summary-item/v1"
CONTENT_DOMAIN: Final = "shadow.content/v1"  # = shadow.projection.CONTENT_DOMAIN

# statuses (the projection's vocabulary) and usage states
COMMITTED: Final = "committed"
DEGRADED: Final = "degraded"
RECONCILIATION_REQUIRED: Final = "reconciliation_required"
ABORTED: Final = "aborted"

# reason codes
PROVIDER_UNAVAILABLE: Final = "provider_unavailable"
PROVIDER_HTTP_ERROR: Final = "provider_http_error"
PROVIDER_OUTCOME_UNKNOWN: Final = "provider_outcome_unknown"
PROVIDER_USAGE_UNSETTLED: Final = "provider_usage_unsettled"  # = kernel.compaction.summary's
PROVIDER_RESPONSE_MALFORMED: Final = "provider_response_malformed"
SUMMARY_INVALID_JSON: Final = _handoff.SUMMARY_INVALID_JSON
SUMMARY_SCHEMA_MISMATCH: Final = _handoff.SUMMARY_SCHEMA_MISMATCH
CANCELLED: Final = "cancelled"

#: Errors raised before the request left this process: the provider never saw it.
_NOT_SENT: Final = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.UnsupportedProtocol,
    httpx.LocalProtocolError,
    httpx.ProxyError,
)
#: Gateway statuses after which the upstream may still have run (and billed) the call.
_UNKNOWN_STATUSES: Final = frozenset({502, 504})

HANDOFF_INSTRUCTIONS: Final = (
    "Create a durable conversation handoff from the history below.\n"
    "Return exactly one strict JSON object with all keys in this order: "
    + "{" + ",".join(f'"{k}"' for k in HANDOFF_FIELDS) + "}.\n"
    '"objective" must be a string; every other value must be an array of strings.\n'
    "Preserve constraints, exact file paths, test evidence, unresolved external side effects, "
    "blockers, and actionable next steps. Do not use Markdown.\n"
    "Conversation history:\n"
)


class ProviderCancelled(Exception):
    """The caller cancelled the provider call (raised by a transport or a cancel hook).

    ``sent``: the request had already left this process (a :class:`CancellableTransport`
    gave up waiting for the answer), so the provider may have run and billed it."""

    def __init__(self, message: str = "cancelled", *, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


class ProviderConfigError(Exception):
    """Live use without the configuration it needs (e.g. the API key variable is unset)."""

    code = "provider_config"


# --------------------------------------------------------------------------- outcome


def text_digest(text: str) -> str:
    """``shadow.projection.content_digest``: sha256 over ``domain NUL utf8(text)``."""
    h = hashlib.sha256(CONTENT_DOMAIN.encode("utf-8") + b"\0")
    h.update(text.encode("utf-8", "surrogatepass"))
    return "sha256:" + h.hexdigest()


def request_digest(body: Mapping[str, Any]) -> str:
    """Canonical (RFC 8785) digest of a chat-completions request body."""
    return digest(dict(body), REQUEST_DOMAIN, "jcs")


@dataclass(frozen=True, slots=True)
class ProviderOutcome:
    """What one provider exchange amounts to.  ``repr``/``to_wire`` never show a body.

    ``status``: committed | degraded | reconciliation_required | aborted.
    ``usage``: settled | not_metered | unknown | none (no answer was received).
    ``reason``: a reason code (module constants) or ``None`` when committed.
    ``fallback``: :data:`FALLBACK_STRATEGY` when degraded, else ``None``.
    ``handoff`` / ``content``: the validated handoff and the raw reply text (data for the
    caller, excluded from ``repr`` and ``to_wire``).
    """

    status: str
    usage: str
    reason: str | None = None
    fallback: str | None = None
    http_status: int | None = None
    call_id: str | None = None
    model: str | None = None
    usage_receipt: Mapping[str, Any] | None = None
    request_digest: str | None = None
    content_digest: str | None = None
    content_length: int | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    handoff: Mapping[str, Any] | None = field(default=None, repr=False)
    content: str | None = field(default=None, repr=False)

    @property
    def degraded(self) -> bool:
        return self.status == DEGRADED

    @property
    def truth(self) -> str:
        """``shadow.recorded_provider.RecordedAnswer.truth`` vocabulary.

        ok | invalid | no-usage | error | cancelled (``invalid`` also covers a JSON object
        that is not a valid handoff, which ``RecordedAnswer`` calls ``ok``).
        """
        if self.status == ABORTED:
            return "cancelled"
        if self.usage == "unknown" and self.content is not None:
            return "no-usage"
        if self.reason in (SUMMARY_INVALID_JSON, SUMMARY_SCHEMA_MISMATCH):
            return "invalid"
        return "ok" if self.status == COMMITTED else "error"

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "usage": self.usage}
        for key, value in (
            ("reason", self.reason),
            ("fallback", self.fallback),
            ("httpStatus", self.http_status),
            ("callId", self.call_id),
            ("model", self.model),
            ("usageReceipt", dict(self.usage_receipt) if self.usage_receipt else None),
            ("requestDigest", self.request_digest),
            ("contentDigest", self.content_digest),
            ("contentLength", self.content_length),
        ):
            if value is not None:
                out[key] = value
        if self.detail:
            out["detail"] = dict(self.detail)
        out["truth"] = self.truth
        return out


def parse_handoff(text: str | None) -> tuple[dict[str, Any] | None, str | None, dict[str, Any]]:
    """Strictly parse a structured handoff: ``(handoff, reason, detail)`` — the kernel's
    :func:`kernel.compaction.summary.validate_handoff` (prose, fences, arrays and scalars
    are ``summary_invalid_json``; a missing, unknown or mistyped key is
    ``summary_schema_mismatch``; ``detail`` names keys, never values)."""
    return _handoff.validate_handoff(text)


def _tokens(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _usage_receipt(
    usage: Any, *, metered: bool, provider: str, model: str | None, call_id: str | None
) -> dict[str, Any] | None:
    """The kernel usage receipt, or ``None`` when a metered call's usage is unknown."""
    tokens_in = tokens_out = None
    if isinstance(usage, Mapping):
        tokens_in = _tokens(usage.get("prompt_tokens"))
        tokens_out = _tokens(usage.get("completion_tokens"))
    known = tokens_in is not None and tokens_out is not None
    if metered and not known:
        return None
    receipt: dict[str, Any] = {"outcome": "settled" if metered else "not_metered"}
    if call_id:
        receipt["callId"] = call_id
    receipt["provider"] = provider
    if model:
        receipt["model"] = model
    if known:
        receipt["inputTokens"] = tokens_in
        receipt["outputTokens"] = tokens_out
        receipt["ledgerDigest"] = digest(dict(usage), USAGE_DOMAIN, "jcs")
    return receipt


def _short(value: Any, limit: int = 160) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= limit else None


def outcome_from_response(
    status_code: int,
    raw: bytes,
    *,
    metered: bool = True,
    provider: str = "openai",
    request_digest: str | None = None,
) -> ProviderOutcome:
    """Map one HTTP answer (status and body bytes) to a :class:`ProviderOutcome`."""
    base: dict[str, Any] = {"http_status": status_code, "request_digest": request_digest}
    if status_code != 200:
        if status_code in _UNKNOWN_STATUSES:
            return ProviderOutcome(RECONCILIATION_REQUIRED, "unknown",
                                   PROVIDER_OUTCOME_UNKNOWN, **base)
        return ProviderOutcome(DEGRADED, "none", PROVIDER_HTTP_ERROR, FALLBACK_STRATEGY,
                               detail={"bodyBytes": len(raw)}, **base)
    try:
        envelope = json.loads(raw.decode("utf-8"))
    except ValueError:
        envelope = None
    if not isinstance(envelope, Mapping):
        detail = {"bodyBytes": len(raw), "envelope": "unparseable"}
        if metered:  # the call ran, its usage cannot be read
            return ProviderOutcome(RECONCILIATION_REQUIRED, "unknown",
                                   PROVIDER_RESPONSE_MALFORMED, detail=detail, **base)
        return ProviderOutcome(DEGRADED, "not_metered", PROVIDER_RESPONSE_MALFORMED,
                               FALLBACK_STRATEGY, detail=detail, **base)
    call_id, model = _short(envelope.get("id")), _short(envelope.get("model"))
    receipt = _usage_receipt(envelope.get("usage"), metered=metered, provider=provider,
                             model=model, call_id=call_id)
    content = _content(envelope)
    base |= {"call_id": call_id, "model": model, "usage_receipt": receipt}
    if content is not None:
        base |= {"content": content, "content_digest": text_digest(content),
                 "content_length": len(content)}
    if receipt is None:
        return ProviderOutcome(RECONCILIATION_REQUIRED, "unknown", PROVIDER_USAGE_UNSETTLED,
                               **base)
    usage = str(receipt["outcome"])
    if content is None:
        return ProviderOutcome(DEGRADED, usage, PROVIDER_RESPONSE_MALFORMED, FALLBACK_STRATEGY,
                               detail={"choices": "no message content"}, **base)
    handoff, reason, detail = parse_handoff(content)
    if handoff is None:
        return ProviderOutcome(DEGRADED, usage, reason, FALLBACK_STRATEGY, detail=detail, **base)
    return ProviderOutcome(COMMITTED, usage, handoff=handoff, **base)


def _content(envelope: Mapping[str, Any]) -> str | None:
    choices = envelope.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return None
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    return content if isinstance(content, str) else None


def outcome_from_error(error: BaseException, *, request_digest: str | None = None
                       ) -> ProviderOutcome:
    """Map a transport error or a cancellation to a :class:`ProviderOutcome`."""
    detail = {"error": type(error).__name__}
    if isinstance(error, ProviderCancelled):  # usage unknown once the request was sent
        return ProviderOutcome(ABORTED, "unknown" if error.sent else "none", CANCELLED,
                               request_digest=request_digest,
                               detail=detail | ({"sent": True} if error.sent else {}))
    if isinstance(error, _NOT_SENT):
        return ProviderOutcome(DEGRADED, "none", PROVIDER_UNAVAILABLE, FALLBACK_STRATEGY,
                               request_digest=request_digest, detail=detail)
    return ProviderOutcome(RECONCILIATION_REQUIRED, "unknown", PROVIDER_OUTCOME_UNKNOWN,
                           request_digest=request_digest, detail=detail)


# --------------------------------------------------------------------------- client


class CancellableTransport(httpx.BaseTransport):
    """``inner`` (a sync httpx transport), given up on when ``cancelled()`` turns true.

    A sync httpx request cannot be interrupted, so the exchange runs on a daemon thread
    and the caller waits for it, looking at ``cancelled`` every ``poll`` seconds.  Cancelled
    before sending: :class:`ProviderCancelled`; cancelled while waiting for the answer:
    ``ProviderCancelled(sent=True)`` (usage unknown), and the abandoned exchange ends on its
    own (answer or ``inner``'s timeout), its result dropped.
    """

    def __init__(self, inner: httpx.BaseTransport, cancelled: Callable[[], bool],
                 poll: float = 0.05) -> None:
        self.inner, self.cancelled, self.poll = inner, cancelled, poll

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.cancelled():
            raise ProviderCancelled("cancelled before sending")
        done = threading.Event()
        box: dict[str, Any] = {}

        def exchange() -> None:
            try:
                response = self.inner.handle_request(request)
                box["body"] = response.read()  # read (and decoded) here: the caller may
                box["response"] = response  # be gone
                response.close()
            except BaseException as error:  # handed to the caller, raised there
                box["error"] = error
            finally:
                done.set()

        threading.Thread(target=exchange, name="provider-call", daemon=True).start()
        while not done.wait(self.poll):
            if self.cancelled():
                raise ProviderCancelled("cancelled while waiting for the answer", sent=True)
        if "error" in box:
            raise box["error"]
        sent: httpx.Response = box["response"]
        # the body is decoded already: its encoding and length headers no longer apply
        headers = [(k, v) for k, v in sent.headers.multi_items()
                   if k.lower() not in ("content-encoding", "content-length")]
        return httpx.Response(sent.status_code, headers=headers, content=box["body"],
                              request=request, extensions=sent.extensions)

    def close(self) -> None:
        self.inner.close()


@dataclass(frozen=True, slots=True)
class OpenAICompatClient:
    """One chat-completions call per :meth:`complete`; retries off, timeouts explicit.

    ``transport`` replaces the default ``httpx.HTTPTransport(retries=0)`` (the replay layer
    passes a cassette-backed one).  The API key is only ever read by :meth:`from_env`.
    """

    base_url: str = DEFAULT_BASE_URL
    provider: str = "openai"
    metered: bool = True
    timeout: httpx.Timeout = field(default_factory=lambda: DEFAULT_TIMEOUT)
    transport: httpx.BaseTransport | None = field(default=None, repr=False)
    trust_env: bool = False
    api_key: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, *, api_key_env: str = DEFAULT_API_KEY_ENV, **kwargs: Any
                 ) -> OpenAICompatClient:
        """Live use: the key comes from ``api_key_env`` and nowhere else."""
        key = os.environ.get(api_key_env)
        if not key:
            raise ProviderConfigError(f"environment variable {api_key_env} is not set")
        return cls(api_key=key, **kwargs)

    @property
    def endpoint(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers

    @contextlib.contextmanager
    def session(self) -> Iterator[httpx.Client]:
        """The httpx client of one call (the replay layer wraps this in a cassette)."""
        transport = self.transport or httpx.HTTPTransport(retries=0)
        with httpx.Client(transport=transport, timeout=self.timeout, follow_redirects=False,
                          trust_env=self.trust_env) as http:
            yield http

    def complete(self, body: Mapping[str, Any],
                 cancelled: Callable[[], bool] | None = None) -> ProviderOutcome:
        """Send ``body`` once and map the result; never retries, never raises for outcomes.

        Exceptions that are not provider outcomes (e.g. a shadow side effect) propagate.
        """
        rdigest = request_digest(body)
        if cancelled is not None and cancelled():
            return outcome_from_error(ProviderCancelled(), request_digest=rdigest)
        payload = json.dumps(dict(body), ensure_ascii=False, separators=(",", ":"))
        try:
            with self.session() as http:
                response = http.post(self.endpoint, content=payload.encode("utf-8"),
                                     headers=self._headers())
                raw = response.read()
        except (httpx.TransportError, ProviderCancelled) as error:
            return outcome_from_error(error, request_digest=rdigest)
        return outcome_from_response(response.status_code, raw, metered=self.metered,
                                     provider=self.provider, request_digest=rdigest)


def handoff_request(dropped_items: Sequence[Mapping[str, Any]], *, model: str,
                    max_tokens: int = 2048) -> dict[str, Any]:
    """The request a live summarizer sends for ``dropped_items`` (kernel ContextItems)."""
    lines = []
    for index, item in enumerate(dropped_items):
        content = item.get("content")
        if not isinstance(content, str):
            raw_ref = item.get("contentRef")
            ref: Mapping[str, Any] = raw_ref if isinstance(raw_ref, Mapping) else {}
            content = f"[external content {ref.get('digest')}, {ref.get('byteLength')} bytes]"
        lines.append(f"[{index}] {item.get('kind')}: {content}")
    prompt = HANDOFF_INSTRUCTIONS + "\n".join(lines)
    return {"model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens}


# --------------------------------------------------------------------------- summarizer

#: ``(call number from 1, dropped items, context) -> request body``.
RequestBuilder = Callable[[int, Sequence[Mapping[str, Any]], Mapping[str, Any]], dict[str, Any]]


def _now_iso() -> str:
    now = dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


@dataclass(frozen=True, slots=True)
class _Binding:
    scope: str
    scope_id: str | None
    trust: str
    sensitivity: str
    sinks: tuple[str, ...]
    priority: int
    parent_digests: tuple[str, ...]


def _bind(parents: Sequence[Mapping[str, Any]], trust: str, sink: str | None) -> _Binding:
    """What a summary of ``parents`` must carry; refuses before any request is sent."""
    if not parents:
        raise SummarizerFailure("nothing to summarize", code="summary_no_parents")
    scopes = {(p.get("scope"), p.get("scopeId")) for p in parents}
    if len(scopes) != 1:
        raise SummarizerFailure("dropped items span several scopes", code="scope_denied")
    if sink is not None and any(
        "*" not in (p.get("allowedSinks") or ()) and sink not in (p.get("allowedSinks") or ())
        for p in parents
    ):
        raise SummarizerFailure("a dropped item may not be sent to the provider",
                                code="sink_denied")
    allowed = sink_intersection(parents)
    if allowed is not None and not allowed:
        raise SummarizerFailure("dropped items share no allowed sink", code="sink_denied")
    (scope, scope_id), = scopes
    least = max(TRUST_ORDER.index(str(p.get("trust"))) for p in parents)
    most = max(SENSITIVITY_ORDER.index(str(p.get("sensitivity"))) for p in parents)
    return _Binding(
        scope=str(scope), scope_id=None if scope_id is None else str(scope_id),
        trust=TRUST_ORDER[max(least, TRUST_ORDER.index(trust))],
        sensitivity=SENSITIVITY_ORDER[most],
        sinks=("*",) if allowed is None else tuple(sorted(allowed)),
        priority=min(1_000_000, 1 + max(int(p.get("priority") or 0) for p in parents)),
        parent_digests=tuple(str(p["digest"]) for p in parents),
    )


def summary_item(handoff: Mapping[str, Any], binding: _Binding, *, operation_id: str,
                 observed_at: str) -> dict[str, Any]:
    """The derived ContextItem of a committed handoff (data, never authority)."""
    content = json.dumps({k: handoff[k] for k in HANDOFF_FIELDS}, ensure_ascii=False,
                         separators=(",", ":"))
    tag = digest({"operationId": operation_id, "parents": list(binding.parent_digests),
                  "content": text_digest(content)}, SUMMARY_ITEM_DOMAIN, "jcs")
    item_id = "summary-" + tag.removeprefix("sha256:")[:32]
    item: dict[str, Any] = {"schemaVersion": 1, "itemId": item_id, "kind": "message",
                            "scope": binding.scope}
    if binding.scope_id is not None:
        item["scopeId"] = binding.scope_id
    item |= {
        "sourceRef": {"store": "provider-summary", "id": item_id},
        "provenance": {"source": "summarizer", "observedAt": observed_at,
                       "parentDigests": list(binding.parent_digests)},
        "trust": binding.trust,
        "sensitivity": binding.sensitivity,
        "allowedSinks": list(binding.sinks),
        "tokenEstimate": max(1, math.ceil(len(content) / 4)),
        "priority": binding.priority,
        "pinned": False,
        "createdAt": observed_at,
        "content": content,
    }
    return item


class OpenAICompatSummarizer:
    """``kernel.ports.Summarizer`` over :class:`OpenAICompatClient`.

    committed → ``{items: [summary], usageReceipt}``; degraded with a usage receipt (the call
    was paid for) → ``{items: [], usageReceipt, degraded: True, degradedReason}``; degraded
    without one → :class:`~kernel.ports.SummarizerFailure` (the kernel's ``allowFallback``
    decides); reconciliation_required → ``SummarizerFailure(outcome_unknown=True)``;
    aborted → :class:`~kernel.ports.SummaryCancelled`.  Every exchange is appended to
    :attr:`outcomes`.  ``request_builder`` chooses the body of call *n* (default: a fresh
    :func:`handoff_request`); ``observed_at`` pins the summary's timestamps (replay).
    """

    def __init__(
        self,
        client: OpenAICompatClient,
        *,
        model: str,
        request_builder: RequestBuilder | None = None,
        observed_at: str | None = None,
        summary_trust: str = "untrusted",
        sink: str | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> None:
        if summary_trust not in TRUST_ORDER:
            raise ValueError("summary_trust must be a ContextItem trust level")
        self.client = client
        self.model = model
        self.request_builder = request_builder
        self.observed_at = observed_at
        self.summary_trust = summary_trust
        self.sink = sink
        self.cancelled = cancelled
        self.calls = 0
        self.outcomes: list[ProviderOutcome] = []
        self.side_effects: list[dict[str, Any]] = []

    def build_request(self, call: int, dropped_items: Sequence[Mapping[str, Any]],
                      context: Mapping[str, Any]) -> dict[str, Any]:
        if self.request_builder is not None:
            return self.request_builder(call, dropped_items, context)
        return handoff_request(dropped_items, model=self.model)

    def __call__(self, dropped_items: Sequence[Mapping[str, Any]],
                 context: Mapping[str, Any]) -> Mapping[str, Any]:
        binding = _bind(dropped_items, self.summary_trust, self.sink)
        self.calls += 1
        body = self.build_request(self.calls, dropped_items, context)
        try:
            outcome = self.client.complete(body, self.cancelled)
        except SideEffectError:
            self.side_effects.append({"call": self.calls, "requestDigest": request_digest(body)})
            raise
        self.outcomes.append(outcome)
        return self.kernel_output(outcome, binding, context)

    def kernel_output(self, outcome: ProviderOutcome, binding: _Binding,
                      context: Mapping[str, Any]) -> Mapping[str, Any]:
        receipt = dict(outcome.usage_receipt) if outcome.usage_receipt else None
        if outcome.status == COMMITTED and outcome.handoff is not None and receipt:
            item = summary_item(outcome.handoff, binding,
                                operation_id=str(context.get("operationId") or "operation"),
                                observed_at=self.observed_at or _now_iso())
            return {"items": [item], "usageReceipt": receipt}
        if outcome.status == ABORTED:
            cancelled = SummaryCancelled("provider call cancelled")
            cancelled.outcome = outcome  # type: ignore[attr-defined]  # usage: none | unknown
            raise cancelled
        message = f"provider summary {outcome.status}: {outcome.reason}"
        if outcome.status == RECONCILIATION_REQUIRED:
            failure = SummarizerFailure(message, code=outcome.reason, outcome_unknown=True)
        elif receipt:
            return {"items": [], "usageReceipt": receipt, "degraded": True,
                    "degradedReason": str(outcome.reason)}
        else:
            failure = SummarizerFailure(message, code=outcome.reason)
        failure.outcome = outcome  # type: ignore[attr-defined]
        raise failure
