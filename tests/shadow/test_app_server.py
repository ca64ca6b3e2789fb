"""``shadow app-server`` as a subprocess and its protocol layer in-process: the lifecycle,
every error code, batches, the line limit, the retired entry points, and a fuzz of
malformed lines the server answers and keeps serving through."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shadow import kernel_rpc
from shadow.app_server import protocol as rpc
from shadow.app_server import retired as retired_mod
from shadow.app_server.server import KERNEL_METHODS, Server
from shadow.errors import InputError
from tests.conftest import load_peer_vectors

ROOT = Path(__file__).resolve().parents[2]
INIT = {"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "test"}}}
SECRET = "sk-live-THISMUSTNOTBELOGGED0123456789"


def serve(*messages: Any, raw: bytes = b"") -> tuple[list[Any], str]:
    """Run the server on these lines (JSON values, then ``raw``); its answers, its log."""
    data = b"".join(json.dumps(m).encode("utf-8") + b"\n" for m in messages) + raw
    proc = subprocess.run([sys.executable, "-m", "shadow", "app-server"], input=data,
                          capture_output=True, cwd=ROOT, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines()]
    return out, proc.stderr.decode("utf-8")


def test_the_lifecycle_and_a_kernel_method_as_a_subprocess() -> None:
    case = next(c for c in load_peer_vectors("plan-vectors.json")["cases"] if "result" in c)
    out, log = serve(INIT, {"method": "initialized"},
                     {"id": "p", "method": "context/plan", "params": case["request"]})
    assert [m["id"] for m in out] == [0, "p"]  # the notification is never answered
    assert out[0]["result"]["userAgent"].startswith("context-kernel-parity/")
    assert set(KERNEL_METHODS) <= set(out[0]["result"]["methods"])
    assert out[1] == {"jsonrpc": "2.0", "id": "p", "result": case["result"]}
    assert out[1]["result"] == kernel_rpc.call("plan_context", case["request"])["result"]
    assert log.splitlines() == ["app-server: id=set ok"] * 2  # one line per answer


def test_every_error_is_answered_and_the_server_keeps_serving() -> None:
    out, log = serve(
        {"id": 1, "method": "context/plan", "params": {}},  # before initialize
        INIT,
        {"id": 2, "method": "no/such/method"},
        {"id": 3, "method": "context/plan", "params": {"secret": SECRET}},
        {"id": 4, "method": 7},
        {"id": [1], "method": "initialize"},
        {"id": 5, "method": "context/plan", "params": "a string"},
        {"id": 6, "method": "context/plan", "extra": True},
        {"jsonrpc": "1.0", "id": 7, "method": "initialize"},
        {"id": 8, "method": "initialize"},  # twice
        raw=b"{not json\n\xff\xfe\n[]\n" + json.dumps({"id": 9, "method": "no"}).encode() + b"\n")
    codes = [(m["id"], m["error"]["code"]) for m in out if "error" in m]
    assert codes == [(1, rpc.NOT_INITIALIZED), (2, rpc.METHOD_NOT_FOUND),
                     (3, rpc.INVALID_PARAMS), (4, rpc.INVALID_REQUEST),
                     (None, rpc.INVALID_REQUEST), (5, rpc.INVALID_REQUEST),
                     (6, rpc.INVALID_REQUEST), (7, rpc.INVALID_REQUEST),
                     (8, rpc.INVALID_REQUEST), (None, rpc.PARSE_ERROR), (None, rpc.PARSE_ERROR),
                     (None, rpc.INVALID_REQUEST), (9, rpc.METHOD_NOT_FOUND)]
    assert SECRET not in log and SECRET not in json.dumps(out)  # no params ever echoed
    assert all(set(m) <= {"jsonrpc", "id", "result", "error"} for m in out)


def test_a_batch_is_answered_by_one_array_and_notifications_by_nothing() -> None:
    out, _ = serve(INIT, [{"id": "a", "method": "no"}, {"method": "initialized"},
                          {"id": "b", "method": "context/plan", "params": []}],
                   [{"method": "initialized"}])
    assert len(out) == 2 and isinstance(out[1], list)
    assert [(m["id"], m["error"]["code"]) for m in out[1]] == [
        ("a", rpc.METHOD_NOT_FOUND), ("b", rpc.INVALID_PARAMS)]


def test_a_line_over_the_limit_is_refused_unread_and_the_next_one_served() -> None:
    long = b'{"id": 1, "method": "initialize", "params": {"x": "' + \
        b"a" * (rpc.MAX_LINE_BYTES + 10) + b'"}}\n'
    out, _ = serve(raw=long + json.dumps(INIT).encode() + b"\n")
    assert out[0]["error"]["code"] == rpc.PARSE_ERROR and out[0]["id"] is None
    assert "at most" in out[0]["error"]["data"]["expected"]
    assert out[1]["id"] == 0 and "result" in out[1]


def test_lines_never_holds_a_long_line_whole() -> None:
    class Counting(io.BytesIO):
        largest = 0

        def readline(self, size: int | None = -1) -> bytes:
            chunk = super().readline(size)
            Counting.largest = max(Counting.largest, len(chunk))
            return chunk

    stream = Counting(b"x" * 1000 + b"\n\n  \nok\r\n" + b"y" * 10 + b"\n" + b"z" * 50)
    got = list(rpc.lines(stream, limit=10))
    assert got == [None, b"ok", b"y" * 10, None]
    assert Counting.largest <= 11


def test_every_retired_entry_point_fails_closed_naming_its_replacement(
        monkeypatch: pytest.MonkeyPatch) -> None:
    registry = retired_mod.load()
    assert {r.name for r in registry} >= {"session/compact", "agent_runtime_compact_session",
                                          "unified_memory_*", "memory_runtime_*"}
    monkeypatch.setattr(kernel_rpc, "call", lambda *a: pytest.fail("dispatched"))
    server = Server(registry)
    server.dispatch("initialize", None, False)
    for r in registry:
        name = r.name if r.match == "exact" else r.name[:-1] + "search"
        for notify in (False, True):
            with pytest.raises(rpc.RpcError) as exc:
                server.dispatch(name, {"threadId": "t"}, notify)
            assert exc.value.code == rpc.RETIRED
            assert exc.value.data == {"method": name, "replacement": r.replacement,
                                      "owner": r.owner}
        assert all(getattr(r, f).strip() for f in retired_mod.FIELDS)
    assert retired_mod.find(registry, "thread/compact/start") is None
    assert retired_mod.find(registry, "memory/recall") is None


def test_a_retired_call_is_refused_before_initialize_too() -> None:
    out, _ = serve({"id": 1, "method": "agent_runtime_compact_session"})
    assert out[0]["error"]["code"] == rpc.RETIRED
    assert out[0]["error"]["data"]["replacement"] == "thread/compact/start"


@pytest.mark.parametrize(("doc", "pointer"), [
    ({"schema": "x"}, "/schema"),
    ({"schema": retired_mod.SCHEMA, "retired": []}, "/retired"),
    ({"schema": retired_mod.SCHEMA, "retired": [{"name": "a"}]}, "/retired/0/match"),
    ({"schema": retired_mod.SCHEMA, "retired": [{**{f: "x" for f in retired_mod.FIELDS},
                                                 "match": "exact", "more": 1}]},
     "/retired/0/more"),
    ({"schema": retired_mod.SCHEMA, "retired": [{**{f: "x" for f in retired_mod.FIELDS},
                                                 "match": "prefix"}]}, "/retired/0/name"),
])
def test_a_broken_registry_is_refused_with_its_pointer(doc: Any, pointer: str) -> None:
    with pytest.raises(InputError) as exc:
        retired_mod.parse(doc, "retired.json")
    assert exc.value.pointer == pointer


# -- fuzz ------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["id", "method", "params", "jsonrpc", "x"]), inner, max_size=4),
    max_leaves=8)
lines = st.one_of(
    st.binary(max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b),
    json_values.map(lambda v: json.dumps(v).encode()))


def _answers(messages: Any) -> int:
    """How many answers a parsed line must get: one per request or malformed message."""
    def needs(m: Any) -> bool:
        return not (isinstance(m, dict) and "id" not in m and isinstance(m.get("method"), str)
                    and m.get("method") and set(m) <= {"jsonrpc", "method", "params"}
                    and m.get("jsonrpc", "2.0") == "2.0"
                    and isinstance(m.get("params", {}), (dict, list)))
    if isinstance(messages, list) and messages:
        return sum(map(needs, messages))
    return 1 if (not isinstance(messages, list) and needs(messages)) or messages == [] else 0


@settings(max_examples=300, deadline=None)
@given(st.lists(lines, min_size=1, max_size=6))
def test_malformed_lines_get_the_right_answer_and_never_stop_the_server(
        fuzz: list[bytes]) -> None:
    server = Server()
    for line in fuzz:
        if not line.strip():
            continue
        out = rpc.handle(line, server.dispatch)
        try:
            parsed = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            assert [m["error"]["code"] for m in out] == [rpc.PARSE_ERROR]
            continue
        flat = out[0] if out and isinstance(out[0], list) else out
        assert len(flat) == _answers(parsed)
        for m in flat:
            assert set(m) == {"jsonrpc", "id", "error"} or set(m) == {"jsonrpc", "id", "result"}
            if "error" in m:
                assert m["error"]["code"] in (rpc.PARSE_ERROR, rpc.INVALID_REQUEST,
                                              rpc.METHOD_NOT_FOUND, rpc.INVALID_PARAMS,
                                              rpc.NOT_INITIALIZED, rpc.RETIRED)


def test_the_subprocess_survives_a_fuzzed_stream() -> None:
    import random

    rnd = random.Random(7)
    junk = b"".join(bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 60)))
                    .replace(b"\n", b" ") + b"\n" for _ in range(200))
    out, _ = serve(raw=junk + json.dumps(INIT).encode() + b"\n")
    assert out[-1]["id"] == 0 and "result" in out[-1]
    assert all("error" in m for m in out[:-1] if isinstance(m, dict))


# -- threads and thread/compact/start ---------------------------------------------------------

ORDER = ["turn/started", "item/started", "item/completed", "turn/completed"]


def _ids() -> Any:
    n = iter(range(10**6))
    return lambda: f"{next(n):04d}"


def _threads(root: Path, **policy: Any) -> Any:
    from shadow.app_server.threads import DEFAULT_POLICY, Threads

    return Threads(root, _ids(), lambda: 1_790_000_000_000,
                   {**DEFAULT_POLICY, "modelWindowTokens": 400, "reservedOutputTokens": 40,
                    "safetyMarginTokens": 10, "recoveryReserveTokens": 10, **policy})


def _seeded(root: Path, tid: str = "thr_seed", messages: int = 30) -> str:
    from kernel.adapters.jsonl.session import JsonlSessionPort

    port = JsonlSessionPort(root, clock=lambda: 1_790_000_000_000)
    port.start_session(tid, title="seeded")
    for i in range(messages):
        port.append_message(tid, "user" if i % 2 == 0 else "assistant",
                            f"message {i} " + "lorem ipsum " * 12)
    return tid


def _drive(server: Any, *messages: Any) -> list[Any]:
    from shadow.app_server.server import serve

    out = io.BytesIO()
    data = b"".join(json.dumps(m).encode() + b"\n" for m in messages)
    serve(io.BytesIO(data), out, io.StringIO(), server=server)
    return [json.loads(line) for line in out.getvalue().decode().splitlines()]


def _summarizer(kind: str, root: Path, tid: str) -> Any:
    from kernel.ports import SummarizerFailure, SummaryCancelled

    def run(dropped: list[dict[str, Any]], context: dict[str, Any]) -> dict[str, Any]:
        if kind == "aborted":
            raise SummarizerFailure("provider refused", code="provider_refused")
        if kind == "reconciliation_required":
            raise SummarizerFailure("timed out after sending", outcome_unknown=True)
        if kind == "cancelled":
            raise SummaryCancelled()
        if kind == "stale":  # another writer appends while the summary is made
            from kernel.adapters.jsonl.session import JsonlSessionPort

            JsonlSessionPort(root).append_message(tid, "user", "meanwhile")
        return {"items": [], "usageReceipt": {"outcome": "not_metered"},
                **({"degraded": True, "degradedReason": "summarizer_degraded"}
                   if kind == "degraded" else {})}
    return run


def check_turn(notes: list[dict[str, Any]], tid: str, outcome: str) -> dict[str, Any]:
    """A compaction turn's notifications: exactly the four, in order, one turn and one
    ``contextCompaction`` item, the outcome only there; the item's compaction facts."""
    from kernel.compaction.thread import OUTCOME_STATUS

    assert [n["method"] for n in notes] == ORDER and all("id" not in n for n in notes)
    assert all(n["params"]["threadId"] == tid for n in notes)
    turn = notes[0]["params"]["turn"]["id"]
    assert all(n["params"].get("turnId", turn) == turn for n in notes)
    assert notes[3]["params"]["turn"]["id"] == turn
    assert notes[1]["params"]["item"]["type"] == "contextCompaction"
    item = notes[2]["params"]["item"]
    assert item["type"] == "contextCompaction" and item["id"] == notes[1]["params"]["item"]["id"]
    assert item["compaction"]["status"] == outcome
    assert (item["status"], notes[3]["params"]["turn"]["status"]) == OUTCOME_STATUS[outcome]
    error = notes[3]["params"]["turn"].get("error")
    assert (error is None) == (outcome in ("committed", "degraded"))
    return dict(item["compaction"])


@pytest.mark.parametrize("outcome", ["committed", "degraded", "stale",
                                     "reconciliation_required", "aborted", "cancelled"])
def test_compaction_answers_empty_then_the_four_notifications_in_order(
        tmp_path: Path, outcome: str) -> None:
    tid = _seeded(tmp_path)
    policy = {} if outcome == "committed" else {
        "summarizer": _summarizer(outcome, tmp_path, tid), "allowFallback": False}
    server = Server(threads=_threads(tmp_path, **policy))
    out = _drive(server, INIT, {"id": 1, "method": "thread/compact/start",
                                "params": {"threadId": tid}})
    assert out[1] == {"jsonrpc": "2.0", "id": 1, "result": {}}  # nothing of the outcome
    check_turn(out[2:], tid, outcome)


def test_threads_start_resume_read_over_the_session_store(tmp_path: Path) -> None:
    server = Server(threads=_threads(tmp_path))
    out = _drive(server, INIT, {"id": 1, "method": "thread/start", "params": {"title": "x"}})
    started, note = out[1]["result"]["thread"], out[2]
    assert note == {"jsonrpc": "2.0", "method": "thread/started",
                    "params": {"thread": started}}
    tid = _seeded(tmp_path, "thr_more", 3)
    out = _drive(Server(threads=_threads(tmp_path)), INIT,
                 {"id": 2, "method": "thread/resume", "params": {"threadId": started["id"]}},
                 {"id": 3, "method": "thread/read", "params": {"threadId": tid}})
    assert out[1]["result"]["thread"] == {"id": started["id"], "head": started["head"],
                                          "itemCount": 0}
    read = out[2]["result"]["thread"]
    assert read["id"] == tid and read["items"]  # the store's projection: ContextItems
    text = json.dumps(read["items"])
    assert all(f"message {n} " in text for n in range(3))
    assert read["head"] != started["head"]  # another thread, its own chain


@pytest.mark.parametrize("params", [{"threadId": "thr_seed", "force": True}, {},
                                    {"threadId": ""}, {"threadId": 7}, [], {"threadId": "nope"},
                                    {"threadId": "../etc"}])
def test_compact_start_takes_exactly_a_known_thread_id(tmp_path: Path, params: Any) -> None:
    _seeded(tmp_path)
    out = _drive(Server(threads=_threads(tmp_path)), INIT,
                 {"id": 1, "method": "thread/compact/start", "params": params})
    assert [m.get("id") for m in out] == [0, 1]  # no turn was started
    assert out[1]["error"]["code"] == rpc.INVALID_PARAMS


def test_thread_methods_without_a_store_say_so(tmp_path: Path) -> None:
    out = _drive(Server(), INIT, {"id": 1, "method": "thread/start"})
    assert out[1]["error"]["code"] == -32000
    assert "--sessions" in out[1]["error"]["data"]["expected"]


def test_the_compaction_order_as_a_subprocess(tmp_path: Path) -> None:
    tid = _seeded(tmp_path)
    data = b"".join(json.dumps(m).encode() + b"\n" for m in (
        INIT, {"method": "initialized"},
        {"id": 1, "method": "thread/compact/start", "params": {"threadId": tid}},
        {"id": 2, "method": "thread/read", "params": {"threadId": tid}}))
    proc = subprocess.run([sys.executable, "-m", "shadow", "app-server", "--sessions",
                           str(tmp_path)], input=data, capture_output=True, cwd=ROOT,
                          check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    assert [m.get("id", m.get("method")) for m in out] == [0, 1, *ORDER, 2]
    assert out[1]["result"] == {}
    assert out[4]["params"]["item"]["compaction"]["status"] == "committed"
    assert out[-1]["result"]["thread"]["head"] == out[4]["params"]["item"]["compaction"][
        "newHead"]


# -- the memory tools --------------------------------------------------------------------------


def _memory(root: Path) -> Path:
    (root / "rollout_summaries").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n\nThe user prefers tabs.\n", encoding="utf-8")
    (root / "memory_summary.md").write_text("Prefers tabs.\n", encoding="utf-8")
    (root / "rollout_summaries" / "r1.md").write_text("Compacted: tabs chosen.\n",
                                                      encoding="utf-8")
    return root


def test_the_four_memory_tools_with_the_folders_path_rules(tmp_path: Path) -> None:
    from shadow.app_server.memory_tools import MemoryTools

    root = _memory(tmp_path / "mem")
    server = Server(memory=MemoryTools(root))
    out = _drive(server, INIT,
                 {"id": 1, "method": "memory/list"},
                 {"id": 2, "method": "memory/read", "params": {"path": "MEMORY.md",
                                                               "startLine": 3}},
                 {"id": 3, "method": "memory/search", "params": {"query": "tabs", "limit": 5}},
                 {"id": 4, "method": "memory/addNote", "params": {"title": "Editor",
                                                                  "body": "Use tabs."}},
                 {"id": 5, "method": "memory/read", "params": {"path": "../outside.md"}},
                 {"id": 6, "method": "memory/read", "params": {"path": ".hidden.md"}},
                 {"id": 7, "method": "memory/addNote", "params": {"title": "k", "body": SECRET}},
                 {"id": 8, "method": "memory/read", "params": {"path": "x", "mode": "raw"}},
                 {"id": 9, "method": "memory/read"})
    by = {m["id"]: m for m in out}
    listed = {e["path"] for e in by[1]["result"]["entries"]}
    assert {"MEMORY.md", "memory_summary.md", "rollout_summaries/r1.md"} <= listed
    assert by[2]["result"]["content"] == "The user prefers tabs."
    assert by[3]["result"]["results"] and all(
        "tabs" in r["snippet"].lower() for r in by[3]["result"]["results"])
    note = by[4]["result"]["path"]
    assert note.startswith("extensions/ad_hoc/notes/") and (root / note).is_file()
    assert (root / "MEMORY.md").read_text(encoding="utf-8").count("tabs") == 1  # untouched
    for i in (5, 6, 7, 8, 9):
        assert by[i]["error"]["code"] == rpc.INVALID_PARAMS, i
    assert by[7]["error"]["data"]["kernelError"] and SECRET not in json.dumps(out)
    assert not list((root / "extensions" / "ad_hoc" / "notes").glob("*k*"))


def test_memory_tools_without_a_folder_say_so() -> None:
    out = _drive(Server(), INIT, {"id": 1, "method": "memory/list"})
    assert out[1]["error"]["code"] == -32000
    assert "--memory" in out[1]["error"]["data"]["expected"]


# -- Soul -------------------------------------------------------------------------------------

SOUL_MD = "## Identity\nA careful helper.\n## Communication rhythm\nBrief.\n" \
          "## Artifact voice\nWarm.\nRun lint before every commit in this repo.\n"


def test_soul_is_previewed_then_applied_into_the_app_config_only(tmp_path: Path) -> None:
    from shadow.app_server.memory_tools import MemoryTools
    from shadow.app_server.soul import SoulConfig

    config = tmp_path / "app.json"
    config.write_text(json.dumps({"theme": "dark"}), encoding="utf-8")
    mem = _memory(tmp_path / "mem")
    before = sorted(p.relative_to(mem).as_posix() for p in mem.rglob("*"))
    server = Server(memory=MemoryTools(mem), soul=SoulConfig(config))
    out = _drive(server, INIT,
                 {"id": 1, "method": "soul/importApply", "params": {"token": "sha256:00"}},
                 {"id": 2, "method": "soul/importPreview", "params": {"source": SOUL_MD}})
    assert out[1]["error"]["code"] == rpc.INVALID_PARAMS  # never an unpreviewed result
    preview = out[2]["result"]
    assert [w["code"] for w in preview["warnings"]] == ["project_rules"]
    assert json.loads(config.read_text(encoding="utf-8")) == {"theme": "dark"}  # not yet
    out = _drive(server,
                 {"id": 3, "method": "soul/importApply",
                  "params": {"token": preview["token"], "persona": "reviewer"}},
                 {"id": 4, "method": "soul/importApply", "params": {"token": preview["token"]}},
                 {"id": 5, "method": "soul/importApply", "params": {"token": preview["token"]}},
                 {"id": 6, "method": "soul/get", "params": {"persona": "reviewer"}},
                 {"id": 7, "method": "soul/artifactBrief", "params": {"task": "a summary"}})
    assert out[0]["error"]["data"]["details"]["code"] == "persona_write_denied"
    assert out[1]["result"]["soul"] == preview["soul"]
    assert out[2]["error"]["code"] == rpc.INVALID_PARAMS  # a preview is applied once
    saved = json.loads(config.read_text(encoding="utf-8"))
    assert saved == {"theme": "dark", "memory": {"soul": preview["soul"]}}
    assert out[3]["result"] == {"persona": "reviewer", "communication_rhythm": "Brief.",
                                "readOnly": True}
    assert out[4]["result"]["kind"] == "generation_brief_only"
    assert out[4]["result"]["voice"] == "Warm." and out[4]["result"]["writes"] == []
    assert sorted(p.relative_to(mem).as_posix() for p in mem.rglob("*")) == before
