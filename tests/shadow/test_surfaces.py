"""Surface adapters: native legacy output -> canonical projection."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from shadow.canonical import canonicalize
from shadow.fixtures import load_corpus
from shadow.projection import Projection, dumps, from_wire
from shadow.surfaces import ADAPTERS, adapter_for

ROOT = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=1)
def corpus():  # type: ignore[no-untyped-def]
    return {s.name: s for s in load_corpus(ROOT / "fixtures").scenarios}


def project(name: str, capture: str) -> Projection:
    s = corpus()[name]
    cap = next(c for c in s.captures if c.name == capture)
    return adapter_for(capture)(canonicalize(name, s.input), cap)  # type: ignore[misc]


def ids(p: Projection) -> list[str]:
    return [it.id.split(":", 1)[-1] for it in p.items]


def test_registry_covers_every_manifest_file() -> None:
    manifest = json.loads((ROOT / "fixtures" / "MANIFEST.json").read_text(encoding="utf-8"))
    for file in manifest["files"]:
        if file != "input.json":
            assert adapter_for(file.removesuffix(".json")) is not None, file
    assert adapter_for("cli.compress.some-new-variant") is ADAPTERS["cli.compress"]
    assert adapter_for("unknown.thing") is None


@pytest.mark.parametrize("name", ["parallel-tool-calls", "secrets-in-tool-output",
                                  "ide-duplicate-identity", "memory-consolidate-trace"])
def test_every_capture_projects_and_round_trips(name: str) -> None:
    s = corpus()[name]
    canon = canonicalize(name, s.input)
    for cap in s.captures:
        p = adapter_for(cap.name)(canon, cap)  # type: ignore[misc]
        assert p.producer == "baseline" and p.surface == cap.name
        back = from_wire(json.loads(dumps(p)))
        assert dumps(back) == dumps(p)
        assert back.output_digest == p.output_digest


def test_cli_compress_exact_matching_and_inferred_drops() -> None:
    p = project("parallel-tool-calls", "cli.compress")
    assert ids(p)[:5] == ["m0000", "m0001", "m0002", "m0002.c1", "m0002.c2"]
    assert all(it.origin == "input" for it in p.items)
    drops = {d.id.split(":")[1]: (d.reason, d.legacy_reason) for d in p.dropped}
    assert drops["m0011.c1"] == ("duplicate", "dedup")  # content:null deduped with its call
    assert drops["m0012"] == ("tool_pair_repair", "tool-pair-repair")


def test_collapse_marker_and_summary_are_derived_items() -> None:
    p = project("flags-snip-collapse", "cli.compress")
    marker = [it for it in p.items if it.origin == "derived"]
    assert [it.kind for it in marker] == ["collapse-marker"]
    assert marker[0].covers and all(d.reason == "collapsed" for d in p.dropped
                                    if d.id in marker[0].covers)
    s = project("provider-summary-ok", "cli.provider-compaction")
    summary = next(it for it in s.items if it.origin == "derived")
    assert summary.kind == "summary" and summary.role == "system"
    assert summary.detail["format"] == "structured" and len(summary.detail["fields"]) == 9
    assert s.provider is not None and s.provider.status == "committed"
    assert s.provider.usage == "known" and s.provider.truth == "ok"


def test_provider_outcomes_are_read_from_native_fields() -> None:
    fail = project("provider-failure", "cli.provider-compaction").provider
    assert fail and fail.degraded is True and fail.degraded_reason == "llm_query_failed"
    assert fail.usage == "unknown" and fail.truth == "error"
    cancel = project("provider-cancelled", "cli.provider-compaction")
    assert cancel.status == "error" and cancel.error == "AbortError"
    assert cancel.provider and cancel.provider.status == "aborted" and cancel.provider.cancelled
    desk = project("provider-cancelled", "desktop.compress")
    assert desk.status == "ok" and desk.provider and desk.provider.truth == "cancelled"


def test_context_engineering_cleaned_prompt_and_stripped_ids() -> None:
    p = project("parallel-tool-calls", "desktop.context-engineering")
    first = p.items[0]
    assert first.id == "parallel-tool-calls:m0000" and first.altered == "cleaned"
    results = [it for it in p.items if it.tool_role == "result"]
    assert results and all(it.detail.get("binding_lost") for it in results)
    assert p.facts["match"]["id-stripped"] == len(results)


def test_calls_stripped_pending_call_is_detected() -> None:
    p = project("pending-approval", "cli.compress")
    assert "m0008" in ids(p) and "m0008.c1" not in ids(p)


def test_jsonl_session_projection() -> None:
    p = project("provider-summary-ok", "cli.jsonl-session")
    assert p.facts["chain"] == "verified" and p.facts["replay"] == "consistent"
    assert p.writers == ("legacy:jsonl-session-store",)
    assert {d.reason for d in p.dropped if d.id.endswith("m0000")} == {"not_persisted"}
    assert [it.kind for it in p.items] == ["summary", "message"]
    multi = project("two-successive-compactions", "cli.jsonl-session")
    assert multi.facts["replay"] == "consistent"


def test_two_call_capture_chains_derived_items() -> None:
    p = project("two-successive-compactions", "cli.provider-compaction")
    assert any(d.id == "~c1.summary.1" and d.reason == "summarized" for d in p.dropped)
    assert "two-successive-compactions:m0030" in p.input_ids


def test_ide_twins_map_chips_back_to_candidates() -> None:
    v = project("ide-duplicate-identity", "vscode.context-center")
    j = project("ide-duplicate-identity", "jetbrains.context-center")
    assert ids(v) == ["c0000", "c0002", "c0003"]
    assert ids(j) == ["c0001", "c0002", "c0003"]  # JetBrains kept the other duplicate
    z = project("ide-budget-zero", "vscode.context-center")
    pinned = [d for d in z.dropped if d.protected]
    assert pinned and pinned[0].reason == "input_budget" and pinned[0].legacy_reason == \
        "budget-exhausted"
    t = project("ide-selection-file-diagnostics-budget", "vscode.context-center")
    assert [it.altered for it in t.items] == [None, "trimmed"]


def test_memory_projection_maps_legacy_ids() -> None:
    p = project("memory-update-remove", "session-core.memory")
    assert p.memory is not None
    ops = {o.index: o for o in p.memory.ops}
    assert ops[0].created == ("memory-update-remove:op0000",)
    assert ops[7].deleted == ("memory-update-remove:op0001",)
    assert ops[8].status == "noop" and ops[4].status == "error" and ops[4].error == "Error"
    c = project("memory-consolidate-trace", "session-core.memory")
    created = {o.index: o.created for o in c.memory.ops}  # type: ignore[union-attr]
    assert "memory-consolidate-trace:op0011.t0001" in created[11]


def test_projection_json_holds_no_message_body() -> None:
    s = corpus()["secrets-in-tool-output"]
    canon = canonicalize(s.name, s.input)
    texts = [m.get("content") for m in s.input["messages"] if isinstance(m.get("content"), str)]
    for cap in s.captures:
        blob = dumps(adapter_for(cap.name)(canon, cap))  # type: ignore[misc]
        for t in texts:
            if len(t) > 12:
                assert t not in blob
        assert "sk-proj" not in blob and "hunter2" not in blob


def test_an_output_no_adapter_rule_explains_is_unclassified_not_a_crash(tmp_path: Path) -> None:
    import dataclasses
    import shutil

    from shadow.candidate import KernelCandidate
    from shadow.replay import replay_fixture

    shutil.copytree(ROOT / "fixtures" / "short-session", tmp_path / "short-session")
    path = tmp_path / "short-session" / "desktop.compress.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["output"] = {"messages": "not a list", "strategy": 7}
    path.write_text(json.dumps(doc), encoding="utf-8")
    corpus = load_corpus(tmp_path)  # on disk: the output's shape is checked, quarantined
    assert corpus.scenarios == ()
    assert [(q.source, q.pointer) for q in corpus.quarantined] == [
        ("short-session/desktop.compress.json", "/output/messages")]
    # a shape that passes the loader but that no adapter rule explains is still a finding
    s = load_corpus(ROOT / "fixtures", only=["short-session"]).scenarios[0]
    caps = tuple(dataclasses.replace(c, output=doc["output"]) if c.name == "desktop.compress"
                 else c for c in s.captures)
    r = replay_fixture(dataclasses.replace(s, captures=caps), KernelCandidate())
    assert r.comparisons >= 1
    assert all(d.reason_code in ("unclassified", "item.missing_in_baseline",
                                 "noise.token_estimate", "noise.volatile_field")
               or d.surface != "desktop.compress" for d in r.divergences)
