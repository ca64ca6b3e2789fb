"""``evidence.json`` (``shadow-evidence/v1``): what one run proves, bound to the candidate.

Design 108 §19.3: schema, migration dry-run, shadow divergence, recovery, privacy deletion
and soak evidence must all bind to the *same* release candidate, and Linux, Windows and
macOS must all pass.  Every ``shadow run`` therefore writes, beside ``report.json``::

    {"schema": "shadow-evidence/v1",
     "identity": {"commit", "package_version", "corpus_digest", "recordings_digest",
                  "policy_version", "policy_digest", "candidate_digest", "waivers_digest",
                  "intended_digest", "noise_digest", "surfaces"},
     "identity_digest": "sha256:…",          # what "the same candidate" means
     "environment": {"platform": "linux|windows|macos", "python", "implementation",
                     "machine", "dirty", "sys_platform", "os_release", "path_sep",
                     "python_build", "python_compiler"},   # not part of the identity
     "run": {"verdict", "phase", "generated_at", "totals", "by_severity", "by_code",
             "blocking_reasons", "results_digest"},
     "cases": [{"fixture", "surface", "worst", "by_severity", "by_code", "nogo"}],
     "surfaces": {surface: {"cases", "worst": {severity | "clean": count}}},
     "waivers": {"applied", "refused", "expired", "expiring", "unused"},
     "checks": {"inventory.valid" | "schemas.frozen" | "replay.deterministic": {"status", …}},
     "inventory": {...summary...} | null,
     "attachments": [{"file", "digest", "testcases": [{"id", "outcome"}]}],
     "evidence_digest": "sha256:…"}          # over everything above (``seal``)

The gate recomputes both digests, checks the ``report.json`` beside the file against
``run.results_digest`` and ``cases``, and cross-checks the platform label with the
environment (:mod:`shadow.gates.merge`).

Nothing here can fail the run: a missing ``git`` gives commit ``"unknown"``, a check that
crashes is recorded as ``fail`` with the exception's type name.  ``shadow gate``
(:mod:`shadow.gates`) judges these files against the policy.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform as _platform
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from shadow import codes
from shadow.errors import InputError
from shadow.noise_rules import DEFAULT_PATH as NOISE_DEFAULT

SCHEMA: Final = "shadow-evidence/v1"
PACKAGE: Final = "context-kernel-parity"
_IDENTITY_TAG: Final = b"shadow.evidence-identity/v1\0"
_RESULTS_TAG: Final = b"shadow.results/v1\0"
_EVIDENCE_TAG: Final = b"shadow.evidence/v1\0"


# --- environment probes (monkeypatched in tests for deterministic bytes) ----------------


def platform_name(raw: str | None = None) -> str:
    raw = raw or sys.platform
    if raw.startswith("linux"):
        return "linux"
    if raw.startswith(("win32", "cygwin", "msys")):
        return "windows"
    if raw == "darwin":
        return "macos"
    return raw


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_commit() -> str:
    """``git rev-parse HEAD`` of the checkout holding this package; never fails."""
    out = _git("rev-parse", "HEAD")
    if out and out.strip():
        return out.strip()
    return os.environ.get("GITHUB_SHA") or "unknown"


def git_dirty() -> bool | None:
    out = _git("status", "--porcelain", "--untracked-files=no")
    return None if out is None else bool(out.strip())


def package_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version(PACKAGE)
    except PackageNotFoundError:
        from shadow import __version__

        return __version__


def environment() -> dict[str, Any]:
    """Where the run ran.  Besides the platform label, what the gate cross-checks it with:
    ``sys.platform``, the OS release, the path separator and the Python build."""
    return {"platform": platform_name(), "python": _platform.python_version(),
            "implementation": _platform.python_implementation(),
            "machine": _platform.machine(), "dirty": git_dirty(),
            "sys_platform": sys.platform, "os_release": _platform.platform(),
            "path_sep": os.sep, "python_build": " ".join(_platform.python_build()),
            "python_compiler": _platform.python_compiler()}


#: the path separator each platform label implies (the gate's cross-check)
PATH_SEP: Final = {"linux": "/", "macos": "/", "windows": "\\"}
#: how ``platform.platform()`` starts on each platform label (the gate's cross-check)
OS_RELEASE_PREFIX: Final = {"linux": ("Linux",), "windows": ("Windows",),
                            "macos": ("macOS", "Darwin")}


# --- digests -------------------------------------------------------------------------------


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def digest(value: Any, tag: bytes = b"") -> str:
    """sha256 of ``tag`` + :func:`canonical` — streamed when ``value`` holds a spill
    (:func:`shadow.spill.sha256_canonical`: the same bytes, never all in memory)."""
    from shadow.spill import sha256_canonical

    return sha256_canonical(value, tag)


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def folder_digest(root: Path | None) -> str:
    """sha256 over (relative posix path, bytes) of every file under ``root``, sorted."""
    h = hashlib.sha256()
    if root is not None and root.is_dir():
        for p in sorted((p for p in root.rglob("*") if p.is_file()),
                        key=lambda p: p.relative_to(root).as_posix()):
            h.update(p.relative_to(root).as_posix().encode("utf-8") + b"\0")
            h.update(p.read_bytes())
            h.update(b"\0")
    return "sha256:" + h.hexdigest()


def results_digest(divergences: Sequence[Mapping[str, Any]],
                   legacy_defects: Sequence[Mapping[str, Any]],
                   cases: Sequence[Any], comparisons: int) -> str:
    """The platform-independent part of a run's outcome (no time, no identity); each
    list is read once, as a stream (a spill stays on disk)."""
    from shadow.spill import Stream

    return digest({"divergences": divergences, "legacy_defects": legacy_defects,
                   "cases": Stream(lambda: (list(c) for c in cases)),
                   "comparisons": comparisons}, _RESULTS_TAG)


# --- per-case summary -------------------------------------------------------------------


def top_surface(surface: str) -> str:
    """``cli.compress`` -> ``cli``; ``session-core.memory`` -> ``session-core``."""
    return surface.split(".", 1)[0]


def case_summaries(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One entry per fixture × surface: the worst unwaived severity of what counts against
    the candidate (``codes.counts_against_candidate``), every severity and code count."""
    by_case: dict[tuple[str, str], list[Mapping[str, Any]]] = {
        (c["fixture"], c["surface"]): [] for c in report.get("cases", [])}
    for d in report.get("divergences", []):
        by_case.setdefault((d["fixture"], d["surface"]), []).append(d)
    out = []
    for (fx, sf), divs in sorted(by_case.items()):
        sev = Counter(d["severity"] for d in divs)
        # the one failure rule: only what counts against the candidate can fail a case
        against = [d["severity"] for d in divs
                   if codes.counts_against_candidate(str(d.get("attribution")))]
        worst = min(against, key=codes.severity_rank) if against else "clean"
        nogo = sorted({d["reason_code"] for d in divs if d["severity"] == "blocking"
                       and d["reason_code"] in codes.NOGO_CODES
                       and d.get("attribution") in ("candidate", "both")})
        out.append({"fixture": fx, "surface": sf, "worst": worst,
                    "by_severity": dict(sorted(sev.items())),
                    "by_code": dict(sorted(Counter(d["reason_code"] for d in divs).items())),
                    "nogo": nogo})
    return out


def surface_summaries(cases: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per surface: cases, and how many cases have each worst severity (or are clean)."""
    out: dict[str, dict[str, Any]] = {}
    for c in cases:
        s = out.setdefault(c["surface"], {"cases": 0, "worst": {k: 0 for k in (
            *codes.SEVERITIES, "clean")}})
        s["cases"] += 1
        s["worst"][c["worst"]] += 1
    return dict(sorted(out.items()))


# --- attachments (JUnit XML from other test runs, e.g. the conformance suites) -------------


def read_junit(path: Path) -> dict[str, Any]:
    """Summarise a JUnit XML file: one ``{"id", "outcome"}`` per testcase."""
    if not path.is_file():
        raise InputError(path, "", "a JUnit XML file to attach", "no such file")
    try:
        root = ET.parse(path).getroot()  # CI's own test output (expat, no DTD fetch)
    except ET.ParseError as exc:
        raise InputError(path, "", "well-formed JUnit XML", f"a parse error ({exc})") from None
    except (OSError, ValueError) as exc:
        raise InputError(path, "", "a readable JUnit XML file", type(exc).__name__) from None
    if root.tag not in ("testsuites", "testsuite"):
        raise InputError(path, "", "JUnit XML (a <testsuites> or <testsuite> root)",
                         "another XML document")
    cases = []
    for tc in root.iter("testcase"):
        cls, name = tc.get("classname") or "", tc.get("name") or ""
        outcome = "passed"
        for child, label in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            if tc.find(child) is not None:
                outcome = label
                break
        cases.append({"id": f"{cls}.{name}" if cls else name, "outcome": outcome})
    if not cases:
        raise InputError(path, "", "JUnit XML with at least one <testcase>", "none")
    cases.sort(key=lambda c: (c["id"], c["outcome"]))
    return {"file": path.name, "digest": file_digest(path), "testcases": cases}


# --- checks the run measures itself -------------------------------------------------------


def _guard(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return fn()
    except InputError as exc:
        return {"status": "fail", "detail": str(exc)}
    except Exception as exc:  # a crashing check is a failing check, never a crashing run
        return {"status": "fail", "detail": f"check crashed ({type(exc).__name__})"}


def check_schemas() -> dict[str, Any]:
    from shadow import schemas

    problems = schemas.drift(schemas.generate())
    return {"status": "fail" if problems else "pass", "problems": list(problems)}


def check_inventory(path: str | None, inactive: Sequence[str]) -> tuple[dict[str, Any],
                                                                         dict[str, Any] | None]:
    from shadow import inventory

    if path is None:
        return {"status": "missing", "detail": "no inventory file given"}, None
    p = Path(path)
    if not p.is_file():
        return {"status": "missing", "detail": f"no inventory at {p.as_posix()}"}, None
    try:
        inv = inventory.load(p)
    except InputError as exc:
        return {"status": "fail", "detail": str(exc)}, None
    active = [w.id for w in inv.active_legacy_writers(inactive)]
    return ({"status": "pass", "format": inv.format, "source": inv.source,
             "writers": len(inv.writers), "active_legacy_writers": active},
            inv.summary())


@dataclass(frozen=True, slots=True)
class EvidenceInputs:
    report: Mapping[str, Any]
    policy_version: str
    policy_digest: str
    recordings: Path | None
    waivers: Path | None
    inventory: str | None
    inactive_stages: tuple[str, ...]
    attachments: tuple[Path, ...] = ()
    intended: Path | None = None
    noise: Path | None = None  # the noise rules the run applied (part of the identity)
    determinism: Mapping[str, Any] | None = None  # the rerun's result (None: not checked)
    check_schemas: bool = True
    parsed_attachments: tuple[dict[str, Any], ...] | None = None  # read before the replay
    cases: Sequence[Mapping[str, Any]] | None = None  # per-case rows made fixture by fixture


def collect(inp: EvidenceInputs) -> dict[str, Any]:
    """Build the evidence document for one finished run."""
    report = inp.report
    cand = report["candidate"]
    identity = {
        "commit": git_commit(),
        "package_version": package_version(),
        "corpus_digest": cand.get("corpus_digest", "unknown"),
        "recordings_digest": folder_digest(inp.recordings) if inp.recordings else "none",
        "policy_version": inp.policy_version,
        "policy_digest": inp.policy_digest,
        "candidate_digest": digest({k: v for k, v in cand.items() if k != "corpus_digest"}),
        "waivers_digest": file_digest(inp.waivers) if inp.waivers else "none",
        "intended_digest": file_digest(inp.intended) if inp.intended else "none",
        "noise_digest": file_digest(inp.noise) if inp.noise else "none",
        "surfaces": list(cand.get("surfaces", [])),
    }
    checks: dict[str, Any] = {}
    inv_check, inv_summary = check_inventory(inp.inventory, inp.inactive_stages)
    checks["inventory.valid"] = inv_check
    checks["schemas.frozen"] = (_guard(check_schemas) if inp.check_schemas
                                else {"status": "missing", "detail": "not checked"})
    if inp.determinism is None:
        checks["replay.deterministic"] = {"status": "missing", "detail": "not checked"}
    else:
        checks["replay.deterministic"] = dict(inp.determinism)
    divs = report.get("divergences", [])
    sev: Counter[str] = Counter()
    by_code: Counter[str] = Counter()
    for d in divs:  # one pass (a run's divergences stream from their spill)
        sev[d["severity"]] += 1
        by_code[d["reason_code"]] += 1
    cases = inp.cases if inp.cases is not None else case_summaries(report)
    return {
        "schema": SCHEMA,
        "identity": identity,
        "identity_digest": digest(identity, _IDENTITY_TAG),
        "environment": environment(),
        "run": {"verdict": report["verdict"], "phase": report["phase"],
                "generated_at": report["generated_at"], "totals": report["totals"],
                "by_severity": {s: sev.get(s, 0) for s in codes.SEVERITIES},
                "by_code": dict(sorted(by_code.items())),
                "blocking_reasons": report.get("blocking_reasons", []),
                "results_digest": results_digest(
                    divs, report.get("legacy_defects", []),
                    _pairs(report.get("cases", [])),
                    report["totals"].get("comparisons", 0))},
        "cases": cases,
        "surfaces": surface_summaries(cases),
        "waivers": report.get("waivers", {}),
        "intended": report.get("intended", {}),
        "checks": dict(sorted(checks.items())),
        "inventory": inv_summary,
        "attachments": list(inp.parsed_attachments) if inp.parsed_attachments is not None
        else [read_junit(p) for p in inp.attachments],
    }


# --- glue for ``shadow run`` ----------------------------------------------------------------

_PROJECT_ROOT: Final = Path(__file__).resolve().parent.parent


def _resolve_default(rel: str | None) -> str | None:
    """A policy-relative default path: the current folder first, then the project root."""
    if rel is None:
        return None
    p = Path(rel)
    if p.is_absolute() or p.exists():
        return str(p)
    alt = _PROJECT_ROOT / p
    return str(alt) if alt.exists() else str(p)


@dataclass(frozen=True, slots=True)
class RunSetup:
    policy_version: str
    policy_digest: str
    inactive_stages: tuple[str, ...]
    inventory: str | None
    attachments: tuple[Path, ...]
    recordings: Path | None
    waivers: Path | None
    previous: Mapping[str, Any] | None
    intended: Path | None = None
    parsed_attachments: tuple[dict[str, Any], ...] | None = None
    noise: Path | None = None


def prepare(opts: Any, policy: Any) -> RunSetup:
    """Validate the run's evidence inputs before any replay (input errors exit 2)."""
    from shadow import reports

    if opts.inventory is not None and not Path(opts.inventory).is_file():
        raise InputError(opts.inventory, "", "a writer inventory file", "no such file")
    attachments = tuple(Path(a) for a in opts.attach)
    parsed = tuple(read_junit(a) for a in attachments)  # a bad --attach: exit 2, before replay
    if opts.inventory is not None:
        from shadow import inventory

        inventory.load(Path(opts.inventory))  # an invalid --inventory: exit 2, before replay
    # without --recordings the provider answers come from the captures (corpus digest)
    recordings = Path(opts.recordings) if opts.recordings is not None else None
    previous = reports.load_report(opts.previous) if opts.previous else None
    from shadow import intended

    rules_file = Path(opts.intended) if getattr(opts, "intended", None) else \
        intended.DEFAULT_PATH
    noise_file = Path(opts.noise) if getattr(opts, "noise", None) else NOISE_DEFAULT
    return RunSetup(policy.version, policy.digest, tuple(policy.inactive_stages),
                    opts.inventory or _resolve_default(policy.inventory_default),
                    attachments, recordings, Path(opts.waivers) if opts.waivers else None,
                    previous, rules_file, parsed, noise_file)


def for_run(setup: RunSetup, report: Mapping[str, Any],
            determinism: Mapping[str, Any] | None,
            cases: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The run's evidence; ``determinism`` is the rerun's result
    (:func:`shadow.mapreduce.map_corpus`), None when it was skipped; ``cases`` the
    per-case rows when the run made them (:func:`case_summaries` fixture by fixture)."""
    return collect(EvidenceInputs(
        report=report, policy_version=setup.policy_version,
        policy_digest=setup.policy_digest, recordings=setup.recordings,
        waivers=setup.waivers, inventory=setup.inventory,
        inactive_stages=setup.inactive_stages, attachments=setup.attachments,
        intended=setup.intended, parsed_attachments=setup.parsed_attachments,
        noise=setup.noise, determinism=determinism, cases=cases))


def evidence_digest(doc: Mapping[str, Any]) -> str:
    """Digest of the whole evidence document but this field: identity, environment, the
    run, every per-case result, checks and attachments.  The gate recomputes it."""
    return digest({k: v for k, v in doc.items() if k != "evidence_digest"}, _EVIDENCE_TAG)


def seal(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` with its ``evidence_digest`` (re)computed."""
    body = {k: v for k, v in doc.items() if k != "evidence_digest"}
    return {**body, "evidence_digest": evidence_digest(body)}


def identity_digest(identity: Mapping[str, Any]) -> str:
    return digest(dict(identity), _IDENTITY_TAG)


def render(doc: Mapping[str, Any]) -> str:
    from shadow.spill import dumps_pretty

    return dumps_pretty(doc) + "\n"


def write(path: Path, doc: Mapping[str, Any]) -> Path:
    """``render(seal(doc))`` into ``path``, the per-case rows streamed from their spill."""
    from shadow.spill import write_pretty

    with path.open("w", encoding="utf-8", newline="\n") as fh:
        write_pretty(seal(doc), fh)
        fh.write("\n")
    return path


def _pairs(cases: Sequence[Mapping[str, Any]]) -> Any:
    """``(fixture, surface)`` of each case, lazily (a :class:`shadow.spill.Stream`)."""
    from shadow.spill import Stream

    return Stream(lambda: ((c["fixture"], c["surface"]) for c in cases), len(cases))
