"""Load ``evidence.json`` files from several runs and merge them conservatively.

A path may be a file or a folder (every ``evidence.json`` below it, as CI artifact
downloads lay them out).  Each file is validated (schema, required sections, an
``identity_digest`` that matches its ``identity``); a bad file is an
:class:`~shadow.errors.InputError` (exit 2).  Merging never hides a problem: per
fixture × surface the *worst* severity of any run wins, a check passes only if it
passed everywhere, and a test attached on one platform does not stand in for another.

The per-case rows are never held whole (ADR 0017, step 5): each file's ``cases`` is sorted
by (fixture, surface), each once (:func:`parse` refuses anything else), so
:func:`merged_cases` merges the files' rows in one pass with :func:`heapq.merge`, folding
the rows of one case as they meet, and :func:`reduce_cases` keeps of them only what the
gate reads (:class:`CaseStats`): counts bounded by the vocabulary (surfaces × severities)
and the lists of cases the gate names.
"""

from __future__ import annotations

import fnmatch
import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any, Final

from shadow import codes
from shadow.boundary import load_path
from shadow.errors import InputError
from shadow.evidence import (
    OS_RELEASE_PREFIX,
    PATH_SEP,
    SCHEMA,
    case_summaries,
    evidence_digest,
    identity_digest,
    platform_name,
    results_digest,
    top_surface,
)

_REQUIRED = ("identity", "identity_digest", "environment", "run", "cases", "checks",
             "waivers", "attachments", "evidence_digest")
_CHECK_ORDER = {"fail": 0, "missing": 1, "pass": 2}
_ORDER: Final = "cases sorted by fixture and surface, each once"


@dataclass(frozen=True, slots=True)
class EvidenceFile:
    path: str
    doc: Mapping[str, Any] = field(repr=False)

    @property
    def platform(self) -> str:
        return str(self.doc["environment"].get("platform", "unknown"))

    @property
    def identity(self) -> Mapping[str, Any]:
        return self.doc["identity"]  # type: ignore[no-any-return]

    @property
    def identity_digest(self) -> str:
        return str(self.doc["identity_digest"])

    @property
    def results_digest(self) -> str:
        return str(self.doc["run"].get("results_digest", ""))


def _expand(paths: Iterable[str | Path]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(p.rglob("evidence.json"), key=lambda x: x.as_posix())
            if not found:
                raise InputError(p, "", "a folder holding evidence.json files", "none found")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise InputError(p, "", "an evidence.json file or a folder of them", "no such path")
    return out


def _need(value: Any, kind: type | tuple[type, ...], src: str, ptr: str, what: str) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        got = "null" if value is None else type(value).__name__
        raise InputError(src, ptr, what, got)
    return value


def _in_order(src: str, i: int, prev: tuple[str, str] | None, key: tuple[str, str]) -> None:
    """Row ``i`` of a file's cases comes strictly after row ``i - 1`` (fail closed)."""
    if prev is not None and key <= prev:
        raise InputError(src, f"/cases/{i}", _ORDER,
                         f"the fixture and surface of /cases/{i - 1} again" if key == prev
                         else f"a case that sorts before /cases/{i - 1}")


def _structure(doc: Mapping[str, Any], src: str) -> None:
    """Every field the gate reads has the type it expects (file + JSON pointer if not)."""
    env = _need(doc["environment"], Mapping, src, "/environment", "an object")
    for key in ("platform", "sys_platform", "path_sep"):
        _need(env.get(key), str, src, f"/environment/{key}", "a string")
    run = _need(doc["run"], Mapping, src, "/run", "an object")
    _need(run.get("results_digest"), str, src, "/run/results_digest", "a string")
    totals = _need(run.get("totals", {}), Mapping, src, "/run/totals", "an object")
    _need(totals.get("quarantined", 0), int, src, "/run/totals/quarantined", "an integer")
    prev: tuple[str, str] | None = None
    for i, c in enumerate(doc["cases"]):
        ptr = f"/cases/{i}"
        _need(c, Mapping, src, ptr, "a case object")
        for key in ("fixture", "surface", "worst"):
            _need(c.get(key), str, src, f"{ptr}/{key}", "a string")
        _in_order(src, i, prev, (c["fixture"], c["surface"]))
        prev = (c["fixture"], c["surface"])
        if c["worst"] not in (*codes.SEVERITIES, "clean"):
            raise InputError(src, f"{ptr}/worst", "a severity or 'clean'", "another string")
        for code, n in _need(c.get("by_code", {}), Mapping, src, f"{ptr}/by_code",
                             "an object").items():
            _need(n, int, src, f"{ptr}/by_code/{code}", "an integer")
        for j, code in enumerate(_need(c.get("nogo", []), list, src, f"{ptr}/nogo",
                                       "an array")):
            _need(code, str, src, f"{ptr}/nogo/{j}", "a reason code")
    for name, c in _need(doc["checks"], Mapping, src, "/checks", "an object").items():
        _need(c, Mapping, src, f"/checks/{name}", "an object")
    waivers = _need(doc["waivers"], Mapping, src, "/waivers", "an object")
    for j, w in enumerate(_need(waivers.get("applied", []), list, src, "/waivers/applied",
                                "an array")):
        _need(w, Mapping, src, f"/waivers/applied/{j}", "an object")
    for i, a in enumerate(_need(doc["attachments"], list, src, "/attachments", "an array")):
        _need(a, Mapping, src, f"/attachments/{i}", "an object")
        for j, t in enumerate(_need(a.get("testcases", []), list, src,
                                    f"/attachments/{i}/testcases", "an array")):
            t = _need(t, Mapping, src, f"/attachments/{i}/testcases/{j}", "an object")
            _need(t.get("id"), str, src, f"/attachments/{i}/testcases/{j}/id", "a string")


def parse(doc: Any, src: str, *, crosscheck: bool = True) -> EvidenceFile:
    if not isinstance(doc, Mapping) or doc.get("schema") != SCHEMA:
        raise InputError(src, "/schema", repr(SCHEMA), "another document")
    for key in _REQUIRED:
        if key not in doc:
            raise InputError(src, f"/{key}", f"a required field {key!r}", "nothing")
    if not isinstance(doc["identity"], Mapping):
        raise InputError(src, "/identity", "an object", type(doc["identity"]).__name__)
    if identity_digest(doc["identity"]) != doc["identity_digest"]:
        raise InputError(src, "/identity_digest", "the digest of /identity",
                         "a different value (edited evidence?)")
    # any sequence (a list, or a disk-backed list of rows), never a string
    if not isinstance(doc["cases"], Sequence) or isinstance(doc["cases"],
                                                            (str, bytes, bytearray)):
        raise InputError(src, "/cases", "an array", type(doc["cases"]).__name__)
    _structure(doc, src)
    _need(doc["environment"].get("os_release"), str, src, "/environment/os_release", "a string")
    if evidence_digest(doc) != doc["evidence_digest"]:
        raise InputError(src, "/evidence_digest", "the digest of the whole document",
                         "a different value (edited evidence?)")
    if crosscheck:
        check_label(doc, src)
    return EvidenceFile(src, doc)


def check_label(doc: Mapping[str, Any], src: str) -> None:
    """The platform label agrees with what the run recorded about its machine."""
    env = doc["environment"]
    label = env["platform"]
    if platform_name(env["sys_platform"]) != label:
        raise InputError(src, "/environment/platform",
                         f"the platform the run recorded (sys.platform {env['sys_platform']!r})",
                         f"the label {label!r}")
    if label in PATH_SEP and env["path_sep"] != PATH_SEP[label]:
        raise InputError(src, "/environment/path_sep", f"{PATH_SEP[label]!r} on {label}",
                         repr(env["path_sep"]))
    if label in OS_RELEASE_PREFIX and not env["os_release"].startswith(OS_RELEASE_PREFIX[label]):
        raise InputError(src, "/environment/os_release",
                         f"an OS release of {label} ({' or '.join(OS_RELEASE_PREFIX[label])}…)",
                         "another operating system's")
    compiler = env.get("python_compiler")
    if isinstance(compiler, str) and label in PATH_SEP and \
            compiler.startswith("MSC") != (label == "windows"):
        raise InputError(src, "/environment/python_compiler",
                         f"a Python built for {label}", f"one built by {compiler.split()[0]}")


def _without_label(doc: Mapping[str, Any]) -> str:
    """Digest of the evidence but its platform label: two files equal here are one run."""
    body = {k: v for k, v in doc.items() if k != "evidence_digest"}
    body["environment"] = {k: v for k, v in doc["environment"].items() if k != "platform"}
    return identity_digest(body)


def check_report(f: EvidenceFile, path: Path) -> None:
    """The report.json beside an evidence.json must be the one it summarises: its
    divergences, defects and cases give the evidence's results digest and per-case rows."""
    from shadow.reports import load_report

    rpath = path.parent / "report.json"
    if not rpath.is_file():
        raise InputError(rpath, "", "the run's report.json beside its evidence.json (the gate "
                         "checks one against the other)", "no such file")
    report = load_report(rpath)
    digest = results_digest(report.get("divergences", []), report.get("legacy_defects", []),
                            [(c["fixture"], c["surface"]) for c in report.get("cases", [])],
                            report.get("totals", {}).get("comparisons", 0))
    if digest != f.results_digest:
        raise InputError(rpath, "/divergences", "the results its evidence.json was sealed "
                         "with (/run/results_digest)", "different results (edited report?)")
    if report.get("verdict") != f.doc["run"].get("verdict") or \
            report.get("phase") != f.doc["run"].get("phase"):
        raise InputError(rpath, "/verdict", "the verdict and phase its evidence.json was "
                         "sealed with (/run/verdict, /run/phase)", "another (edited report?)")
    rows, cases = case_summaries(report), f.doc["cases"]
    if len(rows) != len(cases) or any(a != b for a, b in zip(rows, cases, strict=True)):
        raise InputError(f.path, "/cases", "the per-case rows of its report.json",
                         "different rows (edited evidence?)")


def load(paths: Iterable[str | Path]) -> list[EvidenceFile]:
    files = []
    for p in _expand(paths):
        f = parse(load_path(p), p.as_posix(), crosscheck=False)
        check_report(f, p)
        files.append(f)
    seen: dict[str, EvidenceFile] = {}
    for f in files:
        key = _without_label(f.doc)
        other = seen.get(key)
        if other is not None and other.platform != f.platform:
            raise InputError(f.path, "/environment/platform", "evidence produced on "
                             f"{f.platform}", f"a copy of {other.path} relabelled")
        seen.setdefault(key, f)
    for f in files:
        check_label(f.doc, f.path)
    return sorted(files, key=lambda f: (f.platform, f.path))


def _worse(a: str, b: str) -> str:
    if a == "clean":
        return b
    if b == "clean":
        return a
    return codes.max_severity(a, b)


#: the reason codes whose cases the gate names (``divergences.classified``,
#: ``replay.side_effect_free``)
NAMED_CODES: Final = ("unclassified", "shadow.side_effect")
_CLEAN: Final = len(codes.SEVERITIES)  # the rank of a case with nothing against the candidate

_Row = tuple[tuple[str, str], str, Mapping[str, Any]]


def _rows(f: EvidenceFile) -> Iterator[_Row]:
    """One file's case rows as (key, platform, row), in one pass over them; a row out of
    order is refused here too (an :class:`EvidenceFile` built without :func:`parse`)."""
    platform = f.platform
    prev: tuple[str, str] | None = None
    for i, c in enumerate(f.doc["cases"]):
        key = (c["fixture"], c["surface"])
        _in_order(f.path, i, prev, key)
        prev = key
        yield key, platform, c


def merged_cases(files: Sequence[EvidenceFile]) -> Iterator[dict[str, Any]]:
    """Every fixture × surface of ``files`` once, in (fixture, surface) order, its rows
    folded conservatively: the worst severity, each code's highest count, every NO-GO
    class, every platform.  Each file's cases are iterated once; one row per file is
    resident (re-iterable: call it again for another pass)."""
    cur: dict[str, Any] | None = None
    key_of: tuple[str, str] | None = None
    for key, platform, c in heapq.merge(*map(_rows, files), key=itemgetter(0)):
        if cur is not None and key == key_of:
            cur["worst"] = _worse(cur["worst"], c["worst"])
            for code, n in c.get("by_code", {}).items():
                cur["by_code"][code] = max(cur["by_code"].get(code, 0), n)
            cur["nogo"] |= set(c.get("nogo", []))
            cur["platforms"].add(platform)
            continue
        if cur is not None:
            yield cur
        key_of = key
        cur = {"fixture": c["fixture"], "surface": c["surface"], "worst": c["worst"],
               "by_code": dict(c.get("by_code", {})), "nogo": set(c.get("nogo", [])),
               "platforms": {platform}}
    if cur is not None:
        yield cur


@dataclass(frozen=True, slots=True)
class CaseStats:
    """What the gate reads of the merged cases: counts bounded by the vocabulary and the
    names (``fixture/surface``, in case order) of the cases its messages list."""

    #: NO-GO class -> the cases it is attributed to the candidate in
    nogo: Mapping[str, tuple[str, ...]]
    #: code of :data:`NAMED_CODES` -> the cases holding a divergence with it
    with_code: Mapping[str, tuple[str, ...]]
    #: the cases whose worst unwaived severity is blocking
    blocking: tuple[str, ...]
    #: top surface -> fixtures with a judged case of it (``exclude_surfaces`` left out)
    fixtures: Mapping[str, int]
    #: top surface -> per severity rank r, the fixtures of :attr:`fixtures` with a judged
    #: case whose worst is at or above ``SEVERITIES[r]``
    failing: Mapping[str, tuple[int, ...]]
    #: how many cases each list above names in all (its length, unless the merge kept
    #: only the first ``names`` of each: :func:`merge`)
    counts: Mapping[str, int] = field(default_factory=dict)

    def count(self, key: str, listed: Sequence[str]) -> int:
        """The number of cases of the list ``key`` (``nogo:CODE``, ``code:CODE`` or
        ``blocking``), of which ``listed`` are the first."""
        return self.counts.get(key, len(listed))

    def judged(self, surface: str) -> int:
        """Fixtures with a judged case of top surface ``surface``."""
        return self.fixtures.get(surface, 0)

    def failing_at(self, surface: str, fail_at: str) -> int:
        """Of :meth:`judged`, those with a judged case at or above ``fail_at``."""
        counts = self.failing.get(surface)
        return counts[codes.severity_rank(fail_at)] if counts else 0

    def cases_with(self, code: str) -> tuple[str, ...]:
        """The cases holding a divergence with ``code`` (one of :data:`NAMED_CODES`)."""
        if code not in self.with_code:
            raise ValueError(f"the merge names the cases of {', '.join(NAMED_CODES)} only, "
                             f"not {code!r}")
        return self.with_code[code]


class _Reducer:
    """Folds merged cases, in (fixture, surface) order, into a :class:`CaseStats`."""

    def __init__(self, exclude_surfaces: Sequence[str], names: int | None = None) -> None:
        self.exclude = tuple(exclude_surfaces)
        self.names = names  # keep at most this many names per list (None: all)
        self.counts: dict[str, int] = {}
        self.tops: dict[str, str | None] = {}  # surface -> its top surface if judged
        self.nogo: dict[str, list[str]] = {}
        self.with_code: dict[str, list[str]] = {c: [] for c in NAMED_CODES}
        self.blocking: list[str] = []
        self.fixtures: dict[str, int] = {}
        self.failing: dict[str, list[int]] = {}
        self.last: tuple[str, str] | None = None
        self.ranks: dict[str, int] = {}  # this fixture: top surface -> best rank judged

    def top(self, surface: str) -> str | None:
        if surface not in self.tops:
            judged = not any(fnmatch.fnmatchcase(surface, p) for p in self.exclude)
            self.tops[surface] = top_surface(surface) if judged else None
        return self.tops[surface]

    def flush(self) -> None:
        for top, rank in self.ranks.items():
            self.fixtures[top] = self.fixtures.get(top, 0) + 1
            counts = self.failing.setdefault(top, [0] * _CLEAN)
            for r in range(rank, _CLEAN):
                counts[r] += 1
        self.ranks = {}

    def add(self, c: Mapping[str, Any]) -> None:
        fx, sf = c["fixture"], c["surface"]
        if self.last is not None and (fx, sf) <= self.last:
            raise ValueError(f"merged cases out of order: {(fx, sf)!r} after {self.last!r}")
        if self.last is not None and fx != self.last[0]:
            self.flush()
        self.last = (fx, sf)
        name = f"{fx}/{sf}"
        for code in sorted(c["nogo"]):
            self._name(f"nogo:{code}", self.nogo.setdefault(code, []), name)
        for code, where in self.with_code.items():
            if c["by_code"].get(code):
                self._name(f"code:{code}", where, name)
        if c["worst"] == "blocking":
            self._name("blocking", self.blocking, name)
        top = self.top(sf)
        if top is not None:
            rank = _CLEAN if c["worst"] == "clean" else codes.severity_rank(c["worst"])
            self.ranks[top] = min(rank, self.ranks.get(top, _CLEAN))

    def _name(self, key: str, where: list[str], name: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1
        if self.names is None or len(where) < self.names:
            where.append(name)

    def result(self) -> CaseStats:
        self.flush()
        return CaseStats(
            nogo={k: tuple(v) for k, v in sorted(self.nogo.items())},
            with_code={k: tuple(v) for k, v in self.with_code.items()},
            blocking=tuple(self.blocking),
            fixtures=dict(sorted(self.fixtures.items())),
            failing={k: tuple(v) for k, v in sorted(self.failing.items())},
            counts=dict(sorted(self.counts.items())))


def reduce_cases(cases: Iterable[Mapping[str, Any]],
                 exclude_surfaces: Sequence[str] = (), names: int | None = None
                 ) -> CaseStats:
    """One pass over merged cases (as :func:`merged_cases` yields them) -> :class:`CaseStats`;
    a case of a surface matching an ``exclude_surfaces`` glob is not judged by the rates;
    ``names`` caps each list of case names (the counts stay exact)."""
    reducer = _Reducer(exclude_surfaces, names)
    for c in cases:
        reducer.add(c)
    return reducer.result()


@dataclass(frozen=True, slots=True)
class Merged:
    files: tuple[EvidenceFile, ...]
    stats: CaseStats
    checks: Mapping[str, Mapping[str, Any]]
    waivers_applied: tuple[Mapping[str, Any], ...]
    quarantined: int

    @property
    def platforms(self) -> list[str]:
        return sorted({f.platform for f in self.files})

    def identities(self) -> dict[str, list[EvidenceFile]]:
        out: dict[str, list[EvidenceFile]] = {}
        for f in self.files:
            out.setdefault(f.identity_digest, []).append(f)
        return out

    def testcases(self, platform: str) -> list[Mapping[str, Any]]:
        out: list[Mapping[str, Any]] = []
        for f in self.files:
            if f.platform == platform:
                for a in f.doc.get("attachments", []):
                    out += a.get("testcases", [])
        return out


def merge(files: Sequence[EvidenceFile], *, exclude_surfaces: Sequence[str] = (),
          names: int | None = None) -> Merged:
    """Merge ``files`` in one pass over each file's cases.  ``exclude_surfaces`` are the
    policy's globs of surfaces the rate rules do not judge (:attr:`CaseStats.fixtures`);
    ``names`` keeps only the first names of each list of cases (``shadow run``'s ladder,
    which shows a few: its memory then does not grow with the failing cases)."""
    stats = reduce_cases(merged_cases(files), exclude_surfaces, names)
    checks: dict[str, dict[str, Any]] = {}
    for f in files:
        for name, c in f.doc["checks"].items():
            status = c.get("status", "missing") if isinstance(c, Mapping) else "missing"
            status = status if status in _CHECK_ORDER else "fail"
            cur = checks.setdefault(name, {"status": "pass", "by_platform": {}, "detail": []})
            cur["by_platform"][f.platform] = status
            if _CHECK_ORDER[status] < _CHECK_ORDER[cur["status"]]:
                cur["status"] = status
            if status != "pass" and isinstance(c, Mapping) and c.get("detail"):
                cur["detail"].append(f"{f.platform}: {c['detail']}")
            if isinstance(c, Mapping) and "active_legacy_writers" in c:
                cur.setdefault("active_legacy_writers", set()).update(c["active_legacy_writers"])
    waivers: dict[str, Mapping[str, Any]] = {}
    for f in files:
        for w in f.doc["waivers"].get("applied", []):
            waivers.setdefault(str(w.get("id")), w)
    quarantined = max((int(f.doc["run"].get("totals", {}).get("quarantined", 0))
                       for f in files), default=0)
    return Merged(tuple(files), stats, checks,
                  tuple(waivers[k] for k in sorted(waivers)), quarantined)
