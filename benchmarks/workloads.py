"""Workload registry.  ``build(name, n)`` returns (run, extra) where ``run`` is the timed
call and ``extra()`` returns additional result fields measured outside the timer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Run = Callable[[], object]
Extra = Callable[[], dict[str, Any]]

WORKLOADS: dict[str, list[int]] = {
    "plan": [1_000, 10_000],
}

# Peer P50 figures (ms) from the issue texts, measured on this machine kind.
PEER_FIGURES: dict[tuple[str, int], float] = {
    ("plan", 1_000): 21.7,
    ("plan", 10_000): 196.0,
}


def _plan(n: int) -> tuple[Run, Extra]:
    from kernel.planner import plan_context

    items = [
        {
            "schemaVersion": 1,
            "itemId": f"msg-{i:06d}",
            "kind": "message",
            "scope": "session",
            "scopeId": "bench-session",
            "sourceRef": {"store": "session", "id": f"evt-{i}", "eventSequence": i},
            "provenance": {"source": "bench", "observedAt": "2026-08-29T00:00:00.000Z"},
            "trust": "user",
            "sensitivity": "internal",
            "allowedSinks": ["provider"],
            "tokenEstimate": 8 + i % 32,
            "priority": i % 101,
            "pinned": False,
            "createdAt": "2026-08-29T00:00:00.000Z",
            "content": f"message {i}",
        }
        for i in range(n)
    ]
    request = {
        "modelWindowTokens": 4096,
        "reservedOutputTokens": 512,
        "safetyMarginTokens": 256,
        "recoveryReserveTokens": 256,
        "items": items,
        "sink": "provider",
        "scopeAdmissions": [{"scope": "session", "scopeId": "bench-session"}],
        "policyVersion": "bench-policy-1",
        "modelProfile": "bench-model",
        "sessionHead": "head-1",
        "memoryRevision": 0,
        "now": "2026-08-29T00:00:00.000Z",
    }

    def run() -> object:
        return plan_context(request)

    def extra() -> dict[str, Any]:
        plan = plan_context(request)
        return {"selected": len(plan["selectedItemIds"]), "dropped": len(plan["dropped"])}

    return run, extra


BUILDERS: dict[str, Callable[[int], tuple[Run, Extra]]] = {"plan": _plan}


def build(name: str, n: int) -> tuple[Run, Extra]:
    return BUILDERS[name](n)
