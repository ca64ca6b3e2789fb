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

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shadow import noise_rules
from shadow.capture import jsjson
from shadow.capture.manifest import manifest_document
from shadow.capture.noise import Learned, Merged, update_policy
from shadow.capture.plan import TARGETS, Job, Target, plan, seed_label
from shadow.outdir import staged

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
    status = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                             "--untracked-files=no"], capture_output=True, text=True,
                            timeout=60, check=False)
    # a tracked file changed: the captures are not of that commit, and say so
    return f"{text}-dirty" if status.returncode != 0 or status.stdout.strip() else text


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


def _check_out(opts: CaptureOptions) -> None:
    """``--out`` is replaced as a whole when the capture is complete: never the inputs (an
    ``--only`` recapture would drop every other scenario), nor a folder inside them."""
    out, inputs = opts.out.resolve(), opts.inputs.resolve()
    if out == inputs or inputs in out.parents or out in inputs.parents:
        raise CaptureError(f"--out {opts.out}: must not be --inputs, inside it or around it "
                           "(capture into a fresh folder, then replace the inputs with it)")
    if opts.repeat <= 1 and (opts.noise_rules is not None or opts.keep_repeats is not None):
        raise CaptureError("--noise-rules and --keep-repeats only mean something with "
                           "--repeat N (N >= 2)")


def _check_entries(root: Path, jobs: Iterable[Job], classpath: str | None) -> None:
    missing = sorted({j.target.module for j in jobs
                      if not (root / Path(*j.target.module.split("/"))).is_file()})
    if missing:
        raise CaptureError("legacy entry point missing under " f"{root}: {', '.join(missing)}")
    if not any(j.target.surface == "jetbrains" for j in jobs):
        return
    if classpath is None:
        raise CaptureError("jetbrains.context-center.json needs --jetbrains-classpath "
                           "(the plugin's classes, built by you from your checkout)")
    if not _classpath_has(classpath, JETBRAINS_CLASS):
        raise CaptureError(f"--jetbrains-classpath {classpath}: no {JETBRAINS_CLASS} in any "
                           "of its folders or jars (the JetBrains plugin's compiled classes, "
                           "e.g. its build/classes/java/main)")


JETBRAINS_CLASS = "com/chainlesschain/ide/ContextCenter.class"


def _classpath_has(classpath: str, member: str) -> bool:
    """Whether a class file is on a Java classpath (folders and jars, ``os.pathsep``)."""
    for entry in (e for e in classpath.split(os.pathsep) if e):
        p = Path(entry)
        if p.is_dir() and (p / Path(*member.split("/"))).is_file():
            return True
        if p.is_file() and zipfile.is_zipfile(p):
            with zipfile.ZipFile(p) as jar:
                if member in jar.namelist():
                    return True
    return False


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

    def close(self) -> None:
        """Remove the compiled Java harness (a temporary folder of this session)."""
        if self.java_build is not None:
            shutil.rmtree(self.java_build, ignore_errors=True)
            self.java_build = None

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
        with _scratch() as tmp:
            home = Path(tmp) / "home"
            home.mkdir()
            req = self.request(job, "{}", {})
            req.update({"mode": "selfcheck", "cases": str(cases), "sandbox": str(home)})
            try:
                done = _run_bounded(self.command(job, Path(tmp)),
                                    json.dumps(req).encode("utf-8"), self.opts.timeout_s,
                                    _sandbox_env(home, {}), home)
            except _TimedOut:
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
        with _scratch() as tmp:
            home = Path(tmp) / "home"
            home.mkdir()
            req = self.request(job, input_text, sources)
            req["sandbox"] = str(home)
            try:
                done = _run_bounded(self.command(job, Path(tmp)),
                                    json.dumps(req).encode("utf-8"), self.opts.timeout_s,
                                    _sandbox_env(home, inp), home)
            except _TimedOut:
                return Outcome(job.scenario, job.file, "capture-error",
                               {"reason": "timeout", "seconds": self.opts.timeout_s})
            except OSError as exc:
                raise CaptureError(f"cannot start the capture of {job.file}: {exc}") from exc
        return _outcome(job, done)


def _scratch() -> tempfile.TemporaryDirectory[str]:
    """A capture's scratch folder; on Windows a killed process may hold it a moment."""
    return tempfile.TemporaryDirectory(prefix="shadow-capture-", ignore_cleanup_errors=True)


class _TimedOut(Exception):
    pass


def _run_bounded(cmd: Sequence[str], stdin: bytes, timeout_s: float, env: Mapping[str, str],
                 cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """Run one capture process; on timeout kill it *and its children* (its own process
    group: ``start_new_session`` on POSIX, a new process group and ``taskkill /T`` on
    Windows), so a grandchild holding the pipes cannot hang the run."""
    kwargs: dict[str, Any] = {}
    if os.name == "nt":
        kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
    else:
        kwargs["start_new_session"] = True
    proc = subprocess.Popen(list(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(env), cwd=str(cwd), **kwargs)
    try:
        out, err = proc.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_tree(proc)
        proc.communicate()
        raise _TimedOut from None
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    if os.name == "nt":
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(proc.pid)], capture_output=True,
                       check=False)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()


def _nth(values: Sequence[Any], i: int) -> Any:
    return values[i] if i < len(values) else None


def _outcome(job: Job, done: subprocess.CompletedProcess[bytes]) -> Outcome:
    # "\n" only: str.splitlines() would also cut at U+2028/U+2029 and other separators
    # that JSON.stringify leaves unescaped inside the envelope's strings.
    try:
        lines = done.stdout.decode("utf-8").strip().split("\n")
        env = json.loads(lines[-1]) if lines else None
    except ValueError:  # not UTF-8, or not JSON: nothing we could trust byte for byte
        env = None
    if not isinstance(env, dict):
        return Outcome(job.scenario, job.file, "capture-error",
                       {"reason": "no-envelope", "exit": done.returncode,
                        "stderr_bytes": len(done.stderr)})
    network = env.get("network")
    if network:
        attempts = network if isinstance(network, list) else [network]
        kinds = sorted({str(a.get("kind")) for a in attempts if isinstance(a, dict)})
        return Outcome(job.scenario, job.file, "capture-error",
                       {"reason": "network-attempt", "attempts": len(attempts),
                        "kinds": kinds})
    if "harness_error" in env:
        he = env["harness_error"] if isinstance(env["harness_error"], dict) else {}
        return Outcome(job.scenario, job.file, "capture-error",
                       {"reason": "harness", "stage": he.get("stage"), "name": he.get("name"),
                        "code": he.get("code")})
    if done.returncode != 0:  # an envelope and then a crash: not a capture to trust
        return Outcome(job.scenario, job.file, "capture-error",
                       {"reason": "exit", "exit": done.returncode})
    text = env.get("text")
    try:
        doc = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        doc = None
    exchanges = env.get("exchanges") or []
    if not isinstance(doc, dict) or not isinstance(exchanges, list):
        return Outcome(job.scenario, job.file, "capture-error", {"reason": "no-text"})
    err = doc.get("error")
    return Outcome(job.scenario, job.file, "error" if err else "ok", err, list(exchanges), text)


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
    """A file's manifest entry.  A failed capture stays listed (``capture-error``, its file
    absent): the fixture loader quarantines the scenario and a recapture plans it again."""
    t = TARGETS[o.file]
    status = {"ok": "ok", "error": "error"}.get(o.status, "capture-error")
    return {"file": o.file, "surface": t.surface, "entry": t.entry, "status": status,
            "error": o.error}


def load_input(path: Path) -> tuple[str, dict[str, Any]]:
    """``input.json``'s text and object; a file that is not UTF-8 JSON holding an object is
    a usage error naming the file and what was expected."""
    try:
        text = path.read_bytes().decode("utf-8")
        doc = json.loads(text)
    except (OSError, ValueError) as exc:
        raise CaptureError(f"{path}: expected a legacy-capture-input/v1 JSON object in "
                           f"UTF-8 without a byte-order mark ({type(exc).__name__}: "
                           f"{str(exc)[:120]})") from exc
    if not isinstance(doc, dict):
        raise CaptureError(f"{path}: expected a legacy-capture-input/v1 JSON object, got "
                           f"{type(doc).__name__}")
    return text, doc


#: a scenario as the capture reads it once: its name, input.json's text and object
Scenario = tuple[str, str, dict[str, Any]]


def capture_scenario(session: _Session, scenario: Scenario, listed: Sequence[str] | None
                     ) -> tuple[dict[str, Any], list[Outcome]]:
    name, input_text, inp = scenario
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
    entry["surfaces"] = [_entry_record(o) for o in outcomes]
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
    scenarios: list[Scenario] = [(n, *load_input(p))
                                 for n, p in _scenarios(opts.inputs, opts.only, list(listed))]
    jobs = [j for n, _text, doc in scenarios for j in plan(n, doc, listed.get(n))]
    _check_entries(root, jobs, opts.jetbrains_classpath)
    _check_out(opts)
    noise_file = opts.noise_rules
    if opts.repeat > 1 and noise_file is None:
        raise CaptureError("--repeat needs --noise-rules FILE: the reviewed rule file the "
                           "learned fields are merged into (this project's: "
                           "shadow/policy/noise.v1.json)")
    if noise_file is not None:
        if not noise_file.is_file():
            raise CaptureError(f"--noise-rules {noise_file}: no such file (merge into an "
                               "existing rule file, e.g. a copy of "
                               "shadow/policy/noise.v1.json; a typo never starts a new one)")
        noise_rules.load(noise_file)  # a broken rule file fails before anything runs
    commit = legacy_commit(root, opts.legacy_commit)
    node = node_version(opts.node)
    with staged(opts.out, marker="MANIFEST.json", what="--out") as stage:
        # written into a staging folder and swapped in complete: no earlier file survives
        first = _capture_all(opts, commit, node, scenarios, listed, stage.path, say)
        stage.commit()
    return first


def _capture_all(opts: CaptureOptions, commit: str, node: str,
                 scenarios: Sequence[Scenario], listed: Mapping[str, list[str]],
                 out: Path, say: Callable[[str], None]) -> CaptureResult:
    noise_file = opts.noise_rules
    session = _Session(opts, commit, 1, node)
    try:
        first = _capture_run(session, scenarios, listed, out, node, say, opts.inputs)
    finally:
        session.close()
    for k in range(2, max(1, opts.repeat) + 1):
        # a control run: other clock origin, other seeds; kept only until it is learned from
        with tempfile.TemporaryDirectory(prefix=f"shadow-capture-repeat-{k}-") as tmp:
            where = opts.keep_repeats / f"repeat-{k}" if opts.keep_repeats else Path(tmp)
            control = _Session(opts, commit, k, node)
            try:
                again = _capture_run(control, scenarios, listed, where, node, say,
                                     opts.inputs)
            finally:
                control.close()
            first.capture_errors_of_repeats.extend(again.capture_errors)
            assert noise_file is not None
            learned, merged = update_policy(out, where, noise_file)
        first.noise.append((learned, merged))
        say(f"noise: repeat {k}: {len(learned.fields)} volatile fields, "
            f"{len(merged.added)} new rules (unreviewed), {len(merged.confirmed)} confirmed, "
            f"{len(learned.problems)} problems -> {noise_file}")
    return first


def _capture_run(session: _Session, scenarios: Sequence[Scenario],
                 listed: Mapping[str, list[str]], out: Path, node: str,
                 say: Callable[[str], None], inputs: Path) -> CaptureResult:
    entries: list[dict[str, Any]] = []
    outcomes: list[Outcome] = []
    for n, scenario in enumerate(scenarios, 1):
        name = scenario[0]
        got, outs = capture_scenario(session, scenario, listed.get(name))
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
    outcomes += _selfcheck_failures(ide)
    failed = [{"scenario": o.scenario, "file": o.file, "problem": o.error}
              for o in outcomes if o.status == "capture-error"]
    if failed:  # only a failed capture has this key; a clean one is fixtures/' format
        manifest["capture_errors"] = failed
    write_text(out / "MANIFEST.json", jsjson.dumps(manifest))
    return CaptureResult(outcomes, manifest)


def _selfcheck_failures(ide: Mapping[str, Any] | None) -> list[Outcome]:
    """A twin that could not answer the IDE self-check (``null``) is a capture error."""
    rows = ide.get("selfcheck") if isinstance(ide, Mapping) else None
    out = []
    for twin, key in zip(IDE_TWINS, ("vscode_matches_expected", "jetbrains_matches_expected"),
                         strict=True):
        if isinstance(rows, list) and any(not isinstance(r, Mapping) or r.get(key) is None
                                          for r in rows):
            out.append(Outcome(IDE_CASES_FILE, twin, "capture-error",
                               {"reason": "selfcheck", "twin": TARGETS[twin].surface}))
    return out


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
