"""The mutation suite, legacy side: every NO-GO class, protection and detection injected
into copies of real captures (in memory, re-validated as files are), on every surface
where it applies, hypothesis choosing the fixture, the item and the variant.  Each is a
legacy defect (``legacy_defects``, attribution ``baseline``, never blocking).  Benign
noise on every surface — key order, token counts, timings, freshness stamps, memory and
tool-call ids renamed under the captures' determinism rules — adds nothing above
``info``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shadow.recorded_provider import parse_summary
from tests.shadow._mutate import (
    PAIR_FIXTURES,
    SETTINGS,
    canon_of,
    drop,
    expect_baseline,
    expect_candidate,
    find,
    judged,
    live,
    llm_consolidation,
    messages,
    replay_baseline,
    replay_candidate,
    scenario,
)

# =========================================================================== baseline side


def _out_ids(name: str, surface: str) -> list[str]:
    return [it.id for it in next(p for p in _baselines(name) if p.surface == surface).items]


def _draw_kept(data: st.DataObject, names: tuple[str, ...],
               pred: Callable[[Any], bool]) -> tuple[str, str, Any]:
    """A fixture, one of its message surfaces and a canonical item that surface kept and
    ``pred`` accepts (hypothesis draws all three)."""
    name = data.draw(st.sampled_from(names))
    surface = data.draw(st.sampled_from([c.name for c in scenario(name).captures
                                         if c.name in ("cli.compress", "desktop.compress",
                                                       "desktop.context-engineering")]))
    by_id = canon_of(name).session.by_id
    cands = [i for i in _out_ids(name, surface) if i in by_id and pred(by_id[i])]
    return name, surface, by_id[data.draw(st.sampled_from(cands))]


def _baselines(name: str) -> list[Any]:
    from shadow.surfaces import adapter_for

    sc = scenario(name)
    canon = canon_of(name)
    sib = {c.name: c for c in sc.captures}
    return [adapter_for(c.name)(canon, c, sib) for c in sc.captures]  # type: ignore[misc]


@SETTINGS
@given(data=st.data())
def test_legacy_tool_pair_split_and_mismatch_are_named(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(PAIR_FIXTURES))
    surface = data.draw(st.sampled_from(("cli.compress", "desktop.compress")))
    doc = copy.deepcopy(dict(next(c for c in scenario(name).captures
                                  if c.name == surface).raw))
    tools = [n for n, m in enumerate(messages(doc)) if m.get("role") == "tool"
             and m.get("tool_call_id")]
    if not tools:
        return
    pos = data.draw(st.sampled_from(tools))
    tcid = messages(doc)[pos]["tool_call_id"]
    calls = [c["id"] for m in messages(doc) for c in m.get("tool_calls") or ()]
    if tcid not in calls:
        return
    split = data.draw(st.booleans())
    canon = canon_of(name)
    result_id = next(it.item_id for it in canon.session.items
                     if it.legacy_tool_id == tcid and it.tool_role == "result")

    def mutate(d: dict[str, Any]) -> None:
        msgs = messages(d)
        if split:
            del msgs[pos]
        else:
            msgs[pos]["tool_call_id"] = next((c for c in calls if c != tcid), "call_nowhere")
    r = replay_baseline(name, {f"{surface}.json": mutate})
    expect_baseline(r, "tool_pair.split" if split else "tool_pair.mismatch", surface, result_id)


@SETTINGS
@given(data=st.data())
def test_legacy_pending_and_protected_losses_are_named(data: st.DataObject) -> None:
    name, surface, ci = _draw_kept(
        data, ("pending-approval", "short-session", "mixed-zh-en", "long-en-coding-session"),
        lambda c: c.binding.get("toolOutcome") == "pending"
        or bool(c.binding.get("requiredForRecovery")))
    victim = ci.item_id

    def remove(d: dict[str, Any]) -> None:
        msgs = messages(d)
        for n, m in enumerate(msgs):
            if ci.tool_role == "call" and any(c.get("id") == ci.legacy_tool_id
                                               for c in m.get("tool_calls") or ()):
                m["tool_calls"] = [c for c in m["tool_calls"] if c.get("id") != ci.legacy_tool_id]
                if not m["tool_calls"]:
                    m.pop("tool_calls")
                return
            if ci.tool_role is None and m.get("role") == ci.role and m.get("content") == ci.content:
                del msgs[n]
                return
    r = replay_baseline(name, {f"{surface}.json": remove})
    code = "pending.lost" if ci.tool_role == "call" else "protected.dropped"
    expect_baseline(r, code, surface, victim)


@SETTINGS
@given(data=st.data())
def test_legacy_altering_pinned_or_policy_content_is_named(data: st.DataObject) -> None:
    name, surface, ci = _draw_kept(
        data, ("pinned-messages", "short-session", "windows-paths"),
        lambda c: c.pinned or c.kind == "system-policy")
    victim = ci.item_id
    word = data.draw(st.sampled_from(("never", "always", "immediately")))

    def alter(d: dict[str, Any]) -> None:
        for m in messages(d):
            if m.get("role") == ci.role and isinstance(m.get("content"), str) and (
                    m["content"] == ci.content or (ci.kind == "system-policy"
                                                   and m.get("role") == "system")):
                m["content"] = m["content"].replace(" ", f" {word} ", 1)
                return
    r = replay_baseline(name, {f"{surface}.json": alter})
    code = "pinned.altered" if ci.pinned else "system_policy.altered"
    expect_baseline(r, code, surface, victim)


def _untrusted_texts(name: str) -> list[tuple[str, str]]:
    canon = canon_of(name)
    out = []
    for ci in canon.session.items:
        if ci.trust in ("external", "untrusted") and ci.tool_role == "result":
            words = ci.content.replace("\\n", " ").split()
            if len(words) >= 12:
                out.append((ci.item_id, " ".join(words[len(words) // 3:len(words) // 3 + 12])))
    return out


@SETTINGS
@given(data=st.data())
def test_legacy_summary_carrying_untrusted_text_is_trust_escalated(
        data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(("prompt-injection-web-fetch", "provider-summary-ok",
                                      "provider-invalid-json", "windows-paths")))
    surface = data.draw(st.sampled_from([c.name for c in scenario(name).captures
                                         if c.name in ("cli.provider-compaction",
                                                       "desktop.compress")]))
    texts = _untrusted_texts(name)
    if not texts:
        return
    source, chunk = data.draw(st.sampled_from(texts))
    field = data.draw(st.sampled_from(("keyDecisions", "nextSteps", "constraints",
                                       "blockers")))

    def inject(d: dict[str, Any]) -> None:
        for m in messages(d):
            c = m.get("content")
            if not isinstance(c, str) or not c.startswith(("[Conversation Summary]",
                                                             "[历史对话总结]")):
                continue
            head, _, body = c.partition("\n")
            try:
                doc = json.loads(body)
            except ValueError:
                doc = {}
            doc[field] = [chunk]
            m["content"] = head + "\n" + json.dumps(doc, ensure_ascii=False, indent=2)
    r = replay_baseline(name, {f"{surface}.json": inject})
    esc = find(r.legacy_defects, "trust.escalated", surface)
    if not any(m.get("content", "").startswith(("[Conversation Summary]", "[历史对话总结]"))
               for m in messages(dict(next(c for c in scenario(name).captures
                                           if c.name == surface).raw))):
        return  # this capture holds no summary to inject into
    assert esc and any(source in d.detail["sources"] and field in d.detail["fields"]
                       for d in esc), [d.detail for d in esc]
    assert all(d.attribution == "baseline" for d in esc)


def test_summary_of_trusted_text_only_is_never_trust_escalated() -> None:
    name, surface = "provider-summary-ok", "cli.provider-compaction"
    canon = canon_of(name)
    said = [ci.content for ci in canon.session.items if ci.role == "user" and ci.content]

    def only_user_words(d: dict[str, Any]) -> None:
        for m in messages(d):
            if str(m.get("content", "")).startswith("[Conversation Summary]"):
                m["content"] = "[Conversation Summary]\n" + json.dumps(
                    {"objective": said[0], "constraints": said[1:3], "keyDecisions": [],
                     "changedFiles": [], "tests": [], "unresolvedSideEffects": [],
                     "checkpoints": [], "blockers": [], "nextSteps": said[3:5]}, indent=2)
    r = replay_baseline(name, {f"{surface}.json": only_user_words})
    assert not find(r.legacy_defects, "trust.escalated", surface)
    # a kept prior summary whose text came from no untrusted input is not escalated either
    rep = live("replay-cc-summary")
    assert not find(rep.legacy_defects, "trust.escalated", "cli.compress")


def test_web_injection_copied_by_the_extractive_fallback_is_named() -> None:
    r = live("prompt-injection-web-fetch")
    esc = find(r.legacy_defects, "trust.escalated", "cli.provider-compaction", "~summary.1")
    assert esc
    d = esc[0].detail
    assert {"keyDecisions", "nextSteps"} <= set(d["fields"])
    assert {"prompt-injection-web-fetch:m0003", "prompt-injection-web-fetch:m0005"} <= set(
        d["sources"])
    assert d["rendered"] == "host" and d["source_trust"] == "untrusted"


@SETTINGS
@given(data=st.data())
def test_legacy_provider_failures_masked_are_named(data: st.DataObject) -> None:
    variant = data.draw(st.sampled_from(("degraded", "usage", "cancel")))
    surface = "cli.provider-compaction"
    if variant == "degraded":
        name = data.draw(st.sampled_from(("provider-invalid-json", "provider-failure")))

        def mask(d: dict[str, Any]) -> None:
            st_ = d["output"]["stats"]
            st_.update(degraded=False, degradedReason=None, summaryMode="llm-structured")
            st_.pop("summaryUsageUnknown", None)
            d["output"]["degradedEvent"] = None
        r = replay_baseline(name, {f"{surface}.json": mask})
        expect_baseline(r, "provider.degraded_masked", surface)
    elif variant == "usage":
        name = data.draw(st.sampled_from([
            n for n in ("provider-summary-ok", "provider-invalid-json", "large-tool-output-1mib",
                        "two-successive-compactions", "replay-cc-summary")
            if any(x["surface"] == "cli" and x.get("response") and parse_summary(
                x["response"]["message"]["content"]) is not None
                for x in scenario(n).input["provider_responses"])]))

        def no_usage(d: dict[str, Any]) -> None:
            for x in d["provider_responses"]:
                if x["surface"] == "cli" and isinstance(x.get("response"), dict):
                    x["response"].pop("usage", None)
        r = replay_baseline(name, {"input.json": no_usage})
        expect_baseline(r, "provider.usage_unknown_masked", surface)
    else:
        name = "provider-cancelled"
        ok = copy.deepcopy(dict(next(c for c in scenario("provider-failure").captures
                                     if c.name == surface).raw["output"]))

        def swallow(d: dict[str, Any]) -> None:
            d["error"], d["output"] = None, ok
        r = replay_baseline(name, {f"{surface}.json": swallow})
        expect_baseline(r, "provider.cancel_swallowed", surface)


@SETTINGS
@given(data=st.data())
def test_legacy_secrets_sent_to_a_summarizer_are_leaks(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(("provider-summary-ok", "provider-invalid-json",
                                      "prompt-injection-web-fetch")))
    surface = data.draw(st.sampled_from(("cli.provider-compaction", "desktop.compress")))
    legacy = {"cli.provider-compaction": "cli", "desktop.compress": "desktop"}[surface]
    if not any(x["surface"] == legacy for x in scenario(name).input["provider_responses"]):
        return
    secret = data.draw(st.sampled_from((
        "OPENAI_API_KEY=sk-proj-Q7wX2mZ9rT4kLp8vN3bH6jY1cF5dS0aE",
        "Authorization: Bearer ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ")))

    def leak(d: dict[str, Any]) -> None:
        for x in d["provider_responses"]:
            if x["surface"] == legacy:
                x["request"] = {**(x.get("request") or {}), "appendix": secret}
    r = replay_baseline(name, {"input.json": leak})
    hits = [d for d in find(r.legacy_defects, "secret.leaked", surface)
            if d.detail.get("sink") == "summarizer request"]
    assert hits and all(d.attribution == "baseline" for d in hits)


@SETTINGS
@given(variant=st.sampled_from(("error", "cancelled", "invalid", "secret", "ok")),
       secret_fact=st.booleans())
def test_legacy_consolidation_summariser_faults_are_named(variant: str,
                                                          secret_fact: bool) -> None:
    name, surface = "memory-consolidate-trace", "session-core.memory"
    r = replay_baseline(name, llm_consolidation(variant, secret_fact))
    if variant in ("error", "invalid"):
        expect_baseline(r, "provider.degraded_masked", surface)
    elif variant == "cancelled":
        expect_baseline(r, "provider.cancel_swallowed", surface)
    elif variant == "secret":
        assert [d for d in find(r.legacy_defects, "secret.leaked", surface)
                if d.detail.get("sink") == "summarizer request"]
    else:
        assert not find(r.legacy_defects, "provider.degraded_masked", surface)
        assert not find(r.legacy_defects, "provider.cancel_swallowed", surface)
    if secret_fact:
        expect_baseline(r, "memory.sensitivity_lowered", surface)
    expect_baseline(r, "memory.scope_expanded", surface)  # agent scope from a session trace


@SETTINGS
@given(data=st.data())
def test_legacy_memory_scope_and_deletion_faults_are_named(data: st.DataObject) -> None:
    variant = data.draw(st.sampled_from(("widen", "backfill", "receipt")))
    surface = "session-core.memory"
    if variant == "widen":
        name = data.draw(st.sampled_from(("memory-clear-scope", "memory-scopes-overlap",
                                          "memory-recall-chinese")))
        adds = [o["index"] for o in next(c for c in scenario(name).captures).raw["output"]
                ["ops"] if o["op"] == "add" and o.get("result")
                and o["result"].get("scope") != "global"]
        op = data.draw(st.sampled_from(adds))

        def widen(d: dict[str, Any]) -> None:
            d["output"]["ops"][op]["result"]["scope"] = "global"
        r = replay_baseline(name, {f"{surface}.json": widen})
        expect_baseline(r, "memory.scope_expanded", surface, f"{name}:op{op:04d}")
    elif variant == "receipt":  # the second removal of one record claims success
        name = "memory-update-remove"
        ops = next(c for c in scenario(name).captures).raw["output"]["ops"]
        second = [n for n, o in enumerate(ops) if o["op"] == "remove" and o.get("result")
                  is False]
        op = data.draw(st.sampled_from(second))

        def claim(d: dict[str, Any]) -> None:
            d["output"]["ops"][op]["result"] = True
        r = replay_baseline(name, {f"{surface}.json": claim})
        expect_baseline(r, "deletion.receipt_mismatch", surface)
    else:
        name = "memory-update-remove"

        def revive(d: dict[str, Any]) -> None:
            ops = d["output"]["ops"]
            ops[9]["result"] = dict(ops[1]["result"])
        r = replay_baseline(name, {f"{surface}.json": revive})
        expect_baseline(r, "deletion.backfill", surface, f"{name}:op0001")


@SETTINGS
@given(data=st.data())
def test_legacy_false_drop_claims_are_named(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(("parallel-tool-calls", "late-tool-result",
                                      "mixed-zh-en", "long-en-coding-session")))
    surface = data.draw(st.sampled_from(("cli.compress", "desktop.compress")))
    raw = next(c for c in scenario(name).captures if c.name == surface).raw
    msgs = messages(dict(raw))
    variant = data.draw(st.sampled_from(("dedup", "similar", "truncate")))
    canon = canon_of(name)
    if variant == "dedup":  # a kept tool-call message dropped as a "duplicate"
        pos = [n for n, m in enumerate(msgs) if m.get("tool_calls")]
        if not pos:
            return
        n = data.draw(st.sampled_from(pos))
        ids = {c["id"] for c in msgs[n]["tool_calls"]}
        victims = [ci.item_id for ci in canon.session.items
                   if ci.legacy_tool_id in ids and ci.tool_role == "call"]

        def dedup(d: dict[str, Any]) -> None:
            out = messages(d)
            m = out[n]
            if m.get("content"):  # a message with text keeps it: the calls alone went
                m.pop("tool_calls")
            else:
                del out[n]
            d["output"]["messages"] = [x for x in out if x.get("tool_call_id") not in ids]
            _strategy(d, surface, "dedup")
        r = replay_baseline(name, {f"{surface}.json": dedup})
        hits = [d for d in find(r.legacy_defects, "drop_reason.unjustified", surface)
                if set(victims) & set(d.item_ids)]
        assert hits, [d.detail for d in r.legacy_defects]
        return
    plain = [n for n, m in enumerate(msgs[1:-1], 1) if m.get("role") == "assistant"
             and m.get("content") and not m.get("tool_calls")]
    if not plain:
        return
    n = data.draw(st.sampled_from(plain))
    text = msgs[n]["content"]
    victim = next(ci.item_id for ci in canon.session.items
                  if ci.role == "assistant" and ci.content == text)

    def drop(d: dict[str, Any]) -> None:
        del messages(d)[n]
        _strategy(d, surface, "dedup" if variant == "similar" else "truncate")
    r = replay_baseline(name, {f"{surface}.json": drop})
    why = {"similar": "no_equal_survivor", "truncate": None}[variant]
    hits = find(r.legacy_defects, "drop_reason.unjustified", surface, victim)
    assert hits, sorted({(d.reason_code, str(d.detail)) for d in r.legacy_defects})
    if why:
        assert hits[0].detail["why"] == why


def _strategy(d: dict[str, Any], surface: str, step: str) -> None:
    out = d["output"]
    if surface == "desktop.compress":
        out["strategy"] = {"dedup": "deduplication", "truncate": "truncation"}[step]
    else:
        out["stats"]["strategy"] = step


def test_context_over_budget_for_a_pinned_item_is_never_the_candidates_fault() -> None:
    name = "ide-selection-file-diagnostics-budget"
    chip = "ctx_c2f5e8f2135b2f77"  # the active file: 1320 tokens, alone over the 512 budget

    def pin(d: dict[str, Any]) -> None:
        d["context_center"]["pinnedIds"] = [chip]

    def trimmed_mid_character(d: dict[str, Any]) -> None:
        for c in d["output"]["chips"]:
            if c["id"] == chip:
                c["pinned"], c["status"] = True, "trimmed"
                c["content"] = c["content"][:-1] + "\ud83d"  # half of a surrogate pair

    for surface in ("vscode.context-center", "jetbrains.context-center"):
        r = replay_baseline(name, {"input.json": pin,
                                   f"{surface}.json": trimmed_mid_character})
        mism = find(judged(r), "outcome.error_mismatch", surface)
        assert mism and mism[0].detail["candidate_error"] == "context_over_budget"
        assert mism[0].detail["candidate_refusal"] == "verified"
        assert mism[0].attribution in ("baseline", "intended") and \
            mism[0].severity != "blocking"
        expect_baseline(r, "pinned.altered", surface)
    # with no legacy defect to explain it, the reviewed rule ID-014 does (design §17)
    r = replay_baseline(name, {"input.json": pin})
    mism = [d for d in judged(r) if d.reason_code == "outcome.error_mismatch"]
    assert mism and all(d.attribution in ("baseline", "intended") for d in mism)


@SETTINGS
@given(data=st.data())
def test_kernel_degrades_a_schema_invalid_provider_summary(data: st.DataObject) -> None:
    good = json.loads(next(x for x in scenario("provider-summary-ok").input
                           ["provider_responses"] if x["surface"] == "cli")
                      ["response"]["message"]["content"])
    drop = data.draw(st.lists(st.sampled_from(sorted(good)), min_size=0, max_size=3,
                              unique=True))
    retype = data.draw(st.sampled_from(sorted(good)))
    prose = data.draw(st.booleans())
    bad = {k: v for k, v in good.items() if k not in drop}
    bad[retype] = 42 if retype != "objective" else ["not", "a", "string"]
    text = json.dumps(bad)
    if prose:
        text = f"Here is the handoff:\n```json\n{text}\n```"

    def answer(d: dict[str, Any]) -> None:
        for x in d["provider_responses"]:
            if x["surface"] == "cli":
                x["response"]["message"]["content"] = text
    r = replay_baseline("provider-summary-ok", {"input.json": answer})
    cand = next(p for p in r.candidate_projections if p.surface == "cli.provider-compaction")
    assert cand.provider is not None and cand.provider.status == "degraded"
    assert cand.provider.degraded_reason and cand.provider.degraded_reason.startswith(
        "invalid_summary:")
    summaries = [it for it in cand.items if it.kind == "summary"]
    assert all(it.detail.get("format") == "fallback" for it in summaries)
    # (the unchanged legacy capture committed the answer: that is the baseline's defect)
    assert not [d for d in find(r.divergences, "provider.degraded_masked")
                if d.attribution in ("candidate", "both")]


# =========================================================================== more surfaces


@SETTINGS
@given(data=st.data())
def test_ide_pinned_chip_excluded_or_altered_is_named_on_both_sides(data: st.DataObject) -> None:
    name = "ide-pin-remove-refresh"
    surface = data.draw(st.sampled_from(("vscode.context-center", "jetbrains.context-center")))
    pinned = {"ctx_9415aad66cfd1122": "ide-pin-remove-refresh:c0006",
              "ctx_f931c9e76fd9cf1a": "ide-pin-remove-refresh:c0005"}
    chip = data.draw(st.sampled_from(sorted(pinned)))
    item = pinned[chip]
    excluded = data.draw(st.booleans())

    def legacy(d: dict[str, Any]) -> None:
        for c in d["output"]["chips"]:
            if c["id"] == chip:
                if excluded:
                    c["status"], c["content"] = "excluded-budget", ""
                else:
                    c["content"] = c["content"] + " (edited)"
    r = replay_baseline(name, {f"{surface}.json": legacy})
    expect_baseline(r, "protected.dropped" if excluded else "pinned.altered", surface, item)

    def candidate(d: dict[str, Any]) -> None:
        if excluded:
            drop(d, item)
        else:
            for it in d["items"]:
                if it["id"] == item:
                    it["digest"] = "sha256:" + "c" * 64
    r = replay_candidate(name, surface, candidate)
    expect_candidate(r, "protected.dropped" if excluded else "pinned.altered", surface, item)


@SETTINGS
@given(data=st.data())
def test_legacy_tool_output_rendered_as_system_is_trust_escalated(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(PAIR_FIXTURES))
    surface = data.draw(st.sampled_from(("cli.compress", "desktop.compress")))
    doc = dict(next(c for c in scenario(name).captures if c.name == surface).raw)
    tools = [n for n, m in enumerate(messages(doc)) if m.get("role") == "tool"]
    if not tools:
        return
    pos = data.draw(st.sampled_from(tools))
    text = messages(doc)[pos]["content"]
    canon = canon_of(name)
    src = next(ci.item_id for ci in canon.session.items
               if ci.role == "tool" and ci.content == text)

    def promote(d: dict[str, Any]) -> None:
        m = messages(d)[pos]
        m["role"] = "system"
        m.pop("tool_call_id", None)
    r = replay_baseline(name, {f"{surface}.json": promote})
    esc = [d for d in r.legacy_defects if d.reason_code == "trust.escalated"
           and d.surface == surface]
    assert esc and any(src in d.item_ids or src in d.detail.get("sources", ())
                       for d in esc), [x.detail for x in esc]


@SETTINGS
@given(data=st.data())
def test_legacy_consolidated_fact_copying_tool_output_is_trust_escalated(
        data: st.DataObject) -> None:
    name, surface = "memory-consolidate-trace", "session-core.memory"
    chunk = data.draw(st.sampled_from((
        "ENOENT: no such file or directory, open 'README.md'",
        "old_string not found in the file you asked me to edit")))
    doc = dict(next(c for c in scenario(name).captures).raw)
    written = [(n, j) for n, o in enumerate(doc["output"]["ops"]) if o["op"] == "consolidate"
               and o.get("result") for j, _ in enumerate(o["result"]["written"])]
    n, j = data.draw(st.sampled_from(written))

    def copy_tool_text(d: dict[str, Any]) -> None:
        rec = d["output"]["ops"][n]["result"]["written"][j]
        rec["content"] = f"Remember: {chunk}"

    def tool_event(d: dict[str, Any]) -> None:  # make sure the chunk is traced tool output
        d["memory_ops"][6]["args"]["payload"]["summary"] = chunk
    mutations = {f"{surface}.json": copy_tool_text}
    if "ENOENT" not in chunk:
        mutations["input.json"] = tool_event

        def cap_event(d: dict[str, Any]) -> None:
            copy_tool_text(d)
            for key in ("args", "result"):
                d["output"]["ops"][6][key]["payload"]["summary"] = chunk
        mutations[f"{surface}.json"] = cap_event
    r = replay_baseline(name, mutations)
    esc = [d for d in find(r.legacy_defects, "trust.escalated", surface)]
    assert esc and all(d.attribution == "baseline" for d in esc)
    assert any(d.detail["source_trust"] == "external" for d in esc)


@SETTINGS
@given(data=st.data())
def test_legacy_cut_under_its_own_limit_is_named(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(("parallel-tool-calls", "mixed-zh-en",
                                      "late-tool-result", "unicode-edge-cases")))
    surface = "cli.compress"
    raw = dict(next(c for c in scenario(name).captures if c.name == surface).raw)
    limit = raw["diagnostics"]["resolved_thresholds"]["maxMessages"]
    if len(scenario(name).input["messages"]) >= limit:
        return
    k = data.draw(st.integers(1, 2))

    def cut(d: dict[str, Any]) -> None:  # drop the k oldest non-system messages
        msgs = messages(d)
        ordinary = [n for n, m in enumerate(msgs) if m.get("role") != "system"]
        for n in sorted(ordinary[:k], reverse=True):
            del msgs[n]
        d["output"]["stats"]["strategy"] = "truncate"
    r = replay_baseline(name, {f"{surface}.json": cut})
    hits = [d for d in find(r.legacy_defects, "drop_reason.unjustified", surface)
            if d.detail.get("why") == "under_stated_limit"]
    assert hits, sorted({(d.reason_code, str(d.detail)) for d in r.legacy_defects})


@SETTINGS
@given(data=st.data())
def test_desktop_summary_over_a_failed_recording_is_degraded_masked(
        data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(("provider-summary-ok", "provider-usage-unknown",
                                      "two-successive-compactions")))
    surface = "desktop.compress"
    variant = data.draw(st.sampled_from(("error", "prose")))

    def fail(d: dict[str, Any]) -> None:
        for x in d["provider_responses"]:
            if x["surface"] == "desktop":
                if variant == "error":
                    x["error"] = {"name": "Error", "message": "upstream 500", "code": None}
                    x["response"] = None
                else:
                    x["response"]["text"] = "I could not produce a summary."
    r = replay_baseline(name, {"input.json": fail})
    expect_baseline(r, "provider.degraded_masked", surface)
