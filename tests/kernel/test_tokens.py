"""Token estimators: legacy parity, CJK handling, UTF-8 bytes, determinism."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.errors import InvalidArgument
from kernel.planning.tokens import (
    DEFAULT_ESTIMATOR_NAME,
    ESTIMATORS,
    cjk_estimate,
    cjk_wide_estimate,
    get_estimator,
    utf8_byte_length,
    utf8_bytes_estimate,
    utf16_length,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("abcd", 1),
        ("abcde", 2),
        ("你好世界", 3),  # 4 / 1.5 = 2.67
        ("你好 world", 3),  # 2 / 1.5 + 6 / 4 = 2.83
        ("你好，世界", 3),  # the full-width comma is "other" for the legacy CLI
        ("龦", 1),  # U+9FA6 is outside the legacy [\u4e00-\u9fa5] class
        ("😀", 1),  # one emoji = 2 UTF-16 code units
        ("😀😀😀", 2),  # 6 code units / 4
        ("こんにちは", 2),  # kana are "other" for the legacy CLI
        ("안녕하세요", 2),
    ],
)
def test_cjk_estimate_matches_legacy_formula(text: str, expected: int) -> None:
    assert cjk_estimate(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("你好，世界", 4),  # 5 CJK incl. the full-width comma
        ("こんにちは", 4),
        ("안녕하세요", 4),
        ("㐀", 1),  # Extension A
        ("\U00020000", 1),  # Extension B counts once, not as 2 code units
        ("abcd", 1),
    ],
)
def test_cjk_wide_estimate(text: str, expected: int) -> None:
    assert cjk_wide_estimate(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("abcd", 1), ("abcde", 2), ("你", 1), ("你好", 2), ("😀", 1), ("\ud800", 1)],
)
def test_utf8_bytes_estimate(text: str, expected: int) -> None:
    assert utf8_bytes_estimate(text) == expected


def test_utf8_and_utf16_lengths_follow_javascript() -> None:
    assert utf16_length("a😀") == 3
    assert utf8_byte_length("\ud800") == 3  # lone surrogate -> U+FFFD
    assert utf8_byte_length("\ud83d\ude00") == 4  # surrogate pair joined -> one emoji


def _legacy_content(msg: dict[str, Any]) -> str:
    """The CLI's ``typeof content === "string" ? content : JSON.stringify(content || "")``."""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    return json.dumps(content or "", separators=(",", ":"), ensure_ascii=False)


def _cli_captures() -> list[Any]:
    params = []
    for path in sorted(FIXTURES.glob("*/cli.compress.json")):
        capture = json.loads(path.read_text(encoding="utf-8"))
        stats = (capture.get("output") or {}).get("stats") or {}
        if "calls" in capture or "originalTokens" not in stats:
            continue
        params.append(pytest.param(path.parent.name, stats["originalTokens"], id=path.parent.name))
    return params


@pytest.mark.parametrize(("scenario", "original_tokens"), _cli_captures())
def test_default_estimator_reproduces_legacy_cli_token_counts(
    scenario: str, original_tokens: int
) -> None:
    doc = json.loads((FIXTURES / scenario / "input.json").read_text(encoding="utf-8"))
    total = sum(cjk_estimate(_legacy_content(m)) for m in doc["messages"])
    assert total == original_tokens


def test_legacy_parity_covers_chinese_scenarios() -> None:
    ids = {p.id for p in _cli_captures()}
    assert {"long-zh-session", "mixed-zh-en", "unicode-edge-cases"} <= ids


def test_registry_and_unknown_estimator() -> None:
    assert get_estimator() is cjk_estimate
    assert ESTIMATORS[DEFAULT_ESTIMATOR_NAME] is cjk_estimate
    assert get_estimator("utf8-bytes/v1") is utf8_bytes_estimate
    with pytest.raises(InvalidArgument) as err:
        get_estimator("tiktoken")
    assert err.value.code == "invalid_argument"


@given(st.text(), st.text())
def test_estimators_are_deterministic_and_monotone(a: str, b: str) -> None:
    for estimate in ESTIMATORS.values():
        assert estimate(a) == estimate(a) >= 0
        assert estimate(a + b) >= estimate(a)
        assert estimate(a + b) <= estimate(a) + estimate(b) + 1


@given(st.text())
def test_cjk_estimate_bounds(text: str) -> None:
    units = utf16_length(text)
    assert math.ceil(units / 4) <= cjk_estimate(text) <= math.ceil(units / 1.5)
