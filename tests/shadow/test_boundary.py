"""Bad input at the boundary is a typed InputError naming file, JSON pointer and expectation;
through the CLI it is exit 2 with a JSON error and no traceback."""

from __future__ import annotations

import copy
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kernel.contracts import ContextItem, ContextPlan
from shadow import cli
from shadow.boundary import MAX_DEPTH, load_path, loads
from shadow.errors import InputError
from shadow.wire import parse, parse_context_item, parse_memory_record, parse_plan_request

SECRET = "sk-live-THIS-MUST-NOT-LEAK-0123456789"


def item_wire(**overrides: Any) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "schemaVersion": 1,
        "itemId": "msg-1",
        "kind": "message",
        "scope": "session",
        "scopeId": "session-1",
        "sourceRef": {"store": "session", "id": "evt-1", "eventSequence": 3},
        "provenance": {"source": "user", "observedAt": "2026-01-01T00:00:00.000Z"},
        "trust": "user",
        "sensitivity": "internal",
        "allowedSinks": ["provider.local"],
        "tokenEstimate": 3,
        "priority": 10,
        "pinned": False,
        "createdAt": "2026-01-01T00:00:00.000Z",
        "digest": "sha256:" + "0" * 64,
        "content": SECRET,
    }
    wire.update(overrides)
    return wire


def record_wire(**overrides: Any) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "schemaVersion": 1, "memoryId": "mem-1", "scope": "global", "category": "fact",
        "content": "uses pnpm",
        "provenance": {"source": "user", "observedAt": "2026-01-01T00:00:00.000Z"},
        "evidenceRefs": [{"store": "session", "id": "evt-1"}], "confidence": 0.9,
        "importance": 0.5, "tags": [], "sensitivity": "internal", "allowedSinks": ["cli"],
        "state": "active", "retentionPolicy": {"mode": "durable"},
        "createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z",
        "accessCount": 0, "revision": 1, "digest": "sha256:" + "1" * 64,
    }
    wire.update(overrides)
    return wire


def plan_request_wire(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "modelWindowTokens": 1000, "reservedOutputTokens": 100, "items": items,
        "sink": "provider.local", "scopeAdmissions": [{"scope": "session",
                                                       "scopeId": "session-1"}],
        "policyVersion": "policy-1", "modelProfile": "model-1", "sessionHead": "head:1",
        "memoryRevision": 0,
    }


def without(wire: dict[str, Any], key: str) -> dict[str, Any]:
    out = dict(wire)
    del out[key]
    return out


def check(exc: InputError, source: str, pointer: str, *, expected: str = "",
          got: str = "") -> None:
    assert exc.source == source
    assert exc.pointer == pointer, str(exc)
    assert expected in exc.expected, str(exc)
    assert got in exc.got, str(exc)
    assert SECRET not in str(exc) and SECRET not in json.dumps(exc.to_wire())
    assert exc.to_wire()["details"]["pointer"] == pointer


# --- contract-level failures -----------------------------------------------------------------

BAD_ITEMS: list[tuple[str, dict[str, Any], str, str, str]] = [
    ("unknown-schema-version", item_wire(schemaVersion=2), "/schemaVersion",
     "schemaVersion 1", "unknown schemaVersion"),
    ("schema-version-bool", item_wire(schemaVersion=True), "/schemaVersion",
     "schemaVersion 1", "a boolean"),
    ("schema-version-float", item_wire(schemaVersion=1.0), "/schemaVersion",
     "schemaVersion 1", "1.0"),
    ("missing-field", without(item_wire(), "itemId"), "/itemId", "a required field", "nothing"),
    ("extra-field", item_wire(colour="red"), "/colour", "unknown field", "an unknown field"),
    ("wrong-type", item_wire(tokenEstimate="3"), "/tokenEstimate", "integer",
     "a string of 1 characters"),
    ("bool-for-int", item_wire(priority=True), "/priority", "integer", "a boolean"),
    ("float-for-int", item_wire(priority=1.5), "/priority", "integer", "1.5"),
    ("enum-mismatch", item_wire(kind="note"), "/kind", "'system-policy'",
     "a string of 4 characters"),
    ("enum-wrong-case", item_wire(trust="Host"), "/trust", "'host'", "a string"),
    ("over-long-identifier", item_wire(itemId="a" * 161), "/itemId", "at most 160",
     "161 characters"),
    ("identifier-pattern", item_wire(itemId="-leading-dash"), "/itemId", "matching", ""),
    ("identifier-trailing-newline", item_wire(itemId="msg-1\n"), "/itemId", "matching", ""),
    ("over-long-content", item_wire(content="x" * (4_194_304 + 1)), "/content",
     "at most 4194304", "4194305 characters"),
    ("uppercase-digest", item_wire(digest="sha256:" + "A" * 64), "/digest", "matching", ""),
    ("empty-sinks", item_wire(allowedSinks=[]), "/allowedSinks", "at least 1", ""),
    ("duplicate-sinks", item_wire(allowedSinks=["a", "a"]), "/allowedSinks/1",
     "distinct", "a duplicate"),
    ("token-estimate-zero", item_wire(tokenEstimate=0), "/tokenEstimate", ">= 1",
     "the integer 0"),
    ("above-max-safe-integer", item_wire(sourceRef={"store": "s", "id": "i",
                                                    "revision": 2**53}),
     "/sourceRef/revision", "9007199254740991", ""),
    ("nested-missing", item_wire(provenance={"source": "user"}), "/provenance/observedAt",
     "a required field", "nothing"),
    ("nested-extra", item_wire(sourceRef={"store": "s", "id": "i", "seq": 1}),
     "/sourceRef/seq", "unknown field", ""),
    ("null-for-optional", item_wire(expiresAt=None), "/expiresAt", "string", "null"),
    ("not-an-object", [], "", "a JSON object", "an array of 0 entries"),
    ("both-content-sources", item_wire(contentRef={
        "store": "blobs", "objectId": "o-1", "digest": "sha256:" + "2" * 64, "byteLength": 1,
        "summary": "s", "recoverable": True}), "", "exactly one of content or contentRef", ""),
    ("global-with-scope-id", item_wire(scope="global"), "/scopeId",
     "global scope must not include scopeId", ""),
    ("binding-without-call-id", item_wire(binding={"toolRole": "result"}),
     "/binding/toolCallId", "requires toolCallId", ""),
    ("nan", item_wire(priority=float("nan")), "/priority", "integer", "NaN"),
]


@pytest.mark.parametrize(("case", "value", "pointer", "expected", "got"), BAD_ITEMS,
                         ids=[c[0] for c in BAD_ITEMS])
def test_bad_context_item(case: str, value: Any, pointer: str, expected: str,
                          got: str) -> None:
    with pytest.raises(InputError) as info:
        parse_context_item(value, "fixtures/items.json")
    check(info.value, "fixtures/items.json", pointer, expected=expected, got=got)


def test_good_context_item_parses() -> None:
    value = parse_context_item(item_wire())
    assert value.item_id == "msg-1" and value.source_ref.event_sequence == 3
    assert value.to_wire() == item_wire()


@pytest.mark.parametrize(
    ("value", "pointer", "got"),
    [
        (record_wire(confidence=float("nan")), "/confidence", "NaN"),
        (record_wire(confidence=float("inf")), "/confidence", "Infinity"),
        (record_wire(importance=float("-inf")), "/importance", "-Infinity"),
        (record_wire(confidence=1.5), "/confidence", "1.5"),
        (record_wire(confidence=True), "/confidence", "a boolean"),
    ],
    ids=["nan", "infinity", "minus-infinity", "above-one", "bool"],
)
def test_non_finite_and_out_of_range_numbers(value: Any, pointer: str, got: str) -> None:
    with pytest.raises(InputError) as info:
        parse_memory_record(value, "records.json")
    check(info.value, "records.json", pointer, got=got)


def test_memory_record_invariants_at_the_boundary() -> None:
    with pytest.raises(InputError) as info:
        parse_memory_record(record_wire(state="deleted"), "r.json")
    check(info.value, "r.json", "/content", expected="content must be empty")
    with pytest.raises(InputError) as info:
        parse_memory_record(record_wire(state="deleted", content=""), "r.json")
    check(info.value, "r.json", "/deletionFence", expected="requires deletionFence")
    assert parse_memory_record(
        record_wire(state="deleted", content="", deletionFence="fence-1")
    ).state == "deleted"


def test_pointer_into_a_plan_request_names_the_item_index() -> None:
    items = [item_wire(itemId=f"msg-{i}") for i in range(5)]
    items[3]["sourceRef"] = {"store": "a/b.c", "id": "x", "revision": -1}
    with pytest.raises(InputError) as info:
        parse_plan_request(plan_request_wire(items), "plan.json")
    check(info.value, "plan.json", "/items/3/sourceRef/revision", expected=">= 0",
          got="the integer -1")


def test_pointer_tokens_are_escaped() -> None:
    value = plan_request_wire([])
    value["partitionCeilings"] = {"conversation": 1, "a/b~c": 2}
    with pytest.raises(InputError) as info:
        parse_plan_request(value, "plan.json")
    check(info.value, "plan.json", "/partitionCeilings/a~1b~0c", expected="unknown field")


def test_nested_schema_version_is_checked() -> None:
    with pytest.raises(InputError) as info:
        parse_plan_request(plan_request_wire([item_wire(), item_wire(schemaVersion=2)]), "p")
    check(info.value, "p", "/items/1/schemaVersion", expected="schemaVersion 1")


def test_json_values_are_checked_inside() -> None:
    from kernel.contracts import CompactionRequest

    value = {
        "operationId": "op-1", "sessionId": "s-1", "modelWindowTokens": 10,
        "reservedOutputTokens": 1, "sink": "cli", "scopeAdmissions": [{"scope": "global"}],
        "policyVersion": "p", "modelProfile": "m", "metadata": {"a": [1, float("inf")]},
    }
    with pytest.raises(InputError) as info:
        parse(CompactionRequest, value, "c.json")
    check(info.value, "c.json", "/metadata/a/1", expected="finite", got="Infinity")
    value["metadata"] = {"a": (1, 2)}
    with pytest.raises(InputError) as info:
        parse(CompactionRequest, value, "c.json")
    check(info.value, "c.json", "/metadata/a", expected="JSON value", got="tuple")


def test_large_plan_request_parses_quickly() -> None:
    import time

    items = [item_wire(itemId=f"msg-{i}") for i in range(5_000)]
    start = time.perf_counter()
    request = parse_plan_request(plan_request_wire(items))
    elapsed = time.perf_counter() - start
    assert len(request.items) == 5_000
    assert elapsed < 2.0, f"parsing 5,000 items took {elapsed:.2f}s"


def test_peer_plan_output_parses() -> None:
    value = {
        "schema": "chainlesschain.context-plan/v1", "schemaVersion": 1, "sessionHead": "h",
        "memoryRevision": 0, "policyVersion": "p", "modelProfile": "m", "sink": "cli",
        "inputBudget": 10, "selectableBudget": 10, "selectedTokens": 3,
        "partitions": {p: {"ceiling": 1, "used": 0} for p in (
            "trusted-system", "working-state", "tools-and-skills", "conversation",
            "tool-evidence", "memory-and-rules", "recovery-reserve")},
        "minimumShortfalls": {},
        "selected": [item_wire()], "selectedItemIds": ["msg-1"],
        "dropped": [{"itemId": "m-2", "digest": "sha256:" + "3" * 64,
                     "reason": "sink_denied", "protected": False}],
        "createdAt": "2026-01-01T00:00:00.000Z", "digest": "sha256:" + "4" * 64,
    }
    plan = parse(ContextPlan, value)
    assert plan.partitions.get("recovery-reserve").ceiling == 1
    assert plan.to_wire() == value
    bad = copy.deepcopy(value)
    bad["dropped"][0]["reason"] = "too_big"
    with pytest.raises(InputError) as info:
        parse(ContextPlan, bad, "plan-out.json")
    check(info.value, "plan-out.json", "/dropped/0/reason", expected="'partition_ceiling'")


# --- JSON-level failures (shadow.boundary.loads) --------------------------------------------

BAD_DOCUMENTS: list[tuple[str, bytes, str]] = [
    ("nan", b'{"priority": NaN}', "finite JSON numbers"),
    ("infinity", b'{"priority": Infinity}', "finite JSON numbers"),
    ("minus-infinity", b'{"priority": -Infinity}', "finite JSON numbers"),
    ("deep-nesting", b"[" * 10_000 + b"]" * 10_000, f"nesting depth at most {MAX_DEPTH}"),
    ("deep-object-nesting", b'{"a":' * 10_000 + b"1" + b"}" * 10_000, "nesting depth"),
    ("invalid-utf8", b'{"content": "\xff\xfe"}', "valid UTF-8"),
    ("truncated-utf8", b'{"content": "\xe4\xbd"}', "valid UTF-8"),
    ("bom", b'\xef\xbb\xbf{"itemId": "x"}', "without a byte-order mark"),
    ("duplicate-keys", b'{"itemId": "a", "itemId": "b"}', "unique object keys"),
    ("syntax", b'{"itemId": }', "well-formed JSON"),
]


@pytest.mark.parametrize(("case", "data", "expected"), BAD_DOCUMENTS,
                         ids=[c[0] for c in BAD_DOCUMENTS])
def test_bad_json_document(case: str, data: bytes, expected: str) -> None:
    with pytest.raises(InputError) as info:
        loads(data, "fixtures/bad.json")
    assert info.value.source == "fixtures/bad.json"
    assert expected in info.value.expected
    assert info.value.pointer == ""


def test_duplicate_key_error_names_the_key_not_the_value() -> None:
    with pytest.raises(InputError) as info:
        loads(b'{"a": {"token": "' + SECRET.encode() + b'", "token": "x"}}', "d.json")
    assert "'token'" in info.value.got and SECRET not in str(info.value)


def test_file_to_contract_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "item.json"
    path.write_bytes(json.dumps(item_wire(priority=-1)).encode())
    with pytest.raises(InputError) as info:
        parse(ContextItem, load_path(path), str(path))
    check(info.value, str(path), "/priority", expected=">= 0", got="the integer -1")
    with pytest.raises(InputError) as info:
        load_path(tmp_path / "missing.json")
    assert info.value.source.endswith("missing.json") and "existing file" in info.value.expected


# --- through the CLI -------------------------------------------------------------------------

CLI_BAD_STDIN = {
    "invalid-utf8": b'{"value": "\xff"}',
    "bom": b'\xef\xbb\xbf{"value": 1}',
    "nan": b'{"value": NaN}',
    "infinity": b'{"value": [Infinity]}',
    "duplicate-keys": b'{"value": 1, "value": 2}',
    "deep-nesting": b'{"value": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
    "syntax": b'{"value": ',
    "empty": b"",
}


@pytest.mark.parametrize("stdin", list(CLI_BAD_STDIN.values()), ids=list(CLI_BAD_STDIN))
def test_cli_bad_stdin_is_exit_2_with_a_json_error(
    stdin: bytes, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = cli.main(["kernel", "call", "digest"])
    out, err = capsysbinary.readouterr()
    assert code == 2
    payload = json.loads(out)
    error = payload["error"]
    assert error["code"] == "invalid_input"
    assert error["details"]["file"] == "<stdin>"
    assert set(error["details"]) == {"file", "pointer", "expected", "got"}
    assert b"Traceback" not in out + err
