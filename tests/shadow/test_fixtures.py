"""Fixture loading: the bundled captures validate; bad files are typed and quarantined."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from shadow.errors import FixtureError, InputError
from shadow.fixtures import load_corpus

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


def test_bundled_captures_all_load() -> None:
    corpus = load_corpus(FIXTURES)
    assert corpus.quarantined == ()
    manifest = json.loads((FIXTURES / "MANIFEST.json").read_text(encoding="utf-8"))
    assert {s.name for s in corpus.scenarios} == {s["id"] for s in manifest["scenarios"]}
    for s in corpus.scenarios:
        listed = next(m for m in manifest["scenarios"] if m["id"] == s.name)
        assert sorted(c.name + ".json" for c in s.captures) == sorted(
            f["file"] for f in listed["surfaces"]
        )


def test_captures_are_byte_identical_to_shared() -> None:
    """Every original capture is in fixtures/ unchanged; the manifest only grew: the
    original scenarios' entries first, byte for byte the same, then the scenarios
    ``shadow capture`` added (issue 15), with every other manifest field unchanged."""
    shared = ROOT.parent / "shared" / "legacy-captures"
    if not shared.is_dir():
        pytest.skip("../shared is not present (the project never needs it at run time)")
    for path in shared.rglob("*.json"):
        rel = path.relative_to(shared)
        if rel.as_posix() != "MANIFEST.json":
            assert (FIXTURES / rel).read_bytes() == path.read_bytes(), rel
    old = json.loads((shared / "MANIFEST.json").read_text(encoding="utf-8"))
    new = json.loads((FIXTURES / "MANIFEST.json").read_text(encoding="utf-8"))
    assert new["scenarios"][:len(old["scenarios"])] == old["scenarios"]
    assert new["errored"][:len(old["errored"])] == old["errored"]
    assert {k: v for k, v in new.items() if k not in ("scenarios", "errored")} == {
        k: v for k, v in old.items() if k not in ("scenarios", "errored")}
    added = {s["id"] for s in new["scenarios"][len(old["scenarios"]):]}
    assert not added & {s["id"] for s in old["scenarios"]}


def _copy(tmp_path: Path, names: list[str]) -> Path:
    dst = tmp_path / "corpus"
    dst.mkdir()
    for n in names:
        shutil.copytree(FIXTURES / n, dst / n)
    return dst


def test_bad_file_is_quarantined_with_file_and_pointer(tmp_path: Path) -> None:
    root = _copy(tmp_path, ["short-session", "pending-approval"])
    cap = root / "pending-approval" / "cli.compress.json"
    doc = json.loads(cap.read_text(encoding="utf-8"))
    doc["surface"] = "mainframe"
    cap.write_text(json.dumps(doc), encoding="utf-8")
    corpus = load_corpus(root)
    assert [s.name for s in corpus.scenarios] == ["short-session"]
    (err,) = corpus.quarantined
    assert isinstance(err, FixtureError)
    assert err.source == "pending-approval/cli.compress.json"
    assert err.pointer == "/surface"
    assert "cli" in err.expected


@pytest.mark.parametrize(
    ("mutate", "pointer"),
    [
        (lambda d: d.pop("messages"), "/messages"),
        (lambda d: d["messages"][1].update(role="robot"), "/messages/1/role"),
        (lambda d: d["messages"][1].update(content=5), "/messages/1/content"),
        (lambda d: d.update(format="other/v9"), "/format"),
    ],
)
def test_input_errors_name_pointer(tmp_path: Path, mutate, pointer: str) -> None:
    root = _copy(tmp_path, ["short-session"])
    path = root / "short-session" / "input.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    mutate(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")
    (err,) = load_corpus(root).quarantined
    assert err.source == "short-session/input.json"
    assert err.pointer == pointer


def test_invalid_json_and_bom_are_quarantined(tmp_path: Path) -> None:
    root = _copy(tmp_path, ["short-session", "pending-approval"])
    (root / "short-session" / "cli.compress.json").write_bytes(b"{ not json")
    p = root / "pending-approval" / "input.json"
    p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    corpus = load_corpus(root)
    assert corpus.scenarios == ()
    assert sorted(e.source for e in corpus.quarantined) == [
        "pending-approval/input.json", "short-session/cli.compress.json"]


def test_missing_folder_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        load_corpus(tmp_path / "nope")


def test_digest_is_independent_of_listing_order(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = _copy(tmp_path / "a", ["short-session", "pending-approval"])
    b = _copy(tmp_path / "b", ["pending-approval", "short-session"])
    ca, cb = load_corpus(a), load_corpus(b)
    assert ca.digest == cb.digest
    assert [s.name for s in ca.scenarios] == [s.name for s in cb.scenarios]


def test_every_surface_adapter_has_an_output_shape() -> None:
    from shadow.fixtures import OUTPUT_SHAPES, capture_kind
    from shadow.surfaces import ADAPTERS

    assert set(OUTPUT_SHAPES) == set(ADAPTERS)
    assert capture_kind("cli.compress.raw-wire") == "cli.compress"
    assert capture_kind("cli.compressor") is None and capture_kind("nothing.known") is None


def test_empty_or_single_scenario_folder_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_corpus(tmp_path)
    assert err.value.got == "no scenario folder"
    one = _copy(tmp_path, ["short-session"]) / "short-session"
    with pytest.raises(InputError) as err:
        load_corpus(one)
    assert "one scenario folder" in err.value.got
