"""``shadow inventory`` and ``shadow fence-check`` on a stand-in legacy tree (JavaScript,
TypeScript and Java parsed with tree-sitter)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from junitparser import JUnitXml

from shadow.cli import main
from shadow.inventory import parse
from shadow.legacy_scan import scan
from shadow.legacy_tools import fence_report, inventory, junit

STORE_JS = """
const fs = require('fs');
class MemoryStore {
  constructor(file) { this.file = file; this.items = new Map(); }
  add(record) { this.items.set(record.id, record); this._save(); }
  get(id) { return this.items.get(id); }
  list() { return [...this.items.values()]; }
  delete(id) { throw new Error('legacy writer fenced: use the kernel'); }
  _save() { fs.writeFileSync(this.file, JSON.stringify(this.list())); }
}
module.exports = { MemoryStore };
"""
CLI_TS = """
import { db } from './db';
export async function compactConversationWithProvider(messages: string[]): Promise<void> {
  assertLegacyWriterFenced('compact');
  db.run("INSERT INTO memories (id) VALUES (?)", [messages.length]);
}
export function addMemory(id: string): void {
  db.run(`INSERT INTO memories (id, content) VALUES (?, ?)`, [id, 'x']);
}
export const readMemory = (id: string) => db.get("SELECT * FROM memories WHERE id = ?", id);
"""
DESKTOP_JS = """
async function search(q) { return window.api.unified_memory_search(q); }
const method = 'session/compact';
"""
JAVA = """
package com.example;
import java.nio.file.Files;
public class ProjectMemory {
  public void save(String text) throws Exception {
    if (fenced) { throw new IllegalStateException("legacy writer is read only"); }
    Files.write(path, text.getBytes());
  }
  public String read() { return "x"; }
}
"""


def _tree(root: Path, *, fenced: bool = False) -> Path:
    files = {
        "packages/session-core/lib/memory-store.js": STORE_JS,
        "packages/cli/src/compaction.ts": CLI_TS,
        "desktop-app-vue/src/main/memory/bridge.js": DESKTOP_JS,
        "packages/jetbrains-plugin/src/main/java/com/example/ProjectMemory.java": JAVA,
        "packages/vscode-extension/src/view.ts": "export const view = () => 1;\n",
        # never scanned: dependencies, tests, declarations
        "packages/cli/src/node_modules/dep/index.js": STORE_JS,
        "packages/cli/src/store.test.js": STORE_JS,
        "packages/cli/src/types.d.ts": "export declare function addMemory(): void;\n",
    }
    if fenced:
        files = {"packages/session-core/lib/memory-store.js": """
class MemoryStore {
  add(r) { throw new Error('retired: MemoryStore is fenced'); }
  update(r) { failClosed('MemoryStore.update'); this.items.set(r.id, r); }
}
"""}
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def test_the_scan_finds_writers_entry_points_sql_and_retired_names(tmp_path: Path) -> None:
    result = scan(_tree(tmp_path))
    got = {(f.surface, f.kind, f.name, f.status) for f in result.findings}
    assert {("session_core", "writer_class", "MemoryStore", ""),
            ("session_core", "entry_point", "MemoryStore.add", "writing"),  # via this._save()
            ("session_core", "entry_point", "MemoryStore.delete", "fenced"),
            ("session_core", "entry_point", "MemoryStore._save", "writing"),
            ("cli", "entry_point", "compactConversationWithProvider", "fenced"),
            ("cli", "entry_point", "addMemory", "writing"),
            ("cli", "sql_write", "INSERT INTO", ""),
            ("desktop", "retired", "unified_memory_search", ""),
            ("desktop", "retired", "session/compact", ""),
            ("jetbrains", "writer_class", "ProjectMemory", ""),
            ("jetbrains", "entry_point", "ProjectMemory.save", "fenced")} <= got
    names = {f.name for f in result.findings}
    assert "MemoryStore.get" not in names and "MemoryStore.list" not in names  # reads
    assert not [f for f in result.findings if "node_modules" in f.file or ".test." in f.file
                or f.file.endswith(".d.ts")]
    assert result.missing_roots == () and result.files == 5
    lines = {(f.file, f.name): f.line for f in result.findings}
    assert lines[("packages/cli/src/compaction.ts", "addMemory")] == 7


def test_the_inventory_is_in_the_peer_shape_and_loads(tmp_path: Path) -> None:
    doc = inventory(scan(_tree(tmp_path / "legacy")))
    inv = parse(json.loads(json.dumps(doc)), "inventory.json")
    assert inv.format == "peer"
    by = {w.surface: w for w in inv.writers}
    assert by["session_core"].role == "legacy_writer" and by["session_core"].stage == "inventory"
    assert by["jetbrains"].stage == "retired"  # its one entry point fails closed
    assert "vscode" not in by  # nothing there writes context or memory
    assert {"shared", "sdk"} <= set(by)  # this project's kernel and app server
    text = json.dumps(doc)
    assert "writeFileSync(this.file" not in text  # names and lines, never source text


def test_fence_check_junit_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    legacy = _tree(tmp_path / "legacy")
    report = fence_report(scan(legacy))
    assert report["totals"]["writing"] >= 3 and report["totals"]["fenced"] >= 3
    xml = tmp_path / "fc.xml"
    xml.write_bytes(junit(report))
    suites = list(JUnitXml.fromfile(str(xml)))
    cases = [c for s in suites for c in s]
    assert len(cases) == len(report["entries"])
    assert all(c.name.startswith("test_fail_closed[") for c in cases)
    assert sum(1 for c in cases if c.result) == report["totals"]["writing"]
    out = tmp_path / "out"
    assert main(["fence-check", "--legacy-root", str(legacy), "--out", str(out)]) == 1
    assert "still writing" in capsys.readouterr().out
    assert json.loads((out / "fence-check.json").read_text(encoding="utf-8")) == report
    fenced = _tree(tmp_path / "fenced", fenced=True)
    assert main(["fence-check", "--legacy-root", str(fenced), "--out", str(out)]) == 0
    assert "0 still writing" in capsys.readouterr().out
    assert main(["fence-check", "--legacy-root", str(tmp_path / "nope"), "--out",
                 str(out)]) == 2


def test_inventory_command_writes_and_compares(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    legacy = _tree(tmp_path / "legacy")
    peer = Path(__file__).resolve().parents[1] / "vectors" / "peer" / "inventory" / \
        "writers.v1.json"
    out = tmp_path / "inv.json"
    assert main(["inventory", "--legacy-root", str(legacy), "--out", str(out),
                 "--peer", str(peer)]) == 0
    text = capsys.readouterr().out
    assert "session_core: legacy_writer, stage inventory" in text
    assert "peer: cli: files" in text
    assert parse(json.loads(out.read_text(encoding="utf-8"))).format == "peer"
