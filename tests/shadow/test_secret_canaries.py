"""Secret canaries planted in copied inputs never appear in any output file."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

from shadow.run import RunOptions, execute

ROOT = Path(__file__).resolve().parents[2]
CANARY_PLAIN = "CANARYPLAINQ7Z3"
CANARY_KEY = "sk-proj-CANARYk3yQ7Z3x9v8w7u6t5s4r3q2p1"
CANARY_PASSWORD = "password=CanaryPw0rd!9"
#: (scenario, a word that occurs inside message / candidate / memory contents)
PLANTS = [
    ("secrets-in-tool-output", "webhook"),
    ("provider-summary-ok", "checkout"),
    ("prompt-injection-web-fetch", "pool"),
    ("ide-windows-paths-many-candidates", "export"),
    ("memory-update-remove", "Node"),
    ("memory-consolidate-trace", "linter"),
    ("pinned-messages", "computeOrderTotals"),
]


def plant(tmp: Path) -> Path:
    root = tmp / "fixtures"
    for name, word in PLANTS:
        shutil.copytree(ROOT / "fixtures" / name, root / name)
        for path in (root / name).glob("*.json"):
            text = path.read_text(encoding="utf-8")
            canary = f"{word} {CANARY_PLAIN} {CANARY_KEY} {CANARY_PASSWORD}"
            path.write_text(text.replace(word, canary), encoding="utf-8")
    return root


def test_no_canary_in_any_output(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    fixtures = plant(tmp_path)
    assert CANARY_KEY in (fixtures / "secrets-in-tool-output" / "input.json").read_text()
    out, rec = tmp_path / "out", tmp_path / "recorded"
    res = execute(RunOptions(fixtures=str(fixtures), out=str(out), record_candidate=str(rec),
                             now=dt.datetime(2026, 9, 1, tzinfo=dt.UTC)))
    print("\n".join(res.lines))
    assert res.report["totals"]["fixtures"] == len(PLANTS)
    files = [p for p in (*out.rglob("*"), *rec.rglob("*")) if p.is_file()]
    assert len(files) > len(PLANTS)
    captured = capsys.readouterr()
    for text in [p.read_text(encoding="utf-8") for p in files] + [captured.out, captured.err]:
        for canary in (CANARY_PLAIN, "CANARYk3y", "CanaryPw0rd"):
            assert canary.lower() not in text.lower()
