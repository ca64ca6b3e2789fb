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
from typing import Any

from shadow.errors import SideEffectError


@dataclass(frozen=True, slots=True)
class RecordedAnswer:
    """A recorded provider exchange, reduced to what a summarizer needs."""

    outcome: str  # ok | error | cancelled
    content: str | None
    usage: Mapping[str, Any] | None
    error_name: str | None = None
    error_code: str | None = None
    replayed_truth: str | None = None  # set when the answer came from a cassette replay

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
                              out.content, out.usage_receipt, replayed_truth=truth)
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
        return RecordedAnswer("cancelled" if name == "AbortError" else "error", None, None,
                              error_name=name, error_code=None if code is None else str(code))
    resp = r.get("response") if isinstance(r.get("response"), Mapping) else {}
    msg = resp.get("message") if isinstance(resp.get("message"), Mapping) else {}
    content = msg.get("content") if isinstance(msg.get("content"), str) else resp.get("text")
    usage = resp.get("usage") if isinstance(resp.get("usage"), Mapping) else None
    return RecordedAnswer("ok", content if isinstance(content, str) else None, usage)


def truth_of(doc: Mapping[str, Any], surface: str, entry: str, call: int) -> str | None:
    """What the recording says happened (None when nothing was recorded)."""
    try:
        return recorded_answer(doc, surface, entry, call).truth
    except SideEffectError:
        return None


def parse_summary(text: str | None) -> dict[str, Any] | None:
    """A strict JSON object, or None (prose, fences and arrays are invalid handoffs)."""
    if not isinstance(text, str):
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None
