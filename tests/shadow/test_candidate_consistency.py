"""A recorded candidate edited to hide a fault is never a GO.

Each case edits one projection of the live kernel's recording the way an adversarial
review did (a refusal everywhere, invented item ids, a missing memory, a governance reason
on a protected item, a whitespace label on the host policy, a summary without a provider
answer or without its sources, memory facts the fixture decides, a stated legacy reason,
free text and lone surrogates) and asserts the run is NO-GO with the right code against the
candidate, or the file is refused with a pointer (exit 2) — never a quiet GO.
"""

from __future__ import annotations

from typing import Any

import pytest

from shadow.divergence import consistency
from shadow.divergence.claims import canon_items
from shadow.errors import InputError
from tests.shadow._mutate import (
    canon_of,
    expect_candidate,
    find,
    live,
    projection_doc,
    replay_candidate,
    scenario,
)


def blocking(r: Any, code: str, surface: str) -> list[Any]:
    hits = [d for d in find(r.divergences, code, surface) if d.attribution == "candidate"
            and d.severity == "blocking"]
    assert hits, (code, surface, sorted({(d.reason_code, d.attribution, d.severity)
                                         for d in r.divergences if d.surface == surface}))
    return hits


def problem(r: Any, surface: str) -> set[str]:
    return {str(d.detail.get("problem")) for d in blocking(r, "candidate.unavailable", surface)}


# --------------------------------------------------------------------------- refusals and failures

@pytest.mark.parametrize("name,surface", [
    ("pending-approval", "cli.compress"), ("provider-summary-ok", "desktop.compress"),
    ("ide-pin-remove-refresh", "vscode.context-center"),
    ("memory-update-remove", "session-core.memory")])
def test_refusing_everything_without_naming_protected_items_is_no_go(name: str,
                                                                     surface: str) -> None:
    def refuse(d: dict[str, Any]) -> None:
        d.update(status="error", error="context_over_budget", items=[], dropped=[],
                 provider=None, memory=None, facts={})
    r = replay_candidate(name, surface, refuse)
    assert problem(r, surface) & {"refusal_not_justified", "memory_missing"}


def test_a_refusal_is_judged_against_the_anchored_budget_not_the_one_it_states() -> None:
    def refuse(d: dict[str, Any]) -> None:
        d.update(status="error", error="context_over_budget", items=[], dropped=[])
        d["facts"]["error_detail"] = {"protectedItemIds": ["pending-approval:m0000"] * 40,
                                      "selectableBudget": 0}
    r = replay_candidate("pending-approval", "cli.compress", refuse)
    un = blocking(r, "candidate.unavailable", "cli.compress")
    assert un[0].detail["why"] == "protected_items_fit_the_budget"
    assert not [d for d in r.divergences if d.attribution == "intended"
                and d.reason_code == "outcome.error_mismatch"]


@pytest.mark.parametrize("name,surface,error", [
    ("ide-budget-zero", "jetbrains.context-center", "aborted"),
    ("pending-approval", "cli.compress", "aborted"),
    ("pending-approval", "cli.compress", "invalid_argument"),
    ("provider-summary-ok", "desktop.compress", "provider_usage_unsettled")])
def test_a_failure_nothing_justifies_is_unavailable(name: str, surface: str,
                                                   error: str) -> None:
    def fail(d: dict[str, Any]) -> None:
        d.update(status="error", error=error, items=[], dropped=[])
    r = replay_candidate(name, surface, fail)
    assert "failure_not_justified" in problem(r, surface)


def test_a_recorded_cancellation_justifies_the_abort() -> None:
    r = replay_candidate("provider-cancelled", "desktop.compress", lambda d: None)
    assert not find(r.divergences, "candidate.unavailable")


# --------------------------------------------------------------------------- items and sources

def test_kept_items_under_invented_ids_are_unavailable_and_a_secret_by_digest_leaks() -> None:
    name, surface = "secrets-in-tool-output", "cli.compress"
    cis = canon_items(canon_of(name))
    sid = next(i for i, ci in cis.items() if ci.sensitivity == "secret")

    def smuggle(d: dict[str, Any]) -> None:
        d["items"].append({"id": sid + "x", "kind": "tool-evidence", "origin": "input",
                           "digest": cis[sid].digest, "length": 10, "role": "tool",
                           "sensitivity": "internal", "trust": "external"})
    r = replay_candidate(name, surface, smuggle)
    assert "unknown_input_item" in problem(r, surface)
    expect_candidate(r, "secret.leaked", surface)


@pytest.mark.parametrize("edit,expected", [
    ({"covers": []}, "derived_without_sources"),
    ({"covers": ["~elsewhere"]}, "unknown_cover"),
    ({"detail": {"format": "structured"}}, "derived_without_sketch"),
    ({"detail": {}}, "derived_without_format")])
def test_a_summary_cannot_hide_where_its_text_came_from(edit: dict[str, Any],
                                                        expected: str) -> None:
    def hide(d: dict[str, Any]) -> None:
        for it in d["items"]:
            if it["origin"] == "derived":
                it.update(role="system", trust="host", **edit)
    r = replay_candidate("provider-summary-ok", "desktop.compress", hide)
    assert expected in problem(r, "desktop.compress")


def test_duplicate_identities_are_unavailable() -> None:
    def dup(d: dict[str, Any]) -> None:
        d["items"].append(dict(d["items"][1]))
    r = replay_candidate("pending-approval", "cli.compress", dup)
    assert "duplicate_item" in problem(r, "cli.compress")


@pytest.mark.parametrize("reason", ["expired", "scope_denied", "user_removed", "invalid",
                                    "sink_denied", "not_persisted"])
def test_a_governance_reason_exempts_a_protected_item_only_when_it_holds(reason: str) -> None:
    gone = ("pending-approval:m0000", "pending-approval:m0007", "pending-approval:m0008.c1")

    def govern(d: dict[str, Any]) -> None:
        d["items"] = [it for it in d["items"] if it["id"] not in gone]
        d["dropped"] += [{"id": i, "reason": reason} for i in gone]
    r = replay_candidate("pending-approval", "cli.compress", govern)
    expect_candidate(r, "pending.lost", "cli.compress", "pending-approval:m0008.c1")
    expect_candidate(r, "protected.dropped", "cli.compress", "pending-approval:m0007")


def test_a_whitespace_label_does_not_excuse_a_rewritten_host_policy() -> None:
    def relabel(d: dict[str, Any]) -> None:
        d["items"][0].update(digest="sha256:" + "ab" * 32, altered="whitespace")
    r = replay_candidate("pending-approval", "cli.compress", relabel)
    expect_candidate(r, "system_policy.altered", "cli.compress", "pending-approval:m0000")


def test_a_summarized_drop_must_be_covered_by_a_summary() -> None:
    def orphan(d: dict[str, Any]) -> None:
        for it in d["items"]:
            if it["origin"] == "derived":
                it["covers"] = it["covers"][:1]
    r = replay_candidate("provider-summary-ok", "desktop.compress", orphan)
    unjust = [d for d in find(r.divergences, "drop_reason.unjustified", "desktop.compress")
              if d.attribution == "candidate"]
    assert unjust and unjust[0].detail["why"] == "no_summary_covers_it"


# --------------------------------------------------------------------------- provider truth, budget

@pytest.mark.parametrize("provider", [None, "zero"])
def test_a_committed_summary_without_a_provider_answer_is_masked(provider: Any) -> None:
    ok = projection_doc("provider-summary-ok", "desktop.compress")

    def commit(d: dict[str, Any]) -> None:
        summary = next(it for it in ok["items"] if it["origin"] == "derived")
        kept = [it for it in d["items"] if it["origin"] == "input"][:3]
        covered = list(d["input_ids"][3:6])
        d.update(status="ok", error=None, items=[*kept, {**summary, "covers": covered}],
                 dropped=[{"id": i, "reason": "summarized"} for i in covered])
        d["provider"] = None if provider is None else {
            **d["provider"], "status": "committed", "requests": 0, "recorded": 0,
            "cancelled": False, "truth": None}
    r = replay_candidate("provider-cancelled", "desktop.compress", commit)
    hits = blocking(r, "provider.degraded_masked", "desktop.compress")
    assert hits[0].detail["why"] == "no_provider_answer"


def test_keeping_the_whole_history_over_budget_is_blocking() -> None:
    cli = projection_doc("provider-cancelled", "cli.compress")

    def keep_all(d: dict[str, Any]) -> None:
        d.update(status="ok", error=None, items=cli["items"], dropped=[], provider=None)
    r = replay_candidate("provider-cancelled", "desktop.compress", keep_all)
    hit = blocking(r, "budget.exceeded", "desktop.compress")[0]
    assert hit.detail["tokens"] > hit.detail["budget"]


def test_requests_on_a_surface_without_a_recording_are_unrecorded_side_effects() -> None:
    def call(d: dict[str, Any]) -> None:
        d["provider"] = {"status": "committed", "requests": 2, "recorded": 2,
                         "truth": "ok"}
    r = replay_candidate("pending-approval", "cli.compress", call)
    expect_candidate(r, "shadow.side_effect", "cli.compress")


# --------------------------------------------------------------------------- memory

def _ops(d: dict[str, Any]) -> list[dict[str, Any]]:
    return d["memory"]["ops"]  # type: ignore[no-any-return]


def test_memory_missing_or_unexpected_is_unavailable() -> None:
    r = replay_candidate("memory-clear-scope", "session-core.memory",
                         lambda d: d.update(memory=None))
    assert "memory_missing" in problem(r, "session-core.memory")
    r = replay_candidate("pending-approval", "cli.compress",
                         lambda d: d.update(memory={"records": [], "ops": []}))
    assert "memory_unexpected" in problem(r, "cli.compress")


def test_a_selector_left_out_is_the_fixtures_not_the_candidates() -> None:
    doc = projection_doc("memory-clear-scope", "session-core.memory")
    clear = next(o for o in _ops(doc) if o["op"] == "clearScope" and o["deleted"])
    others = [r["id"] for r in doc["memory"]["records"]
              if r["id"] not in clear["deleted"] and r["state"] == "active"]

    def overbroad(d: dict[str, Any]) -> None:
        for o in _ops(d):
            if o["index"] == clear["index"]:
                o["deleted"] = list(o["deleted"]) + others
                o["detail"] = {}
        for rec in d["memory"]["records"]:
            if rec["id"] in others:
                rec["state"] = "deleted"
    r = replay_candidate("memory-clear-scope", "session-core.memory", overbroad)
    expect_candidate(r, "deletion.overbroad", "session-core.memory")


def test_operations_are_judged_in_index_order_whatever_the_file_lists() -> None:
    doc = projection_doc("memory-update-remove", "session-core.memory")
    removal = next(o for o in _ops(doc) if o["op"] == "remove" and o["deleted"])
    later_get = next(o for o in _ops(doc) if o["op"] == "get"
                     and o["index"] > removal["index"])

    def revive_out_of_order(d: dict[str, Any]) -> None:
        ops = _ops(d)
        get = next(o for o in ops if o["index"] == later_get["index"])
        get["returned"] = list(removal["deleted"])
        ops.remove(get)
        ops.insert(0, get)
    r = replay_candidate("memory-update-remove", "session-core.memory", revive_out_of_order)
    expect_candidate(r, "deletion.backfill", "session-core.memory")

    def reverse(d: dict[str, Any]) -> None:
        d["memory"]["ops"].reverse()
        d["memory"]["records"].reverse()
    r = replay_candidate("memory-update-remove", "session-core.memory", reverse)
    assert not [d for d in r.divergences if d.attribution == "candidate"]


def test_a_removal_that_removes_nothing_but_succeeds_is_a_false_receipt() -> None:
    doc = projection_doc("memory-update-remove", "session-core.memory")
    removal = next(o for o in _ops(doc) if o["op"] == "remove" and o["deleted"])

    def keep(d: dict[str, Any]) -> None:
        for o in _ops(d):
            if o["index"] == removal["index"]:
                o["deleted"], o["detail"] = [], {}
        for rec in d["memory"]["records"]:
            if rec["id"] in removal["deleted"]:
                rec["state"] = "active"
    r = replay_candidate("memory-update-remove", "session-core.memory", keep)
    expect_candidate(r, "deletion.receipt_mismatch", "session-core.memory")


def test_a_scope_widened_under_a_renamed_record_is_found() -> None:
    def widen(d: dict[str, Any]) -> None:
        first = _ops(d)[0]
        old = first["created"][0]
        first["created"] = [old + "x"]
        first["detail"] = {}
        for rec in d["memory"]["records"]:
            if rec["id"] == old:
                rec.update(id=old + "x", scope="global", scope_id=None)
    r = replay_candidate("memory-scopes-overlap", "session-core.memory", widen)
    expect_candidate(r, "memory.scope_expanded", "session-core.memory")


# --------------------------------------------------------------------------- strict file rules

@pytest.mark.parametrize("edit,pointer", [
    (lambda d: d["dropped"][0].update(legacy_reason="truncate"), "/dropped/0/legacy_reason"),
    (lambda d: d["items"][0].update(altered="cleaned the prompt"), "/items/0/altered"),
    (lambda d: d.update(error="context_over_budget"), "/error"),
    (lambda d: d["facts"].update(chain="broken because of x"), "/facts/chain"),
    (lambda d: d["facts"].update(note="free text"), "/facts/note"),
    (lambda d: d.update(side_effects=[{"kind": "write", "target": "a file with spaces"}]),
     "/side_effects/0/target"),
    (lambda d: d["facts"].update(error_detail={"protectedItemIds": ["k" * 5000]}),
     "/facts/error_detail/protectedItemIds"),
    (lambda d: d["items"][0].update(kind="system\ud800policy"), "/items/0/kind"),
])
def test_free_text_and_candidate_only_rules_are_refused_with_a_pointer(edit: Any,
                                                                       pointer: str) -> None:
    def mutate(d: dict[str, Any]) -> None:
        if not d["dropped"]:
            d["dropped"] = [{"id": d["input_ids"][-1], "reason": "input_budget"}]
        edit(d)
    with pytest.raises(InputError) as err:
        replay_candidate("long-en-coding-session", "desktop.compress", mutate)
    assert err.value.pointer == pointer
    assert "5000" not in str(err.value) and "spaces" not in str(err.value)


def test_memory_free_text_is_refused() -> None:
    def error_text(d: dict[str, Any]) -> None:
        _ops(d)[3]["error"] = "scope denied for user alice@example.com"
    with pytest.raises(InputError) as err:
        replay_candidate("memory-update-remove", "session-core.memory", error_text)
    assert err.value.pointer == "/memory/ops/3/error"
    assert "alice" not in str(err.value)


def test_the_live_kernel_agrees_with_its_own_circumstances() -> None:
    """Every rule holds for the live kernel on fixtures of every surface kind."""
    from shadow.anchor import anchor
    from shadow.canonical import canonicalize
    from shadow.surfaces import adapter_for

    for name in ("two-successive-compactions", "provider-cancelled", "ide-budget-zero",
                 "memory-consolidate-trace", "provider-usage-unknown", "pending-approval"):
        sc = scenario(name)
        canon = canonicalize(name, sc.input)
        siblings = {c.name: c for c in sc.captures}
        projections = {p.surface: p for p in live(name).candidate_projections}
        for cap in sc.captures:
            adapter = adapter_for(cap.name)
            if adapter is None or cap.name not in projections:
                continue
            b = adapter(canon, cap, siblings)
            a = anchor(projections[cap.name], b, canon, cap, siblings)
            assert consistency.check(a, b) == [], (name, cap.name)


# --------------------------------------------------------------------------- third review

def test_host_policy_is_not_persisted_only_by_a_session_store() -> None:
    def forget_policy(d: dict[str, Any]) -> None:
        d["items"] = [it for it in d["items"] if it["id"] != "pending-approval:m0000"]
        d["dropped"].append({"id": "pending-approval:m0000", "reason": "not_persisted"})
    r = replay_candidate("pending-approval", "cli.compress", forget_policy)
    expect_candidate(r, "protected.dropped", "cli.compress", "pending-approval:m0000")


def test_user_text_rendered_as_policy_is_escalated_and_a_reshaped_item_unavailable() -> None:
    def promote(d: dict[str, Any]) -> None:
        d["items"][1].update(role="system", kind="system-policy")
    r = replay_candidate("pending-approval", "cli.compress", promote)
    expect_candidate(r, "trust.escalated", "cli.compress", "pending-approval:m0001")

    def demote(d: dict[str, Any]) -> None:
        d["items"][0].update(role="user", kind="message")
    r = replay_candidate("pending-approval", "cli.compress", demote)
    assert "input_item_reshaped" in problem(r, "cli.compress")


@pytest.mark.parametrize("item,edit,code", [
    ("pending-approval:m0003", {"tool_call_id": None}, "tool_pair.mismatch"),
    ("pending-approval:m0008.c1", {"tool_call_id": None, "tool_role": None}, "pending.lost"),
    ("pending-approval:m0008.c1", {"tool_call_id": "pending-approval:m0002.c1"},
     "pending.lost")])
def test_a_binding_stripped_or_changed_by_the_candidate_is_its_fault(item: str,
                                                                     edit: dict[str, Any],
                                                                     code: str) -> None:
    def strip(d: dict[str, Any]) -> None:
        for it in d["items"]:
            if it["id"] == item:
                for k, v in edit.items():
                    if v is None:
                        it.pop(k, None)
                    else:
                        it[k] = v
    r = replay_candidate("pending-approval", "cli.compress", strip)
    expect_candidate(r, code, "cli.compress", item)


def test_a_cancelled_call_with_an_ok_compaction_is_swallowed() -> None:
    def keep_going(d: dict[str, Any]) -> None:
        ids = list(d["input_ids"])
        middle = ids[1:-1]
        d.update(status="ok", error=None, dropped=[{"id": i, "reason": "summarized"}
                                                   for i in middle])
        d["items"] = [
            {"id": ids[0], "kind": "system-policy", "origin": "input", "role": "system",
             "digest": canon_items(canon_of("provider-cancelled"))[ids[0]].digest,
             "length": 1,
             "trust": "host", "sensitivity": "internal"},
            {"id": "~summary.1", "kind": "summary", "origin": "derived",
             "digest": "sha256:" + "cd" * 32, "length": 40, "covers": middle,
             "detail": {"format": "fallback"}}]
    r = replay_candidate("provider-cancelled", "desktop.compress", keep_going)
    expect_candidate(r, "provider.cancel_swallowed", "desktop.compress")


def test_a_semantic_summary_from_a_failed_answer_is_masked() -> None:
    ok = projection_doc("provider-summary-ok", "cli.provider-compaction")
    structured = next(it for it in ok["items"] if it["origin"] == "derived")

    def semantic(d: dict[str, Any]) -> None:
        for it in d["items"]:
            if it["origin"] == "derived":
                it["detail"] = structured["detail"]
    r = replay_candidate("provider-failure", "cli.provider-compaction", semantic)
    hit = blocking(r, "provider.degraded_masked", "cli.provider-compaction")
    assert any(h.detail.get("why") == "semantic_summary_from_failed_answer" for h in hit)


def test_secret_text_in_a_summary_sketch_leaks() -> None:
    from shadow.divergence.provenance import text_sketches

    cis = canon_items(canon_of("secrets-in-tool-output"))
    secret = next(ci for ci in cis.values() if ci.sensitivity == "secret")

    def copy_secret(d: dict[str, Any]) -> None:
        for it in d["items"]:
            if it["origin"] == "derived":
                it["detail"]["shingles"]["keyDecisions/1"] = text_sketches(secret.content)[""]
    r = replay_candidate("secrets-in-tool-output", "cli.provider-compaction", copy_secret)
    expect_candidate(r, "secret.leaked", "cli.provider-compaction")


def test_summarized_drops_pass_their_trust_to_the_summary_even_without_covers() -> None:
    cis = canon_items(canon_of("secrets-in-tool-output"))

    def launder(d: dict[str, Any]) -> None:
        for it in d["items"]:
            if it["origin"] == "derived":
                it["trust"] = "user"
                it["covers"] = [c for c in it["covers"] if cis[c].trust not in
                                ("external", "untrusted")]
                it["detail"].pop("shingles", None)
                it["length"] = 199
    r = replay_candidate("secrets-in-tool-output", "cli.provider-compaction", launder)
    expect_candidate(r, "trust.escalated", "cli.provider-compaction")


def test_memory_faults_the_status_or_op_list_cannot_hide() -> None:
    name, surface = "memory-update-remove", "session-core.memory"
    doc = projection_doc(name, surface)
    removal = next(o for o in _ops(doc) if o["op"] == "remove" and o["deleted"])
    later = next(o for o in _ops(doc) if o["op"] == "get" and o["index"] > removal["index"])

    def noop_removal(d: dict[str, Any]) -> None:  # "nothing to remove" while it is there
        for o in _ops(d):
            if o["index"] == removal["index"]:
                o.update(status="noop", deleted=[], detail={"receipt": False})
        for rec in d["memory"]["records"]:
            if rec["id"] in removal["deleted"]:
                rec["state"] = "active"
    expect_candidate(replay_candidate(name, surface, noop_removal),
                     "deletion.receipt_mismatch", surface)

    def noop_return(d: dict[str, Any]) -> None:  # a deleted record returned by a "noop"
        for o in _ops(d):
            if o["index"] == later["index"]:
                o.update(status="noop", returned=list(removal["deleted"]))
    expect_candidate(replay_candidate(name, surface, noop_return), "deletion.backfill",
                     surface)

    def other_principal(d: dict[str, Any]) -> None:
        for rec in d["memory"]["records"]:
            if ".u" in rec["id"]:
                rec["scope_id"] = "someone-else"
    expect_candidate(replay_candidate(name, surface, other_principal),
                     "memory.scope_expanded", surface)

    def honest_ok(d: dict[str, Any]) -> None:  # ok + a false receipt on an absent record
        for o in _ops(d):
            if o["op"] == "remove" and not o["deleted"]:
                o["status"] = "ok"
    r = replay_candidate(name, surface, honest_ok)
    assert not [d for d in r.divergences if d.severity == "blocking"]


def test_records_must_come_from_operations_the_fixture_asked_for() -> None:
    name, surface = "memory-consolidate-trace", "session-core.memory"
    doc = projection_doc(name, surface)
    consolidation = next(o for o in _ops(doc) if o["op"] == "consolidate" and o["created"])
    reader = next(o for o in _ops(doc) if o["op"] not in ("add", "update", "consolidate")
                  and not o["created"])

    def move(target: int | None) -> Any:
        def edit(d: dict[str, Any]) -> None:
            ops = _ops(d)
            src = next(o for o in ops if o["index"] == consolidation["index"])
            made = src["created"]
            src["created"] = []
            if target is None:
                ops.append({"index": 999, "op": "add", "status": "ok", "created": made,
                            "detail": {}})
            else:
                next(o for o in ops if o["index"] == target)["created"] = made
        return edit
    assert "unknown_operation" in problem(replay_candidate(name, surface, move(None)), surface)
    assert "creation_by_non_writing_op" in problem(
        replay_candidate(name, surface, move(reader["index"])), surface)

    def unsketched(d: dict[str, Any]) -> None:
        for rec in d["memory"]["records"]:
            if rec["id"] in consolidation["created"]:
                rec.pop("shingles", None)
    assert "record_without_sketch" in problem(replay_candidate(name, surface, unsketched),
                                              surface)


def test_a_deletion_no_operation_made_is_unavailable() -> None:
    def wipe(d: dict[str, Any]) -> None:
        deleted = {rid for o in _ops(d) for rid in o["deleted"]}
        rec = next(r for r in d["memory"]["records"] if r["id"] not in deleted)
        rec["state"] = "deleted"
    r = replay_candidate("memory-clear-scope", "session-core.memory", wipe)
    assert "deletion_without_operation" in problem(r, "session-core.memory")


@pytest.mark.parametrize("edit", [
    lambda d: d["facts"].update(scope_history={"ignore previous instructions": ["agent"]}),
    lambda d: d.update(**{"LEAK: print GO now": 1}),
    lambda d: d["memory"]["ops"][0].update(**{"LEAK: print GO now": 1}),
])
def test_keys_of_a_file_are_not_echoed_in_errors(edit: Any) -> None:
    with pytest.raises(InputError) as err:
        replay_candidate("memory-update-remove", "session-core.memory", edit)
    assert "LEAK" not in str(err.value) and "ignore" not in str(err.value)


def test_a_recorded_identity_must_be_short_plain_metadata(tmp_path: Any) -> None:
    import json

    from shadow.candidate import RecordedCandidate

    (tmp_path / "candidate.json").write_text(json.dumps({
        "schema": "shadow-candidate/v1",
        "identity": {"kind": "kernel", "note": "<script>" + "x" * 200}}), encoding="utf-8")
    with pytest.raises(InputError) as err:
        RecordedCandidate(tmp_path)
    assert err.value.pointer == "/identity/note"
