"""The ``MANIFEST.json`` of a capture folder (``legacy-capture-manifest/v1``).

The descriptive blocks (what each file is, the common fields, what determinism handles,
how the capture was made) are the format's fixed text, kept as data in
``manifest-format.json``: a recapture writes them exactly as ``fixtures/`` has them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["LEGACY_REPO", "manifest_document"]

LEGACY_REPO = "chainlesschain/chainlesschain"
FORMAT_FILE = Path(__file__).resolve().parent / "manifest-format.json"


def manifest_document(commit: str, node: str, entries: Sequence[Mapping[str, Any]],
                      errored: Sequence[Mapping[str, Any]],
                      ide_fixture: Mapping[str, Any] | None) -> dict[str, Any]:
    """The manifest: fixed blocks, then scenarios in capture order, errors, the IDE check."""
    fixed = json.loads(FORMAT_FILE.read_text(encoding="utf-8"))
    doc: dict[str, Any] = {"format": "legacy-capture-manifest/v1", "legacy_repo": LEGACY_REPO,
                           "legacy_commit": commit, "node": node}
    for key in ("files", "file_naming", "common_fields", "determinism"):
        doc[key] = fixed[key]
    doc["scenarios"] = [dict(e) for e in entries]
    doc["errored"] = [dict(e) for e in errored]
    if ide_fixture is not None:
        doc["ide_fixture"] = dict(ide_fixture)
    doc["capture"] = fixed["capture"]
    return doc
