"""The Context Center reads null and missing candidate fields, and a numeric-text budget,
the way the plugin does (issue 15's ide-malformed-candidates capture)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from shadow.canonical import canonical_ide, js_safe_integer, legacy_chip_hash
from shadow.fixtures import validate_input

ROOT = Path(__file__).resolve().parents[2]


def _chip(kind: str, source: str, identity: str) -> str:
    return "ctx_" + hashlib.sha256(f"{kind}\n{source}\n{identity}".encode()).hexdigest()[:16]


@pytest.mark.parametrize(("value", "want"), [
    (1024, 1024), ("1024", 1024), (" 1024\n", 1024), ("1e3", 1000), ("0x10", 16), ("", 0),
    ("abc", None), ("Infinity", None), ("1.5", None), (True, None), (2**60, None),
    ("１０２４", None), ("١٢", None)])
def test_budget_text_is_read_like_number(value: object, want: int | None) -> None:
    assert js_safe_integer(value) == want


def test_chip_ids_default_source_label_and_identity_like_the_plugin() -> None:
    assert legacy_chip_hash({"kind": "selection"}, "selection") == _chip(
        "selection", "ide-host", "selection")
    assert legacy_chip_hash({"kind": "memory", "label": "  Notes ", "source": ""},
                            "memory") == _chip("memory", "ide-host", "Notes")
    assert legacy_chip_hash({"kind": "git-diff", "source": "ide.git", "identity": "HEAD"},
                            "git-diff") == _chip("git-diff", "ide.git", "HEAD")


def test_null_text_fields_and_a_text_budget_are_valid_input() -> None:
    doc = {"format": "legacy-capture-input/v1", "scenario": "x", "tags": [], "messages": [],
           "provider_responses": [], "context_center": {
               "workspaceId": None, "tokenBudget": "64",
               "candidates": [{"kind": "diagnostics", "content": None, "label": None,
                               "pinned": True}]}}
    validate_input(doc, "x/input.json", "x")
    ide = canonical_ide("x", doc)
    assert ide.budget == 64 and ide.items[0].content == ""
    null_budget = {**doc, "context_center": {**doc["context_center"], "tokenBudget": None}}
    assert canonical_ide("x", null_budget).budget == 0  # Number(null) is 0


def test_every_bundled_chip_id_is_one_of_its_candidates_variants() -> None:
    for path in sorted((ROOT / "fixtures").glob("*/vscode.context-center.json")):
        doc = json.loads((path.parent / "input.json").read_text(encoding="utf-8"))
        cands = doc["context_center"]["candidates"]
        want = {legacy_chip_hash(c, str(c.get("kind"))) for c in cands if not c.get("id")}
        out = json.loads(path.read_text(encoding="utf-8"))["output"]
        chips = {ch["id"] for ch in out.get("chips", ())}
        explicit = {c["id"] for c in cands if c.get("id")}
        assert chips and chips <= want | explicit, path.parent.name
