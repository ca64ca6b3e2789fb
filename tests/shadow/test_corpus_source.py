"""Corpus sources (shadow/corpus_source.py): folders, archives and shard listings read
lazily, one scenario at a time, with the folder's results; unsafe archives fail closed."""

from __future__ import annotations

import gzip
import inspect
import io
import json
import os
import shutil
import stat
import sys
import tarfile
import tempfile
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shadow import corpus_archive as ca
from shadow import corpus_source as cs
from shadow.corpus_source import Unit, open_source
from shadow.errors import FixtureError, InputError
from shadow.fixtures import (
    Corpus,
    corpus_from_source,
    load_corpus,
    load_scenario,
    scenario_from_files,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
SMALL = ("short-session", "pending-approval")
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file types")


def _files(folder: Path, arc: str = "") -> Iterator[tuple[str, Path]]:
    """(archive name, path) of every file under ``folder``, sorted."""
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            yield arc + p.relative_to(folder).as_posix(), p


def _tar(dst: Path, members: list[tuple[str, Path]], mode: str = "w") -> Path:
    with tarfile.open(dst, mode) as t:
        for name, p in members:
            t.add(p, arcname=name, recursive=False)
    return dst


def _zip(dst: Path, members: list[tuple[str, Path]]) -> Path:
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as z:
        for name, p in members:
            z.write(p, name)
    return dst


def _small(tmp_path: Path, names: tuple[str, ...] = SMALL) -> Path:
    dst = tmp_path / "small"
    dst.mkdir(parents=True)
    for n in names:
        shutil.copytree(FIXTURES / n, dst / n)
    return dst


def _same(a: Corpus, b: Corpus) -> None:
    assert a.digest == b.digest
    assert [(s.name, s.digest) for s in a.scenarios] == [(s.name, s.digest) for s in b.scenarios]
    assert [str(q) for q in a.quarantined] == [str(q) for q in b.quarantined]


# =========================================================================== same results


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bundled corpus as a tar, a tar.gz (in a wrapping folder), a zip, a zip under
    ``wrap/legacy-captures/`` and a 3-shard listing (tar.gz, folder, zip)."""
    d = tmp_path_factory.mktemp("packed")
    every = list(_files(FIXTURES))
    out = {
        "tar": _tar(d / "corpus.tar", [("./" + n, p) for n, p in every]),
        "tar.gz": _tar(d / "corpus.tgz", [("corpus/" + n, p) for n, p in every], "w:gz"),
        "zip": _zip(d / "corpus.zip", every),
        "zip-nested": _zip(d / "nested.zip", [("wrap/legacy-captures/" + n, p)
                                              for n, p in every]),
    }
    names = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
    thirds = [names[0::3], names[1::3], names[2::3]]
    shards = d / "shards"
    shards.mkdir()
    _tar(shards / "part-1.tar.gz", [(n, p) for n, p in every if n.split("/")[0] in thirds[0]
                                    or "/" not in n], "w:gz")
    for n, p in every:
        if n.split("/")[0] in thirds[1]:
            (shards / "part-2" / n).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, shards / "part-2" / n)
    _zip(shards / "part-3.zip", [(n, p) for n, p in every if n.split("/")[0] in thirds[2]])
    listing = shards / "corpus.json"
    listing.write_text(json.dumps({"format": cs.SHARDS_FORMAT,
                                   "shards": ["part-1.tar.gz", "part-2/", "part-3.zip"]}))
    out["shards"] = listing
    return out


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "zip", "zip-nested", "shards"])
def test_a_packed_corpus_loads_as_the_folder(packed: dict[str, Path], kind: str) -> None:
    folder = load_corpus(FIXTURES)
    assert len(folder.scenarios) > 70 and folder.quarantined == ()
    _same(folder, load_corpus(packed[kind]))
    only = ["short-session", "pending-approval", "no-such"]
    _same(load_corpus(FIXTURES, only=only), load_corpus(packed[kind], only=only))
    with open_source(packed[kind]) as src:
        assert src.count() == len(folder.scenarios) and src.problems() == []
        assert src.label == str(packed[kind])
        names = [n for _, n in src.metadata_names()]
        assert "MANIFEST.json" in names
        manifest = src.metadata("MANIFEST.json")
        assert manifest == (FIXTURES / "MANIFEST.json").read_bytes()


def test_shards_keep_their_origin(packed: dict[str, Path]) -> None:
    with open_source(packed["shards"]) as src:
        origins = {u.origin for u in src.units()}
        assert origins == {"part-1.tar.gz", "part-2/", "part-3.zip"}
        files = src.metadata_files()
        assert [(o, n) for o, n, _ in files if n == "MANIFEST.json"] == [
            ("part-1.tar.gz", "MANIFEST.json")]
        assert src.metadata("MANIFEST.json", "part-3.zip") is None


def test_a_unit_holds_the_scenario_files_sorted(packed: dict[str, Path]) -> None:
    with open_source(packed["zip"]) as src:
        unit = next(u for u in src.units({"short-session"}))
    assert unit.name == "short-session" and unit.error is None
    assert [n for n, _ in unit.files] == sorted(
        p.name for p in (FIXTURES / "short-session").iterdir() if p.suffix == ".json")
    assert dict(unit.files)["input.json"] == (
        FIXTURES / "short-session" / "input.json").read_bytes()
    assert unit.origin == str(packed["zip"])
    with open_source(FIXTURES) as src:
        (funit,) = src.units({"short-session"})
    assert funit.files == unit.files and funit.origin == ""


def test_scenario_from_files_is_load_scenario() -> None:
    sdir = FIXTURES / "pending-approval"
    files = [(p.name, p.read_bytes()) for p in sdir.iterdir() if p.suffix == ".json"]
    assert scenario_from_files("pending-approval", files[::-1]) == load_scenario(sdir, FIXTURES)
    with pytest.raises(FixtureError) as err:
        scenario_from_files("pending-approval", [*files, files[0]])
    assert err.value.got == "two files of that name"
    with pytest.raises(FixtureError) as err:
        scenario_from_files("pending-approval", [f for f in files if f[0] != "input.json"])
    assert err.value.source == "pending-approval/input.json" and err.value.got == "no such file"


def test_a_folder_with_legacy_captures_is_read_there(tmp_path: Path) -> None:
    small = _small(tmp_path)
    outer = tmp_path / "outer"
    outer.mkdir()
    shutil.move(small, outer / "legacy-captures")
    (outer / "README").write_text("about")
    with open_source(outer) as src:
        assert src.root == str(outer / "legacy-captures") and src.label == str(outer)
        assert src.count() == 2
    corpus = load_corpus(outer)
    assert [s.name for s in corpus.scenarios] == sorted(SMALL)
    assert corpus.root == str(outer / "legacy-captures")


def test_a_single_scenario_archive_is_one_scenario(tmp_path: Path) -> None:
    one = _zip(tmp_path / "one.zip", list(_files(FIXTURES / "short-session",
                                                 "short-session/")))
    assert [s.name for s in load_corpus(one).scenarios] == ["short-session"]
    flat = _zip(tmp_path / "flat.zip", list(_files(FIXTURES / "short-session")))
    with pytest.raises(InputError) as err:
        load_corpus(flat)
    assert "one scenario folder" in err.value.got
    with open_source(flat) as src, open_source(one) as ok:
        empty = src.nothing_to_judge()
        assert empty is not None and str(empty) == str(err.value)
        assert ok.nothing_to_judge() is None


def test_a_tar_with_interleaved_scenarios_reads_each_whole(tmp_path: Path) -> None:
    small = _small(tmp_path)
    members = list(_files(small))
    interleaved = sorted(members, key=lambda m: (m[0].split("/")[1], m[0]))
    assert interleaved[0][0].split("/")[0] != interleaved[1][0].split("/")[0]
    _same(load_corpus(small), load_corpus(_tar(tmp_path / "mixed.tar.gz", interleaved, "w:gz")))


class _Rewinds(io.RawIOBase):
    """A file that counts the seeks that go back (a gzip stream decompressing again)."""

    def __init__(self, f: io.BufferedReader) -> None:
        self.f, self.back = f, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        return self.f.readinto(b)

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence == 0 and pos < self.f.tell():
            self.back += 1
        return self.f.seek(pos, whence)

    def tell(self) -> int:
        return self.f.tell()

    def close(self) -> None:
        self.f.close()
        super().close()


def test_a_sorted_tar_gz_is_read_without_going_back(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # `tar czf` of sorted names: cli.*/desktop.* before input.json in every scenario
    names = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())[:20]
    arc = _tar(tmp_path / "c.tgz", [(n, p) for n, p in _files(FIXTURES)
                                    if n.split("/")[0] in names or "/" not in n], "w:gz")
    opened: list[_Rewinds] = []
    real = ca._open_regular

    def counting(path: Path) -> IO[bytes]:
        opened.append(_Rewinds(real(path)))  # type: ignore[arg-type]
        return io.BufferedReader(opened[-1])  # type: ignore[return-value]

    monkeypatch.setattr(ca, "_open_regular", counting)
    with open_source(arc) as src:
        opened[0].back = 0  # opening: tarfile's probing and the header pass
        corpus = corpus_from_source(src)
        assert opened[0].back == 0
    assert len(corpus.scenarios) == 20
    with open_source(arc) as src:  # interleaved scenarios: still one forward pass
        opened[-1].back = 0
        assert [u.name for u in src.units()] == names
        assert opened[-1].back == 0
    mixed = sorted(_files(_small(tmp_path)), key=lambda m: (m[0].split("/")[1], m[0]))
    with open_source(_tar(tmp_path / "mixed.tgz", mixed, "w:gz")) as src:
        opened[-1].back = 0
        units = list(src.units())
        assert opened[-1].back == 0
    _same(load_corpus(_small(tmp_path / "again")), load_corpus(tmp_path / "mixed.tgz"))
    assert {u.name for u in units} == set(SMALL) and all(u.error is None for u in units)


def test_a_tar_whose_end_is_damaged_is_closed(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    arc = _tar(tmp_path / "c.tar", list(_files(_small(tmp_path))))
    arc.write_bytes(arc.read_bytes()[:-2048] + b"junk" * 512)
    closed: list[bool] = []
    real = tarfile.TarFile.close

    def spy(self: tarfile.TarFile) -> None:
        closed.append(True)
        real(self)

    monkeypatch.setattr(tarfile.TarFile, "close", spy)
    with pytest.raises(InputError, match="unreadable data"):
        open_source(arc)
    assert closed


# =========================================================================== laziness


def test_units_is_a_generator_reading_one_scenario_at_a_time(
        packed: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    real = zipfile.ZipFile.open

    def spy(self: zipfile.ZipFile, name: str | zipfile.ZipInfo, *a: object,
            **k: object) -> object:
        reads.append(name.filename if isinstance(name, zipfile.ZipInfo) else name)
        return real(self, name, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    with open_source(packed["zip"]) as src:
        assert src.count() == len(load_corpus(FIXTURES).scenarios)
        assert reads == []  # counting lists the central directory only
        units = src.units()
        assert inspect.isgenerator(units)
        assert reads == []
        first = next(units)
        assert {r.split("/")[0] for r in reads} == {first.name}
        second = next(units)
        assert {r.split("/")[0] for r in reads} == {first.name, second.name}
        assert first.name < second.name


def test_tar_count_reads_headers_only(packed: dict[str, Path],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a: object) -> bytes:
        raise AssertionError("a body was read")

    monkeypatch.setattr(ca.TarSource, "_read", refuse)
    monkeypatch.setattr(tarfile.TarFile, "extractfile", refuse)
    with open_source(packed["tar"]) as src:
        assert src.count() == len(load_corpus(FIXTURES).scenarios)
        assert inspect.isgenerator(src.units())


def test_a_folder_is_read_one_scenario_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from shadow import fixtures

    read: list[str] = []
    real = fixtures.read_scenario_folder

    def spy(sdir: Path, sname: str) -> list[tuple[str, bytes]]:
        read.append(sname)
        return real(sdir, sname)

    monkeypatch.setattr(cs, "read_scenario_folder", spy)
    with open_source(FIXTURES) as src:
        units = src.units()
        assert read == []
        next(units)
        assert len(read) == 1


# =========================================================================== unsafe members


def _tarinfo(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"",
             link: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname, info.mode = kind, len(data), link, 0o644
    return info, data


def _unsafe_tar(tmp_path: Path, extra: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    dst = tmp_path / "unsafe.tar"
    with tarfile.open(dst, "w") as t:
        for name, p in _files(_small(tmp_path)):
            t.add(p, arcname=name)
        for info, data in extra:
            t.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return dst


def _unsafe_zip(tmp_path: Path, extra: list[tuple[zipfile.ZipInfo | str, bytes]]) -> Path:
    dst = tmp_path / "unsafe.zip"
    with zipfile.ZipFile(dst, "w") as z:
        for name, p in _files(_small(tmp_path)):
            z.write(p, name)
        for info, data in extra:
            z.writestr(info, data)
    return dst


def _symlink_zipinfo(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


CAP = b'{"format": "legacy-capture/v1"}'
#: (case, members added to short-session + pending-approval, the quarantined source, got)
TAR_CASES: list[tuple[str, Callable[[], list[tuple[tarfile.TarInfo, bytes]]], str, str]] = [
    ("dot-dot-top", lambda: [_tarinfo("../evil.json", data=CAP)], "../evil.json",
     "a '..' component"),
    ("dot-dot-in-scenario", lambda: [_tarinfo("short-session/../../evil.json", data=CAP)],
     "short-session/../../evil.json", "a '..' component"),
    ("absolute", lambda: [_tarinfo("/tmp/evil.json", data=CAP)], "/tmp/evil.json",
     "an absolute name"),
    ("backslash", lambda: [_tarinfo("short-session/..\\evil.json", data=CAP)],
     "short-session/..\\evil.json", "a backslash in the name"),
    ("drive", lambda: [_tarinfo("C:/evil.json", data=CAP)], "C:/evil.json",
     "a drive letter"),
    ("symlink", lambda: [_tarinfo("short-session/cli.link.json", tarfile.SYMTYPE,
                                  link="/etc/passwd")],
     "short-session/cli.link.json", "a symlink member"),
    ("hardlink", lambda: [_tarinfo("short-session/cli.hard.json", tarfile.LNKTYPE,
                                   link="pending-approval/input.json")],
     "short-session/cli.hard.json", "a hard link member"),
    ("device", lambda: [_tarinfo("pending-approval/zero.json", tarfile.CHRTYPE)],
     "pending-approval/zero.json", "a device member"),
    ("fifo", lambda: [_tarinfo("pending-approval/pipe", tarfile.FIFOTYPE)],
     "pending-approval/pipe", "a FIFO member"),
    ("top-symlink", lambda: [_tarinfo("elsewhere", tarfile.SYMTYPE, link="/")],
     "elsewhere", "a symlink member"),
    ("nested", lambda: [_tarinfo("short-session/deeper/cli.compress.json", data=CAP)],
     "short-session/deeper", "a folder"),
    ("subfolder", lambda: [_tarinfo("short-session/sub", tarfile.DIRTYPE)],
     "short-session/sub", "a folder"),
    ("upper-case", lambda: [_tarinfo("pending-approval/cli.compress.JSON", data=CAP)],
     "pending-approval/cli.compress.JSON", "another spelling of .json"),
    ("duplicate", lambda: [_tarinfo("short-session/input.json", data=b"{}")],
     "short-session/input.json", "two members of that name"),
]


def _check_quarantined(corpus: Corpus, source: str, got: str) -> None:
    hit = [q for q in corpus.quarantined if q.source == source]
    assert hit, [str(q) for q in corpus.quarantined]
    assert got in hit[0].got
    affected = source.split("/")[0]
    assert {s.name for s in corpus.scenarios} == set(SMALL) - {affected}


@pytest.mark.parametrize(("case", "extra", "source", "got"), TAR_CASES,
                         ids=[c[0] for c in TAR_CASES])
def test_unsafe_tar_members_fail_closed(tmp_path: Path, case: str,
                                        extra: Callable[[], list[tuple[tarfile.TarInfo,
                                                                       bytes]]],
                                        source: str, got: str) -> None:
    archive = _unsafe_tar(tmp_path, extra())
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    corpus = load_corpus(archive)
    _check_quarantined(corpus, source, got)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing
    assert not Path("/tmp/evil.json").exists()  # ever extracted


ZIP_CASES: list[tuple[str, list[tuple[zipfile.ZipInfo | str, bytes]], str, str]] = [
    ("dot-dot", [("../../evil.json", CAP)], "../../evil.json", "a '..' component"),
    ("absolute", [("/evil/input.json", CAP)], "/evil/input.json", "an absolute name"),
    ("backslash", [("pending-approval\\input.json", CAP)], "pending-approval\\input.json",
     "a backslash in the name"),
    ("drive", [("D:evil.json", CAP)], "D:evil.json", "a drive letter"),
    ("symlink", [(_symlink_zipinfo("short-session/cli.link.json"), b"/etc/passwd")],
     "short-session/cli.link.json", "a symlink member"),
    ("nested", [("pending-approval/a/b/c.json", CAP)], "pending-approval/a", "a folder"),
    ("empty-component", [("short-session//x.json", CAP)], "short-session//x.json",
     "an empty or '.' component"),
]


@pytest.mark.parametrize(("case", "extra", "source", "got"), ZIP_CASES,
                         ids=[c[0] for c in ZIP_CASES])
def test_unsafe_zip_members_fail_closed(tmp_path: Path, case: str,
                                        extra: list[tuple[zipfile.ZipInfo | str, bytes]],
                                        source: str, got: str) -> None:
    corpus = load_corpus(_unsafe_zip(tmp_path, extra))
    if source.startswith(SMALL):
        _check_quarantined(corpus, source, got)
    else:  # belongs to no scenario: a top-level problem; both scenarios load
        (q,) = corpus.quarantined
        assert (q.source, q.got) == (source, got)
        assert {s.name for s in corpus.scenarios} == set(SMALL)


def test_hidden_members_are_ignored(tmp_path: Path) -> None:
    archive = _unsafe_zip(tmp_path, [(".git/config", b"x"), ("short-session/.swp.json", b"x"),
                                     (".hidden-scenario/input.json", b"x"),
                                     ("short-session/.cache/x.json", b"x")])
    _same(load_corpus(_small(tmp_path / "f")), load_corpus(archive))


def test_a_duplicate_zip_member_quarantines_its_scenario(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate it writes
        archive = _unsafe_zip(tmp_path, [("pending-approval/input.json", b"{}")])
    _check_quarantined(load_corpus(archive), "pending-approval/input.json",
                       "two members of that name")


def test_a_member_over_the_limit_is_refused_unread(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    archive = _unsafe_zip(tmp_path, [("short-session/cli.big.json", b"x" * 5000),
                                     ("BIG.md", b"x" * 5000)])
    monkeypatch.setattr(ca, "MAX_MEMBER_BYTES", 4096)
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda *a, **k: pytest.fail("read"))
    with open_source(archive) as src:
        unit = next(src.units({"short-session"}))
        assert unit.error is not None and unit.error.source == "short-session/cli.big.json"
        assert unit.error.got == "5000 bytes" and "at most 4096 bytes" in unit.error.expected
        (big,) = src.problems()
        assert big.source == "BIG.md" and big.got == "5000 bytes"


def test_a_scenario_over_the_total_limit_is_refused(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    archive = _unsafe_zip(tmp_path, [])
    monkeypatch.setattr(ca, "MAX_UNIT_BYTES", 1000)
    corpus = load_corpus(archive)
    assert corpus.scenarios == ()
    assert {q.source for q in corpus.quarantined} == {f"{n}/input.json" for n in SMALL}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(st.text(alphabet="ab./\\:C-\0", min_size=0, max_size=12), max_size=6))
def test_any_member_names_never_crash(names: list[str]) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of a duplicate name it writes
        for name, p in _files(FIXTURES / "short-session", "short-session/"):
            z.write(p, name)
        for n in names:
            z.writestr(zipfile.ZipInfo(n or "x"), b"{}")

    with tempfile.TemporaryDirectory(prefix="h2-") as d:
        path = Path(d) / "any.zip"
        path.write_bytes(buf.getvalue())
        try:
            corpus = load_corpus(path)
        except InputError:
            return
        assert all(isinstance(q, FixtureError) for q in corpus.quarantined)
        assert sorted(os.listdir(d)) == ["any.zip"]


# =========================================================================== damage


def test_a_truncated_tar_gz_is_an_input_error(tmp_path: Path, packed: dict[str, Path]) -> None:
    data = packed["tar.gz"].read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError) as err:
        load_corpus(cut)
    assert err.value.source == str(cut)
    assert "damaged or truncated after member corpus/" in err.value.got


def test_a_tar_cut_between_members_is_an_input_error(tmp_path: Path) -> None:
    full = _tar(tmp_path / "full.tar", list(_files(_small(tmp_path))))
    data = full.read_bytes()
    with tarfile.open(full) as t:
        second = t.getmembers()[1]
    cut = tmp_path / "cut.tar"
    cut.write_bytes(data[: second.offset])  # a header boundary: tarfile would stop quietly
    with pytest.raises(InputError) as err:
        load_corpus(cut)
    assert err.value.got.startswith("a truncated archive after member ")
    garbage = tmp_path / "garbage.tar"
    garbage.write_bytes(data[: second.offset] + b"\x01" * 512 + data[second.offset:])
    with pytest.raises(InputError) as err:
        load_corpus(garbage)
    assert err.value.got.startswith("unreadable data after member ")


def test_not_an_archive_is_an_input_error(tmp_path: Path) -> None:
    for name in ("x.zip", "x.tar", "x.tgz"):
        (tmp_path / name).write_bytes(b"plain text, not an archive" * 40)
        with pytest.raises(InputError) as err:
            open_source(tmp_path / name)
        assert err.value.source == str(tmp_path / name)
        assert "\n" not in str(err.value)  # one line (tarfile's own message lists methods)
    gz = tmp_path / "g.tar.gz"
    gz.write_bytes(gzip.compress(b"not a tar" * 100))
    with pytest.raises(InputError):
        load_corpus(gz)


def test_a_damaged_zip_member_quarantines_its_scenario(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "c.zip", list(_files(_small(tmp_path))))
    with zipfile.ZipFile(archive) as z:
        info = z.getinfo("pending-approval/input.json")
    data = bytearray(archive.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for i in range(start, start + info.compress_size):
        data[i] ^= 0x5A
    archive.write_bytes(bytes(data))
    corpus = load_corpus(archive)
    assert [s.name for s in corpus.scenarios] == ["short-session"]
    (q,) = corpus.quarantined
    assert q.source == "pending-approval/input.json"
    assert q.got.startswith(f"a damaged member of {archive} (")


def test_missing_path_and_unknown_kind(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        open_source(tmp_path / "missing")
    assert err.value.got == "no such folder or file" and ".zip" in err.value.expected
    (tmp_path / "c.rar").write_bytes(b"x")
    with pytest.raises(InputError) as err:
        open_source(tmp_path / "c.rar")
    assert err.value.got == "a file named c.rar"


@posix_only
def test_a_fifo_is_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "c.zip"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as err:
        open_source(fifo)
    assert err.value.got == "a FIFO"


def test_a_manifest_in_an_archive_is_checked(tmp_path: Path) -> None:
    small = _small(tmp_path)
    manifest = json.loads((FIXTURES / "MANIFEST.json").read_text(encoding="utf-8"))
    manifest["scenarios"] = [s for s in manifest["scenarios"] if s["id"] in SMALL]
    (small / "MANIFEST.json").write_text(json.dumps(manifest))
    listed = manifest["scenarios"][0]["surfaces"][0]["file"]
    (small / manifest["scenarios"][0]["id"] / listed).unlink()
    folder = load_corpus(small)
    assert [q.got for q in folder.quarantined] == ["no such file"]
    archive = _zip(tmp_path / "c.zip", list(_files(small)))
    archived = load_corpus(archive)
    assert archived.digest == folder.digest
    ((f,), (a,)) = folder.quarantined, archived.quarantined
    assert (a.source, a.pointer, a.got) == (f.source, f.pointer, f.got)
    assert f.expected.startswith("the capture MANIFEST.json lists (/scenarios/0/surfaces/")
    assert a.expected == f.expected.replace("MANIFEST.json", f"MANIFEST.json of {archive}")


# =========================================================================== listings


def _listing(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(doc))
    return path


def test_listing_errors_name_the_pointer(tmp_path: Path) -> None:
    small = _small(tmp_path)
    _zip(tmp_path / "a.zip", list(_files(small)))
    (tmp_path / "inner.json").write_text("{}")
    (tmp_path / "x.rar").write_text("x")
    cases: list[tuple[object, str, str]] = [
        ({"format": cs.SHARDS_FORMAT, "shards": ["a.zip", "missing.tar.gz"]}, "/shards/1",
         "no such folder or file"),
        ({"format": cs.SHARDS_FORMAT, "shards": ["a.zip", "inner.json"]}, "/shards/1",
         "a shard listing"),
        ({"format": cs.SHARDS_FORMAT, "shards": ["small", "x.rar"]}, "/shards/1",
         "a file named x.rar"),
        ({"format": cs.SHARDS_FORMAT, "shards": ["a.zip", "./a.zip"]}, "/shards/1",
         "the shard of /shards/0"),
        ({"format": cs.SHARDS_FORMAT, "shards": ["a.zip", 3]}, "/shards/1", "a number"),
        ({"format": cs.SHARDS_FORMAT, "shards": ["a.zip", str(tmp_path / "small")]},
         "/shards/1", "an absolute path"),
        ({"format": "shadow-corpus-shards/v9", "shards": ["a.zip"]}, "/format",
         "a string of 23 characters"),
        ({"shards": ["a.zip"]}, "/format", "nothing"),
        ({"format": cs.SHARDS_FORMAT, "shards": []}, "/shards", "an array of 0 items"),
        ({"format": cs.SHARDS_FORMAT, "shards": ["a.zip"], "more": 1}, "/more",
         "another field"),
        ([], "", "another value"),
    ]
    for doc, pointer, got in cases:
        with pytest.raises(InputError) as err:
            load_corpus(_listing(tmp_path, doc))
        assert (err.value.source, err.value.pointer, err.value.got) == (
            str(tmp_path / "corpus.json"), pointer, got), doc
    (tmp_path / "corpus.json").write_text("{ broken")
    with pytest.raises(InputError) as err:
        load_corpus(tmp_path / "corpus.json")
    assert err.value.expected == "well-formed JSON"


def test_a_scenario_in_two_shards_is_quarantined_in_the_second(tmp_path: Path) -> None:
    small = _small(tmp_path)
    _zip(tmp_path / "a.zip", list(_files(small)))
    _tar(tmp_path / "b.tar", list(_files(small / "short-session", "short-session/")))
    listing = _listing(tmp_path, {"format": cs.SHARDS_FORMAT, "shards": ["a.zip", "b.tar"]})
    with open_source(listing) as src:
        units = [(u.name, u.origin) for u in src.units()]
    assert units.count(("short-session", "a.zip")) == 1
    assert units.count(("short-session", "b.tar")) == 1
    corpus = load_corpus(listing)
    assert [s.name for s in corpus.scenarios] == sorted(SMALL)
    (q,) = corpus.quarantined
    assert q.source == "short-session/input.json" and q.got == "also in a.zip"


def test_shard_problems_say_which_shard(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _unsafe_zip(tmp_path / "a", [("../evil.json", b"{}")])
    _small(tmp_path / "b")
    listing = _listing(tmp_path, {"format": cs.SHARDS_FORMAT,
                                  "shards": ["a/unsafe.zip", "b/small"]})
    with open_source(listing) as src:
        (p,) = src.problems()
        assert p.got == "a '..' component (in a/unsafe.zip)"
        assert src.count() == 4
        assert all(isinstance(u, Unit) and u.error is None for u in src.units())
