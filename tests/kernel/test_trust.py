"""Trust / sensitivity / sinks (design 108 §12.1–§12.2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.errors import InvalidArgument, SinkDenied
from kernel.packets.trust import (
    SourceKind,
    TrustLabel,
    can_be_system_policy,
    check_sink,
    derive,
    intersect_sinks,
    require_sink,
    sink_allowed,
    source_trust,
    tool_source_kind,
)
from kernel.vocabulary import Sensitivity, Trust

SINK_NAMES = [
    "provider",
    "provider:openai",
    "provider:anthropic",
    "provider:openai:gpt-4o",
    "memory",
    "memory:agent",
    "log",
    "local",
    "ui",
    "telemetry",
]
sinks = st.frozensets(st.sampled_from(SINK_NAMES), max_size=6)
labels = st.builds(
    TrustLabel, st.sampled_from(list(Trust)), st.sampled_from(list(Sensitivity)), sinks
)


def test_orders_compare_by_rank_not_alphabet() -> None:
    assert Trust.UNTRUSTED < Trust.EXTERNAL < Trust.USER < Trust.VERIFIED < Trust.HOST
    assert Sensitivity.PUBLIC < Sensitivity.INTERNAL < Sensitivity.PERSONAL
    assert Sensitivity.PERSONAL < Sensitivity.SECRET < Sensitivity.RESTRICTED
    assert Trust.HOST > Trust.USER  # "host" < "user" alphabetically
    assert max([Trust.USER, Trust.HOST, Trust.EXTERNAL]) is Trust.HOST


@given(st.lists(labels, min_size=1, max_size=5))
def test_derived_trust_never_rises_and_sensitivity_never_falls(parents: list[TrustLabel]) -> None:
    child = derive(parents)
    assert all(child.trust <= p.trust for p in parents)
    assert all(child.sensitivity >= p.sensitivity for p in parents)
    assert child.trust in {p.trust for p in parents}
    assert child.sensitivity in {p.sensitivity for p in parents}


@given(st.lists(labels, min_size=1, max_size=5), st.sampled_from(SINK_NAMES))
def test_derived_sinks_only_shrink(parents: list[TrustLabel], sink: str) -> None:
    child = derive(parents)
    expected = all(sink_allowed(p.allowed_sinks, sink) for p in parents)
    assert sink_allowed(child.allowed_sinks, sink) == expected


@given(sinks, sinks)
def test_intersection_is_the_meet(a: frozenset[str], b: frozenset[str]) -> None:
    meet = intersect_sinks(a, b)
    assert meet == intersect_sinks(b, a)
    for sink in SINK_NAMES:
        assert sink_allowed(meet, sink) == (sink_allowed(a, sink) and sink_allowed(b, sink))


def test_hierarchical_sinks() -> None:
    assert intersect_sinks({"provider"}, {"provider:openai"}) == {"provider:openai"}
    assert intersect_sinks({"provider:openai"}, {"provider:anthropic"}) == frozenset()
    assert sink_allowed({"provider"}, "provider:openai:gpt-4o")
    assert not sink_allowed({"provider:openai"}, "provider")
    assert not sink_allowed({"provider"}, "providerx")


def test_derive_needs_parents() -> None:
    with pytest.raises(InvalidArgument):
        derive([])


@pytest.mark.parametrize(
    ("role", "kind", "expected"),
    [
        ("system", "host_policy", Trust.HOST),
        ("developer", "host_policy", Trust.HOST),
        ("user", "host_policy", Trust.USER),  # role caps the claim
        ("tool", "host_policy", Trust.EXTERNAL),
        ("system", "web", Trust.UNTRUSTED),  # a system role cannot lift web content
        ("system", "mcp", Trust.UNTRUSTED),
        ("system", "tool", Trust.EXTERNAL),
        ("system", "imported_memory", Trust.EXTERNAL),
        ("tool", "tool", Trust.EXTERNAL),
        ("user", "user_input", Trust.USER),
        ("assistant", "model_output", Trust.USER),
        ("system", "verified_config", Trust.VERIFIED),
        ("narrator", "user_input", Trust.UNTRUSTED),
    ],
)
def test_source_trust(role: str, kind: str, expected: Trust) -> None:
    assert source_trust(role, kind) is expected


@given(st.sampled_from(["system", "developer", "user", "assistant", "tool", "x"]))
def test_external_sources_are_never_system_policy(role: str) -> None:
    for kind in (SourceKind.WEB, SourceKind.MCP, SourceKind.TOOL, SourceKind.IMPORTED_MEMORY):
        trust = source_trust(role, kind)
        assert trust <= Trust.EXTERNAL
        assert not can_be_system_policy(trust)


def test_unknown_source_kind_is_a_caller_bug() -> None:
    with pytest.raises(InvalidArgument):
        source_trust("tool", "webpage")


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("web_fetch", SourceKind.WEB),
        ("mcp__fetch__fetch", SourceKind.MCP),
        ("web_search", SourceKind.WEB),
        ("search_files", SourceKind.TOOL),
        ("read_file", SourceKind.TOOL),
        ("run_shell", SourceKind.TOOL),
        ("edit_file", SourceKind.TOOL),
    ],
)
def test_tool_source_kind(name: str, kind: SourceKind) -> None:
    assert tool_source_kind(name) is kind


def test_check_sink_rechecks_sinks_and_classification() -> None:
    ok = TrustLabel(Trust.USER, Sensitivity.PERSONAL, frozenset({"provider"}))
    assert check_sink(ok, "provider:openai").allowed
    assert check_sink(ok, "log").reason == "sink_not_allowed"
    secret = TrustLabel(Trust.USER, Sensitivity.SECRET, frozenset({"provider", "local"}))
    result = check_sink(secret, "provider:openai")
    assert (result.allowed, result.reason) == (False, "sensitivity_exceeds_sink")
    assert check_sink(secret, "local").allowed
    with pytest.raises(SinkDenied) as err:
        require_sink(secret, "provider:openai")
    assert err.value.code == "sink_denied"
    assert err.value.details["reason"] == "sensitivity_exceeds_sink"


def test_label_validation() -> None:
    with pytest.raises(InvalidArgument):
        TrustLabel("root", Sensitivity.PUBLIC, frozenset())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        TrustLabel(Trust.USER, Sensitivity.PUBLIC, "provider")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        TrustLabel(Trust.USER, Sensitivity.PUBLIC, frozenset({"Bad Sink"}))
    label = TrustLabel("user", "public", frozenset({"provider"}))  # type: ignore[arg-type]
    assert label.trust is Trust.USER
    assert label.to_wire() == {
        "trust": "user",
        "sensitivity": "public",
        "allowedSinks": ["provider"],
    }
