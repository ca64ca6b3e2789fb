"""Read-only vcrpy replay of the legacy captures' provider exchanges (design 108 §14).

One cassette per scenario, ``recordings/<scenario>.yaml`` (``python -m
shadow.providers.importer``; format in ``recordings/README.md``).  Replay uses vcrpy with
``record_mode="none"`` under a persister that refuses to write, and the only transport the
replay client has is an ``httpx.MockTransport`` whose handler raises: a request with no
recorded answer raises :class:`shadow.errors.SideEffectError` (``shadow.side_effect``) and
never opens a socket.

Matching is on method, path and :func:`body_marker` — a canonical (RFC 8785) digest of the
JSON body — never on headers, so no secret or ``Authorization`` value takes part; stored
requests keep the digest only (the legacy prompts may carry secrets, see
``secrets-in-tool-output``), and headers are reduced to ``content-type`` and ``x-shadow-*``.

vcrpy cannot record a connection error, so a failed exchange is stored as a response with
status :data:`FAULT_STATUS` and header :data:`FAULT_HEADER`; :class:`RecordedFaultTransport`
(installed only by replay) turns it back into the error the legacy code saw::

    x-shadow-replay-fault   raised in replay              legacy error
    connect-error           httpx.ConnectError            ECONNREFUSED, ENOTFOUND, ...
    transport-unknown       httpx.ReadError               ETIMEDOUT, ECONNRESET, anything else
    cancelled               ProviderCancelled             AbortError
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import vcr  # type: ignore[import-untyped]
import yaml  # type: ignore[import-untyped]
from vcr.errors import CannotOverwriteExistingCassetteException  # type: ignore[import-untyped]
from vcr.persisters.filesystem import (  # type: ignore[import-untyped]
    CassetteNotFoundError,
    FilesystemPersister,
)
from vcr.request import Request as VcrRequest  # type: ignore[import-untyped]
from vcr.serialize import deserialize  # type: ignore[import-untyped]

from kernel.errors import KernelError
from shadow.boundary import decode_text, pointer_escape, read_regular
from shadow.errors import InputError, ShadowError, SideEffectError
from shadow.providers.openai_compat import (
    DEFAULT_BASE_URL,
    OpenAICompatClient,
    OpenAICompatSummarizer,
    ProviderCancelled,
    ProviderOutcome,
    handoff_request,
    request_digest,
)

FORMAT: Final = "shadow-provider-cassette/v1"
MARKER_PREFIX: Final = "shadow.provider-request/v1 "
RAW_BODY_DOMAIN: Final = "shadow.provider-request-bytes/v1"
REPLAY_BASE_URL: Final = DEFAULT_BASE_URL
CHAT_URI: Final = REPLAY_BASE_URL + "/chat/completions"
FAULT_STATUS: Final = 599
FAULT_REASON: Final = "Shadow Replay Fault"
FAULT_HEADER: Final = "x-shadow-replay-fault"
FAULT_CODE_HEADER: Final = "x-shadow-replay-error-code"
FAULT_CONNECT: Final = "connect-error"
FAULT_UNKNOWN: Final = "transport-unknown"
FAULT_CANCELLED: Final = "cancelled"
FAULTS: Final = (FAULT_CONNECT, FAULT_UNKNOWN, FAULT_CANCELLED)
SAFE_HEADERS: Final = frozenset({"content-type"})
MATCH_ON: Final = ("method", "path", "body_digest")
#: Timestamp pinned on summaries made in replay (the captures' deterministic clock).
REPLAY_OBSERVED_AT: Final = "2026-08-20T12:00:00.000Z"

CLI_ENTRY: Final = (
    "packages/cli/src/harness/provider-backed-compaction.js#compactConversationWithProvider"
)
DESKTOP_ENTRY: Final = "desktop-app-vue/src/main/llm/prompt-compressor.js#PromptCompressor.compress"
_CONNECT_CODES: Final = frozenset(
    {"ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"}
)
_SAFE_CODE: Final = re.compile(r"[A-Za-z0-9_.-]{1,40}")
_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_REPLAY_LOCK: Final = threading.RLock()  # vcrpy patches httpx classes while a cassette is open

# vcrpy logs whole interactions (bodies included) at INFO; a replay must log none of it.
logging.getLogger("vcr").setLevel(logging.WARNING)


# --------------------------------------------------------------------------- request digests


def body_marker(body: bytes | str | None) -> str:
    """What a cassette stores instead of a request body: its canonical digest.

    A JSON object is digested canonically (key order and whitespace do not matter); any
    other body by its raw bytes.  A body that already is a marker is returned unchanged.
    """
    raw = body.encode("utf-8") if isinstance(body, str) else (body or b"")
    text = raw.decode("utf-8", "replace")
    if text.startswith(MARKER_PREFIX):
        return text
    try:
        doc = json.loads(raw) if raw else None
        if isinstance(doc, dict):
            return MARKER_PREFIX + request_digest(doc)
    except (ValueError, KernelError):
        pass
    return MARKER_PREFIX + "sha256:" + hashlib.sha256(
        RAW_BODY_DOMAIN.encode("utf-8") + b"\0" + raw).hexdigest()


def _body_of(request: VcrRequest) -> bytes | str | None:
    body = request.body
    if hasattr(body, "read"):
        return bytes(body.read())
    return body  # type: ignore[no-any-return]


def scrub_request(request: VcrRequest) -> VcrRequest:
    """vcrpy ``before_record_request``: body → digest marker, headers → safe ones only.

    vcrpy runs it on live requests before matching and on stored ones when loading.
    It never returns ``None`` (vcrpy would then let the request through).
    """
    out = copy.copy(request)
    out.body = body_marker(_body_of(request))
    out.headers = {k: v for k, v in request.headers.items() if _safe_header(k)}
    return out


def _safe_header(name: str) -> bool:
    lowered = name.lower()
    return lowered in SAFE_HEADERS or lowered.startswith("x-shadow-")


def match_body_digest(r1: VcrRequest, r2: VcrRequest) -> None:
    """vcrpy matcher: equal canonical body digests (the message names digests only)."""
    d1, d2 = body_marker(_body_of(r1)), body_marker(_body_of(r2))
    if d1 != d2:
        n = len(MARKER_PREFIX)
        raise AssertionError(f"{d1[n:]} != {d2[n:]}")


# --------------------------------------------------------------------------- cassette files


class ReadOnlyRecording(ShadowError):
    """Something tried to write a recording during replay."""

    code = "shadow.recording_read_only"


class _ReadOnlyPersister(FilesystemPersister):  # type: ignore[misc]
    @classmethod
    def load_cassette(cls, cassette_path: Any, serializer: Any) -> Any:
        path = Path(cassette_path)
        if not path.is_file():
            raise CassetteNotFoundError()
        return deserialize(path.read_bytes().decode("utf-8"), serializer)

    @staticmethod
    def save_cassette(cassette_path: Any, cassette_dict: Any, serializer: Any) -> None:
        raise ReadOnlyRecording(f"recordings are read-only in replay: {Path(cassette_path).name}")


def cassette_path(recordings_dir: str | Path, scenario: str) -> Path:
    if not scenario or "/" in scenario or "\\" in scenario or scenario.startswith("."):
        raise InputError(str(recordings_dir), "", "a scenario name", got="a path")
    return Path(recordings_dir) / f"{scenario}.yaml"


def _describe(value: Any) -> str:
    """A value by type and size only (a cassette may hold anything; never echo it)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return f"the integer {value}" if abs(value) < 10**6 else "a large integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _need(cond: bool, path: Path, ptr: str, expected: str, value: Any) -> None:
    if not cond:
        raise InputError(path, ptr, expected, got=_describe(value))


def _headers(value: Any, path: Path, ptr: str) -> Mapping[str, Any]:
    _need(isinstance(value, dict), path, ptr, "a header mapping (name -> list of strings)",
          value)
    for name, values in value.items():
        hptr = f"{ptr}/{pointer_escape(str(name))}" if _safe_header(str(name)) else ptr
        _need(isinstance(values, list) and all(isinstance(v, str) for v in values), path, hptr,
              "a list of header strings", values)
    return value  # type: ignore[no-any-return]


def _check_interaction(it: Any, path: Path, ptr: str) -> None:
    _need(isinstance(it, dict), path, ptr, "an interaction mapping (request, response)", it)
    req = it.get("request")
    _need(isinstance(req, dict), path, f"{ptr}/request", "a request mapping", req)
    extra = sorted(set(map(str, req)) - {"body", "headers", "method", "uri"})
    if extra:
        raise InputError(path, f"{ptr}/request", "only body, headers, method and uri",
                         got=f"{len(extra)} unknown field(s)")
    body = req.get("body")
    _need(isinstance(body, str) and body.startswith(MARKER_PREFIX), path,
          f"{ptr}/request/body", "a body digest marker", body)
    for key in ("method", "uri"):
        _need(isinstance(req.get(key), str) and bool(req.get(key)), path,
              f"{ptr}/request/{key}", "a non-empty string", req.get(key))
    headers = _headers(req.get("headers") or {}, path, f"{ptr}/request/headers")
    if any(not _safe_header(str(k)) for k in headers):
        raise InputError(path, f"{ptr}/request/headers", "scrubbed headers",
                         got="an unscrubbed header")
    resp = it.get("response")
    rptr = f"{ptr}/response"
    _need(isinstance(resp, dict), path, rptr, "a response mapping", resp)
    status = resp.get("status")
    _need(isinstance(status, dict), path, f"{rptr}/status", "a status mapping (code, message)",
          status)
    code = status.get("code")
    _need(type(code) is int and 100 <= code <= 599, path, f"{rptr}/status/code",
          "an HTTP status code (100-599)", code)
    message = status.get("message")
    _need(message is None or isinstance(message, str), path, f"{rptr}/status/message",
          "a string", message)
    body_doc = resp.get("body")
    _need(isinstance(body_doc, dict) and isinstance(body_doc.get("string"), (str, bytes)), path,
          f"{rptr}/body", "a mapping with a 'string' body", body_doc)
    rheaders = _headers(resp.get("headers") or {}, path, f"{rptr}/headers")
    fault = rheaders.get(FAULT_HEADER)
    if fault is not None:
        _need(len(fault) == 1 and fault[0] in FAULTS, path,
              f"{rptr}/headers/{FAULT_HEADER}", f"one of {', '.join(FAULTS)}", fault)


def _parse_yaml(data: bytes, path: Path) -> Any:
    if data.startswith(b"\xef\xbb\xbf"):
        raise InputError(path, "", "UTF-8 YAML without a byte-order mark", got="a UTF-8 BOM")
    text = decode_text(data, path)
    if not text.strip():
        raise InputError(path, "", "a vcrpy cassette (a YAML mapping)", got="an empty file")
    try:
        return yaml.load(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise InputError(path, "", "well-formed YAML", got=f"a syntax error{where}") from None
    except yaml.YAMLError:
        raise InputError(path, "", "well-formed YAML", got="a syntax error") from None
    except RecursionError:
        raise InputError(path, "", "well-formed YAML", got="nesting too deep") from None


def check_cassette(doc: Any, path: Path, scenario: str | None = None) -> dict[str, Any]:
    """A parsed cassette checked against ``shadow-provider-cassette/v1`` (InputError with
    the file and a pointer otherwise); with ``scenario``, also that it records that
    scenario (``metadata.scenario``)."""
    _need(isinstance(doc, dict), path, "", "a vcrpy cassette (a YAML mapping)", doc)
    if "version" not in doc:
        raise InputError(path, "/version", "vcrpy cassette version 1", got="nothing")
    _need(type(doc["version"]) is int and doc["version"] == 1, path, "/version",
          "vcrpy cassette version 1", doc["version"])
    meta = doc.get("metadata")
    _need(isinstance(meta, dict), path, "/metadata", f"a metadata mapping ({FORMAT})", meta)
    if meta.get("format") != FORMAT:
        raise InputError(path, "/metadata/format", FORMAT,
                         got="nothing" if "format" not in meta else
                         "another format" if isinstance(meta["format"], str)
                         else _describe(meta["format"]))
    named = meta.get("scenario")
    if not isinstance(named, str) or not named:
        raise InputError(path, "/metadata/scenario", "the scenario name",
                         got=_describe(named) if "scenario" in meta else "nothing")
    if scenario is not None and named != scenario:
        raise InputError(path, "/metadata/scenario", f"the file's scenario {scenario!r}",
                         got="another scenario")
    interactions = doc.get("interactions")
    _need(isinstance(interactions, list), path, "/interactions", "an array", interactions)
    for i, it in enumerate(interactions):
        _check_interaction(it, path, f"/interactions/{i}")
    return dict(doc)


def load_cassette(path: Path, scenario: str | None = None) -> dict[str, Any] | None:
    """Parse and check one cassette (``None`` when nothing exists at ``path``)."""
    if not os.path.lexists(path):
        return None
    return check_cassette(_parse_yaml(read_regular(path), path), path, scenario)


def validate_recordings(recordings_dir: str | Path) -> tuple[Path, ...]:
    """Every cassette of a ``--recordings`` folder, parsed and checked before any replay.

    ``<scenario>.yaml`` files are cassettes (hidden entries and other files, such as a
    README, are ignored); a ``.yml`` file is refused (replay would never read it).  The
    first bad one raises :class:`~shadow.errors.InputError` naming the file and the
    problem."""
    root = Path(recordings_dir)
    try:
        entries = sorted((p for p in root.iterdir() if not p.name.startswith(".")),
                         key=lambda p: p.name)
    except OSError as exc:
        raise InputError(root, "", "--recordings: a readable recordings folder",
                         got=type(exc).__name__) from None
    checked = []
    for p in entries:
        suffix = p.name.rsplit(".", 1)[-1].lower() if "." in p.name else ""
        if suffix == "yml" or (suffix == "yaml" and not p.name.endswith(".yaml")):
            raise InputError(p, "", "a cassette named <scenario>.yaml",
                             got=f"a .{p.name.rsplit('.', 1)[-1]} file")
        if suffix == "yaml":
            load_cassette(p, p.name[: -len(".yaml")])
            checked.append(p)
    return tuple(checked)


def _vcr() -> vcr.VCR:
    config = vcr.VCR(record_mode="none", match_on=MATCH_ON, before_record_request=scrub_request,
                     decode_compressed_response=False)
    config.register_matcher("body_digest", match_body_digest)
    config.register_persister(_ReadOnlyPersister)
    return config


# --------------------------------------------------------------------------- replay transport


def _unrecorded(request: httpx.Request) -> httpx.Response:
    """Handler of the replay client's only transport: reached = vcrpy did not answer."""
    raise SideEffectError(f"provider request reached the replay transport unrecorded: "
                          f"{request.method} {request.url.path} "
                          f"{body_marker(request.content).removeprefix(MARKER_PREFIX)}")


@dataclass(frozen=True, slots=True)
class RecordedFaultTransport(httpx.BaseTransport):
    """Replay-only transport: vcrpy answers, recorded faults become the errors they were."""

    scenario: str
    inner: httpx.BaseTransport = field(default_factory=lambda: httpx.MockTransport(_unrecorded))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = self.inner.handle_request(request)
        except CannotOverwriteExistingCassetteException as exc:
            marker = body_marker(request.content).removeprefix(MARKER_PREFIX)
            error = SideEffectError(
                f"no recorded provider answer for {self.scenario}: {request.method} "
                f"{request.url.path} body {marker} ({len(request.content)} bytes; {exc.reason})")
            error.scenario = self.scenario  # type: ignore[attr-defined]
            error.request_digest = marker  # type: ignore[attr-defined]
            raise error from None  # vcrpy's message previews the body: never chain it
        fault = response.headers.get(FAULT_HEADER)
        if fault is None:
            return response
        response.close()
        code = response.headers.get(FAULT_CODE_HEADER, "")
        if fault == FAULT_CONNECT:
            raise httpx.ConnectError(f"recorded connect failure {code}".strip(), request=request)
        if fault == FAULT_CANCELLED:
            raise ProviderCancelled("recorded cancellation")
        if fault == FAULT_UNKNOWN:
            raise httpx.ReadError(f"recorded transport failure {code}".strip(), request=request)
        raise InputError(f"{self.scenario}.yaml", "/interactions", f"{FAULT_HEADER} in {FAULTS}",
                         got=fault[:40])


@dataclass(frozen=True, slots=True)
class ReplayClient(OpenAICompatClient):
    """An :class:`OpenAICompatClient` whose every call is answered by one cassette."""

    recordings_dir: str = "recordings"
    scenario: str = ""

    @contextlib.contextmanager
    def session(self) -> Iterator[httpx.Client]:
        path = cassette_path(self.recordings_dir, self.scenario)
        load_cassette(path)  # a broken cassette is an input error, never "no recording"
        with _REPLAY_LOCK, _vcr().use_cassette(str(path)), httpx.Client(
            transport=RecordedFaultTransport(self.scenario), timeout=self.timeout,
            follow_redirects=False, trust_env=False, base_url=REPLAY_BASE_URL,
        ) as http:
            yield http


def replay_client(recordings_dir: str | Path, scenario: str, *, metered: bool = True,
                  provider: str = "openai") -> ReplayClient:
    return ReplayClient(base_url=REPLAY_BASE_URL, provider=provider, metered=metered,
                        recordings_dir=str(recordings_dir), scenario=scenario)


def replay_exchange(recordings_dir: str | Path, scenario: str, request_body: Mapping[str, Any],
                    *, metered: bool = True) -> ProviderOutcome:
    """The recorded outcome of ``request_body`` (a chat-completions body) in ``scenario``.

    Raises :class:`~shadow.errors.SideEffectError` when nothing answers it.
    """
    return replay_client(recordings_dir, scenario, metered=metered).complete(request_body)


# --------------------------------------------------------------------------- legacy exchanges


def entry_file(entry: str) -> str:
    return entry.split("#", 1)[0].strip()


@dataclass(frozen=True, slots=True)
class LegacyExchange:
    """One ``input.json`` ``provider_responses`` entry (``index`` = its position)."""

    index: int
    surface: str
    entry: str
    call: int
    variant: str | None
    raw: Mapping[str, Any] = field(repr=False)


def legacy_exchanges(doc: Mapping[str, Any], surface: str | None = None,
                     entry: str | None = None, *, variant: str | bool | None = False
                     ) -> list[LegacyExchange]:
    """Exchanges of one legacy entry point (same surface and source file), by call.

    ``variant=False`` selects every exchange; ``None`` only plain ones; a string that one.
    """
    out = []
    for index, raw in enumerate(doc.get("provider_responses") or ()):
        if not isinstance(raw, Mapping):
            continue
        x = LegacyExchange(index, str(raw.get("surface", "")), str(raw.get("entry", "")),
                           int(raw.get("call") or 0), _opt_str(raw.get("variant")), raw)
        if surface is not None and x.surface != surface:
            continue
        if entry is not None and entry_file(x.entry) != entry_file(entry):
            continue
        if variant is not False and x.variant != variant:
            continue
        out.append(x)
    return sorted(out, key=lambda x: (x.call, x.index))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def default_model(doc: Mapping[str, Any]) -> str:
    model = doc.get("model")
    name = model.get("model") if isinstance(model, Mapping) else None
    return name if isinstance(name, str) and name else "unknown-model"


def chat_request(exchange: LegacyExchange, model: str) -> dict[str, Any]:
    """The chat-completions body a legacy exchange corresponds to (recordings/README.md)."""
    req = _mapping(exchange.raw.get("request"))
    options = _mapping(req.get("options"))
    if isinstance(req.get("messages"), list):
        keep = ("role", "content", "name", "tool_calls", "tool_call_id")
        messages = [{k: m[k] for k in keep if k in m} for m in req["messages"]
                    if isinstance(m, Mapping)]
        max_tokens = options.get("maxOutputTokens")
    else:
        messages = [{"role": "user", "content": str(req.get("prompt", ""))}]
        max_tokens = options.get("max_tokens")
    name = options.get("model")
    body: dict[str, Any] = {"model": name if isinstance(name, str) and name else model,
                            "messages": messages}
    if type(max_tokens) is int:
        body["max_tokens"] = max_tokens
    temperature = options.get("temperature")
    if type(temperature) in (int, float):
        body["temperature"] = temperature
    return body


@dataclass(frozen=True, slots=True)
class RecordedResponse:
    status: int
    reason: str
    headers: Mapping[str, str]
    body: str


def chat_response(exchange: LegacyExchange) -> RecordedResponse:
    """The HTTP answer (or fault) a legacy exchange corresponds to (recordings/README.md)."""
    json_type = {"content-type": "application/json"}
    error = exchange.raw.get("error")
    if isinstance(error, Mapping):
        status = error.get("status")
        if type(status) is int and 400 <= status <= 599 and status != FAULT_STATUS:
            failure = {"error": {"code": _safe_code(error.get("code")), "type": "legacy_error"}}
            return RecordedResponse(status, "Error", json_type, _dumps(failure))
        code = _safe_code(error.get("code"))
        headers = {FAULT_HEADER: fault_of(error)}
        if code is not None:
            headers[FAULT_CODE_HEADER] = code
        return RecordedResponse(FAULT_STATUS, FAULT_REASON, headers, "")
    resp = _mapping(exchange.raw.get("response"))
    message = _mapping(resp.get("message"))
    content = message.get("content") if "message" in resp else resp.get("text")
    body: dict[str, Any] = {}
    if isinstance(resp.get("callId"), str):
        body["id"] = resp["callId"]
    body["object"] = "chat.completion"
    if isinstance(resp.get("model"), str):
        body["model"] = resp["model"]
    body["choices"] = [{"index": 0, "message": {"role": "assistant", "content": content}}]
    usage = _openai_usage(resp.get("usage"))
    if usage is not None:
        body["usage"] = usage
    return RecordedResponse(200, "OK", json_type, _dumps(body))


def fault_of(error: Mapping[str, Any]) -> str:
    if error.get("name") == "AbortError":
        return FAULT_CANCELLED
    if error.get("code") in _CONNECT_CODES:
        return FAULT_CONNECT
    return FAULT_UNKNOWN


def _safe_code(value: Any) -> str | None:
    text = str(value) if type(value) in (int, str) else None
    return text if text is not None and _SAFE_CODE.fullmatch(text) else None


def _openai_usage(usage: Any) -> dict[str, Any] | None:
    """Legacy usage (Anthropic-style CLI names or OpenAI names) → OpenAI ``usage``."""
    if not isinstance(usage, Mapping):
        return None
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    if type(prompt) is not int or type(completion) is not int:
        return None
    total = usage.get("total_tokens")
    out: dict[str, Any] = {"completion_tokens": completion, "prompt_tokens": prompt,
                           "total_tokens": total if type(total) is int else prompt + completion}
    cached = usage.get("cache_read_input_tokens")
    if type(cached) is int:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


# --------------------------------------------------------------------------- shadow summarizer


@dataclass(frozen=True, slots=True)
class RecordedRequests:
    """Request builder of a shadow summarizer: call *n* re-sends the legacy's *n*-th request.

    So the kernel consumes exactly the answer the legacy side consumed (§14: never a second
    provider call).  A call beyond the recorded ones sends the kernel's own request, which
    has no recording and fails as ``shadow.side_effect``.
    """

    bodies: tuple[Mapping[str, Any], ...]
    model: str

    def __call__(self, call: int, dropped_items: Sequence[Mapping[str, Any]],
                 context: Mapping[str, Any]) -> dict[str, Any]:
        if 1 <= call <= len(self.bodies):
            return copy.deepcopy(dict(self.bodies[call - 1]))
        return handoff_request(dropped_items, model=self.model)


def _input_doc(fixtures_dir: Path, scenario: str) -> Mapping[str, Any]:
    path = fixtures_dir / scenario / "input.json"
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise InputError(path, "", "a UTF-8 JSON document", got="unparseable") from None
    if not isinstance(doc, dict):
        raise InputError(path, "", "an object")
    return doc


def summarizer_for_scenario(
    recordings_dir: str | Path,
    scenario: str,
    *,
    doc: Mapping[str, Any] | None = None,
    fixtures_dir: str | Path | None = None,
    surface: str = "cli",
    entry: str = CLI_ENTRY,
    variant: str | None = None,
    metered: bool = True,
    observed_at: str = REPLAY_OBSERVED_AT,
    summary_trust: str = "untrusted",
    sink: str | None = None,
) -> OpenAICompatSummarizer:
    """A ``kernel.ports.Summarizer`` answered by ``recordings/<scenario>.yaml`` only.

    The legacy requests come from ``doc`` (the scenario's ``input.json``) or, when not
    given, from ``fixtures_dir/<scenario>/input.json`` (default: ``fixtures`` beside
    ``recordings_dir``).  Outcomes are kept on the summarizer's ``outcomes`` list and
    unrecorded requests on its ``side_effects`` list (the kernel may turn the raised
    ``SideEffectError`` into a fallback; the harness must still see it).
    """
    if doc is None:
        root = Path(fixtures_dir) if fixtures_dir is not None else (
            Path(recordings_dir).parent / "fixtures")
        doc = _input_doc(root, scenario)
    model = default_model(doc)
    bodies = tuple(chat_request(x, model)
                   for x in legacy_exchanges(doc, surface, entry, variant=variant))
    return OpenAICompatSummarizer(
        replay_client(recordings_dir, scenario, metered=metered), model=model,
        request_builder=RecordedRequests(bodies, model), observed_at=observed_at,
        summary_trust=summary_trust, sink=sink)


def replay_legacy_call(recordings_dir: str | Path, doc: Mapping[str, Any], surface: str,
                       entry: str, call: int, *, variant: str | None = None,
                       metered: bool = True) -> ProviderOutcome:
    """The recorded outcome of the ``call``-th (from 1) request of a legacy entry point.

    The drop-in for ``shadow.recorded_provider.recorded_answer`` over cassettes; raises
    ``SideEffectError`` when the capture holds no such exchange or the cassette no answer.
    """
    scenario = str(doc.get("scenario", ""))
    for x in legacy_exchanges(doc, surface, entry, variant=variant):
        if x.call == call:
            return replay_exchange(recordings_dir, scenario, chat_request(x, default_model(doc)),
                                   metered=metered)
    raise SideEffectError(
        f"no recorded provider exchange for {scenario} {surface} {entry_file(entry)} call {call}")
