"""A recorded candidate is judged on what it did, never on what it claims about its own
circumstances: offered ids, stated limits and what the recording says are the harness's
(``shadow.anchor``); its facts are type-checked; a candidate that produced nothing the
design defines is unavailable (blocking)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shadow.errors import InputError
from shadow.surfaces.alterations import check_cleaned
from tests.shadow._mutate import (
    drop,
    expect_candidate,
    find,
    judged,
    projection_doc,
    replay_candidate,
    scenario,
)


def test_hiding_a_dropped_item_from_the_offered_ids_changes_nothing() -> None:
    name, surface = "pending-approval", "cli.compress"
    hidden = ("pending-approval:m0000", "pending-approval:m0007", "pending-approval:m0008.c1")

    def hide(d: dict[str, Any]) -> None:
        d["items"] = [it for it in d["items"] if it["id"] not in hidden]
        d["input_ids"] = [i for i in d["input_ids"] if i not in hidden]
    r = replay_candidate(name, surface, hide)
    expect_candidate(r, "protected.dropped", surface, "pending-approval:m0007")
    expect_candidate(r, "pending.lost", surface, "pending-approval:m0008.c1")


def test_what_the_recording_says_is_not_the_candidates_to_state() -> None:
    def swallow(d: dict[str, Any]) -> None:
        d["status"], d["error"] = "ok", None
        d["provider"] = {**d["provider"], "status": "committed", "truth": None,
                         "cancelled": False, "degraded": False, "usage": "known"}
    r = replay_candidate("provider-cancelled", "desktop.compress", swallow)
    expect_candidate(r, "provider.cancel_swallowed", "desktop.compress")


@pytest.mark.parametrize("limits", [None, {"tokens": 1}, {"tokens": 1, "partitions": {}}])
def test_a_budget_claim_is_checked_against_the_harness_policy(limits: Any) -> None:
    name, surface = "long-en-coding-session", "cli.compress"
    doc = projection_doc(name, surface)
    victims = [it["id"] for it in doc["items"] if it.get("role") == "assistant"
               and not it.get("tool_role")][:3]

    def starve(d: dict[str, Any]) -> None:
        for v in victims:
            drop(d, v, "partition_ceiling")
        if limits is None:
            d["facts"].pop("limits", None)
        else:
            d["facts"]["limits"] = limits
    r = replay_candidate(name, surface, starve)
    unjust = [d for d in find(r.divergences, "drop_reason.unjustified", surface)
              if d.attribution == "candidate"]
    assert unjust and unjust[0].detail["why"] == "fits_partition_ceiling"
    assert not [d for d in judged(r) if d.attribution == "intended" and d.surface == surface
                and set(victims) & set(d.item_ids)]


def test_a_secret_sent_to_the_summarizer_leaks_even_when_the_candidate_failed() -> None:
    def fail_after_sending(d: dict[str, Any]) -> None:
        d["status"], d["error"] = "error", "aborted"
        d["facts"] = {**d["facts"], "provider_inputs": ["secrets-in-tool-output:m0003"]}
    r = replay_candidate("secrets-in-tool-output", "cli.provider-compaction",
                         fail_after_sending)
    expect_candidate(r, "secret.leaked", "cli.provider-compaction",
                     "secrets-in-tool-output:m0003")


@pytest.mark.parametrize("error", ["internal_error", "TypeError"])
def test_a_failure_the_design_does_not_define_is_unavailable(error: str) -> None:
    def crash(d: dict[str, Any]) -> None:
        d["status"], d["error"] = "error", error
    r = replay_candidate("short-session", "cli.compress", crash)
    un = find(r.divergences, "candidate.unavailable", "cli.compress")
    assert un and un[0].severity == "blocking"
    assert un[0].detail["problem"] == "undefined_failure"


def test_a_failure_stated_in_free_text_is_refused() -> None:
    def crash(d: dict[str, Any]) -> None:
        d["status"], d["error"] = "error", "boom boom"
    with pytest.raises(InputError) as err:
        replay_candidate("short-session", "cli.compress", crash)
    assert err.value.pointer == "/error" and "boom" not in str(err.value)


def test_a_false_refusal_is_the_candidates_fault() -> None:
    name = "ide-budget-zero"
    surface = "vscode.context-center"

    def refuse(d: dict[str, Any]) -> None:
        d["status"], d["error"], d["items"] = "error", "context_over_budget", []
        d["facts"] = {**d["facts"], "error_detail": {
            "protectedItemIds": ["ide-budget-zero:c0003"], "selectableBudget": 100000}}
    r = replay_candidate(name, surface, refuse)
    mism = [d for d in find(r.divergences, "outcome.error_mismatch", surface)
            if d.attribution == "candidate"]
    assert mism and mism[0].detail["candidate_refusal"] == "falsified"
    un = find(r.divergences, "candidate.unavailable", surface)
    assert un and un[0].severity == "blocking" and un[0].item_ids == ("ide-budget-zero:c0003",)


def test_a_memory_operation_the_candidate_skipped_is_a_divergence() -> None:
    def skip(d: dict[str, Any]) -> None:
        d["memory"]["ops"] = d["memory"]["ops"][:2]
    r = replay_candidate("memory-update-remove", "session-core.memory", skip)
    missing = [d for d in find(r.divergences, "memory.state_mismatch")
               if d.detail.get("candidate") == "missing"]
    assert len(missing) == len(scenario("memory-update-remove").input["memory_ops"]) - 2


@pytest.mark.parametrize("facts,pointer", [
    ({"provider_history": [{"truth": "ok"}]}, "/facts/provider_history/0/status"),
    ({"provider_inputs": [["x"]]}, "/facts/provider_inputs"),
    ({"sent_secrets": [1, "2"]}, "/facts/sent_secrets"),
    ({"limits": {"tokens": "12"}}, "/facts/limits/tokens"),
    ({"scope_history": {"r": "session"}}, "/facts/scope_history/r"),
])
def test_facts_the_engine_reads_are_type_checked(facts: dict[str, Any], pointer: str,
                                                tmp_path: Path) -> None:
    def bad(d: dict[str, Any]) -> None:
        d["facts"] = {**d["facts"], **facts}
    with pytest.raises(InputError) as err:
        replay_candidate("short-session", "cli.compress", bad)
    assert err.value.pointer == pointer


def test_a_cleaned_prompt_may_only_replace_volatile_values() -> None:
    sc = scenario("prompt-injection-web-fetch")
    original = sc.input["messages"][0]["content"]
    cleaned = json.loads(json.dumps(next(c for c in sc.captures if c.name ==
                                         "desktop.context-engineering").raw))
    ok = cleaned["output"]["messages"][0]["content"]
    assert check_cleaned(original, ok) == ("verified", "")
    assert check_cleaned("Do not run rm -rf / on host 10.0.0.1 ever.",
                         "Do not run id.") == ("falsified", "changed_content")
    assert check_cleaned("Started 2026-08-20T10:00:00Z id=cc-7f3a9d21.",
                         "Started [DATE] id: [SESSION].") == ("verified", "")
    assert check_cleaned("keep diffs minimal", "keep diffs large") == (
        "falsified", "changed_content")
