"""``shadow import-sessions PATH… --out DIR``: session stores → fixtures + import report.

Every ``*.jsonl`` file under each PATH (a file, or a folder searched recursively; hidden
entries skipped) is one session, processed in name order.  A session that fails
verification is quarantined (:mod:`shadow.import_.store`) and the others go on; each
compact event of a verified session becomes one scenario (:mod:`shadow.import_.session`).
``DIR`` receives ``<scenario>/input.json``, ``<scenario>/cli.jsonl-session.json``
(+ ``cli.compress.json``), ``MANIFEST.json`` and ``import-report.json``; it is written
through :func:`shadow.outdir.staged` (seen only complete; an existing folder is replaced
only when it holds an earlier ``import-report.json``), and the written corpus is loaded
with :func:`shadow.fixtures.load_corpus` before it is swapped in — a fixture ``shadow
run`` would quarantine is never written.

The same inputs give the same bytes: no clock, no absolute path, sorted order.  Session
files are named by their path relative to the PATH argument (a file argument: its name),
redacted like everything else, so no home folder reaches a fixture or the report.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from shadow.errors import InputError, ShadowError
from shadow.fixtures import MANIFEST_FORMAT, load_corpus
from shadow.import_.build import COMPRESS_ENTRY, STORE_ENTRY, TOOL
from shadow.import_.redact import Redactor, by_category
from shadow.import_.session import SessionImport, import_session
from shadow.import_.store import Quarantine, SessionFile, read_session
from shadow.outdir import staged

REPORT: Final = "import-report.json"
REPORT_FORMAT: Final = "shadow-import-report/v1"
EXIT_OK, EXIT_INCOMPLETE = 0, 1
Progress = Callable[[int, int, str], None]
_SLUG = re.compile(r"[^a-z0-9]+")
_ENTRIES: Final = {"cli.jsonl-session.json": STORE_ENTRY, "cli.compress.json": COMPRESS_ENTRY}


@dataclass(frozen=True, slots=True)
class SessionPath:
    path: Path
    label: str  # relative to its PATH argument, POSIX separators


@dataclass
class ImportResult:
    out: Path
    report: dict[str, Any]
    exit_code: int
    lines: list[str] = field(default_factory=list)


def _hidden(rel: Path) -> bool:
    return any(part.startswith(".") for part in rel.parts)


def discover(paths: Sequence[str | Path]) -> list[SessionPath]:
    """The session files named by the PATH arguments (missing PATH: :class:`InputError`)."""
    found: dict[Path, SessionPath] = {}
    for index, arg in enumerate(paths, start=1):
        root = Path(arg)
        if root.is_dir():
            files = sorted(p for p in root.rglob("*.jsonl")
                           if not _hidden(p.relative_to(root)) and not p.is_dir())
            pairs = [(p, p.relative_to(root).as_posix()) for p in files]
        elif root.is_file() or root.is_symlink():
            pairs = [(root, root.name)]
        else:
            raise InputError(root, "", "PATH: a session file (*.jsonl) or a folder of them",
                             "no such file or folder")
        for p, label in pairs:
            key = p.resolve()
            if key not in found:
                taken = {s.label for s in found.values()}
                found[key] = SessionPath(p, label if label not in taken else f"{label}#{index}")
    return list(found.values())


def slug_of(name: str, label: str, taken: set[str]) -> str:
    """A scenario-name stem from a (redacted) session name, unique among ``taken`` (a
    clash gets a digest of the file's redacted label)."""
    slug = _SLUG.sub("-", name.lower()).strip("-")[:60].strip("-") or "session"
    slug = slug if slug[0].isalpha() else f"s-{slug}"
    base, salt = slug, label
    while slug in taken:
        salt = hashlib.sha256(salt.encode("utf-8")).hexdigest()
        slug = f"{base}-h{salt[:8]}"
    taken.add(slug)
    return slug


def dumps(doc: Any) -> bytes:
    """JSON as the fixtures are written: indent 2, UTF-8, final newline (a lone surrogate,
    which UTF-8 cannot hold, is written escaped)."""
    try:
        return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(doc, indent=2, ensure_ascii=True) + "\n").encode("utf-8")


def _manifest_entry(scenario: str, docs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    inp = docs["input.json"]
    return {
        "id": scenario, "kind": "messages", "description": inp["description"],
        "tags": list(inp["tags"]), "model": inp.get("model"),
        "message_count": len(inp["messages"]), "provider_exchanges": 0,
        "surfaces": [{"file": f, "surface": "cli", "entry": _ENTRIES[f], "status": "ok",
                      "error": None} for f in sorted(docs) if f != "input.json"],
    }


def manifest(fixtures: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    return {
        "format": MANIFEST_FORMAT, "source": TOOL, "legacy_commit": "unknown",
        "files": {"input.json": "legacy-capture-input/v1", **_ENTRIES},
        "determinism": {"source": "imported", "note": "captured by the legacy CLI in users' "
                        "session stores; redacted and re-chained at import, not run"},
        "scenarios": [_manifest_entry(s, fixtures[s]) for s in sorted(fixtures)],
    }


def _session_entry(s: SessionImport | Quarantine) -> dict[str, Any]:
    if isinstance(s, Quarantine):
        return {"file": s.file, "status": "quarantined", "events": 0, "compact_events": 0,
                "fixtures": []}
    return {"file": s.file, "status": "imported", "events": s.events,
            "compact_events": s.compact_events, "fixtures": sorted(s.fixtures)}


def build_report(results: Sequence[SessionImport | Quarantine]) -> dict[str, Any]:
    imported = [r for r in results if isinstance(r, SessionImport)]
    skipped = [r for r in results if isinstance(r, Quarantine)]
    skipped += [q for r in imported for q in r.skipped]
    counts: dict[str, int] = {}
    for r in imported:
        for rule, n in r.redactions.items():
            counts[rule] = counts.get(rule, 0) + n
    return {
        "format": REPORT_FORMAT, "tool": TOOL,
        "totals": {"sessions": len(results), "sessions_imported": len(imported),
                   "sessions_quarantined": len(results) - len(imported),
                   "events": sum(r.events for r in imported),
                   "compact_events": sum(r.compact_events for r in imported),
                   "fixtures": sum(len(r.fixtures) for r in imported),
                   "skipped": len(skipped)},
        "redactions": dict(sorted(counts.items())),
        "redactions_by_category": by_category(counts),
        "sessions": [_session_entry(r) for r in results],
        "skipped": [q.to_wire() for q in sorted(skipped, key=lambda q: (q.file, q.line))],
    }


def summary(report: Mapping[str, Any], out: Path) -> list[str]:
    t = report["totals"]
    cats = ", ".join(f"{k} {v}" for k, v in report["redactions_by_category"].items())
    lines = [f"sessions: {t['sessions']} read, {t['sessions_imported']} imported, "
             f"{t['sessions_quarantined']} quarantined; events: {t['events']}, compact "
             f"events: {t['compact_events']}, fixtures: {t['fixtures']}",
             f"redactions: {cats or 'none'}"]
    lines += [f"skipped: {q['file']} line {q['line']}: {q['reason']}"
              + (f" ({q['detail']})" if q.get("detail") else "") for q in report["skipped"]]
    return [*lines, f"fixtures: {out.as_posix()}", f"report: {(out / REPORT).as_posix()}"]


def _read(sp: SessionPath) -> SessionFile | Quarantine:
    found = read_session(sp.path, sp.label)
    if isinstance(found, Quarantine):  # the report names the file redacted, as every file
        return Quarantine(Redactor().text(found.file), found.line, found.reason, found.detail)
    return found


def _write(out: Path, fixtures: Mapping[str, Mapping[str, Any]], report: Mapping[str, Any]
           ) -> Path:
    with staged(out, marker=REPORT, what="--out") as stage:
        for scenario, docs in sorted(fixtures.items()):
            (stage.path / scenario).mkdir()
            for fname, doc in sorted(docs.items()):
                (stage.path / scenario / fname).write_bytes(dumps(doc))
        (stage.path / "MANIFEST.json").write_bytes(dumps(manifest(fixtures)))
        (stage.path / REPORT).write_bytes(dumps(report))
        if fixtures:
            corpus = load_corpus(stage.path)
            if corpus.quarantined or len(corpus.scenarios) != len(fixtures):
                raise ShadowError(f"import-sessions: the written corpus does not load "
                                  f"({len(corpus.quarantined)} quarantined); nothing written")
        return stage.commit()


def import_sessions(paths: Sequence[str | Path], out: str | Path,
                    progress: Progress | None = None) -> ImportResult:
    """Import every session named by ``paths`` into ``out``; exit 1 when any session was
    quarantined or any compact event skipped, 0 when everything was imported."""
    if not paths:
        raise InputError("PATH", "", "at least one session file or folder", "none")
    found = discover(paths)
    if not found:
        raise InputError(", ".join(str(p) for p in paths), "",
                         "PATH: at least one session file (*.jsonl)", "none found")
    taken: set[str] = set()
    results: list[SessionImport | Quarantine] = []
    for done, sp in enumerate(found, start=1):
        session = _read(sp)
        if isinstance(session, SessionFile):
            slug = slug_of(Redactor().text(session.name), Redactor().text(sp.label), taken)
            results.append(import_session(session, slug))
        else:
            results.append(session)
        if progress is not None:
            progress(done, len(found), "sessions")
    fixtures = {k: v for r in results if isinstance(r, SessionImport)
                for k, v in r.fixtures.items()}
    report = build_report(results)
    target = _write(Path(out), fixtures, report)
    code = EXIT_INCOMPLETE if report["skipped"] else EXIT_OK
    return ImportResult(target, report, code, summary(report, Path(out)))
