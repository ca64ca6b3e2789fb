"""``shadow capture``: run the legacy entry points of a user's checkout on shared inputs.

One Node 20 (or Java 17) subprocess per capture file, with a per-capture timeout, a
sandboxed home folder, a closed network and the deterministic clock and id sources of
``harness/determinism.cjs``.  The harness files are this project's own code; the legacy
code is the user's checkout, run where it lies — nothing of it is copied or built here.

The runner writes ``<out>/<scenario>/input.json`` (the input with ``provider_responses``
as the legacy code asked for them), one ``legacy-capture/v1`` file per entry point, and
``<out>/MANIFEST.json``; ``--repeat N`` captures repeats 2..N into temporary folders with
other clock origins and seeds, learns what differs from the first run and merges it into
the noise rules (``--noise-rules``, default ``shadow/policy/noise.v1.json``; new rules are
``reviewed: false`` until a person reviews them — docs/noise.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shadow.capture import jsjson
from shadow.capture.manifest import manifest_document
from shadow.capture.noise import Learned, Merged, update_policy
from shadow.capture.plan import TARGETS, Job, Target, plan, seed_label

__all__ = [
    "BASE_MS",
    "HARNESS",
    "CaptureError",
    "CaptureOptions",
    "CaptureResult",
    "Outcome",
    "capture",
    "legacy_commit",
]

HARNESS = Path(__file__).resolve().parent / "harness"
BASE_MS = 1787227200000  # 2026-08-20T12:00:00.000Z
REPEAT_SHIFT_MS = 86_400_000 + 4_321  # a later repeat's clock origin moves by this much


class CaptureError(Exception):
    """A usage or setup problem (exit 2): missing entry point, bad folder, no node."""


@dataclass(frozen=True)
class CaptureOptions:
    legacy_root: Path
    inputs: Path
    out: Path
    only: Sequence[str] = ()
    jetbrains_classpath: str | None = None
    repeat: int = 1
    timeout_s: float = 120.0
    node: str = "node"
    java: str = "java"
    javac: str = "javac"
    legacy_commit: str | None = None
    noise_rules: Path | None = None  # where --repeat merges what it learns (required then)
    keep_repeats: Path | None = None  # keep the control runs here (repeat-<k>/), else temp


@dataclass
class Outcome:
    """One capture file: written, or why not (never a body, never a secret)."""

    scenario: str
    file: str
    status: str                   # ok | error (legacy threw) | capture-error
    error: Any = None             # the legacy error record, or the capture problem
    exchanges: list[Any] = field(default_factory=list)
    text: str | None = None


@dataclass
class CaptureResult:
    outcomes: list[Outcome]
    manifest: dict[str, Any]
    noise: list[tuple[Learned, Merged]] = field(default_factory=list)  # one per repeat >= 2
    capture_errors_of_repeats: list[Outcome] = field(default_factory=list)

    @property
    def capture_errors(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "capture-error"] + list(
            self.capture_errors_of_repeats)


def legacy_commit(root: Path, override: str | None = None) -> str:
    """The checkout's commit, abbreviated to 7 hex digits as the captures record it."""
    if override:
        return override
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=7", "HEAD"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise CaptureError(f"{root}: cannot read the legacy commit ({exc}); "
                           "pass --legacy-commit") from exc
    text = done.stdout.strip()
    if done.returncode != 0 or not text:
        raise CaptureError(f"{root}: not a git checkout (git rev-parse failed); "
                           "pass --legacy-commit")
    return text


def node_version(node: str) -> str:
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30,
                              check=False)
    except OSError as exc:
        raise CaptureError(f"cannot run Node.js ({node}): {exc}") from exc
    return done.stdout.strip()


def _scenarios(inputs: Path, only: Sequence[str], order: Sequence[str]
               ) -> list[tuple[str, Path]]:
    """Scenario folders: those the inputs' manifest lists in its order, then the rest by name."""
    if not inputs.is_dir():
        raise CaptureError(f"{inputs}: not a folder of scenario inputs")
    rank = {n: i for i, n in enumerate(order)}
    found = sorted(((p.name, p / "input.json") for p in inputs.iterdir()
                    if p.is_dir() and (p / "input.json").is_file()),
                   key=lambda x: (rank.get(x[0], len(rank)), x[0]))
    if only:
        names = {n for n, _ in found}
        missing = [s for s in only if s not in names]
        if missing:
            raise CaptureError(f"--only: no input.json for {', '.join(missing)} under {inputs}")
        found = [(n, p) for n, p in found if n in set(only)]
    return found


def _listed(inputs: Path) -> dict[str, list[str]]:
    """Files per scenario in the inputs' own MANIFEST.json, when it has one."""
    path = inputs / "MANIFEST.json"
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return {s["id"]: [x["file"] for x in s["surfaces"]] for s in doc["scenarios"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise CaptureError(f"{path}: not a legacy-capture-manifest/v1 ({exc})") from exc


def _check_entries(root: Path, jobs: Iterable[Job], classpath: str | None) -> None:
    missing = sorted({j.target.module for j in jobs
                      if not (root / Path(*j.target.module.split("/"))).is_file()})
    if missing:
        raise CaptureError("legacy entry point missing under " f"{root}: {', '.join(missing)}")
    if classpath is None and any(j.target.surface == "jetbrains" for j in jobs):
        raise CaptureError("jetbrains.context-center.json needs --jetbrains-classpath "
                           "(the plugin's classes, built by you from your checkout)")


def _sandbox_env(home: Path, inp: Mapping[str, Any]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k.upper() in {"PATH", "SYSTEMROOT", "WINDIR", "TEMP", "TMP", "COMSPEC",
                            "PATHEXT", "LANG", "TZ"}}
    env.update({"HOME": str(home), "USERPROFILE": str(home),
                "CHAINLESSCHAIN_HOME": str(home / ".chainlesschain"),
                "NODE_OPTIONS": "", "NO_PROXY": "*", "TZ": "UTC"})
    raw = inp.get("flags")
    flags: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    for name in ("CONTEXT_SNIP", "CONTEXT_COLLAPSE", "COMPRESSION_AB"):
        env[f"CC_FLAG_{name}"] = "true" if flags.get(name) is True else "false"
    return env


Runner = Callable[[Job, dict[str, Any], Path], Outcome]


class _Session:
    def __init__(self, opts: CaptureOptions, commit: str, repeat: int, node: str = "") -> None:
        self.opts, self.commit, self.repeat = opts, commit, repeat
        self.node = node  # ``node --version``, recorded by the captures (Java cannot ask)
        self.java_build: Path | None = None

    def request(self, job: Job, input_text: str, sources: Mapping[str, Any]) -> dict[str, Any]:
        base = BASE_MS + (self.repeat - 1) * REPEAT_SHIFT_MS
        return {"legacy_root": str(self.opts.legacy_root), "scenario": job.scenario,
                "file": job.file, "variant": job.target.variant,
                "legacy_commit": self.commit, "node": self.node,
                "label": seed_label(job.target, job.scenario, self.repeat),
                "base_ms": base, "step_ms": job.target.step_ms, "input_text": input_text,
                "sources": dict(sources)}

    def selfcheck(self, cases: Path) -> list[dict[str, Any]]:
        """Each shared case: does each twin's output match the case's expectation?

        Both IDE drivers run once in ``selfcheck`` mode over the cases file (each checks as
        its plugin's own test does); a twin that could not run (no JetBrains classpath, a
        harness failure) answers ``None`` for every case.
        """
        try:
            doc = json.loads(cases.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        items = doc if isinstance(doc, list) else []
        vscode = self._selfcheck_one(TARGETS[IDE_TWINS[0]], cases)
        jetbrains = (self._selfcheck_one(TARGETS[IDE_TWINS[1]], cases)
                     if self.opts.jetbrains_classpath is not None else [])
        return [{"name": item.get("name") if isinstance(item, dict) else None,
                 "vscode_matches_expected": _nth(vscode, i),
                 "jetbrains_matches_expected": _nth(jetbrains, i)}
                for i, item in enumerate(items)]

    def _selfcheck_one(self, target: Target, cases: Path) -> list[Any]:
        """One twin's ``matches`` per case, in the cases' order ([] when it could not run)."""
        job = Job("_selfcheck", target)
        with tempfile.TemporaryDirectory(prefix="shadow-capture-") as tmp:
            home = Path(tmp) / "home"
            home.mkdir()
            req = self.request(job, "{}", {})
            req.update({"mode": "selfcheck", "cases": str(cases), "sandbox": str(home)})
            try:
                done = subprocess.run(self.command(job, Path(tmp)),
                                      input=json.dumps(req).encode("utf-8"),
                                      capture_output=True, timeout=self.opts.timeout_s,
                                      env=_sandbox_env(home, {}), cwd=str(home), check=False)
            except subprocess.TimeoutExpired:
                return []
            except OSError as exc:
                raise CaptureError(f"cannot start the IDE self-check ({target.driver}): "
                                   f"{exc}") from exc
        o = _outcome(job, done)
        try:
            rows = json.loads(o.text or "null")["selfcheck"]
        except (ValueError, TypeError, KeyError):
            return []
        return [r.get("matches") if isinstance(r, dict) else None for r in rows]

    def command(self, job: Job, tmp: Path) -> list[str]:
        driver = HARNESS / job.target.driver
        if driver.suffix == ".java":
            return self._java(driver, tmp)
        return [self.opts.node, str(driver)]

    def _java(self, driver: Path, tmp: Path) -> list[str]:
        cp = self.opts.jetbrains_classpath or ""
        if self.java_build is None:
            build = Path(tempfile.mkdtemp(prefix="shadow-capture-java-"))
            done = subprocess.run([self.opts.javac, "-encoding", "UTF-8", "-cp", cp, "-d",
                                   str(build), str(driver)], capture_output=True, text=True,
                                  timeout=self.opts.timeout_s, check=False)
            if done.returncode != 0:
                raise CaptureError(f"{driver.name}: javac failed against "
                                   f"--jetbrains-classpath ({done.stderr.strip()[-300:]})")
            self.java_build = build
        return [self.opts.java, "-Dfile.encoding=UTF-8", "-cp",
                os.pathsep.join([str(self.java_build), cp]), driver.stem]

    def run(self, job: Job, inp: dict[str, Any], input_text: str,
            sources: Mapping[str, Any]) -> Outcome:
        with tempfile.TemporaryDirectory(prefix="shadow-capture-") as tmp:
            home = Path(tmp) / "home"
            home.mkdir()
            req = self.request(job, input_text, sources)
            req["sandbox"] = str(home)
            try:
                done = subprocess.run(self.command(job, Path(tmp)),
                                      input=json.dumps(req).encode("utf-8"),
                                      capture_output=True, timeout=self.opts.timeout_s,
                                      env=_sandbox_env(home, inp), cwd=str(home), check=False)
            except subprocess.TimeoutExpired:
                return Outcome(job.scenario, job.file, "capture-error",
                               {"reason": "timeout", "seconds": self.opts.timeout_s})
            except OSError as exc:
                raise CaptureError(f"cannot start the capture of {job.file}: {exc}") from exc
        return _outcome(job, done)


def _nth(values: Sequence[Any], i: int) -> Any:
    return values[i] if i < len(values) else None


def _outcome(job: Job, done: subprocess.CompletedProcess[bytes]) -> Outcome:
    # "\n" only: str.splitlines() would also cut at U+2028/U+2029 and other separators
    # that JSON.stringify leaves unescaped inside the envelope's strings.
    lines = done.stdout.decode("utf-8", errors="replace").strip().split("\n")
    try:
        env = json.loads(lines[-1]) if lines else None
    except ValueError:
        env = None
    if not isinstance(env, dict):
        return Outcome(job.scenario, job.file, "capture-error",
                       {"reason": "no-envelope", "exit": done.returncode,
                        "stderr_bytes": len(done.stderr)})
    if env.get("network"):
        kinds = sorted({str(a.get("kind")) for a in env["network"] if isinstance(a, dict)})
        return Outcome(job.scenario, job.file, "capture-error",
                       {"reason": "network-attempt", "attempts": len(env["network"]),
                        "kinds": kinds})
    if "harness_error" in env:
        he = env["harness_error"] if isinstance(env["harness_error"], dict) else {}
        return Outcome(job.scenario, job.file, "capture-error",
                       {"reason": "harness", "stage": he.get("stage"), "name": he.get("name"),
                        "code": he.get("code")})
    text = env.get("text")
    if not isinstance(text, str):
        return Outcome(job.scenario, job.file, "capture-error", {"reason": "no-text"})
    doc = json.loads(text)
    err = doc.get("error") if isinstance(doc, dict) else None
    return Outcome(job.scenario, job.file, "error" if err else "ok", err,
                   list(env.get("exchanges") or []), text)


def _input_with_exchanges(inp: dict[str, Any], outcomes: Sequence[Outcome]) -> dict[str, Any]:
    exchanges = [x for o in outcomes for x in o.exchanges]
    if "memory_ops" in inp or "context_center" in inp:
        exchanges = list(inp.get("provider_responses") or exchanges)
    out = dict(inp)
    out["provider_responses"] = exchanges
    return out


def _message_count(inp: Mapping[str, Any]) -> int:
    msgs = inp.get("messages")
    return len(msgs) if isinstance(msgs, list) else 0


def _kind(inp: Mapping[str, Any]) -> str:
    if "memory_ops" in inp:
        return "memory"
    if "context_center" in inp:
        return "ide"
    return "messages"


def _entry_record(o: Outcome) -> dict[str, Any]:
    t = TARGETS[o.file]
    return {"file": o.file, "surface": t.surface, "entry": t.entry,
            "status": "ok" if o.status == "ok" else "error", "error": o.error}


def capture_scenario(session: _Session, name: str, path: Path,
                     listed: Sequence[str] | None) -> tuple[dict[str, Any], list[Outcome]]:
    input_text = path.read_text(encoding="utf-8")
    try:
        inp = json.loads(input_text)
    except ValueError as exc:
        raise CaptureError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(inp, dict):
        raise CaptureError(f"{path}: expected a legacy-capture-input/v1 object")
    outcomes: list[Outcome] = []
    sources: dict[str, Any] = {}
    for job in _capture_order(plan(name, inp, listed)):
        o = session.run(job, inp, input_text, sources)
        outcomes.append(o)
        if o.text is not None:
            sources[job.file] = json.loads(o.text)
    final = _input_with_exchanges(inp, sorted(outcomes, key=_exchange_order))
    entry = {"id": name, "kind": _kind(inp), "description": inp.get("description"),
             "tags": inp.get("tags"), "model": inp.get("model"),
             "message_count": _message_count(inp)}
    followups = inp.get("followup_messages")
    if isinstance(followups, list):  # two-phase scenarios: the size of each follow-up batch
        entry["followup_message_count"] = [len(f) if isinstance(f, list) else 0
                                           for f in followups]
    entry["provider_exchanges"] = len(final["provider_responses"])
    entry["surfaces"] = [_entry_record(o) for o in outcomes if o.status != "capture-error"]
    return {"entry": entry, "input": final}, outcomes


def _capture_order(jobs: Sequence[Job]) -> list[Job]:
    return list(jobs)  # plan() already orders them; the JSONL store comes after compress


def _exchange_order(o: Outcome) -> int:
    order = ["cli.compress.json", "cli.provider-compaction.json",
             "cli.provider-compaction.raw-wire.json", "cli.compress.raw-wire.json",
             "desktop.compress.json", "desktop.context-engineering.json",
             "cli.jsonl-session.json"]
    return order.index(o.file) if o.file in order else len(order)


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


def capture(opts: CaptureOptions, progress: Callable[[str], None] | None = None
            ) -> CaptureResult:
    """Capture every (selected) scenario of ``opts.inputs`` into ``opts.out``."""
    say = progress or (lambda _m: None)
    root = opts.legacy_root
    if not root.is_dir():
        raise CaptureError(f"--legacy-root {root}: not a folder")
    listed = _listed(opts.inputs)
    scenarios = _scenarios(opts.inputs, opts.only, list(listed))
    jobs = [j for n, p in scenarios
            for j in plan(n, json.loads(p.read_text(encoding="utf-8")), listed.get(n))]
    _check_entries(root, jobs, opts.jetbrains_classpath)
    noise_file = opts.noise_rules
    if opts.repeat > 1 and noise_file is None:
        raise CaptureError("--repeat needs --noise-rules FILE: the reviewed rule file the "
                           "learned fields are merged into (this project's: "
                           "shadow/policy/noise.v1.json)")
    commit = legacy_commit(root, opts.legacy_commit)
    node = node_version(opts.node)
    first = _capture_run(_Session(opts, commit, 1, node), scenarios, listed, opts.out, node,
                         say, opts.inputs)
    for k in range(2, max(1, opts.repeat) + 1):
        # a control run: other clock origin, other seeds; kept only until it is learned from
        with tempfile.TemporaryDirectory(prefix=f"shadow-capture-repeat-{k}-") as tmp:
            where = opts.keep_repeats / f"repeat-{k}" if opts.keep_repeats else Path(tmp)
            again = _capture_run(_Session(opts, commit, k, node), scenarios, listed, where,
                                 node, say, opts.inputs)
            first.capture_errors_of_repeats.extend(again.capture_errors)
            assert noise_file is not None
            learned, merged = update_policy(opts.out, where, noise_file)
        first.noise.append((learned, merged))
        say(f"noise: repeat {k}: {len(learned.fields)} volatile fields, "
            f"{len(merged.added)} new rules (unreviewed), {len(merged.confirmed)} confirmed, "
            f"{len(learned.problems)} problems -> {noise_file}")
    return first


def _capture_run(session: _Session, scenarios: Sequence[tuple[str, Path]],
                 listed: Mapping[str, list[str]], out: Path, node: str,
                 say: Callable[[str], None], inputs: Path) -> CaptureResult:
    entries: list[dict[str, Any]] = []
    outcomes: list[Outcome] = []
    for n, (name, path) in enumerate(scenarios, 1):
        got, outs = capture_scenario(session, name, path, listed.get(name))
        say(f"capture {n}/{len(scenarios)} {name}: {len(outs)} files"
            + ("" if session.repeat == 1 else f" (repeat {session.repeat})"))
        outcomes += outs
        entries.append(got["entry"])
        write_text(out / name / "input.json", jsjson.dumps(got["input"]))
        for o in outs:
            if o.text is not None and o.status != "capture-error":
                write_text(out / name / o.file, o.text)
    ide = ide_fixture(session, out) if any(
        TARGETS[o.file].surface in IDE_SURFACES for o in outcomes) else None
    manifest = manifest_document(session.commit, node, entries, _errored(outcomes), ide)
    failed = [{"scenario": o.scenario, "file": o.file, "problem": o.error}
              for o in outcomes if o.status == "capture-error"]
    if failed:  # only a failed capture has this key; a clean one is fixtures/' format
        manifest["capture_errors"] = failed
    write_text(out / "MANIFEST.json", jsjson.dumps(manifest))
    return CaptureResult(outcomes, manifest)


def _errored(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    return [{"scenario": o.scenario, "file": o.file, "surface": TARGETS[o.file].surface,
             "entry": TARGETS[o.file].entry, "error": o.error}
            for o in outcomes if o.status == "error"]


IDE_SURFACES = ("vscode", "jetbrains")
IDE_TWINS = ("vscode.context-center.json", "jetbrains.context-center.json")
IDE_CASES = "packages/vscode-extension/src/__fixtures__/context-center/cases.json"
IDE_CASES_FILE = "_ide-context-center-cases.json"


def ide_fixture(session: _Session, out: Path) -> dict[str, Any] | None:
    """Copy the IDE Context Center's own shared cases and check both twins against them."""
    src = session.opts.legacy_root / Path(*IDE_CASES.split("/"))
    if not src.is_file():
        return None
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, out / IDE_CASES_FILE)
    return {"file": IDE_CASES_FILE, "source": f"{IDE_CASES}@{session.commit}",
            "selfcheck": session.selfcheck(src)}


def main_progress(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
