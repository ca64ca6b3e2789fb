"""Load ``evidence.json`` files from several runs and merge them conservatively.

A path may be a file or a folder (every ``evidence.json`` below it, as CI artifact
downloads lay them out).  Each file is validated (schema, required sections, an
``identity_digest`` that matches its ``identity``); a bad file is an
:class:`~shadow.errors.InputError` (exit 2).  Merging never hides a problem: per
fixture × surface the *worst* severity of any run wins, a check passes only if it
passed everywhere, and a test attached on one platform does not stand in for another.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
)

_REQUIRED = ("identity", "identity_digest", "environment", "run", "cases", "checks",
             "waivers", "attachments", "evidence_digest")
_CHECK_ORDER = {"fail": 0, "missing": 1, "pass": 2}


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


def _structure(doc: Mapping[str, Any], src: str) -> None:
    """Every field the gate reads has the type it expects (file + JSON pointer if not)."""
    env = _need(doc["environment"], Mapping, src, "/environment", "an object")
    for key in ("platform", "sys_platform", "path_sep"):
        _need(env.get(key), str, src, f"/environment/{key}", "a string")
    run = _need(doc["run"], Mapping, src, "/run", "an object")
    _need(run.get("results_digest"), str, src, "/run/results_digest", "a string")
    totals = _need(run.get("totals", {}), Mapping, src, "/run/totals", "an object")
    _need(totals.get("quarantined", 0), int, src, "/run/totals/quarantined", "an integer")
    for i, c in enumerate(doc["cases"]):
        ptr = f"/cases/{i}"
        _need(c, Mapping, src, ptr, "a case object")
        for key in ("fixture", "surface", "worst"):
            _need(c.get(key), str, src, f"{ptr}/{key}", "a string")
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
    if not isinstance(doc["cases"], list):
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
    if case_summaries(report) != list(f.doc["cases"]):
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


@dataclass(frozen=True, slots=True)
class Merged:
    files: tuple[EvidenceFile, ...]
    cases: Mapping[tuple[str, str], Mapping[str, Any]]
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


def merge(files: Sequence[EvidenceFile]) -> Merged:
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
                cur["worst"] = _worse(cur["worst"], c["worst"])
                for code, n in c.get("by_code", {}).items():
                    cur["by_code"][code] = max(cur["by_code"].get(code, 0), n)
                cur["nogo"] |= set(c.get("nogo", []))
                cur["platforms"].add(f.platform)
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
    return Merged(tuple(files), cases, checks,
                  tuple(waivers[k] for k in sorted(waivers)), quarantined)
