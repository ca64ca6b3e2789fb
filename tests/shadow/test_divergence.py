"""Synthetic defects injected into COPIES of captures and of a recorded candidate give the
expected code, severity and attribution; benign changes add nothing above ``info``."""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shadow.candidate import KernelCandidate, RecordedCandidate, write_recorded
from shadow.divergence import Divergence
from shadow.errors import InputError
from shadow.fixtures import load_corpus
from shadow.replay import FixtureResult, replay_fixture

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"

Mutator = Callable[[Any], None]


def copy_fixture(tmp: Path, name: str, mutations: dict[str, Mutator] | None = None) -> Path:
    root = tmp / "fx"
    shutil.copytree(FIXTURES / name, root / name)
    for file, mutate in (mutations or {}).items():
        path = root / name / file
        doc = json.loads(path.read_text(encoding="utf-8"))
        mutate(doc)
        path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return root


def replay(root: Path, name: str, candidate: Any = None) -> FixtureResult:
    corpus = load_corpus(root, only=[name])
    assert not corpus.quarantined, corpus.quarantined
    return replay_fixture(corpus.scenarios[0], candidate or KernelCandidate())


@functools.cache
def original(name: str) -> FixtureResult:
    return replay(FIXTURES, name)


def find(divs: tuple[Divergence, ...], code: str, surface: str | None = None
         ) -> list[Divergence]:
    return [d for d in divs if d.reason_code == code and (surface is None or d.surface == surface)]


def above_info(r: FixtureResult) -> set[tuple[Any, ...]]:
    return {(d.surface, d.reason_code, d.severity, d.attribution, d.item_ids)
            for d in (*r.divergences, *r.legacy_defects) if d.severity != "info"}


# --------------------------------------------------------------------------- baseline copies

def _messages(doc: Any) -> list[Any]:
    return doc["output"]["messages"]  # type: ignore[no-any-return]


def test_removed_tool_result_in_a_capture_is_a_legacy_tool_pair_split(tmp_path: Path) -> None:
    def drop_result(doc: Any) -> None:
        msgs = _messages(doc)
        i = next(n for n, m in enumerate(msgs) if m["role"] == "tool")
        del msgs[i]

    root = copy_fixture(tmp_path, "parallel-tool-calls", {"cli.compress.json": drop_result})
    r = replay(root, "parallel-tool-calls")
    split = find(r.legacy_defects, "tool_pair.split", "cli.compress")
    assert split and split[0].attribution == "baseline" and split[0].severity == "major"
    assert "parallel-tool-calls:m0003" in split[0].item_ids
    missing = find(r.divergences, "item.missing_in_baseline", "cli.compress")
    assert any("parallel-tool-calls:m0003" in d.item_ids and d.attribution == "baseline"
               for d in missing)
    assert not find(original("parallel-tool-calls").legacy_defects, "tool_pair.split",
                    "cli.compress")


def test_dropped_pending_call_in_a_capture_is_a_legacy_pending_loss(tmp_path: Path) -> None:
    def drop_pending(doc: Any) -> None:
        _messages(doc)[-1].pop("tool_calls")

    root = copy_fixture(tmp_path, "pending-approval",
                        {"desktop.context-engineering.json": drop_pending})
    r = replay(root, "pending-approval")
    lost = find(r.legacy_defects, "pending.lost", "desktop.context-engineering")
    assert lost and lost[0].item_ids == ("pending-approval:m0008.c1",)
    assert lost[0].attribution == "baseline" and lost[0].severity == "major"
    assert not find(original("pending-approval").legacy_defects, "pending.lost",
                    "desktop.context-engineering")


def test_reordered_messages_in_a_capture_are_an_order_divergence(tmp_path: Path) -> None:
    def swap(doc: Any) -> None:
        msgs = _messages(doc)
        msgs[0], msgs[1] = msgs[1], msgs[0]

    root = copy_fixture(tmp_path, "short-session", {"desktop.compress.json": swap})
    r = replay(root, "short-session")
    order = find(r.divergences, "item.order", "desktop.compress")
    # the legacy rendered its input out of order: its own item.reordered defect explains it
    assert order and order[0].severity == "minor" and order[0].attribution == "baseline"
    assert order[0].detail["attribution_basis"] == ["baseline:item.reordered"]
    assert find(r.legacy_defects, "item.reordered", "desktop.compress")
    assert not find(original("short-session").divergences, "item.order")


def test_altered_content_in_a_capture_is_a_digest_mismatch(tmp_path: Path) -> None:
    def alter(doc: Any) -> None:
        _messages(doc)[1]["content"] = "a different question altogether"

    root = copy_fixture(tmp_path, "short-session", {"cli.compress.json": alter})
    r = replay(root, "short-session")
    dm = find(r.divergences, "digest.mismatch", "cli.compress")
    assert dm and dm[0].item_ids == ("short-session:m0001",)
    # a user message rewritten with no documented transformation: the legacy's defect
    assert dm[0].severity == "major" and dm[0].attribution == "baseline"
    assert dm[0].detail["altered"] == {"rewritten": 1}
    alt = find(r.legacy_defects, "alteration.unjustified", "cli.compress")
    assert alt and alt[0].item_ids == ("short-session:m0001",)
    assert alt[0].detail["why"] == ["no_claimed_transformation"]


def test_widened_memory_scope_in_a_capture_is_a_legacy_scope_expansion(tmp_path: Path) -> None:
    def widen(doc: Any) -> None:
        op = doc["output"]["ops"][0]
        op["result"]["scope"] = "global"

    root = copy_fixture(tmp_path, "memory-clear-scope", {"session-core.memory.json": widen})
    r = replay(root, "memory-clear-scope")
    exp = find(r.legacy_defects, "memory.scope_expanded")
    assert exp and "memory-clear-scope:op0000" in exp[0].item_ids
    assert exp[0].attribution == "baseline" and exp[0].severity == "major"
    pair = find(r.divergences, "memory.scope_expanded")
    assert pair and pair[0].attribution == "baseline"


def test_revived_deleted_memory_in_a_capture_is_a_legacy_backfill(tmp_path: Path) -> None:
    def revive(doc: Any) -> None:
        ops = doc["output"]["ops"]
        added = ops[1]["result"]
        ops[9]["result"] = dict(added)  # `get m2` after `remove m2` returns it again

    root = copy_fixture(tmp_path, "memory-update-remove", {"session-core.memory.json": revive})
    r = replay(root, "memory-update-remove")
    back = find(r.legacy_defects, "deletion.backfill")
    assert back and back[0].item_ids == ("memory-update-remove:op0001",)
    assert back[0].attribution == "baseline"


def test_provider_request_without_recording_is_a_blocking_side_effect(tmp_path: Path) -> None:
    def unrecord(doc: Any) -> None:
        doc["provider_responses"] = [r for r in doc["provider_responses"]
                                     if r["surface"] != "cli"]

    root = copy_fixture(tmp_path, "provider-summary-ok", {"input.json": unrecord})
    r = replay(root, "provider-summary-ok")
    side = find(r.divergences, "shadow.side_effect", "cli.provider-compaction")
    assert side and side[0].severity == "blocking" and side[0].attribution == "candidate"
    assert not find(original("provider-summary-ok").divergences, "shadow.side_effect")


# --------------------------------------------------------------------------- recorded candidate

def recorded(tmp: Path, name: str, surface: str, mutate: Callable[[Any], None]) -> Path:
    res = original(name)
    folder = tmp / "cand"
    write_recorded(folder, KernelCandidate().identity, res.candidate_projections)
    path = folder / name / f"{surface}.projection.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    mutate(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return folder


def _without(doc: Any, item_id: str) -> None:
    doc["items"] = [it for it in doc["items"] if it["id"] != item_id]


def test_recorded_candidate_unchanged_is_identical_to_live(tmp_path: Path) -> None:
    folder = recorded(tmp_path, "parallel-tool-calls", "cli.compress", lambda d: None)
    r = replay(FIXTURES, "parallel-tool-calls", RecordedCandidate(folder))
    assert r.divergences == original("parallel-tool-calls").divergences


def test_candidate_removing_a_tool_result_is_blocking(tmp_path: Path) -> None:
    folder = recorded(tmp_path, "parallel-tool-calls", "cli.compress",
                      lambda d: _without(d, "parallel-tool-calls:m0004"))
    r = replay(FIXTURES, "parallel-tool-calls", RecordedCandidate(folder))
    split = find(r.divergences, "tool_pair.split", "cli.compress")
    assert split and split[0].severity == "blocking" and split[0].attribution == "candidate"


def test_candidate_dropping_a_pending_call_is_blocking(tmp_path: Path) -> None:
    folder = recorded(tmp_path, "pending-approval", "desktop.context-engineering",
                      lambda d: _without(d, "pending-approval:m0008.c1"))
    r = replay(FIXTURES, "pending-approval", RecordedCandidate(folder))
    lost = find(r.divergences, "pending.lost", "desktop.context-engineering")
    assert lost and lost[0].severity == "blocking" and lost[0].attribution == "candidate"
    assert lost[0].item_ids == ("pending-approval:m0008.c1",)


def test_candidate_reordering_is_minor_and_result_before_call_is_blocking(
        tmp_path: Path) -> None:
    def swap_users(d: Any) -> None:
        d["items"][1], d["items"][2] = d["items"][2], d["items"][1]

    folder = recorded(tmp_path, "long-en-coding-session", "desktop.context-engineering",
                      swap_users)
    r = replay(FIXTURES, "long-en-coding-session", RecordedCandidate(folder))
    order = find(r.divergences, "item.order", "desktop.context-engineering")
    assert order and order[0].severity == "minor"

    def result_first(d: Any) -> None:
        ids = [it["id"] for it in d["items"]]
        i, j = ids.index("parallel-tool-calls:m0002.c1"), ids.index("parallel-tool-calls:m0004")
        d["items"][i], d["items"][j] = d["items"][j], d["items"][i]

    folder = recorded(tmp_path / "2", "parallel-tool-calls", "cli.compress", result_first)
    r = replay(FIXTURES, "parallel-tool-calls", RecordedCandidate(folder))
    mm = find(r.divergences, "tool_pair.mismatch", "cli.compress")
    assert mm and mm[0].severity == "blocking" and mm[0].attribution == "candidate"


def test_candidate_altering_content_is_a_digest_mismatch_and_pinned_altered(
        tmp_path: Path) -> None:
    def alter(d: Any) -> None:
        for it in d["items"]:
            if it["id"] in ("pinned-messages:m0001", "pinned-messages:m0003"):
                it["digest"] = "sha256:" + "0" * 64

    folder = recorded(tmp_path, "pinned-messages", "cli.compress", alter)
    r = replay(FIXTURES, "pinned-messages", RecordedCandidate(folder))
    dm = find(r.divergences, "digest.mismatch", "cli.compress")
    assert dm and "pinned-messages:m0001" in dm[0].item_ids
    pinned = find(r.divergences, "pinned.altered", "cli.compress")
    # a broken §8.3 protection by the candidate blocks (design 108 §7, §8.3; issue 12)
    assert pinned and pinned[0].attribution == "candidate" and pinned[0].severity == "blocking"
    altered = find(r.divergences, "alteration.unjustified", "cli.compress")
    assert altered and altered[0].item_ids == ("pinned-messages:m0003",)


def test_candidate_widening_a_memory_scope_is_blocking(tmp_path: Path) -> None:
    def widen(d: Any) -> None:
        d["memory"]["records"][0]["scope"] = "global"

    folder = recorded(tmp_path, "memory-clear-scope", "session-core.memory", widen)
    r = replay(FIXTURES, "memory-clear-scope", RecordedCandidate(folder))
    exp = [d for d in find(r.divergences, "memory.scope_expanded")
           if d.attribution == "candidate"]
    assert exp and all(d.severity == "blocking" for d in exp)


def test_candidate_reviving_a_deleted_memory_is_blocking(tmp_path: Path) -> None:
    def revive(d: Any) -> None:
        for rec in d["memory"]["records"]:
            if rec["state"] == "deleted":
                rec["state"] = "active"
                break

    folder = recorded(tmp_path, "memory-update-remove", "session-core.memory", revive)
    r = replay(FIXTURES, "memory-update-remove", RecordedCandidate(folder))
    back = find(r.divergences, "deletion.backfill")
    assert back and back[0].severity == "blocking" and back[0].attribution == "candidate"


def test_candidate_unrecorded_provider_request_and_write_are_blocking(tmp_path: Path) -> None:
    def request(d: Any) -> None:
        d["side_effects"] = [{"kind": "provider_request", "target": "cli:x#2",
                              "recorded": False}]

    folder = recorded(tmp_path, "provider-summary-ok", "cli.provider-compaction", request)
    r = replay(FIXTURES, "provider-summary-ok", RecordedCandidate(folder))
    side = find(r.divergences, "shadow.side_effect", "cli.provider-compaction")
    assert side and side[0].severity == "blocking" and side[0].attribution == "candidate"

    def write(d: Any) -> None:
        d["writers"] = ["kernel:session-port"]

    folder = recorded(tmp_path / "w", "provider-summary-ok", "cli.jsonl-session", write)
    r = replay(FIXTURES, "provider-summary-ok", RecordedCandidate(folder))
    side = find(r.divergences, "shadow.side_effect", "cli.jsonl-session")
    assert side and side[0].severity == "blocking"


def test_missing_recorded_projection_is_refused_naming_the_file(tmp_path: Path) -> None:
    folder = recorded(tmp_path, "short-session", "cli.compress", lambda d: None)
    missing = folder / "short-session" / "cli.compress.projection.json"
    missing.unlink()
    with pytest.raises(InputError) as err:
        replay(FIXTURES, "short-session", RecordedCandidate(folder))
    assert err.value.source == str(missing)


def test_malformed_recorded_projection_is_refused_with_its_pointer(tmp_path: Path) -> None:
    def bad(d: Any) -> None:
        d["items"][1]["length"] = "12"

    folder = recorded(tmp_path, "short-session", "cli.compress", bad)
    with pytest.raises(InputError) as err:
        replay(FIXTURES, "short-session", RecordedCandidate(folder))
    assert err.value.pointer == "/items/1/length"
    assert "non-negative integer" in str(err.value)


# --------------------------------------------------------------------------- benign changes

def _reverse_keys(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _reverse_keys(v[k]) for k in reversed(list(v))}
    if isinstance(v, list):
        return [_reverse_keys(x) for x in v]
    return v


def test_benign_changes_add_nothing_above_info(tmp_path: Path) -> None:
    def desktop(doc: Any) -> None:
        out = doc["output"]
        out["processingTime"] = 17
        out["compressedTokens"] += 5
        out["originalTokens"] += 3
        out["messages"][-1]["content"] = out["messages"][-1]["content"] + "  \n"

    def cli(doc: Any) -> None:
        stats = doc["output"]["stats"]
        stats["compressedTokens"] += 9
        stats["ratio"] = 0.5
        doc["diagnostics"]["resolved_thresholds"]["maxTokens"] = 1

    def jsonl(doc: Any) -> None:
        doc["output"]["session_file"] = doc["output"]["session_file"].replace("/", "\\")

    root = copy_fixture(tmp_path, "pending-approval", {
        "desktop.compress.json": desktop, "cli.compress.json": cli,
        "cli.jsonl-session.json": jsonl})
    for path in (root / "pending-approval").glob("*.json"):  # key order and JSON whitespace
        doc = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps(_reverse_keys(doc), indent=4, ensure_ascii=True),
                        encoding="utf-8")
    changed = replay(root, "pending-approval")
    assert above_info(changed) == above_info(original("pending-approval"))
    ws = [d for d in changed.divergences if d.detail.get("field") == "whitespace"]
    assert ws and all(d.severity == "info" for d in ws)

    def ide(doc: Any) -> None:
        for chip in doc["output"]["chips"]:
            chip["estimatedTokens"] += 1
            chip["label"] = chip["label"].replace("\\", "/")
            chip["scope"] = chip["scope"].replace("\\", "/")
            chip["freshness"]["capturedAt"] = "2030-01-01T00:00:00.000Z"

    root = copy_fixture(tmp_path / "ide", "ide-windows-paths-many-candidates",
                        {"jetbrains.context-center.json": ide})
    changed = replay(root, "ide-windows-paths-many-candidates")
    assert above_info(changed) == above_info(original("ide-windows-paths-many-candidates"))
    assert find(changed.divergences, "noise.token_estimate")
    assert find(changed.divergences, "noise.path_format")
