"""Helpers of the mutation suite: copies of real captures and of the live kernel's recorded
projections, mutated in memory and re-validated exactly as files on disk are.

Nothing here edits a fixture on disk: a mutated scenario is a deep copy of the loaded one,
passed again through ``validate_input`` / ``validate_capture``; a mutated recorded
candidate is written to a temporary folder and read back by the real
``RecordedCandidate`` (strict ``projection_wire`` parsing).
"""

from __future__ import annotations

import copy
import functools
import json
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from shadow import codes
from shadow.candidate import KernelCandidate, RecordedCandidate, write_recorded
from shadow.canonical import canonicalize
from shadow.divergence import Divergence
from shadow.fixtures import Scenario, load_corpus, validate_capture, validate_input
from shadow.intended import load as load_rules
from shadow.projection import to_wire
from shadow.replay import FixtureResult, replay_fixture
from shadow.run import apply_intended

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
Mutator = Callable[[Any], None]


@functools.cache
def scenario(name: str) -> Scenario:
    corpus = load_corpus(FIXTURES, only=[name])
    assert not corpus.quarantined, corpus.quarantined
    return corpus.scenarios[0]


@functools.cache
def live(name: str) -> FixtureResult:
    return replay_fixture(scenario(name), KernelCandidate())


def mutated(name: str, mutations: Mapping[str, Mutator]) -> Scenario:
    """A copy of fixture ``name`` with ``mutations`` (file name -> mutator) applied."""
    sc = scenario(name)
    inp = copy.deepcopy(dict(sc.input))
    if "input.json" in mutations:
        mutations["input.json"](inp)
        inp = validate_input(inp, sc.input_file, name)
    caps = []
    for cap in sc.captures:
        fn = mutations.get(f"{cap.name}.json")
        if fn is None:
            caps.append(cap)
            continue
        doc = copy.deepcopy(dict(cap.raw))
        fn(doc)
        caps.append(validate_capture(doc, cap.file, name, cap.name))
    return replace(sc, input=inp, captures=tuple(caps))


def replay_baseline(name: str, mutations: Mapping[str, Mutator]) -> FixtureResult:
    return replay_fixture(mutated(name, mutations), KernelCandidate())


def projection_doc(name: str, surface: str) -> dict[str, Any]:
    for p in live(name).candidate_projections:
        if p.surface == surface:
            return json.loads(json.dumps(to_wire(p)))
    raise KeyError((name, surface))


def replay_candidate(name: str, surface: str, mutate: Mutator) -> FixtureResult:
    """Replay ``name`` against the live kernel's recording with one projection mutated."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "cand"
        write_recorded(folder, KernelCandidate().identity, live(name).candidate_projections)
        path = folder / name / f"{surface}.projection.json"
        doc = json.loads(path.read_text(encoding="utf-8"))
        mutate(doc)
        path.write_text(json.dumps(doc), encoding="utf-8")  # \u escapes: lone surrogates too
        return replay_fixture(scenario(name), RecordedCandidate(folder))


def find(divs: Iterable[Divergence], code: str, surface: str | None = None,
         item: str | None = None) -> list[Divergence]:
    return [d for d in divs if d.reason_code == code
            and (surface is None or d.surface == surface)
            and (item is None or item in d.item_ids)]


def judged(r: FixtureResult) -> list[Divergence]:
    """The run's divergences after the reviewed intended-difference rules."""
    return apply_intended(list(r.divergences), load_rules())


def above_info(r: FixtureResult) -> set[tuple[Any, ...]]:
    return {(d.surface, d.reason_code, d.severity, d.attribution, d.item_ids)
            for d in (*judged(r), *r.legacy_defects) if d.severity != "info"}


def messages(doc: Any) -> list[dict[str, Any]]:
    out = doc["output"]
    return out["messages"] if "messages" in out else out["rebuildMessages"]  # type: ignore


def items_where(doc: Mapping[str, Any], pred: Callable[[Mapping[str, Any]], bool]
                ) -> list[str]:
    return [it["id"] for it in doc["items"] if pred(it)]


# --------------------------------------------------------------------------- shared by the suites

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
MESSAGE_SURFACES = ("cli.compress", "desktop.compress", "desktop.context-engineering",
                    "cli.jsonl-session")
PAIR_FIXTURES = ("parallel-tool-calls", "late-tool-result", "prompt-injection-web-fetch",
                 "windows-paths", "claude-3-5-sonnet", "mixed-zh-en")


def expect_candidate(r: Any, code: str, surface: str, item: str | None = None) -> None:
    hits = [d for d in find(r.divergences, code, surface, item) if d.attribution == "candidate"]
    assert hits, (code, surface, item, sorted({d.reason_code for d in r.divergences}))
    rc = codes.get(code)
    if rc.nogo or rc.protection:
        assert all(d.severity == "blocking" for d in hits)
        assert any(d.severity == "blocking" for d in r.divergences)  # the run is NO-GO


def expect_baseline(r: Any, code: str, surface: str, item: str | None = None) -> None:
    hits = find(r.legacy_defects, code, surface, item)
    assert hits, (code, surface, item, sorted({d.reason_code for d in r.legacy_defects}))
    assert all(d.attribution == "baseline" and d.severity != "blocking" for d in hits)


def kept(doc: dict[str, Any], pred: Any) -> list[str]:
    return [it["id"] for it in doc["items"] if it["origin"] == "input" and pred(it)]


def drop(doc: dict[str, Any], item_id: str, reason: str = "input_budget") -> None:
    doc["items"] = [it for it in doc["items"] if it["id"] != item_id]
    doc["dropped"] = [d for d in doc["dropped"] if d["id"] != item_id] + [
        {"id": item_id, "reason": reason}]


def canon_of(name: str) -> Any:
    sc = scenario(name)
    return canonicalize(name, sc.input)


_CONSOLIDATOR = "packages/session-core/lib/memory-consolidator.js#MemoryConsolidator.consolidate"


def llm_consolidation(variant: str, secret_fact: bool) -> dict[str, Any]:
    """Mutations adding one LLM consolidation (``useLLM``) with a recorded summariser
    exchange to memory-consolidate-trace, in the capture format of the other operations."""
    key = "OPENAI_API_KEY=sk-proj-Q7wX2mZ9rT4kLp8vN3bH6jY1cF5dS0aE"
    args = [{"sessionId": "sess-42", "agentId": "coder"}, {"useLLM": True}]
    exchange: dict[str, Any] = {"surface": "session-core", "entry": _CONSOLIDATOR, "call": 1,
                                "request": {"events": [{"type": "message", "payload": {
                                    "role": "user", "content": "prefer lint before tests"}}]}}
    facts = [{"category": "preference", "content": "Prefers running the linter before tests"}]
    if variant == "error":
        exchange["error"] = {"name": "Error", "message": "upstream 500", "code": None}
    elif variant == "cancelled":
        exchange["error"] = {"name": "AbortError", "message": "aborted", "code": 20}
    elif variant == "invalid":
        exchange["response"] = {"text": "Sorry, I cannot summarise this session."}
    else:
        exchange["response"] = facts
    if variant == "secret":
        exchange["request"]["events"].append({"type": "tool_result", "payload": {
            "ok": True, "tool": "read_file", "summary": key}})
    content = f"Config read: {key}" if secret_fact else facts[0]["content"]

    def inp(d: dict[str, Any]) -> None:
        d["memory_ops"].append({"op": "consolidate", "args": args})
        d.setdefault("provider_responses", []).append(exchange)

    def cap(d: dict[str, Any]) -> None:
        ops = d["output"]["ops"]
        index = len(ops)
        rec = {"id": "mem_00000000000000aa", "scope": "agent", "scopeId": "coder",
               "category": "preference", "content": content, "tags": [], "score": 0,
               "metadata": {"fromSessionId": "sess-42"}, "createdAt": 1, "updatedAt": 1,
               "accessedAt": 1}
        ops.append({"index": index, "op": "consolidate", "args": args,
                    "result": {"sessionId": "sess-42", "scope": "agent", "scopeId": "coder",
                               "eventCount": 10, "factCount": 1, "writtenCount": 1,
                               "written": [rec]}, "error": None})
    return {"input.json": inp, "session-core.memory.json": cap}


def replay_candidate_on(sc: Scenario, surface: str, mutate: Mutator) -> FixtureResult:
    """Like :func:`replay_candidate`, for a mutated scenario: the live kernel's projections
    of ``sc`` recorded, one of them mutated, and ``sc`` replayed against the recording."""
    projections = replay_fixture(sc, KernelCandidate()).candidate_projections
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "cand"
        write_recorded(folder, KernelCandidate().identity, projections)
        path = folder / sc.name / f"{surface}.projection.json"
        doc = json.loads(path.read_text(encoding="utf-8"))
        mutate(doc)
        path.write_text(json.dumps(doc), encoding="utf-8")  # \u escapes: lone surrogates too
        return replay_fixture(sc, RecordedCandidate(folder))
