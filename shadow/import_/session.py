"""One verified session file → redacted fixtures, and what was skipped.

The whole session is redacted first (one :class:`~shadow.import_.redact.Redactor`, so a
value gets the same placeholder in every fixture of the session), then replayed; each
compact event becomes one scenario unless it is skipped:

=========================  ==============================================================
``compact.malformed``      a ``compact`` event whose ``data.messages`` is not an array
                           (the legacy reader does not treat it as a checkpoint either)
``compact.kernel_written`` written by the kernel (``data.canonical``): the kernel's own
                           output, not legacy evidence
``compact.no_strategy``    its stats name no compressor strategy: no compaction source
                           the candidate could be judged by
``compact.ws_turn``        its window holds a ``ws_turn`` event (not projected here)
``compact.empty_input``    the replay before it holds no message (nothing was compacted)
``compact.invalid``        the documents would not load as fixtures (the pointer says
                           where; e.g. a role outside system/user/assistant/tool)
``compact.residual``       a written string would still hold something a detector finds
                           (a safety net: the fixture is not written)
=========================  ==============================================================
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from shadow.errors import FixtureError
from shadow.fixtures import validate_capture, validate_input
from shadow.import_.build import (
    compress_capture,
    compressor_ran,
    input_doc,
    model_of,
    provenance_of,
    session_capture,
    stats_of,
)
from shadow.import_.redact import Redactor, leaks
from shadow.import_.replay import Window, malformed_compacts, windows
from shadow.import_.store import Event, Quarantine, SessionFile

Docs = dict[str, dict[str, Any]]  # file name -> document


@dataclass
class SessionImport:
    """What one session yielded."""

    file: str  # redacted label
    events: int = 0
    compact_events: int = 0
    fixtures: dict[str, Docs] = field(default_factory=dict)  # scenario -> documents
    skipped: list[Quarantine] = field(default_factory=list)
    redactions: dict[str, int] = field(default_factory=dict)


def strings(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """Every (string, key it is the value of) in a JSON value, keys too."""
    if isinstance(value, str):
        yield value, key
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield str(k), ""
            yield from strings(v, str(k))


def _written_strings(doc: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """What the guard scans: every string of the document; a raw JSONL line is scanned
    as the event it holds (its escaping would fool a detector: an escaped ``\\n`` is no
    UNC path)."""
    output = doc.get("output")
    lines = output.get("raw_jsonl_lines") if isinstance(output, Mapping) else None
    if not isinstance(output, Mapping) or not isinstance(lines, list):
        yield from strings(doc)
        return
    yield from strings({k: v for k, v in doc.items() if k != "output"})
    yield from strings({k: v for k, v in output.items() if k != "raw_jsonl_lines"})
    for line in lines:
        yield from strings(json.loads(line))


def _problem(scenario: str, docs: Docs) -> tuple[str, str] | None:
    """(reason, detail) when the documents must not be written, else None."""
    try:
        validate_input(docs["input.json"], f"{scenario}/input.json", scenario)
        for fname, doc in docs.items():
            if fname != "input.json":
                validate_capture(doc, f"{scenario}/{fname}", scenario, fname[:-len(".json")])
    except FixtureError as exc:
        return "compact.invalid", f"{exc.source.split('/', 1)[1]} at {exc.pointer or '/'}: " \
                                  f"expected {exc.expected}"
    for fname, doc in docs.items():
        if any(leaks(s, k) for s, k in _written_strings(doc)):
            return "compact.residual", f"{fname}: a detector still finds something"
    return None


def _docs(scenario: str, sid: str, file: str, events: list[Event], window: Window) -> Docs:
    prov = provenance_of(file, events, window)
    return {"input.json": input_doc(scenario, window, prov, model_of(events)),
            "cli.jsonl-session.json": session_capture(scenario, sid, events, window, prov),
            "cli.compress.json": compress_capture(scenario, events, window, prov)}


def _skip_reason(window: Window, compact: Event) -> str | None:
    data = compact.data if isinstance(compact.data, Mapping) else {}
    if "canonical" in data:
        return "compact.kernel_written"
    if not compressor_ran(stats_of(compact)):
        return "compact.no_strategy"
    if window.ws_turn:
        return "compact.ws_turn"
    if not window.messages:
        return "compact.empty_input"
    return None


def import_session(session: SessionFile, slug: str) -> SessionImport:
    """Redact, replay and build every fixture of one verified session."""
    red = Redactor()
    out = SessionImport(red.text(session.file))
    sid = red.text(session.name)
    events = [Event(e.line, e.type, e.timestamp, red.value(e.data)) for e in session.events]
    out.events = len(events)
    out.compact_events = sum(1 for e in events if e.type == "compact")
    out.skipped += [Quarantine(out.file, e.line, "compact.malformed",
                               "data.messages is not an array")
                    for e in malformed_compacts(events)]
    for window in windows(events):
        line = events[window.compact].line
        reason = _skip_reason(window, events[window.compact])
        if reason is not None:
            out.skipped.append(Quarantine(out.file, line, reason))
            continue
        scenario = f"{slug}-c{window.index:02d}"
        docs = _docs(scenario, sid, out.file, events, window)
        problem = _problem(scenario, docs)
        if problem is not None:
            out.skipped.append(Quarantine(out.file, line, *problem))
            continue
        out.fixtures[scenario] = docs
    out.skipped.sort(key=lambda q: q.line)
    out.redactions = dict(sorted(red.counts.items()))
    return out
