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
from shadow.evidence import SCHEMA, identity_digest

_REQUIRED = ("identity", "identity_digest", "environment", "run", "cases", "checks",
             "waivers", "attachments")
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


def parse(doc: Any, src: str) -> EvidenceFile:
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
    for i, c in enumerate(doc["cases"]):
        if not isinstance(c, Mapping) or not {"fixture", "surface", "worst"} <= set(c):
            raise InputError(src, f"/cases/{i}", "a case with fixture, surface, worst")
        if c["worst"] not in (*codes.SEVERITIES, "clean"):
            raise InputError(src, f"/cases/{i}/worst", "a severity or 'clean'", repr(c["worst"]))
    return EvidenceFile(src, doc)


def load(paths: Iterable[str | Path]) -> list[EvidenceFile]:
    files = [parse(load_path(p), p.as_posix()) for p in _expand(paths)]
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
