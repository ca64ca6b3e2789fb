"""The gate policy: a versioned JSON file (``shadow/policy/gate-policy.v1.json``).

Per phase (design 108 §16, phases 0..5) it names the checks that must pass and the
divergence-rate rules each surface must meet; a phase may ``inherit`` an earlier one,
so phase 5 also demands everything phases 0..4 demand.  The file is parsed strictly:
an unknown key, an unknown check, a missing phase or an out-of-range number is an
:class:`~shadow.errors.InputError` (exit 2) naming the JSON pointer.  docs/gate-policy.md
documents every field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from shadow.boundary import load_path
from shadow.codes import SEVERITIES
from shadow.errors import InputError

SCHEMA: Final = "shadow-gate-policy/v1"
DEFAULT_PATH: Final = Path(__file__).resolve().parent.parent / "policy" / "gate-policy.v1.json"
PLATFORMS: Final = ("linux", "windows", "macos")

#: Checks the run measures itself (``evidence.json`` ``checks``).
RUN_CHECKS: Final = ("inventory.valid", "schemas.frozen", "replay.deterministic")
#: Checks the gate derives from the evidence's counts.
DERIVED_CHECKS: Final = ("baseline.captures", "divergences.classified",
                         "replay.side_effect_free", "divergences.no_blocking",
                         "inventory.no_active_legacy_writer")


@dataclass(frozen=True, slots=True)
class RateRule:
    surfaces: tuple[str, ...]
    fail_at: str  # a fixture fails a surface when a divergence is at/above this severity
    max_failing: int
    min_fixtures: int
    max_upper_bound: float


@dataclass(frozen=True, slots=True)
class Phase:
    phase: int
    title: str
    inherits: int | None
    checks: tuple[str, ...]
    rates: tuple[RateRule, ...]


@dataclass(frozen=True, slots=True)
class Attachment:
    name: str
    description: str
    testcases: tuple[str, ...]  # fnmatch globs over "classname.name" of JUnit testcases


@dataclass(frozen=True, slots=True)
class Policy:
    version: str
    source: str
    platforms: tuple[str, ...]
    confidence: float
    cross_platform_identical: bool
    waiver_warning_days: int
    inventory_default: str | None
    inactive_stages: tuple[str, ...]
    baseline_surfaces: tuple[str, ...]
    exclude_surfaces: tuple[str, ...]
    attachments: Mapping[str, Attachment]
    phases: Mapping[int, Phase]
    #: sha256 of the parsed document (canonical JSON): two files with one version label
    #: but different rules differ here, whatever their line endings
    digest: str = ""

    def chain(self, phase: int) -> list[Phase]:
        """The phase and every phase it inherits, oldest first."""
        out: list[Phase] = []
        cur: int | None = phase
        while cur is not None:
            p = self.phases[cur]
            out.append(p)
            cur = p.inherits
        return out[::-1]


_TOP: Final = {"schema", "version", "description", "platforms", "confidence",
               "cross_platform_identical", "waiver_warning_days", "inventory",
               "baseline_surfaces", "exclude_surfaces", "attachments", "phases"}


class _Reader:
    def __init__(self, src: str) -> None:
        self.src = src

    def fail(self, ptr: str, expected: str, got: str = "") -> InputError:
        return InputError(self.src, ptr, expected, got)

    def obj(self, v: Any, ptr: str, keys: set[str], required: Sequence[str] = ()) -> Mapping[
            str, Any]:
        if not isinstance(v, Mapping):
            raise self.fail(ptr, "an object", type(v).__name__)
        unknown = sorted(set(v) - keys)
        if unknown:
            raise self.fail(f"{ptr}/{unknown[0]}", "only " + ", ".join(sorted(keys)),
                            "an unknown key")
        for k in required:
            if k not in v:
                raise self.fail(f"{ptr}/{k}", f"a required field {k!r}", "nothing")
        return v

    def strs(self, v: Any, ptr: str, *, nonempty: bool = False) -> tuple[str, ...]:
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            raise self.fail(ptr, "an array of non-empty strings", type(v).__name__)
        if nonempty and not v:
            raise self.fail(ptr, "at least one entry", "an empty array")
        return tuple(v)

    def num(self, v: Any, ptr: str, lo: float, hi: float, *, integer: bool = False) -> float:
        ok = isinstance(v, int) if integer else isinstance(v, (int, float))
        if isinstance(v, bool) or not ok or not lo <= v <= hi:
            kind = "an integer" if integer else "a number"
            raise self.fail(ptr, f"{kind} in [{lo}, {hi}]", repr(v))
        return float(v)


def _rate(r: _Reader, v: Any, ptr: str) -> RateRule:
    keys = {"surfaces", "fail_at", "max_failing", "min_fixtures", "max_upper_bound"}
    d = r.obj(v, ptr, keys, sorted(keys))
    if d["fail_at"] not in SEVERITIES:
        raise r.fail(f"{ptr}/fail_at", "one of " + ", ".join(SEVERITIES), repr(d["fail_at"]))
    return RateRule(r.strs(d["surfaces"], f"{ptr}/surfaces", nonempty=True), d["fail_at"],
                    int(r.num(d["max_failing"], f"{ptr}/max_failing", 0, 10**6, integer=True)),
                    int(r.num(d["min_fixtures"], f"{ptr}/min_fixtures", 0, 10**6, integer=True)),
                    r.num(d["max_upper_bound"], f"{ptr}/max_upper_bound", 0.0, 1.0))


def parse(doc: Any, src: str = "<policy>") -> Policy:
    r = _Reader(src)
    d = r.obj(doc, "", _TOP, ("schema", "version", "platforms", "phases"))
    if d["schema"] != SCHEMA:
        raise r.fail("/schema", repr(SCHEMA), repr(d["schema"]))
    if not isinstance(d["version"], str) or not d["version"]:
        raise r.fail("/version", "a non-empty string")
    platforms = r.strs(d["platforms"], "/platforms", nonempty=True)
    for i, p in enumerate(platforms):
        if p not in PLATFORMS:
            raise r.fail(f"/platforms/{i}", "one of " + ", ".join(PLATFORMS), repr(p))
    inv = r.obj(d.get("inventory", {}), "/inventory", {"default", "inactive_stages"})
    inv_default = inv.get("default")
    if inv_default is not None and (not isinstance(inv_default, str) or not inv_default):
        raise r.fail("/inventory/default", "a path or null", repr(inv_default))
    attachments: dict[str, Attachment] = {}
    for name, a in sorted(r.obj(d.get("attachments", {}), "/attachments",
                                set(d.get("attachments", {}) or ())).items()):
        ptr = f"/attachments/{name}"
        if name in RUN_CHECKS or name in DERIVED_CHECKS:
            raise r.fail(ptr, "a name no built-in check uses", repr(name))
        a = r.obj(a, ptr, {"description", "testcases"}, ("testcases",))
        attachments[name] = Attachment(name, str(a.get("description", "")),
                                       r.strs(a["testcases"], f"{ptr}/testcases", nonempty=True))
    known = set(RUN_CHECKS) | set(DERIVED_CHECKS) | set(attachments)
    raw_phases = d["phases"]
    if not isinstance(raw_phases, list):
        raise r.fail("/phases", "an array of phases", type(raw_phases).__name__)
    phases: dict[int, Phase] = {}
    for i, raw_phase in enumerate(raw_phases):
        ptr = f"/phases/{i}"
        ph = r.obj(raw_phase, ptr, {"phase", "title", "inherits", "checks", "rates"},
                  ("phase", "title", "checks", "rates"))
        n = int(r.num(ph["phase"], f"{ptr}/phase", 0, 5, integer=True))
        if n in phases:
            raise r.fail(f"{ptr}/phase", "a phase listed once", f"phase {n} again")
        inherits = ph.get("inherits")
        if inherits is not None:
            inherits = int(r.num(inherits, f"{ptr}/inherits", 0, n - 1 if n else -1,
                                 integer=True))
        checks = r.strs(ph["checks"], f"{ptr}/checks")
        for j, c in enumerate(checks):
            if c not in known:
                raise r.fail(f"{ptr}/checks/{j}", "a known check or a declared attachment",
                             repr(c))
        if not isinstance(ph["rates"], list):
            raise r.fail(f"{ptr}/rates", "an array of rate rules", type(ph["rates"]).__name__)
        rates = tuple(_rate(r, x, f"{ptr}/rates/{j}") for j, x in enumerate(ph["rates"]))
        phases[n] = Phase(n, str(ph["title"]), inherits, checks, rates)
    missing = sorted(set(range(6)) - set(phases))
    if missing:
        raise r.fail("/phases", "phases 0..5", f"no phase {missing[0]}")
    return Policy(
        version=d["version"], source=src, platforms=platforms,
        confidence=r.num(d.get("confidence", 0.95), "/confidence", 0.5, 0.9999),
        cross_platform_identical=bool(d.get("cross_platform_identical", True)),
        waiver_warning_days=int(r.num(d.get("waiver_warning_days", 30),
                                      "/waiver_warning_days", 0, 3650, integer=True)),
        inventory_default=inv_default,
        inactive_stages=r.strs(inv.get("inactive_stages", ["retired"]),
                               "/inventory/inactive_stages"),
        baseline_surfaces=r.strs(d.get("baseline_surfaces", []), "/baseline_surfaces"),
        exclude_surfaces=r.strs(d.get("exclude_surfaces", []), "/exclude_surfaces"),
        attachments=attachments, phases=phases,
        digest="sha256:" + hashlib.sha256(json.dumps(
            doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        ).hexdigest(),
    )


def load(path: str | Path | None = None) -> Policy:
    """Load and validate a policy file (the bundled one by default)."""
    p = Path(path) if path is not None else DEFAULT_PATH
    return parse(load_path(p), str(path) if path is not None else "gate-policy.v1.json")


def platforms_from_release_matrix(doc: Any, src: str = "<release matrix>") -> tuple[str, ...]:
    """Required platforms from the peer's ``release/required-evidence.v1.json``."""
    r = _Reader(src)
    if not isinstance(doc, Mapping) or not str(doc.get("schema", "")).endswith(
            "context-memory-release-requirements/v1"):
        raise r.fail("/schema", "a *context-memory-release-requirements/v1 document")
    plats = r.strs(doc.get("requiredPlatforms"), "/requiredPlatforms", nonempty=True)
    for i, p in enumerate(plats):
        if p not in PLATFORMS:
            raise r.fail(f"/requiredPlatforms/{i}", "one of " + ", ".join(PLATFORMS), repr(p))
    return plats
