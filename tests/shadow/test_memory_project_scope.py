"""A project-scope memory the legacy MemoryStore refuses (it has no project scope) and the
kernel keeps (design 108 §6.3): the legacy reader keeps what each refused operation asked
for, so the kernel's admitted reads are not mistaken for unadmitted ones, and the reviewed
rules ID-018/ID-019 name the difference (issue 15's memory-scopes-project-overlap)."""

from __future__ import annotations

from shadow import intended
from shadow.candidate import KernelCandidate
from shadow.divergence import make
from shadow.replay import replay_fixture
from shadow.run import apply_intended
from shadow.surfaces.session_core_memory import _asked_selector
from tests.shadow._mutate import scenario

NAME = "memory-scopes-project-overlap"


def test_a_refused_operation_still_records_what_it_asked_for() -> None:
    assert _asked_selector("add", {"scope": "project", "scopeId": "acme"}) == {
        "scope": "project", "scope_id": "acme"}
    assert _asked_selector("clearScope", ["project", "acme"]) == {
        "scope": "project", "scope_id": "acme"}
    assert _asked_selector("stats", None) is None


def test_the_kernels_project_scope_is_an_intended_difference_not_a_defect() -> None:
    r = replay_fixture(scenario(NAME), KernelCandidate())
    assert not [d for d in r.divergences if d.attribution == "candidate"]
    judged = apply_intended(list(r.divergences), intended.load())
    project = [d for d in judged if d.reason_code == "memory.state_mismatch"
               and (d.detail.get("scope") == "project"
                    or d.detail.get("one_side_scopes") == "project")]
    assert project and {d.attribution for d in project} == {"intended"}
    assert {d.detail["intended_rule"] for d in project} == {"ID-018", "ID-019"}


def test_project_records_the_kernel_lost_are_not_covered() -> None:
    """ID-019 is for records only the candidate holds; the mirror case stays unexplained."""
    lost = make("fx", "session-core.memory", "memory.state_mismatch", "none", ["fx:op0000"],
                {"state_differs": 0, "one_side_only": 1, "one_side_scopes": "project",
                 "one_side_holder": "b"})
    [judged] = apply_intended([lost], intended.load())
    assert judged.attribution == "none" and "intended_rule" not in judged.detail
    kept = make("fx", "session-core.memory", "memory.state_mismatch", "none", ["fx:op0000"],
                {**lost.detail, "one_side_holder": "a"})
    [judged] = apply_intended([kept], intended.load())
    assert judged.detail.get("intended_rule") == "ID-019"
