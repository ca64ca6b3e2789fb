"""CLI ``PromptCompressor.compress(messages, {preserveToolPairs, isPinned})`` → projection.

Native output ``{messages, stats}``.  Output messages are matched back to input
identities (``_messages`` rules); ``output_provenance`` marks durable summaries and
collapse markers.  Drop reasons are inferred from ``stats.strategy`` (``dedup`` →
``duplicate``, ``truncate``/``snip`` → ``input_budget``, ``collapse`` → ``collapsed``,
``summarize`` → ``summarized``; a result removed by tool-pair repair →
``tool_pair_repair``).  Token counts in ``stats`` are noise.  Two-call captures
(``calls[]``) are replayed in order: call k's output (with its derived items) plus
follow-up batch k is call k+1's input; the projection is the last call's.

The same chain serves the provider-backed CLI compaction and Desktop compress
(``project_chain``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from shadow.boundary import list_at, mapping_at
from shadow.canonical import Canon
from shadow.fixtures import Capture
from shadow.projection import Drop, Projection, ProviderOutcome
from shadow.projection_wire import code_word
from shadow.surfaces._drops import infer_drops, strategy_steps, with_covers
from shadow.surfaces._messages import Source, input_sources, match_messages, source_ids

StatsOf = Callable[[Mapping[str, Any]], tuple[str | None, Mapping[str, Any]]]


def _cli_stats(out: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any]]:
    stats = mapping_at(out, "stats")
    noise = {k: stats[k] for k in ("originalTokens", "compressedTokens", "saved", "ratio")
             if k in stats}
    return stats.get("strategy"), noise


def calls_of(capture: Capture) -> list[Mapping[str, Any]]:
    if capture.calls:
        return [c for c in capture.calls if isinstance(c, Mapping)]
    return [{"output": capture.output, "error": capture.error,
             "output_provenance": list(capture.output_provenance or ())}]


def error_category(err: Any) -> str:
    """A capture error's category: its ``name`` when it is a code word (never free text or
    a secret), else ``Error``."""
    if isinstance(err, Mapping):
        return code_word(err.get("name") or "Error", "Error")
    return "Error"


def project_chain(canon: Canon, capture: Capture, stats_of: StatsOf, *,
                  pair_repair: bool,
                  provider_of: Callable[[int, Mapping[str, Any] | None, Any], ProviderOutcome]
                  | None = None,
                  rewrite: Any = None, facts: Mapping[str, Any] | None = None) -> Projection:
    """Replay the capture's calls through the matcher; the last call's projection.

    ``facts`` (stated limits, documented order, provider calls that carried secrets) are
    recorded on the projection for the claim checks."""
    session = canon.session
    assert session is not None
    sens_of = {it.item_id: it.sensitivity for it in session.items}
    first, end = session.batches[0]
    sources: list[Source] = input_sources(session, range(first, end))
    offered = list(source_ids(sources, session))
    calls = calls_of(capture)
    trust_of = {it.item_id: it.trust for it in session.items}
    projection: Projection | None = None
    earlier: dict[str, Drop] = {}  # items an earlier call dropped stay dropped
    history: list[dict[str, Any]] = []  # provider outcomes of the earlier calls
    for k, call in enumerate(calls):
        if k > 0 and k < len(session.batches):
            b0, b1 = session.batches[k]
            extra = input_sources(session, range(b0, b1))
            offered += source_ids(extra, session)
            sources = sources + extra
        out = call.get("output")
        if k and projection is not None and projection.provider is not None:
            history.append(asdict(projection.provider))
        provider = provider_of(k, out if isinstance(out, Mapping) else None,
                               call.get("error")) if provider_of else None
        if call.get("error") is not None or not isinstance(out, Mapping):
            return Projection(canon.name, capture.name, "baseline", status="error",
                              error=error_category(call.get("error")),
                              input_ids=tuple(offered), provider=provider,
                              facts={**dict(facts or {}),
                                     **({"provider_history": list(history)} if history
                                        else {})})
        messages: Sequence[Any] = list_at(out, "messages")
        prov = call.get("output_provenance")
        last = k == len(calls) - 1
        match = match_messages(sources, messages, session,
                               provenance=prov if isinstance(prov, list) else None,
                               rewrite=rewrite, derived_prefix="" if last else f"c{k + 1}.")
        strategy, noise = stats_of(out)
        drops = infer_drops(sources, match, session, strategy_steps(strategy), messages,
                            pair_repair=pair_repair)
        with_covers(match, drops, trust_of, sens_of)
        seen = {it.id for it in match.items} | {x.id for x in drops}
        drops = [*drops, *(d for i, d in sorted(earlier.items()) if i not in seen)]
        earlier = {d.id: d for d in drops}
        projection = Projection(
            canon.name, capture.name, "baseline", input_ids=tuple(offered),
            items=tuple(match.items), dropped=tuple(sorted(drops, key=lambda d: d.id)),
            provider=provider, noise=dict(noise),
            facts={**dict(facts or {}), "strategy": strategy_steps(strategy),
                   "match": dict(sorted(match.notes.items())),
                   **({"provider_history": list(history)} if history else {})},
        )
        sources = list(match.next_sources)
    assert projection is not None
    return projection


def cli_limits(capture: Capture) -> dict[str, Any]:
    """The CLI compressor's stated limits: ``maxMessages`` as resolved for this run (the
    capture's ``diagnostics.resolved_thresholds``; else an explicit constructor option;
    else the documented non-adaptive default 20).  Truncation keeps the most recent."""
    diag = mapping_at(capture.raw, "diagnostics")
    res = mapping_at(diag, "resolved_thresholds")
    ctor = mapping_at(capture.options, "constructor")
    limit = res.get("maxMessages")
    if not isinstance(limit, int):
        limit = ctor.get("maxMessages")
    if not isinstance(limit, int) and not (ctor.get("model") or ctor.get("provider")):
        limit = 20
    out: dict[str, Any] = {"order": "recency"}
    if isinstance(limit, int) and not isinstance(limit, bool):
        out["messages"] = limit
    return out


def adapt(canon: Canon, capture: Capture, siblings: Mapping[str, Capture] | None = None
          ) -> Projection:
    ctor = mapping_at(capture.options, "compress")
    return project_chain(canon, capture, _cli_stats,
                         pair_repair=bool(ctor.get("preserveToolPairs", False)),
                         facts={"limits": cli_limits(capture), "order": "pinned_block"})


