"""Noise learned, not guessed (issue 15 item 3): the learner over pairs of control runs,
the merge into the reviewed rule file, the file's strict validation, neutralisation, and
the acceptance probe — for every committed rule, a benign mutation of its field in a copy
of the bundled fixtures adds nothing above ``info``, while a mutation of a field no rule
names is still a real divergence."""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from shadow import noise_rules
from shadow.candidate import KernelCandidate
from shadow.capture.noise import CapturePair, Learned, learn, merge, update_policy
from shadow.cli import main
from shadow.errors import InputError
from shadow.fixtures import load_corpus
from shadow.noise_rules import (
    Evidence,
    NoiseRule,
    NoiseRules,
    json_text,
    neutralise,
    parse,
    render,
    to_doc,
)
from shadow.replay import replay_fixture
from shadow.run import RunOptions, execute
from tests.shadow._mutate import above_info

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
BASE_MS = 1787227200000
NOW = dt.datetime(2026, 9, 1, 12, 0, tzinfo=dt.UTC)


def _cap(output: Any, **extra: Any) -> dict[str, Any]:
    return {"format": "legacy-capture/v1", "scenario": "s", "surface": "session-core",
            "entry": "x#y", "options": {}, "env_flags": {},
            "determinism": {"clock": {"base_ms": BASE_MS}}, "output": output, "error": None,
            **extra}


def _pairs(a: dict[str, Any], b: dict[str, Any], scenario: str = "s",
           file: str = "session-core.memory.json") -> list[CapturePair]:
    inp = {"format": "legacy-capture-input/v1", "scenario": scenario, "messages": []}
    return [CapturePair(scenario, "input.json", inp, copy.deepcopy(inp)),
            CapturePair(scenario, file, a, b)]


# =========================================================================== learning


def test_a_differing_timestamp_is_learned_with_counts_never_values() -> None:
    a = _cap({"ops": [{"index": 0, "result": {"createdAt": BASE_MS, "scope": "agent"}}]})
    b = _cap({"ops": [{"index": 0, "result": {"createdAt": BASE_MS + 5000, "scope": "agent"}}]},
             determinism={"clock": {"base_ms": BASE_MS + 5000}})
    got = learn(_pairs(a, b))
    assert got.problems == ()
    assert [(f.surface, f.path, f.scenarios, f.values, f.differing) for f in got.fields] == [
        ("session-core.memory", "/output/ops/*/result/createdAt", ("s",), 1, 1)]
    assert str(BASE_MS) not in repr(got)


def test_ids_inside_arrays_generalise_to_a_star_over_every_scenario_pair() -> None:
    def run(ids: list[str]) -> dict[str, Any]:
        return _cap({"records": [{"id": i, "content": "same"} for i in ids],
                     "refs": {"m1": ids[0]}})
    pairs = [*_pairs(run(["mem_a", "mem_b"]), run(["mem_c", "mem_d"]), "s1"),
             *_pairs(run(["mem_e"]), run(["mem_f"]), "s2")]
    got = learn(pairs)
    assert got.problems == ()
    assert [(f.path, f.scenarios, f.values, f.differing) for f in got.fields] == [
        ("/output/records/*/id", ("s1", "s2"), 3, 3),
        ("/output/refs/m1", ("s1", "s2"), 2, 2)]


def test_identical_runs_learn_nothing_and_determinism_is_ignored() -> None:
    a = _cap({"ops": [{"index": 0, "result": {"createdAt": BASE_MS}}]})
    b = copy.deepcopy(a)
    b["determinism"] = {"clock": {"base_ms": 1}, "random": {"seed_label": "other"}}
    assert learn(_pairs(a, b)) == Learned((), ())


def test_json_text_is_descended_into() -> None:
    def line(ts: int, h: str) -> str:
        return json.dumps({"type": "user_message", "timestamp": ts, "data": {"x": 1},
                           "hash": h}, separators=(",", ":"))
    a = _cap({"raw_jsonl_lines": [line(BASE_MS, "aa"), line(BASE_MS + 1, "bb")]})
    b = _cap({"raw_jsonl_lines": [line(BASE_MS + 9, "cc"), line(BASE_MS + 10, "dd")]})
    got = learn(_pairs(a, b, file="cli.jsonl-session.json"))
    assert [f.path for f in got.fields] == ["/output/raw_jsonl_lines/*/~json/hash",
                                            "/output/raw_jsonl_lines/*/~json/timestamp"]


@pytest.mark.parametrize(("change", "problem"), [
    (lambda a, b: b.update(options={"maxMessages": 3}), "the call itself differs at /options"),
    (lambda a, b: b["output"].update(ids=["x", "x"]) or a["output"].update(ids=["y", "z"]),
     "still differ once the learned fields are neutralised"),
])
def test_what_cannot_be_noise_is_a_problem(change: Any, problem: str) -> None:
    a, b = _cap({"ids": []}), _cap({"ids": []})
    change(a, b)
    got = learn(_pairs(a, b))
    assert [p.what for p in got.problems if problem in p.what], got.problems


def test_differing_inputs_and_missing_files_are_problems() -> None:
    pairs = _pairs(_cap({}), _cap({}))
    pairs[0] = CapturePair("s", "input.json", {"messages": [1]}, {"messages": [2]})
    pairs.append(CapturePair("s", "cli.compress.json", _cap({}), None))
    got = learn(pairs)
    assert sorted((p.file, p.what) for p in got.problems) == [
        ("cli.compress.json", "only the first run has this file"),
        ("input.json", "the inputs differ between the runs: not a control run")]


def test_learning_is_order_free() -> None:
    pairs = [*_pairs(_cap({"t": 1}), _cap({"t": 2}), "b"),
             *_pairs(_cap({"u": 1}), _cap({"u": 3}), "a")]
    assert learn(pairs) == learn(pairs[::-1])


# =========================================================================== merging


def _rule(rid: str, path: str, *, reviewed: bool = True, surface: str = "session-core.memory"
          ) -> NoiseRule:
    return NoiseRule(rid, surface, path, Evidence("manifest", 1, 1), reviewed,
                     "team" if reviewed else None, "clock-derived" if reviewed else None)


def test_merge_confirms_adds_unreviewed_and_keeps_review_fields() -> None:
    existing = NoiseRules((_rule("NR-001", "/output/ops/*/result/createdAt"),
                           _rule("NR-004", "/output/refs/*"),
                           _rule("NR-007", "/output/processingTime",
                                 surface="desktop.compress")))
    def run(ts: int, ids: list[str]) -> dict[str, Any]:
        return _cap({"ops": [{"result": {"createdAt": ts, "id": i}} for i in ids],
                     "refs": {"m1": ids[0], "m2": ids[1]}})
    learned = learn(_pairs(run(BASE_MS, ["a", "b"]), run(BASE_MS + 1, ["c", "d"])))
    got = merge(existing, learned)
    assert got.added == ("NR-008",)
    assert got.confirmed == ("NR-001", "NR-004")
    assert got.unconfirmed == ("NR-007",)
    by = {r.id: r for r in got.rules.rules}
    assert by["NR-001"].evidence == Evidence("repeat", 1, 2, 2)
    assert (by["NR-001"].owner, by["NR-001"].reason, by["NR-001"].reviewed) == (
        "team", "clock-derived", True)
    assert by["NR-004"].evidence == Evidence("repeat", 1, 2, 2)  # refs/m1 + refs/m2
    assert by["NR-007"] == existing.rules[2]
    new = by["NR-008"]
    assert (new.path, new.reviewed, new.owner, new.reason) == (
        "/output/ops/*/result/id", False, None, None)
    # the merged file parses again, and merging the same run again changes nothing
    doc = to_doc(got.rules.rules)
    again = merge(parse(json.loads(render(doc))), learned)
    assert render(to_doc(again.rules.rules)) == render(doc)
    assert again.added == ()


def test_update_policy_writes_deterministic_bytes_and_refuses_a_broken_file(
        tmp_path: Path) -> None:
    for run, ts in (("one", BASE_MS), ("two", BASE_MS + 1)):
        (tmp_path / run / "s").mkdir(parents=True)
        (tmp_path / run / "s" / "input.json").write_text('{"messages": []}', encoding="utf-8")
        (tmp_path / run / "s" / "session-core.memory.json").write_text(
            json.dumps(_cap({"ops": [{"result": {"createdAt": ts}}]})), encoding="utf-8")
    policy = tmp_path / "noise.v1.json"
    learned, merged = update_policy(tmp_path / "one", tmp_path / "two", policy)
    first = policy.read_bytes()
    assert merged.added == ("NR-001",) and learned.problems == ()
    assert first.endswith(b"}\n") and b'  "rules": [' in first
    assert noise_rules.load(policy).unreviewed[0].path == "/output/ops/*/result/createdAt"
    update_policy(tmp_path / "one", tmp_path / "two", policy)
    assert policy.read_bytes() == first
    policy.write_text('{"schema": "shadow-noise-rules/v1", "rules": [{"id": 1}]}',
                      encoding="utf-8")
    with pytest.raises(InputError) as err:
        update_policy(tmp_path / "one", tmp_path / "two", policy)
    assert err.value.pointer == "/rules/0/id"
    assert b'"id": 1' in policy.read_bytes()  # nothing written


# =========================================================================== the file

_GOOD = {"id": "NR-001", "surface": "session-core.memory", "path": "/output/ops/*/id",
         "evidence": {"source": "repeat", "scenarios": 1, "values": 2, "differing": 2},
         "reviewed": True, "owner": "team", "reason": "seeded ids"}


def _doc(*rules: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"schema": "shadow-noise-rules/v1", "rules": list(rules), **top}


@pytest.mark.parametrize(("doc", "pointer", "expected"), [
    ({"schema": "shadow-noise-rules/v2", "rules": []}, "/schema", "shadow-noise-rules/v1"),
    (_doc(extra=1), "/extra", "only schema"),
    (_doc({**_GOOD, "note": "x"}), "/rules/0/note", "only id"),
    (_doc({**_GOOD, "id": ""}), "/rules/0/id", "non-empty string"),
    (_doc({**_GOOD, "surface": "memory"}), "/rules/0/surface", "capture name"),
    (_doc({**_GOOD, "path": "output/x"}), "/rules/0/path", "starting with '/'"),
    (_doc({**_GOOD, "path": "/options/maxMessages"}), "/rules/0/path", "never the call"),
    (_doc({**_GOOD, "path": "/determinism/clock"}), "/rules/0/path", "never the call"),
    (_doc({**_GOOD, "path": "/output/a~2b"}), "/rules/0/path", "RFC 6901"),
    (_doc({**_GOOD, "path": "/output/line/~json"}), "/rules/0/path", "not ending"),
    (_doc(_GOOD, {**_GOOD, "id": "NR-002"}), "/rules/1/path", "one rule per surface"),
    (_doc(_GOOD, {**_GOOD, "path": "/output/x"}), "/rules/1/id", "unique"),
    (_doc({k: v for k, v in _GOOD.items() if k != "reviewed"}), "/rules/0/reviewed",
     "true or false"),
    (_doc({**_GOOD, "owner": " "}), "/rules/0/owner", "names its owner"),
    (_doc({k: v for k, v in _GOOD.items() if k != "reason"}), "/rules/0/reason",
     "names its reason"),
    (_doc({**_GOOD, "evidence": []}), "/rules/0/evidence", "an evidence object"),
    (_doc({**_GOOD, "evidence": {"source": "guess", "scenarios": 1, "values": 1}}),
     "/rules/0/evidence/source", "one of repeat, manifest"),
    (_doc({**_GOOD, "evidence": {"source": "repeat", "scenarios": -1, "values": 1}}),
     "/rules/0/evidence/scenarios", "an integer >= 0"),
    (_doc({**_GOOD, "evidence": {"source": "repeat", "scenarios": 1, "values": 1,
                                 "differing": 2}}),
     "/rules/0/evidence/differing", "at most"),
])
def test_a_bad_rule_file_names_the_pointer_and_the_expectation(
        doc: dict[str, Any], pointer: str, expected: str) -> None:
    with pytest.raises(InputError) as err:
        parse(doc, "noise.json")
    assert (err.value.source, err.value.pointer) == ("noise.json", pointer)
    assert expected in err.value.expected


def test_an_unreviewed_rule_needs_no_owner_and_the_good_one_round_trips() -> None:
    unreviewed = {k: v for k, v in _GOOD.items() if k not in ("owner", "reason")}
    rules = parse(_doc(_GOOD, {**unreviewed, "id": "NR-002", "path": "/output/x",
                               "reviewed": False}))
    assert [r.id for r in rules.applied] == ["NR-001"]
    assert [r.id for r in rules.unreviewed] == ["NR-002"]
    assert parse(json.loads(render(to_doc(rules.rules)))) == NoiseRules(rules.rules,
                                                                        "<noise rules>")


def test_a_broken_rule_file_fails_the_run_before_any_replay(tmp_path: Path) -> None:
    bad = tmp_path / "noise.json"
    bad.write_text(json.dumps(_doc({**_GOOD, "path": "/entry"})), encoding="utf-8")
    with pytest.raises(InputError) as err:
        execute(RunOptions(fixtures=str(FIXTURES), out=str(tmp_path / "out"),
                           noise=str(bad)))
    assert (err.value.source, err.value.pointer) == (str(bad), "/rules/0/path")
    assert not (tmp_path / "out").exists()


# =========================================================================== neutralising


def test_neutralise_keeps_equality_given_strings_nulls_and_unnamed_fields() -> None:
    doc = _cap({"ops": [{"args": {"id": "mem_given"}, "result": {"id": "mem_a", "t": 5}},
                        {"args": {"id": "mem_a"}, "result": {"id": "mem_b", "t": None}}],
                "content": "mem_a"})
    rules = [_rule("NR-1", "/output/ops/*/result/id"), _rule("NR-2", "/output/ops/*/args/id"),
             _rule("NR-3", "/output/ops/*/result/t")]
    given = noise_rules.given_values({"memory_ops": [{"id": "mem_given"}]})
    out, counts = neutralise(doc, rules, given)
    ops = out["output"]["ops"]
    assert [o["args"]["id"] for o in ops] == ["mem_given", ops[0]["result"]["id"]]
    assert ops[0]["result"]["id"] != ops[1]["result"]["id"]
    assert [o["result"]["t"] for o in ops] == [0, None]
    assert out["output"]["content"] == "mem_a"  # no rule names it
    assert counts == {"NR-1": 2, "NR-2": 1, "NR-3": 1}
    assert doc["output"]["ops"][0]["result"]["id"] == "mem_a"  # the input is not changed


def test_json_text_is_rewritten_only_where_a_rule_replaced_something() -> None:
    line = '{"type":"x", "timestamp":5}'  # not compact: kept byte for byte when untouched
    doc = _cap({"raw_jsonl_lines": [line, '{"type":"y"}']})
    out, counts = neutralise(doc, [_rule("NR-1", "/output/raw_jsonl_lines/*/~json/timestamp")])
    assert out["output"]["raw_jsonl_lines"] == ['{"type":"x","timestamp":0}', '{"type":"y"}']
    assert counts == {"NR-1": 1}


def test_unreviewed_rules_are_reported_but_not_applied(tmp_path: Path) -> None:
    fx = tmp_path / "fx"
    shutil.copytree(FIXTURES / "memory-update-remove", fx / "memory-update-remove")
    doc = json.loads(noise_rules.DEFAULT_PATH.read_text(encoding="utf-8"))
    for r in doc["rules"]:
        r["reviewed"] = r["id"] != "NR-020"
        if r["id"] == "NR-020":
            del r["owner"], r["reason"]
    rules_file = tmp_path / "noise.json"
    rules_file.write_text(json.dumps(doc), encoding="utf-8")
    rules = noise_rules.load(rules_file)
    cap = load_corpus(fx, noise=rules).scenarios[0].captures[0]
    assert "NR-020" not in {rid for rid, _p, _n in cap.noise} and cap.noise
    res = execute(RunOptions(fixtures=str(fx), out=str(tmp_path / "out"), noise=str(rules_file),
                             determinism=False))
    assert [r["id"] for r in res.report["noise_rules"]["unreviewed"]] == ["NR-020"]
    assert "NR-020" not in {r["id"] for r in res.report["noise_rules"]["applied"]}
    assert "noise rules unreviewed, not applied: 1 (NR-020)" in res.lines


# =========================================================================== the seed


def _shifted(v: Any) -> Any:
    """A second control run of a bundled capture, as the MANIFEST's determinism section
    describes one: another clock origin, other seeds (ids and the hashes chained on them)."""
    if isinstance(v, dict):
        return {k: _shifted(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_shifted(x) for x in v]
    if isinstance(v, int) and not isinstance(v, bool) and BASE_MS <= v <= BASE_MS + 10**8:
        return v + 86_400_000
    if isinstance(v, str):
        inner = json_text(v)
        if inner is not None and v.startswith('{"type"'):
            return json.dumps(_shifted(inner), separators=(",", ":"), ensure_ascii=False)
        if re.fullmatch(r"[0-9a-f]{64}", v):
            return v[::-1]
        v = re.sub(r"mem_[0-9a-f]{16}", lambda m: "mem_" + m.group(0)[4:][::-1], v)
        return re.sub(r"generation-[0-9a-f-]{36}",
                      lambda m: "generation-" + m.group(0)[11:][::-1], v)
    return v


def test_a_repeat_run_confirms_the_committed_rules() -> None:
    pairs = []
    for f in sorted(FIXTURES.glob("*/*.json")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        second = doc if f.name == "input.json" else _shifted(doc)
        pairs.append(CapturePair(f.parent.name, f.name, doc, second))
    learned = learn(pairs)
    assert learned.problems == ()
    committed = noise_rules.load()
    merged = merge(committed, learned)
    assert merged.added == ()  # every learned field is a committed rule already
    # unconfirmed: Desktop processingTime (the capture clock is frozen: 0 in both runs) and
    # rules whose field no bundled fixture holds
    assert {r.id for r in committed.rules if r.id in merged.unconfirmed
            and r.surface != "desktop.compress" and _probe_target(r) is not None} == set()
    kept = {r.id: (r.reviewed, r.owner, r.reason) for r in merged.rules.rules}
    assert kept == {r.id: (r.reviewed, r.owner, r.reason) for r in committed.rules}


def test_the_committed_file_is_in_its_own_format() -> None:
    text = noise_rules.DEFAULT_PATH.read_text(encoding="utf-8")
    rules = noise_rules.load()
    assert text == render(to_doc(rules.rules, rules.description))
    assert rules.rules and not rules.unreviewed


# =========================================================================== acceptance probe


def _values(node: Any, tokens: tuple[str, ...]) -> list[Any]:
    if not tokens:
        return [node]
    head, rest = tokens[0], tokens[1:]
    if head == "~json":
        inner = json_text(node)
        return [] if inner is None else _values(inner, rest)
    if isinstance(node, list) and head == "*":
        return [v for x in node for v in _values(x, rest)]
    if isinstance(node, dict):
        keys = list(node) if head == "*" else [k for k in node if k == head]
        return [v for k in keys for v in _values(node[k], rest)]
    return []


def _probe_target(rule: NoiseRule) -> tuple[str, list[Any]] | None:
    """The smallest bundled fixture with a value of ``rule``'s field the run made."""
    for f in sorted(FIXTURES.glob(f"*/{rule.surface}.json"), key=lambda p: p.stat().st_size):
        given = noise_rules.given_values(json.loads(
            (f.parent / "input.json").read_text(encoding="utf-8")))
        doc = json.loads(f.read_text(encoding="utf-8"))
        vals = [v for v in _values(doc, rule.tokens) if v is not None
                and noise_rules.value_key(v) not in given]
        if vals:
            return f.parent.name, vals
    return None


def _benign(doc: dict[str, Any], rule: NoiseRule, values: list[Any]) -> dict[str, Any]:
    """``rule``'s values changed as another control run changes them: numbers shifted,
    strings renamed consistently throughout the capture."""
    text = json.dumps(doc, ensure_ascii=False)
    for v in sorted({v for v in values if isinstance(v, str)}, key=len, reverse=True):
        text = text.replace(v, v[::-1])
    out = json.loads(text)
    if any(isinstance(v, int | float) for v in values):
        def shift(node: Any, tokens: tuple[str, ...]) -> Any:
            if not tokens:
                return node + 86_400_007 if isinstance(node, int | float) else node
            head, rest = tokens[0], tokens[1:]
            if head == "~json":
                inner = json_text(node)
                return node if inner is None else json.dumps(shift(inner, rest),
                                                             separators=(",", ":"))
            if isinstance(node, list) and head == "*":
                return [shift(x, rest) for x in node]
            if isinstance(node, dict):
                return {k: shift(x, rest) if head in ("*", k) else x for k, x in node.items()}
            return node
        out = shift(out, rule.tokens)
    assert out != doc
    return out


def _replay(root: Path, name: str) -> Any:
    corpus = load_corpus(root, only=[name], noise=noise_rules.load())
    assert not corpus.quarantined, corpus.quarantined
    return replay_fixture(corpus.scenarios[0], KernelCandidate())


_RULES = noise_rules.load().rules


@pytest.mark.parametrize("rule", _RULES, ids=[f"{r.id}:{r.surface}:{r.path}" for r in _RULES])
def test_a_benign_mutation_of_a_learned_field_adds_nothing_above_info(
        rule: NoiseRule, tmp_path: Path) -> None:
    target = _probe_target(rule)
    if target is None:
        pytest.skip("no bundled fixture holds a run-made value of this field")
    name, values = target
    shutil.copytree(FIXTURES / name, tmp_path / name)
    path = tmp_path / name / f"{rule.surface}.json"
    path.write_text(json.dumps(_benign(json.loads(path.read_text(encoding="utf-8")), rule,
                                       values), indent=2), encoding="utf-8")
    clean = _replay(FIXTURES, name)
    noisy = _replay(tmp_path, name)
    assert above_info(noisy) == above_info(clean)
    seen = {json.dumps(d.to_wire(), sort_keys=True) for d in clean.divergences}
    extra = [d for d in noisy.divergences if json.dumps(d.to_wire(), sort_keys=True) not in seen]
    assert all(d.reason_code == "noise.learned_field" and d.severity == "info" for d in extra)


@pytest.mark.parametrize(("name", "file", "mutate"), [
    ("memory-update-remove", "session-core.memory.json",
     lambda d: d["output"]["ops"][0]["result"].update(scope="global")),
    ("short-session", "cli.jsonl-session.json",
     lambda d: d["output"]["rebuildMessages"][-1].update(content="another question")),
])
def test_a_field_no_rule_names_still_diverges(name: str, file: str, mutate: Any,
                                              tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / name, tmp_path / name)
    path = tmp_path / name / file
    doc = json.loads(path.read_text(encoding="utf-8"))
    mutate(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert above_info(_replay(tmp_path, name)) - above_info(_replay(FIXTURES, name))


def test_the_run_reports_applied_rules_and_stays_byte_identical(tmp_path: Path) -> None:
    fx = tmp_path / "fx"
    for name in ("memory-update-remove", "short-session"):
        shutil.copytree(FIXTURES / name, fx / name)
    a = execute(RunOptions(fixtures=str(fx), out=str(tmp_path / "a"), determinism=False,
                           now=NOW))
    b = execute(RunOptions(fixtures=str(fx), out=str(tmp_path / "b"), determinism=False,
                           now=NOW))
    assert a.report_path.read_bytes() == b.report_path.read_bytes()
    applied = {r["id"]: r for r in a.report["noise_rules"]["applied"]}
    assert applied and all(r["values"] > 0 and r["captures"] == 1 for r in applied.values())
    assert any(line.startswith("noise rules applied: ") for line in a.lines)
    assert "noise rules unreviewed" not in "\n".join(a.lines)



def test_run_takes_a_noise_file_and_a_broken_one_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "noise.json"
    bad.write_text('{"schema": "shadow-noise-rules/v1", "rules": [{"id": 1}]}', encoding="utf-8")
    out = tmp_path / "o"
    assert main(["run", "--fixtures", str(FIXTURES), "--out", str(out), "--noise", str(bad),
                 "--surface", "vscode.*"]) == 2
    assert not out.exists()
