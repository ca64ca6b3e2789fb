"""The mutation suite, candidate side: every NO-GO class, every protection and every
detection injected into the live kernel's recorded candidate (the projection files a
``--candidate DIR`` run reads), on every surface where it applies, hypothesis choosing the
fixture, the item and the variant.  A NO-GO class or a protection broken by the candidate
is ``blocking`` and makes the run NO-GO; every fault is attributed to the candidate.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shadow.divergence.claims import canon_items
from shadow.divergence.provenance import sketch
from tests.shadow._mutate import (
    MESSAGE_SURFACES,
    PAIR_FIXTURES,
    SETTINGS,
    canon_of,
    drop,
    expect_candidate,
    find,
    kept,
    llm_consolidation,
    mutated,
    projection_doc,
    replay_candidate,
    replay_candidate_on,
    scenario,
)

# =========================================================================== candidate side


@SETTINGS
@given(data=st.data())
def test_candidate_tool_pair_split_and_mismatch_block(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(PAIR_FIXTURES))
    surface = data.draw(st.sampled_from([s for s in MESSAGE_SURFACES
                                         if any(c.name == s for c in scenario(name).captures)]))
    doc = projection_doc(name, surface)
    results = kept(doc, lambda it: it.get("tool_role") == "result" and it.get("tool_call_id"))
    if not results:
        return
    victim = data.draw(st.sampled_from(results))
    if data.draw(st.booleans()):
        r = replay_candidate(name, surface, lambda d: drop(d, victim))
        expect_candidate(r, "tool_pair.split", surface, victim)
    else:
        calls = kept(doc, lambda it: it.get("tool_role") == "call")

        def rebind(d: dict[str, Any]) -> None:
            for it in d["items"]:
                if it["id"] == victim:
                    other = next((c for c in calls if c != it.get("tool_call_id")), None)
                    if other is None:
                        it["detail"] = {**it.get("detail", {}), "binding_lost": True}
                    it["tool_call_id"] = other
        r = replay_candidate(name, surface, rebind)
        expect_candidate(r, "tool_pair.mismatch", surface, victim)


@SETTINGS
@given(data=st.data())
def test_candidate_pending_loss_blocks(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(("pending-approval", "pending-question-text")))
    surface = data.draw(st.sampled_from([c.name for c in scenario(name).captures
                                         if c.name in MESSAGE_SURFACES]))
    canon = canon_of(name)
    doc = projection_doc(name, surface)
    pending = [i for i in kept(doc, lambda it: True)
               if (b := canon.session.by_id[i].binding).get("toolOutcome") == "pending"
               or b.get("questionId")]
    if not pending:
        return
    victim = data.draw(st.sampled_from(pending))
    r = replay_candidate(name, surface, lambda d: drop(d, victim))
    expect_candidate(r, "pending.lost", surface, victim)


@SETTINGS
@given(data=st.data())
def test_candidate_dropping_a_protected_item_blocks(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(("pinned-messages", "short-session", "pending-approval",
                                      "long-en-coding-session", "mixed-zh-en")))
    surface = data.draw(st.sampled_from([c.name for c in scenario(name).captures
                                         if c.name in MESSAGE_SURFACES]))
    canon = canon_of(name)
    doc = projection_doc(name, surface)
    protected = [i for i in kept(doc, lambda it: True)
                 if (ci := canon.session.by_id[i]).pinned
                 or ci.binding.get("requiredForRecovery")
                 or (ci.kind == "system-policy" and ci.trust == "host")]
    victim = data.draw(st.sampled_from(protected))
    reason = data.draw(st.sampled_from(("input_budget", "partition_ceiling", "duplicate")))
    r = replay_candidate(name, surface, lambda d: drop(d, victim, reason))
    expect_candidate(r, "protected.dropped", surface, victim)


@SETTINGS
@given(data=st.data())
def test_candidate_altering_pinned_or_policy_content_blocks(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(("pinned-messages", "short-session", "windows-paths")))
    surface = data.draw(st.sampled_from([c.name for c in scenario(name).captures
                                         if c.name in MESSAGE_SURFACES]))
    canon = canon_of(name)
    doc = projection_doc(name, surface)
    targets = [i for i in kept(doc, lambda it: True)
               if canon.session.by_id[i].pinned or canon.session.by_id[i].kind == "system-policy"]
    if not targets:
        return
    victim = data.draw(st.sampled_from(targets))
    digest = "sha256:" + data.draw(st.sampled_from("0123456789abcdef")) * 64

    def alter(d: dict[str, Any]) -> None:
        for it in d["items"]:
            if it["id"] == victim:
                it["digest"] = digest
    r = replay_candidate(name, surface, alter)
    code = "pinned.altered" if canon.session.by_id[victim].pinned else "system_policy.altered"
    expect_candidate(r, code, surface, victim)


@SETTINGS
@given(data=st.data())
def test_candidate_trust_escalation_blocks(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(("prompt-injection-web-fetch", "parallel-tool-calls",
                                      "windows-paths")))
    surface = data.draw(st.sampled_from(("cli.compress", "desktop.compress",
                                         "desktop.context-engineering")))
    doc = projection_doc(name, surface)
    results = kept(doc, lambda it: it.get("tool_role") == "result")
    victim = data.draw(st.sampled_from(results))
    how = data.draw(st.sampled_from(("host", "verified", "system")))

    def promote(d: dict[str, Any]) -> None:
        for it in d["items"]:
            if it["id"] == victim:
                if how == "system":
                    it["role"] = "system"
                else:
                    it["trust"] = how
    r = replay_candidate(name, surface, promote)
    expect_candidate(r, "trust.escalated", surface, victim)


@SETTINGS
@given(data=st.data())
def test_candidate_summary_of_untrusted_text_rendered_as_system_blocks(
        data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(("prompt-injection-web-fetch", "provider-summary-ok",
                                      "provider-failure")))
    surface = "cli.provider-compaction"

    def as_system(d: dict[str, Any]) -> None:
        for it in d["items"]:
            if it["kind"] == "summary":
                it["role"] = "system" if data.draw(st.booleans()) else it.get("role")
                it["trust"] = "host"
    r = replay_candidate(name, surface, as_system)
    expect_candidate(r, "trust.escalated", surface, "~summary.1")


@SETTINGS
@given(data=st.data())
def test_candidate_secret_leak_blocks(data: st.DataObject) -> None:
    name = "secrets-in-tool-output"
    canon = canon_of(name)
    secrets = sorted(i for i, ci in canon.session.by_id.items() if ci.sensitivity == "secret")
    victim = data.draw(st.sampled_from(secrets))
    surface = data.draw(st.sampled_from(("cli.compress", "desktop.compress",
                                         "cli.provider-compaction")))
    sink = data.draw(st.sampled_from(("output", "summarizer")))

    def leak(d: dict[str, Any]) -> None:
        if sink == "summarizer":
            d["facts"] = {**d.get("facts", {}), "provider_inputs": [victim]}
            return
        ci = canon.session.by_id[victim]
        d["dropped"] = [x for x in d["dropped"] if x["id"] != victim]
        d["items"].append({"id": victim, "kind": ci.kind, "origin": "input",
                           "digest": ci.digest, "length": len(ci.content), "role": ci.role,
                           "trust": ci.trust, "sensitivity": ci.sensitivity})
    r = replay_candidate(name, surface, leak)
    expect_candidate(r, "secret.leaked", surface, victim)


@SETTINGS
@given(data=st.data())
def test_candidate_provider_masking_blocks(data: st.DataObject) -> None:
    variant = data.draw(st.sampled_from(("invalid", "error", "no-usage", "cancelled")))
    name = {"invalid": "provider-invalid-json", "error": "provider-failure",
            "no-usage": "provider-usage-unknown", "cancelled": "provider-cancelled"}[variant]
    surface = data.draw(st.sampled_from(("cli.provider-compaction", "desktop.compress")))

    def mask(d: dict[str, Any]) -> None:
        d["status"], d["error"] = "ok", None
        d["provider"] = {**d["provider"], "status": "committed", "degraded": False,
                         "degraded_reason": None, "usage": "known", "cancelled": False}
    r = replay_candidate(name, surface, mask)
    code = {"invalid": "provider.degraded_masked", "error": "provider.degraded_masked",
            "no-usage": "provider.usage_unknown_masked",
            "cancelled": "provider.cancel_swallowed"}[variant]
    expect_candidate(r, code, surface)


@SETTINGS
@given(data=st.data())
def test_candidate_memory_faults_block(data: st.DataObject) -> None:
    variant = data.draw(st.sampled_from(("scope", "backfill", "overbroad", "sensitivity",
                                         "trust", "receipt")))
    name = {"scope": data.draw(st.sampled_from(("memory-clear-scope", "memory-scopes-overlap",
                                                "memory-recall-chinese"))),
            "backfill": "memory-update-remove", "overbroad": "memory-clear-scope",
            "sensitivity": "memory-recall-chinese", "trust": "memory-consolidate-trace",
            "receipt": "memory-update-remove"}[variant]
    surface = "session-core.memory"
    doc = projection_doc(name, surface)
    recs = [r for r in doc["memory"]["records"] if r["state"] not in ("deleted", "purged")]
    deleted = [r["id"] for r in doc["memory"]["records"] if r["state"] == "deleted"]

    if variant == "scope":
        victim = data.draw(st.sampled_from([r["id"] for r in recs if r["scope"] != "global"]))

        def widen(d: dict[str, Any]) -> None:
            for r in d["memory"]["records"]:
                if r["id"] == victim:
                    r["scope"], r["scope_id"] = "global", None
        expect_candidate(replay_candidate(name, surface, widen), "memory.scope_expanded", surface)
    elif variant == "backfill":
        victim = data.draw(st.sampled_from(deleted))

        def revive(d: dict[str, Any]) -> None:
            for r in d["memory"]["records"]:
                if r["id"] == victim:
                    r["state"] = "active"
        expect_candidate(replay_candidate(name, surface, revive), "deletion.backfill", surface,
                   victim)
    elif variant == "overbroad":
        clears = [o for o in doc["memory"]["ops"] if o["op"] == "clear_scope"
                  or o["op"] == "clearScope"]
        op = data.draw(st.sampled_from([o["index"] for o in clears if o["status"] == "ok"]))
        sel = next(o for o in clears if o["index"] == op)["detail"]["selector"]
        others = [r["id"] for r in doc["memory"]["records"] if r["scope"] != sel["scope"]]

        def overbroad(d: dict[str, Any]) -> None:
            for o in d["memory"]["ops"]:
                if o["index"] == op:
                    o["deleted"] = [*o["deleted"], others[0]]
            for r in d["memory"]["records"]:
                if r["id"] == others[0]:
                    r["state"] = "deleted"
        expect_candidate(replay_candidate(name, surface, overbroad), "deletion.overbroad", surface)
    elif variant == "receipt":  # the removal says ok, removes nothing, the record stays
        removal = data.draw(st.sampled_from([o for o in doc["memory"]["ops"]
                                             if o["op"] == "remove" and o["deleted"]]))

        def keep(d: dict[str, Any]) -> None:
            for o in d["memory"]["ops"]:
                if o["index"] == removal["index"]:
                    o["deleted"], o["detail"] = [], {}
            for r in d["memory"]["records"]:
                if r["id"] in removal["deleted"]:
                    r["state"] = "active"
        expect_candidate(replay_candidate(name, surface, keep), "deletion.receipt_mismatch",
                         surface)
    elif variant == "sensitivity":
        victim = data.draw(st.sampled_from([r["id"] for r in recs]))

        def lower(d: dict[str, Any]) -> None:
            for r in d["memory"]["records"]:
                if r["id"] == victim:
                    r["content_sensitivity"] = "secret"
        expect_candidate(replay_candidate(name, surface, lower), "memory.sensitivity_lowered",
                   surface, victim)
    else:
        events = [c for c in canon_of(name).memory or () if c.op == "trace_record"
                  and c.args.get("type") == "error" and (c.args.get("payload") or {})]
        ev = data.draw(st.sampled_from(events))
        text = "Error encountered: " + str(ev.args["payload"].get("message")
                                           or ev.args["payload"].get("error"))
        victim = data.draw(st.sampled_from([r["id"] for r in recs]))

        def escalate(d: dict[str, Any]) -> None:
            for r in d["memory"]["records"]:
                if r["id"] == victim:
                    r["shingles"] = sketch(text)
        if not sketch(text):
            return
        expect_candidate(replay_candidate(name, surface, escalate), "trust.escalated", surface,
                   victim)


@SETTINGS
@given(data=st.data())
def test_candidate_consolidation_summariser_faults_block(data: st.DataObject) -> None:
    # the recording holds a failed / invalid / cancelled summariser answer (or a secret in
    # the request); the recorded candidate stores its consolidation as a normal result
    name, surface = "memory-consolidate-trace", "session-core.memory"
    variant = data.draw(st.sampled_from(("error", "invalid", "cancelled", "secret")))
    sc = mutated(name, llm_consolidation(variant, False))
    op = len(sc.input["memory_ops"]) - 1

    def fault(d: dict[str, Any]) -> None:
        for o in d["memory"]["ops"]:
            if o["index"] == op:
                o["status"], o["error"] = "ok", None
                o["detail"] = {**o["detail"], "summarizer": {
                    "truth": "ok", "degraded": False, "sent_secret": variant == "secret"}}
    r = replay_candidate_on(sc, surface, fault)
    code = {"error": "provider.degraded_masked", "invalid": "provider.degraded_masked",
            "cancelled": "provider.cancel_swallowed", "secret": "secret.leaked"}[variant]
    expect_candidate(r, code, surface)
    # what the recording says is the harness's, not the candidate's: its "ok" is ignored
    if variant != "secret":
        assert any(d.detail.get("truth") == variant for d in find(r.divergences, code))


@SETTINGS
@given(data=st.data())
def test_candidate_writes_and_unrecorded_requests_block(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(("provider-summary-ok", "short-session",
                                      "parallel-tool-calls")))
    surface = data.draw(st.sampled_from([c.name for c in scenario(name).captures]))
    variant = data.draw(st.sampled_from(("dual", "write", "request")))

    def effect(d: dict[str, Any]) -> None:
        if variant == "dual":
            d["writers"] = ["kernel:session-port", "legacy:jsonl-session-store"]
        elif variant == "write":
            d["writers"] = ["kernel:session-port"]
        else:
            d["side_effects"] = [{"kind": "provider_request", "target": "x#9",
                                  "recorded": False}]
    r = replay_candidate(name, surface, effect)
    expect_candidate(r, "writer.dual" if variant == "dual" else "shadow.side_effect", surface)


@SETTINGS
@given(data=st.data())
def test_candidate_false_claims_and_alterations_are_its_own(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(("long-en-coding-session", "mixed-zh-en",
                                      "parallel-tool-calls")))
    surface = data.draw(st.sampled_from(("cli.compress", "desktop.compress")))
    canon = canon_of(name)
    doc = projection_doc(name, surface)
    plain = [i for i in kept(doc, lambda it: it.get("role") == "assistant"
                              and not it.get("tool_role"))
             if not canon.session.by_id[i].binding and canon.session.by_id[i].content]
    victim = data.draw(st.sampled_from(plain))
    variant = data.draw(st.sampled_from(("duplicate", "altered", "reordered")))
    if variant == "duplicate":
        r = replay_candidate(name, surface, lambda d: drop(d, victim, "duplicate"))
        expect_candidate(r, "drop_reason.unjustified", surface, victim)
    elif variant == "altered":
        def alter(d: dict[str, Any]) -> None:
            for it in d["items"]:
                if it["id"] == victim:
                    it["digest"] = "sha256:" + "e" * 64
        r = replay_candidate(name, surface, alter)
        expect_candidate(r, "alteration.unjustified", surface, victim)
    else:
        def move(d: dict[str, Any]) -> None:
            it = next(x for x in d["items"] if x["id"] == victim)
            d["items"].remove(it)
            d["items"].insert(0, it)
        r = replay_candidate(name, surface, move)
        expect_candidate(r, "item.reordered", surface)


@SETTINGS
@given(data=st.data())
def test_candidate_output_over_its_budget_blocks(data: st.DataObject) -> None:
    """Items the kernel cut put back: ``budget.exceeded`` exactly when the output no longer
    fits its selectable budget (§8.3) — and never while it still fits."""
    name, surface = data.draw(st.sampled_from((
        ("long-en-coding-session", "desktop.compress"), ("long-zh-session", "desktop.compress"),
        ("small-window-llama3-8b", "cli.compress"), ("claude-3-5-sonnet", "desktop.compress"),
        ("small-window-llama3-8b", "desktop.context-engineering"),
        ("large-tool-output-1mib", "cli.compress"))))
    cis = canon_items(canon_of(name))
    doc = projection_doc(name, surface)
    cut = [x["id"] for x in doc["dropped"] if x["reason"] in ("input_budget",
                                                                "partition_ceiling")]
    back = data.draw(st.lists(st.sampled_from(cut), min_size=1, unique=True))

    def restore(d: dict[str, Any]) -> None:
        d["dropped"] = [x for x in d["dropped"] if x["id"] not in back]
        d["items"] += [{"id": i, "kind": cis[i].kind, "origin": "input",
                        "digest": cis[i].digest, "length": len(cis[i].content),
                        "role": cis[i].role} for i in back]
    r = replay_candidate(name, surface, restore)
    used = sum(cis[it["id"]].token_estimate for it in doc["items"] if it["origin"] == "input")
    used += sum(max(1, it["length"] // 4) for it in doc["items"] if it["origin"] != "input")
    used += sum(cis[i].token_estimate for i in back)
    if used > doc["facts"]["limits"]["tokens"]:
        expect_candidate(r, "budget.exceeded", surface)
    else:
        assert not find(r.divergences, "budget.exceeded")
