"""The one place a shadow replay obtains a provider answer: from the recording.

Both sides consume the *same* recorded exchange: the legacy surface's capture was
made against it, and the candidate asks :func:`recorded_answer` for it.  There is
no network path here at all.  A request that has no recording raises
:class:`shadow.errors.SideEffectError`; the candidate turns that into a
``shadow.side_effect`` (blocking) in its projection.

Two sources of the same recorded exchanges: the vcrpy cassettes under a
``--recordings`` folder (replayed read-only with ``record_mode="none"`` through
the real HTTP summarizer client, :mod:`shadow.providers`), or, when no folder is
given, the captures' own ``input.json`` ``provider_responses`` the cassettes were
imported from.  Either way no request ever leaves the machine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kernel.compaction.summary import validate_handoff
from shadow.boundary import mapping_at
from shadow.errors import SideEffectError

#: error codes of a request that never left for the provider (nothing to settle)
NOT_SENT_CODES: Final = frozenset({"ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH",
                                   "ENETUNREACH", "ERR_INVALID_URL", "ERR_TLS_CERT_ALTNAME_INVALID",
                                   "CERT_HAS_EXPIRED", "UNABLE_TO_VERIFY_LEAF_SIGNATURE"})
#: error codes after which the provider may have run (and billed) the call
UNKNOWN_OUTCOME_CODES: Final = frozenset({"ETIMEDOUT", "ECONNRESET", "EPIPE", "ECONNABORTED",
                                          "UND_ERR_SOCKET", "UND_ERR_HEADERS_TIMEOUT",
                                          "UND_ERR_BODY_TIMEOUT", "ESOCKETTIMEDOUT"})


@dataclass(frozen=True, slots=True)
class RecordedAnswer:
    """A recorded provider exchange, reduced to what a summarizer needs."""

    outcome: str  # ok | error | cancelled
    content: str | None
    usage: Mapping[str, Any] | None
    error_name: str | None = None
    error_code: str | None = None
    replayed_truth: str | None = None  # set when the answer came from a cassette replay
    not_sent: bool = False  # the request never reached the provider (a connect failure)
    outcome_unknown: bool = False  # sent, but what happened is unknown (timeout, reset)

    @property
    def problem(self) -> tuple[str | None, dict[str, Any]]:
        """Why the content is not a valid handoff (the kernel's schema), or (None, {})."""
        _doc, reason, detail = validate_handoff(self.content)
        return reason, detail

    @property
    def truth(self) -> str:
        """ok | invalid (not a JSON object) | no-usage | error | cancelled."""
        if self.replayed_truth is not None:
            return self.replayed_truth
        if self.outcome != "ok":
            return self.outcome
        if parse_summary(self.content) is None:
            return "invalid"
        if not self.usage:
            return "no-usage"
        return "ok"


def _file_of(entry: str) -> str:
    return entry.split("#", 1)[0].strip()


def exchanges(doc: Mapping[str, Any], surface: str, entry: str) -> list[Mapping[str, Any]]:
    """Recorded exchanges of one legacy entry point (same surface and source file)."""
    want = _file_of(entry)
    out = []
    for r in doc.get("provider_responses") or ():
        if isinstance(r, Mapping) and r.get("surface") == surface and \
                _file_of(str(r.get("entry", ""))) == want:
            out.append(r)
    return out


def recorded_answer(doc: Mapping[str, Any], surface: str, entry: str, call: int,
                    recordings: str | Path | None = None) -> RecordedAnswer:
    """The recorded answer to the ``call``-th (1-based) provider request of an entry point.

    With ``recordings`` the answer is replayed from the scenario's cassette through the
    HTTP summarizer client.  Raises ``SideEffectError`` when nothing was recorded for
    it: the shadow must never make that request for real.
    """
    if recordings is not None:
        from shadow.providers import replay_legacy_call

        out = replay_legacy_call(recordings, doc, surface, entry, call)
        truth = out.truth
        return RecordedAnswer("ok" if truth in ("ok", "invalid", "no-usage") else truth,
                              out.content, out.usage_receipt, replayed_truth=truth,
                              not_sent=out.reason == "provider_unavailable",
                              outcome_unknown=out.status == "reconciliation_required"
                              and out.content is None)
    for r in exchanges(doc, surface, entry):
        if r.get("call") == call:
            return _answer(r)
    raise SideEffectError(
        f"no recorded provider answer for {surface} {_file_of(entry)} call {call}")


def _answer(r: Mapping[str, Any]) -> RecordedAnswer:
    err = r.get("error")
    if isinstance(err, Mapping):
        name = str(err.get("name") or "Error")
        code = err.get("code")
        code_s = None if code is None else str(code)
        status = err.get("status") if isinstance(err.get("status"), int) else None
        return RecordedAnswer("cancelled" if name == "AbortError" else "error", None, None,
                              error_name=name, error_code=code_s,
                              not_sent=code_s in NOT_SENT_CODES,
                              outcome_unknown=code_s in UNKNOWN_OUTCOME_CODES
                              or status in (502, 504))
    resp = mapping_at(r, "response")
    msg = mapping_at(resp, "message")
    content = msg.get("content") if isinstance(msg.get("content"), str) else resp.get("text")
    usage = resp.get("usage") if isinstance(resp.get("usage"), Mapping) else None
    return RecordedAnswer("ok", content if isinstance(content, str) else None, usage)


def secret_calls(doc: Mapping[str, Any], surface: str, entry: str | None = None) -> list[int]:
    """Recorded calls whose *request* carried secret material (what the provider — or a
    summarizer — was actually sent), by the kernel's own secret detectors.  ``entry``
    None: every exchange of the surface."""
    from shadow.canonical import has_secret
    from shadow.divergence.provenance import string_leaves

    recs = exchanges(doc, surface, entry) if entry is not None else [
        r for r in doc.get("provider_responses") or ()
        if isinstance(r, Mapping) and r.get("surface") == surface]
    out = []
    for n, r in enumerate(recs, 1):
        if any(has_secret(t) for t in string_leaves(r.get("request"))):
            call = r.get("call")
            out.append(call if isinstance(call, int) and not isinstance(call, bool) else n)
    return sorted(out)


def facts_truth(exchange: Mapping[str, Any]) -> str:
    """What a recorded *memory summariser* exchange says: ``ok`` (a list of facts, each
    an object with non-empty string ``content``), ``invalid`` (anything else: prose, an
    object, facts without content), ``error`` or ``cancelled`` (``AbortError``)."""
    err = exchange.get("error")
    if isinstance(err, Mapping):
        return "cancelled" if err.get("name") == "AbortError" else "error"
    value: Any = exchange.get("response")
    if isinstance(value, Mapping):
        msg = value.get("message")
        if isinstance(msg, Mapping) and isinstance(msg.get("content"), str):
            value = msg["content"]
        elif isinstance(value.get("text"), str):
            value = value["text"]
        elif isinstance(value.get("facts"), list):
            value = value["facts"]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return "invalid"
        if isinstance(value, Mapping) and isinstance(value.get("facts"), list):
            value = value["facts"]
    if isinstance(value, list) and all(
            isinstance(f, Mapping) and isinstance(f.get("content"), str) and f["content"].strip()
            for f in value):
        return "ok"
    return "invalid"


def truth_of(doc: Mapping[str, Any], surface: str, entry: str, call: int) -> str | None:
    """What the recording says happened (None when nothing was recorded)."""
    try:
        return recorded_answer(doc, surface, entry, call).truth
    except SideEffectError:
        return None


def parse_summary(text: str | None) -> dict[str, Any] | None:
    """The validated handoff (the kernel's schema: ``validate_handoff``), or None —
    prose, fences, arrays, missing, unknown or mistyped fields are invalid handoffs."""
    return validate_handoff(text)[0]
