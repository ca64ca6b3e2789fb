"""Recall against the peer's ``rankMemoryRecords`` / ``lexicalRelevance`` (recall-vectors.json).

Every case must give the peer's whole result — ranked ids, relevances, usedTokens,
totalCandidates, every hit's attribution and record, and the result digest — or, when
the peer failed, its error code, message and details.  ``lexical_by_record`` is checked
for every record of the case's set (filtered records included).  The kernel path
(``recall_memory`` over a MemoryPort, with the peer-analyzer index and without it) must
give the same result plus ``memoryRevision``.  Cases selected by a rule of
``tests/vectors/peer/KNOWN_DIFFERENCES.md`` (section "recall") assert that rule instead.
"""

from __future__ import annotations

from typing import Any

import pytest

from kernel.errors import KernelError
from kernel.memory.lexical import lexical_relevance
from kernel.memory.recall import RecordIndex, build_index, rank_memory_records, recall_memory
from tests.conftest import load_peer_vectors, peer_cases, require_case
from tests.kernel.recall_port import ListPort
from tests.peer.kd1 import non_portable_set

RECALL = "recall-vectors.json"
pytestmark = pytest.mark.peer


def _records(case: dict[str, Any]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = load_peer_vectors(RECALL)["record_sets"][case["record_set"]]
    return records


# --- KNOWN_DIFFERENCES predicates ---------------------------------------------------------


def kd_r1_records(records: list[dict[str, Any]]) -> list[str]:
    """KD-R1: records whose ``tags`` / ``allowedSinks`` (2+ entries) hold text outside the
    reproduced collation alphabet (:mod:`tests.peer.kd1`)."""
    return [
        r["memoryId"]
        for r in records
        if any(non_portable_set(r.get(f)) for f in ("tags", "allowedSinks"))
    ]


def kd_r2_js_type_error(case: dict[str, Any]) -> bool:
    """KD-R2: the peer threw a JavaScript TypeError (a ``null`` scope admission)."""
    error = case.get("error") or {}
    return error.get("code") is None and error.get("jsException") == "TypeError"


# --- cases --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", peer_cases(RECALL))
def test_recall_case(case: dict[str, Any]) -> None:
    case = require_case(case, RECALL)
    records = _records(case)
    if "result" in case:
        got = rank_memory_records(records, case["request"])
        assert [h["memoryId"] for h in got["results"]] == case["ranked_ids"]
        assert [h["relevance"] for h in got["results"]] == case["relevances"]
        assert got == case["result"]
        return
    with pytest.raises(KernelError) as caught:
        rank_memory_records(records, case["request"])
    if kd_r2_js_type_error(case):
        assert caught.value.code == "invalid_argument"
        assert caught.value.details == {"field": "scopeAdmissions[0]"}
        return
    expected = case["error"]
    assert caught.value.to_wire() == {
        "code": expected["code"],
        "message": expected["message"],
        "details": expected["details"],
    }


@pytest.mark.parametrize("case", peer_cases(RECALL))
def test_lexical_by_record(case: dict[str, Any]) -> None:
    case = require_case(case, RECALL)
    query = case["request"]["query"]
    got = {r["memoryId"]: lexical_relevance(query, r) for r in _records(case)}
    assert got == case["lexical_by_record"]


def _result_cases() -> list[Any]:
    return [c for c in peer_cases(RECALL) if c.values[0] is None or "result" in c.values[0]]


@pytest.mark.parametrize("case", _result_cases())
@pytest.mark.parametrize("with_index", [True, False], ids=["index", "scan"])
def test_kernel_path_agrees(case: dict[str, Any], with_index: bool) -> None:
    """recall_memory over a port (index or admitted-scope scan) = the peer's result."""
    case = require_case(case, RECALL)
    port = ListPort(_records(case))
    index = None
    if with_index:
        index = RecordIndex("peer", build_index(port.records(), "peer", port.store_revision()))
    outcome = recall_memory(port, case["request"], index=index, profile="peer")
    assert outcome.degraded is None
    assert outcome.path == ("index" if with_index else "scan")
    result = dict(outcome.result)
    assert result.pop("memoryRevision") == port.store_revision()
    assert result == case["result"]


def test_counts() -> None:
    """The KNOWN_DIFFERENCES counts for seed 1 (a different vector set just reports)."""
    doc = load_peer_vectors(RECALL)
    cases = doc["cases"]
    results = sum(1 for c in cases if "result" in c)
    errors = sum(1 for c in cases if "error" in c)
    kd_r2 = sum(1 for c in cases if kd_r2_js_type_error(c))
    kd_r1 = sum(len(kd_r1_records(rs)) for rs in doc["record_sets"].values())
    if doc.get("seed") == 1:
        assert (len(cases), results, errors, kd_r2, kd_r1) == (77, 66, 11, 1, 0)


def test_records_normalize_to_the_peers_bytes() -> None:
    """Every record outside KD-R1 — non-ASCII tags and sinks included (``é``, ``β``,
    ``安全``, ``数据库``…) — normalizes to itself: the kernel sorts its sets in the peer's
    order and recomputes the peer's digest."""
    from kernel.canonical.records import normalize_memory_record

    checked = 0
    for records in load_peer_vectors(RECALL)["record_sets"].values():
        ruled = set(kd_r1_records(records))
        for record in records:
            if record["memoryId"] in ruled:
                continue
            assert normalize_memory_record(record) == record
            checked += 1
    assert checked
