"""Recall pipeline, analyzer and index.

(:mod:`kernel.memory.recall`, :mod:`kernel.memory.lexical`, :mod:`kernel.memory.index`.)

Properties (hypothesis): recall never returns a record outside the admitted scopes or
one whose sinks exclude the request's sink; the order is stable (input order never
matters); limit, token budget and the category cap hold; the index path equals the
admitted-scope scan; an index that followed any sequence of writes equals a fresh build;
a corrupt or inconsistent index degrades to a scan of the admitted scopes only.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.canonical.records import normalize_memory_record
from kernel.errors import DigestMismatch, InvalidArgument, NonPortableValue
from kernel.memory.index import IndexCorrupt, LexicalIndex
from kernel.memory.lexical import compile_query, explain, lexical_relevance, tokens
from kernel.memory.recall import (
    RecordIndex,
    build_index,
    estimated_tokens,
    js_to_fixed,
    rank_memory_records,
    recall_memory,
)
from kernel.outcomes import IndexDegraded
from tests.kernel.recall_port import ListPort

NOW = "2026-09-17T00:00:00.000Z"
SCOPES: list[tuple[str, str | None]] = [
    ("project", "p1"),
    ("project", "p2"),
    ("user", "u1"),
    ("user", "u2"),
    ("session", "s1"),
    ("global", None),
]
SINKS = ["cli", "provider.local", "provider.remote", "*"]
WORDS = [
    "deploy", "needle", "rate_limit", "v1.9.0", "src/kernel/recall.py", "HTTP_TIMEOUT",
    "数据库", "备份", "测试", "确定性测试", "Vue开发", "getUserById", "ＦＵＬＬ", "café",
    "cafe\u0301", "Straße", "routes", "load_config", "日本語のテキスト", "账",
]  # fmt: skip
CATEGORIES = ["fact", "procedure", "decision", "preference"]
STATES = ["active", "active", "active", "reinforced", "candidate", "archived", "superseded"]
PROFILES = ["peer", "canonical"]
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def make_record(i: int, draw: Any) -> dict[str, Any]:
    scope, scope_id = draw(st.sampled_from(SCOPES))
    content = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8)))
    raw: dict[str, Any] = {
        "schemaVersion": 1,
        "memoryId": f"mem-{i:03d}",
        "scope": scope,
        "category": draw(st.sampled_from(CATEGORIES)),
        "content": content,
        "provenance": {"source": "test", "observedAt": NOW},
        "evidenceRefs": [{"store": "test", "id": f"ev-{i}"}],
        "confidence": draw(st.sampled_from([0, 0.25, 0.5, 0.9, 1])),
        "importance": draw(st.sampled_from([0, 0.3, 0.5, 0.8])),
        "tags": draw(st.lists(st.sampled_from(["ops", "db", "ui"]), unique=True, max_size=2)),
        "sensitivity": "internal",
        "allowedSinks": draw(st.lists(st.sampled_from(SINKS), unique=True, min_size=1)),
        "state": draw(st.sampled_from(STATES)),
        "retentionPolicy": draw(
            st.sampled_from(
                [
                    {"mode": "durable"},
                    {"mode": "until_expired", "expiresAt": "2026-09-16T00:00:00.000Z"},
                    {"mode": "until_expired", "expiresAt": "2026-10-01T00:00:00.000Z"},
                ]
            )
        ),
        "createdAt": NOW,
        "updatedAt": NOW,
        "accessCount": 0,
        "revision": 1,
    }
    if scope_id is not None:
        raw["scopeId"] = scope_id
    return normalize_memory_record(raw)


@st.composite
def scenarios(draw: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    n = draw(st.integers(min_value=0, max_value=24))
    records = [make_record(i, draw) for i in range(n)]
    admitted = draw(st.lists(st.sampled_from(SCOPES), min_size=1, max_size=4, unique=True))
    query = draw(
        st.one_of(
            st.just("*"),
            st.lists(st.sampled_from([*WORDS, "测", "route", "load", "v1.9"]), min_size=1,
                     max_size=3).map(" ".join),
        )
    )  # fmt: skip
    request = {
        "query": query,
        "sink": draw(st.sampled_from(SINKS[:2])),
        "scopeAdmissions": [
            {"scope": s, **({"scopeId": i} if i is not None else {})} for s, i in admitted
        ],
        "limit": draw(st.integers(min_value=1, max_value=8)),
        "tokenBudget": draw(st.integers(min_value=1, max_value=400)),
        "now": NOW,
    }
    return records, request


def _admitted(request: dict[str, Any]) -> set[tuple[str, str | None]]:
    return {(a["scope"], a.get("scopeId")) for a in request["scopeAdmissions"]}


def _check_governed(result: dict[str, Any], request: dict[str, Any]) -> None:
    admitted = _admitted(request)
    for hit in result["results"]:
        record = hit["record"]
        assert (record["scope"], record.get("scopeId")) in admitted
        assert "*" in record["allowedSinks"] or request["sink"] in record["allowedSinks"]
        assert record["state"] in ("active", "reinforced")
        expires = record["retentionPolicy"].get("expiresAt")
        assert expires is None or expires > request["now"]


def _candidate_categories(
    records: list[dict[str, Any]], request: dict[str, Any], profile: Any
) -> set[str]:
    """Oracle: categories of every governed record with lexical > 0."""
    admitted = _admitted(request)
    return {
        r["category"]
        for r in records
        if (r["scope"], r.get("scopeId")) in admitted
        and ("*" in r["allowedSinks"] or request["sink"] in r["allowedSinks"])
        and r["state"] in ("active", "reinforced")
        and r["retentionPolicy"].get("expiresAt", "9999") > request["now"]
        and lexical_relevance(request["query"], r, _analyzer(profile)) > 0
    }


def _check_budget(result: dict[str, Any], request: dict[str, Any], candidates: set[str]) -> None:
    hits = result["results"]
    assert len(hits) <= request["limit"]
    assert result["usedTokens"] == sum(h["estimatedTokens"] for h in hits)
    assert result["usedTokens"] <= request["tokenBudget"]
    assert result["totalCandidates"] >= len(hits)
    for hit in hits:
        assert hit["estimatedTokens"] == estimated_tokens(hit["record"]["content"])
        assert hit["truncated"] is False
    cap = max(2, math.ceil(request["limit"] / 2))
    counts: dict[str, int] = {}
    for hit in hits:
        counts[hit["record"]["category"]] = counts.get(hit["record"]["category"], 0) + 1
    if any(c > cap for c in counts.values()):
        # the cap lifts only once every candidate category is represented
        assert set(counts) == candidates


@FAST
@given(scenarios(), st.sampled_from(PROFILES))
def test_recall_never_leaves_admitted_scopes_or_sinks(
    scenario: tuple[list[dict[str, Any]], dict[str, Any]], profile: Any
) -> None:
    records, request = scenario
    result = rank_memory_records(records, request, profile=profile)
    _check_governed(result, request)
    _check_budget(result, request, _candidate_categories(records, request, profile))
    port = ListPort(records)
    for index in (None, RecordIndex(_analyzer(profile), build_index(records, _analyzer(profile)))):
        outcome = recall_memory(port, request, index=index, profile=profile)
        assert outcome.degraded is None
        got = dict(outcome.result)
        got.pop("memoryRevision")
        assert got == result  # index path = admitted-scope scan = the list ranking
    assert set(port.scope_lists) <= _admitted(request)


def _analyzer(profile: str) -> Any:
    return "peer" if profile == "peer" else "canonical"


@FAST
@given(scenarios(), st.sampled_from(PROFILES), st.randoms(use_true_random=False))
def test_order_is_stable_under_input_permutation(
    scenario: tuple[list[dict[str, Any]], dict[str, Any]], profile: Any, rnd: random.Random
) -> None:
    records, request = scenario
    shuffled = list(records)
    rnd.shuffle(shuffled)
    assert rank_memory_records(records, request, profile=profile) == rank_memory_records(
        shuffled, request, profile=profile
    )


@FAST
@given(
    st.lists(st.tuples(st.integers(0, 11), st.data()), min_size=1, max_size=30),
    st.sampled_from(["peer", "canonical"]),
)
def test_index_following_writes_equals_fresh_build(
    writes: list[tuple[int, st.DataObject]], analyzer: Any
) -> None:
    port = ListPort()
    holder = RecordIndex(analyzer, LexicalIndex(analyzer))
    for step, (slot, data) in enumerate(writes):
        raw = {k: v for k, v in make_record(slot, data.draw).items() if k != "digest"}
        port.put(normalize_memory_record({**raw, "revision": step + 1}))
        if step % 3 == 0:
            holder.sync(port)
    holder.sync(port)
    assert holder.index is not None
    fresh = build_index(port.records(), analyzer, port.store_revision())
    assert holder.index.fingerprint() == fresh.fingerprint()
    reloaded = LexicalIndex.from_wire(holder.index.to_wire())
    assert reloaded.fingerprint() == fresh.fingerprint()


# --- degradation ------------------------------------------------------------------------------


def _corpus() -> list[dict[str, Any]]:
    rnd = random.Random(5)
    out = []
    for i in range(60):
        scope, scope_id = SCOPES[i % len(SCOPES)]
        raw: dict[str, Any] = {
            "schemaVersion": 1,
            "memoryId": f"doc-{i:03d}",
            "scope": scope,
            "category": CATEGORIES[i % 4],
            "content": " ".join(rnd.choice(WORDS) for _ in range(5))
            + (" needle" if i % 7 == 0 else ""),
            "provenance": {"source": "test", "observedAt": NOW},
            "evidenceRefs": [{"store": "test", "id": f"ev-{i}"}],
            "confidence": 0.5,
            "importance": round(rnd.random(), 2),
            "tags": [],
            "sensitivity": "internal",
            "allowedSinks": ["*"],
            "state": "active",
            "retentionPolicy": {"mode": "durable"},
            "createdAt": NOW,
            "updatedAt": NOW,
            "accessCount": 0,
            "revision": 1,
        }  # fmt: skip
        if scope_id is not None:
            raw["scopeId"] = scope_id
        out.append(normalize_memory_record(raw))
    return out


REQUEST = {
    "query": "needle",
    "sink": "cli",
    "scopeAdmissions": [{"scope": "project", "scopeId": "p1"}, {"scope": "user", "scopeId": "u1"}],
    "limit": 20,
    "tokenBudget": 8192,
    "now": NOW,
}


def _expected(port: ListPort) -> dict[str, Any]:
    return recall_memory(port, REQUEST).result


@pytest.mark.parametrize("fallback", ["lexical", "rebuild"])
def test_corrupt_snapshot_degrades_within_scope(fallback: Any) -> None:
    port = ListPort(_corpus())
    expected = _expected(port)
    assert expected["results"]
    wire = build_index(port.records(), watermark=port.store_revision()).to_wire()
    wire["partitions"][0]["postings"]["tokens"]["needle"] = [0, 1, 2]  # tampered
    holder = RecordIndex()
    assert holder.load(wire) is False and holder.fault == "index_corrupt"
    port.scope_lists.clear()
    outcome = recall_memory(port, REQUEST, index=holder, on_index_failure=fallback)
    assert outcome.result == expected
    assert isinstance(outcome.degraded, IndexDegraded)
    assert outcome.degraded.fallback == fallback
    assert outcome.degraded.to_wire()["code"] == "index_degraded"
    assert set(port.scope_lists) <= _admitted(REQUEST)  # never a cross-scope scan
    if fallback == "rebuild":
        assert outcome.path == "index" and holder.fault is None
    else:
        assert outcome.path == "scan" and holder.fault == "index_corrupt"


def test_lost_index_and_external_tampering_degrade() -> None:
    port = ListPort(_corpus())
    lost = RecordIndex()  # no index at all
    outcome = recall_memory(port, REQUEST, index=lost, on_index_failure="lexical")
    assert outcome.degraded is not None and outcome.degraded.reason_code == "index_missing"
    assert outcome.result == _expected(port)

    holder = RecordIndex("canonical", build_index(port.records(), watermark=port.store_revision()))
    victim = next(r for r in port.records() if "needle" in r["content"] and r["scope"] == "project"
                  and r.get("scopeId") == "p1")  # fmt: skip
    port.drop(victim["memoryId"])  # the authority lost it behind the index's back
    outcome = recall_memory(port, REQUEST, index=holder, on_index_failure="lexical")
    assert outcome.degraded is not None
    assert outcome.degraded.reason_code == "index_entry_mismatch"
    ids = [h["memoryId"] for h in outcome.result["results"]]
    assert victim["memoryId"] not in ids  # the index row is not the authority
    assert outcome.result == _expected(port)


def test_index_follows_the_change_feed_and_detects_gaps() -> None:
    records = _corpus()
    port = ListPort(records[:30])
    holder = RecordIndex("canonical", build_index(port.records(), watermark=port.store_revision()))
    for record in records[30:]:
        port.put(record)
    outcome = recall_memory(port, REQUEST, index=holder)
    assert outcome.degraded is None and outcome.path == "index"
    assert outcome.result == _expected(port)
    assert holder.index is not None and holder.index.watermark == port.store_revision()
    holder.index.watermark = port.store_revision() + 5  # ahead of its authority
    outcome = recall_memory(port, REQUEST, index=holder)
    assert outcome.degraded is not None and outcome.degraded.reason_code == "index_out_of_sync"
    assert outcome.result == _expected(port)


def test_deleted_record_leaves_the_index() -> None:
    port = ListPort(_corpus())
    holder = RecordIndex("canonical", build_index(port.records(), watermark=port.store_revision()))
    first = recall_memory(port, REQUEST, index=holder).result["results"][0]["record"]
    tomb = {k: v for k, v in first.items() if k not in ("digest", "summary")}
    tomb.update(state="deleted", content="", revision=2, deletionFence="fence-1")
    port.put(normalize_memory_record(tomb))
    outcome = recall_memory(port, REQUEST, index=holder)
    assert outcome.degraded is None
    assert first["memoryId"] not in [h["memoryId"] for h in outcome.result["results"]]
    assert holder.index is not None and first["memoryId"] not in holder.index


def test_snapshot_round_trip_and_damage() -> None:
    index = build_index(_corpus(), watermark=60)
    wire = index.to_wire()
    assert LexicalIndex.from_wire(wire).fingerprint() == index.fingerprint()
    for damage in (
        lambda w: w.update(format="other"),
        lambda w: w.update(digest="sha256:" + "0" * 64),
        lambda w: w.pop("partitions"),
        lambda w: w["partitions"][0]["docs"].append(["x", 1, "d", 1, [], []]),
    ):
        broken = index.to_wire()
        damage(broken)
        with pytest.raises(IndexCorrupt):
            LexicalIndex.from_wire(broken)
    with pytest.raises(IndexCorrupt):
        LexicalIndex.from_wire("not a snapshot")


# --- canonical pipeline specifics ---------------------------------------------------------


def _one(memory_id: str, content: str, **extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "schemaVersion": 1, "memoryId": memory_id, "scope": "project", "scopeId": "p1",
        "category": "fact", "content": content,
        "provenance": {"source": "test", "observedAt": NOW},
        "evidenceRefs": [{"store": "test", "id": f"ev-{memory_id}"}],
        "confidence": 0.5, "importance": 0.5, "tags": [], "sensitivity": "internal",
        "allowedSinks": ["*"], "state": "active", "retentionPolicy": {"mode": "durable"},
        "createdAt": NOW, "updatedAt": NOW, "accessCount": 0, "revision": 1, **extra,
    }  # fmt: skip
    return normalize_memory_record(raw)


def _ids(result: dict[str, Any]) -> list[str]:
    return [h["memoryId"] for h in result["results"]]


def test_supersession_filter_hides_replaced_memories() -> None:
    old = _one("fact-old", "deploy uses blue green")
    new = _one("fact-new", "deploy uses canary", supersedes=["fact-old"])
    request = {**REQUEST, "query": "deploy", "scopeAdmissions": [{"scope": "project",
               "scopeId": "p1"}]}  # fmt: skip
    assert _ids(rank_memory_records([old, new], request, profile="canonical")) == ["fact-new"]
    assert set(_ids(rank_memory_records([old, new], request, profile="peer"))) == {
        "fact-old",
        "fact-new",
    }
    port = ListPort([old, new])
    holder = RecordIndex("canonical", build_index(port.records(), watermark=2))
    assert _ids(recall_memory(port, request, index=holder).result) == ["fact-new"]
    # a successor outside the admitted scopes hides nothing (no cross-scope influence)
    far = _one("fact-far", "deploy elsewhere", supersedes=["fact-old"], scopeId="p2")
    result = rank_memory_records([old, far], request, profile="canonical")
    assert _ids(result) == ["fact-old"]


def test_bm25_breaks_relevance_ties_in_canonical_profile() -> None:
    short = _one("b-short", "needle")
    long = _one("a-long", "needle " + " ".join(f"filler{i}" for i in range(40)))
    request = {**REQUEST, "scopeAdmissions": [{"scope": "project", "scopeId": "p1"}]}
    assert _ids(rank_memory_records([short, long], request, profile="canonical")) == [
        "b-short",
        "a-long",
    ]
    assert _ids(rank_memory_records([short, long], request, profile="peer")) == [
        "a-long",
        "b-short",
    ]


def test_request_validation() -> None:
    base = {**REQUEST}
    with pytest.raises(InvalidArgument) as caught:
        rank_memory_records([], {k: v for k, v in base.items() if k != "now"})
    assert caught.value.details == {"field": "now"}
    with pytest.raises(InvalidArgument):
        rank_memory_records([], {**base, "scopeAdmissions": [None]})
    with pytest.raises(InvalidArgument):
        recall_memory(ListPort(), base, profile="bogus")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        recall_memory(ListPort(), base, index=RecordIndex("peer"), profile="canonical")


def test_kd_r1_supplied_order_must_be_bound_by_the_digest() -> None:
    raw = {k: v for k, v in _one("kd", "needle").items() if k != "digest"}
    raw["tags"] = ["b", "アイ", "a"]  # ASCII part out of collation order; katakana: KD-R1
    with pytest.raises(NonPortableValue):
        rank_memory_records([raw], REQUEST)  # no digest: the order cannot be known
    from kernel.canonical import digest as d
    good = {**raw, "tags": ["a", "b", "アイ"]}
    good["digest"] = d.digest(good, "chainlesschain.memory-record/v1", "peer")
    assert rank_memory_records([good], REQUEST)["totalCandidates"] == 1
    unsorted = {**raw}
    unsorted["digest"] = d.digest(unsorted, "chainlesschain.memory-record/v1", "peer")
    with pytest.raises(DigestMismatch):
        rank_memory_records([unsorted], REQUEST)
    with pytest.raises(DigestMismatch):
        rank_memory_records([{**good, "content": "changed"}], REQUEST)


def test_js_to_fixed_matches_node() -> None:
    # (value, Number(value.toFixed(6))) as printed by Node v20.20.2
    for value, expected in [
        (0.9255, 0.9255), (5e-7, 0), (0.0000015, 0.000002), (0.0000025, 0.000003),
        (1.0000005, 1.000001), (0.1234565, 0.123456), (0.123456500000001, 0.123457),
        (0.3333335, 0.333334), (0.6666665, 0.666667), (0.8765435, 0.876544),
    ]:  # fmt: skip
        assert js_to_fixed(value) == expected


def test_estimated_tokens() -> None:
    assert estimated_tokens("") == 1
    assert estimated_tokens("abcd") == 1
    assert estimated_tokens("abcde") == 2
    assert estimated_tokens("数据库") == 3  # 9 UTF-8 bytes
    assert estimated_tokens("\ud800") == 1  # a lone surrogate: 3 bytes, as Node's U+FFFD


# --- analyzers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "content", "peer", "canonical"),
    [
        ("确定性测试", "偏好使用确定性测试", 1, 1),
        ("性能测试", "偏好使用确定性测试", 0, 0),
        ("测", "测试环境", 0, 0),
        ("账", "独立字 账 作为", 1, 1),
        ("Vue开发", "用Vue部署工具", 0, 0),
        ("Vue开发", "用Vue开发工具", 1, 1),
        ("route", "routes", 0, 0),
        ("load", "load_config", 0, 0),
        ("HTTP_TIMEOUT", "ＨＴＴＰ＿ＴＩＭＥＯＵＴ", 0, 1),  # full-width folds (NFKC)
        ("café", "cafe\u0301", 0, 1),  # combining mark: the peer splits it off
        ("strasse", "Straße", 0, 1),  # full case folding
        ("recall.py", "see src/kernel/recall.py", 1, 1),
        ("kernel/recall.py", "see src/kernel/recall.py", 1, 1),
        ("kernel/recall.py", "kernel notes; recall.py", 1, 0),  # canonical: the path
        ("v1.9.0", "released v1.9.1 and 0 bugs", 1, 0),  # the peer splits on dots
        ("テキスト", "日本語のテキストと漢字", 0, 1),  # kana is dense only canonically
        ("한국어", "한국어를 배운다", 0, 1),
    ],
)
def test_analyzer_examples(query: str, content: str, peer: float, canonical: float) -> None:
    record = {"category": "fact", "tags": [], "content": content}
    assert lexical_relevance(query, record, "peer") == peer
    assert lexical_relevance(query, record, "canonical") == canonical


def test_canonical_tokens_and_explain() -> None:
    assert tokens("src\\kernel\\recall.py v1.9.0 fixtures.", "canonical") == [
        "src/kernel/recall.py", "kernel/recall.py", "recall.py", "src", "kernel", "recall",
        "py", "v1.9.0", "v1", "9", "0", "fixtures",
    ]  # fmt: skip
    assert tokens("cafe\u0301 -- _x", "peer") == ["cafe", "--", "_x"]
    why = explain("数据库 router nothing", {"category": "c", "tags": [], "content":
                  "每晚数据库备份 router"}, "canonical")  # fmt: skip
    assert [w["via"] for w in why] == ["parts", "token", None]
    assert compile_query("*", "canonical").match_all
    assert lexical_relevance("--", {"category": "c", "tags": [], "content": "x"}, "canonical") == 0


def test_compaction_after_many_removals_keeps_the_index_equal() -> None:
    corpus = _corpus()
    records = [
        {**r, "memoryId": f"{r['memoryId']}-{k}", "content": r["content"] + " 数据库备份"}
        for k in range(4)
        for r in corpus
    ]
    index = LexicalIndex("canonical")
    for r in records:
        index.add((r["scope"], r.get("scopeId")), r["memoryId"], r["content"], digest=r["digest"])
    keep = records[::5]
    for r in records:
        if r not in keep:
            index.remove(r["memoryId"])  # crosses the compaction threshold on the way
    fresh = LexicalIndex("canonical")
    for r in keep:
        fresh.add((r["scope"], r.get("scopeId")), r["memoryId"], r["content"], digest=r["digest"])
    assert index.fingerprint() == fresh.fingerprint()
    assert len(index) == len(keep)
    for query in ("needle", "数据库", "据库备", "*", "deploy rate_limit"):
        compiled = compile_query(query, "canonical")
        got = sorted(index.search(compiled, SCOPES), key=lambda h: h.doc_id)
        assert got == sorted(fresh.search(compiled, SCOPES), key=lambda h: h.doc_id)


@FAST
@given(scenarios(), st.sampled_from(["drop", "snapshot", "ahead"]), st.sampled_from(PROFILES))
def test_damaged_index_degrades_within_admitted_scopes(
    scenario: tuple[list[dict[str, Any]], dict[str, Any]], damage: str, profile: Any
) -> None:
    records, request = scenario
    analyzer = _analyzer(profile)
    port = ListPort(records)
    holder = RecordIndex(analyzer, build_index(records, analyzer, port.store_revision()))
    if damage == "drop" and records:
        port.drop(records[len(records) // 2]["memoryId"])
    elif damage == "snapshot":
        wire = holder.to_wire()
        assert wire is not None
        wire["watermark"] = -1  # the digest no longer matches
        holder.load(wire)
    else:
        assert holder.index is not None
        holder.index.watermark = port.store_revision() + 1
    port.scope_lists.clear()
    outcome = recall_memory(port, request, index=holder, profile=profile,
                            on_index_failure="lexical")  # fmt: skip
    assert set(port.scope_lists) <= _admitted(request)
    expected = recall_memory(port, request, profile=profile).result
    assert outcome.result == expected
    _check_governed(outcome.result, request)
    if outcome.degraded is not None:
        assert outcome.path == "scan" and outcome.degraded.fallback == "lexical"
