"""`shadow kernel call compact_context|reconcile` reproduce the peer's compaction vectors.

Every case of ``compaction-vectors.json`` is driven through ``kernel_rpc.call``
alone, one stateless call per step: the first call gets the vector's session
seed, each later call the previous call's ``sessionAfter``; the clock and the
uuid counter continue where the previous call left them (``clockCalls``,
``uuidsConsumed``).  Receipts, errors (with ``compactionLifecycle``), the calls
consumed and the final session must equal the vector's, under the same
documented rules as ``test_peer_compaction.py`` (KD-C1, KD-C2) plus one wire
rule: a summarizer's own failure (the peer's ``code: null``) is
``summarizer_failed`` on the wire, where every error has a code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from kernel.canonical.timestamps import epoch_ms_to_iso, iso_to_epoch_ms
from shadow import kernel_rpc
from tests.conftest import load_peer_vectors, peer_cases, require_case
from tests.peer.test_peer_compaction import compare_error, documented_rule

FILE = "compaction-vectors.json"
pytestmark = pytest.mark.peer


def _clock_after(spec: dict[str, Any], calls: int) -> dict[str, Any]:
    if spec["mode"] == "fixed":
        return spec
    start = iso_to_epoch_ms(spec["start"]) + calls * int(spec["stepMs"])
    return {**spec, "start": epoch_ms_to_iso(start)}


def drive(case: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the case's steps as chained RPC calls; (step results, final session)."""
    session: dict[str, Any] = case["session"]
    clock_calls, uuids = 0, 0
    results = []
    for index, step in enumerate(case["steps"]):
        params: dict[str, Any] = {"session": session, "mode": case["kernel"]["mode"]}
        if step["op"] == "compactContext":
            params.update(
                request=step["request"],
                summarizer=step.get("summarizer"),
                clock=_clock_after(case["kernel"]["clock"], clock_calls),
                uuidPrefix=case["kernel"]["uuidPrefix"],
                uuidStart=uuids + 1,
            )
            if index == 0 and case["port"]:
                params["port"] = case["port"]
            out = kernel_rpc.call("compact_context", params)
        else:
            out = kernel_rpc.call("reconcile", {**params, "operationId": step["operationId"]})
        assert set(out) in ({"result"}, {"error"}), out
        body = out.get("result") or out["error"]
        result = {
            "ok": "result" in out,
            "uuidsConsumed": body.get("uuidsConsumed", []),
            "clockCalls": body.get("clockCalls", 0),
            "summarizerCalls": body.get("summarizerCalls", []),
        }
        if "result" in out:
            result["value"] = body["receipt"]
            session = body["sessionAfter"]
        else:
            result["error"] = body
        clock_calls += result["clockCalls"]
        uuids += len(result["uuidsConsumed"])
        results.append(result)
    after = {
        "head": session["head"],
        "itemIds": [i["itemId"] for i in session["items"]],
        "events": session.get("events", []),
        "reconciliations": session.get("reconciliations", []),
    }
    return results, after


def problems_for(case: dict[str, Any]) -> list[str]:
    results, after = drive(case)
    if documented_rule(case) == "KD-C1":
        return [f"expected non_portable_value, got {r}" for r in results
                if r["ok"] or r["error"]["code"] != "non_portable_value"]
    problems = []
    for index, (ours, theirs) in enumerate(zip(results, case["results"], strict=True)):
        where = f"step {index} ({case['steps'][index]['op']})"
        if ours["ok"] != theirs["ok"]:
            problems.append(f"{where}: ok={ours['ok']} expected {theirs['ok']}")
            continue
        if ours["ok"] and ours["value"] != theirs["value"]:
            problems.append(f"{where}: receipt differs")
        if not ours["ok"]:
            expected = dict(theirs["error"])
            if expected["code"] is None:  # wire rule: every error has a code
                expected["code"] = "summarizer_failed"
                expected["details"] = {}
            problems += [f"{where}: {p}" for p in compare_error(ours["error"], expected)]
        for key in ("uuidsConsumed", "clockCalls", "summarizerCalls"):
            if ours[key] != theirs[key]:
                problems.append(f"{where}: {key} {ours[key]!r} != {theirs[key]!r}")
    for key in ("head", "itemIds", "events", "reconciliations"):
        if after[key] != case["sessionAfter"][key]:
            problems.append(f"sessionAfter.{key} differs")
    return problems


@pytest.mark.parametrize("case", peer_cases(FILE))
def test_rpc_compaction_vector(case: Any) -> None:
    case = require_case(case, FILE)
    problems = problems_for(case)
    assert not problems, "\n".join(problems)


def test_rpc_covers_every_status_and_a_chain() -> None:
    """Guard that the vectors exercised above include every outcome and multi-step chains."""
    doc = load_peer_vectors(FILE)
    statuses = {r["value"]["status"] for c in doc["cases"] for r in c["results"] if r["ok"]}
    assert {"committed", "degraded", "stale", "reconciliation_required", "not_found"} <= statuses
    assert sum(len(c["steps"]) > 1 for c in doc["cases"]) >= 5


def test_cli_compact_context_and_reconcile_subprocess() -> None:
    doc = load_peer_vectors(FILE)
    case = next(
        c for c in doc["cases"]
        if len(c["steps"]) == 1 and c["results"][0]["ok"]
        and c["results"][0]["value"]["status"] == "committed" and not documented_rule(c)
    )
    step = case["steps"][0]
    params = {
        "session": case["session"],
        "request": step["request"],
        "summarizer": step.get("summarizer"),
        "clock": case["kernel"]["clock"],
        "uuidPrefix": case["kernel"]["uuidPrefix"],
    }
    shadow = [sys.executable, "-m", "shadow", "kernel", "call"]
    proc = subprocess.run([*shadow, "compact_context"], input=json.dumps(params).encode(),
                          capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    receipt = case["results"][0]["value"]
    assert out["receipt"] == receipt
    assert out["sessionAfter"]["head"] == case["sessionAfter"]["head"]
    assert out["sessionAfter"]["events"] == case["sessionAfter"]["events"]

    again = {"session": out["sessionAfter"], "operationId": receipt["operationId"]}
    proc = subprocess.run([*shadow, "reconcile"], input=json.dumps(again).encode(),
                          capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["receipt"] == receipt
