"""Which capture files a scenario gets, and how each one is made (LEGACY.md rules).

A scenario's ``input.json`` decides its surfaces: ``memory_ops`` → session-core memory;
``context_center`` → VS Code and JetBrains; otherwise the CLI compressor (plus a
``raw-wire`` twin when a message carries ``_cc_replay``), CLI provider compaction (plus its
twin) when a ``provider_script`` exists, the Desktop compressor and ContextEngineering,
and the JSONL session store.  When the inputs folder has a ``MANIFEST.json`` that lists the
scenario, its file list is the plan (a recapture makes exactly the files it made before).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["TARGETS", "Job", "Target", "plan", "seed_label"]


@dataclass(frozen=True)
class Target:
    """One legacy entry point and the harness file that drives it."""

    file: str           # capture file name, e.g. ``cli.compress.json``
    surface: str
    entry: str          # ``<repo path>#<export>.<method>`` as the captures name it
    module: str         # the legacy file the entry needs (checked before anything runs)
    driver: str         # harness file (``.mjs`` / ``.cjs`` for Node, ``.java`` for Java)
    label: str          # seed label prefix (``<label>:<scenario>``)
    step_ms: int        # fake clock step per ``Date.now`` call
    variant: str | None = None


_CLI_PC = "packages/cli/src/harness/prompt-compressor.js"
_CLI_PBC = "packages/cli/src/harness/provider-backed-compaction.js"
_CLI_JSONL = "packages/cli/src/harness/jsonl-session-store.js"
_DESK_PC = "desktop-app-vue/src/main/llm/prompt-compressor.js"
_DESK_CE = "desktop-app-vue/src/main/llm/context-engineering.js"
_VSC = "packages/vscode-extension/src/context-center.js"
_JB = "packages/jetbrains-plugin/src/main/java/com/chainlesschain/ide/ContextCenter.java"
_SC = "packages/session-core/lib/memory-store.js"
_RAW = (" (replay scenarios only: _cc_replay fed as a plain field, no runtime provenance)")

TARGETS: Mapping[str, Target] = {t.file: t for t in (
    Target("cli.compress.json", "cli", f"{_CLI_PC}#PromptCompressor.compress", _CLI_PC,
           "cli-compress.mjs", "cli.compress", 0),
    Target("cli.compress.raw-wire.json", "cli", f"{_CLI_PC}#PromptCompressor.compress", _CLI_PC,
           "cli-compress.mjs", "cli.compress", 0, "raw-wire"),
    Target("cli.provider-compaction.json", "cli", f"{_CLI_PBC}#compactConversationWithProvider",
           _CLI_PBC, "cli-provider-compaction.mjs", "cli.provider", 0),
    Target("cli.provider-compaction.raw-wire.json", "cli",
           f"{_CLI_PBC}#compactConversationWithProvider", _CLI_PBC,
           "cli-provider-compaction.mjs", "cli.provider", 0, "raw-wire"),
    Target("desktop.compress.json", "desktop", f"{_DESK_PC}#PromptCompressor.compress", _DESK_PC,
           "desktop-compress.cjs", "desktop.compress", 0),
    Target("desktop.context-engineering.json", "desktop",
           f"{_DESK_CE}#ContextEngineering.buildOptimizedPrompt", _DESK_CE,
           "desktop-context-engineering.mjs", "desktop.ce", 0),
    Target("cli.jsonl-session.json", "cli",
           f"{_CLI_JSONL}#appendCompactEventIfMessagesMatch+rebuildMessages", _CLI_JSONL,
           "cli-jsonl-session.mjs", "cli.jsonl", 1),
    Target("vscode.context-center.json", "vscode", f"{_VSC}#buildContextCenter", _VSC,
           "vscode-context-center.cjs", "vscode.context-center", 0),
    Target("jetbrains.context-center.json", "jetbrains", f"{_JB}#ContextCenter.build", _JB,
           "JetBrainsCapture.java", "jetbrains.context-center", 0),
    Target("session-core.memory.json", "session-core",
           f"{_SC}#MemoryStore (+ trace-store.js#TraceStore, "
           "memory-consolidator.js#MemoryConsolidator.consolidate)", _SC,
           "session-core-memory.cjs", "session-core.memory", 0),
)}

# The order files appear in a scenario's MANIFEST entry (and are captured in).
ORDER: Sequence[str] = (
    "cli.compress.json", "cli.compress.raw-wire.json", "cli.provider-compaction.json",
    "cli.provider-compaction.raw-wire.json", "desktop.compress.json",
    "desktop.context-engineering.json", "cli.jsonl-session.json",
    "vscode.context-center.json", "jetbrains.context-center.json", "session-core.memory.json",
)

RAW_WIRE_NOTE = _RAW


@dataclass(frozen=True)
class Job:
    scenario: str
    target: Target

    @property
    def file(self) -> str:
        return self.target.file


def seed_label(target: Target, scenario: str, repeat: int = 1) -> str:
    """``<surface label>:<scenario>`` (``:raw-wire`` for the twins); later repeats are salted."""
    label = f"{target.label}:{scenario}"
    if target.variant:
        label += f":{target.variant}"
    if repeat > 1:
        label += f"#repeat{repeat}"
    return label


def _has_replay_tag(messages: Any) -> bool:
    return isinstance(messages, list) and any(
        isinstance(m, dict) and "_cc_replay" in m for m in messages)


def files_for(inp: Mapping[str, Any]) -> list[str]:
    """The files the LEGACY.md rules give an input that no earlier manifest lists."""
    if "memory_ops" in inp:
        return ["session-core.memory.json"]
    if "context_center" in inp:
        return ["vscode.context-center.json", "jetbrains.context-center.json"]
    replay = _has_replay_tag(inp.get("messages"))
    files = ["cli.compress.json"]
    if replay:
        files.append("cli.compress.raw-wire.json")
    if "provider_script" in inp:
        files.append("cli.provider-compaction.json")
        if replay:
            files.append("cli.provider-compaction.raw-wire.json")
    files += ["desktop.compress.json", "desktop.context-engineering.json",
              "cli.jsonl-session.json"]
    return files


def plan(scenario: str, inp: Mapping[str, Any], listed: Sequence[str] | None) -> list[Job]:
    """The jobs of one scenario: the manifest's list when given, else the rules."""
    files = list(listed) if listed is not None else files_for(inp)
    known = [f for f in files if f in TARGETS]
    return [Job(scenario, TARGETS[f]) for f in sorted(known, key=ORDER.index)]
