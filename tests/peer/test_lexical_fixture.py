"""The peer's multilingual lexical fixture (``fixtures/lexical-retrieval-multilingual-v1.json``)
evaluated as the peer's own ``scripts/lexical-retrieval-eval.mjs`` does.

Records are built as the peer builds them (project scope ``fixture.scopeId``, category
``synthetic``, confidence 0.8, importance 0.5, sink ``fixture.sink``; the ``guard`` entries
are put out of reach: other scope, other sink, expired TTL, archived, candidate, deleted)
and shuffled with the peer's xorshift.  Each query is recalled with ``limit`` = all
records and a 1 MiB token budget.  Metrics (positive queries only, as the peer reports):
Recall@k = relevant ids among the first k / relevant ids, averaged; MRR over the full
ranking; false recall = a negative query returning anything; expected set = the returned
ids equal the relevant ids exactly.  The peer's published figures: Recall@1 0.970588,
Recall@3 = Recall@5 = MRR = 1, 0/8 false recall, 25/25 expected sets.
"""

from __future__ import annotations

from typing import Any

import pytest

from kernel.canonical.records import normalize_memory_record
from kernel.memory.recall import rank_memory_records
from tests.conftest import load_peer_vectors

pytestmark = pytest.mark.peer

FIXTURE = "fixtures/lexical-retrieval-multilingual-v1.json"
TOKEN_BUDGET = 1_048_576
GUARDS = {"other_scope", "other_sink", "expired_ttl", "archived", "candidate", "deleted"}


def _record(fixture: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    guard = entry.get("guard")
    assert guard is None or guard in GUARDS, guard
    now = fixture["now"]
    record: dict[str, Any] = {
        "schemaVersion": 1,
        "memoryId": entry["memoryId"],
        "scope": "project",
        "scopeId": "other-fixture-project" if guard == "other_scope" else fixture["scopeId"],
        "category": "synthetic",
        "content": entry["content"],
        "provenance": {
            "source": "synthetic-lexical-fixture",
            "actor": "fixture-user",
            "observedAt": now,
        },
        "evidenceRefs": [
            {"store": "synthetic-lexical-fixture", "id": f"source-{entry['memoryId']}"}
        ],
        "confidence": 0.8,
        "importance": 0.5,
        "tags": [],
        "sensitivity": "internal",
        "allowedSinks": ["provider.other" if guard == "other_sink" else fixture["sink"]],
        "state": "candidate" if guard == "candidate" else "active",
        "retentionPolicy": (
            {"mode": "until_expired", "expiresAt": "2026-09-11T00:00:00.000Z"}
            if guard == "expired_ttl"
            else {"mode": "durable"}
        ),
        "createdAt": now,
        "updatedAt": now,
        "accessCount": 0,
        "revision": 1,
    }
    if guard == "archived":
        record.update(state="archived", revision=2)
    if guard == "deleted":
        record.update(state="deleted", revision=2, content="", category="deleted")
        record["deletionFence"] = "fixture-deletion-fence"
    return normalize_memory_record(record)


def _shuffled(records: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The peer's xorshift32 Fisher-Yates."""
    state = seed & 0xFFFFFFFF
    out = list(records)
    for index in range(len(out) - 1, 0, -1):
        state ^= (state << 13) & 0xFFFFFFFF
        state ^= state >> 17
        state ^= (state << 5) & 0xFFFFFFFF
        target = state % (index + 1)
        out[index], out[target] = out[target], out[index]
    return out


def evaluate(fixture: dict[str, Any], profile: str) -> dict[str, Any]:
    records = _shuffled([_record(fixture, e) for e in fixture["records"]], fixture["seed"])
    rows = []
    for entry in fixture["queries"]:
        result = rank_memory_records(
            records,
            {
                "query": entry["query"],
                "sink": fixture["sink"],
                "scopeAdmissions": [{"scope": "project", "scopeId": fixture["scopeId"]}],
                "limit": len(records),
                "tokenBudget": TOKEN_BUDGET,
                "now": fixture["now"],
            },
            profile=profile,  # type: ignore[arg-type]
        )
        assert len(result["results"]) == result["totalCandidates"]  # nothing cut
        ids = [hit["memoryId"] for hit in result["results"]]
        relevant = entry["relevantIds"]
        first = next((i for i, x in enumerate(ids) if x in relevant), None)
        rows.append(
            {
                "id": entry["id"],
                "ids": ids,
                "relevant": relevant,
                "recall": {
                    k: (sum(1 for x in ids[:k] if x in relevant) / len(relevant))
                    for k in fixture["k"]
                }
                if relevant
                else None,
                "rr": (0.0 if first is None else 1 / (first + 1)) if relevant else None,
                "false_recall": bool(ids) if not relevant else None,
                "set_matched": sorted(ids) == sorted(relevant),
            }
        )
    positives = [r for r in rows if r["relevant"]]
    negatives = [r for r in rows if not r["relevant"]]
    return {
        "recall": {
            k: sum(r["recall"][k] for r in positives) / len(positives) for k in fixture["k"]
        },
        "mrr": sum(r["rr"] for r in positives) / len(positives),
        "false_recall": sum(1 for r in negatives if r["false_recall"]),
        "negatives": len(negatives),
        "sets": sum(1 for r in rows if r["set_matched"]),
        "queries": len(rows),
        "rows": rows,
    }


@pytest.fixture(scope="module")
def fixture() -> dict[str, Any]:
    data: dict[str, Any] = load_peer_vectors(FIXTURE)
    assert data["schema"] == "chainlesschain.lexical-retrieval-fixture/v1"
    return data


@pytest.mark.parametrize("profile", ["canonical", "peer"])
def test_lexical_fixture_meets_the_peer_quality(fixture: dict[str, Any], profile: str) -> None:
    report = evaluate(fixture, profile)
    failed = [r["id"] for r in report["rows"] if not r["set_matched"]]
    assert failed == [], failed
    assert report["sets"] == report["queries"] == 25
    assert report["recall"][1] >= 0.97
    assert report["recall"][5] == 1
    assert report["mrr"] == 1
    assert report["false_recall"] == 0 and report["negatives"] == 8


def test_governance_blocks_every_guarded_record(fixture: dict[str, Any]) -> None:
    """``*`` recalls exactly the unguarded records: the guards are excluded by scope, sink,
    TTL and lifecycle, not by lexical luck."""
    report_ids = {e["memoryId"] for e in fixture["records"] if not e.get("guard")}
    records = [_record(fixture, e) for e in fixture["records"]]
    for profile in ("canonical", "peer"):
        result = rank_memory_records(
            records,
            {
                "query": "*",
                "sink": fixture["sink"],
                "scopeAdmissions": [{"scope": "project", "scopeId": fixture["scopeId"]}],
                "limit": len(records),
                "tokenBudget": TOKEN_BUDGET,
                "now": fixture["now"],
            },
            profile=profile,  # type: ignore[arg-type]
        )
        assert {h["memoryId"] for h in result["results"]} == report_ids
