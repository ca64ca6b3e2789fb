"""``shadow inventory`` (phase 0) and ``shadow fence-check`` (phase 5) over a legacy
checkout, from one tree-sitter scan (:mod:`shadow.legacy_scan`).

``shadow inventory --legacy-root DIR [--out FILE] [--peer FILE]``
    writes a writers inventory in the peer's ``writers.v1`` shape
    (``chainlesschain.context-memory-writer-inventory/v1``): one entry per scanned surface
    with its files, mutation entry points and stores, its role (``legacy_writer`` when an
    entry point still writes or a writer class lives there, else
    ``projection_consumer``) and a stage read from the fence statuses (any entry point
    ``writing``: ``inventory``; all ``fenced``: ``retired``; else ``legacy_read_only``),
    plus this project's own two entries (the kernel, ``shared``; the app server, ``sdk``).
    Each entry keeps its ``findings`` (file, line, kind, name). ``shadow run --inventory
    FILE`` accepts it. ``--peer`` prints, per surface, how the scan compares with another
    inventory's files and mutation functions.
``shadow fence-check --legacy-root DIR [--out DIR]``
    writes ``fence-check.json`` (every mutation entry point with its status) and
    ``fence-check.xml``, JUnit XML with one ``test_fail_closed[...]`` case per entry point
    (failed while it still writes), to attach as the phase 5 ``legacy.fail_closed``
    evidence (``shadow run --attach fence-check.xml``).  Exit 0 when nothing still
    writes, 1 otherwise, 2 on a usage error.

Both print progress lines on stderr on long scans, and never a file's text.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from shadow.legacy_scan import Finding, Scan, scan

PEER_SCHEMA: Final = "chainlesschain.context-memory-writer-inventory/v1"
SURFACES: Final = ("shared", "session_core", "cli", "desktop", "vscode", "jetbrains", "sdk")
STAGES: Final = ("inventory", "shadow", "internal_canary", "opt_in_canary",
                 "canonical_default", "legacy_read_only", "retired")
OURS: Final = (
    {"id": "shared-canonical-kernel", "surface": "shared", "role": "canonical_runtime",
     "currentStage": "canonical_default", "targetAuthority": "context_memory_kernel",
     "files": ["kernel/planning/planner.py", "kernel/compaction/service.py",
               "kernel/memory/service.py"],
     "mutationFunctions": ["CompactionKernel.compact_context", "MemoryKernel.propose_memory",
                           "MemoryKernel.decide_memory", "MemoryKernel.delete_memory",
                           "MemoryKernel.reconcile"],
     "stores": ["SessionContextPort", "MemoryPort", "ContentPort"],
     "recoveryEntrypoints": ["reconcile"], "disposition": "migrate"},
    {"id": "sdk-app-server-capability", "surface": "sdk", "role": "capability_client",
     "currentStage": "canonical_default", "targetAuthority": "context_memory_kernel",
     "files": ["shadow/app_server/server.py", "shadow/sdk.py"],
     "mutationFunctions": ["thread/compact/start", "memory/propose", "memory/decide",
                           "memory/delete", "reconcile"],
     "stores": [], "recoveryEntrypoints": ["reconcile"], "disposition": "migrate"},
)
_IDS: Final = {"session_core": "session-core-memory-authority"}


def _progress(files: int, rel: str) -> None:
    print(f"scan: {files} files parsed (now {rel.rsplit('/', 1)[0]})", file=sys.stderr)


def _stage(points: Sequence[Finding]) -> str:
    if any(f.status == "writing" for f in points):
        return "inventory"
    if points and all(f.status == "fenced" for f in points):
        return "retired"
    return "legacy_read_only"


def inventory(result: Scan) -> dict[str, Any]:
    """The writers.v1 document of one scan (see the module docstring)."""
    entries: list[dict[str, Any]] = [copy.deepcopy(e) for e in OURS]  # OURS stays as it is
    by_surface: dict[str, list[Finding]] = {}
    for f in result.findings:
        by_surface.setdefault(f.surface, []).append(f)
    for surface in SURFACES:
        found = by_surface.get(surface)
        if found is None or surface in ("shared", "sdk"):
            continue
        points = [f for f in found if f.kind == "entry_point"]
        writes = any(f.status == "writing" for f in points) or any(
            f.kind in ("writer_class", "sql_write") for f in found)
        entries.append({
            "id": _IDS.get(surface, f"{surface}-context-memory"), "surface": surface,
            "role": "legacy_writer" if writes else "projection_consumer",
            "currentStage": _stage(points), "targetAuthority": "context_memory_kernel",
            "files": sorted({f.file for f in found}),
            "mutationFunctions": sorted({f.name for f in points}),
            "stores": ["memory SQL tables"] if any(f.kind == "sql_write" for f in found)
            else [],
            "recoveryEntrypoints": [], "disposition": "migrate",
            "findings": [f.to_wire() for f in found]})
    covered = {e["surface"] for e in entries}
    return {"schema": PEER_SCHEMA, "version": 1,
            "requiredSurfaces": [s for s in SURFACES if s in covered],
            "cutoverStages": list(STAGES),
            "discovery": {"tool": "shadow inventory (tree-sitter)", "filesParsed": result.files,
                          "skipped": list(result.skipped),
                          "missingRoots": list(result.missing_roots)},
            "entries": entries}


def compare(ours: Mapping[str, Any], peer: Mapping[str, Any]) -> list[str]:
    """Per surface: files and mutation functions of ``peer`` the scan found or missed."""
    lines = []
    mine = {e["surface"]: e for e in ours["entries"]}
    for e in peer.get("entries", []):
        s = e.get("surface")
        if s in ("shared", "sdk"):
            continue
        o = mine.get(s, {})
        files, found = set(e.get("files", [])), set(o.get("files", []))
        fns = {f.rsplit(".", 1)[-1] for f in e.get("mutationFunctions", [])}
        got = {f.rsplit(".", 1)[-1] for f in o.get("mutationFunctions", [])}
        lines.append(f"{s}: files {len(files & found)} of {len(files)} the peer lists "
                     f"(+{len(found - files)} more); mutation functions "
                     f"{len(fns & got)} of {len(fns)} (+{len(got - fns)} more)")
    return lines


def fence_report(result: Scan) -> dict[str, Any]:
    points = [f for f in result.findings if f.kind == "entry_point"]
    totals = {s: sum(f.status == s for f in points) for s in ("fenced", "read_only", "writing")}
    return {"schema": "shadow-fence-check/v1", "filesParsed": result.files,
            "missingRoots": list(result.missing_roots), "totals": totals,
            "entries": [f.to_wire() for f in points]}


def junit(report: Mapping[str, Any]) -> bytes:
    cases = report["entries"]
    suite = ET.Element("testsuite", {
        "name": "shadow.fence_check", "tests": str(len(cases)),
        "failures": str(report["totals"]["writing"]), "errors": "0", "skipped": "0"})
    for e in cases:
        case = ET.SubElement(suite, "testcase", {
            "classname": f"shadow.fence_check.{e['surface']}",
            "name": f"test_fail_closed[{e['file']}:{e['name']}]"})
        if e["status"] == "writing":
            ET.SubElement(case, "failure", {
                "message": f"{e['name']} ({e['file']}:{e['line']}) still writes"})
        else:
            ET.SubElement(case, "system-out").text = e["status"]
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    body: bytes = ET.tostring(root, "utf-8")
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + body + b"\n"


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _dumps(doc: Any) -> bytes:
    return (json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=False) + "\n").encode()


def cmd_inventory(args: argparse.Namespace) -> int:
    from shadow.boundary import load_path

    result = scan(args.legacy_root, progress=_progress)
    doc = inventory(result)
    out = Path(args.out)
    _write(out, _dumps(doc))
    for e in doc["entries"]:
        print(f"{e['surface']}: {e['role']}, stage {e['currentStage']}, "
              f"{len(e['files'])} files, {len(e['mutationFunctions'])} mutation functions")
    if args.peer:
        for line in compare(doc, load_path(Path(args.peer))):
            print(f"peer: {line}")
    print(f"inventory: {out}")
    return 0


def cmd_fence_check(args: argparse.Namespace) -> int:
    result = scan(args.legacy_root, progress=_progress)
    report = fence_report(result)
    out = Path(args.out)
    _write(out / "fence-check.json", _dumps(report))
    _write(out / "fence-check.xml", junit(report))
    t = report["totals"]
    for e in report["entries"]:
        if e["status"] == "writing":
            print(f"writing: {e['surface']} {e['name']} ({e['file']}:{e['line']})")
    print(f"entry points: {t['fenced']} fenced, {t['read_only']} read-only, "
          f"{t['writing']} still writing")
    print(f"report: {out / 'fence-check.json'}\nreport: {out / 'fence-check.xml'}")
    return 1 if t["writing"] else 0


def add_commands(sub: Any) -> None:
    i = sub.add_parser("inventory", help="scan a legacy checkout (tree-sitter) for context "
                       "and memory writers; write a writers.v1 inventory (phase 0)")
    i.add_argument("--legacy-root", required=True, metavar="DIR",
                   help="a checkout of the legacy monorepo")
    i.add_argument("--out", default="reports/inventory.json", metavar="FILE",
                   help="the inventory to write (default: reports/inventory.json)")
    i.add_argument("--peer", metavar="FILE", help="another writers inventory to compare with")
    i.set_defaults(func=cmd_inventory)
    f = sub.add_parser("fence-check", help="per legacy mutation entry point: fenced, "
                       "read-only or still writing (phase 5 legacy.fail_closed evidence)")
    f.add_argument("--legacy-root", required=True, metavar="DIR",
                   help="a checkout of the legacy monorepo")
    f.add_argument("--out", default="reports/fence-check", metavar="DIR",
                   help="where fence-check.json and fence-check.xml go "
                        "(default: reports/fence-check)")
    f.set_defaults(func=cmd_fence_check)
