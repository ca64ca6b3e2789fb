"""The kernel candidate of the JSONL session store when nothing may be committed: a
cancelled compaction, and a second writer racing the compact commit (issue 15's new
provider-cancelled-long-session and session-store-cas-race captures)."""

from __future__ import annotations

from shadow.candidate import AdvancingPort, _kernel_cas_commits
from shadow.canonical import CanonItem, headless_persisted
from shadow.projection import Projection
from tests.shadow._mutate import live

JSONL = "cli.jsonl-session"


def _jsonl(name: str) -> Projection:
    return next(p for p in live(name).candidate_projections if p.surface == JSONL)


def _baseline_codes(name: str) -> set[str]:
    return {d.reason_code for d in live(name).divergences
            if d.surface == JSONL and d.attribution in ("candidate", "both")}


def test_a_cancelled_compaction_leaves_the_whole_history_in_the_store() -> None:
    p = _jsonl("provider-cancelled-long-session")
    assert p.status == "ok" and p.facts["settlement"] == "aborted"
    assert p.provider is not None and p.provider.cancelled  # the cancel is not swallowed
    assert {d.reason for d in p.dropped} <= {"not_persisted"}
    assert "outcome.error_mismatch" not in {d.reason_code for d in live(
        "provider-cancelled-long-session").divergences if d.surface == JSONL}


def test_the_kernel_cas_refuses_a_commit_on_a_moved_head() -> None:
    assert _kernel_cas_commits() is False
    port = AdvancingPort(advance_to=None)  # no second writer: the same commit goes through
    port.seed("race", head="head:read", memory_revision=0, items=[])
    snap = port.read_snapshot("race")
    assert snap is not None
    assert port.append_compaction({"sessionId": "race", "operationId": "op"}, snap.head).ok


def test_a_raced_compact_commit_leaves_the_history_unchanged() -> None:
    p = _jsonl("session-store-cas-race")
    assert p.facts["settlement"] == "stale" and p.writers == ()
    assert not [it for it in p.items if it.origin == "derived"]  # no summary committed
    assert {d.reason for d in p.dropped} <= {"not_persisted"}
    assert not _baseline_codes("session-store-cas-race") & {"item.missing_in_candidate"}


def test_nothing_committed_means_both_sides_read_the_stores_turn_projection() -> None:
    for name in ("provider-cancelled-long-session", "session-store-cas-race"):
        against = [d for d in live(name).divergences if d.surface == JSONL
                   and d.attribution in ("candidate", "both", "none")
                   and d.severity in ("major", "blocking")]
        assert against == [], name


def test_the_turn_projection_keeps_users_and_each_turns_last_plain_text() -> None:
    def item(mid: str, role: str, content: str = "x", tool: str | None = None,
             **detail: str) -> CanonItem:
        return CanonItem(item_id=mid, kind="message", seq=0, role=role, content=content,
                         digest="", trust="user", sensitivity="internal",
                         legacy_tool_id=tool, detail=detail)
    items = [item("m0", "system"), item("m1", "user"), item("m2", "assistant", "thinking"),
             item("m3", "assistant", "calling"), item("m3.c1", "assistant", tool="t1"),
             item("m4", "tool", tool="t1"), item("m5", "assistant", "done"),
             item("m6", "assistant", ""), item("m7", "user"), item("m8", "system", prior="s")]
    assert headless_persisted(items) == {"m1", "m5", "m7", "m8"}
