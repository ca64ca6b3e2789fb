"""ProviderContextProfile: per-provider/model context budget policy.

A profile is *policy only*: window size, output reserve, tool-schema budget,
safety margin and auto-compaction threshold, plus a note naming the public
source of each number (full table with links in ``docs/packets.md``).  It holds
no memory, no session history and no per-conversation state, so switching the
model changes admission / truncation / compaction decisions and nothing else —
memory store, Soul and session history are untouched (design 003 §4 rule 5).

Resolution (``resolve_profile``), first hit wins:

1. ``exact``  — the normalised model name is a table key or alias
   (``claude-3-5-sonnet-latest``, ``deepseek-v3``, ``llama3:latest`` …);
2. ``prefix`` — the longest table key that prefixes the model name at a
   boundary (``-``, ``:``, ``@``, ``/``): ``claude-3-5-sonnet-20241022`` →
   ``claude-3-5-sonnet``, ``qwen2.5-coder:14b`` → ``qwen2.5`` (``.`` is *not* a
   boundary, so ``llama3.1:8b`` does not fall into ``llama3``);
3. ``provider-default`` — the provider's family default;
4. ``default`` — the global default (32,768-token window, as the legacy CLI).

Model names are normalised first: lower-cased, a ``vendor/`` prefix dropped
(``openai/gpt-4o``), and ``.`` between digits in Claude names turned into ``-``
(``claude-3.5-sonnet`` → ``claude-3-5-sonnet``).  Table entries may be tied to
providers (``qwen2.5`` is 32k locally under Ollama but 128k on DashScope).

Configuration overrides are validated: unknown keys and bad values are
``InvalidArgument``.  Keys may be camelCase (wire) or snake_case.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, NamedTuple

from kernel.errors import InvalidArgument

__all__ = (
    "DEFAULT_PROFILE",
    "OVERRIDE_KEYS",
    "BudgetPlan",
    "ProviderContextProfile",
    "auto_compact_tokens",
    "plan_budget",
    "resolve_profile",
)


@dataclass(frozen=True, slots=True)
class ProviderContextProfile:
    """Context budget policy for one provider/model (no state, no history).

    ``auto_compact_threshold`` is a fraction of the *context window* (the legacy
    CLI compacts above ``floor(window * 0.6)``); ``auto_compact_tokens`` caps it
    at the input budget.
    """

    provider: str
    model: str
    context_window: int
    output_reserve: int
    tool_schema_budget: int
    safety_margin: int
    auto_compact_threshold: float
    source: str
    matched_by: str = "exact"

    def __post_init__(self) -> None:
        for name in ("context_window", "output_reserve", "tool_schema_budget", "safety_margin"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidArgument(
                    f"profile {name} must be a non-negative integer",
                    details={"field": name},
                )
        if self.context_window <= 0:
            raise InvalidArgument("profile context_window must be positive")
        threshold = self.auto_compact_threshold
        if (
            not isinstance(threshold, (int, float))
            or isinstance(threshold, bool)
            or not math.isfinite(threshold)
            or not 0 < threshold <= 1
        ):
            raise InvalidArgument(
                "profile auto_compact_threshold must be a fraction in (0, 1]",
                details={"field": "auto_compact_threshold"},
            )
        reserved = self.output_reserve + self.safety_margin + self.tool_schema_budget
        if reserved >= self.context_window:
            raise InvalidArgument(
                "output reserve + safety margin + tool schema budget leave no input budget",
                details={
                    "contextWindow": self.context_window,
                    "outputReserve": self.output_reserve,
                    "safetyMargin": self.safety_margin,
                    "toolSchemaBudget": self.tool_schema_budget,
                },
            )

    def to_wire(self) -> dict[str, object]:
        return {
            "provider": self.provider,
            "model": self.model,
            "contextWindow": self.context_window,
            "outputReserve": self.output_reserve,
            "toolSchemaBudget": self.tool_schema_budget,
            "safetyMargin": self.safety_margin,
            "autoCompactThreshold": self.auto_compact_threshold,
            "source": self.source,
            "matchedBy": self.matched_by,
        }


class BudgetPlan(NamedTuple):
    """``(window, reserved_output, safety_margin)`` for the context planner."""

    window: int
    reserved_output: int
    safety_margin: int

    @property
    def input_budget(self) -> int:
        """``window - reserved output - safety margin`` (design 108 §7)."""
        return self.window - self.reserved_output - self.safety_margin


def plan_budget(profile: ProviderContextProfile) -> BudgetPlan:
    """The numbers the planner subtracts: model window, output reserve, safety margin."""
    return BudgetPlan(profile.context_window, profile.output_reserve, profile.safety_margin)


def auto_compact_tokens(profile: ProviderContextProfile) -> int:
    """Input tokens above which auto-compaction triggers (capped at the input budget)."""
    trigger = math.floor(profile.context_window * profile.auto_compact_threshold)
    return min(trigger, plan_budget(profile).input_budget)


# --------------------------------------------------------------------------- table

#: Default auto-compaction threshold: the legacy CLI's ``tokenFactor`` 0.6.
_THRESHOLD: Final = 0.6


def _margin(window: int) -> int:
    """Safety margin policy: 5 % of the window (estimator error), at least 256 tokens."""
    return max(256, window // 20)


def _tool_budget(window: int) -> int:
    """Tool-schema ceiling policy: 10 % of the window, at most 16,384 tokens."""
    return min(16_384, window // 10)


@dataclass(frozen=True, slots=True)
class _Entry:
    key: str
    providers: frozenset[str] | None  # None: any provider
    window: int
    output_reserve: int
    source: str
    aliases: tuple[str, ...] = ()

    def profile(self, provider: str, model: str, matched_by: str) -> ProviderContextProfile:
        return ProviderContextProfile(
            provider=provider,
            model=model,
            context_window=self.window,
            output_reserve=self.output_reserve,
            tool_schema_budget=_tool_budget(self.window),
            safety_margin=_margin(self.window),
            auto_compact_threshold=_THRESHOLD,
            source=self.source,
            matched_by=matched_by,
        )


_OPENAI_DOC = "OpenAI model docs platform.openai.com/docs/models/{}"
_ANTHROPIC_DOC = "Anthropic models overview docs.anthropic.com/en/docs/about-claude/models"

_ENTRIES: Final[tuple[_Entry, ...]] = (
    # OpenAI GPT-4o family: 128,000 window, 16,384 max output.
    _Entry(
        "gpt-4o",
        None,
        128_000,
        16_384,
        _OPENAI_DOC.format("gpt-4o"),
        ("chatgpt-4o-latest", "gpt-4o-latest"),
    ),
    _Entry("gpt-4o-mini", None, 128_000, 16_384, _OPENAI_DOC.format("gpt-4o-mini")),
    # The first GPT-4o snapshot only returned 4,096 output tokens.
    _Entry("gpt-4o-2024-05-13", None, 128_000, 4_096, _OPENAI_DOC.format("gpt-4o")),
    # Anthropic Claude: 200,000 window; max output differs per model.
    _Entry(
        "claude-3-5-sonnet",
        None,
        200_000,
        8_192,
        _ANTHROPIC_DOC + " (Claude 3.5 Sonnet)",
        ("claude-3-5-sonnet-latest", "claude-sonnet-3-5"),
    ),
    _Entry(
        "claude-3-7-sonnet",
        None,
        200_000,
        64_000,
        _ANTHROPIC_DOC + " (Claude 3.7 Sonnet)",
        ("claude-3-7-sonnet-latest", "claude-sonnet-3-7"),
    ),
    _Entry(
        "claude-sonnet-4",
        None,
        200_000,
        64_000,
        _ANTHROPIC_DOC + " (Claude Sonnet 4)",
        ("claude-4-sonnet", "claude-sonnet-4-0"),
    ),
    _Entry(
        "claude-opus-4",
        None,
        200_000,
        32_000,
        _ANTHROPIC_DOC + " (Claude Opus 4)",
        ("claude-4-opus", "claude-opus-4-0"),
    ),
    # Meta Llama 3 8B: 8,192-token context (model card); output shares the window.
    _Entry(
        "llama3:8b",
        None,
        8_192,
        2_048,
        "Meta Llama 3 model card github.com/meta-llama/llama3/blob/main/MODEL_CARD.md "
        "(context length 8k); output reserve is policy (25% of window)",
        (
            "llama3",
            "llama3:latest",
            "llama3:instruct",
            "llama-3-8b",
            "llama-3-8b-instruct",
            "meta-llama-3-8b",
            "meta-llama-3-8b-instruct",
            "llama3-8b",
            "llama3-8b-8192",
        ),
    ),
    # Qwen2.5 local (Ollama / self-hosted default config): 32,768.
    _Entry(
        "qwen2.5",
        frozenset({"ollama", "local", "vllm", "lmstudio"}),
        32_768,
        8_192,
        "Qwen2.5 model cards huggingface.co/Qwen (config.json default 32,768; generation "
        "8,192) and ollama.com/library/qwen2.5",
    ),
    # Qwen2.5 hosted (DashScope / Model Studio) and the commercial qwen-plus/turbo: 131,072.
    _Entry(
        "qwen2.5",
        frozenset({"dashscope", "alibaba", "aliyun", "qwen"}),
        131_072,
        8_192,
        "Alibaba Cloud Model Studio models list alibabacloud.com/help/en/model-studio/models "
        "(Qwen2.5 hosted 131,072; max output 8,192)",
    ),
    _Entry(
        "qwen-plus",
        None,
        131_072,
        8_192,
        "Alibaba Cloud Model Studio models list (qwen-plus 131,072 / 8,192); legacy CLI table",
    ),
    _Entry(
        "qwen-turbo",
        None,
        131_072,
        8_192,
        "Alibaba Cloud Model Studio models list (qwen-turbo); legacy CLI table 131,072",
    ),
    _Entry(
        "qwen-max",
        None,
        32_768,
        8_192,
        "Alibaba Cloud Model Studio models list (qwen-max 32,768 / 8,192); legacy CLI table",
    ),
    # DeepSeek V3 (deepseek-chat): 64K context, 8K max output.
    _Entry(
        "deepseek-chat",
        None,
        64_000,
        8_192,
        "DeepSeek API docs api-docs.deepseek.com/quick_start/pricing (deepseek-chat = "
        "DeepSeek-V3: 64K context, max output 8K); legacy CLI table 64000",
        ("deepseek-v3",),
    ),
    _Entry(
        "deepseek-reasoner",
        None,
        64_000,
        8_192,
        "DeepSeek API docs (deepseek-reasoner = DeepSeek-R1: 64K context, 8K output)",
        ("deepseek-r1",),
    ),
)

_PROVIDER_DEFAULTS: Final[Mapping[str, _Entry]] = MappingProxyType(
    {
        "openai": _Entry("openai", None, 128_000, 16_384, "provider default: GPT-4o family"),
        "anthropic": _Entry(
            "anthropic",
            None,
            200_000,
            8_192,
            "provider default: Claude 200K window, conservative 8,192 output reserve",
        ),
        "deepseek": _Entry("deepseek", None, 64_000, 8_192, "provider default: deepseek-chat"),
        "dashscope": _Entry("dashscope", None, 131_072, 8_192, "provider default: qwen-plus"),
        "ollama": _Entry(
            "ollama", None, 32_768, 4_096, "provider default: legacy CLI ollama window 32768"
        ),
    }
)

_DEFAULT_ENTRY: Final = _Entry(
    "default",
    None,
    32_768,
    4_096,
    "global default: legacy CLI getContextWindow() fallback 32768; 4,096 output reserve policy",
)

#: The profile used when neither model nor provider is known.
DEFAULT_PROFILE: Final = _DEFAULT_ENTRY.profile("unknown", "unknown", "default")

_PROVIDER_ALIASES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "azure": "openai",
        "azure-openai": "openai",
        "claude": "anthropic",
        "bedrock-anthropic": "anthropic",
        "qwen": "dashscope",
        "alibaba": "dashscope",
        "aliyun": "dashscope",
    }
)

_BOUNDARY: Final = frozenset("-:@/")
_CLAUDE_DOT: Final = re.compile(r"(?<=\d)\.(?=\d)")


def _normalise_provider(provider: str | None) -> str:
    p = (provider or "").strip().lower()
    return _PROVIDER_ALIASES.get(p, p)


def _normalise_model(model: str | None) -> str:
    m = (model or "").strip().lower()
    if "/" in m:
        m = m.rsplit("/", 1)[1]
    if m.startswith("claude"):
        m = _CLAUDE_DOT.sub("-", m)
    return m


def _provider_ok(entry: _Entry, provider: str) -> bool:
    return entry.providers is None or provider in entry.providers


def _lookup(provider: str, model: str) -> tuple[_Entry, str] | None:
    if not model:
        return None
    # Provider-specific entries first, then provider-agnostic ones.
    candidates = sorted(
        (e for e in _ENTRIES if _provider_ok(e, provider)),
        key=lambda e: e.providers is None,
    )
    for entry in candidates:
        if model == entry.key or model in entry.aliases:
            return entry, "exact"
    best: _Entry | None = None
    for entry in candidates:
        key = entry.key
        at_boundary = len(model) > len(key) and model[len(key)] in _BOUNDARY
        if at_boundary and model.startswith(key) and (best is None or len(key) > len(best.key)):
            best = entry
    return (best, "prefix") if best is not None else None


#: Accepted override keys (camelCase wire name -> field name); snake_case also accepted.
OVERRIDE_KEYS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "contextWindow": "context_window",
        "outputReserve": "output_reserve",
        "toolSchemaBudget": "tool_schema_budget",
        "safetyMargin": "safety_margin",
        "autoCompactThreshold": "auto_compact_threshold",
    }
)
_FIELDS: Final = frozenset(OVERRIDE_KEYS.values())


def _apply_overrides(
    profile: ProviderContextProfile, overrides: Mapping[str, object]
) -> ProviderContextProfile:
    if not isinstance(overrides, Mapping):
        raise InvalidArgument("profile overrides must be a mapping")
    fields: dict[str, str] = {}
    unknown: list[str] = []
    for raw_key in overrides:
        key = str(raw_key)
        field = OVERRIDE_KEYS.get(key, key if key in _FIELDS else None)
        if field is None:
            unknown.append(key)
        elif field in fields.values():
            raise InvalidArgument(f"profile override {field!r} given twice", details={"key": key})
        else:
            fields[key] = field
    if unknown:
        raise InvalidArgument(
            "unknown profile override keys",
            details={"unknownKeys": sorted(unknown), "allowedKeys": sorted(OVERRIDE_KEYS)},
        )
    changes: dict[str, int | float] = {}
    for key, field in fields.items():
        value = overrides[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            ok = False
        elif field == "auto_compact_threshold":
            ok = True
        else:
            ok = isinstance(value, int)
        if not ok:
            raise InvalidArgument(
                f"profile override {key!r} has the wrong type",
                details={"key": key, "type": type(value).__name__},
            )
        assert isinstance(value, (int, float))
        changes[field] = value
    if not changes:
        return profile
    return ProviderContextProfile(
        provider=profile.provider,
        model=profile.model,
        context_window=int(changes.get("context_window", profile.context_window)),
        output_reserve=int(changes.get("output_reserve", profile.output_reserve)),
        tool_schema_budget=int(changes.get("tool_schema_budget", profile.tool_schema_budget)),
        safety_margin=int(changes.get("safety_margin", profile.safety_margin)),
        auto_compact_threshold=float(
            changes.get("auto_compact_threshold", profile.auto_compact_threshold)
        ),
        source=f"{profile.source}; overrides: {', '.join(sorted(changes))}",
        matched_by=profile.matched_by,
    )


def resolve_profile(
    provider: str | None,
    model: str | None,
    overrides: Mapping[str, object] | None = None,
) -> ProviderContextProfile:
    """Resolve the budget profile for ``provider``/``model``, then apply ``overrides``.

    Never fails on an unknown model (falls back to the provider or global
    default and says so in ``matched_by``); fails with ``InvalidArgument`` on an
    unknown override key or an invalid override value.
    """
    prov = _normalise_provider(provider)
    norm = _normalise_model(model)
    shown_provider = prov or "unknown"
    shown_model = (model or "").strip() or "unknown"
    found = _lookup(prov, norm)
    if found is not None:
        entry, how = found
        profile = entry.profile(shown_provider, shown_model, how)
    elif prov in _PROVIDER_DEFAULTS:
        profile = _PROVIDER_DEFAULTS[prov].profile(shown_provider, shown_model, "provider-default")
    else:
        profile = _DEFAULT_ENTRY.profile(shown_provider, shown_model, "default")
    if overrides is not None:
        profile = _apply_overrides(profile, overrides)
    return profile
