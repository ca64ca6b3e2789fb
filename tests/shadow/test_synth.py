"""``shadow synth``: determinism, seed sensitivity, the marker, bad arguments, a corpus
that ``shadow run`` judges whole with the templates' own divergences, and the text
permutation's class preservation (hypothesis)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.canonical.jsjson import js_stringify
from shadow import synth
from shadow.candidate import make_candidate
from shadow.cli import main
from shadow.fixtures import load_corpus
from shadow.replay import replay_fixture

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _write(out: Path, sessions: int, seed: int) -> synth.SynthResult:
    return synth.synth(sessions, seed, out, templates=FIXTURES)


def test_same_sessions_and_seed_write_identical_bytes(tmp_path: Path) -> None:
    _write(tmp_path / "a", 15, 7)
    _write(tmp_path / "b", 15, 7)
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")
    _write(tmp_path / "a", 15, 7)  # an earlier synthetic corpus is replaced
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


def test_another_seed_gives_other_text(tmp_path: Path) -> None:
    t = synth.load_templates(FIXTURES)
    name = "long-zh-session"
    a = dict(synth.session_files(t[name], 1, 1, "x"))
    b = dict(synth.session_files(t[name], 2, 1, "x"))
    assert a["input.json"] != b["input.json"]
    msgs = [json.loads(a["input.json"])["messages"], json.loads(b["input.json"])["messages"]]
    orig = json.loads((FIXTURES / name / "input.json").read_text("utf-8"))["messages"]
    user = next(i for i, m in enumerate(orig) if m["role"] == "user")
    assert len({m[user]["content"] for m in (*msgs, orig)}) == 3
    assert all(len(m[user]["content"]) == len(orig[user]["content"]) for m in msgs)


def test_the_marker_and_the_names(tmp_path: Path) -> None:
    result = _write(tmp_path / "c", 30, 5)
    meta = json.loads((tmp_path / "c" / "SYNTHETIC.json").read_text("utf-8"))
    assert meta == {"format": "shadow-synthetic/v1", "synthetic": True, "seed": 5,
                    "sessions": 30, "templates": meta["templates"]}
    assert sum(meta["templates"].values()) == 30 == result.sessions
    folders = sorted(p.name for p in (tmp_path / "c").iterdir() if p.is_dir())
    assert len(folders) == 30
    for n, folder in enumerate(folders, 1):
        m = re.fullmatch(r"synth-5-(\d{6})-(.+)", folder)
        assert m and int(m.group(1)) == n and m.group(2) == synth.pick(5, n)
        assert m.group(2) in synth.WEIGHTS and m.group(2) not in synth.EXCLUDED
        for f in (tmp_path / "c" / folder).iterdir():
            doc = json.loads(f.read_text("utf-8"))
            assert doc["scenario"] == folder
            if f.name == "input.json":
                assert doc["synthetic"] is True
    assert Counter(re.sub(r"^synth-5-\d+-", "", f) for f in folders) == meta["templates"]


def test_the_corpus_loads_as_synthetic_scenarios(tmp_path: Path) -> None:
    _write(tmp_path / "d", 10, 3)
    corpus = load_corpus(tmp_path / "d")
    assert corpus.quarantined == ()
    assert len(corpus.scenarios) == 10 and all(s.synthetic for s in corpus.scenarios)


def _signature(result: Any, name: str) -> Counter[tuple[Any, ...]]:
    return Counter((kind, d.surface, d.reason_code, d.severity, d.attribution,
                    tuple(sorted(i.replace(name, "@") for i in d.item_ids)))
                   for kind, divs in (("d", result.divergences), ("l", result.legacy_defects))
                   for d in divs)


def test_every_session_is_judged_like_its_template(tmp_path: Path) -> None:
    """Each synthetic session replays with the divergences (and cases) of its template."""
    _write(tmp_path / "e", 24, 11)
    synthetic = load_corpus(tmp_path / "e")
    assert synthetic.quarantined == ()
    templates = {s.name: s for s in load_corpus(FIXTURES).scenarios}
    cand = make_candidate("kernel", None)
    for s in synthetic.scenarios:
        t = templates[re.sub(r"^synth-11-\d+-", "", s.name)]
        got, want = replay_fixture(s, cand), replay_fixture(t, cand)
        assert got.cases == want.cases and got.cases, s.name
        assert _signature(got, s.name) == _signature(want, t.name), s.name


def test_shadow_run_judges_every_session_and_quarantines_none(tmp_path: Path,
                                                              capsys: Any) -> None:
    assert main(["synth", "--sessions", "8", "--seed", "2", "--out", str(tmp_path / "f"),
                 "--templates", str(FIXTURES)]) == 0
    code = main(["run", "--fixtures", str(tmp_path / "f"), "--no-recordings",
                 "--out", str(tmp_path / "r"), "--skip-determinism"])
    assert code in (0, 1)
    report = json.loads((tmp_path / "r" / "report.json").read_text("utf-8"))
    assert report["totals"]["quarantined"] == 0 and report["totals"]["fixtures"] == 8
    assert {c["fixture"] for c in report["cases"]} == {
        p.name for p in (tmp_path / "f").iterdir() if p.is_dir()}


@pytest.mark.parametrize("argv", [
    ["--sessions", "0", "--seed", "1"], ["--sessions", "-3", "--seed", "1"],
    ["--sessions", "2", "--seed", "-1"], ["--sessions", "x", "--seed", "1"],
    ["--seed", "1"], ["--sessions", "2"]])
def test_bad_arguments_exit_2(argv: list[str], tmp_path: Path) -> None:
    assert main(["synth", *argv, "--out", str(tmp_path / "g")]) == 2
    assert not (tmp_path / "g").exists()


def test_out_must_be_new_empty_or_synthetic(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "h"
    other.mkdir()
    (other / "notes.txt").write_text("mine", "utf-8")
    assert main(["synth", "--sessions", "2", "--seed", "1", "--out", str(other),
                 "--templates", str(FIXTURES)]) == 2
    assert [p.name for p in other.iterdir()] == ["notes.txt"]
    err = capsys.readouterr().err  # says what it would replace: a corpus, not a run
    assert "an earlier synthetic corpus's folder" in err and "run's" not in err


@pytest.mark.parametrize(("body", "got"), [
    (b'{"format": ', "well-formed JSON"), (b"\xff{}", "valid UTF-8")])
def test_a_bad_template_file_is_an_input_error(tmp_path: Path, body: bytes, got: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    templates = tmp_path / "t"
    shutil.copytree(FIXTURES, templates)
    bad = templates / "short-session" / "cli.compress.json"
    bad.write_bytes(body)
    assert main(["synth", "--sessions", "2", "--seed", "1", "--out", str(tmp_path / "o"),
                 "--templates", str(templates)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and ": /: expected " + got in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


@pytest.mark.parametrize("where", ["", "short-session", "sub/dir"])
def test_out_inside_templates_is_refused(tmp_path: Path, where: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    templates = tmp_path / "t"
    shutil.copytree(FIXTURES, templates)
    before = sorted(p.relative_to(templates) for p in templates.rglob("*"))
    out = templates / where if where else templates
    assert main(["synth", "--sessions", "2", "--seed", "1", "--out", str(out),
                 "--templates", str(templates)]) == 2
    assert "inside --templates" in capsys.readouterr().err
    assert sorted(p.relative_to(templates) for p in templates.rglob("*")) == before


def test_weights_name_bundled_templates_only() -> None:
    names = {p.name for p in FIXTURES.iterdir() if p.is_dir()}
    assert set(synth.WEIGHTS) <= names
    assert set(synth.WEIGHTS) | set(synth.EXCLUDED) == names
    assert set(synth.VERBATIM) <= set(synth.WEIGHTS)
    assert all(w >= 1 for w in synth.WEIGHTS.values())


#: İ (U+0130) and the Kelvin sign (U+212A) lower-case to ASCII letters: always drawn from
_TEXT = st.text(st.one_of(st.characters(min_codepoint=0, max_codepoint=0x2FF),
                          st.characters(min_codepoint=0x4DF0, max_codepoint=0xA010),
                          st.sampled_from("\u0130\u212a\u0131\u017f\u212b")),
                max_size=60)


def _klass(ch: str) -> str:
    cp = ord(ch)
    if "a" <= ch <= "z":
        return "lower"
    if "A" <= ch <= "Z":
        return "upper"
    if 0x4E00 <= cp <= 0x9FFF:
        return "cjk"
    return ch  # everything else maps to itself


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(1, 10**6), text=_TEXT)
def test_the_permutation_keeps_classes_and_lengths(seed: int, n: int, text: str) -> None:
    table = synth.TextPermutation.for_session(seed, n).table()
    out = text.translate(table)
    assert len(out) == len(text) and len(out.encode("utf-8", "surrogatepass")) == len(
        text.encode("utf-8", "surrogatepass"))
    assert [_klass(c) for c in out] == [_klass(c) for c in text]
    assert out.lower() == text.lower().translate(table)  # case-folding commutes with it


def test_case_folding_commutes_for_the_letters_lower_makes_ascii() -> None:
    for seed, n in ((0, 1), (3, 7), (12345, 99)):
        table = synth.TextPermutation.for_session(seed, n).table()
        for text in ("\u0130", "\u212a", "I\u0130i k\u212aK", "ABC xyz"):
            assert text.translate(table).lower() == text.lower().translate(table)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(1, 10**6))
def test_the_permutation_is_a_bijection(seed: int, n: int) -> None:
    table = synth.TextPermutation.for_session(seed, n).table()
    letters = "abcdefghijklmnopqrstuvwxyz"
    assert sorted(letters.translate(table)) == list(letters)
    cjk = "".join(map(chr, range(0x4E00, 0xA000)))
    assert sorted(cjk.translate(table)) == list(cjk)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=4), inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(value=_JSON, indent=st.sampled_from([None, 2]))
def test_the_fast_dumps_is_json_stringify(value: Any, indent: int | None) -> None:
    assert synth.dumps(value, indent) == js_stringify(value, indent)


def _secrets(messages: list[Any]) -> list[str]:
    from kernel.packets.anticorruption import scan

    return [m["content"][f.start:f.end] for m in messages if isinstance(m.get("content"), str)
            for f in scan(m["content"], trusted=True) if f.category == "secret"]


def test_secret_canaries_survive_verbatim() -> None:
    t = synth.load_templates(FIXTURES)
    for name in ("secrets-in-user-message", "secrets-in-tool-output"):
        orig = json.loads((FIXTURES / name / "input.json").read_text("utf-8"))["messages"]
        doc = json.loads(dict(synth.session_files(t[name], 9, 4, "x"))["input.json"])
        assert _secrets(orig) and _secrets(doc["messages"]) == _secrets(orig)
        assert doc["messages"] != orig  # the rest of the text was permuted
