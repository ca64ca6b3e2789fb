"""ProviderContextProfile: resolution, legacy parity, overrides, policy-only shape."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from kernel.errors import InvalidArgument
from kernel.packets.profiles import (
    DEFAULT_PROFILE,
    BudgetPlan,
    ProviderContextProfile,
    auto_compact_tokens,
    plan_budget,
    resolve_profile,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize(
    ("provider", "model", "window", "output", "matched_by"),
    [
        ("openai", "gpt-4o", 128_000, 16_384, "exact"),
        ("openai", "gpt-4o-2024-08-06", 128_000, 16_384, "prefix"),
        ("openai", "gpt-4o-2024-05-13", 128_000, 4_096, "exact"),
        ("openai", "gpt-4o-mini", 128_000, 16_384, "exact"),
        ("openai", "gpt-4o-mini-2024-07-18", 128_000, 16_384, "prefix"),
        ("azure", "chatgpt-4o-latest", 128_000, 16_384, "exact"),
        ("anthropic", "claude-3-5-sonnet-20241022", 200_000, 8_192, "prefix"),
        ("anthropic", "claude-3.5-sonnet", 200_000, 8_192, "exact"),
        ("anthropic", "claude-3-7-sonnet-20250219", 200_000, 64_000, "prefix"),
        ("anthropic", "claude-sonnet-4-20250514", 200_000, 64_000, "prefix"),
        ("anthropic", "claude-opus-4-20250514", 200_000, 32_000, "prefix"),
        ("openrouter", "anthropic/claude-sonnet-4", 200_000, 64_000, "exact"),
        ("ollama", "llama3:8b", 8_192, 2_048, "exact"),
        ("ollama", "llama3", 8_192, 2_048, "exact"),
        ("ollama", "qwen2.5:7b", 32_768, 8_192, "prefix"),
        ("ollama", "qwen2.5-coder:14b", 32_768, 8_192, "prefix"),
        ("dashscope", "qwen2.5-72b-instruct", 131_072, 8_192, "prefix"),
        ("dashscope", "qwen-plus", 131_072, 8_192, "exact"),
        ("dashscope", "qwen-max", 32_768, 8_192, "exact"),
        ("deepseek", "deepseek-chat", 64_000, 8_192, "exact"),
        ("deepseek", "deepseek-v3", 64_000, 8_192, "exact"),
        ("ollama", "llama3.1:8b", 32_768, 4_096, "provider-default"),  # "." is no boundary
        ("openai", "some-future-model", 128_000, 16_384, "provider-default"),
        ("acme", "mystery", 32_768, 4_096, "default"),
        (None, None, 32_768, 4_096, "default"),
    ],
)
def test_resolution(
    provider: str | None, model: str | None, window: int, output: int, matched_by: str
) -> None:
    profile = resolve_profile(provider, model)
    assert (profile.context_window, profile.output_reserve, profile.matched_by) == (
        window,
        output,
        matched_by,
    )
    assert profile.source  # every number names its source


def _adaptive_captures() -> list[Any]:
    params = []
    for path in sorted(FIXTURES.glob("*/cli.compress.json")):
        capture = json.loads(path.read_text(encoding="utf-8"))
        resolved = capture["diagnostics"]["resolved_thresholds"]
        if resolved["adaptive"]:
            ctor = capture["options"]["constructor"]
            params.append(
                pytest.param(ctor["provider"], ctor["model"], resolved, id=path.parent.name)
            )
    return params


@pytest.mark.parametrize(("provider", "model", "resolved"), _adaptive_captures())
def test_profiles_agree_with_legacy_cli_windows(
    provider: str, model: str, resolved: dict[str, Any]
) -> None:
    profile = resolve_profile(provider, model)
    assert profile.context_window == resolved["contextWindow"]
    assert auto_compact_tokens(profile) == resolved["maxTokens"]  # floor(window * 0.6)


def test_plan_budget_is_the_planner_triple() -> None:
    profile = resolve_profile("openai", "gpt-4o")
    plan = plan_budget(profile)
    assert isinstance(plan, BudgetPlan)
    window, reserved, margin = plan
    assert (window, reserved, margin) == (128_000, 16_384, profile.safety_margin)
    assert plan.input_budget == window - reserved - margin > 0


def test_overrides_camel_and_snake_case() -> None:
    base = resolve_profile("openai", "gpt-4o")
    changed = resolve_profile(
        "openai", "gpt-4o", {"contextWindow": 64_000, "output_reserve": 4_096}
    )
    assert (changed.context_window, changed.output_reserve) == (64_000, 4_096)
    assert changed.tool_schema_budget == base.tool_schema_budget
    assert "overrides" in changed.source
    threshold = resolve_profile("openai", "gpt-4o", {"autoCompactThreshold": 0.8})
    assert threshold.auto_compact_threshold == 0.8
    assert resolve_profile("openai", "gpt-4o", {}) == base


@pytest.mark.parametrize(
    "overrides",
    [
        {"contextWindw": 1000},
        {"memory": "x"},
        {"history": []},
        {"contextWindow": "128000"},
        {"contextWindow": True},
        {"outputReserve": 1.5},
        {"autoCompactThreshold": 1.5},
        {"autoCompactThreshold": 0},
        {"outputReserve": -1},
        {"outputReserve": 200_000},
        {"contextWindow": 1_000, "context_window": 2_000},
    ],
)
def test_bad_overrides_are_typed_errors(overrides: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument) as err:
        resolve_profile("openai", "gpt-4o", overrides)
    assert err.value.code == "invalid_argument"


def test_unknown_override_names_the_keys() -> None:
    with pytest.raises(InvalidArgument) as err:
        resolve_profile("anthropic", "claude-opus-4", {"contextWindw": 1, "zeta": 2})
    assert err.value.details["unknownKeys"] == ["contextWindw", "zeta"]


def test_profiles_are_policy_only() -> None:
    """Switching models changes budgets, never memory/history: profiles hold no state."""
    names = {f.name for f in dataclasses.fields(ProviderContextProfile)}
    assert names == {
        "provider",
        "model",
        "context_window",
        "output_reserve",
        "tool_schema_budget",
        "safety_margin",
        "auto_compact_threshold",
        "source",
        "matched_by",
    }
    profile = resolve_profile("deepseek", "deepseek-chat")
    with pytest.raises(dataclasses.FrozenInstanceError):
        profile.context_window = 1  # type: ignore[misc]
    assert resolve_profile("deepseek", "deepseek-chat") == profile  # pure


def test_small_window_profile_still_has_input_budget() -> None:
    profile = resolve_profile("ollama", "llama3:8b")
    assert plan_budget(profile).input_budget > profile.context_window // 2
    assert DEFAULT_PROFILE.context_window == 32_768
    assert profile.to_wire()["contextWindow"] == 8_192
