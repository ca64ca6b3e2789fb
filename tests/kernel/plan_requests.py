"""Shared hypothesis pieces for plan requests (used by the planner property suites)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

NOW = "2026-08-29T00:00:00.000Z"
ADMISSIONS = (
    {"scope": "session", "scopeId": "s-1"},
    {"scope": "user", "scopeId": "u-1"},
    {"scope": "global"},
)


def draw_plan_request(draw: st.DrawFn, items: list[dict[str, Any]], window: int) -> dict[str, Any]:
    """A ContextPlanRequest around ``items``: budgets, sink, admissions, binding, ``now``."""
    return {
        "modelWindowTokens": window,
        "reservedOutputTokens": draw(st.integers(0, window // 4)),
        "safetyMarginTokens": draw(st.integers(0, window // 8)),
        "recoveryReserveTokens": draw(st.integers(0, window // 8)),
        "items": items,
        "sink": draw(st.sampled_from(["provider.local", "cli", "ide.vscode"])),
        "scopeAdmissions": draw(
            st.lists(
                st.sampled_from(ADMISSIONS),
                min_size=1,
                max_size=3,
                unique_by=lambda a: (a["scope"], a.get("scopeId")),
            )
        ),
        "policyVersion": "policy-1",
        "modelProfile": "model-a",
        "sessionHead": "head:1",
        "memoryRevision": 3,
        "now": draw(st.sampled_from([NOW, "2026-08-29T08:00:00+08:00", 1787961600000])),
    }
