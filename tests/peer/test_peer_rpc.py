"""`shadow kernel call plan_context` accepts a peer vector's request verbatim."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from shadow import kernel_rpc
from tests.conftest import load_peer_vectors

pytestmark = pytest.mark.peer


def test_rpc_plan_context_matches_peer_vectors() -> None:
    doc = load_peer_vectors("plan-vectors.json")
    for case in doc["cases"][:60]:
        out = kernel_rpc.call("plan_context", case["request"])
        if "result" in case:
            assert out == {"result": case["result"]}, case["id"]
        else:
            assert out["error"]["code"] == case["error"]["code"], case["id"]


def test_cli_plan_context_subprocess() -> None:
    doc = load_peer_vectors("plan-vectors.json")
    case = next(c for c in doc["cases"] if "result" in c)
    proc = subprocess.run([sys.executable, "-m", "shadow", "kernel", "call", "plan_context"],
                          input=json.dumps(case["request"]).encode(), capture_output=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == case["result"]
