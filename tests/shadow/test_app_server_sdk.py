"""The protocol schema, the reference generated from it, the Python SDK (a subprocess
through every method, each result and notification checked against the schema and
against the in-process kernel), and the served surfaces of ``shadow run``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from kernel.errors import KernelError
from shadow import kernel_rpc
from shadow import served as served_mod
from shadow.app_server import protocol as rpc
from shadow.app_server import reference
from shadow.app_server.schema import Schema, load
from shadow.app_server.server import Server
from shadow.candidate import KernelCandidate
from shadow.canonical import canonicalize
from shadow.fixtures import load_corpus
from shadow.projection import to_wire
from shadow.replay import replay_fixture
from shadow.sdk import Client, ServerError, ServerGone
from shadow.served import Served
from tests.conftest import load_peer_vectors
from tests.shadow.test_app_server import ORDER, SECRET, SOUL_MD, _drive, _memory, _seeded
from tests.shadow.test_memory_methods import DELETE, PROPOSAL

ROOT = Path(__file__).resolve().parents[2]
DOC = load()


def _fits(kind: str, name: str, value: Any) -> None:
    spec = DOC["methods"][name]["result"] if kind == "result" else DOC["notifications"][name][
        "params"]
    errors = [e.message for e in Draft202012Validator(spec).iter_errors(value)]
    assert errors == [], (kind, name, errors)


def test_the_reference_page_is_generated_from_the_schema() -> None:
    assert reference.PAGE.read_text(encoding="utf-8") == reference.render(), \
        "stale: run python -m shadow.app_server.reference"
    assert reference.main(["--check"]) == 0


def test_the_server_serves_exactly_the_requests_of_the_schema() -> None:
    requests = sorted(m for m, s in DOC["methods"].items() if s["kind"] == "request")
    assert Server().methods() == requests
    out = _drive(Server(), {"id": 0, "method": "initialize"},
                 *({"id": i, "method": m} for i, m in enumerate(requests[1:], 1)))
    assert all(a.get("error", {}).get("code") != rpc.METHOD_NOT_FOUND for a in out)
    for spec in DOC["methods"].values():
        Draft202012Validator.check_schema(spec["params"])
        for code in spec["errors"]:
            assert str(code) in DOC["errors"]


def _closed() -> list[tuple[str, dict[str, Any]]]:
    return [(m, s["params"]) for m, s in DOC["methods"].items()
            if s["kind"] == "request" and s["params"].get("additionalProperties") is False]


@pytest.mark.parametrize(("method", "schema"), _closed(), ids=[m for m, _ in _closed()])
def test_a_schema_violation_names_where_and_what_never_the_value(
        method: str, schema: dict[str, Any]) -> None:
    init = {"id": 0, "method": "initialize"}
    wrong_type = {name: [SECRET] for name in schema.get("required", [])} or {
        next(iter(schema["properties"])): [SECRET]}
    out = _drive(Server(), init, {"id": 1, "method": method, "params": {"zz": SECRET}},
                 {"id": 2, "method": method, "params": wrong_type})
    unknown, typed = out[1]["error"], out[2]["error"]
    assert unknown["code"] == typed["code"] == rpc.INVALID_PARAMS
    assert unknown["data"]["keyword"] in ("additionalProperties", "required")
    if unknown["data"]["keyword"] == "additionalProperties":
        assert unknown["data"]["unknown"] == ["zz"] and unknown["data"]["pointer"] == ""
    else:
        assert unknown["data"]["missing"] == sorted(schema["required"])
    assert typed["data"]["keyword"] == "type" and typed["data"]["pointer"].startswith("/")
    assert SECRET not in json.dumps(out)


def test_every_method_through_the_sdk_fits_the_schema_and_matches_the_kernel(
        tmp_path: Path) -> None:
    sessions, mem, config = tmp_path / "sessions", _memory(tmp_path / "mem"), tmp_path / "a.json"
    sessions.mkdir()
    tid = _seeded(sessions)
    plan = next(c for c in load_peer_vectors("plan-vectors.json")["cases"] if "result" in c)
    stamp = {"now": "2026-08-29T00:00:00Z", "uuidPrefix": "t"}
    with Client.spawn(["--sessions", str(sessions), "--memory", str(mem),
                       "--config", str(config)]) as c:
        _fits("result", "initialize", c.server)
        got = c.plan_context(plan["request"])
        assert got == kernel_rpc.call("plan_context", plan["request"])["result"]
        # the design's memory API, each call equal to the in-process kernel's
        chain = [("memory/propose", "propose_memory", {"request": PROPOSAL, **stamp})]
        first = c.propose_memory(chain[0][2])
        recall = {"memory": first["memoryAfter"], "request": {
            "query": "pnpm", "sink": "cli", "limit": 5, "now": "2026-09-01T00:00:00Z",
            "scopeAdmissions": [{"scope": "user", "scopeId": "user-1"}]}}
        decide = {"memory": first["memoryAfter"], "uuidPrefix": "t", "uuidStart": 2,
                  "now": "2026-08-29T00:01:00Z",
                  "command": {"memoryId": "mem-1", "type": "reinforce", "expectedRevision": 1}}
        second = c.decide_memory(decide)
        delete = {"memory": second["memoryAfter"], "request": DELETE, "uuidPrefix": "t",
                  "uuidStart": 3, "now": "2026-08-29T00:02:00Z",
                  "purgePorts": [{"type": "projection", "name": "search-index",
                                  "failWith": {"message": "offline", "code": "index_offline"}}]}
        third = c.delete_memory(delete)
        assert third["value"]["status"] == "partial"
        again = {"memory": third["memoryAfter"], "operationId": "del-1", "uuidPrefix": "t",
                 "uuidStart": 4, "now": "2026-08-29T00:03:00Z",
                 "purgePorts": [{"type": "projection", "name": "search-index"}]}
        fourth = c.reconcile(again)
        assert fourth["value"]["status"] == "purged"
        for method, params, answer in (("propose_memory", chain[0][2], first),
                                       ("decide_memory", decide, second),
                                       ("delete_memory", delete, third),
                                       ("reconcile", again, fourth),
                                       ("recall_memory", recall, c.recall_memory(recall))):
            assert answer == kernel_rpc.call(method, params)["result"], method
        # threads: start, resume, read, and a compaction's four notifications
        started = c.start_thread({"title": "t"})
        _fits("result", "thread/start", started)
        [note] = c.wait_for("thread/started")
        _fits("notification", "thread/started", note["params"])
        _fits("result", "thread/resume", c.request("thread/resume", {"threadId": tid}))
        _fits("result", "thread/read", c.read_thread(tid))
        notes = c.compact_thread(tid)
        assert [n["method"] for n in notes] == ORDER
        for n in notes:
            _fits("notification", n["method"], n["params"])
        # the memory tools and Soul
        for method, params in (("memory/list", {}), ("memory/read", {"path": "MEMORY.md"}),
                               ("memory/search", {"query": "tabs"}),
                               ("memory/addNote", {"title": "Editor", "body": "Use tabs."}),
                               ("soul/importPreview", {"source": SOUL_MD})):
            result = c.request(method, params)
            _fits("result", method, result)
        token = result["token"]
        for method, params in (("soul/importApply", {"token": token}),
                               ("soul/get", {}), ("soul/get", {"persona": "reviewer"}),
                               ("soul/artifactBrief", {"task": "a summary"})):
            _fits("result", method, c.request(method, params))
        # a kernel refusal is the kernel's own error; a protocol error is a ServerError
        with pytest.raises(KernelError) as refused:
            c.plan_context({})
        assert refused.value.code == kernel_rpc.call("plan_context", {})["error"]["code"]
        with pytest.raises(ServerError) as err:
            c.request("no/such/method")
        assert err.value.code == rpc.METHOD_NOT_FOUND
        with pytest.raises(ServerError) as gone:
            c.request("session/compact", {"threadId": tid})
        assert gone.value.code == rpc.RETIRED
        assert c.connection.alive


def test_a_server_that_ends_is_server_gone_not_a_hang() -> None:
    c = Client.spawn(timeout=30)
    c.connection.close()
    with pytest.raises(ServerGone):
        c.request("context/plan", {})


# -- the served surfaces of shadow run ---------------------------------------------------


@pytest.fixture(scope="module")
def corpus() -> Any:
    return load_corpus(ROOT / "fixtures")


def _scenario(corpus: Any, name: str) -> Any:
    return next(s for s in corpus.scenarios if s.name == name)


def test_served_cases_agree_with_the_in_process_kernel(corpus: Any) -> None:
    cand = KernelCandidate(recordings=ROOT / "recordings")
    served = Served()
    try:
        for name in ("long-zh-session", "ide-budget-over-max", "large-tool-output-1mib"):
            r = replay_fixture(_scenario(corpus, name), cand, (), served)
            mine = [c for c in r.cases if c.split(".", 1)[0] in ("sdk", "app-server")]
            assert mine and len(mine) % 2 == 0, name
            assert [d for d in r.divergences if d.surface in mine] == [], name
    finally:
        served.close()
    plain = replay_fixture(_scenario(corpus, "long-zh-session"), cand)
    assert not [c for c in plain.cases if c.startswith(("sdk.", "app-server."))]


class _Counting(Served):
    """Counts the served plan calls of each surface (the real server answers them)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: dict[str, int] = {}

    def planner(self, surface: str) -> Any:
        real = super().planner(surface)

        def plan(request: Any) -> Any:
            self.sent[surface] = self.sent.get(surface, 0) + 1
            return real(request)
        return plan


def test_equal_answers_mean_equal_projections_and_nothing_more_is_run(corpus: Any) -> None:
    """The served verdict rests on the planner's answers: where every answer is the
    in-process one, projecting the whole capture through the surface gives exactly the
    in-process projection (checked on every capture of these fixtures), and the judgement
    sends each recorded call once, never the projection's calls again."""
    cand = KernelCandidate(recordings=ROOT / "recordings")
    served = _Counting()
    try:
        for name in ("two-successive-compactions", "ide-budget-over-max", "mixed-zh-en",
                     "provider-summary-ok"):
            s = _scenario(corpus, name)
            canon = canonicalize(s.name, s.input)
            siblings = {c.name: c for c in s.captures}
            for cap in s.captures:
                rec, calls = cand.recording()
                local = rec.project(canon, cap, siblings)
                for surface in ("sdk", "app-server"):
                    remote = cand.with_planner(served.planner(surface)).project(
                        canon, cap, siblings)
                    assert to_wire(remote) == to_wire(local), (name, cap.name, surface)
                served.sent.clear()
                cases, divs = served_mod.judge(cand, served, canon, cap, siblings, local,
                                               calls, ("sdk", "app-server"))
                assert divs == [] and len(cases) == 2
                assert served.sent == ({"sdk": len(calls), "app-server": len(calls)}
                                       if calls else {})
    finally:
        served.close()


class _Tampered(Served):
    """A served kernel that keeps one item fewer than it should (a bug to be caught)."""

    def planner(self, surface: str) -> Any:
        real = super().planner(surface)

        def plan(request: Any) -> Any:
            out = dict(real(request))
            out["selectedItemIds"] = out["selectedItemIds"][1:]
            return out
        return plan if surface == "sdk" else real


class _Dead(Served):
    def planner(self, surface: str) -> Any:
        def plan(request: Any) -> Any:
            raise ServerGone("no answer within 60 s")
        return plan


def test_a_served_difference_or_a_lost_server_is_a_divergence(corpus: Any) -> None:
    cand = KernelCandidate(recordings=ROOT / "recordings")
    scenario = _scenario(corpus, "long-zh-session")
    tampered = _Tampered()
    try:
        r = replay_fixture(scenario, cand, ("sdk.*", "app-server.*"), tampered)
    finally:
        tampered.close()
    assert {d.surface.split(".", 1)[0] for d in r.divergences} == {"sdk"}
    assert all(d.attribution in ("candidate", "none") for d in r.divergences)
    dead = replay_fixture(scenario, cand, ("sdk",), _Dead())
    assert {d.reason_code for d in dead.divergences} == {"served.unavailable"}
    assert {d.severity for d in dead.divergences} == {"blocking"}
    assert all(c.startswith("sdk.") for c in dead.cases)  # --surface sdk: only those


def test_schema_is_built_once_and_refuses_a_broken_document() -> None:
    broken = {**DOC, "methods": {"x": {"kind": "request", "params": {"type": 7}}}}
    with pytest.raises(SchemaError):
        Schema(broken)


def test_threads_over_the_sqlite_session_store(tmp_path: Path) -> None:
    from kernel.adapters.jsonl.session import JsonlSessionPort
    from kernel.adapters.sqlite.session import SqliteSessionPort

    tid = _seeded(tmp_path / "jsonl")
    snapshot = JsonlSessionPort(tmp_path / "jsonl").read_snapshot(tid)
    assert snapshot is not None
    db = tmp_path / "threads.db"
    port = SqliteSessionPort(db)
    port.seed(tid, items=[dict(i) for i in snapshot.items])
    port.close()
    with Client.spawn(["--sessions", str(db), "--session-store", "sqlite"]) as c:
        before = c.read_thread(tid)["thread"]
        _fits("result", "thread/read", {"thread": before})
        assert len(before["items"]) == len(snapshot.items)
        started = c.start_thread({"title": "new"})["thread"]
        assert c.request("thread/resume", {"threadId": started["id"]})["thread"][
            "itemCount"] == 0
        notes = c.compact_thread(tid)
        assert [n["method"] for n in notes] == ORDER
        outcome = notes[2]["params"]["item"]["compaction"]
        assert outcome["status"] == "committed"
        after = c.read_thread(tid)["thread"]
        assert after["head"] == outcome["newHead"] != before["head"]
        assert after["items"] != before["items"]  # the compaction committed into the store
        with pytest.raises(ServerError) as unknown:
            c.compact_thread("thr_nope")
        assert unknown.value.code == rpc.INVALID_PARAMS
    assert SqliteSessionPort(db).verify(tid)


def test_threads_sharing_one_served_kernel_never_mix_their_answers() -> None:
    """A Dask worker may run several threads; they share the process's server."""
    from concurrent.futures import ThreadPoolExecutor

    cases = [c for c in load_peer_vectors("plan-vectors.json")["cases"] if "result" in c][:24]
    served = Served()
    try:
        jobs = [(served.planner("sdk" if i % 2 else "app-server"), c)
                for i, c in enumerate(cases)]
        with ThreadPoolExecutor(max_workers=4) as pool:
            got = list(pool.map(lambda j: j[0](j[1]["request"]), jobs))
    finally:
        served.close()
    assert got == [c["result"] for c in cases]
