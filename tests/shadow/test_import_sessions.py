"""``shadow import-sessions`` (issue 15 item 2): a synthetic CLI session store of 24
sessions — hash-chained by the kernel's own chain encoder, with compactions (two in one
session), tool calls, Chinese text, a broken chain, a torn last line, a non-JSON line and
a canary of every detector class planted in messages — becomes fixtures that ``shadow
run`` judges, and no canary reaches any byte written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernel.adapters.jsonl.chain import encode_event
from kernel.packets.anticorruption import SECRET_RULES, scan
from shadow.cli import main
from shadow.fixtures import load_corpus
from shadow.import_.importer import ImportResult, import_sessions
from shadow.import_.redact import EMAIL_RULE, Redactor, find_spans, length_class
from shadow.import_.replay import provenance, replay, strip_tags, windows
from shadow.import_.store import Event
from shadow.run import RunOptions, execute

ROOT = Path(__file__).resolve().parents[2]
BASE_MS = 1_787_227_200_000
TAG = {"schema": "chainlesschain.session-message-provenance/v1", "kind": "compact-summary"}

#: (rule id the kernel reports, text planted, the part of it that must never be written)
CANARIES: list[tuple[str, str, str]] = [
    ("secret.private_key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEcanaryPRIVKEYzq81\n"
                           "-----END RSA PRIVATE KEY-----", "MIIEcanaryPRIVKEYzq81"),
    ("secret.api_key.anthropic", "sk-ant-api03-CanaryAntKey0123456789abcdef",
     "CanaryAntKey0123456789"),
    ("secret.api_key.openai", "sk-proj-CanaryOpenAi0123456789AbCdEf", "CanaryOpenAi0123456789"),
    ("secret.api_key.aws", "AKIACANARY0123456789", "AKIACANARY0123456789"),
    ("secret.api_key.github", "ghp_CanaryGithubToken0123456789abcdefXYZ",
     "CanaryGithubToken0123456789"),
    ("secret.api_key.slack", "xoxb-Canary0123-Slack4567", "Canary0123-Slack4567"),
    ("secret.api_key.stripe", "sk_live_CanaryStripe0123456789", "CanaryStripe0123456789"),
    ("secret.webhook_secret", "whsec_CanaryWebhook0123456789", "CanaryWebhook0123456789"),
    ("secret.api_key.google", "AIzaCanaryGoogleKey0123456789abcdefghij",
     "CanaryGoogleKey0123456789"),
    ("secret.jwt", "eyJhbGciOiJIUzI1NiJ9.eyJjYW5hcnkiOiJqd3QifQ.CanaryJwtSig0123456789",
     "CanaryJwtSig0123456789"),
    ("secret.bearer_token", "Authorization: Bearer CanaryBearer0123456789xyz",
     "CanaryBearer0123456789"),
    ("secret.url_credentials", "https://deploy:CanaryUrlPw0123@git.example.net/repo.git",
     "CanaryUrlPw0123"),
    ("secret.assignment", "password=CanaryPassw0rd99", "CanaryPassw0rd99"),
    ("secret.cookie", "Cookie: session_id=CanaryCookie0123456789; theme=dark",
     "CanaryCookie0123456789"),
    ("secret.recovery_code", "recovery codes: CANARYRC1-RC2345 CANARYRC2-RC6789", "CANARYRC1"),
    ("secret.recovery_code", "恢复码：CNRYZH12-ZH3456", "CNRYZH12"),
    ("path.posix_home", "/home/canaryuser/projects/app/main.py", "canaryuser"),
    ("path.windows_home", "C:\\Users\\CanaryWin\\Documents\\plan.docx", "CanaryWin"),
    ("path.windows_drive", "D:\\CanaryDrive\\data\\export.csv", "CanaryDrive"),
    ("path.unc", "\\\\canaryhost\\share\\report.pdf", "canaryhost"),
    ("path.tilde_home", "~/canarytilde/notes.md", "~/canarytilde"),
    (EMAIL_RULE, "write to canary.person@example.org today", "canary.person@example.org"),
]
PATH_RULES = {"path.posix_home", "path.windows_home", "path.windows_drive", "path.unc",
              "path.tilde_home"}


# --------------------------------------------------------------------------- the store


def chain(events: list[tuple[str, Any]]) -> bytes:
    """Events as the legacy store writes them (the kernel's byte-compatible encoder)."""
    out, prev = b"", None
    for i, (kind, data) in enumerate(events):
        line, prev = encode_event(prev, kind, BASE_MS + 5 * i, data)
        out += line
    return out


def user(text: str) -> tuple[str, Any]:
    return "user_message", {"role": "user", "content": text}


def assistant(text: str) -> tuple[str, Any]:
    return "assistant_message", {"role": "assistant", "content": text}


def tool_events(call_id: str, tool: str) -> list[tuple[str, Any]]:
    return [("tool_call_started", {"id": call_id, "tool": tool}),
            ("tool_call", {"id": call_id, "tool": tool, "is_error": False})]


def compact(messages: list[dict[str, Any]], strategy: str = "dedup+truncate",
            trigger: str = "auto") -> tuple[str, Any]:
    stats = {"strategy": strategy, "originalMessages": 12, "compressedMessages": len(messages),
             "originalTokens": 900, "compressedTokens": 300, "saved": 600, "ratio": 0.3333}
    return "compact", {**stats, "trigger": trigger, "messages": messages}


def summary(text: str) -> dict[str, Any]:
    return {"role": "system", "content": f"[Conversation Summary]\n{text}", "_cc_replay": TAG}


def call_pair(call_id: str, tool: str, args: str, result: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": tool, "arguments": args}}]},
        {"role": "tool", "tool_call_id": call_id, "content": result}]


def start(n: int, model: str = "gpt-4o") -> tuple[str, Any]:
    return "session_start", {"title": f"session {n}", "provider": "openai", "model": model}


def plain_session(n: int) -> list[tuple[str, Any]]:
    evs = [start(n), user(f"Session {n}: make the retry test in test/retry{n}.spec.ts pass.")]
    evs += tool_events(f"call_s{n}a", "read_file")
    evs += [assistant(f"The retry test {n} fails because the backoff starts at 0 ms."),
            user(f"Fix it without changing the public API of retry{n}."),
            *tool_events(f"call_s{n}b", "edit_file"),
            assistant(f"Backoff {n} now starts at 100 ms; the test passes."),
            user(f"Now compact, then continue with session {n}.")]
    kept = [*call_pair(f"call_s{n}b", "edit_file", json.dumps({"path": f"src/retry{n}.ts"}),
                       '{"ok":true}'),
            {"role": "assistant", "content": f"Backoff {n} now starts at 100 ms."},
            {"role": "user", "content": f"Now compact, then continue with session {n}."}]
    strategy = ("none", "dedup+truncate", "dedup+summarize")[n % 3]
    if strategy == "dedup+summarize":
        kept = [summary(json.dumps({"objective": f"fix retry test {n}"})), *kept]
    evs.append(compact(kept, strategy=strategy, trigger=("auto", "manual")[n % 2]))
    evs += [user(f"Session {n} after compaction: add a changelog line."),
            assistant(f"Added the changelog line for retry {n}.")]
    return evs


def two_compactions() -> list[tuple[str, Any]]:
    first = [summary('{"objective":"migrate the orders API"}'),
             *call_pair("call_twoA", "run_shell", '{"command":"npm test"}', '{"exitCode":0}'),
             {"role": "user", "content": "Continue with the invoices endpoint."}]
    second = [summary('{"objective":"migrate orders and invoices"}'),
              {"role": "user", "content": "Write the migration notes."}]
    return [start(100), user("Migrate the orders API to the new router."),
            *tool_events("call_twoA", "run_shell"),
            assistant("Orders API migrated; npm test passes."),
            user("Continue with the invoices endpoint."),
            compact(first, strategy="dedup+summarize", trigger="manual"),
            user("Invoices: same pattern, keep the error codes."),
            *tool_events("call_twoB", "edit_file"),
            assistant("Invoices migrated with the same error codes."),
            user("Write the migration notes."),
            compact(second, strategy="dedup+summarize", trigger="auto"),
            user("Thanks.")]


def zh_session() -> list[tuple[str, Any]]:
    kept = [{"role": "user", "content": "请修复登录页面的中文提示文字，并保持接口不变。"},
            {"role": "assistant", "content": "已修复：提示文字改为“用户名或密码错误”。"}]
    return [start(101, "qwen-max"), user("请修复登录页面的中文提示文字，并保持接口不变。"),
            *tool_events("call_zh1", "read_file"),
            assistant("已修复：提示文字改为“用户名或密码错误”。"),
            user("好的，压缩一下上下文。"), compact(kept, strategy="dedup")]


def canary_session() -> list[tuple[str, Any]]:
    texts = [text for _rule, text, _secret in CANARIES]
    evs = [("session_start", {"title": "canary.person@example.org", "provider": "openai",
                              "model": "gpt-4o"})]
    for i, text in enumerate(texts):
        evs += [user(f"Step {i}: the config says {text} — keep it out of logs."),
                *tool_events(f"call_can{i}", "read_file"),
                assistant(f"Noted step {i}: {text} is sensitive.")]
    kept = [summary(json.dumps({"objective": "rotate " + " and ".join(texts[:6])})),
            *call_pair("call_can0", "read_file", json.dumps({"path": texts[16]}), texts[2]),
            {"role": "user", "content": f"Rotate {texts[1]} too."}]
    evs += [user(f"Rotate {texts[1]} too."), compact(kept, strategy="dedup+summarize")]
    return evs


def broken_chain() -> bytes:
    lines = chain(plain_session(200)).split(b"\n")
    event = json.loads(lines[3])
    event["data"]["content"] = "edited after it was hashed"
    lines[3] = json.dumps(event, separators=(",", ":")).encode()
    return b"\n".join(lines)


def truncated_tail() -> bytes:
    raw = chain(plain_session(201))
    last = raw[:-1].rfind(b"\n") + 1
    return raw[: last + (len(raw) - last) // 2]


def non_json_line() -> bytes:
    lines = chain(plain_session(202)).split(b"\n")
    return b"\n".join([*lines[:2], b"{not json", *lines[2:]])


def write_store(root: Path) -> Path:
    store = root / "sessions"
    store.mkdir(parents=True)
    for n in range(18):
        (store / f"sess-{n:02d}.jsonl").write_bytes(chain(plain_session(n)))
    (store / "sess-two.jsonl").write_bytes(chain(two_compactions()))
    (store / "sess-zh.jsonl").write_bytes(chain(zh_session()))
    (store / "sess-canary.jsonl").write_bytes(chain(canary_session()))
    (store / "sess-nocompact.jsonl").write_bytes(chain([start(99), user("hi"),
                                                        assistant("hello")]))
    (store / "sess-broken.jsonl").write_bytes(broken_chain())
    (store / "sess-torn.jsonl").write_bytes(truncated_tail())
    (store / "sess-notjson.jsonl").write_bytes(non_json_line())
    return store


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ImportResult]:
    root = tmp_path_factory.mktemp("import")
    store = write_store(root)
    return store, import_sessions([store], root / "out")


def _files(out: Path) -> Iterator[Path]:
    return (p for p in sorted(out.rglob("*")) if p.is_file())


# --------------------------------------------------------------------------- the tests


def test_replay_reproduces_every_bundled_capture() -> None:
    """Our replay of each bundled capture's raw lines is the legacy's own replay."""
    captures = sorted(ROOT.glob("fixtures/*/cli.jsonl-session.json"))
    assert len(captures) >= 10
    for path in captures:
        out = json.loads(path.read_text(encoding="utf-8"))["output"]
        lines = list(out["raw_jsonl_lines"])
        torn = bool(lines) and not _parses(lines[-1])  # a crash tore the last line
        events = [Event(i, str(e.get("type")), e.get("timestamp"), e.get("data"))
                  for i, e in enumerate(map(json.loads, lines[:-1] if torn else lines),
                                        start=1)]
        assert replay(events) == out["rebuildMessages"], path
        verified = replay(events, verified=True)
        if torn:  # the legacy store refuses to read an unverified, torn transcript
            assert out["readVerifiedMessages"] is None, path
        else:
            assert strip_tags(verified) == out["readVerifiedMessages"], path
            assert provenance(verified) == out["readVerifiedMessages_provenance"], path
        written = [w for w in windows(events)
                   if events[w.compact].data.get("trigger") != "resume-fixture"]
        # a step whose compaction was cancelled, raced or blocked appended nothing
        settled = [st for st in out["steps"] if st.get("settlement")]
        assert len(written) == len(settled), path
        for window, step in zip(written, settled, strict=True):
            assert strip_tags(window.messages) == step["rebuildMessages_before"], path
            assert provenance(window.messages) == step["readVerifiedMessages_before_provenance"]
            after = replay(events[: window.compact + 1], verified=True)
            assert strip_tags(after) == step["readVerifiedMessages_after"], path


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def test_every_detector_class_has_a_canary() -> None:
    for rule, text, secret in CANARIES:
        assert secret in text
        found = {f.rule_id for f in scan(text, trusted=True)}
        found |= {s.rule_id for s in find_spans(text)}
        assert rule in found, (rule, found)
    covered = {rule for rule, _t, _s in CANARIES}
    assert {r.rule_id for r in SECRET_RULES} <= covered
    assert PATH_RULES | {EMAIL_RULE} <= covered


def test_placeholders_are_stable_and_keep_the_length_class() -> None:
    red = Redactor()
    key = "sk-proj-CanaryOpenAi0123456789AbCdEf"
    first = red.text(f"use {key}")
    again = red.text(f"{key} again")
    other = red.text("sk-proj-AnotherOpenAi0123456789XyZw")
    assert first == "use [REDACTED api_key#1 len<=64]"
    assert again == "[REDACTED api_key#1 len<=64] again"
    assert other == "[REDACTED api_key#2 len<=64]"
    assert red.text('{"role": "tool"}') == '{"role": "tool"}'
    assert red.value({"apiKey": "Abc123xyz789"})["apiKey"].startswith("[REDACTED")
    assert length_class(3) == "len<=8" and length_class(2000) == "len>1024"
    assert dict(red.counts) == {"secret.api_key.openai": 3, "secret.assignment": 1}


def test_import_report(imported: tuple[Path, ImportResult]) -> None:
    _store, result = imported
    report = result.report
    assert result.exit_code == 1  # sessions were quarantined
    totals = report["totals"]
    assert totals["sessions"] == 25 and totals["sessions_quarantined"] == 3
    assert totals["compact_events"] == 18 + 2 + 1 + 1
    assert totals["fixtures"] == 22 and totals["skipped"] == 3
    assert report["skipped"] == [
        {"file": "sess-broken.jsonl", "line": 4, "reason": "session.chain_broken",
         "detail": "event content does not match its hash"},
        {"file": "sess-notjson.jsonl", "line": 3, "reason": "session.not_json",
         "detail": "not a JSON object"},
        {"file": "sess-torn.jsonl", "line": 13, "reason": "session.truncated_tail",
         "detail": "the last line has no final newline"},
    ]
    by_file = {s["file"]: s for s in report["sessions"]}
    assert by_file["sess-two.jsonl"]["fixtures"] == ["sess-two-c01", "sess-two-c02"]
    assert by_file["sess-nocompact.jsonl"]["fixtures"] == []
    assert by_file["sess-broken.jsonl"]["status"] == "quarantined"
    rules = set(report["redactions"])
    assert {rule for rule, _t, _s in CANARIES} <= rules
    assert set(report["redactions_by_category"]) == {"secret", "local_path", "personal"}
    assert any("sess-broken.jsonl line 4: session.chain_broken" in line
               for line in result.lines)


def test_fixtures_keep_what_the_comparison_needs(imported: tuple[Path, ImportResult]) -> None:
    _store, result = imported
    out = result.out
    corpus = load_corpus(out)
    assert corpus.quarantined == () and len(corpus.scenarios) == 22
    two = json.loads((out / "sess-two-c02" / "input.json").read_text(encoding="utf-8"))
    roles = [m["role"] for m in two["messages"]]
    assert roles[0] == "system" and two["messages"][0]["_cc_replay"] == TAG
    call = two["messages"][1]["tool_calls"][0]
    assert (call["id"], call["function"]["name"]) == ("call_twoA", "run_shell")
    assert two["messages"][2] == {"role": "tool", "tool_call_id": "call_twoA",
                                  "content": '{"exitCode":0}'}
    zh = json.loads((out / "sess-zh-c01" / "input.json").read_text(encoding="utf-8"))
    assert zh["messages"][0]["content"] == "请修复登录页面的中文提示文字，并保持接口不变。"
    assert zh["model"] == {"provider": "openai", "model": "qwen-max"}
    store = json.loads((out / "sess-two-c02" / "cli.jsonl-session.json").read_text("utf-8"))
    assert store["output"]["verifySession"]["status"] == "verified"
    assert store["determinism"]["source"] == "imported"
    assert store["options"]["imported"]["lines"] == [8, 13]
    compress = json.loads((out / "sess-00-c01" / "cli.compress.json").read_text("utf-8"))
    assert compress["output"]["stats"]["strategy"] == "none"
    canary = (out / "sess-canary-c01" / "input.json").read_text(encoding="utf-8")
    assert "[REDACTED api_key#" in canary and "<home>/projects/app/main.py" in canary
    assert "[REDACTED email#1 len<=32]" in canary


def test_no_canary_in_any_written_byte(imported: tuple[Path, ImportResult]) -> None:
    store, result = imported
    raw = (store / "sess-canary.jsonl").read_text(encoding="utf-8")
    texts = [p.read_bytes().decode("utf-8") for p in _files(result.out)]
    texts += result.lines
    assert len(texts) > 60
    for _rule, _text, secret in CANARIES:
        assert json.dumps(secret)[1:-1] in raw or secret in raw
        for text in texts:
            assert secret.lower() not in text.lower()
            assert json.dumps(secret)[1:-1].lower() not in text.lower()


def test_shadow_run_judges_the_import(imported: tuple[Path, ImportResult],
                                      tmp_path: Path) -> None:
    _store, result = imported
    run = execute(RunOptions(fixtures=str(result.out), out=str(tmp_path / "run"),
                             recordings=None, determinism=False))
    report = run.report
    assert report["totals"]["fixtures"] == 22
    assert report["totals"]["quarantined"] == 0 and report["totals"]["blocking"] == 0
    codes = {d["reason_code"] for d in report["divergences"]}
    assert not codes & {"fixture.invalid", "candidate.unavailable", "unclassified"}
    assert not [d for d in report["divergences"] if d["severity"] == "blocking"]
    cases = {(c["fixture"], c["surface"]) for c in report["cases"]}
    served = {(f, s) for f, s in cases if s.split(".", 1)[0] in ("sdk", "app-server")}
    assert len(cases - served) == 44  # two legacy captures per session
    assert served == {(f, f"{top}.{s}") for f, s in cases - served for top in
                      ("sdk", "app-server")}  # each judged through the server and the SDK
    texts = [p.read_text(encoding="utf-8") for p in _files(tmp_path / "run")]
    for _rule, _text, secret in CANARIES:
        assert not any(secret.lower() in t.lower() for t in texts)


def test_import_is_deterministic(imported: tuple[Path, ImportResult], tmp_path: Path) -> None:
    store, result = imported
    again = import_sessions([store], tmp_path / "again")
    first = {p.relative_to(result.out): p.read_bytes() for p in _files(result.out)}
    second = {p.relative_to(again.out): p.read_bytes() for p in _files(again.out)}
    assert first == second and again.lines[:-2] == result.lines[:-2]


def test_command_line_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "one.jsonl").write_bytes(chain(plain_session(7)))
    assert main(["import-sessions", str(clean), "--out", str(tmp_path / "o1")]) == 0
    assert "fixtures: 1" in capsys.readouterr().out
    assert main(["import-sessions", str(clean), "--out", str(tmp_path / "o1")]) == 0
    assert main(["import-sessions", str(tmp_path / "missing"), "--out",
                 str(tmp_path / "o2")]) == 2
    assert "missing" in capsys.readouterr().err
    assert main(["import-sessions", "--out", str(tmp_path / "o3")]) == 2
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("not an import")
    assert main(["import-sessions", str(clean), "--out", str(other)]) == 2
    assert (other / "keep.txt").is_file()
    (clean / "torn.jsonl").write_bytes(truncated_tail())
    assert main(["import-sessions", str(clean), "--out", str(tmp_path / "o1")]) == 1
    assert "torn.jsonl line 13: session.truncated_tail" in capsys.readouterr().out


def test_compact_events_that_are_not_imported(tmp_path: Path) -> None:
    """Each skipped compact event is listed with its line; the session's others import."""
    kept = [{"role": "user", "content": "go on"}]
    ws = ("ws_turn", {"schemaVersion": 1, "requestId": "r1", "outcome": "completed",
                      "user": {"role": "user", "content": "q"},
                      "assistant": {"role": "assistant", "content": "a"}})
    events = [start(300), user("first"), ("compact", {"trigger": "auto", "messages": kept}),
              user("second"), ("compact", {"strategy": "dedup", "messages": "not a list"}),
              user("third"), ("compact", {**compact(kept)[1], "canonical": {"schema": "x"}}),
              user("fourth"), ws, compact(kept), user("fifth"), compact(kept)]
    store = tmp_path / "s"
    store.mkdir()
    (store / "mixed.jsonl").write_bytes(chain(events))
    legacy = b'{"type":"user_message","data":{"role":"user","content":"old"}}\n'
    (store / "legacy.jsonl").write_bytes(legacy + chain([start(301)]))
    result = import_sessions([store], tmp_path / "out")
    assert result.exit_code == 1
    assert [(q["file"], q["line"], q["reason"]) for q in result.report["skipped"]] == [
        ("legacy.jsonl", 1, "session.unchained"),
        ("mixed.jsonl", 3, "compact.no_strategy"),
        ("mixed.jsonl", 5, "compact.malformed"),
        ("mixed.jsonl", 7, "compact.kernel_written"),
        ("mixed.jsonl", 10, "compact.ws_turn"),
    ]
    assert [s["fixtures"] for s in result.report["sessions"]] == [[], ["mixed-c05"]]
