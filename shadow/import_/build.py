"""The fixture documents of one imported compact event (the ``fixtures/`` formats).

For compact event *k* of a session (its :class:`~shadow.import_.replay.Window`):

* ``input.json`` (``legacy-capture-input/v1``): ``messages`` = the verified replay just
  before the event — what the legacy compressor was handed; summaries of an earlier
  compaction keep their ``_cc_replay`` tag; ``model`` from ``session_start``;
* ``cli.jsonl-session.json`` (``legacy-capture/v1``): the window's events (the lines
  after the previous checkpoint, up to and including the compact event), redacted and
  **re-chained from genesis** (``raw_jsonl_lines``; the original chain was verified at
  import, its hashes are not kept), and the replay after the event (``rebuildMessages``,
  ``readVerifiedMessages`` and its provenance), ``verifySession`` of the written lines;
* ``cli.compress.json``: ``output {messages, stats}`` = the compact event's messages (as
  persisted: host system messages are not) and its stats, the durable kinds in
  ``output_provenance``.  Written when the stats say the compressor ran: they carry its
  ``strategy`` — ``none`` included, which is the compressor's own answer "nothing to
  do" (the bundled ``short-session`` capture of ``PromptCompressor.compress`` returns
  exactly ``{strategy: "none", saved: 0}``).  A compact event without a strategy is not
  imported (:mod:`shadow.import_.session`): the store capture would have no compaction
  source to judge the candidate by.

Nothing here claims a run: ``determinism.source`` is ``imported``, ``options.imported``
names the session file, the line range and the compact line, ``legacy_commit`` is
``unknown`` (a user's CLI, whatever its version) and no constructor option is invented.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from shadow.bootstrap import encode_event, verify_bytes
from shadow.fixtures import CAPTURE_FORMAT, INPUT_FORMAT
from shadow.import_.replay import Window, provenance, replay, strip_tags
from shadow.import_.store import Event

STORE_ENTRY: Final = ("packages/cli/src/harness/jsonl-session-store.js"
                      "#appendCompactEventIfMessagesMatch+rebuildMessages")
COMPRESS_ENTRY: Final = "packages/cli/src/harness/prompt-compressor.js#PromptCompressor.compress"
TOOL: Final = "shadow import-sessions"
NOT_RUN: Final = ("not applicable: recorded by the legacy CLI in a user's session store, "
                  "not run by the importer")


def compressor_ran(stats: Mapping[str, Any]) -> bool:
    """The stats are a compressor's: they name its strategy (``none`` included)."""
    strategy = stats.get("strategy")
    return isinstance(strategy, str) and strategy != ""


def stats_of(compact: Event) -> dict[str, Any]:
    data = compact.data if isinstance(compact.data, Mapping) else {}
    return {k: v for k, v in data.items() if k not in ("messages", "trigger")}


def model_of(events: Sequence[Event]) -> dict[str, str] | None:
    for e in events:
        if e.type == "session_start" and isinstance(e.data, Mapping):
            found = {k: e.data[k] for k in ("provider", "model") if isinstance(e.data.get(k), str)}
            return found or None
    return None


def rechain(events: Sequence[Event]) -> list[str]:
    """The events as JSONL lines of a fresh chain (from genesis)."""
    lines, prev = [], None
    for e in events:
        raw, prev = encode_event(prev, e.type, e.timestamp, e.data)
        lines.append(raw.decode("utf-8").rstrip("\n"))
    return lines


def _verify(session_id: str, lines: Sequence[str]) -> dict[str, Any]:
    r = verify_bytes("".join(line + "\n" for line in lines).encode("utf-8"))
    return {"sessionId": session_id, "status": r.status, "chainedEvents": r.chained_events,
            "legacyEvents": r.legacy_events, "malformedLines": r.malformed_lines,
            "truncatedTail": r.truncated_tail, "firstInvalidLine": r.first_invalid_line,
            "reason": r.reason, "lastHash": r.head_hash}


def provenance_of(file: str, events: Sequence[Event], window: Window) -> dict[str, Any]:
    compact = events[window.compact]
    first = events[window.start].line if window.start < len(events) else compact.line
    trigger = compact.data.get("trigger") if isinstance(compact.data, Mapping) else None
    return {"tool": TOOL, "session_file": file, "lines": [first, compact.line],
            "compact_line": compact.line, "compact_index": window.index,
            "trigger": trigger if isinstance(trigger, str) else None,
            "original_chain": "verified"}


def _determinism(prov: Mapping[str, Any]) -> dict[str, Any]:
    return {"source": "imported", "imported": dict(prov),
            "clock": "the session's own event timestamps", "random": NOT_RUN,
            "redaction": "secrets, local paths and e-mail addresses replaced at import "
                         "(docs/user-guide.md, Import sessions)",
            "raw_jsonl_lines": "the window's events, redacted and re-chained from genesis"}


def input_doc(scenario: str, window: Window, prov: Mapping[str, Any],
              model: Mapping[str, str] | None) -> dict[str, Any]:
    trigger = prov.get("trigger") or "unknown"
    doc: dict[str, Any] = {
        "format": INPUT_FORMAT, "scenario": scenario,
        "description": f"Imported from a CLI session store: compact event {window.index} "
                       f"({trigger}) of {prov['session_file']}, lines {prov['lines'][0]}"
                       f"-{prov['lines'][1]}.",
        "tags": ["imported", "cli-session-store", f"trigger-{trigger}"],
    }
    if model:
        doc["model"] = dict(model)
    doc["messages"] = [dict(m) for m in window.messages]
    doc["provider_responses"] = []
    return doc


def session_capture(scenario: str, session_id: str, events: Sequence[Event], window: Window,
                    prov: Mapping[str, Any]) -> dict[str, Any]:
    part = list(events[window.start:window.compact + 1])
    lines = rechain(part)
    after = replay(part, verified=True)
    binding = {"messages": "input.messages: the store's verified replay of the lines before "
                           "the compact event, from the previous checkpoint",
               "compaction_source": "cli.compress.json output"}
    return {
        "format": CAPTURE_FORMAT, "scenario": scenario, "surface": "cli",
        "entry": STORE_ENTRY, "legacy_commit": "unknown",
        "options": {"sessionId": session_id, "imported": dict(prov)},
        "input_binding": binding, "env_flags": {}, "determinism": _determinism(prov),
        "output": {
            "session_file": prov["session_file"], "raw_jsonl_lines": lines,
            "rebuildMessages": replay(part), "readVerifiedMessages": strip_tags(after),
            "readVerifiedMessages_provenance": provenance(after),
            "verifySession": _verify(session_id, lines),
        },
        "error": None,
    }


def compress_capture(scenario: str, events: Sequence[Event], window: Window,
                     prov: Mapping[str, Any]) -> dict[str, Any]:
    compact = events[window.compact]
    persisted = replay([compact], verified=True)
    return {
        "format": CAPTURE_FORMAT, "scenario": scenario, "surface": "cli",
        "entry": COMPRESS_ENTRY, "legacy_commit": "unknown",
        "options": {"imported": dict(prov)},
        "input_binding": {"messages": "input.messages (the store's replay at the compact "
                                      "event); output: the compact event's messages and "
                                      "stats"},
        "env_flags": {}, "determinism": _determinism(prov),
        "output_provenance": provenance(persisted),
        "diagnostics": {"input_message_count": len(window.messages)},
        "output": {"messages": strip_tags(persisted), "stats": stats_of(compact)},
        "error": None,
    }
