"""`compact_context` / `reconcile` over real stores and their parameter contract.

The peer-vector agreement of the in-memory form is in
``tests/peer/test_peer_rpc_compaction.py``; here the ``sessionStore`` form
(SQLite database, legacy JSONL transcripts) and the typed errors of bad params.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernel.adapters.jsonl.session import JsonlSessionPort
from kernel.adapters.sqlite.session import SqliteSessionPort
from shadow import kernel_rpc
from tests.conformance.session_harness import conversation
from tests.conftest import load_peer_vectors

SID = "session-rpc"
REQUEST = {
    "operationId": "op-rpc-1",
    "sessionId": SID,
    "modelWindowTokens": 400,
    "reservedOutputTokens": 100,
    "safetyMarginTokens": 20,
    "recoveryReserveTokens": 20,
    "sink": "provider.local",
    "scopeAdmissions": [{"scope": "session", "scopeId": SID}],
    "policyVersion": "policy-1",
    "modelProfile": "model-1",
}
CLOCK = {"mode": "fixed", "now": "2026-09-01T00:00:00.000Z"}


def _vector(case_id: str) -> dict[str, Any]:
    doc = load_peer_vectors("compaction-vectors.json")
    case: dict[str, Any] = next(c for c in doc["cases"] if c["id"] == case_id)
    return case


def _call(method: str, params: dict[str, Any]) -> dict[str, Any]:
    out = kernel_rpc.call(method, params)
    assert "result" in out, out
    result: dict[str, Any] = out["result"]
    return result


def test_sqlite_store_gives_the_peer_receipt(tmp_path: Path) -> None:
    """A vector's session seeded into SQLite compacts to the vector's exact receipt."""
    case = _vector("compaction-0001")
    session, step = case["session"], case["steps"][0]
    db = tmp_path / "session.db"
    port = SqliteSessionPort(db)
    port.seed(session["sessionId"], head=session["head"],
              memory_revision=session["memoryRevision"], items=session["items"])
    port.close()
    store = {"type": "sqlite", "path": str(db)}
    out = _call("compact_context", {
        "sessionStore": store, "request": step["request"], "summarizer": step["summarizer"],
        "clock": case["kernel"]["clock"], "uuidPrefix": case["kernel"]["uuidPrefix"],
    })
    receipt = case["results"][0]["value"]
    assert out["receipt"] == receipt
    assert out["sessionAfter"]["head"] == case["sessionAfter"]["head"]
    assert out["sessionAfter"]["itemIds"] == case["sessionAfter"]["itemIds"]
    assert out["sessionAfter"]["events"] == case["sessionAfter"]["events"]

    again = _call("reconcile", {"sessionStore": store, "operationId": receipt["operationId"]})
    assert again["receipt"] == receipt
    assert SqliteSessionPort(db).verify(session["sessionId"])


def test_jsonl_store_compacts_a_legacy_transcript_and_keeps_its_chain(tmp_path: Path) -> None:
    port = JsonlSessionPort(tmp_path)
    port.start_session(SID, title="rpc")
    for i, message in enumerate(conversation(14)):
        port.append_message(SID, message["role"], message["content"], timestamp=1_000 + i)
    head = port.read_snapshot(SID).head  # type: ignore[union-attr]
    store = {"type": "jsonl", "path": str(tmp_path / f"{SID}.jsonl")}
    params = {"sessionStore": store, "request": REQUEST, "clock": CLOCK, "uuidPrefix": "j"}

    first = _call("compact_context", params)
    assert first["receipt"]["status"] == "committed"
    assert first["receipt"]["inputHead"] == head
    assert first["uuidsConsumed"] == ["j-001"]
    assert port.verify(SID).ok
    assert first["sessionAfter"]["head"] == port.read_snapshot(SID).head  # type: ignore[union-attr]

    retry = _call("compact_context", params)  # same operation id: idempotent, no new line
    assert retry["receipt"] == first["receipt"]
    assert len(retry["sessionAfter"]["events"]) == 1
    directory = {"type": "jsonl", "path": str(tmp_path)}
    settled = _call("reconcile", {"sessionStore": directory, "operationId": "op-rpc-1"})
    assert settled["receipt"] == first["receipt"]
    missing = _call("reconcile", {"sessionStore": directory, "operationId": "op-none"})
    assert missing == {"receipt": {"operationId": "op-none", "status": "not_found"},
                       "sessionAfter": None}


def test_stateless_chain_restores_idempotency() -> None:
    case = _vector("compaction-0001")
    step = case["steps"][0]
    request = {**step["request"], "operationId": "op-chain"}
    params = {"session": case["session"], "request": request, "clock": CLOCK, "uuidPrefix": "s"}
    first = _call("compact_context", params)
    retry = _call("compact_context", {**params, "session": first["sessionAfter"]})
    assert retry["receipt"] == first["receipt"]
    assert retry["uuidsConsumed"] == [] and retry["clockCalls"] == 0
    assert retry["sessionAfter"] == first["sessionAfter"]


def test_summarizer_cancel_aborts_with_lifecycle() -> None:
    case = _vector("compaction-0001")
    params = {"session": case["session"], "request": case["steps"][0]["request"],
              "clock": CLOCK, "uuidPrefix": "c", "summarizer": {"kind": "cancel"}}
    out = kernel_rpc.call("compact_context", params)
    error = out["error"]
    assert error["code"] == "cancelled"
    assert error["compactionLifecycle"][-1]["state"] == "aborted"
    assert len(error["summarizerCalls"]) == 1


def test_kernel_error_carries_lifecycle_and_trace() -> None:
    case = _vector("compaction-0001")
    request = {**case["steps"][0]["request"], "modelWindowTokens": 10}
    out = kernel_rpc.call("compact_context", {"session": case["session"], "request": request,
                                              "clock": CLOCK, "uuidPrefix": "e"})
    assert out["error"]["code"] == "invalid_argument"
    assert out["error"]["compactionLifecycle"][-1]["state"] == "aborted"
    assert out["error"]["uuidsConsumed"] == ["e-001"]


def test_default_clock_and_ids_are_real() -> None:
    case = _vector("compaction-0001")
    out = _call("compact_context", {"session": case["session"],
                                    "request": case["steps"][0]["request"]})
    assert out["receipt"]["status"] == "committed"
    assert len(out["uuidsConsumed"][0]) == 36  # a uuid4


@pytest.mark.parametrize(
    ("method", "params", "pointer"),
    [
        ("compact_context", [], ""),
        ("compact_context", {"request": {}}, ""),
        ("compact_context", {"session": {}, "request": {}}, "/session/sessionId"),
        ("compact_context", {"session": {"sessionId": "s", "head": "h", "items": {}},
                             "request": {}}, "/session/items"),
        ("compact_context", {"sessionStore": {"type": "sqlite", "path": "/nonexistent.db"},
                             "request": {}}, "/sessionStore/path"),
        ("compact_context", {"sessionStore": {"type": "pg", "path": "x"}, "request": {}},
         "/sessionStore/type"),
        ("compact_context", {"session": {"sessionId": "s", "head": "h"}, "sessionStore": {},
                             "request": {}}, ""),
        ("compact_context", {"session": {"sessionId": "s", "head": "h"}, "request": {},
                             "summarizer": {"kind": "maybe"}}, "/summarizer"),
        ("compact_context", {"session": {"sessionId": "s", "head": "h"}, "request": {},
                             "clock": {"mode": "fixed", "now": "yesterday"}}, "/clock"),
        ("compact_context", {"session": {"sessionId": "s", "head": "h"}, "request": {},
                             "bogus": 1}, "/bogus"),
        ("compact_context", {"session": {"sessionId": "s", "head": "h"}, "request": {},
                             "mode": "loud"}, "/mode"),
        ("reconcile", {"session": {"sessionId": "s", "head": "h"}}, "/operationId"),
    ],
)
def test_bad_params_are_typed_input_errors(method: str, params: Any, pointer: str) -> None:
    out = kernel_rpc.call(method, params)
    assert out["error"]["code"] == "invalid_input", out
    assert out["error"]["details"]["pointer"] == pointer


def test_kernel_validation_errors_pass_through() -> None:
    seed = {"sessionId": "s", "head": "h", "items": []}
    out = kernel_rpc.call("compact_context", {"session": seed, "request": {"bogus": 1}})
    assert out["error"]["code"] == "invalid_argument"
    shadow = kernel_rpc.call("reconcile", {"session": seed, "operationId": "x",
                                           "mode": "shadow"})
    assert shadow["error"]["code"] == "legacy_writer_fenced"
    assert json.dumps(shadow)  # wire-serialisable
