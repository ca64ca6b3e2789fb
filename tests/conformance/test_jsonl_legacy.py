"""The JSONL store against real legacy CLI session files (fixtures/*/cli.jsonl-session.json).

A legacy session reads, verifies and replays exactly as the legacy CLI does;
the kernel compacts it without breaking the chain; the line it appends is what
JavaScript ``JSON.stringify`` would write, so the legacy verifier accepts it.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.adapters.jsonl.chain import FileLock, verify_bytes
from kernel.adapters.jsonl.messages import items_to_messages
from kernel.adapters.jsonl.session import JsonlSessionPort
from kernel.canonical.jsjson import js_number, js_stringify
from kernel.compaction.service import CompactionKernel
from kernel.errors import InvalidArgument, StoreFailure

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures").glob("*/cli.jsonl-session.json"))


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def intact(fixture: dict[str, Any]) -> list[str]:
    """The session file's whole lines: a crash scenario's last line may be torn (the crash
    cut its end, its newline with it) — on disk it is a tail without ``\n``."""
    lines = list(fixture["output"]["raw_jsonl_lines"])
    return lines[:-1] if lines and not _parses(lines[-1]) else lines


def install(tmp_path: Path, fixture: dict[str, Any]) -> tuple[JsonlSessionPort, str]:
    sid = fixture["options"]["sessionId"]
    port = JsonlSessionPort(tmp_path)
    lines = fixture["output"]["raw_jsonl_lines"]
    whole = intact(fixture)
    raw = "".join(line + "\n" for line in whole) + "".join(lines[len(whole):])
    (tmp_path / f"{sid}.jsonl").write_bytes(raw.encode("utf-8"))
    return port, sid


def legacy_replay(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The legacy ``rebuildMessages`` rule, restated."""
    start, messages = 0, []
    for index in range(len(events) - 1, -1, -1):
        data = events[index].get("data")
        compact = events[index].get("type") == "compact" and isinstance(data, dict)
        if compact and isinstance(data.get("messages"), list):
            messages = [m for m in data["messages"] if isinstance(m, dict) and "role" in m]
            start = index + 1
            break
    for event in events[start:]:
        if event.get("type") in ("user_message", "assistant_message", "system"):
            messages.append(event["data"])
    return messages


def test_fixtures_exist() -> None:
    assert len(FIXTURES) >= 10


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.parent.name)
def test_legacy_session_reads_verifies_and_replays(tmp_path: Path, path: Path) -> None:
    fixture = load(path)
    port, sid = install(tmp_path, fixture)
    report = port.verify(sid)
    whole = intact(fixture)
    assert report.status == "verified" and report.chained_events == len(whole)
    assert report.truncated_tail == (len(whole) < len(fixture["output"]["raw_jsonl_lines"]))
    snapshot = port.read_snapshot(sid)
    assert snapshot is not None
    assert snapshot.head == json.loads(whole[-1])["hash"]
    # the legacy capture shows messages without the ``_cc_replay`` provenance marker
    # (the CLI keeps it in a side table that plain JSON does not show)
    replayed = [
        {k: v for k, v in m.items() if k != "_cc_replay"} for m in items_to_messages(snapshot.items)
    ]
    assert replayed == fixture["output"]["rebuildMessages"]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.parent.name)
def test_kernel_compacts_a_legacy_session_without_breaking_its_chain(
    tmp_path: Path, path: Path
) -> None:
    fixture = load(path)
    port, sid = install(tmp_path, fixture)
    before = (tmp_path / f"{sid}.jsonl").read_bytes()
    ids = itertools.count(1)
    kernel = CompactionKernel(port, clock=lambda: 1_787_300_000_000, new_id=lambda: f"u{next(ids)}")
    receipt = kernel.compact_context(
        {
            "operationId": "op-legacy",
            "sessionId": sid,
            "modelWindowTokens": 200_000,
            "reservedOutputTokens": 4_096,
            "safetyMarginTokens": 1_024,
            "recoveryReserveTokens": 512,
            "sink": "provider.local",
            "scopeAdmissions": [{"scope": "session", "scopeId": sid}],
            "policyVersion": "policy-1",
            "modelProfile": "gpt-4o",
        }
    )
    assert receipt["status"] == "committed"
    after = (tmp_path / f"{sid}.jsonl").read_bytes()
    kept = before[: before.rfind(b"\n") + 1]  # a torn tail is repaired, nothing else moves
    assert after.startswith(kept)  # history is appended to, never rewritten
    report = verify_bytes(after)
    assert report.status == "verified" and report.head == receipt["newHead"]
    line = after[len(kept) :].decode("utf-8")
    assert line.endswith("\n") and line.count("\n") == 1
    assert js_stringify(json.loads(line)) == line[:-1]  # what JSON.stringify writes
    compact = json.loads(line)
    assert (
        compact["type"] == "compact"
        and compact["prevHash"] == json.loads(intact(fixture)[-1])["hash"]
    )
    assert legacy_replay(report.events) == items_to_messages(
        compact["data"]["canonical"]["outputItems"]
    )
    assert kernel.reconcile("op-legacy") == receipt


def test_tampering_is_detected_and_refused(tmp_path: Path) -> None:
    fixture = load(FIXTURES[0])
    port, sid = install(tmp_path, fixture)
    path = tmp_path / f"{sid}.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    edited = lines[1].replace('"role":"user"', '"role":"system"', 1)
    assert edited != lines[1]
    path.write_text("".join([lines[0], edited, *lines[2:]]), encoding="utf-8")
    assert port.verify(sid).status == "tampered"
    with pytest.raises(StoreFailure):
        port.read_snapshot(sid)
    path.write_text("".join([lines[0], *lines[2:]]), encoding="utf-8")  # a deleted line
    assert port.verify(sid).status == "tampered"


def test_a_torn_tail_is_invisible_and_repaired_by_the_next_append(tmp_path: Path) -> None:
    port = JsonlSessionPort(tmp_path)
    port.start_session("s1")
    port.append_message("s1", "user", "hello", timestamp=1)
    head = port.read_snapshot("s1").head
    with open(tmp_path / "s1.jsonl", "ab") as fh:
        fh.write(b'{"type":"user_message","timestamp":2,"da')
    report = port.verify("s1")
    assert report.status == "verified" and report.truncated_tail and report.head == head
    assert len(port.read_snapshot("s1").items) == 1
    assert port.append_message("s1", "assistant", "hi", expected_head=head, timestamp=3).ok
    repaired = port.verify("s1")
    assert repaired.status == "verified" and not repaired.truncated_tail
    assert [e["type"] for e in repaired.events] == [
        "session_start",
        "user_message",
        "assistant_message",
    ]


def test_session_ids_must_be_safe_file_names(tmp_path: Path) -> None:
    port = JsonlSessionPort(tmp_path)
    for bad in ("../x", "a/b", "a\\b", "", "CON", "nul.txt", "a:b", "x.", " x"):
        with pytest.raises(InvalidArgument):
            port.path(bad)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (1e20, "100000000000000000000"),
        (-0.0, "0"),
        (5e-324, "5e-324"),
        (0.1 + 0.2, "0.30000000000000004"),
        (2**60, "1152921504606847000"),
        (12, "12"),
    ],
)
def test_numbers_print_as_javascript_does(value: float, text: str) -> None:
    assert js_number(value) == text


def test_strings_and_key_order_follow_json_stringify() -> None:
    assert js_stringify({"b": 1, "10": 2, "a": [None, True], "2": "x"}) == (
        '{"2":"x","10":2,"b":1,"a":[null,true]}'
    )
    assert js_stringify('\u2028\x7f\x01\ud800é"\\') == '"\u2028\x7f\\u0001\\ud800é\\"\\\\"'
    assert js_stringify("\ud83d\ude00") == '"\U0001f600"'


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet="abcxyz_", min_size=1, max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(value=json_values)
def test_js_stringify_matches_json_for_plain_data(value: Any) -> None:
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if any(0xD800 <= ord(c) <= 0xDFFF for c in expected):
        return  # lone surrogates: JSON.stringify escapes them, Python writes them raw
    assert js_stringify(value) == expected


@pytest.mark.parametrize("mode", ["fcntl", "excl"] if os.name != "nt" else ["msvcrt", "excl"])
def test_file_lock_serializes_writers(tmp_path: Path, mode: str) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")

    def bump() -> None:
        for _ in range(40):
            with FileLock(tmp_path / "c.lock", mode=mode):
                value = int(counter.read_text())
                counter.write_text(str(value + 1))

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.read_text() == "160"


def test_excl_lock_breaks_a_stale_lock(tmp_path: Path) -> None:
    stale = tmp_path / "c.lock.excl"
    stale.write_text("99999")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    with FileLock(tmp_path / "c.lock", mode="excl", stale_after=1.0, timeout=5.0):
        assert stale.exists()
    assert not stale.exists()
