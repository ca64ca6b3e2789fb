"""The conflict relation (``kernel.memory.conflicts``), its recording by
``MemoryKernel.resolve_supersession`` and its display by recall (design 108 §9.3, §10):
an unresolved conflict keeps both records and recall shows it — never last write wins."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.adapters.in_memory.memory_store import InMemoryMemoryPort
from kernel.canonical import digest as kernel_digest
from kernel.canonical.records import normalize_memory_record
from kernel.canonical.timestamps import iso_to_epoch_ms
from kernel.errors import DigestMismatch, InvalidArgument, KernelError, LegacyWriterFenced
from kernel.memory.conflicts import (
    CONFLICT_RULE,
    conflict_id_for,
    conflict_partners,
    parse_conflict,
    record_conflict,
)
from kernel.memory.recall import (
    RECALL_DOMAIN,
    RecordIndex,
    build_index,
    rank_memory_records,
    recall_memory,
)
from kernel.memory.service import MemoryKernel
from tests.kernel.recall_port import ListPort
from tests.kernel.test_memory_lifecycle import Clock, Ids, apply, make
from tests.kernel.test_recall import scenarios

OBSERVED = "2026-08-28T00:00:00Z"
AT = "2026-08-30T00:00:00.000Z"
RECALL = {
    "query": "monorepo",
    "sink": "cli",
    "scopeAdmissions": [{"scope": "project", "scopeId": "project-1"}],
    "limit": 10,
    "tokenBudget": 4096,
    "now": "2026-09-01T00:00:00Z",
}


def live(memory_id: str, source: str = "auto-extract", **kw: Any) -> dict[str, Any]:
    observed = kw.pop("observed", OBSERVED)
    record = make(
        memoryId=memory_id,
        provenance={"source": source, "observedAt": observed},
        content=kw.pop("content", f"{memory_id} uses the monorepo layout"),
        **kw,
    )
    result: dict[str, Any] = apply(record, type="activate", expectedRevision=1).record
    return result


def kernel_with(*records: dict[str, Any], **kw: Any) -> tuple[MemoryKernel, InMemoryMemoryPort]:
    port = InMemoryMemoryPort(records)
    return MemoryKernel(memory_port=port, clock=Clock(), new_id=Ids(), **kw), port


def recall_both_paths(port: Any, request: dict[str, Any] = RECALL) -> dict[str, Any]:
    """Recall over the scan and over an index; the two must be identical."""
    scan = recall_memory(port, request)
    holder = RecordIndex("canonical", build_index(port.records(), watermark=port.store_revision()))
    indexed = recall_memory(port, request, index=holder)
    assert (scan.path, indexed.path, indexed.degraded) == ("scan", "index", None)
    assert scan.result == indexed.result
    return scan.result


def shown(result: dict[str, Any]) -> dict[str, list[str] | None]:
    return {h["memoryId"]: h.get("conflictsWith") for h in result["results"]}


def without_conflicts(result: dict[str, Any]) -> dict[str, Any]:
    hits = [{k: v for k, v in h.items() if k != "conflictsWith"} for h in result["results"]]
    return {**result, "results": hits}


def redigest(result: dict[str, Any]) -> str:
    body = {k: v for k, v in result.items() if k not in ("digest", "memoryRevision")}
    return kernel_digest.digest(body, RECALL_DOMAIN, "peer")


# --------------------------------------------------------------------------- the value type


def test_conflict_entry_is_canonical_and_verified() -> None:
    a, b = live("mem-b"), live("mem-a")
    conflict = record_conflict(a, b, at=AT, operation_id="op-1", reason="both observed")
    assert conflict.memory_ids == ("mem-a", "mem-b")  # sorted, whatever the argument order
    assert conflict.record_digests == (b["digest"], a["digest"])
    assert (
        conflict.conflict_id
        == conflict_id_for("mem-b", "mem-a")
        == conflict_id_for("mem-a", "mem-b")
    )
    assert record_conflict(b, a, at=AT, operation_id="op-1", reason="both observed") == conflict
    wire = conflict.to_wire()
    assert wire["rule"] == CONFLICT_RULE == "unresolved"
    assert (wire["scope"], wire["scopeId"], wire["recordedAt"]) == ("project", "project-1", AT)
    assert parse_conflict(wire) == conflict
    assert conflict.other("mem-a") == "mem-b" and conflict.other("mem-b") == "mem-a"
    with pytest.raises(DigestMismatch):
        parse_conflict({**wire, "operationId": "op-2"})
    for bad in (
        {**wire, "memoryIds": ["mem-b", "mem-a"]},  # unsorted
        {**wire, "memoryIds": ["mem-a", "mem-a"]},
        {**wire, "memoryIds": ["mem-a"]},
        {**wire, "rule": "user_correction"},  # the relation holds unresolved conflicts only
        {**wire, "extra": 1},
        {**wire, "conflictId": conflict_id_for("mem-a", "mem-c")},
    ):
        with pytest.raises(KernelError):
            parse_conflict(bad)


def test_only_records_of_one_scope_conflict() -> None:
    with pytest.raises(InvalidArgument, match="one scope"):
        record_conflict(live("mem-a"), live("mem-b", scopeId="project-2"), at=AT, operation_id="o")
    global_pair = record_conflict(
        live("mem-a", scope="global", scopeId=None),
        live("mem-b", scope="global", scopeId=None),
        at=AT,
        operation_id="o",
    )
    assert "scopeId" not in global_pair.to_wire()
    assert parse_conflict(global_pair.to_wire()) == global_pair


def test_partners_are_filtered_by_the_callers_visibility() -> None:
    a, b, c = live("mem-a"), live("mem-b"), live("mem-c")
    entries = [
        record_conflict(a, b, at=AT, operation_id="o"),
        record_conflict(a, c, at=AT, operation_id="o"),
    ]
    assert conflict_partners(entries, ["mem-a", "mem-b"], lambda _: True) == {
        "mem-a": ["mem-b", "mem-c"],
        "mem-b": ["mem-a"],
    }
    hidden_c = conflict_partners(entries, ["mem-a", "mem-c"], lambda m: m != "mem-c")
    assert hidden_c == {"mem-a": ["mem-b"], "mem-c": ["mem-a"]}  # mem-c is never named
    assert conflict_partners(entries, ["mem-b"], lambda m: m != "mem-a") == {}  # absent, not []
    assert conflict_partners(entries, ["mem-x"], lambda _: True) == {}


# --------------------------------------------------------------------------- the kernel


def test_equal_authority_same_observation_keeps_both_and_recall_shows_it() -> None:
    a = live("mem-a", content="Use pnpm in the monorepo")
    b = live("mem-b", content="Use npm in the monorepo")
    kernel, port = kernel_with(a, b)
    before = recall_both_paths(port)
    assert shown(before) == {"mem-a": None, "mem-b": None}  # no conflict: field absent
    revision = port.store_revision()

    out = kernel.resolve_supersession({"memoryIds": ["mem-b", "mem-a"], "operationId": "op-1"})
    assert out["decision"] == {"outcome": "conflict", "rule": "unresolved"}
    assert out["recorded"] is True and out["operationId"] == "op-1"
    entry = parse_conflict(out["conflict"])
    assert entry.memory_ids == ("mem-a", "mem-b") and entry.operation_id == "op-1"
    assert port.conflicts() == [out["conflict"]]
    assert port.store_revision() == revision  # no record changed
    assert {r["memoryId"]: r["state"] for r in port.records()} == {
        "mem-a": "active",
        "mem-b": "active",
    }

    after = recall_both_paths(port)
    assert shown(after) == {"mem-a": ["mem-b"], "mem-b": ["mem-a"]}  # both stay, both say so
    assert after["digest"] == redigest(after) != before["digest"]  # the digest covers the field
    assert redigest(without_conflicts(after)) == before["digest"]  # nothing else changed
    assert kernel.recall_memory(RECALL)["results"] == after["results"]

    again = kernel.resolve_supersession({"memoryIds": ["mem-a", "mem-b"], "at": AT})
    assert again["recorded"] is False and again["conflict"] == out["conflict"]  # first stays
    assert again["operationId"].startswith("resolve-")
    assert len(port.conflicts()) == 1


def test_peer_profile_and_list_ranking_never_show_conflicts() -> None:
    a, b = live("mem-a"), live("mem-b")
    kernel, port = kernel_with(a, b)
    kernel.resolve_supersession({"memoryIds": ["mem-a", "mem-b"]})
    peer = recall_memory(port, RECALL, profile="peer").result
    assert all("conflictsWith" not in h for h in peer["results"]) and len(peer["results"]) == 2
    assert shown(rank_memory_records([a, b], RECALL, profile="canonical")) == {
        "mem-a": None,
        "mem-b": None,
    }


@pytest.mark.parametrize(
    "first,second,request_extra,winner,rule",
    [
        ({"source": "auto-extract"}, {"source": "user-correction"}, {}, "mem-b", "user_correction"),
        ({}, {}, {"userCorrection": "mem-a"}, "mem-a", "user_correction"),
        ({"source": "explicit-user-memory"}, {}, {}, "mem-a", "source_authority"),
        ({}, {"observed": "2026-08-28T00:00:01Z"}, {}, "mem-b", "observed_later"),
    ],
)
def test_a_decidable_pair_supersedes_the_loser_and_recall_hides_it(
    first: dict[str, Any],
    second: dict[str, Any],
    request_extra: dict[str, Any],
    winner: str,
    rule: str,
) -> None:
    kernel, port = kernel_with(live("mem-a", **first), live("mem-b", **second))
    out = kernel.resolve_supersession(
        {
            "memoryIds": ["mem-a", "mem-b"],
            "reason": "user chose",
            "authority": "user-1",
            **request_extra,
        }
    )
    loser = "mem-b" if winner == "mem-a" else "mem-a"
    assert out["decision"] == {
        "outcome": "supersede",
        "rule": rule,
        "winner": winner,
        "loser": loser,
    }
    superseded = out["superseded"]
    assert superseded["record"]["memoryId"] == loser
    assert superseded["record"]["state"] == "superseded"
    assert superseded["event"]["successorMemoryId"] == winner
    assert superseded["event"]["reason"] == "user chose"
    assert superseded["receipt"]["storeRevision"] == port.store_revision()
    assert port.conflicts() == []
    assert shown(recall_both_paths(port)) == {winner: None}


def test_different_scopes_are_independent_and_nothing_is_written() -> None:
    kernel, port = kernel_with(live("mem-a"), live("mem-b", scope="user", scopeId="user-1"))
    revision = port.store_revision()
    out = kernel.resolve_supersession({"memoryIds": ["mem-a", "mem-b"]})
    assert out["decision"] == {"outcome": "independent", "rule": "different_scope"}
    assert "conflict" not in out and "superseded" not in out
    assert port.conflicts() == [] and port.store_revision() == revision


def test_a_later_user_correction_ends_the_conflict() -> None:
    kernel, port = kernel_with(live("mem-a"), live("mem-b"))
    recorded = kernel.resolve_supersession({"memoryIds": ["mem-a", "mem-b"]})["conflict"]
    out = kernel.resolve_supersession({"memoryIds": ["mem-a", "mem-b"], "userCorrection": "mem-b"})
    assert out["decision"]["rule"] == "user_correction"
    assert port.conflicts() == [recorded]  # append-only: the entry stays, no longer live
    assert shown(recall_both_paths(port)) == {"mem-b": None}


def test_partner_another_request_could_not_see_is_never_named() -> None:
    cli_only = live("mem-a", allowedSinks=["cli"])
    remote_only = live("mem-b", allowedSinks=["provider.remote"])
    expiring = live(
        "mem-c", retentionPolicy={"mode": "until_expired", "expiresAt": "2026-08-31T00:00:00Z"}
    )
    off_topic = live("mem-d", content="Tabs, not spaces")  # visible, but matches no query word
    kernel, port = kernel_with(cli_only, remote_only, expiring, off_topic)
    for other in ("mem-b", "mem-c", "mem-d"):
        kernel.resolve_supersession({"memoryIds": ["mem-a", other]})
    assert len(port.conflicts()) == 3
    # mem-b: another sink; mem-c: expired at `now`; mem-d: recallable by this request
    assert shown(recall_both_paths(port)) == {"mem-a": ["mem-d"]}
    remote = recall_both_paths(port, {**RECALL, "sink": "provider.remote"})
    assert shown(remote) == {"mem-b": None}  # mem-a is cli-only: not named to this sink
    early = recall_both_paths(port, {**RECALL, "now": "2026-08-30T00:00:00Z"})
    assert shown(early) == {"mem-a": ["mem-c", "mem-d"], "mem-c": ["mem-a"]}
    assert (
        shown(
            recall_both_paths(
                port, {**RECALL, "scopeAdmissions": [{"scope": "project", "scopeId": "project-2"}]}
            )
        )
        == {}
    )


@pytest.mark.parametrize("ending", ["delete", "supersede", "archive", "expire"])
def test_the_conflict_stops_showing_once_one_side_leaves(ending: str) -> None:
    kernel, port = kernel_with(live("mem-a"), live("mem-b"))
    kernel.resolve_supersession({"memoryIds": ["mem-a", "mem-b"]})
    assert shown(recall_both_paths(port)) == {"mem-a": ["mem-b"], "mem-b": ["mem-a"]}
    if ending == "delete":
        receipt = kernel.delete_memory(
            {
                "requestId": "del-1",
                "subject": "user-1",
                "scope": "project",
                "scopeId": "project-1",
                "selector": "memory:mem-b",
                "memoryId": "mem-b",
                "expectedRevision": 2,
                "fence": "fence-1",
                "authority": "user-1",
            }
        )
        assert receipt["status"] == "purged"
    else:
        command: dict[str, Any] = {"memoryId": "mem-b", "type": ending, "expectedRevision": 2}
        if ending == "supersede":
            command["successorMemoryId"] = "mem-elsewhere"  # not in this store: by id
        kernel.decide_memory(command)
    assert shown(recall_both_paths(port)) == {"mem-a": None}
    if ending == "archive":  # derived, not erased: re-activation revives the open conflict
        kernel.decide_memory({"memoryId": "mem-b", "type": "activate", "expectedRevision": 3})
        assert shown(recall_both_paths(port)) == {"mem-a": ["mem-b"], "mem-b": ["mem-a"]}


def test_a_recorded_conflict_caps_reinforcement() -> None:
    kernel, _ = kernel_with(live("mem-a", confidence=0.5), live("mem-b", confidence=0.6))
    kernel.resolve_supersession({"memoryIds": ["mem-a", "mem-b"]})
    out = kernel.decide_memory(
        {"memoryId": "mem-a", "type": "reinforce", "expectedRevision": 2, "confidenceDelta": 0.3}
    )
    assert out["record"]["confidence"] == 0.6  # repetition cannot out-vote the other source
    free, _ = kernel_with(live("mem-a", confidence=0.5), live("mem-b", confidence=0.6))
    out = free.decide_memory(
        {"memoryId": "mem-a", "type": "reinforce", "expectedRevision": 2, "confidenceDelta": 0.3}
    )
    assert out["record"]["confidence"] == 0.8


@pytest.mark.parametrize(
    "request_,code,message",
    [
        ({"memoryIds": ["mem-a"]}, "invalid_argument", "exactly two"),
        ({"memoryIds": "mem-a,mem-b"}, "invalid_argument", "exactly two"),
        ({"memoryIds": ["mem-a", "mem-a"]}, "invalid_argument", "itself"),
        ({"memoryIds": ["mem-a", "mem-x"]}, "invalid_argument", "does not exist"),
        ({"memoryIds": ["mem-a", "mem-c"]}, "invalid_argument", "only active"),
        (
            {"memoryIds": ["mem-a", "mem-b"], "userCorrection": "mem-c"},
            "invalid_argument",
            "one of memoryIds",
        ),
        ({"memoryIds": ["mem-a", "mem-b"], "winner": "mem-a"}, "invalid_argument", "unknown"),
        ({"memoryIds": ["mem-a", "mem-b"], "at": "yesterday"}, "invalid_argument", "at"),
    ],
)
def test_resolution_refusals(request_: dict[str, Any], code: str, message: str) -> None:
    candidate = make(memoryId="mem-c")
    kernel, port = kernel_with(live("mem-a"), live("mem-b"), candidate)
    with pytest.raises(KernelError, match=message) as info:
        kernel.resolve_supersession(request_)
    assert info.value.code == code
    assert port.conflicts() == [] and port.store_revision() == 3


def test_resolution_is_a_mutation_behind_the_authority_gate() -> None:
    kernel, port = kernel_with(live("mem-a"), live("mem-b"), mode="shadow")
    with pytest.raises(LegacyWriterFenced):
        kernel.resolve_supersession({"memoryIds": ["mem-a", "mem-b"]})
    assert port.conflicts() == []


def test_conflicts_survive_a_snapshot_and_are_verified_on_load() -> None:
    kernel, port = kernel_with(live("mem-a"), live("mem-b"))
    kernel.resolve_supersession({"memoryIds": ["mem-a", "mem-b"]})
    snapshot = port.snapshot()
    copy = InMemoryMemoryPort.from_snapshot(snapshot)
    assert copy.conflicts() == port.conflicts() and recall_both_paths(copy) == recall_both_paths(
        port
    )
    assert "conflicts" not in InMemoryMemoryPort().snapshot()  # absent when empty
    tampered = {**snapshot, "conflicts": [{**snapshot["conflicts"][0], "recordedAt": AT}]}
    with pytest.raises(DigestMismatch):
        InMemoryMemoryPort.from_snapshot(tampered)


# --------------------------------------------------------------------------- the property


def _recallable_by(record: dict[str, Any], request: dict[str, Any]) -> bool:
    expires = record["retentionPolicy"].get("expiresAt")
    admitted = {(a["scope"], a.get("scopeId")) for a in request["scopeAdmissions"]}
    return (
        record["state"] in ("active", "reinforced")
        and (expires is None or iso_to_epoch_ms(expires) > iso_to_epoch_ms(request["now"]))
        and (record["scope"], record.get("scopeId")) in admitted
        and ("*" in record["allowedSinks"] or request["sink"] in record["allowedSinks"])
    )


SCOPES = [("project", "p1"), ("project", "p2")]
WORDS = ["deploy", "needle", "rate_limit", "数据库", "café"]
EXPIRIES = [None, None, None, "2026-09-16T00:00:00.000Z", "2026-10-01T00:00:00.000Z"]
NOW = "2026-09-17T00:00:00.000Z"


@st.composite
def crowded(draw: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Few scopes and words, mostly live records: conflicts between returned hits and
    partners hidden by state, expiry, scope or sink are all common."""
    records = []
    for i in range(draw(st.integers(min_value=3, max_value=12))):
        scope, scope_id = draw(st.sampled_from(SCOPES))
        expires = draw(st.sampled_from(EXPIRIES))
        raw: dict[str, Any] = {
            "schemaVersion": 1, "memoryId": f"mem-{i:02d}", "scope": scope, "scopeId": scope_id,
            "category": draw(st.sampled_from(["fact", "decision"])),
            "content": " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))),
            "provenance": {"source": "test", "observedAt": NOW},
            "evidenceRefs": [{"store": "test", "id": f"ev-{i}"}],
            "confidence": draw(st.sampled_from([0.25, 0.5, 0.9])),
            "importance": draw(st.sampled_from([0.3, 0.8])), "tags": [],
            "sensitivity": "internal",
            "allowedSinks": draw(st.sampled_from([["*"], ["cli"], ["cli"], ["provider.local"]])),
            "state": draw(st.sampled_from(["active"] * 3 + ["reinforced", "archived"])),
            "retentionPolicy": {"mode": "durable"} if expires is None
            else {"mode": "until_expired", "expiresAt": expires},
            "createdAt": NOW, "updatedAt": NOW, "accessCount": 0, "revision": 1,
        }  # fmt: skip
        records.append(normalize_memory_record(raw))
    admitted = draw(st.sampled_from([SCOPES[:1], SCOPES, SCOPES, SCOPES[1:]]))
    request = {
        "query": draw(st.sampled_from(["*", "*", *WORDS, "deploy needle"])),
        "sink": "cli",
        "scopeAdmissions": [{"scope": s, "scopeId": i} for s, i in admitted],
        "limit": draw(st.integers(min_value=1, max_value=12)),
        "tokenBudget": draw(st.sampled_from([4096, 4096, 8])),
        "now": NOW,
    }
    return records, request


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(crowded(), crowded(), scenarios()), st.data())
def test_conflicts_show_alike_on_every_path_and_never_leak(
    scenario: tuple[list[dict[str, Any]], dict[str, Any]], data: st.DataObject
) -> None:
    records, request = scenario
    pairs = [
        (a["memoryId"], b["memoryId"])
        for a, b in itertools.combinations(records, 2)
        if (a["scope"], a.get("scopeId")) == (b["scope"], b.get("scopeId"))
    ]
    keep = data.draw(st.lists(st.booleans(), min_size=len(pairs), max_size=len(pairs)))
    chosen = [pair for pair, kept in zip(pairs, keep, strict=True) if kept]
    by_id = {r["memoryId"]: r for r in records}
    port = ListPort(records)
    for first, second in chosen:
        conflict = record_conflict(by_id[first], by_id[second], at=AT, operation_id="op-1")
        assert port.put_conflict(conflict.to_wire())
    result = dict(recall_both_paths(port, request))
    result.pop("memoryRevision")
    assert result["digest"] == redigest(result)
    plain = rank_memory_records(records, request, profile="canonical")
    stripped = without_conflicts(result)
    stripped["digest"] = redigest(stripped)
    assert stripped == plain  # conflicts hide nothing and reorder nothing
    for hit in result["results"]:
        me = hit["memoryId"]
        expected = sorted(
            other
            for pair in chosen
            if me in pair
            for other in pair
            if other != me and _recallable_by(by_id[other], request)
        )
        assert hit.get("conflictsWith") == (expected or None)
