"""Kernel self-check used by the main job until the shadow replay lands."""

from __future__ import annotations

import json
import platform
from pathlib import Path

from kernel import digest as kdigest


def run_selfcheck(out: Path) -> tuple[str, list[str]]:
    vectors_path = Path(__file__).resolve().parent.parent / "tests" / "vectors" / "digests.json"
    checked = failed = 0
    if vectors_path.is_file():
        doc = json.loads(vectors_path.read_text(encoding="utf-8"))
        for case in doc["cases"]:
            checked += 1
            if kdigest.digest(case["value"], case["domain"]) != case["digest"]:
                failed += 1
    verdict = "GO" if checked and not failed else "NO-GO"
    out.mkdir(parents=True, exist_ok=True)
    report = {
        "schema": "kernel-selfcheck/v1",
        "verdict": verdict,
        "digestVectors": {"checked": checked, "failed": failed},
        "python": platform.python_version(),
    }
    path = out / "selfcheck.json"
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return verdict, [f"digest vectors: {checked} checked, {failed} failed", f"report: {path}"]
