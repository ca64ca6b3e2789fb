"""Successive compactions whose later provider call fails: an earlier call's semantic
summary may outlive it, and a call left for reconciliation masks nothing (issue 15's new
``provider-ok-then-failure-successive`` scenario found both false alarms)."""

from __future__ import annotations

from dataclasses import asdict

from shadow import intended
from shadow.candidate import KernelCandidate
from shadow.divergence import consistency
from shadow.divergence.invariants import _provider as provider_invariants
from shadow.projection import PItem, Projection, ProviderOutcome
from shadow.replay import replay_fixture
from shadow.run import apply_intended
from tests.shadow._mutate import scenario

OK = ProviderOutcome("committed", requests=1, recorded=1, degraded=False, usage="known",
                     truth="ok")
LOST = ProviderOutcome("reconciliation_required", requests=2, recorded=2, degraded=False,
                       usage="unknown", truth="error")


def _summary(item_id: str) -> PItem:
    return PItem(id=item_id, kind="summary", origin="derived",
                 digest="sha256:" + "ab" * 32, length=400,
                 detail={"format": "structured", "fields": ["objective"]})


def _projection(summaries: list[str], history: list[ProviderOutcome]) -> Projection:
    return Projection("fx", "cli.provider-compaction", "candidate",
                      items=tuple(_summary(i) for i in summaries), provider=LOST,
                      facts={"provider_inputs": ["fx:m0001"],
                             **({"provider_history": [asdict(h) for h in history]}
                                if history else {})})


def _masked(vs: list[object]) -> list[object]:
    return [v for v in vs if getattr(v, "code", None) == "provider.degraded_masked"]


def test_an_earlier_answers_summary_survives_a_later_failed_call() -> None:
    assert _masked(consistency._provider(_projection(["~c1.summary.1"], [OK]))) == []


def test_the_failed_calls_own_summary_is_masked_whatever_came_before() -> None:
    (hit,) = _masked(consistency._provider(_projection(["~c1.summary.1", "~summary.1"],
                                                       [OK])))
    assert hit.detail["why"] == "semantic_summary_from_failed_answer"  # type: ignore[attr-defined]
    assert hit.item_ids == ("~summary.1",)  # type: ignore[attr-defined]
    # one summary, but it is the failed last call's, not the earlier answer's
    (hit,) = _masked(consistency._provider(_projection(["~summary.1"], [OK])))
    (hit,) = _masked(consistency._provider(_projection(["~summary.1"], [])))  # single call
    (hit,) = _masked(consistency._provider(_projection(["~c7.summary.1"], [OK])))  # no call 7


def test_reconciliation_after_a_failed_call_is_not_masking() -> None:
    assert _masked(provider_invariants(_projection([], [OK]), {})) == []
    committed = Projection("fx", "cli.provider-compaction", "candidate",
                           provider=ProviderOutcome("committed", requests=1, degraded=False,
                                                    truth="error"))
    assert _masked(provider_invariants(committed, {}))  # committing a failure still is


def test_a_definite_provider_refusal_settles_with_no_usage_by_design() -> None:
    """provider-failure-rate-limited: a 429 the provider answered — the kernel degrades with
    usage none, the legacy says unknown; reviewed rule ID-020, nothing else matches it."""
    r = replay_fixture(scenario("provider-failure-rate-limited"), KernelCandidate())
    judged = apply_intended(list(r.divergences), intended.load())
    usage = [d for d in judged if d.reason_code == "provider.usage_unknown_masked"]
    assert usage and {d.detail.get("intended_rule") for d in usage} == {"ID-020"}
    r = replay_fixture(scenario("windows-paths"), KernelCandidate())  # a connect failure
    judged = apply_intended(list(r.divergences), intended.load())
    assert "ID-020" not in {d.detail.get("intended_rule") for d in judged}
