"""The canonical input derivation (docs/fixtures.md), rule by rule."""

from __future__ import annotations

import functools
from pathlib import Path

from kernel.planning.planner import plan_context
from shadow.canonical import (
    DROP_REASONS,
    canonical_ide,
    canonical_session,
    canonicalize,
    chip_hash,
    memory_commands,
    scope_id_of,
)
from shadow.fixtures import load_corpus

ROOT = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=1)
def corpus():  # type: ignore[no-untyped-def]
    return {s.name: s for s in load_corpus(ROOT / "fixtures").scenarios}


def session(name: str):  # type: ignore[no-untyped-def]
    return canonical_session(name, corpus()[name].input)


def test_identity_comes_from_session_and_sequence() -> None:
    s = session("parallel-tool-calls")
    ids = [it.item_id for it in s.items]
    assert ids[:5] == ["parallel-tool-calls:m0000", "parallel-tool-calls:m0001",
                       "parallel-tool-calls:m0002", "parallel-tool-calls:m0002.c1",
                       "parallel-tool-calls:m0002.c2"]
    assert len(ids) == len(set(ids))
    assert s.message_items[2] == ("parallel-tool-calls:m0002", "parallel-tool-calls:m0002.c1",
                                  "parallel-tool-calls:m0002.c2", "parallel-tool-calls:m0002.c3")


def test_tool_calls_bind_results_by_tool_call_id_out_of_order() -> None:
    by = session("parallel-tool-calls").by_id
    # results arrive 3, 1, 2: each binds to its own call item
    assert by["parallel-tool-calls:m0003"].tool_call_id == "parallel-tool-calls:m0002.c3"
    assert by["parallel-tool-calls:m0004"].tool_call_id == "parallel-tool-calls:m0002.c1"
    assert by["parallel-tool-calls:m0005"].tool_call_id == "parallel-tool-calls:m0002.c2"
    call = by["parallel-tool-calls:m0002.c1"]
    assert (call.tool_role, call.tool_outcome) == ("call", "succeeded")
    assert by["parallel-tool-calls:m0004"].tool_role == "result"


def test_call_without_result_is_explicitly_pending() -> None:
    by = session("pending-approval").by_id
    call = by["pending-approval:m0008.c1"]
    assert call.tool_outcome == "pending" and call.tool_role == "call"
    assert "pending-approval:m0008" in by  # its text is its own item


def test_orphan_results_are_unbound_evidence() -> None:
    by = session("orphan-tool-result").by_id
    for mid in ("orphan-tool-result:m0004", "orphan-tool-result:m0005"):
        it = by[mid]
        assert it.kind == "tool-evidence" and not it.binding and it.detail["orphan"]
    assert by["orphan-tool-result:m0004"].trust == "untrusted"  # no call, no name: unknown
    assert by["orphan-tool-result:m0005"].trust == "external"  # named tool output


def test_late_result_still_pairs() -> None:
    by = session("late-tool-result").by_id
    assert by["late-tool-result:m0004"].tool_call_id == "late-tool-result:m0002.c1"


def test_trust_by_role_and_source() -> None:
    by = session("prompt-injection-web-fetch").by_id
    trusts = {it.role: set() for it in by.values()}
    for it in by.values():
        trusts[it.role].add(it.trust)
    assert trusts["system"] == {"host"} and trusts["user"] == {"user"}
    assert trusts["tool"] <= {"external", "untrusted"} and "untrusted" in trusts["tool"]
    assert by["prompt-injection-web-fetch:m0000"].kind == "system-policy"


def test_system_messages_after_the_first() -> None:
    by = session("multiple-system-messages").by_id
    assert by["multiple-system-messages:m0000"].kind == "system-policy"
    assert by["multiple-system-messages:m0001"].kind == "project-rule"
    assert by["multiple-system-messages:m0005"].kind == "message"
    assert by["multiple-system-messages:m0005"].trust == "host"


def test_prior_compact_summary_is_low_trust_derived_content() -> None:
    it = session("replay-cc-summary").by_id["replay-cc-summary:m0001"]
    assert it.trust == "external" and it.detail["prior"] == "compact-summary"


def test_pinned_last_user_question_and_sensitivity() -> None:
    by = session("pinned-messages").by_id
    assert by["pinned-messages:m0001"].pinned and by["pinned-messages:m0006"].pinned
    assert by["pinned-messages:m0020"].binding == {"requiredForRecovery": True}
    q = session("pending-question-text").by_id["pending-question-text:m0006"]
    assert q.binding == {"questionId": "pending-question-text:m0006.q"}
    sec = session("secrets-in-tool-output").by_id
    assert sec["secrets-in-tool-output:m0003"].sensitivity == "secret"
    assert sec["secrets-in-tool-output:m0002.c1"].sensitivity == "secret"  # whole group
    assert sec["secrets-in-tool-output:m0001"].sensitivity == "internal"


def test_followups_continue_the_sequence() -> None:
    s = session("two-successive-compactions")
    assert s.batches[0] == (0, 30) and s.batches[1][0] == 30
    assert "two-successive-compactions:m0030" in s.by_id


def test_missing_and_null_content() -> None:
    by = session("missing-content-key").by_id
    assert "missing-content-key:m0002" not in by  # no text: only its call
    assert by["missing-content-key:m0002.c1"].tool_role == "call"


def test_every_session_is_accepted_by_the_kernel_planner() -> None:
    for name, sc in corpus().items():
        canon = canonicalize(name, sc.input)
        if canon.session is None:
            continue
        sid = scope_id_of(name)
        plan = plan_context({
            "modelWindowTokens": 2_000_000, "reservedOutputTokens": 0,
            "items": [it.wire(sid) for it in canon.session.items], "sink": "provider.test",
            "scopeAdmissions": [{"scope": "session", "scopeId": sid}],
            "policyVersion": "p", "modelProfile": "m", "sessionHead": "h",
            "memoryRevision": 0, "now": "2026-08-20T12:00:00.000Z"}, profile="jcs")
        assert {d["reason"] for d in plan["dropped"]} <= {"sink_denied"}, name


def test_ide_items_and_chip_ids() -> None:
    ide = canonical_ide("ide-pin-remove-refresh", corpus()["ide-pin-remove-refresh"].input)
    assert [it.item_id for it in ide.items][:2] == ["ide-pin-remove-refresh:c0000",
                                                    "ide-pin-remove-refresh:c0001"]
    assert ide.budget == 300
    assert "ide-pin-remove-refresh:c0001" in ide.removed  # the active file
    pinned = {it.item_id for it in ide.items if it.pinned}
    assert pinned == {"ide-pin-remove-refresh:c0005", "ide-pin-remove-refresh:c0006"}
    assert chip_hash("selection", "ide.selection", "src/cart.ts:5-9") == "ctx_cc076d65cbb23830"
    win = canonical_ide("w", corpus()["ide-windows-paths-many-candidates"].input)
    assert win.budget == 32768 and len(win.rejected) == 14


def test_memory_commands_resolve_refs() -> None:
    cmds = memory_commands("memory-update-remove", corpus()["memory-update-remove"].input)
    assert cmds[0].op == "propose" and cmds[0].target == "memory-update-remove:op0000"
    assert cmds[2].op == "update" and cmds[2].target == "memory-update-remove:op0000"
    assert cmds[5].target.startswith("memory-update-remove:unknown:")
    assert cmds[7].op == "delete" and cmds[7].target == "memory-update-remove:op0001"


def test_drop_reason_vocabulary_contains_the_planner_reasons() -> None:
    from kernel.planning.drop_reasons import DROP_REASONS as PLANNER

    assert set(PLANNER) <= set(DROP_REASONS)
