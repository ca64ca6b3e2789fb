"""``shadow app-server --provider-url``: every compaction outcome through a subprocess.

The server summarizes a compaction turn's dropped items with an OpenAI-compatible provider;
here that provider is a loopback HTTP stub in the test process whose answer chooses the
outcome.  Each outcome is driven through the SDK (a real ``shadow app-server`` process):
``{}`` first, then exactly ``turn/started → item/started → item/completed →
turn/completed`` with the outcome only there, and the thread changed only when committed
or degraded.  ``cancelled`` is a ``turn/interrupt`` sent while the provider call is in
flight.
"""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from shadow.app_server.provider import ProviderSetupError, provider
from shadow.providers.openai_compat import HANDOFF_FIELDS, CancellableTransport
from shadow.sdk import Client
from tests.shadow.test_app_server import INIT, ORDER, SECRET, _seeded, check_turn
from tests.shadow.test_app_server_sdk import _fits

ROOT = Path(__file__).resolve().parents[2]
USAGE = {"prompt_tokens": 30, "completion_tokens": 12}


def _handoff() -> str:
    out: dict[str, Any] = {k: [] for k in HANDOFF_FIELDS}
    out["objective"] = "Keep the thread going"
    return json.dumps(out)


class Stub:
    """A loopback chat-completions endpoint; ``mode`` is the answer it gives."""

    def __init__(self, sessions: Path, tid: str) -> None:
        self.mode = "committed"
        self.gzip = False  # answer content-encoded, as real providers do
        self.sessions, self.tid = sessions, tid
        self.requests: list[dict[str, Any]] = []  # path, auth header, body keys
        self.received = threading.Event()  # a request arrived
        self.release = threading.Event()  # let a held ("cancelled") request answer
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                stub.requests.append({"path": self.path,
                                      "authorization": self.headers.get("authorization"),
                                      "keys": sorted(body)})
                stub.received.set()
                status, reply = stub.answer()
                data = json.dumps(reply).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    if stub.gzip:
                        data = gzip.compress(data)
                        self.send_header("content-encoding", "gzip")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the server gave up on this call (cancelled)
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def answer(self) -> tuple[int, dict[str, Any]]:
        ok = {"id": "c1", "model": "m", "usage": USAGE,
              "choices": [{"message": {"role": "assistant", "content": _handoff()}}]}
        if self.mode == "degraded":  # paid for, but prose instead of the handoff object
            ok["choices"] = [{"message": {"role": "assistant", "content": "Sure! Summary."}}]
        if self.mode == "stale":  # another writer appends while the summary is made
            from kernel.adapters.jsonl.session import JsonlSessionPort

            JsonlSessionPort(self.sessions).append_message(self.tid, "user", "meanwhile")
        if self.mode == "reconciliation_required":
            return 504, {"error": {"message": "gateway timeout"}}
        if self.mode == "aborted":
            return 400, {"error": {"message": "refused"}}
        if self.mode == "cancelled":
            self.release.wait(30)
        return 200, ok

    def close(self) -> None:
        self.release.set()
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def stub(tmp_path: Path) -> Iterator[Stub]:
    tid = _seeded(tmp_path / "sessions", messages=120)  # more than the server's window
    s = Stub(tmp_path / "sessions", tid)
    yield s
    s.close()


def _client(stub: Stub, *extra: str) -> Client:
    return Client.spawn(["--sessions", str(stub.sessions), "--provider-url", stub.url,
                         "--provider-model", "m", *extra])


def _check_turn(notes: list[dict[str, Any]], tid: str, outcome: str) -> dict[str, Any]:
    for n in notes:  # each as the schema has it
        _fits("notification", n["method"], n["params"])
    return check_turn(notes, tid, outcome)


#: the turn's error code of each outcome a provider answer leads to
ERROR_CODES = {"stale": "stale", "reconciliation_required": "reconciliation_required",
               "aborted": "provider_http_error"}


@pytest.mark.parametrize("outcome", ["committed", "degraded", "stale",
                                     "reconciliation_required", "aborted"])
def test_each_provider_outcome_in_order_through_a_subprocess(stub: Stub, outcome: str) -> None:
    stub.mode = outcome
    with _client(stub) as client:
        before = client.read_thread(stub.tid)["thread"]
        assert client.request("thread/compact/start", {"threadId": stub.tid}) == {}
        notes = client.wait_for("turn/completed")
        compaction = _check_turn(notes, stub.tid, outcome)
        after = client.read_thread(stub.tid)["thread"]
    if outcome in ERROR_CODES:
        assert notes[3]["params"]["turn"]["error"]["code"] == ERROR_CODES[outcome]
    assert "providerUsage" not in compaction
    assert len(stub.requests) == 1  # one provider call, never retried
    assert stub.requests[0]["path"] == "/v1/chat/completions"
    assert stub.requests[0]["authorization"] is None  # no --provider-key-env: no key sent
    if outcome in ("committed", "degraded"):  # the compaction is the thread's new state
        assert after["head"] == compaction["newHead"] != before["head"]
        assert after["items"] != before["items"]
    elif outcome == "stale":  # only the other writer's message was added
        assert after["items"][:-1] == before["items"]
        assert "meanwhile" in json.dumps(after["items"][-1])
    else:  # nothing of the compaction reached the thread's items
        assert after["items"] == before["items"]
        # a call whose outcome is unknown is recorded, to be reconciled; an aborted one not
        assert (after["head"] != before["head"]) == (outcome == "reconciliation_required")


def test_turn_interrupt_cancels_the_provider_call_in_flight(stub: Stub) -> None:
    stub.mode = "cancelled"
    with _client(stub) as client:
        before = client.read_thread(stub.tid)["thread"]
        assert client.request("thread/compact/start", {"threadId": stub.tid}) == {}
        started = client.wait_for("turn/started")
        turn = started[-1]["params"]["turn"]["id"]
        assert stub.received.wait(30)  # the call is in flight, held by the stub
        assert client.interrupt_turn(stub.tid, turn) == {}
        notes = [n for n in started if n["method"] in ORDER] + client.wait_for(
            "turn/completed")
        compaction = _check_turn(notes, stub.tid, "cancelled")
        assert notes[3]["params"]["turn"]["status"] == "interrupted"
        assert notes[3]["params"]["turn"]["error"]["code"] == "cancelled"
        assert compaction["providerUsage"] == "unknown"  # it was sent: it may be billed
        assert client.read_thread(stub.tid)["thread"] == before  # nothing changed
        from shadow.sdk import ServerError

        with pytest.raises(ServerError) as gone:  # the turn is over: nothing to interrupt
            client.interrupt_turn(stub.tid, turn)
        assert gone.value.code == -32602
    assert len(stub.requests) == 1


def test_the_api_key_comes_from_the_named_variable_and_is_never_logged(
        stub: Stub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHADOW_TEST_PROVIDER_KEY", SECRET)
    data = b"".join(json.dumps(m).encode() + b"\n" for m in (
        INIT, {"method": "initialized"},
        {"id": 1, "method": "thread/compact/start", "params": {"threadId": stub.tid}}))
    proc = subprocess.run([sys.executable, "-m", "shadow", "app-server", "--sessions",
                           str(stub.sessions), "--provider-url", stub.url, "--provider-model",
                           "m", "--provider-key-env", "SHADOW_TEST_PROVIDER_KEY"],
                          input=data, capture_output=True, cwd=ROOT, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert stub.requests[0]["authorization"] == f"Bearer {SECRET}"
    assert SECRET.encode() not in proc.stdout + proc.stderr
    out = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    assert [m.get("id", m.get("method")) for m in out] == [0, 1, *ORDER]


def test_bad_provider_options_are_usage_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHADOW_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ProviderSetupError, match="SHADOW_TEST_UNSET_KEY"):
        provider("http://127.0.0.1:9/v1", "m", key_env="SHADOW_TEST_UNSET_KEY")
    with pytest.raises(ProviderSetupError, match="http"):
        provider("file:///etc/passwd", "m")
    with pytest.raises(ProviderSetupError, match="unencrypted"):
        monkeypatch.setenv("SHADOW_TEST_SET_KEY", SECRET)
        provider("http://llm.example/v1", "m", key_env="SHADOW_TEST_SET_KEY")
    provider("https://llm.example/v1", "m", key_env="SHADOW_TEST_SET_KEY")  # fine
    for args in (["--provider-url", "http://127.0.0.1:9/v1"],  # a model is needed too
                 ["--provider-key-env", "X"],  # a provider option without a provider
                 ["--provider-url", "http://127.0.0.1:9/v1", "--provider-model", "m",
                  "--provider-timeout", "-1"],
                 ["--provider-url", "ftp://x", "--provider-model", "m"]):
        proc = subprocess.run([sys.executable, "-m", "shadow", "app-server", *args],
                              input=b"", capture_output=True, cwd=ROOT, check=False,
                              timeout=60)
        assert proc.returncode == 2 and b"provider" in proc.stderr


def test_the_cancellable_transport_gives_up_only_when_cancelled() -> None:
    import httpx

    from shadow.providers.openai_compat import ProviderCancelled

    hold = threading.Event()

    def slow(request: httpx.Request) -> httpx.Response:
        hold.wait(10)
        return httpx.Response(200, content=b"{}")

    flag = threading.Event()
    transport = CancellableTransport(httpx.MockTransport(slow), flag.is_set, poll=0.01)
    hold.set()  # answers at once: passed through
    response = transport.handle_request(httpx.Request("POST", "http://x/v1"))
    assert (response.status_code, response.read()) == (200, b"{}")
    hold.clear()
    threading.Timer(0.05, flag.set).start()
    with pytest.raises(ProviderCancelled) as sent:
        transport.handle_request(httpx.Request("POST", "http://x/v1"))
    assert sent.value.sent is True
    hold.set()
    with pytest.raises(ProviderCancelled) as early:  # already cancelled: nothing is sent
        transport.handle_request(httpx.Request("POST", "http://x/v1"))
    assert early.value.sent is False
    from shadow.providers.openai_compat import outcome_from_error

    after_send = outcome_from_error(sent.value)
    assert (after_send.status, after_send.usage, after_send.reason) == (
        "aborted", "unknown", "cancelled") and after_send.detail["sent"] is True
    before_send = outcome_from_error(early.value)
    assert (before_send.usage, "sent" in before_send.detail) == ("none", False)


def test_the_cancellable_transport_keeps_the_answer_encoded_for_the_client() -> None:
    import httpx

    from shadow.providers.openai_compat import OpenAICompatClient

    body = {"id": "c1", "model": "m", "usage": USAGE,
            "choices": [{"message": {"role": "assistant", "content": _handoff()}}]}
    zipped = gzip.compress(json.dumps(body).encode())

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-encoding": "gzip"}, content=zipped)

    client = OpenAICompatClient(base_url="http://x/v1", transport=CancellableTransport(
        httpx.MockTransport(answer), lambda: False, poll=0.01))
    assert client.complete({"model": "m", "messages": []}).status == "committed"


def test_a_compressed_answer_is_read_as_the_client_would(stub: Stub) -> None:
    stub.gzip = True  # httpx asks for gzip; real providers send it
    with _client(stub) as client:
        assert client.request("thread/compact/start", {"threadId": stub.tid}) == {}
        compaction = _check_turn(client.wait_for("turn/completed"), stub.tid, "committed")
        items = client.read_thread(stub.tid)["thread"]["items"]
    assert compaction["status"] == "committed"
    assert any(i["sourceRef"]["store"] == "provider-summary" for i in items)


def test_an_unreachable_provider_aborts_the_turn(stub: Stub) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Client.spawn(["--sessions", str(stub.sessions), "--provider-url",
                       f"http://127.0.0.1:{port}/v1", "--provider-model", "m"]) as client:
        before = client.read_thread(stub.tid)["thread"]
        assert client.request("thread/compact/start", {"threadId": stub.tid}) == {}
        notes = client.wait_for("turn/completed")
        _check_turn(notes, stub.tid, "aborted")
        assert notes[3]["params"]["turn"]["error"]["code"] == "provider_unavailable"
        assert client.read_thread(stub.tid)["thread"] == before


def test_lines_wait_for_the_turn_but_an_interrupt_does_not(stub: Stub) -> None:
    """While a turn runs, ``thread/read`` is answered after its ``turn/completed``; a
    ``turn/interrupt`` naming another thread is -32602 at once, the right one ``{}``."""
    stub.mode = "cancelled"
    with _client(stub) as client:
        conn = client.connection
        assert client.request("thread/compact/start", {"threadId": stub.tid}) == {}
        turn = client.wait_for("turn/started")[-1]["params"]["turn"]["id"]
        assert stub.received.wait(30)
        for message in ({"id": "read", "method": "thread/read", "params": {"threadId": stub.tid}},
                        {"id": "other", "method": "turn/interrupt",
                         "params": {"threadId": "thr_other", "turnId": turn}},
                        {"id": "stop", "method": "turn/interrupt",
                         "params": {"threadId": stub.tid, "turnId": turn}}):
            conn.send(message)
        seen = [conn.receive() for _ in range(6)]
    order = [m.get("id", m.get("method")) for m in seen]
    assert order == ["item/started", "other", "stop", "item/completed", "turn/completed",
                     "read"], order
    assert seen[1]["error"]["code"] == -32602 and seen[1]["error"]["data"]["field"] == "turnId"
    assert seen[2]["result"] == {}
    assert seen[5]["result"]["thread"]["id"] == stub.tid


def test_an_interrupt_read_while_no_turn_runs_waits_its_turn(stub: Stub) -> None:
    from shadow.app_server.server import Server
    from tests.shadow.test_app_server import _drive, _threads

    out = _drive(Server(threads=_threads(stub.sessions)), INIT,
                 {"id": 1, "method": "thread/resume", "params": {"threadId": stub.tid}},
                 {"id": 2, "method": "turn/interrupt",
                  "params": {"threadId": stub.tid, "turnId": "turn_none"}},
                 {"id": 3, "method": "thread/resume", "params": {"threadId": stub.tid}})
    assert [m["id"] for m in out] == [0, 1, 2, 3]  # in line order: nothing jumped ahead
    assert out[2]["error"]["code"] == -32602
