"""shadow.spill: spill files, and the spliced JSON writers proved equal to json.dumps."""

from __future__ import annotations

import hashlib
import itertools
import json
import operator
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shadow import spill as spill_mod
from shadow.evidence import digest as evidence_digest
from shadow.spill import (
    CHUNK_CHARS,
    Spill,
    dumps_pretty,
    is_spliced,
    iter_canonical,
    sha256_canonical,
    write_pretty,
)

# strings a line-based reader may split on: json.dumps escapes "\n" and "\r", not the others
AWKWARD = ["\u2028", "\u2029", "\x85", "\r", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "é", "日本"]


def pretty(value: Any) -> str:
    return json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False)


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


# --- spliced = whole, for random documents --------------------------------------------------

# codec="utf-8": no lone surrogates, which no UTF-8 document (nor a spill file) can hold
awkward_chars = st.sampled_from([c for c in AWKWARD if len(c) == 1])
texts = st.text(st.characters(codec="utf-8") | awkward_chars, max_size=8)
leaves = (st.none() | st.booleans() | st.integers()
          | st.floats(allow_nan=False, allow_infinity=False) | texts)
documents = st.recursive(
    leaves,
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(texts, kids, max_size=5),
    max_leaves=30,
)
# mostly containers at the top, so that most examples have lists to spill
tops = documents | st.lists(documents, max_size=4) | st.dictionaries(texts, documents, max_size=4)


def wrap(element: Any) -> Any:
    return {"wrapped": [element, "\u2028"]}


def splice(value: Any, data: st.DataObject, folder: Path, counter: itertools.count[int],
           ) -> tuple[Any, Any]:
    """(``value`` with some lists replaced by spills, views or tuples, what that stands for).

    What it stands for is built from the values before they were spilled, so equality also
    proves that a spill gives back exactly what was appended."""
    if isinstance(value, dict):
        pairs = {k: splice(v, data, folder, counter) for k, v in value.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    if not isinstance(value, list):
        return value, value
    kids = [splice(v, data, folder, counter) for v in value]
    spliced = [k[0] for k in kids]
    whole = [k[1] for k in kids]
    if any(is_spliced(k) for k in spliced):  # a spill holds JSON values only
        return spliced, whole
    how = data.draw(st.sampled_from(["list", "tuple", "spill", "view", "wrap"]))
    if how == "list":
        return spliced, whole
    if how == "tuple":
        return tuple(spliced), whole
    spill = Spill.of(folder / f"{next(counter)}.jsonl", spliced)
    if how == "spill":
        return spill, whole
    if how == "view":
        return spill.view(lambda e: e), whole
    return spill.view(wrap), [wrap(e) for e in whole]


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(doc=tops, data=st.data())
def test_spliced_documents_give_the_bytes_of_json_dumps(doc: Any, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        spliced, whole = splice(doc, data, Path(tmp), itertools.count())
        assert dumps_pretty(spliced) == pretty(whole)
        assert b"".join(iter_canonical(spliced)) == canonical(whole)
        assert sha256_canonical(spliced, b"tag/v1") == evidence_digest(whole, b"tag/v1")


# --- the fast path ---------------------------------------------------------------------------


def _no_stream(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the streaming path was taken")


def test_without_a_spill_one_json_dumps_chunk_and_no_streaming(
        monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {"cases": [{"fixture": f"f{i}", "worst": "clean"} for i in range(5000)], "n": 1.5}
    monkeypatch.setattr(spill_mod, "_stream", _no_stream)
    chunks = list(iter_canonical(doc))
    assert chunks == [canonical(doc)]
    assert dumps_pretty(doc) == pretty(doc)
    assert sha256_canonical(doc) == "sha256:" + hashlib.sha256(canonical(doc)).hexdigest()


def test_with_a_spill_the_streaming_path_is_taken(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {"cases": Spill.of(tmp_path / "c.jsonl", [1, 2, 3])}
    assert b"".join(iter_canonical(doc)) == b'{"cases":[1,2,3]}'
    monkeypatch.setattr(spill_mod, "_stream", _no_stream)
    with pytest.raises(AssertionError, match="streaming"):
        list(iter_canonical(doc))
    with pytest.raises(AssertionError, match="streaming"):
        dumps_pretty(doc)


def test_chunks_are_large_not_one_per_element(tmp_path: Path) -> None:
    rows = [{"fixture": f"fixture-{i:05d}", "surface": "ide", "by_code": {"x": i}}
            for i in range(20_000)]
    doc = {"cases": Spill.of(tmp_path / "rows.jsonl", rows), "schema": "v1"}
    chunks = list(iter_canonical(doc))
    total = sum(len(c) for c in chunks)
    assert b"".join(chunks) == canonical({"cases": rows, "schema": "v1"})
    assert len(chunks) <= total // CHUNK_CHARS + 2
    assert max(len(c) for c in chunks) < 2 * CHUNK_CHARS + 1000


# --- Spill semantics ------------------------------------------------------------------------


def test_length_iteration_and_indexing(tmp_path: Path) -> None:
    values = [{"i": i, "s": "x" * i} for i in range(10)]
    s = Spill.of(tmp_path / "deep" / "er" / "s.jsonl", values)
    assert s.closed
    assert len(s) == 10
    assert bool(s)
    assert list(s) == values
    assert list(s) == values  # re-iterable
    assert s[0] == values[0]
    assert s[9] == values[9]
    assert s[-1] == values[-1]
    assert s[-10] == values[0]
    with pytest.raises(IndexError):
        s[10]
    with pytest.raises(IndexError):
        s[-11]
    for sl in [slice(None), slice(2, 5), slice(None, None, 3), slice(-3, None), slice(1, -1, 2),
               slice(None, None, -1), slice(8, 1, -3), slice(-2, -8, -2), slice(5, 2),
               slice(100, 200), slice(None, None, -4)]:
        got = s[sl]
        assert type(got) is list
        assert got == values[sl], sl
    assert list(reversed(s)) == values[::-1]
    assert s.index(values[3]) == 3
    assert s.index(values[3], 2, 5) == 3
    with pytest.raises(ValueError):
        s.index(values[3], 4)
    assert values[4] in s
    assert {"i": 99} not in s
    assert s.count(values[2]) == 1


def test_equality_with_sequences_both_ways(tmp_path: Path) -> None:
    s = Spill.of(tmp_path / "s.jsonl", [1, "a", [2]])
    assert s == [1, "a", [2]]
    # list == Spill: list.__eq__ gives NotImplemented, so Python asks Spill.__eq__
    assert operator.eq([1, "a", [2]], s)
    assert s == (1, "a", [2])
    assert operator.eq((1, "a", [2]), s)
    assert s != [1, "a"]
    assert operator.ne([1, "a", [3]], s)
    assert not operator.eq([1, "a"], s)
    assert s != "1a"
    assert s != 3
    assert s == Spill.of(tmp_path / "t.jsonl", [1, "a", [2]])
    assert s.view(lambda e: e) == s
    assert s.view(str) == ["1", "a", "[2]"]


def test_append_after_close_raises_and_close_is_idempotent(tmp_path: Path) -> None:
    s = Spill(tmp_path / "s.jsonl")
    s.append(1)
    s.close()
    s.close()
    with pytest.raises(ValueError, match="closed"):
        s.append(2)
    with pytest.raises(ValueError, match="closed"):
        s.extend([2])
    assert list(s) == [1]


def test_reading_before_close_sees_every_append(tmp_path: Path) -> None:
    with Spill(tmp_path / "s.jsonl") as s:
        assert not s
        assert list(s) == []
        s.append("a")
        assert list(s) == ["a"]
        s.extend(["b", "c"])
        assert s[-1] == "c"
        assert list(reversed(s)) == ["c", "b", "a"]
        assert dumps_pretty({"x": s}) == pretty({"x": ["a", "b", "c"]})
        s.append("d")
        assert len(s) == 4
        assert s[1:] == ["b", "c", "d"]
    assert s.closed
    assert list(s) == ["a", "b", "c", "d"]


def test_a_value_that_cannot_be_written_leaves_the_spill_as_it_was(tmp_path: Path) -> None:
    with Spill(tmp_path / "s.jsonl") as s:
        s.append("a")
        with pytest.raises(UnicodeEncodeError):
            s.append("lone \ud800 surrogate")
        with pytest.raises(TypeError):
            s.append({"x": object()})
        s.append("b")
    assert len(s) == 2
    assert list(s) == ["a", "b"]


def test_creating_truncates_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("stale\n" * 3, encoding="utf-8")
    assert list(Spill.of(path, [1])) == [1]
    assert path.read_text(encoding="utf-8") == "1\n"


def test_line_separators_inside_strings_round_trip(tmp_path: Path) -> None:
    values = [s + "-" + s for s in AWKWARD] + [{"k\u2028": "\x85"}, "".join(AWKWARD)]
    s = Spill.of(tmp_path / "s.jsonl", values)
    raw = (tmp_path / "s.jsonl").read_bytes()
    assert raw.count(b"\n") == len(values)  # one line each: "\n" and "\r" are escaped
    assert "\u2028".encode() in raw
    assert "\x85".encode() in raw
    assert len(s) == len(values)
    assert list(s) == values
    assert list(reversed(s)) == values[::-1]
    assert s[-1] == values[-1]
    assert dumps_pretty([s]) == pretty([values])
    assert b"".join(iter_canonical(s)) == canonical(values)


def test_a_truncated_file_fails_the_read(tmp_path: Path) -> None:
    s = Spill.of(tmp_path / "s.jsonl", [1, 2, 3])
    (tmp_path / "s.jsonl").write_text("1\n2\n", encoding="utf-8")
    with pytest.raises(OSError, match="2 lines, expected 3"):
        list(s)
    with pytest.raises(OSError, match="2 lines, expected 3"):
        list(reversed(s))


def test_an_empty_spill_renders_as_an_empty_list(tmp_path: Path) -> None:
    s = Spill.of(tmp_path / "e.jsonl", [])
    assert not s
    assert len(s) == 0
    assert s == []
    for doc in [s, {"cases": s}, [s, s], {"a": {"b": [s]}}, s.view(wrap)]:
        whole = json.loads(json.dumps(doc, default=list))
        assert dumps_pretty(doc) == pretty(whole)
        assert b"".join(iter_canonical(doc)) == canonical(whole)
    assert dumps_pretty(s) == "[]"
    assert dumps_pretty({"cases": s}) == '{\n "cases": []\n}'


def test_nested_spill_in_a_dict_in_a_list(tmp_path: Path) -> None:
    rows = [{"id": i, "text": "é\u2028", "tags": ["a", {"b": None}]} for i in range(3)]
    s = Spill.of(tmp_path / "rows.jsonl", rows)
    doc = {"z": 1, "runs": [{"name": "r1", "rows": s, "more": {"k": [1, 2]}}, [], {}],
           "a": {"view": s.view(wrap), "x": [True, None, 0.5]}}
    whole = {"z": 1, "runs": [{"name": "r1", "rows": rows, "more": {"k": [1, 2]}}, [], {}],
             "a": {"view": [wrap(r) for r in rows], "x": [True, None, 0.5]}}
    assert is_spliced(doc)
    assert not is_spliced(whole)
    assert dumps_pretty(doc) == pretty(whole)
    assert b"".join(iter_canonical(doc)) == canonical(whole)


def test_a_view_whose_elements_hold_spills(tmp_path: Path) -> None:
    inner = Spill.of(tmp_path / "inner.jsonl", ["p", "q"])
    outer = Spill.of(tmp_path / "outer.jsonl", [1, 2])
    view = outer.view(lambda e: {"n": e, "rows": inner if e == 2 else []})
    whole = [{"n": 1, "rows": []}, {"n": 2, "rows": ["p", "q"]}]
    doc = {"cases": view}
    assert dumps_pretty(doc) == pretty({"cases": whole})
    assert b"".join(iter_canonical(doc)) == canonical({"cases": whole})
    assert view.view(lambda d: d["n"]) == [1, 2]  # a view of a view


def test_non_string_keys_beside_a_spill_sort_and_convert_as_json_dumps(tmp_path: Path) -> None:
    s = Spill.of(tmp_path / "s.jsonl", [1])
    doc = {10: s, 2: "b", 1.5: None}
    whole = {10: [1], 2: "b", 1.5: None}
    assert dumps_pretty(doc) == pretty(whole)
    assert b"".join(iter_canonical(doc)) == canonical(whole)


def test_write_pretty_into_a_file(tmp_path: Path) -> None:
    rows = [{"i": i} for i in range(100)]
    doc = {"cases": Spill.of(tmp_path / "rows.jsonl", rows)}
    out = tmp_path / "report.json"
    with out.open("w", encoding="utf-8", newline="\n") as fh:
        write_pretty(doc, fh)
        fh.write("\n")
    assert out.read_text(encoding="utf-8") == pretty({"cases": rows}) + "\n"


def test_repr_names_path_and_length_never_contents(tmp_path: Path) -> None:
    s = Spill.of(tmp_path / "s.jsonl", ["secret-body", {"token": "hunter2"}])
    for text in (repr(s), repr(s.view(wrap))):
        assert "s.jsonl" in text
        assert "len=2" in text
        assert "secret" not in text
        assert "hunter2" not in text


def test_a_spill_is_not_a_dict_key(tmp_path: Path) -> None:
    s = Spill.of(tmp_path / "s.jsonl", [])
    with pytest.raises(TypeError):
        hash(s)


# --- memory -----------------------------------------------------------------------------------


def test_a_50k_element_spill_streams_in_bounded_memory(tmp_path: Path) -> None:
    n = 50_000
    with Spill(tmp_path / "big.jsonl") as s:
        for i in range(n):
            s.append({"fixture": f"fixture-{i:06d}", "surface": "ide", "worst": "clean",
                      "by_code": {"c.x": i % 7}})
    size = (tmp_path / "big.jsonl").stat().st_size
    assert size > 4_000_000
    doc = {"cases": s, "schema": "shadow-evidence/v1"}
    tracemalloc.start()
    try:
        count = sum(1 for _ in s)
        h = hashlib.sha256()
        for chunk in iter_canonical(doc):
            h.update(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == n
    assert s[-1]["fixture"] == "fixture-049999"
    assert peak < 1_000_000  # a few chunks, never the ~5 MB of elements
    whole = {"cases": list(s), "schema": "shadow-evidence/v1"}
    assert "sha256:" + h.hexdigest() == evidence_digest(whole)


# --------------------------------------------------------------------------- Stream, Folder


def test_a_stream_is_spliced_as_the_list_it_yields() -> None:
    import shadow.spill as spill_mod

    rows = [{"fixture": f"f{i}", "n": i} for i in range(5)]
    calls: list[int] = []

    def make() -> Any:
        calls.append(1)
        return iter(rows)

    stream = spill_mod.Stream(make, len(rows))
    doc = {"cases": stream, "schema": "v1"}
    assert is_spliced(doc) and len(stream) == 5 and list(stream) == rows
    assert dumps_pretty(doc) == json.dumps({"cases": rows, "schema": "v1"}, sort_keys=True,
                                           indent=1, ensure_ascii=False)
    assert b"".join(iter_canonical(doc)) == canonical({"cases": rows, "schema": "v1"})
    assert len(spill_mod.Stream(make)) == 5  # no length given: one counting pass
    assert repr(spill_mod.Stream(make)) == "Stream(len=?)" and list(reversed(stream)) == \
        rows[::-1]


def test_a_folder_lives_as_long_as_its_last_spill() -> None:
    import gc

    import shadow.spill as spill_mod

    folder = spill_mod.Folder()
    path = folder.path
    sp = folder.spill("cases")
    sp.extend([1, 2, 3])
    sp.close()
    del folder
    gc.collect()
    assert path.is_dir() and list(sp) == [1, 2, 3]  # the spill keeps its folder
    del sp
    gc.collect()
    assert not path.exists()
    other = spill_mod.Folder()
    other.spill("x").close()
    other.cleanup()
    assert not other.path.exists()
