"""Reason-code registry: every divergence the shadow harness reports carries one of these.

A code names *why* two projections differ (or why one projection alone breaks a
design invariant).  Each entry has a default severity (``blocking`` > ``major`` >
``minor`` > ``info``), a flag saying whether it belongs to a NO-GO class of
design 108 §16 (dual writer, scope widened, deletion revived, tool result
mismatch / pair split, pending state lost, shadow double side effect), the
meaning, and an example.

A second flag, ``protection``, marks the design's protections (§7 protected items, §8.3
compaction invariants, §12 trust and sensitivity, §17 failure semantics): broken by the
candidate they block just as a NO-GO class does, but a reviewed waiver may still accept
them for a while (a NO-GO class never).

Attribution (one vocabulary, ``ATTRIBUTIONS``): ``candidate``, ``baseline``, ``both`` (the
side whose own invariant violations or falsified claims explain the difference),
``intended`` (a reviewed intended-difference rule says the kernel is right by design),
``twin`` (two legacy surfaces compared with each other) and ``none`` (nothing explains
it; the divergence then states why in ``detail.attribution_reason``).

Severity rules applied by the divergence engine (see ``severity_for``):

* a NO-GO-class or protection code attributed to the candidate (or to both) is
  ``blocking``;
* a code attributed only to a legacy baseline, a twin, an intended rule or nobody is
  never ``blocking`` (the cutover fixes legacy defects; they are reported, they do not
  gate the candidate);
* ``noise.*`` codes are always ``info`` and can never block;
* ``fixture.invalid`` (a quarantined fixture), ``candidate.unavailable`` (a candidate
  that produced nothing to judge), ``replay.crashed`` and ``served.unavailable`` are
  always ``blocking``: missing evidence is never a GO.

One failure rule (``counts_against_candidate`` / ``fails``) decides what a "failing"
case is for the run, JUnit, the pytest plugin, the reports and the gate: a divergence
counts against the candidate when it is attributed to ``candidate``, ``both`` or
``none``; legacy defects, intended differences and twin comparisons never do.

``docs/reason-codes.md`` is generated from this table (``render_markdown``) and a
test keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

SEVERITIES: Final = ("blocking", "major", "minor", "info")
ATTRIBUTIONS: Final = ("candidate", "baseline", "both", "intended", "twin", "none")
#: attributions that make a divergence count against the candidate (the one failure rule)
AGAINST_CANDIDATE: Final = frozenset({"candidate", "both", "none"})
_RANK: Final = {s: i for i, s in enumerate(SEVERITIES)}


@dataclass(frozen=True, slots=True)
class ReasonCode:
    code: str
    severity: str  # default severity
    nogo: bool  # a NO-GO class of design 108 §16
    meaning: str
    example: str
    protection: bool = False  # a design protection: blocking when the candidate breaks it

    def to_wire(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "nogo": self.nogo,
                "protection": self.protection, "meaning": self.meaning,
                "example": self.example}


_B, _M, _m, _I = "blocking", "major", "minor", "info"

_TABLE: Final[tuple[ReasonCode, ...]] = (
    # -- identity and order -------------------------------------------------------------
    ReasonCode("item.missing_in_candidate", _M, False,
               "An item the baseline kept is absent from the candidate's output.",
               "Desktop keeps `s:m0003`; the kernel dropped it for `partition_ceiling`."),
    ReasonCode("item.missing_in_baseline", _M, False,
               "An item the candidate kept is absent from the baseline's output.",
               "CLI dedup removed the empty assistant message `s:m0004.c1` the kernel keeps."),
    ReasonCode("item.order", _m, False,
               "Both sides kept the same items but in a different relative order.",
               "Pinned `s:m0001` re-inserted after the system block by the CLI."),
    ReasonCode("item.derived_mismatch", _M, False,
               "Derived items (summary, collapse marker, compressed ref) differ in kind, "
               "count or the input identities they replace.",
               "CLI collapse marker covers 10 tool results; the kernel has no marker."),
    ReasonCode("drop_reason.mismatch", _m, False,
               "Both sides dropped an item but for different canonical reasons "
               "(the legacy reason is kept in the detail).",
               "legacy `dedup` -> `duplicate` vs kernel `input_budget`."),
    ReasonCode("drop_reason.unjustified", _M, False,
               "A producer's own reason for dropping an item is false on the input: not a "
               "duplicate of a surviving item, not over its stated limit, not the lowest "
               "priority left, its tool partner not orphaned, or nothing replaces it.",
               "`claude-3-5-sonnet` / `cli.compress`: `dedup` dropped 23 calls (`m0004.c1` "
               "…) with null content and a call unlike every survivor's; pair repair then "
               "dropped their results (`m0005` …), orphaned by that drop."),
    ReasonCode("item.reordered", _M, False,
               "Input items are rendered out of their source order where the producer "
               "documents no reordering (e.g. a request moved after the turn answering it).",
               "`pending-approval` / `cli.compress`: dedup re-appends the last user request "
               "`m0007` after the assistant turn `m0008` that answers it."),
    ReasonCode("budget.exceeded", _M, False,
               "A candidate's committed output holds more tokens (the kernel's own estimates "
               "of the input items, a length estimate of derived ones) than the selectable "
               "budget of its policy (design 108 §8.3: the plan fits its budget).  Judged on "
               "the candidate only: each legacy counts tokens its own way.",
               "Mutation suite: a recorded candidate keeps the whole `provider-cancelled` / "
               "`desktop.compress` history (4,398 tokens) under its 4,000-token budget and "
               "says it never asked the provider.  (Uncommitted on purpose: the kernel's "
               "`reconciliation_required` keeps the history, §17.)", protection=True),
    ReasonCode("digest.mismatch", _M, False,
               "The same identity carries different content on the two sides.",
               "Desktop context engineering rewrote dates in the system prompt `s:m0000`."),
    ReasonCode("alteration.unjustified", _M, False,
               "A producer changed an input item's content beyond the transformation it "
               "claims (cleaning volatile fields, trimming to a prefix), or a candidate "
               "altered an input item it may only select.",
               "Mutation suite: a user message rewritten in a CLI output "
               "(`no_claimed_transformation`); a `trimmed` chip cut inside a character "
               "(`split_character`). The bundled corpus has none."),
    ReasonCode("system_policy.altered", _M, False,
               "Trusted system policy is rendered with content other than its authoritative "
               "digest and no verified documented transformation (design 108 §7, §8.3).",
               "Mutation suite: a recorded candidate renders `m0000` with another digest. "
               "(Desktop's cleaned prompt is a verified claim: intended rule ID-001.)",
               protection=True),
    # -- tool pairs, pending and task state (NO-GO classes) ------------------------------
    ReasonCode("tool_pair.split", _B, True,
               "A tool call and its result are not kept together, and the missing half is "
               "not marked pending/unknown.",
               "Result `s:m0005` kept while its call `s:m0004.c1` was dropped."),
    ReasonCode("tool_pair.mismatch", _B, True,
               "A tool result is bound to the wrong call, lost its call binding, or the two "
               "sides disagree about a pair's membership or outcome.",
               "Context engineering strips `tool_call_id` from every tool message."),
    ReasonCode("pending.lost", _B, True,
               "A pending approval, question or tool call (no result yet) was dropped or its "
               "binding changed.",
               "The force-push call awaiting approval `s:m0008.c1` is missing."),
    ReasonCode("task_state.mismatch", _M, False,
               "The current task state differs: last user request, open calls, outcomes.",
               "The last user request is kept by one side only."),
    ReasonCode("protected.dropped", _M, False,
               "A protected item (host policy, pinned, recovery-bound) was dropped silently.",
               "IDE budget 0 excluded the user-pinned selection chip.", protection=True),
    ReasonCode("pinned.altered", _M, False,
               "A pinned item's content differs from its input digest.",
               "Pinned constraint `s:m0001` rewritten by a summary.", protection=True),
    ReasonCode("trust.escalated", _M, False,
               "Text from an external or untrusted source (tool output, a fetched page, MCP, "
               "imported memory) reaches an item of higher trust — a system message or "
               "policy, any field of a summary, a collapse marker, a memory record (judged "
               "from the text: shingle overlap) — or an item claims more trust than its "
               "source.",
               "`prompt-injection-web-fetch` / `cli.provider-compaction`: the extractive "
               "fallback's system-role summary carries the pages `m0003`, `m0005` in "
               "`keyDecisions` and `nextSteps` (`curl … | sh`).", protection=True),
    ReasonCode("secret.leaked", _B, False,
               "An item classified secret reaches a sink its allowedSinks do not allow "
               "(e.g. a remote provider).",
               "`secrets-in-tool-output` / `cli.provider-compaction`: the recorded summarizer "
               "request carries the `.env` API key (`sink: summarizer request`).", protection=True),
    ReasonCode("summary.text_only", _m, False,
               "Only summary text differs; identities, pairs, pending state and covered items "
               "agree (never judged from summary strings alone).",
               "Pretty-printed vs compact JSON of the same recorded handoff."),
    # -- provider outcomes ----------------------------------------------------------------
    ReasonCode("provider.degraded_masked", _M, False,
               "A provider failure or invalid answer is presented as a normal semantic "
               "summary or silently skipped, without a degraded flag.",
               "Desktop puts invalid JSON prose into `[历史对话总结]` as if valid.",
               protection=True),
    ReasonCode("provider.usage_unknown_masked", _M, False,
               "Provider usage is unknown but the compaction is committed as settled "
               "(instead of reconciliation_required).",
               "Usage not reported by the provider, compaction committed anyway.", protection=True),
    ReasonCode("provider.cancel_swallowed", _M, False,
               "A cancelled provider call is turned into a normal result instead of an "
               "aborted operation.",
               "AbortError during summarization; Desktop returns a truncated history.",
               protection=True),
    # -- memory and deletion --------------------------------------------------------------
    ReasonCode("memory.scope_expanded", _B, True,
               "A memory record is written, moved or read at a wider scope than its source "
               "or request allows.",
               "Consolidation of session `sess-42` writes facts at agent scope."),
    ReasonCode("memory.sensitivity_lowered", _M, False,
               "A memory record's sensitivity is lower than its evidence's.",
               "Mutation suite: an LLM consolidation stores a fact holding an API key as "
               "ordinary memory.", protection=True),
    ReasonCode("memory.state_mismatch", _M, False,
               "Memory record states or operation effects differ (created, updated, state).",
               "Consolidated facts written `active` instead of `candidate`."),
    ReasonCode("memory.recall_mismatch", _M, False,
               "Recall returns a different set (or order) of records, or reads outside the "
               "admitted scopes.",
               "`memory-recall-chinese`: a recall without a scopeId scans every session; "
               "`memory-update-remove`: a record matching no query word is returned for its "
               "score alone (`irrelevant_to_query`)."),
    ReasonCode("deletion.backfill", _B, True,
               "A deleted memory record becomes visible again (revived).",
               "`get` returns a record after `remove` returned true."),
    ReasonCode("deletion.overbroad", _M, False,
               "A deletion removed records outside its selector.",
               "`clearScope('global', 'unrelated')` removes every global record.", protection=True),
    ReasonCode("deletion.receipt_mismatch", _M, False,
               "A deletion's receipt (returned value) disagrees with its effect, or a "
               "removal reports success and removed nothing (design 108 §10: a receipt "
               "says what was deleted).",
               "`remove` returns true but the record is still listed.", protection=True),
    ReasonCode("writer.dual", _B, True,
               "More than one writer appended to the same authoritative store for one "
               "operation.",
               "Legacy compressor and kernel both append a compact event."),
    ReasonCode("shadow.side_effect", _B, True,
               "The shadow run attempted an unrecorded provider request or a write: a real "
               "side effect a shadow must never cause.",
               "Candidate asks for a summary and no recorded answer exists."),
    # -- outcomes of the entry points themselves --------------------------------------------
    ReasonCode("outcome.error_mismatch", _M, False,
               "One side threw / failed where the other returned a result.",
               "Desktop throws TypeError on a message without `content`."),
    ReasonCode("session.replay_mismatch", _M, False,
               "A session store's rebuilt history disagrees with its verified read or with "
               "the compact event it replays from.",
               "`rebuildMessages` differs from `readVerifiedMessages`."),
    ReasonCode("session.chain_invalid", _M, False,
               "A session store's hash chain does not verify.",
               "`verifySession.status` is not `verified`."),
    ReasonCode("candidate.unavailable", _B, False,
               "The candidate cannot produce a projection for this surface (not built, "
               "not recorded, or it failed).",
               "Recorded candidate folder has no projection for `s/cli.compress`."),
    ReasonCode("served.unavailable", _B, False,
               "The kernel served by `shadow app-server` (surface `app-server`, or the SDK: "
               "`sdk`) gave no projection: the server ended, hung past its timeout, wrote "
               "something that is not a protocol line, or answered an error that is not a "
               "kernel refusal (docs/app-server.md).",
               "`sdk.cli.compress`: ServerGone, \"no answer within 60 s\"."),
    ReasonCode("served.mismatch", _M, False,
               "The served kernel's projection differs from the in-process kernel's in "
               "fields no other code names (design 108 §14: every surface gives the same "
               "plan for the same input).",
               "`app-server.desktop.compress`: fields [\"facts\"] differ."),
    # -- noise: normalised, never blocking --------------------------------------------------
    ReasonCode("noise.path_format", _I, False,
               "Only platform path separators in metadata differ.",
               "`src\\\\app.ts` vs `src/app.ts` in a chip label."),
    ReasonCode("noise.token_estimate", _I, False,
               "Only token estimates differ (tokenizer diagnostics).",
               "`compressedTokens` 435 vs 441."),
    ReasonCode("noise.volatile_field", _I, False,
               "Only volatile fields differ: timings, timestamps, UI text, whitespace.",
               "`processingTime` 0 vs 3."),
    ReasonCode("noise.learned_field", _I, False,
               "A legacy capture's values on fields a reviewed noise rule names (learned by a "
               "control-vs-control capture run: clock- or seed-derived) were neutralised "
               "before judging; rule ids, paths and counts only (docs/noise.md).",
               "`session-core.memory`: NR-014 `/output/ops/*/result/createdAt`, 22 values."),
    # -- input and catch-all ------------------------------------------------------------------
    ReasonCode("fixture.invalid", _B, False,
               "A fixture failed validation and was quarantined; its evidence is missing.",
               "`x/cli.compress.json: /output: expected an object`."),
    ReasonCode("replay.crashed", _B, False,
               "The replay of a fixture killed or hung its worker, or the map step raised: "
               "the fixture is quarantined and named, nothing of it was judged; the run "
               "goes on (docs/scale.md).",
               "`x`: \"the worker process died\" (process executor, retried alone)."),
    ReasonCode("unclassified", _M, False,
               "A difference no rule explains. Itself a finding; never silently dropped.",
               "A field present on one side only with no known meaning."),
    # -- gate reasons (``shadow gate``; shadow/gates/): judge evidence, not projections ------
    ReasonCode("evidence.missing", _B, False,
               "Evidence a phase requires is absent: no evidence file, or a required check, "
               "inventory or attached test result was never produced.",
               "Phase 2 needs `conformance.session_store`; no JUnit file was attached."),
    ReasonCode("evidence.missing_platform", _B, False,
               "A required platform (linux, windows, macos by default) has no evidence for "
               "the candidate being gated.",
               "Only `linux` and `windows` evidence.json files were given."),
    ReasonCode("evidence.mixed_candidate", _B, False,
               "The evidence files do not all bind to the same candidate identity (commit, "
               "package version, corpus, recordings, policy, waivers).",
               "The macOS run was made on commit `a1b2c3d`, the others on `d4e5f6a`."),
    ReasonCode("evidence.insufficient", _B, False,
               "A surface has too few fixtures, or its divergence rate cannot be bounded "
               "below the threshold (Wilson upper bound) on the evidence given.",
               "`vscode`: 5 fixtures, 0 failing, upper bound 0.35 > 0.20."),
    ReasonCode("evidence.synthetic", _B, False,
               "The evidence was produced on a synthetic corpus (`shadow synth`, "
               "`synthetic: true`): a scale test, never release evidence.",
               "`corpus`: 100000 synthetic fixture(s) in the evidence (shadow synth)."),
    ReasonCode("evidence.platform_mismatch", _B, False,
               "Runs of the same candidate on different platforms produced different "
               "results (divergences, defects or cases).",
               "Windows reports a `noise.path_format` divergence Linux does not."),
    ReasonCode("policy.version_mismatch", _B, False,
               "The evidence was produced under another gate-policy version than the one "
               "the gate applies.",
               "Evidence says `gate-policy/1`, `shadow gate` loaded `gate-policy/2`."),
    ReasonCode("policy.check_failed", _B, False,
               "A check a phase requires ran and failed (inventory, frozen schemas, "
               "classification, determinism, conformance, fail-closed probes).",
               "`replay.deterministic`: a second replay in reverse order differs."),
    ReasonCode("policy.divergence_threshold", _B, False,
               "A phase's surfaces have more fixtures with unwaived divergences at or above "
               "the phase's severity than the policy allows.",
               "`cli`: 20 of 32 fixtures have an unwaived `major` divergence; 0 allowed."),
    ReasonCode("policy.nogo_class", _B, False,
               "A divergence of a design 108 §16 NO-GO class is attributed to the candidate: "
               "NO-GO in every phase, never waivable.",
               "`tool_pair.split` by the candidate on `cli.compress`."),
    ReasonCode("policy.waiver_expired", _B, False,
               "A waiver the evidence relied on has expired by the gate date; the divergences "
               "it covered count again.",
               "`W-004` expired 2026-10-01; the evidence was produced on 2026-09-20."),
)

REGISTRY: Final[Mapping[str, ReasonCode]] = MappingProxyType({c.code: c for c in _TABLE})
NOGO_CODES: Final = frozenset(c.code for c in _TABLE if c.nogo)
PROTECTION_CODES: Final = frozenset(c.code for c in _TABLE if c.protection)
ALWAYS_BLOCKING: Final = frozenset({"fixture.invalid", "candidate.unavailable",
                                    "replay.crashed", "served.unavailable"})


def get(code: str) -> ReasonCode:
    try:
        return REGISTRY[code]
    except KeyError:
        raise KeyError(f"unregistered reason code {code!r}") from None


def codes() -> Iterator[ReasonCode]:
    return iter(_TABLE)


def max_severity(a: str, b: str) -> str:
    return a if _RANK[a] <= _RANK[b] else b


def severity_rank(severity: str) -> int:
    return _RANK[severity]


def severity_for(code: str, attribution: str) -> str:
    """The severity of one divergence: registry default adjusted by who broke it."""
    rc = get(code)
    if attribution not in ATTRIBUTIONS:
        raise ValueError(f"unknown attribution {attribution!r}")
    if code.startswith("noise."):
        return "info"
    if code in ALWAYS_BLOCKING:  # missing evidence blocks whoever is being judged
        return "blocking"
    if (rc.nogo or rc.protection) and attribution in ("candidate", "both"):
        return "blocking"
    if rc.severity == "blocking" and attribution not in ("candidate", "both"):
        return "major"
    return rc.severity


def counts_against_candidate(attribution: str) -> bool:
    """The one failure rule's attribution half: legacy defects, intended differences and
    twin comparisons never fail the candidate; unexplained (``none``) differences do."""
    return attribution in AGAINST_CANDIDATE


def fails(divergence: Mapping[str, Any], fail_at: str = "major") -> bool:
    """The one failure rule: an (unwaived) divergence fails its case when it counts
    against the candidate and its severity is ``fail_at`` or worse.  Used by the run,
    JUnit, the pytest plugin, the reports and the gate's rate rules."""
    return counts_against_candidate(str(divergence.get("attribution"))) and \
        _RANK[str(divergence.get("severity"))] <= _RANK[fail_at]


def registry_json() -> list[dict[str, Any]]:
    return [c.to_wire() for c in _TABLE]


def render_markdown() -> str:
    """The table part of ``docs/reason-codes.md``."""
    lines = ["| code | severity | NO-GO class | protection | meaning | example |",
             "|---|---|---|---|---|---|"]
    for c in _TABLE:
        ex = c.example.replace("|", "\\|")
        meaning = c.meaning.replace("|", "\\|")
        nogo = "yes" if c.nogo else "no"
        prot = "yes" if c.protection else "no"
        lines.append(f"| `{c.code}` | {c.severity} | {nogo} | {prot} | {meaning} | {ex} |")
    return "\n".join(lines) + "\n"
