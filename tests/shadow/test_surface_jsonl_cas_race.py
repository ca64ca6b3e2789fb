"""The CLI JSONL surface reader on a CAS-race capture (``session_store.cas_race``): the
second writer's message (``steps[k].concurrent_writer``) is neither input nor derived by
the store, so it is left out of the matching; the refused settlement stays a fact."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from shadow.canonical import canonicalize
from shadow.fixtures import load_corpus
from shadow.projection import Projection
from shadow.surfaces import adapter_for

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = "parallel-tool-calls"
FILE = "cli.jsonl-session.json"
OTHER = {"role": "user", "content": "a message of the other writer"}
STALE = {"name": "Error", "message": "Session messages changed; refresh before compacting",
         "code": "SESSION_REVISION_STALE"}


def _project(folder: Path) -> Projection:
    s = next(x for x in load_corpus(folder).scenarios if x.name == SCENARIO)
    cap = next(c for c in s.captures if c.name == "cli.jsonl-session")
    adapt = adapter_for(cap.name)
    assert adapt is not None
    siblings = {c.name: c for c in s.captures}
    return adapt(canonicalize(SCENARIO, s.input), cap, siblings)  # type: ignore[call-arg]


def _corpus(tmp: Path, edit: Any = None) -> Path:
    folder = tmp / "corpus"
    shutil.copytree(ROOT / "fixtures" / SCENARIO, folder / SCENARIO)
    if edit is not None:
        path = folder / SCENARIO / FILE
        doc = json.loads(path.read_text(encoding="utf-8"))
        edit(doc["output"])
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return folder


def _race(out: dict[str, Any]) -> None:
    """As the harness records a race: the other writer's message lands before the CAS."""
    step = out["steps"][0]
    step["concurrent_writer"] = {"type": "user_message", "data": OTHER}
    step["settlement"], step["settlement_error"] = None, STALE
    verified = step["readVerifiedMessages_before"] + [OTHER]
    prov = step["readVerifiedMessages_before_provenance"] + [None]
    out["raw_jsonl_lines"] = out["raw_jsonl_lines"][:-1]  # the compact was never written
    for key in ("rebuildMessages", "readVerifiedMessages"):
        out[key] = verified
    out["readVerifiedMessages_provenance"] = prov


def test_concurrent_writes_are_left_out_of_the_matching(tmp_path: Path) -> None:
    before = _project(_corpus(tmp_path / "a"))
    raced = _project(_corpus(tmp_path / "b", _race))
    assert raced.status == before.status
    assert not [it for it in raced.items if it.origin != "input"]  # nothing derived
    assert raced.noise["concurrent_writes"] == 1 and "concurrent_writes" not in before.noise
    assert raced.facts["settlement"] == "stale" and before.facts["settlement"] == "ok"
    assert raced.facts["replay"] == "consistent"
    assert raced.writers == ()  # the refused compact was not a write of this run
