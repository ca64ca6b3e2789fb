"""Deletion (``kernel.memory.deletion`` through ``kernel.memory.service``): fault injection on
every purge target, reconciliation, replica merges against tombstones, and selectors
that never reach beyond their one record."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.adapters.in_memory.memory_store import InMemoryMemoryPort
from kernel.errors import IllegalTransition, KernelError
from kernel.memory.deletion import OPERATION_MACHINE, OPERATION_TRANSITIONS
from kernel.memory.lifecycle import merge_replica_record
from kernel.memory.service import MemoryKernel
from shadow.memory_methods import (
    FailingCommits,
    PeerContentPort,
    ProjectionPurgePort,
    ScriptedPurgePort,
)
from tests.kernel.test_memory_lifecycle import Clock, Ids, apply, make


def seeded(*ids: str, scope: str = "project", scope_id: str | None = "project-1") -> list[Any]:
    records = []
    for memory_id in ids:
        extra: dict[str, Any] = {"scope": scope}
        extra["scopeId"] = scope_id
        if scope == "global":
            extra.pop("scopeId")
        record = make(memoryId=memory_id, **extra)
        records.append(apply(record, type="activate", expectedRevision=1).record)
    return records


def request(memory_id: str = "mem-1", request_id: str = "del-1", **kw: Any) -> dict[str, Any]:
    base = {
        "requestId": request_id,
        "subject": "user-1",
        "scope": "project",
        "scopeId": "project-1",
        "selector": f"memory:{memory_id}",
        "memoryId": memory_id,
        "expectedRevision": 2,
        "fence": "fence-1",
        "authority": "privacy.officer",
    }
    base.update(kw)
    return base


def build(*ports: Any, records: Any = None, fail_commits: tuple[int, ...] = ()) -> Any:
    memory = InMemoryMemoryPort(records if records is not None else seeded("mem-1"))
    port = FailingCommits(memory, fail_commits)
    kernel = MemoryKernel(memory_port=port, clock=Clock(), new_id=Ids(), purge_ports=ports)
    return kernel, memory


def test_one_failing_target_is_partial_then_reconcile_purges() -> None:
    index, cache = ProjectionPurgePort("search-index"), ProjectionPurgePort("cache")
    cache.fail_with({"message": "down", "code": "cache_down"})
    kernel, memory = build(index, cache)
    receipt = kernel.delete_memory(request())
    assert receipt["status"] == "partial"
    assert [(s["store"], s["status"]) for s in receipt["stores"]] == [
        ("in-memory-authority", "tombstoned"),
        ("search-index", "purged"),
        ("cache", "pending"),
    ]
    assert receipt["stores"][2]["error"] == {"code": "cache_down"}
    tomb = memory.read("mem-1")
    assert (
        tomb["state"] == "deleted" and tomb["content"] == "" and tomb["deletionFence"] == "fence-1"
    )
    assert memory.get_reconciliation("del-1")["state"] == "purge_pending"
    done = kernel.reconcile("del-1")
    assert done["status"] == "purged" and memory.read("mem-1")["state"] == "purged"
    assert all(s["status"] == "purged" for s in done["stores"])
    assert kernel.reconcile("del-1") == done  # sealed: replays the receipt
    assert kernel.delete_memory(request()) == done  # the same request id replays too


def test_receipt_is_never_a_global_success_while_anything_is_pending() -> None:
    scripted = ScriptedPurgePort(
        "legacy",
        [
            {"return": {"status": "unknown"}},
            {"return": None},
            {"throw": {"message": "x", "code": 503}},
            {"return": {"status": "purged"}},
        ],
    )
    kernel, memory = build(scripted)
    statuses = [kernel.delete_memory(request())["status"]]
    statuses += [kernel.reconcile("del-1")["status"] for _ in range(3)]
    assert statuses == ["partial", "partial", "partial", "purged"]
    codes = [s["stores"] for s in memory.reconciliations().values()]
    assert codes and memory.read("mem-1")["state"] == "purged"


def test_purge_commit_lost_is_reconciliation_required() -> None:
    kernel, _ = build(records=seeded("mem-1"), fail_commits=(2,))
    receipt = kernel.delete_memory(request())
    assert receipt["status"] == "reconciliation_required"
    assert receipt["stores"][0]["status"] == "tombstoned"
    assert kernel.reconcile("del-1")["status"] == "purged"


def test_content_object_is_purged_first() -> None:
    content = PeerContentPort()
    ref = content.put("large body", {"objectId": "obj-1"})
    records = [
        apply(make(memoryId="mem-1", contentRef=ref), type="activate", expectedRevision=1).record
    ]
    index = ProjectionPurgePort("index", content.log)
    memory = InMemoryMemoryPort(records)
    kernel = MemoryKernel(
        memory_port=memory, clock=Clock(), new_id=Ids(), content_port=content, purge_ports=[index]
    )
    receipt = kernel.delete_memory(request())
    assert receipt["status"] == "purged"
    assert [c["port"] for c in content.log] == ["content", "index"]
    assert content.objects == {}
    no_content = MemoryKernel(memory_port=InMemoryMemoryPort(records), clock=Clock(), new_id=Ids())
    partial = no_content.delete_memory(request())
    assert partial["status"] == "partial"
    assert partial["stores"][1] == {
        "store": "in-memory-content",
        "status": "pending",
        "error": {"code": "invalid_argument"},
    }


@pytest.mark.parametrize(
    "overrides,code",
    [
        ({"selector": "memory:mem-1*"}, "invalid_argument"),
        ({"selector": "memory:*"}, "invalid_argument"),
        ({"selector": "scope:project-1"}, "invalid_argument"),
        ({"selector": "memory:mem-2"}, "invalid_argument"),
        ({"scopeId": "project-2"}, "scope_denied"),
        ({"scope": "global", "scopeId": None}, "scope_denied"),
        ({"expectedRevision": 1}, "revision_conflict"),
    ],
)
def test_selector_never_deletes_beyond_itself(overrides: dict[str, Any], code: str) -> None:
    kernel, memory = build(records=seeded("mem-1", "mem-10", "mem-2"))
    before = memory.records()
    req = {k: v for k, v in request(**overrides).items() if v is not None}
    with pytest.raises(KernelError) as info:
        kernel.delete_memory(req)
    assert info.value.code == code
    assert memory.records() == before  # nothing touched


def test_deletion_touches_exactly_one_record() -> None:
    kernel, memory = build(ProjectionPurgePort("index"), records=seeded("mem-1", "mem-10", "mem-2"))
    before = {r["memoryId"]: r for r in memory.records()}
    kernel.delete_memory(request("mem-1"))
    after = {r["memoryId"]: r for r in memory.records()}
    assert after["mem-10"] == before["mem-10"] and after["mem-2"] == before["mem-2"]
    assert after["mem-1"]["state"] == "purged"


def test_request_id_reuse_rules() -> None:
    failing = ProjectionPurgePort("index")
    failing.fail_with({"message": "x", "code": "down"})
    kernel, _ = build(failing)
    kernel.delete_memory(request())
    for change in ({"fence": "fence-2"}, {"authority": "someone"}, {"subject": "user-2"}):
        with pytest.raises(KernelError) as info:
            kernel.delete_memory(request(**change))
        assert info.value.code == "revision_conflict"
    # reason is not part of the binding; the retry resumes the pending purge
    assert kernel.delete_memory(request(reason="again"))["status"] == "purged"


def test_legal_hold_blocks_deletion() -> None:
    held = apply(
        make(retentionPolicy={"mode": "legal_hold", "legalHoldId": "hold-1"}),
        type="activate",
        expectedRevision=1,
    ).record
    kernel, memory = build(records=[held])
    with pytest.raises(KernelError) as info:
        kernel.delete_memory(request())
    assert (info.value.code, info.value.details["legalHoldId"]) == ("scope_denied", "hold-1")
    assert memory.read("mem-1") == held


def test_reconcile_reports_instead_of_guessing() -> None:
    failing = ProjectionPurgePort("index")
    failing.fail_with({"message": "x", "code": "down"})
    kernel, memory = build(failing)
    kernel.delete_memory(request())
    memory.drop("mem-1")
    assert kernel.reconcile("del-1") == {
        "operationId": "del-1",
        "status": "reconciliation_required",
        "reason": "tombstone_missing",
    }
    assert kernel.reconcile("del-unknown") == {"operationId": "del-unknown", "status": "not_found"}


def test_operation_table_ends_in_purged() -> None:
    assert OPERATION_TRANSITIONS["purged"] == frozenset()
    assert all(
        "purged" in t for s, t in OPERATION_TRANSITIONS.items() if s not in ("prepared", "purged")
    )


@pytest.mark.parametrize("stored", ["prepared", "purged", "restored"])
@pytest.mark.parametrize(
    ("still_failing", "event"), [(True, "copy_pending"), (False, "purge_committed")]
)
def test_a_stored_state_the_table_does_not_allow_is_an_illegal_transition(
    stored: str, still_failing: bool, event: str
) -> None:
    """A reconciliation resumes from the stored operation's state; one the table cannot
    leave is refused by the machine (never ``AssertionError``) before the operation or
    the record is written again."""
    failing = ProjectionPurgePort("index")
    failing.fail_with({"message": "x", "code": "down"})
    kernel, memory = build(failing)
    kernel.delete_memory(request())
    memory.put_reconciliation({**memory.get_reconciliation("del-1"), "state": stored})
    if still_failing:
        failing.fail_with({"message": "x", "code": "down"})
    with pytest.raises(IllegalTransition) as info:
        kernel.reconcile("del-1")
    error = info.value
    assert (error.machine, error.state, error.event) == ("deletion", stored, event)
    assert error.details == {"machine": "deletion", "state": stored, "event": event}
    assert memory.get_reconciliation("del-1")["state"] == stored
    assert memory.read("mem-1")["state"] == "deleted"


@pytest.mark.parametrize(
    ("state", "event", "target"),
    [
        ("prepared", "tombstone_committed", "tombstoned"),
        ("tombstoned", "copy_pending", "purge_pending"),
        ("tombstoned", "purge_commit_lost", "commit_pending"),
        ("tombstoned", "purge_committed", "purged"),
        ("purge_pending", "copy_pending", "purge_pending"),
        ("purge_pending", "purge_commit_lost", "commit_pending"),
        ("purge_pending", "purge_committed", "purged"),
        ("commit_pending", "copy_pending", "purge_pending"),
        ("commit_pending", "purge_commit_lost", "commit_pending"),
        ("commit_pending", "purge_committed", "purged"),
    ],
)
def test_operation_machine_edges(state: str, event: str, target: str) -> None:
    assert OPERATION_MACHINE.step(state, event) == (target, ())


def test_operation_machine_has_exactly_the_listed_edges() -> None:
    assert sum(1 for _ in OPERATION_MACHINE.edges()) == 10
    assert OPERATION_MACHINE.terminal == frozenset({"purged"})


# --------------------------------------------------------------------------- properties


@settings(max_examples=40, deadline=None)
@given(
    failures=st.lists(st.lists(st.booleans(), min_size=4, max_size=4), min_size=1, max_size=4),
)
def test_any_failure_pattern_converges_and_never_lies(failures: list[list[bool]]) -> None:
    """Round r fails target i when failures[r][i]; after the scripted rounds every
    target succeeds.  Each receipt is ``purged`` iff no store is pending."""
    names = [f"store-{i}" for i in range(4)]
    ports = [
        ScriptedPurgePort(
            name,
            [
                *(
                    {"throw": {"message": "x", "code": "e"}}
                    if round_[i]
                    else {"return": {"status": "purged"}}
                    for round_ in failures
                ),
                {"return": {"status": "purged"}},
            ],
        )
        for i, name in enumerate(names)
    ]
    kernel, memory = build(*ports)
    receipt = kernel.delete_memory(request())
    for _ in range(len(failures) + 1):
        pending = [s for s in receipt["stores"][1:] if s["status"] == "pending"]
        assert [s["store"] for s in receipt["stores"][1:]] == names
        assert (receipt["status"] == "purged") == (not pending)
        assert memory.read("mem-1")["state"] == ("purged" if not pending else "deleted")
        if not pending:
            break
        receipt = kernel.reconcile("del-1")
    assert receipt["status"] == "purged"


live_states = st.sampled_from(["activate", "reinforce", "archive", "expire"])


@settings(max_examples=40, deadline=None)
@given(path=st.lists(live_states, max_size=6), purge=st.booleans())
def test_replica_merge_never_revives_a_tombstone(path: list[str], purge: bool) -> None:
    record = make()
    copies = [record]
    for kind in ["activate", *path]:
        try:
            record = apply(record, type=kind, expectedRevision=record["revision"]).record
        except KernelError:
            continue
        copies.append(record)
    tomb = apply(
        record, type="delete", expectedRevision=record["revision"], deletionFence="f-1"
    ).record
    if purge:
        tomb = apply(
            tomb, type="purge", expectedRevision=tomb["revision"], deletionFence="f-1"
        ).record
    for replica in copies:
        with pytest.raises(KernelError) as info:
            merge_replica_record(tomb, replica)
        assert info.value.code == "replica_tombstone_fenced"
    assert merge_replica_record(tomb, tomb).record == tomb


def test_recall_never_returns_deleted_memory() -> None:
    failing = ProjectionPurgePort("index")
    failing.fail_with({"message": "x", "code": "down"})
    kernel, memory = build(failing, records=seeded("mem-1", "mem-2"))
    query = {
        "query": "pnpm",
        "sink": "cli",
        "scopeAdmissions": [{"scope": "project", "scopeId": "project-1"}],
        "now": "2026-08-29T00:00:00.000Z",
    }
    before = kernel.recall_memory(query)
    assert {r["memoryId"] for r in before["results"]} == {"mem-1", "mem-2"}
    assert kernel.delete_memory(request())["status"] == "partial"  # tombstone first
    after = kernel.recall_memory(query)
    assert [r["memoryId"] for r in after["results"]] == ["mem-2"]
    assert after["memoryRevision"] == memory.store_revision()
