"""The gate reduces the per-case rows as it reads them (ADR 0017, step 5).

``shadow.gates.merge`` merges the files' sorted case rows in one pass and keeps only what
the evaluator reads (:class:`~shadow.gates.merge.CaseStats`).  A property test holds that
reduction to the gate's former computation from a dict of every case; a case row out of
order or twice is refused with its JSON pointer; ``cases`` may be any sequence, not only a
list; and each file's cases are iterated once per gate evaluation.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import fnmatch
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shadow import codes, evidence
from shadow.errors import InputError
from shadow.gates import merge as merge_mod
from shadow.gates import policy as policy_mod
from shadow.gates.evaluate import evaluate
from shadow.gates.merge import NAMED_CODES, EvidenceFile, merge, merged_cases, parse
from tests.shadow.test_gates import TODAY, case, make, seal

DAY = dt.date.fromisoformat(TODAY)
FIXTURES = ("a", "a-1", "a.b", "b", "c-01", "c-02")
SURFACES = ("cli", "cli-x.a", "cli.entry", "cli.entry~desktop.entry", "desktop.entry",
            "sdk.a", "session-core.memory")
BY_CODE = ("unclassified", "shadow.side_effect", "item.order", "tool_pair.split")
NOGO = tuple(sorted(codes.NOGO_CODES))[:3]
EXCLUDES = ((), ("*~*",), ("cli.*",), ("sdk*", "*~*"), ("desktop.entry",))
TOPS = ("cli", "cli-x", "desktop", "sdk", "session-core", "vscode", "cli.entry")


# -- the reference: the gate's former logic over a dict of every case ----------------------

def reference_cases(files: Sequence[EvidenceFile]) -> dict[tuple[str, str], dict[str, Any]]:
    cases: dict[tuple[str, str], dict[str, Any]] = {}
    for f in files:
        for c in f.doc["cases"]:
            key = (c["fixture"], c["surface"])
            cur = cases.get(key)
            if cur is None:
                cases[key] = {"fixture": c["fixture"], "surface": c["surface"],
                              "worst": c["worst"], "by_code": dict(c.get("by_code", {})),
                              "nogo": set(c.get("nogo", [])), "platforms": {f.platform}}
            else:
                cur["worst"] = merge_mod._worse(cur["worst"], c["worst"])
                for code, n in c.get("by_code", {}).items():
                    cur["by_code"][code] = max(cur["by_code"].get(code, 0), n)
                cur["nogo"] |= set(c.get("nogo", []))
                cur["platforms"].add(f.platform)
    return cases


def reference_nogo(cases: Mapping[tuple[str, str], Mapping[str, Any]]) -> dict[str, list[str]]:
    nogo: dict[str, list[str]] = {}
    for (fx, sf), c in sorted(cases.items()):
        for code in sorted(c["nogo"]):
            nogo.setdefault(code, []).append(f"{fx}/{sf}")
    return dict(sorted(nogo.items()))


def reference_judged(cases: Mapping[tuple[str, str], Mapping[str, Any]], surface: str,
                     exclude: Sequence[str]) -> list[Mapping[str, Any]]:
    return [c for (fx, sf), c in sorted(cases.items())
            if evidence.top_surface(sf) == surface
            and not any(fnmatch.fnmatchcase(sf, p) for p in exclude)]


def reference_code(cases: Mapping[tuple[str, str], Mapping[str, Any]], code: str) -> list[str]:
    return [f"{fx}/{sf}" for (fx, sf), c in sorted(cases.items()) if c["by_code"].get(code)]


def reference_rate(cases: Mapping[tuple[str, str], Mapping[str, Any]], surface: str,
                   fail_at: str, exclude: Sequence[str]) -> tuple[int, int]:
    rank = codes.severity_rank(fail_at)
    by_fx: dict[str, bool] = {}
    for c in reference_judged(cases, surface, exclude):
        bad = c["worst"] != "clean" and codes.severity_rank(c["worst"]) <= rank
        by_fx[c["fixture"]] = by_fx.get(c["fixture"], False) or bad
    return len(by_fx), sum(by_fx.values())


# -- random evidence ------------------------------------------------------------------------

def _file(path: str, platform: str, rows: list[dict[str, Any]]) -> EvidenceFile:
    doc = make(platform, cases=rows)
    doc["environment"] = {"platform": platform}
    return EvidenceFile(path, doc)


_row = st.fixed_dictionaries({
    "worst": st.sampled_from((*codes.SEVERITIES, "clean")),
    "by_code": st.dictionaries(st.sampled_from(BY_CODE), st.integers(0, 3), max_size=3),
    "nogo": st.lists(st.sampled_from(NOGO), max_size=2, unique=True),
})
_keys = st.lists(st.tuples(st.sampled_from(FIXTURES), st.sampled_from(SURFACES)),
                 unique=True, max_size=25)


@st.composite
def evidence_files(draw: st.DrawFn) -> list[EvidenceFile]:
    files = []
    for i in range(draw(st.integers(0, 4))):
        platform = draw(st.sampled_from(("linux", "windows", "macos")))
        rows = [{"fixture": fx, "surface": sf, **draw(_row)} for fx, sf in sorted(draw(_keys))]
        files.append(_file(f"{i}/{platform}/evidence.json", platform, rows))
    return files


@settings(max_examples=300, deadline=None)
@given(files=evidence_files(), exclude=st.sampled_from(EXCLUDES))
def test_the_streamed_reduction_is_the_dict_of_every_case(
        files: list[EvidenceFile], exclude: tuple[str, ...]) -> None:
    ref = reference_cases(files)
    assert list(merged_cases(files)) == [c for _k, c in sorted(ref.items())]
    stats = merge(files, exclude_surfaces=exclude).stats
    assert {k: list(v) for k, v in stats.nogo.items()} == reference_nogo(ref)
    for code in NAMED_CODES:
        assert list(stats.cases_with(code)) == reference_code(ref, code)
    assert list(stats.blocking) == [f"{fx}/{sf}" for (fx, sf), c in sorted(ref.items())
                                    if c["worst"] == "blocking"]
    for top in TOPS:
        assert bool(stats.judged(top)) == bool(reference_judged(ref, top, exclude))
        for sev in codes.SEVERITIES:
            assert (stats.judged(top), stats.failing_at(top, sev)) == \
                reference_rate(ref, top, sev, exclude)


def _policy(exclude: tuple[str, ...]) -> policy_mod.Policy:
    return dataclasses.replace(policy_mod.load(), exclude_surfaces=exclude)


@settings(max_examples=60, deadline=None)
@given(files=evidence_files(), exclude=st.sampled_from(EXCLUDES),
       phase=st.integers(0, 5))
def test_the_gate_reports_what_the_dict_of_every_case_gives(
        files: list[EvidenceFile], exclude: tuple[str, ...], phase: int) -> None:
    pol = _policy(exclude)
    ref = reference_cases(files)
    res = evaluate(pol, files, phase, platforms=("linux",), today=DAY)
    rules = [(ph.phase, s, r.fail_at) for ph in pol.chain(phase) for r in ph.rates
             for s in r.surfaces]
    assert [(row.phase, row.surface, row.fail_at) for row in res.surfaces] == rules
    for row in res.surfaces:
        assert (row.fixtures, row.failing) == reference_rate(ref, row.surface, row.fail_at,
                                                             exclude)
    nogo = {r.detail["reason_code"]: r.detail["cases"] for r in res.reasons
            if r.code == "policy.nogo_class"}
    assert nogo == reference_nogo(ref)
    checks = {q.name: q for q in res.requirements if q.phase is not None}
    named = {"divergences.classified": reference_code(ref, "unclassified"),
             "replay.side_effect_free": reference_code(ref, "shadow.side_effect"),
             "divergences.no_blocking": [f"{fx}/{sf}" for (fx, sf), c in sorted(ref.items())
                                         if c["worst"] == "blocking"]}
    for r in res.reasons:
        if r.requirement in named and r.code == "policy.check_failed":
            assert r.detail["cases"] == named[r.requirement]
    for name, where in named.items():
        if name in checks:
            assert (checks[name].status == "fail") is bool(where)
    if "baseline.captures" in checks:
        missing = [s for s in pol.baseline_surfaces if not reference_judged(ref, s, exclude)]
        assert (checks["baseline.captures"].status == "missing") is bool(missing)


@settings(max_examples=60, deadline=None)
@given(files=evidence_files(), exclude=st.sampled_from(EXCLUDES), phase=st.integers(0, 5),
       names=st.integers(5, 8))  # messages name 5 cases
def test_a_merge_keeping_a_few_names_gives_the_same_messages_and_actions(
        files: list[EvidenceFile], exclude: tuple[str, ...], phase: int, names: int) -> None:
    """shadow run's ladder keeps the first few case names of each list (rule.NAMES): its
    reasons' messages, requirements and release-manager actions are the full merge's,
    and each list it keeps is the full list's beginning."""
    from shadow.gates import rule

    pol = _policy(exclude)
    full = evaluate(pol, files, phase, platforms=("linux",), today=DAY)
    few = evaluate(pol, files, phase, platforms=("linux",), today=DAY, names=names)
    assert [(r.code, r.requirement, r.message) for r in few.reasons] == \
        [(r.code, r.requirement, r.message) for r in full.reasons]
    assert [rule._action(r.to_wire(), pol) for r in few.reasons] == \
        [rule._action(r.to_wire(), pol) for r in full.reasons]
    for a, b in zip(few.reasons, full.reasons, strict=True):
        if "cases" in b.detail:
            assert b.detail["cases"][:names] == a.detail["cases"]
    assert few.requirements == full.requirements and few.surfaces == full.surfaces


# -- the order of the rows ------------------------------------------------------------------

def _sealed(rows: list[dict[str, Any]]) -> dict[str, Any]:
    doc, _report = seal(make("linux"))
    doc["cases"] = rows
    return evidence.seal(doc)


@pytest.mark.parametrize(("swap", "got"), [
    (lambda rows: rows.insert(4, copy.deepcopy(rows[3])), "the fixture and surface of "
     "/cases/3 again"),
    (lambda rows: rows.__setitem__(slice(3, 5), [rows[4], rows[3]]),
     "a case that sorts before /cases/3"),
])
def test_cases_out_of_order_or_twice_are_refused_with_the_pointer(swap: Any, got: str) -> None:
    rows = copy.deepcopy(seal(make("linux"))[0]["cases"])
    swap(rows)
    doc = _sealed(rows)
    with pytest.raises(InputError) as exc:
        parse(doc, "ev.json")
    assert exc.value.pointer == "/cases/4", str(exc.value)
    assert exc.value.expected == "cases sorted by fixture and surface, each once"
    assert exc.value.got == got and exc.value.source == "ev.json"
    # an EvidenceFile built without parse is refused by the merge all the same
    with pytest.raises(InputError) as exc:
        merge([EvidenceFile("ev.json", doc)])
    assert exc.value.pointer == "/cases/4" and exc.value.got == got


def test_two_files_out_of_order_with_each_other_merge_in_order() -> None:
    one = _file("1", "linux", [case("b", "cli.entry", "minor"), case("d", "cli.entry")])
    two = _file("2", "windows", [case("a", "cli.entry"), case("b", "cli.entry", "major"),
                                 case("c", "cli.entry")])
    got = list(merged_cases([one, two]))
    assert [(c["fixture"], c["worst"], sorted(c["platforms"])) for c in got] == [
        ("a", "clean", ["windows"]), ("b", "major", ["linux", "windows"]),
        ("c", "clean", ["windows"]), ("d", "clean", ["linux"])]


# -- any sequence, iterated once --------------------------------------------------------------

class Rows(Sequence[Mapping[str, Any]]):
    """A sequence of case rows that is not a list, counting how it is read."""

    def __init__(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self._rows = list(rows)
        self.iterations = 0
        self.lookups = 0

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, i: int) -> Mapping[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Mapping[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        self.lookups += 1
        return self._rows[i]

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        self.iterations += 1
        return iter(self._rows)


def _digest_of_any_sequence(monkeypatch: pytest.MonkeyPatch) -> None:
    # json.dumps serialises lists only: the digest of a disk-backed sequence is the spliced
    # writer's (ADR 0017, step 3); here it is the digest of the same rows as a list
    def digest(doc: Mapping[str, Any]) -> str:
        return evidence.evidence_digest({**doc, "cases": list(doc["cases"])})

    monkeypatch.setattr(merge_mod, "evidence_digest", digest)


def test_a_sequence_that_is_not_a_list_is_accepted_as_cases(
        monkeypatch: pytest.MonkeyPatch) -> None:
    docs = []
    for platform in ("linux", "windows", "macos"):
        d = make(platform)
        d["cases"][0] = case("cli-00", "cli.entry", "blocking", ("tool_pair.split",),
                             {"tool_pair.split": 1})
        d["cases"][1] = case("cli-01", "cli.entry", "minor", by_code={"unclassified": 1})
        docs.append(seal(d)[0])
    want = [evaluate(policy_mod.load(), [parse(d, f"{i}") for i, d in enumerate(docs)], n,
                     today=DAY).to_wire() for n in range(6)]
    assert want[0]["verdict"] == "NO-GO"
    _digest_of_any_sequence(monkeypatch)
    files = [parse({**d, "cases": Rows(d["cases"])}, f"{i}") for i, d in enumerate(docs)]
    assert all(isinstance(f.doc["cases"], Rows) for f in files)
    got = [evaluate(policy_mod.load(), files, n, today=DAY).to_wire() for n in range(6)]
    assert got == want
    for bad in ("cases", b"cases", {"0": {}}):
        with pytest.raises(InputError) as exc:
            parse({**docs[0], "cases": bad}, "ev.json")
        assert exc.value.pointer == "/cases" and exc.value.expected == "an array"


def test_the_merge_reads_each_files_cases_once() -> None:
    files = []
    for i, platform in enumerate(("linux", "windows", "macos")):
        doc = seal(make(platform))[0]
        doc["cases"] = Rows(doc["cases"])
        files.append(EvidenceFile(f"{i}", doc))
    merged = merge(files)
    assert [f.doc["cases"].iterations for f in files] == [1, 1, 1]
    assert merged.stats.judged("cli") == 12
    for n in range(6):  # one pass per gate evaluation, however many requirements it has
        evaluate(policy_mod.load(), files, n, today=DAY)
        assert [(f.doc["cases"].iterations, f.doc["cases"].lookups) for f in files] == \
            [(n + 2, 0)] * 3
