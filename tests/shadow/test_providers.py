"""Recorded providers: cassette replay of every provider outcome (shadow/providers/)."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from kernel.adapters.in_memory.session import InMemorySessionPort
from kernel.compaction.service import CompactionKernel
from kernel.ports import SummarizerFailure, SummaryCancelled
from shadow.errors import InputError, SideEffectError
from shadow.projection import content_digest
from shadow.providers import (
    CLI_ENTRY,
    DESKTOP_ENTRY,
    FALLBACK_STRATEGY,
    HANDOFF_FIELDS,
    OpenAICompatClient,
    ProviderOutcome,
    cassettes,
    chat_request,
    importer,
    legacy_exchanges,
    parse_handoff,
    replay_exchange,
    replay_legacy_call,
    summarizer_for_scenario,
)
from shadow.providers.openai_compat import (
    DEFAULT_TIMEOUT,
    ProviderConfigError,
    outcome_from_error,
    outcome_from_response,
    text_digest,
)
from tests.conformance.session_harness import T0, conversation, items_for

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
RECORDINGS = ROOT / "recordings"
SID = "session-provider"
KERNEL_REQUEST: dict[str, Any] = {
    "sessionId": SID,
    "modelWindowTokens": 2000,
    "reservedOutputTokens": 100,
    "safetyMarginTokens": 20,
    "recoveryReserveTokens": 20,
    "partitionCeilings": {"conversation": 400},
    "sink": "provider.local",
    "scopeAdmissions": [{"scope": "session", "scopeId": SID}],
    "policyVersion": "policy-1",
    "modelProfile": "model-1",
}
#: Strings of the captured prompts and secrets that must never reach a cassette.
NEVER_RECORDED = (
    "Create a durable conversation handoff",
    "请总结以下对话历史",
    "hunter2",
    "sk-proj4XyZ9aB3cD7eF1gH5iJ0kL2mN6o",
    "whsec_9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
    "authorization",
    "api-key",
    "cookie",
)


def fixture_doc(scenario: str) -> dict[str, Any]:
    return json.loads((FIXTURES / scenario / "input.json").read_bytes().decode("utf-8"))


def scenarios_with_exchanges() -> list[str]:
    return sorted(p.parent.name for p in FIXTURES.glob("*/input.json")
                  if fixture_doc(p.parent.name).get("provider_responses"))


def write_cassette(root: Path, doc: dict[str, Any]) -> Path:
    """A synthetic recording made by the importer from an edited capture."""
    root.mkdir(parents=True, exist_ok=True)
    cassette = importer.cassette_document(doc, doc["scenario"])
    assert cassette is not None
    (root / f"{doc['scenario']}.yaml").write_bytes(importer.render(cassette))
    return root


def with_cli_answer(scenario: str, *, content: Any = None, error: Any = None,
                    usage: Any = "keep") -> dict[str, Any]:
    doc = copy.deepcopy(fixture_doc("provider-summary-ok"))
    doc["scenario"] = scenario
    cli = doc["provider_responses"][0]
    if error is not None:
        cli["response"], cli["error"] = None, error
    else:
        cli["response"]["message"]["content"] = content
        if usage != "keep":
            cli["response"]["usage"] = usage
    return doc


def handoff(**overrides: Any) -> dict[str, Any]:
    out: dict[str, Any] = {k: [] for k in HANDOFF_FIELDS}
    out["objective"] = "Ship the fix"
    out.update(overrides)
    return out


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.glob("*.yaml"))}


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Block every socket connect; the returned list records attempts (must stay empty)."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args[1:2] or args[:1])
        raise OSError("network access is blocked in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def test_the_network_guard_blocks_real_connections(no_network: list[Any]) -> None:
    with httpx.Client(transport=httpx.HTTPTransport(retries=0)) as http, pytest.raises(
            httpx.ConnectError):
        http.get("http://127.0.0.1:9/")
    assert no_network  # the guard saw (and refused) the attempt


# --------------------------------------------------------------------------- importer


def test_one_cassette_per_scenario_with_provider_exchanges() -> None:
    assert sorted(p.stem for p in RECORDINGS.glob("*.yaml")) == scenarios_with_exchanges()
    assert len(scenarios_with_exchanges()) >= 10


def test_committed_recordings_are_what_the_importer_builds() -> None:
    result = importer.build(FIXTURES, RECORDINGS, check=True)
    assert result.ok, f"run `python -m shadow.providers.importer fixtures recordings`: {result}"


def test_importer_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    assert importer.main([str(FIXTURES), str(first)]) == 0
    assert importer.main([str(FIXTURES), str(second)]) == 0
    assert digests(first) == digests(second) == digests(RECORDINGS)
    again = importer.build(FIXTURES, first)
    assert again.written == () and len(again.unchanged) == len(digests(first))
    assert importer.main([str(FIXTURES), str(first), "--check"]) == 0
    for path in first.glob("*.yaml"):
        raw = path.read_bytes()
        assert b"\r" not in raw and raw.endswith(b"\n")
        raw.decode("utf-8")
    capsys.readouterr()


def test_importer_check_reports_and_build_removes_stale_cassettes(tmp_path: Path) -> None:
    out = tmp_path / "rec"
    importer.build(FIXTURES, out)
    orphan = out / "gone-scenario.yaml"
    orphan.write_bytes((out / "provider-failure.yaml").read_bytes())
    (out / "provider-summary-ok.yaml").write_bytes(b"version: 1\n")
    (out / "notes.yaml").write_text("not a cassette\n", encoding="utf-8")
    check = importer.build(FIXTURES, out, check=True)
    assert not check.ok and set(check.stale) == {"gone-scenario.yaml", "provider-summary-ok.yaml"}
    assert orphan.exists()
    result = importer.build(FIXTURES, out)
    assert result.removed == ("gone-scenario.yaml",) and not orphan.exists()
    assert (out / "notes.yaml").exists() and importer.build(FIXTURES, out, check=True).ok


def test_importer_rejects_a_bad_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "input.json").write_text("{", encoding="utf-8")
    assert importer.main([str(tmp_path), str(tmp_path / "out")]) == 2
    assert "input.json" in capsys.readouterr().err


@pytest.mark.parametrize("path", sorted(RECORDINGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_cassettes_hold_digests_and_scrubbed_headers_only(path: Path) -> None:
    text = path.read_bytes().decode("utf-8")
    for needle in NEVER_RECORDED:
        assert needle.lower() not in text.lower(), needle
    doc = cassettes.load_cassette(path)
    assert doc is not None and doc["metadata"]["scenario"] == path.stem
    for interaction in doc["interactions"]:
        request = interaction["request"]
        assert request["body"].startswith(cassettes.MARKER_PREFIX)
        assert (request["method"], request["uri"]) == ("POST", cassettes.CHAT_URI)
        assert set(request["headers"]) <= {"content-type", "x-shadow-call", "x-shadow-entry",
                                           "x-shadow-surface", "x-shadow-variant"}
        assert set(interaction["response"]["headers"]) <= {
            "content-type", cassettes.FAULT_HEADER, cassettes.FAULT_CODE_HEADER}
    from vcr.serialize import deserialize
    from vcr.serializers import yamlserializer

    requests, responses, meta = deserialize(text, yamlserializer)  # vcrpy reads it as is
    assert len(requests) == len(responses) == len(doc["interactions"]) and meta == doc["metadata"]


# --------------------------------------------------------------------------- outcomes

EXPECTED = {  # scenario -> (status, usage, reason, truth) of every exchange it recorded
    "provider-summary-ok": ("committed", "settled", None, "ok"),
    "provider-invalid-json": ("degraded", "settled", "summary_invalid_json", "invalid"),
    "provider-failure": ("degraded", "none", "provider_unavailable", "error"),
    "provider-usage-unknown": (
        "reconciliation_required", "unknown", "provider_usage_unsettled", "no-usage"),
    "provider-cancelled": ("aborted", "none", "cancelled", "cancelled"),
    "secrets-in-tool-output": ("committed", "settled", None, "ok"),
    "prompt-injection-web-fetch": ("degraded", "settled", "summary_invalid_json", "invalid"),
    "windows-paths": ("degraded", "none", "provider_unavailable", "error"),
    "replay-cc-summary": ("committed", "settled", None, "ok"),
    "two-successive-compactions": ("committed", "settled", None, "ok"),
    "large-tool-output-1mib": ("committed", "settled", None, "ok"),
}


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_every_recorded_exchange_replays_to_its_outcome(scenario: str,
                                                        no_network: list[Any]) -> None:
    doc = fixture_doc(scenario)
    exchanges = legacy_exchanges(doc)
    assert exchanges
    for x in exchanges:
        outcome = replay_legacy_call(RECORDINGS, doc, x.surface, x.entry, x.call,
                                     variant=x.variant)
        status, usage, reason, truth = EXPECTED[scenario]
        assert (outcome.status, outcome.usage, outcome.reason, outcome.truth) == (
            status, usage, reason, truth), (x.surface, x.call)
        assert outcome.fallback == (FALLBACK_STRATEGY if status == "degraded" else None)
        assert (outcome.handoff is not None) == (status == "committed")
        if outcome.usage == "settled":
            assert outcome.usage_receipt and outcome.usage_receipt["inputTokens"] > 0
        else:
            assert not outcome.usage_receipt
    assert no_network == []


def test_recorded_answer_is_the_one_the_legacy_consumed() -> None:
    doc = fixture_doc("provider-summary-ok")
    cli = replay_legacy_call(RECORDINGS, doc, "cli", CLI_ENTRY, 1)
    legacy = doc["provider_responses"][0]["response"]
    assert cli.content == legacy["message"]["content"]
    assert cli.call_id == legacy["callId"] and cli.model == legacy["model"]
    assert cli.usage_receipt is not None
    assert (cli.usage_receipt["inputTokens"], cli.usage_receipt["outputTokens"]) == (2875, 214)
    assert cli.content_digest == content_digest(cli.content) == text_digest(cli.content)
    desktop = replay_legacy_call(RECORDINGS, doc, "desktop", DESKTOP_ENTRY, 1)
    assert desktop.content == doc["provider_responses"][1]["response"]["text"]
    assert desktop.request_digest != cli.request_digest


def test_schema_mismatch_is_degraded_and_names_fields_only(tmp_path: Path) -> None:
    bad = handoff(tests="npm test passed", extra=["x"])
    del bad["nextSteps"]
    doc = with_cli_answer("synthetic-schema", content=json.dumps(bad))
    rec = write_cassette(tmp_path, doc)
    outcome = replay_legacy_call(rec, doc, "cli", CLI_ENTRY, 1)
    assert (outcome.status, outcome.reason, outcome.usage) == (
        "degraded", "summary_schema_mismatch", "settled")
    assert outcome.fallback == FALLBACK_STRATEGY and outcome.handoff is None
    # an unknown key is counted, never echoed: a provider chooses it (it may hold anything)
    assert outcome.detail == {"missing": ["nextSteps"], "unknown": 1, "mistyped": ["tests"]}
    assert "npm test passed" not in repr(outcome) + json.dumps(outcome.to_wire())


@pytest.mark.parametrize("content", ["[1, 2]", '"just text"', "", "```json\n{}\n```"])
def test_non_object_answers_are_invalid_json(tmp_path: Path, content: str) -> None:
    doc = with_cli_answer("synthetic-invalid", content=content)
    outcome = replay_legacy_call(write_cassette(tmp_path, doc), doc, "cli", CLI_ENTRY, 1)
    assert (outcome.status, outcome.reason, outcome.truth) == (
        "degraded", "summary_invalid_json", "invalid")


def test_not_metered_provider_settles_without_usage() -> None:
    doc = fixture_doc("provider-usage-unknown")
    metered = replay_legacy_call(RECORDINGS, doc, "cli", CLI_ENTRY, 1)
    local = replay_legacy_call(RECORDINGS, doc, "cli", CLI_ENTRY, 1, metered=False)
    assert metered.status == "reconciliation_required"
    assert (local.status, local.usage) == ("committed", "not_metered")
    assert local.usage_receipt is not None and local.usage_receipt["outcome"] == "not_metered"
    assert "inputTokens" not in local.usage_receipt


@pytest.mark.parametrize(
    ("error", "status", "usage", "reason"),
    [
        ({"name": "Error", "code": "ETIMEDOUT"}, "reconciliation_required", "unknown",
         "provider_outcome_unknown"),
        ({"name": "Error", "message": "socket hang up", "code": "ECONNRESET"},
         "reconciliation_required", "unknown", "provider_outcome_unknown"),
        ({"name": "Error", "code": "ENOTFOUND"}, "degraded", "none", "provider_unavailable"),
        ({"name": "APIError", "status": 429, "code": "rate_limit_exceeded"}, "degraded", "none",
         "provider_http_error"),
        ({"name": "APIError", "status": 504}, "reconciliation_required", "unknown",
         "provider_outcome_unknown"),
    ],
)
def test_error_conventions(tmp_path: Path, error: dict[str, Any], status: str, usage: str,
                           reason: str, no_network: list[Any]) -> None:
    doc = with_cli_answer("synthetic-error", error=error)
    outcome = replay_legacy_call(write_cassette(tmp_path, doc), doc, "cli", CLI_ENTRY, 1)
    assert (outcome.status, outcome.usage, outcome.reason) == (status, usage, reason)
    assert no_network == []


def test_replay_matches_a_canonical_body_never_headers() -> None:
    doc = fixture_doc("provider-summary-ok")
    body = chat_request(legacy_exchanges(doc, "cli", CLI_ENTRY)[0], "gpt-4o")
    reordered = json.loads(json.dumps(dict(reversed(list(body.items())))))
    assert replay_exchange(RECORDINGS, "provider-summary-ok", reordered).status == "committed"
    client = cassettes.ReplayClient(api_key="sk-test-not-a-real-key",
                                    recordings_dir=str(RECORDINGS),
                                    scenario="provider-summary-ok")
    assert client.complete(body).status == "committed"  # an Authorization header is ignored
    assert "sk-test" not in repr(client)


# --------------------------------------------------------------------------- side effects


def test_missing_recording_is_a_side_effect_without_network(no_network: list[Any]) -> None:
    doc = fixture_doc("provider-summary-ok")
    body = chat_request(legacy_exchanges(doc, "cli", CLI_ENTRY)[0], "gpt-4o")
    body["messages"][0]["content"] += "\nhunter2 one more turn"
    with pytest.raises(SideEffectError) as info:
        replay_exchange(RECORDINGS, "provider-summary-ok", body)
    assert info.value.code == "shadow.side_effect"
    message = str(info.value)
    assert "provider-summary-ok" in message and "sha256:" in message
    assert "hunter2" not in message and "durable" not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__
    with pytest.raises(SideEffectError):  # no cassette at all for this scenario
        replay_exchange(RECORDINGS, "short-session", body)
    with pytest.raises(SideEffectError):  # nothing recorded for a third call
        replay_legacy_call(RECORDINGS, fixture_doc("two-successive-compactions"), "cli",
                           CLI_ENTRY, 3)
    assert no_network == []


def test_replay_transport_cannot_reach_the_network_even_without_a_cassette(
        no_network: list[Any]) -> None:
    transport = cassettes.RecordedFaultTransport("any")
    with httpx.Client(transport=transport) as http, pytest.raises(SideEffectError):
        http.post("https://api.openai.com/v1/chat/completions", json={"model": "m"})
    assert no_network == []


def test_replay_is_read_only(tmp_path: Path, no_network: list[Any]) -> None:
    before = digests(RECORDINGS)
    for scenario in EXPECTED:
        doc = fixture_doc(scenario)
        for x in legacy_exchanges(doc):
            replay_legacy_call(RECORDINGS, doc, x.surface, x.entry, x.call, variant=x.variant)
        with pytest.raises(SideEffectError):
            replay_exchange(RECORDINGS, scenario, {"model": "m", "messages": []})
    assert digests(RECORDINGS) == before
    with pytest.raises(cassettes.ReadOnlyRecording):
        cassettes._ReadOnlyPersister.save_cassette(tmp_path / "x.yaml", {}, None)
    assert not (tmp_path / "x.yaml").exists() and no_network == []


def test_a_broken_cassette_is_an_input_error_not_a_missing_recording(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("interactions: [\n", encoding="utf-8")
    (tmp_path / "foreign.yaml").write_text(yaml.safe_dump({"version": 1, "interactions": []}),
                                           encoding="utf-8")
    for name in ("bad", "foreign"):
        with pytest.raises(InputError):
            replay_exchange(tmp_path, name, {"model": "m"})
    doc = with_cli_answer("odd-fault", error={"name": "Error", "code": "ECONNREFUSED"})
    write_cassette(tmp_path, doc)
    path = tmp_path / "odd-fault.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("- connect-error", "- teleport"),
                    encoding="utf-8")
    with pytest.raises(InputError):
        replay_legacy_call(tmp_path, doc, "cli", CLI_ENTRY, 1)
    with pytest.raises(InputError):
        cassettes.cassette_path(tmp_path, "../escape")


# --------------------------------------------------------------------------- kernel summarizer


def compact(scenario: str, *, allow_fallback: bool = True, **kwargs: Any
            ) -> tuple[dict[str, Any], InMemorySessionPort, Any]:
    port = InMemorySessionPort()
    port.seed(SID, head="head:1", items=items_for(SID, conversation(14)))
    ids = itertools.count(1)
    kernel = CompactionKernel(port, clock=lambda: T0, new_id=lambda: f"id-{next(ids):03d}")
    summarizer = summarizer_for_scenario(RECORDINGS, scenario, fixtures_dir=FIXTURES, **kwargs)
    request = {**KERNEL_REQUEST, "operationId": "op-1", "summarizer": summarizer,
               "allowFallback": allow_fallback}
    return kernel.compact_context(request), port, summarizer


def test_kernel_commits_a_provider_backed_summary(no_network: list[Any]) -> None:
    receipt, port, summarizer = compact("provider-summary-ok")
    (event,) = port.compaction_events(SID)
    assert receipt["status"] == "committed" and event["strategy"] == "provider-backed"
    assert event["usageReceipt"]["outcome"] == "settled"
    assert event["usageReceipt"]["callId"] == "chatcmpl-9x8Y7z6W5v4U3t2S1r0Q"
    summaries = [i for i in receipt["selectedItemIds"] if i.startswith("summary-")]
    assert len(summaries) == 1
    item = port.read_snapshot(SID).items  # type: ignore[union-attr]
    (summary,) = [i for i in item if i["itemId"] == summaries[0]]
    assert summary["trust"] == "untrusted" and summary["provenance"]["parentDigests"]
    assert json.loads(summary["content"])["objective"].startswith("Fix the flaky checkout")
    assert [o.status for o in summarizer.outcomes] == ["committed"] and no_network == []


def test_kernel_degrades_on_invalid_json_and_keeps_the_paid_usage() -> None:
    receipt, port, _ = compact("provider-invalid-json", allow_fallback=False)
    (event,) = port.compaction_events(SID)
    assert receipt["status"] == "degraded" and event["strategy"] == FALLBACK_STRATEGY
    assert event["usageReceipt"]["outcome"] == "settled"
    assert not [i for i in receipt["selectedItemIds"] if i.startswith("summary-")]


def test_kernel_falls_back_on_provider_failure_only_when_allowed() -> None:
    receipt, port, summarizer = compact("provider-failure")
    (event,) = port.compaction_events(SID)
    assert receipt["status"] == "degraded" and event["strategy"] == FALLBACK_STRATEGY
    assert summarizer.outcomes[0].reason == "provider_unavailable"
    with pytest.raises(SummarizerFailure) as info:
        compact("provider-failure", allow_fallback=False)
    assert info.value.code == "provider_unavailable" and not info.value.outcome_unknown


def test_kernel_requires_reconciliation_when_usage_is_unknown() -> None:
    receipt, port, summarizer = compact("provider-usage-unknown")
    assert receipt["status"] == "reconciliation_required"
    assert port.compaction_events(SID) == [] and port.reconciliations(SID) == [receipt]
    assert summarizer.calls == 1  # never silently retried


def test_kernel_aborts_on_cancellation() -> None:
    with pytest.raises(SummaryCancelled) as info:
        compact("provider-cancelled")
    lifecycle = info.value.compaction_lifecycle  # type: ignore[attr-defined]
    assert lifecycle[-1]["state"] == "aborted"


def test_successive_calls_consume_successive_recordings_then_fail_closed() -> None:
    summarizer = summarizer_for_scenario(RECORDINGS, "two-successive-compactions",
                                         fixtures_dir=FIXTURES)
    parents = items_for(SID, conversation(4))
    context = {"operationId": "op-2"}
    first, second = summarizer(parents, context), summarizer(parents, context)
    assert first["items"][0]["content"] != second["items"][0]["content"]
    assert [o.usage_receipt["inputTokens"] for o in summarizer.outcomes  # type: ignore[index]
            ] == [2875, 1640]
    with pytest.raises(SideEffectError):
        summarizer(parents, context)  # the kernel's own request: never recorded
    assert [s["call"] for s in summarizer.side_effects] == [3]


def test_summarizer_refuses_a_forbidden_sink_before_any_request() -> None:
    summarizer = summarizer_for_scenario(RECORDINGS, "provider-summary-ok",
                                         fixtures_dir=FIXTURES, sink="provider.openai")
    parents = [dict(i, allowedSinks=["local"]) for i in items_for(SID, conversation(2))]
    with pytest.raises(SummarizerFailure) as info:
        summarizer(parents, {"operationId": "op"})
    assert info.value.code == "sink_denied" and summarizer.calls == 0


# --------------------------------------------------------------------------- live client


def test_live_client_maps_http_and_transport_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = {"id": "c1", "model": "m", "choices": [{"message": {
            "role": "assistant", "content": json.dumps(handoff())}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4}}
        return httpx.Response(200, json=body)

    monkeypatch.setenv("SHADOW_TEST_KEY", "sk-live-test-key")
    client = OpenAICompatClient.from_env(api_key_env="SHADOW_TEST_KEY",
                                         base_url="https://llm.example/v1",
                                         transport=httpx.MockTransport(answer))
    outcome = client.complete({"model": "m", "messages": []})
    assert outcome.status == "committed" and outcome.call_id == "c1"
    assert seen[0].headers["authorization"] == "Bearer sk-live-test-key"
    assert seen[0].url.path == "/v1/chat/completions"
    assert "sk-live" not in repr(client) + repr(outcome)
    with client.session() as http:
        assert http.timeout == DEFAULT_TIMEOUT and not http.follow_redirects
    monkeypatch.delenv("SHADOW_TEST_KEY")
    with pytest.raises(ProviderConfigError, match="SHADOW_TEST_KEY"):
        OpenAICompatClient.from_env(api_key_env="SHADOW_TEST_KEY")

    def boom(error: Exception) -> OpenAICompatClient:
        def handler(request: httpx.Request) -> httpx.Response:
            raise error
        return OpenAICompatClient(transport=httpx.MockTransport(handler))

    request = httpx.Request("POST", "https://x")
    cases = [
        (httpx.ConnectError("refused", request=request), "degraded"),
        (httpx.ConnectTimeout("slow", request=request), "degraded"),
        (httpx.ReadTimeout("lost", request=request), "reconciliation_required"),
        (httpx.RemoteProtocolError("reset", request=request), "reconciliation_required"),
        (httpx.WriteError("half sent", request=request), "reconciliation_required"),
    ]
    for error, status in cases:
        assert boom(error).complete({"model": "m"}).status == status, type(error).__name__
    cancelled = OpenAICompatClient(transport=httpx.MockTransport(answer))
    seen.clear()
    assert cancelled.complete({"model": "m"}, lambda: True).status == "aborted"
    assert seen == []  # cancelled before sending


def test_replay_never_reads_the_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    doc = fixture_doc("provider-summary-ok")
    assert replay_legacy_call(RECORDINGS, doc, "cli", CLI_ENTRY, 1).status == "committed"


@pytest.mark.parametrize(
    ("status", "raw", "metered", "expected"),
    [
        (200, b"not json", True, ("reconciliation_required", "provider_response_malformed")),
        (200, b"not json", False, ("degraded", "provider_response_malformed")),
        (200, b'{"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 0}}', True,
         ("degraded", "provider_response_malformed")),
        (500, b"{}", True, ("degraded", "provider_http_error")),
        (502, b"", True, ("reconciliation_required", "provider_outcome_unknown")),
        (302, b"", True, ("degraded", "provider_http_error")),
    ],
)
def test_outcome_mapping_edges(status: int, raw: bytes, metered: bool,
                               expected: tuple[str, str]) -> None:
    outcome = outcome_from_response(status, raw, metered=metered)
    assert (outcome.status, outcome.reason) == expected
    assert outcome.fallback == (FALLBACK_STRATEGY if outcome.status == "degraded" else None)


def test_outcome_wire_form_carries_no_body() -> None:
    secret = json.dumps(handoff(objective="rotate hunter2"))
    body = {"choices": [{"message": {"content": secret}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2}}
    outcome = outcome_from_response(200, json.dumps(body).encode(), request_digest="sha256:0")
    assert outcome.status == "committed" and outcome.handoff is not None
    assert "hunter2" not in repr(outcome) + json.dumps(outcome.to_wire())
    assert outcome.to_wire()["contentLength"] == len(secret)
    unknown = outcome_from_error(RuntimeError("boom"))
    assert isinstance(unknown, ProviderOutcome) and unknown.status == "reconciliation_required"


def test_parse_handoff_is_strict() -> None:
    assert parse_handoff(json.dumps(handoff()))[0] == handoff()
    assert parse_handoff(json.dumps(handoff(objective=["x"])))[1] == "summary_schema_mismatch"
    assert parse_handoff(json.dumps(handoff(tests=[1])))[1] == "summary_schema_mismatch"
    assert parse_handoff("Here you go: {}")[1] == "summary_invalid_json"
    assert parse_handoff(None)[1] == "summary_invalid_json"


def test_summarizer_and_outcomes_pickle_for_process_pools() -> None:
    import pickle

    summarizer = summarizer_for_scenario(RECORDINGS, "provider-summary-ok", fixtures_dir=FIXTURES)
    clone = pickle.loads(pickle.dumps(summarizer))
    output = clone(items_for(SID, conversation(3)), {"operationId": "op-p"})
    assert output["usageReceipt"]["outcome"] == "settled"
    assert pickle.loads(pickle.dumps(clone.outcomes[0])) == clone.outcomes[0]


def test_every_bundled_cassette_validates_eagerly(tmp_path: Path) -> None:
    checked = cassettes.validate_recordings(RECORDINGS)
    assert sorted(p.name for p in checked) == sorted(p.name for p in RECORDINGS.glob("*.yaml"))
    renamed = tmp_path / "other-scenario.yaml"  # a cassette under another scenario's name
    renamed.write_bytes((RECORDINGS / "provider-failure.yaml").read_bytes())
    with pytest.raises(InputError) as err:
        cassettes.validate_recordings(tmp_path)
    assert err.value.pointer == "/metadata/scenario" and err.value.source == str(renamed)
