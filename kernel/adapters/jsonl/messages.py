"""Legacy CLI replay messages ↔ canonical ContextItems (for the JSONL store).

Each replayed message (OpenAI chat shape) becomes one ContextItem whose
``content`` is a message bundle ``{schema, messages, durableSystemKinds}`` (the
CLI's ``chainlesschain.cli-context-message-bundle/v1``).  An assistant message
with ``tool_calls`` and the tool results that immediately follow it form one
indivisible bundle; a bundle missing a result is pending task state.  The last
item, when it ends with a user message, is the unanswered request and is
recovery-protected.

Identity: an item id is derived from the hash of the transcript line the
message came from and its position in that line.  A kernel compact event
stores its output items themselves (``data.canonical.outputItems``), so items
keep their ids and digests across compactions; only a legacy compact event
(messages, no canonical payload) starts fresh identities.

The reverse projection (``items_to_messages``) restores transcript order for a
compact event's ``messages`` — the part the legacy CLI replays.  Items that are
not bundles (summaries written by a summarizer) become durable system messages
marked ``_cc_replay {kind: "compact-summary"}``, as the legacy CLI marks its own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kernel.canonical.digest import Profile, canonical_json, digest, peer_key_order
from kernel.canonical.timestamps import epoch_ms_to_iso
from kernel.vocabulary import MAX_SAFE_INTEGER

BUNDLE_SCHEMA: Final = "chainlesschain.cli-context-message-bundle/v1"
REPLAY_SCHEMA: Final = "chainlesschain.session-message-provenance/v1"
ITEM_DOMAIN: Final = "chainlesschain.context-item/v1"
STORE: Final = "cli-jsonl-session"
MAX_SEQUENCE: Final = MAX_SAFE_INTEGER


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """One replayable message and where it came from in the transcript."""

    message: Mapping[str, Any]
    line_hash: str  # sha256 hex of the source line (its chain hash when chained)
    position: int  # index inside the line (compact events carry many messages)
    sequence: int  # transcript order
    timestamp_ms: int


def durable_kind(message: Mapping[str, Any]) -> str | None:
    marker = message.get("_cc_replay")
    if isinstance(marker, Mapping) and marker.get("schema") == REPLAY_SCHEMA:
        kind = marker.get("kind")
        return kind if isinstance(kind, str) else None
    return None


def _tool_calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    calls = message.get("tool_calls")
    return [c for c in calls if isinstance(c, Mapping)] if isinstance(calls, list) else []


def _result_id(message: Mapping[str, Any]) -> str | None:
    value = message.get("tool_call_id")
    return value if isinstance(value, str) and value else None


def _trust(messages: Sequence[Mapping[str, Any]]) -> str:
    if all(m.get("role") == "system" and durable_kind(m) for m in messages):
        return "verified"
    if any(m.get("role") == "system" for m in messages):
        return "untrusted"
    if any(m.get("role") == "user" for m in messages):
        return "user"
    return "external"


def _kind(messages: Sequence[Mapping[str, Any]], pending: bool) -> str:
    if pending:
        return "task-state"
    if any(m.get("role") == "tool" for m in messages):
        return "tool-evidence"
    if all(m.get("role") == "system" for m in messages):
        return "system-policy" if not all(durable_kind(m) for m in messages) else "message"
    return "message"


def _priority(messages: Sequence[Mapping[str, Any]], sequence: int, pending: bool) -> int:
    if pending:
        return 900_000
    if all(m.get("role") == "system" for m in messages):
        return 800_000
    base = (
        500_000
        if any(m.get("role") == "user" for m in messages)
        else 350_000
        if any(m.get("role") == "tool" for m in messages)
        else 400_000
    )
    return min(999_999, base + min(sequence, 99_999))


def _sorted_sinks(sinks: Iterable[str]) -> list[str]:
    return list(peer_key_order(tuple(dict.fromkeys(sinks))))


def seal(item: dict[str, Any], profile: Profile) -> dict[str, Any]:
    body = {k: v for k, v in item.items() if k != "digest"}
    return {**body, "digest": digest(body, ITEM_DOMAIN, profile)}


def _make_item(
    session_id: str,
    bundle: Sequence[SourceMessage],
    *,
    pending_call: str | None,
    sinks: list[str],
    profile: Profile,
) -> dict[str, Any]:
    first = bundle[0]
    messages = [dict(s.message) for s in bundle]
    payload = {
        "schema": BUNDLE_SCHEMA,
        "messages": messages,
        "durableSystemKinds": [durable_kind(m) for m in messages],
    }
    content = canonical_json(payload, "jcs")
    observed = epoch_ms_to_iso(first.timestamp_ms)
    sequence = min(first.sequence, MAX_SEQUENCE)
    item: dict[str, Any] = {
        "schemaVersion": 1,
        "itemId": f"jsonl-{first.line_hash[:24]}-{first.position}",
        "kind": _kind(messages, pending_call is not None),
        "scope": "session",
        "scopeId": session_id,
        "sourceRef": {
            "store": STORE,
            "id": f"event-{first.line_hash[:16]}-{first.position}",
            "eventSequence": sequence,
            "digest": "sha256:" + first.line_hash,
        },
        "provenance": {"source": STORE, "observedAt": observed},
        "trust": _trust(messages),
        "sensitivity": "personal",
        "allowedSinks": sinks,
        "tokenEstimate": max(1, math.ceil(len(content.encode("utf-8")) / 4)),
        "priority": _priority(messages, sequence, pending_call is not None),
        "pinned": any(m.get("pinned") is True for m in messages),
        "createdAt": observed,
        "content": content,
    }
    if pending_call is not None:
        item["binding"] = {
            "taskState": "waiting",
            "toolCallId": pending_call,
            "toolOutcome": "pending",
            "requiredForRecovery": True,
        }
    return item


def messages_to_items(
    sources: Sequence[SourceMessage],
    session_id: str,
    *,
    allowed_sinks: Iterable[str] = ("*",),
    profile: Profile = "peer",
) -> list[dict[str, Any]]:
    """Project replay messages (transcript order) to normalized ContextItems."""
    sinks = _sorted_sinks(allowed_sinks)
    items: list[dict[str, Any]] = []
    index = 0
    while index < len(sources):
        source = sources[index]
        message = source.message
        calls = _tool_calls(message) if message.get("role") == "assistant" else []
        if calls:
            ids = [c.get("id") for c in calls if isinstance(c.get("id"), str) and c.get("id")]
            expected = set(ids)
            bundle = [source]
            seen: set[str] = set()
            cursor = index + 1
            while cursor < len(sources) and sources[cursor].message.get("role") == "tool":
                result_id = _result_id(sources[cursor].message)
                if result_id is None or result_id not in expected:
                    break
                bundle.append(sources[cursor])
                seen.add(result_id)
                cursor += 1
            pending = len(ids) != len(calls) or seen != expected
            group = f"tool-group-{source.line_hash[:24]}-{source.position}"
            items.append(
                _make_item(
                    session_id,
                    bundle,
                    pending_call=group if pending else None,
                    sinks=sinks,
                    profile=profile,
                )
            )
            index = cursor
            continue
        orphan = (
            f"tool-orphan-{source.line_hash[:24]}-{source.position}"
            if message.get("role") == "tool"
            else None
        )
        items.append(
            _make_item(session_id, [source], pending_call=orphan, sinks=sinks, profile=profile)
        )
        index += 1
    if items:
        last = items[-1]
        payload = json.loads(last["content"])
        if payload["messages"] and payload["messages"][-1].get("role") == "user":
            last = dict(last)
            last["kind"] = "task-state"
            last["priority"] = 900_000
            last["binding"] = {"taskState": "waiting", "requiredForRecovery": True}
            items[-1] = last
    return [seal(item, profile) for item in items]


def _decode(item: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    content = item.get("content")
    if not isinstance(content, str):
        return None
    try:
        payload = json.loads(content)
    except ValueError:
        return None
    if not isinstance(payload, dict) or payload.get("schema") != BUNDLE_SCHEMA:
        return None
    messages = payload.get("messages")
    return (
        [dict(m) for m in messages if isinstance(m, dict)] if isinstance(messages, list) else None
    )


def items_to_messages(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Replay messages for a compact event, in transcript order (not planner rank)."""

    def order(item: Mapping[str, Any]) -> tuple[int, str]:
        ref = item.get("sourceRef")
        seq = ref.get("eventSequence") if isinstance(ref, Mapping) else None
        return (seq if isinstance(seq, int) else MAX_SEQUENCE, str(item.get("itemId")))

    out: list[dict[str, Any]] = []
    for item in sorted(items, key=order):
        decoded = _decode(item)
        if decoded is not None:
            out.extend(decoded)
            continue
        text = item.get("content")
        if not isinstance(text, str):
            ref = item.get("contentRef")
            summary = ref.get("summary") if isinstance(ref, Mapping) else None
            text = f"[content stored externally: {summary or 'unavailable'}]"
        out.append(
            {
                "role": "system",
                "content": text,
                "_cc_replay": {"schema": REPLAY_SCHEMA, "kind": "compact-summary"},
            }
        )
    return out
