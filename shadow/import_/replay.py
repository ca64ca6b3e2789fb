"""The legacy CLI's replay of a session (``rebuildMessages``), and its compaction windows.

The rule, read from the legacy store (``packages/cli/src/harness/jsonl-session-store.js``
and ``lib/session-message-provenance.js`` at ``0f8fc46``; checked against every bundled
``cli.jsonl-session`` capture by ``tests/shadow/test_import_sessions.py``):

* replay starts at the latest *checkpoint* — a ``compact`` or
  ``checkpoint_timeline_commit`` event whose ``data.messages`` is an array — with its
  messages, then appends the ``data`` of every later ``user_message``,
  ``assistant_message`` and ``system`` event;
* a message is replayable when it is an object with a string ``role`` (a chat-REPL
  ``{content}`` event without a role is not);
* each message is decoded: the wire-only fields ``_cc_replay``, ``_cc_fork_authority``
  and ``_microCompacted`` are removed.  The verified read (``readVerifiedMessages``)
  keeps a ``_cc_replay`` tag — as the durable provenance of a summary — on a ``system``
  message whose tag is exactly ``{schema, kind}`` with the provenance schema and a
  durable kind; the plain ``rebuildMessages`` keeps none;
* ``ws_turn`` events add a user/assistant pair; the importer does not project them (a
  window holding one is skipped, never guessed).

A *window* is what one ``compact`` event compacted: the verified replay just before it
(the message list the legacy compressor was handed — the compact append is a
compare-and-swap on exactly that replay), from the previous checkpoint on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from shadow.import_.store import Event

PROVENANCE_FIELD: Final = "_cc_replay"
PROVENANCE_SCHEMA: Final = "chainlesschain.session-message-provenance/v1"
DURABLE_KINDS: Final = frozenset({
    "compact-summary", "compact-tool-collapse", "checkpoint-summary", "migration-summary",
    "fork-lineage",
})
WIRE_FIELDS: Final = frozenset({PROVENANCE_FIELD, "_cc_fork_authority", "_microCompacted"})
MESSAGE_EVENTS: Final = frozenset({"user_message", "assistant_message", "system"})
CHECKPOINT_EVENTS: Final = frozenset({"compact", "checkpoint_timeline_commit"})
WS_TURN: Final = "ws_turn"


def _valid_tag(tag: Any) -> bool:
    return (isinstance(tag, Mapping) and set(tag) == {"schema", "kind"}
            and tag["schema"] == PROVENANCE_SCHEMA and tag["kind"] in DURABLE_KINDS)


def decode(message: Any, *, verified: bool) -> dict[str, Any] | None:
    """One persisted message as the legacy reader decodes it (None: not replayable)."""
    if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
        return None
    clean = {k: v for k, v in message.items() if k not in WIRE_FIELDS}
    tag = message.get(PROVENANCE_FIELD)
    if verified and message["role"] == "system" and isinstance(tag, Mapping) and _valid_tag(tag):
        clean[PROVENANCE_FIELD] = {"schema": PROVENANCE_SCHEMA, "kind": tag["kind"]}
    return clean


def checkpoint_messages(event: Event) -> list[Any] | None:
    """The messages of a checkpoint event, or None when the event is not one."""
    data = event.data
    if event.type in CHECKPOINT_EVENTS and isinstance(data, Mapping):
        messages = data.get("messages")
        return messages if isinstance(messages, list) else None
    return None


def _decoded(messages: Iterable[Any], verified: bool) -> list[dict[str, Any]]:
    out = (decode(m, verified=verified) for m in messages)
    return [m for m in out if m is not None]


def replay(events: Sequence[Event], *, verified: bool = False) -> list[dict[str, Any]]:
    """The replayed history after ``events`` (``rebuildMessages`` / the verified read)."""
    state: list[dict[str, Any]] = []
    for event in events:
        checkpoint = checkpoint_messages(event)
        if checkpoint is not None:
            state = _decoded(checkpoint, verified)
        elif event.type in MESSAGE_EVENTS:
            message = decode(event.data, verified=verified)
            if message is not None:
                state.append(message)
    return state


def provenance(messages: Sequence[Mapping[str, Any]]) -> list[str | None]:
    """The durable kind of each verified message (None for an ordinary one)."""
    out: list[str | None] = []
    for m in messages:
        tag = m.get(PROVENANCE_FIELD)
        out.append(str(tag["kind"]) if isinstance(tag, Mapping) else None)
    return out


def strip_tags(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages as plain JSON shows them (the runtime provenance tag is invisible)."""
    return [{k: v for k, v in m.items() if k != PROVENANCE_FIELD} for m in messages]


@dataclass(frozen=True, slots=True)
class Window:
    """One compact event and what its compaction was handed."""

    index: int  # 1-based among the session's compact events (a malformed one counts)
    start: int  # position (in the event list) of the first event after the last checkpoint
    compact: int  # position of the compact event
    messages: tuple[dict[str, Any], ...]  # the verified replay just before the compact
    ws_turn: bool  # the window holds a ws_turn event (not projected)


def windows(events: Sequence[Event]) -> list[Window]:
    """Every ``compact`` event with a message array, in order, with its window."""
    out: list[Window] = []
    start, state, ws_turn, compacts = 0, list[dict[str, Any]](), False, 0
    for position, event in enumerate(events):
        compacts += event.type == "compact"
        checkpoint = checkpoint_messages(event)
        if checkpoint is not None:
            if event.type == "compact":
                out.append(Window(compacts, start, position, tuple(state), ws_turn))
            start, state, ws_turn = position + 1, _decoded(checkpoint, True), False
        elif event.type in MESSAGE_EVENTS:
            message = decode(event.data, verified=True)
            if message is not None:
                state.append(message)
        elif event.type == WS_TURN:
            ws_turn = True
    return out


def malformed_compacts(events: Sequence[Event]) -> list[Event]:
    """``compact`` events without a message array (not checkpoints: the legacy skips them)."""
    return [e for e in events if e.type == "compact" and checkpoint_messages(e) is None]
