"""The peer's ``cross-surface-projection-v1.tsv`` for the surfaces we serve.

Each ``fixture`` row names a scenario, the surfaces it must hold on (``cli-js``, …,
``app-server``, ``python-sdk``, …), its input parameters and the expected properties.  We
serve two of those surfaces — ``app-server`` (``shadow app-server`` as a subprocess, spoken
to in raw protocol lines) and ``python-sdk`` (``shadow.sdk.Client``) — beside the
in-process kernel.  Each scenario we can build runs on all three; the three observations
must be equal, and must hold every expected property of the row.  The rows we do not
serve yet are named in :data:`NOT_SERVED` with the reason (docs/app-server.md), and the
test fails if the file gains or loses a row without this list following.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kernel.errors import KernelError
from shadow import kernel_rpc
from shadow.app_server.server import KERNEL_METHODS
from shadow.sdk import Client, result_of

ROOT = Path(__file__).resolve().parents[2]
TSV = ROOT / "tests" / "vectors" / "peer" / "fixtures" / "cross-surface-projection-v1.tsv"
OURS = ("app-server", "python-sdk")
NOT_SERVED = {
    "crash-restart": "killing the server inside a deletion commit is not built",
    "offline-replica-reinjection": "replica merge is not a served method",
}
Call = Callable[[str, dict[str, Any]], Any]


def _rows() -> list[dict[str, str]]:
    text = TSV.read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text), delimiter="\t"))


def _fixture_rows() -> list[dict[str, str]]:
    return [r for r in _rows() if r["method"] == "fixture"]


# -- the three ways to call the kernel ------------------------------------------------------


def _in_process(method: str, params: dict[str, Any]) -> Any:
    out = kernel_rpc.call(KERNEL_METHODS[method], params)
    if "error" in out:
        err = out["error"]
        raise KernelError(str(err.get("message", "")), code=str(err["code"]),
                          details=err.get("details"))
    return out["result"]


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with Client.spawn() as c:
        yield c


def _wire(client: Client) -> Call:
    """Raw request lines; notifications read before the answer (a turn's) are kept in
    ``client.notifications`` for ``wait_for``."""
    ids = itertools.count(1)

    def call(method: str, params: dict[str, Any]) -> Any:
        ident = f"tsv-{next(ids)}"
        client.connection.send_line(json.dumps(
            {"jsonrpc": "2.0", "id": ident, "method": method, "params": params},
            ensure_ascii=False).encode("utf-8"))
        while isinstance(got := client.connection.receive(), dict) and "method" in got \
                and "id" not in got:
            client.notifications.append(got)
        return result_of(got, ident)
    return call


# -- building blocks --------------------------------------------------------------------------

_ZH = "部署评审事件策略队列回滚发布配置摘要延迟项目审计沙箱分支偏好更新"
_EN = "deploy review event policy queue rollback release config summary latency audit"


def _item(n: int, kind: str = "message", content: str | None = None, tokens: int = 40,
          **binding: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "schemaVersion": 1, "itemId": f"item:{n:03d}", "kind": kind, "scope": "session",
        "scopeId": "session-1", "sensitivity": "internal", "tokenEstimate": tokens,
        "sourceRef": {"store": "session-log", "id": f"src-{n:03d}"},
        "content": content if content is not None else (_ZH if n % 2 else _EN) + f" #{n}",
        "trust": "host" if kind == "task-state" else "user", "pinned": False,
        "priority": 100 - n % 100, "createdAt": "2026-08-26T01:51:14.644Z",
        "allowedSinks": ["Provider.Local"],
        "provenance": {"source": "host", "observedAt": "2026-08-26T01:51:14.644Z"},
    }
    if binding:
        item["binding"] = binding
    return item


def _plan_request(items: list[dict[str, Any]], window: int) -> dict[str, Any]:
    return {"modelWindowTokens": window, "reservedOutputTokens": 64, "safetyMarginTokens": 16,
            "recoveryReserveTokens": 0, "items": items, "sink": "Provider.Local",
            "scopeAdmissions": [{"scope": "session", "scopeId": "session-1"}],
            "policyVersion": "policy-2026.08", "modelProfile": "gpt-5.4:high",
            "sessionHead": f"head:{len(items)}", "memoryRevision": 1,
            "now": "2026-08-30T02:30:16.000Z"}


def _protected_session(count: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """``count`` zh/en messages with a live goal, a pending approval and a question."""
    items = [_item(n) for n in range(count)]
    marks = {"goal": items[1]["itemId"], "approval": items[count // 2]["itemId"],
             "question": items[count - 3]["itemId"]}
    items[1] = _item(1, "task-state", "goal: ship the release", taskState="running")
    items[count // 2]["binding"] = {"approvalId": "approval-1"}
    items[count - 3]["binding"] = {"questionId": "question-1"}
    return items, marks


def _multilingual(call: Call, p: dict[str, Any]) -> dict[str, Any]:
    items, marks = _protected_session(int(p["messageCount"]))
    request = _plan_request(items, int(p["modelWindowTokens"]))
    plan = call("context/plan", request)
    selected = plan["selectedItemIds"]
    assert len(selected) < len(items)  # the window really cuts
    return {"protected": [k for k, i in marks.items() if i in selected],
            "stableOrder": call("context/plan", request)["selectedItemIds"] == selected,
            "plan": plan}


def _tools_and_pending(call: Call, p: dict[str, Any]) -> dict[str, Any]:
    items = [_item(n) for n in range(40)]
    for k in range(int(p["parallelToolCalls"])):  # the calls, then their results (parallel)
        items.append(_item(100 + k, "tool-evidence", f"call {k}", toolCallId=f"call-{k}",
                           toolRole="call", toolOutcome="succeeded"))
    for k in range(int(p["parallelToolCalls"])):
        items.append(_item(200 + k, "tool-evidence", f"result {k}", toolCallId=f"call-{k}",
                           toolRole="result", toolOutcome="succeeded"))
    pending = []
    if p.get("pendingApproval"):
        items.append(_item(300, "message", "approve the deploy?", approvalId="approval-1"))
        pending.append("item:300")
    if p.get("pendingQuestion"):
        items.append(_item(301, "message", "which region?", questionId="question-1"))
        pending.append("item:301")
    plan = call("context/plan", _plan_request(items, 512))
    selected = set(plan["selectedItemIds"])
    assert len(selected) < len(items)  # the window really cuts
    pairs = [{f"item:{100 + k:03d}", f"item:{200 + k:03d}"}
             for k in range(int(p["parallelToolCalls"]))]
    return {"toolPairsIntact": all(len(pair & selected) in (0, 2) for pair in pairs),
            "pendingPreserved": all(i in selected for i in pending), "plan": plan}


def _orphan(call: Call, p: dict[str, Any]) -> dict[str, Any]:
    assert p["hasCall"] is False
    items = [_item(n) for n in range(5)]
    items.append(_item(50, "tool-evidence", "late result", toolCallId="call-late",
                       toolRole=p["toolRole"], toolOutcome=p["toolOutcome"]))
    try:
        call("context/plan", _plan_request(items, 4096))
    except KernelError as exc:
        return {"error": exc.code, "details": exc.details}
    return {"error": None}


_PROPOSAL = {"category": "preference", "provenance": {
    "source": "explicit-user-memory", "observedAt": "2026-08-28T00:00:00Z"},
    "evidenceRefs": [{"store": "session-log", "id": "ev-1"}], "confidence": 0.8,
    "importance": 0.5, "sensitivity": "internal", "allowedSinks": ["cli"],
    "retentionPolicy": {"mode": "durable"}, "activate": True}
_IDS = {"session": "session-1", "agent": "agent-1", "project": "project-1", "user": "user-1"}


def _store(call: Call, scopes: list[str]) -> dict[str, Any]:
    memory: dict[str, Any] | None = None
    for k, scope in enumerate(scopes):
        params: dict[str, Any] = {"request": {
            **_PROPOSAL, "memoryId": f"mem-{scope}", "scope": scope, "scopeId": _IDS[scope],
            "content": f"shared deploy preference of the {scope}"},
            "now": "2026-08-29T00:00:00Z", "uuidPrefix": "t", "uuidStart": k + 1}
        if memory is not None:
            params["memory"] = memory
        memory = call("memory/propose", params)["memoryAfter"]
    assert memory is not None
    return memory


def _recall(call: Call, memory: dict[str, Any], scopes: list[str], query: str,
            **extra: Any) -> dict[str, Any]:
    return dict(call("memory/recall", {"memory": memory, **extra, "request": {
        "query": query, "sink": "cli", "limit": 10, "now": "2026-09-01T00:00:00Z",
        "scopeAdmissions": [{"scope": s, "scopeId": _IDS[s]} for s in scopes]}}))


def _overlapping_scopes(call: Call, p: dict[str, Any]) -> dict[str, Any]:
    memory = _store(call, p["scopes"])
    every = _recall(call, memory, p["scopes"], p["query"])["value"]["results"]
    alone = {s: [r["scope"] for r in _recall(call, memory, [s], p["query"])["value"]["results"]]
             for s in p["scopes"]}
    return {"admittedCount": len({r["scope"] for r in every}),
            "crossScopeFallback": any(hits != [s] for s, hits in alone.items()),
            "results": every}


def _index_rebuild(call: Call, p: dict[str, Any]) -> dict[str, Any]:
    assert (p["projection"], p["source"]) == ("search-index", "memory-authority")
    scopes = ["session", "project", "user"]
    memory = _store(call, scopes)
    scan = _recall(call, memory, scopes, "shared deploy", index=False)
    index = _recall(call, memory, scopes, "shared deploy", index=True)
    digests = [[(r["memoryId"], r.get("digest")) for r in x["value"]["results"]]
               for x in (scan, index)]
    return {"sameRecordDigests": digests[0] == digests[1] and bool(digests[0]),
            "paths": [scan["path"], index["path"]]}


def _cas_race(call: Call, p: dict[str, Any]) -> dict[str, Any]:
    memory = _store(call, ["user"])
    winners, codes = 0, []
    for k in range(int(p["writers"])):  # each writer read revision 1; they commit in turn
        try:
            memory = call("memory/decide", {
                "memory": memory, "now": "2026-08-29T00:01:00Z", "uuidPrefix": "w",
                "uuidStart": k + 1, "command": {"memoryId": "mem-user", "type": "reinforce",
                                                "expectedRevision": p["expectedRevision"]}})[
                "memoryAfter"]
            winners += 1
        except KernelError as exc:
            codes.append(exc.code)
    return {"winnerCount": winners, "losers": codes}


def _partial_delete(call: Call, p: dict[str, Any]) -> dict[str, Any]:
    assert p["firstPurge"] == "offline" and p["restart"] is True
    memory = _store(call, ["user"])
    request = {"requestId": "del-1", "subject": "user-1", "scope": "user",
               "scopeId": "user-1", "selector": "memory:mem-user", "memoryId": "mem-user",
               "expectedRevision": 1, "fence": "fence-1", "authority": "user-1"}
    first = call("memory/delete", {
        "memory": memory, "request": request, "uuidPrefix": "d", "uuidStart": 1,
        "now": "2026-08-29T00:02:00Z", "purgePorts": [{
            "type": "projection", "name": "search-index",
            "failWith": {"message": "offline", "code": "index_offline"}}]})
    # a restart: a new call that knows only the store the first one left
    again = call("reconcile", {
        "memory": first["memoryAfter"], "operationId": "del-1", "uuidPrefix": "d",
        "uuidStart": 2, "now": "2026-08-29T00:03:00Z",
        "purgePorts": [{"type": "projection", "name": "search-index"}]})
    return {"initialStatus": first["value"]["status"], "finalStatus": again["value"]["status"],
            "state": again["recordStates"]["mem-user"]["state"]}


SCENARIOS: dict[str, Callable[[Call, dict[str, Any]], dict[str, Any]]] = {
    "multilingual-window-512": _multilingual,
    "multilingual-window-4096": _multilingual,
    "parallel-tools-pending": _tools_and_pending,
    "orphan-late-tool-result": _orphan,
    "overlapping-scopes": _overlapping_scopes,
    "index-rebuild": _index_rebuild,
    "cas-race": _cas_race,
    "partial-delete-reconcile": _partial_delete,
}


# -- the provider outcomes: a thread compacted by a server with a provider ------------------

#: the row's provider outcome -> what the loopback provider stub does
PROVIDER_MODES = {"settled": "committed", "failed": "aborted",
                  "unknown": "reconciliation_required", "cancelled": "cancelled"}


def _provider_projection(notes: list[dict[str, Any]], items: list[Any]) -> dict[str, Any]:
    """A compaction turn as the rows state it.  The thread lifecycle's ``cancelled`` is the
    kernel's ``aborted`` state reached by a ``Cancelled`` event (docs/compaction.md): the
    rows, like the kernel, call it ``aborted``.  ``provider-backed``: the thread now holds
    the provider's summary item."""
    outcome = notes[2]["params"]["item"]["compaction"]["status"]
    out: dict[str, Any] = {"status": "aborted" if outcome == "cancelled" else outcome,
                           "turn": notes[3]["params"]["turn"]["status"]}
    if outcome in ("committed", "degraded"):
        summarized = any(i.get("sourceRef", {}).get("store") == "provider-summary"
                         for i in items)
        out["strategy"] = "provider-backed" if summarized else "deterministic-fallback"
    return out


def _provider_in_process(stub: Any, root: Path, tid: str) -> dict[str, Any]:
    from shadow.app_server.provider import provider
    from shadow.app_server.threads import DEFAULT_POLICY, Threads

    counter = itertools.count()
    threads = Threads(root, lambda: f"{next(counter):04d}", lambda: 1_790_000_000_000,
                      DEFAULT_POLICY, "jsonl", provider(stub.url, "m", sink="provider.local"))
    notes: list[dict[str, Any]] = []
    for note in threads.compact_start({"threadId": tid})[1]():  # the turn, in this thread
        notes.append(note)
        if note["method"] == "turn/started" and stub.mode == "cancelled":
            turn = note["params"]["turn"]["id"]

            def interrupt(turn: str) -> None:  # as the server's reader thread would
                assert stub.received.wait(30)  # mid-call
                threads.interrupt({"threadId": tid, "turnId": turn})
            threading.Thread(target=interrupt, args=(turn,), daemon=True).start()
    return _provider_projection(notes, threads.read({"threadId": tid})["thread"]["items"])


def _provider_served(client: Client, stub: Any, tid: str, raw: bool) -> dict[str, Any]:
    call: Call = _wire(client) if raw else (lambda m, p: client.request(m, p))
    assert call("thread/compact/start", {"threadId": tid}) == {}
    notes = client.wait_for("turn/started")
    if stub.mode == "cancelled":
        assert stub.received.wait(30)
        turn = notes[-1]["params"]["turn"]["id"]
        assert call("turn/interrupt", {"threadId": tid, "turnId": turn}) == {}
    notes += client.wait_for("turn/completed")
    notes = [n for n in notes if n.get("params", {}).get("threadId") == tid]
    return _provider_projection(notes, call("thread/read", {"threadId": tid})["thread"]["items"])


@pytest.mark.parametrize("row", [r for r in _fixture_rows()
                                 if r["category"] == "provider-outcome"],
                         ids=lambda r: r["scenario_id"])
def test_a_provider_row_holds_alike_in_process_through_the_server_and_the_sdk(
        row: dict[str, str], tmp_path: Path) -> None:
    from tests.shadow.test_app_server import _seeded
    from tests.shadow.test_app_server_provider import Stub

    params, expected = json.loads(row["input_json"]), json.loads(row["expected_json"])
    assert params.get("allowFallback") in (None, False)  # the server never falls back
    seen = {}
    for way in ("in-process", "app-server", "python-sdk"):
        root = tmp_path / way
        tid = _seeded(root, messages=120)  # more than the server's window
        stub = Stub(root, tid)
        stub.mode = PROVIDER_MODES[params["outcome"]]
        try:
            if way == "in-process":
                seen[way] = _provider_in_process(stub, root, tid)
            else:
                with Client.spawn(["--sessions", str(root), "--provider-url", stub.url,
                                   "--provider-model", "m"]) as c:
                    seen[way] = _provider_served(c, stub, tid, way == "app-server")
        finally:
            stub.close()
        assert len(stub.requests) == 1, way  # one provider call each, never retried
    assert seen["app-server"] == seen["in-process"] == seen["python-sdk"]
    observed = seen["in-process"]
    assert {k: observed.get(k) for k in expected} == expected, observed
    # what the rows cannot tell apart, the turn does: an interrupt, or a failed call
    assert observed["turn"] == ("interrupted" if params["outcome"] == "cancelled" else
                                "completed" if params["outcome"] == "settled" else "failed")


def test_every_row_is_served_or_named_as_not_served() -> None:
    rows = _fixture_rows()
    assert len(rows) == 14 and all(set(OURS) <= set(r["surfaces"].split(",")) for r in rows)
    providers = {r["scenario_id"] for r in rows if r["category"] == "provider-outcome"}
    assert {r["scenario_id"] for r in rows} == set(SCENARIOS) | set(NOT_SERVED) | providers
    assert not set(SCENARIOS) & set(NOT_SERVED) and not providers & (
        set(SCENARIOS) | set(NOT_SERVED))
    assert {json.loads(r["input_json"])["outcome"] for r in rows
            if r["scenario_id"] in providers} == set(PROVIDER_MODES)


@pytest.mark.parametrize("row", [r for r in _fixture_rows() if r["scenario_id"] in SCENARIOS],
                         ids=lambda r: r["scenario_id"])
def test_a_row_holds_alike_in_process_through_the_server_and_the_sdk(
        row: dict[str, str], client: Client) -> None:
    build = SCENARIOS[row["scenario_id"]]
    params, expected = json.loads(row["input_json"]), json.loads(row["expected_json"])
    seen = {"in-process": build(_in_process, params),
            "app-server": build(_wire(client), params),
            "python-sdk": build(lambda m, p: client.request(m, p), params)}
    assert seen["app-server"] == seen["in-process"] == seen["python-sdk"]
    observed = seen["in-process"]
    assert {k: observed.get(k) for k in expected} == expected, observed
