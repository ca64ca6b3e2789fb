"""CLI JSONL session store (``appendCompactEventIfMessagesMatch`` + ``rebuildMessages``)
→ projection.

The capture persists the input with the headless-runner turn projection (host system
prompts are not persisted), appends one compact event per compaction (its messages are
the compaction source's output, ``projectCanonicalResumeMessages``) and rebuilds the
history from the latest compact event.  The projection is the rebuilt history
(``rebuildMessages``) matched back to input identities; host system prompts are
dropped as ``not_persisted``; summaries carry ``_cc_replay`` provenance.  Facts:

* ``chain``: ``verifySession.status`` (``session.chain_invalid`` unless ``verified``);
* ``replay``: ``consistent`` when the rebuilt history equals the verified read and the
  latest compact event's messages (else ``session.replay_mismatch``); ``refused`` when
  the store refused the verified read (``readVerifiedMessages`` null: a crash left a torn,
  unverified tail and nothing was appended after it);
* ``writers``: who appended compact events (``legacy:jsonl-session-store``; a seeded
  ``resume-fixture`` event is input, not a write of this run).

A CAS-race scenario (``session_store.cas_race``) records the second writer's event as
``steps[k].concurrent_writer``: a message it appended is neither input nor derived by the
store, so it is left out of the matching (``noise.concurrent_writes`` counts them).

Event timestamps, hashes and the session file path (platform separators) are noise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from shadow.boundary import list_at, mapping_at
from shadow.canonical import Canon
from shadow.fixtures import Capture
from shadow.projection import Projection
from shadow.surfaces._drops import infer_drops, strategy_steps, with_covers
from shadow.surfaces._messages import input_sources, match_messages, source_ids
from shadow.surfaces.cli_compress import error_category

WRITER = "legacy:jsonl-session-store"


def _events(out: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    events = []
    for line in out.get("raw_jsonl_lines") or ():
        try:
            ev = json.loads(line)
        except (TypeError, ValueError):
            continue
        if isinstance(ev, Mapping):
            events.append(ev)
    return events


def _source_limits(capture: Capture, siblings: Mapping[str, Capture] | None) -> dict[str, Any]:
    """The stated limits of the compaction whose result this store persisted (the
    capture's ``input_binding.compaction_source``, a sibling capture)."""
    from shadow.fixtures import compaction_source
    from shadow.surfaces.cli_compress import cli_limits

    src = compaction_source(capture, siblings or {})
    return cli_limits(src) if src is not None else {}


def adapt(canon: Canon, capture: Capture, siblings: Mapping[str, Capture] | None = None
          ) -> Projection:
    session = canon.session
    assert session is not None
    out = capture.output
    if capture.error is not None or not isinstance(out, Mapping):
        return Projection(canon.name, capture.name, "baseline", status="error",
                          error=error_category(capture.error))
    seqs = [s for b in session.batches for s in range(*b)]
    sources = input_sources(session, seqs)
    offered = source_ids(sources, session)
    compacts = [e for e in _events(out) if e.get("type") == "compact"]
    written = [e for e in compacts
               if (e.get("data") or {}).get("trigger") not in ("resume-fixture",)]
    last = written[-1]["data"] if written else {}
    rebuilt = list_at(out, "rebuildMessages")
    prov = out.get("readVerifiedMessages_provenance")
    concurrent = _concurrent_messages(out)
    own, own_prov = _without(rebuilt, prov if isinstance(prov, list) else None, concurrent)
    match = match_messages(sources, own, session, provenance=own_prov)
    steps = strategy_steps(last.get("strategy"))
    drops = infer_drops(sources, match, session, steps, own, pair_repair=True)
    by_id = session.by_id
    drops = [replace(d, reason="not_persisted", legacy_reason="not-persisted")
             if (by_id.get(d.id) and by_id[d.id].role == "system"
                 and not by_id[d.id].detail.get("prior")) or not written else d
             for d in drops]  # with no compact event, what is missing was never a message
    with_covers(match, drops, {it.item_id: it.trust for it in session.items},
                {it.item_id: it.sensitivity for it in session.items})
    verify = mapping_at(out, "verifySession")
    refused = out.get("readVerifiedMessages") is None  # a torn, unverified transcript
    consistent = rebuilt == out.get("readVerifiedMessages") and (
        not written or _strip(last.get("messages")) == _strip(rebuilt))
    steps_out = list_at(out, "steps")
    settlement = _settlement(steps_out)
    return Projection(
        canon.name, capture.name, "baseline", input_ids=tuple(offered),
        items=tuple(match.items), dropped=tuple(sorted(drops, key=lambda d: d.id)),
        writers=(WRITER,) if written else (),
        facts={"chain": str(verify.get("status") or "unknown"),
               "replay": "refused" if refused else "consistent" if consistent else "mismatch",
               "settlement": settlement,
               "limits": _source_limits(capture, siblings), "order": "pinned_block",
               "match": dict(sorted(match.notes.items()))},
        noise={"events": len(_events(out)), "compacts": len(written),
               **({"concurrent_writes": len(concurrent)} if concurrent else {})},
    )


def _settlement(steps: list[Any]) -> str:
    """How the compact appends ended: ``ok``; ``stale`` (the store's compare-and-swap
    refused: ``SESSION_REVISION_STALE``); ``aborted`` (the compaction was cancelled, nothing
    to append); ``error`` (any other refusal)."""
    errors = [s.get("settlement_error") for s in steps if isinstance(s, Mapping)]
    if any(isinstance(e, Mapping) and e.get("code") == "SESSION_REVISION_STALE" for e in errors):
        return "stale"
    if any(errors):
        return "error"
    sources = [s.get("compaction_source_error") for s in steps if isinstance(s, Mapping)]
    if any(isinstance(e, Mapping) and e.get("name") == "AbortError" for e in sources):
        return "aborted"
    return "ok"


def _concurrent_messages(out: Mapping[str, Any]) -> list[Any]:
    """Messages a second writer appended in a CAS race (``steps[].concurrent_writer``)."""
    found = []
    for step in list_at(out, "steps"):
        cw = step.get("concurrent_writer") if isinstance(step, Mapping) else None
        data = cw.get("data") if isinstance(cw, Mapping) else None
        if isinstance(data, Mapping) and "role" in data:
            found.append(data)
    return found


def _without(rebuilt: list[Any], prov: list[Any] | None, concurrent: list[Any]
             ) -> tuple[list[Any], list[Any] | None]:
    """The rebuilt history (and its provenance) less one occurrence per concurrent write."""
    if not concurrent:
        return rebuilt, prov
    left = list(concurrent)
    keep = []
    for n, m in enumerate(rebuilt):
        if m in left:
            left.remove(m)
        else:
            keep.append(n)
    own_prov = [prov[n] for n in keep if n < len(prov)] if prov is not None else None
    return [rebuilt[n] for n in keep], own_prov


def _strip(messages: Any) -> list[Any]:
    if not isinstance(messages, list):
        return []
    return [{k: v for k, v in m.items() if k != "_cc_replay"} if isinstance(m, Mapping) else m
            for m in messages]

