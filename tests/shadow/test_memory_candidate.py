"""The candidate's memory side runs the live kernel (``shadow.memory_candidate``): every
memory fixture replays through ``MemoryKernel``; a deletion is never over-broad; a deleted
memory is never recalled; a scope is never widened."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shadow import memory_candidate
from shadow.candidate import KernelCandidate
from shadow.canonical import canonicalize
from shadow.divergence.memory import check_memory
from shadow.fixtures import load_corpus
from shadow.projection import MemOp, Projection, content_digest, dumps

ROOT = Path(__file__).resolve().parents[2]
SURFACE = "session-core.memory"
MEMORY_FIXTURES = ("memory-clear-scope", "memory-consolidate-trace", "memory-recall-chinese",
                   "memory-scopes-overlap", "memory-update-remove")


@functools.lru_cache(maxsize=1)
def corpus():  # type: ignore[no-untyped-def]
    return {s.name: s for s in load_corpus(ROOT / "fixtures").scenarios}


@functools.cache
def fixture(name: str) -> Projection:
    s = corpus()[name]
    cap = next(c for c in s.captures if c.name == SURFACE)
    return KernelCandidate().project(canonicalize(name, s.input), cap, {})


def run(ops: Sequence[Mapping[str, Any]], name: str = "mem-test") -> Projection:
    return memory_candidate.project(canonicalize(name, {"memory_ops": list(ops)}), SURFACE)


def op(p: Projection, index: int) -> MemOp:
    assert p.memory is not None
    return next(o for o in p.memory.ops if o.index == index)


def short(ids: Sequence[str] | None) -> list[str]:
    return [i.split(":", 1)[1] for i in ids or ()]


def records(p: Projection) -> dict[str, Any]:
    assert p.memory is not None
    return {r.id.split(":", 1)[1]: r for r in p.memory.records}


# --------------------------------------------------------------------------- the fixtures


def test_the_candidate_identity_names_the_memory_kernel() -> None:
    assert KernelCandidate().identity["memory"] == "kernel.memory.service"


@pytest.mark.parametrize("name", MEMORY_FIXTURES)
def test_every_memory_fixture_replays_through_the_kernel_without_breaking_an_invariant(
        name: str) -> None:
    p = fixture(name)
    assert p.status == "ok" and p.memory is not None
    assert len(p.memory.ops) == len(corpus()[name].input["memory_ops"])
    assert check_memory(p) == []
    again = run(corpus()[name].input["memory_ops"], name)  # fixed clock and ids
    assert dumps(again) == dumps(p)


def test_every_deletion_has_a_receipt_with_one_entry_per_store() -> None:
    seen = 0
    for name in MEMORY_FIXTURES:
        p = fixture(name)
        assert p.memory is not None
        for o in p.memory.ops:
            for receipt in o.detail.get("deletions", ()):
                assert receipt["status"] == "purged"
                assert receipt["stores"] == [
                    {"store": "in-memory-authority", "status": "purged"},
                    {"store": "memory-recall-index", "status": "purged"}]
                seen += 1
    assert seen == 3  # clearScope session s1 (2 records) and one remove


# --------------------------------------------------------------------------- deletion


def test_remove_deletes_exactly_the_named_record_and_a_second_remove_is_a_noop() -> None:
    p = fixture("memory-update-remove")
    first, second = op(p, 7), op(p, 8)
    assert first.status == "ok" and short(first.deleted) == ["op0001"]
    assert first.detail["receipt"] is True
    assert [d["selector"] for d in first.detail["deletions"]] == ["memory:mem-op0001"]
    assert second.status == "noop" and second.deleted == () and second.detail["receipt"] is False
    assert records(p)["op0001"].state == "deleted"
    assert records(p)["op0001"].digest == content_digest("")  # a tombstone holds no body


def test_clear_scope_deletes_exactly_that_scope_and_scope_id() -> None:
    p = fixture("memory-clear-scope")
    cleared = op(p, 6)  # ["session", "s1"]
    assert short(cleared.deleted) == ["op0000", "op0001"] and cleared.detail["receipt"] == 2
    assert [d["selector"] for d in cleared.detail["deletions"]] == [
        "memory:mem-op0000", "memory:mem-op0001"]
    recs = records(p)
    assert recs["op0002"].state == "active"  # session s2
    assert recs["op0003"].state == "active"  # agent s1: same scopeId, other scope
    # a global selector with a scopeId is refused, never widened to every global record
    assert op(p, 8).status == "error" and op(p, 8).deleted == ()
    assert recs["op0004"].state == recs["op0005"].state == "active"
    assert op(p, 9).status == "ok" and op(p, 9).deleted == ()  # nothing in that scope
    assert op(p, 10).status == "error"  # not a scope


def test_remove_deletes_every_version_of_an_updated_record_one_selector_each() -> None:
    p = run([
        {"op": "add", "as": "m", "args": {"scope": "user", "scopeId": "u1", "content": "v1"}},
        {"op": "add", "args": {"scope": "user", "scopeId": "u1", "content": "other v1"}},
        {"op": "update", "ref": "m", "patch": {"content": "v2"}},
        {"op": "remove", "ref": "m"},
        {"op": "recall", "args": {"query": "v1 v2", "scope": "user", "scopeId": "u1"}},
    ])
    removed = op(p, 3)
    assert sorted(short(removed.deleted)) == ["op0000", "op0000.u0002"]
    assert sorted(d["selector"] for d in removed.detail["deletions"]) == [
        "memory:mem-op0000", "memory:mem-op0000.u0002"]
    assert short(op(p, 4).returned) == ["op0001"]
    assert records(p)["op0001"].state == "active"


# --------------------------------------------------------------------------- recall


def test_a_deleted_memory_is_never_recalled_listed_or_got() -> None:
    sel = {"scope": "agent", "scopeId": "coder"}
    p = run([
        {"op": "add", "as": "a", "args": {**sel, "content": "库存 扣减 fixed in orders.py"}},
        {"op": "add", "as": "b", "args": {**sel, "content": "库存 cache warmed"}},
        {"op": "recall", "args": {"query": "库存", **sel}},
        {"op": "remove", "ref": "a"},
        {"op": "recall", "args": {"query": "库存", **sel}},
        {"op": "get", "ref": "a"},
        {"op": "list", "args": sel},
        {"op": "clearScope", "args": ["agent", "coder"]},
        {"op": "recall", "args": {"query": "库存", **sel}},
        {"op": "get", "ref": "b"},
    ])
    assert sorted(short(op(p, 2).returned)) == ["op0000", "op0001"]
    assert short(op(p, 4).returned) == ["op0001"]
    assert op(p, 5).returned == ()
    assert short(op(p, 6).returned) == ["op0001"]
    assert short(op(p, 7).deleted) == ["op0001"]
    assert op(p, 8).returned == () and op(p, 9).returned == ()
    assert check_memory(p) == []


def test_recall_reads_only_the_admitted_scope_and_never_scans_without_one() -> None:
    p = fixture("memory-scopes-overlap")
    assert short(op(p, 9).returned) == ["op0000"]  # session alpha only, not session beta
    for index in (8, 10, 11, 12, 13):  # no scope / no scopeId / global with scopeId
        assert op(p, index).status == "error" and op(p, index).returned is None
    assert short(op(p, 14).returned) == ["op0001"]


def test_chinese_recall_uses_the_canonical_analyzer() -> None:
    zh = {"scope": "session", "scopeId": "sess-88"}
    p = run([
        {"op": "add", "args": {**zh, "content": "修复了库存并发扣减超卖问题（app/orders.py）"}},
        {"op": "add", "args": {**zh, "content": "订单服务使用 Redis 缓存订单查询"}},
        {"op": "add", "args": {"scope": "session", "scopeId": "other", "content": "库存超卖"}},
        {"op": "recall", "args": {"query": "库存 超卖", **zh}},
        {"op": "recall", "args": {"query": "ＲＥＤＩＳ", **zh}},
        {"op": "recall", "args": {"query": "性能", **zh}},
    ])
    assert short(op(p, 3).returned) == ["op0000"]
    assert short(op(p, 4).returned) == ["op0001"]  # NFKC + case folding
    assert op(p, 5).returned == ()


# --------------------------------------------------------------------------- scope, update


def test_update_supersedes_with_a_successor_in_the_same_scope() -> None:
    p = fixture("memory-update-remove")
    updated = op(p, 2)
    assert short(updated.created) == ["op0000.u0002"] and short(updated.updated) == ["op0000"]
    recs = records(p)
    assert recs["op0000"].state == "superseded"
    assert recs["op0000.u0002"].state == "active"
    assert (recs["op0000.u0002"].scope, recs["op0000.u0002"].scope_id) == ("agent", "coder")
    assert short(op(p, 10).returned) == ["op0000.u0002"]  # get follows the correction
    # a patch naming scope or id is refused whole; an empty content is the kernel's refusal
    assert op(p, 3).status == "error" and op(p, 3).error == "scope_denied"
    assert recs["op0001"].scope == "agent"
    assert op(p, 4).status == "error" and op(p, 4).error == "invalid_argument"
    assert op(p, 5).status == "noop"  # unknown target: no command


def test_consolidation_yields_session_candidates_only() -> None:
    p = fixture("memory-consolidate-trace")
    created = op(p, 11).created
    assert created
    recs = records(p)
    for pid in short(created):
        assert recs[pid].state == "candidate"
        assert (recs[pid].scope, recs[pid].scope_id) == ("session", "sess-42")
    assert op(p, 12).created == () and op(p, 12).detail["duplicates"] == list(created)
    assert op(p, 13).created == ()  # an empty session
    assert op(p, 14).status == "error"  # no sessionId
    assert op(p, 15).returned == ()  # nothing was written at agent scope


# --------------------------------------------------------------------------- properties

_SCOPES = [("session", "s1"), ("session", "s2"), ("agent", "s1"), ("user", "u1"),
           ("global", None)]
_WORDS = ["alpha", "beta", "库存", "缓存", "vitest"]


def _sel(scope: tuple[str, str | None]) -> dict[str, Any]:
    return {"scope": scope[0], **({"scopeId": scope[1]} if scope[1] else {})}


_op = st.one_of(
    st.builds(lambda s, w: {"op": "add", "args": {**_sel(s), "content": w}},
              st.sampled_from(_SCOPES), st.sampled_from(_WORDS)),
    st.builds(lambda r: {"op": "remove", "ref": f"r{r}"}, st.integers(0, 5)),
    st.builds(lambda r, w: {"op": "update", "ref": f"r{r}", "patch": {"content": w}},
              st.integers(0, 5), st.sampled_from(_WORDS)),
    st.builds(lambda r: {"op": "update", "ref": f"r{r}", "patch": {"scope": "global"}},
              st.integers(0, 5)),
    st.builds(lambda s: {"op": "clearScope", "args": [s[0], s[1]]}, st.sampled_from(_SCOPES)),
    st.builds(lambda s, w: {"op": "recall", "args": {**_sel(s), "query": w}},
              st.sampled_from(_SCOPES), st.sampled_from(_WORDS)),
    st.builds(lambda r: {"op": "get", "ref": f"r{r}"}, st.integers(0, 5)),
)


def _named(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out, n = [], 0
    for o in ops:
        if o["op"] == "add":
            o = {**o, "as": f"r{n}"}
            n += 1
        out.append(o)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_op, min_size=1, max_size=14).map(_named))
def test_no_op_sequence_widens_a_scope_revives_a_deletion_or_deletes_too_much(
        ops: list[dict[str, Any]]) -> None:
    p = run(ops)
    assert p.memory is not None
    assert check_memory(p) == []
    recs = {r.id: r for r in p.memory.records}
    deleted: set[str] = set()
    for o in p.memory.ops:
        sel = o.detail.get("selector") or {}
        for rid in o.created:  # created exactly where the operation said
            assert (recs[rid].scope, recs[rid].scope_id) == (sel["scope"], sel["scope_id"])
        for rid in o.updated:  # a correction stays where the corrected record was
            assert all(recs[c].scope == recs[rid].scope for c in o.created)
        if o.op == "clearScope":
            for rid in o.deleted:
                assert (recs[rid].scope, recs[rid].scope_id) == (sel["scope"], sel["scope_id"])
        for d in o.detail.get("deletions", ()):
            assert d["selector"].startswith("memory:mem-op")  # one record per deletion
        assert not set(o.returned or ()) & deleted  # never recalled after deletion
        deleted |= set(o.deleted)
    assert all(recs[rid].state == "deleted" for rid in deleted)
