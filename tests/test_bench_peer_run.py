"""``python -m benchmarks --peer DIR``: a fake peer script (node), no timing.

The fake prints a canned receipt of the peer's schema; our workers are replaced by canned
results, so the runner's order (peer, ours, peer), the parsing, the ratios and the errors
are checked in well under a second per test.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchmarks import peer_run, runner

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


def receipt(scale: float) -> dict[str, Any]:
    """The peer's receipt shape (``release`` profile, a subset of its fields)."""
    return {
        "schema": peer_run.PEER_SCHEMA,
        "status": "passed",
        "profile": "release",
        "nodeVersion": "v0.0.0-fake",
        "candidateSha": "0" * 40,
        "startedAt": "2026-12-01T00:00:00.000Z",
        "digest": "sha256:" + "1" * 64,
        "measurements": {
            "contextPlan": [
                {"itemCount": 1000, "samples": 7, "p50Ms": 20.0 * scale},
                {"itemCount": 10000, "samples": 7, "p50Ms": 200.0 * scale},
            ],
            "messageCompaction": [{"messageCount": 1000, "durationMs": 60.0 * scale}],
            "toolResultCompaction": [{"sizeMiB": 10, "contentStoreMs": 10.0 * scale}],
            "compactionCas": {"messageCount": 1000, "raceMs": 110.0 * scale,
                              "recomputeMs": 10.0 * scale},
            "memoryRecall": [{"recordCount": 100000, "lexicalRecallMs": 2000.0 * scale}],
            "deletionConvergence": [{"recordCount": 10000, "convergenceMs": 4000.0 * scale}],
        },
    }


def fake_peer(root: Path, *, fail: bool = False) -> Path:
    """A peer folder whose benchmark script writes receipt(1.0), then receipt(3.0)."""
    (root / "scripts").mkdir(parents=True)
    (root / "package.json").write_text(
        json.dumps({"name": "@chainlesschain/context-memory-kernel", "version": "9.9.9"}),
        encoding="utf-8",
    )
    canned = json.dumps([receipt(1.0), receipt(3.0)])
    body = (
        'import { appendFileSync, existsSync, writeFileSync } from "node:fs";\n'
        'const runs = existsSync("calls.log") ? 1 : 0; appendFileSync("calls.log", "peer\\n");\n'
        + ('process.stderr.write("boom: not a clean checkout\\n"); process.exit(3);\n'
           if fail else "")
        + 'const out = process.argv[process.argv.indexOf("--output") + 1];\n'
        f"writeFileSync(out, JSON.stringify({canned}[runs]));\n"
    )
    (root / peer_run.PEER_SCRIPT).write_text(body, encoding="utf-8")
    return root


OURS = {
    ("plan", 10000): 50.0,
    ("compaction", 1000): 20.0,
    ("cas_race", 1000): 40.0,
    ("content_put", 10): 8.0,
    ("recall_lexical", 100000): 4.0,
    ("deletion", 10000): 800.0,
}


def canned_worker(log: Path) -> Any:
    def run(name: str, n: int, samples: int) -> dict[str, Any]:
        with log.open("a", encoding="utf-8") as fh:
            fh.write(f"ours {name} {n}\n")
        p50 = OURS.get((name, n), 1.0)
        return {"workload": name, "n": n, "samples": samples, "p50_ms": p50}

    return run


@needs_node
def test_peer_run_before_and_after_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    peer = fake_peer(tmp_path / "peer")
    monkeypatch.setattr(runner, "_run_worker", canned_worker(peer / "calls.log"))
    out = tmp_path / "bench.json"
    code = runner.main(["--peer", str(peer), "--only", "plan", "--only", "cas_race",
                        "--only", "deletion", "--out", str(out)])
    assert code == 0
    calls = (peer / "calls.log").read_text(encoding="utf-8").split("\n")[:-1]
    assert calls[0] == "peer" and calls[-1] == "peer"
    assert all(c.startswith("ours ") for c in calls[1:-1]) and len(calls) == 2 + 6

    doc = json.loads(out.read_text(encoding="utf-8"))
    section = doc["peer_run"]
    assert section["peer_version"] == "9.9.9"
    assert section["before"]["figures"]["plan:10000"]["ms"] == 200.0
    assert section["after"]["figures"]["plan:10000"]["ms"] == 600.0
    assert section["before"]["node_version"] == "v0.0.0-fake"
    ratios = section["ratios"]
    # peer = median of before (×1) and after (×3) = ×2
    assert ratios["plan:10000"]["peer_ms"] == 400.0
    assert ratios["plan:10000"]["ratio"] == 50.0 / 400.0
    assert ratios["plan:10000"]["peer_ms_by_run"] == {"before": 200.0, "after": 600.0}
    # the race is raceMs + recomputeMs (ours times all three compactions); race-only beside it
    assert ratios["cas_race:1000"]["peer_ms"] == 240.0
    assert ratios["cas_race:1000"]["ratio"] == round(40.0 / 240.0, 4)
    assert ratios["cas_race:1000"]["ratio_race_only"] == round(40.0 / 220.0, 4)
    assert ratios["deletion:10000"]["ratio"] == 0.1 and ratios["deletion:10000"]["like_for_like"]
    # sizes the peer did not measure, and workloads not run, have no ratio
    assert "deletion:1" not in ratios and "compaction:1000" not in ratios
    by_key = {(r["workload"], r["n"]): r for r in doc["results"]}
    assert by_key[("plan", 10000)]["ratio_to_peer_run"] == 0.125
    assert by_key[("plan", 10000)]["ratio_to_peer"] == round(50.0 / 196.0, 4)  # published
    assert by_key[("plan", 1000)]["ratio_to_peer_run"] == round(1.0 / 40.0, 4)
    assert "ratio_to_peer_run" not in by_key[("deletion", 1)]


def test_figures_parse_every_pairing() -> None:
    figs = peer_run.figures(receipt(1.0))
    assert figs == {
        "plan:1000": {"ms": 20.0, "parts": {"p50Ms": 20.0}},
        "plan:10000": {"ms": 200.0, "parts": {"p50Ms": 200.0}},
        "compaction:1000": {"ms": 60.0, "parts": {"durationMs": 60.0}},
        "content_put:10": {"ms": 10.0, "parts": {"contentStoreMs": 10.0}},
        "cas_race:1000": {"ms": 120.0, "parts": {"raceMs": 110.0, "recomputeMs": 10.0}},
        "recall_lexical:100000": {"ms": 2000.0, "parts": {"lexicalRecallMs": 2000.0}},
        "deletion:10000": {"ms": 4000.0, "parts": {"convergenceMs": 4000.0}},
    }
    assert not peer_run.PAIRING_BY_WORKLOAD["content_put"].like_for_like
    assert not peer_run.PAIRING_BY_WORKLOAD["recall_lexical"].like_for_like
    with pytest.raises(peer_run.PeerError, match="measurements"):
        peer_run.figures({"schema": peer_run.PEER_SCHEMA})


def test_missing_node_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    peer = fake_peer(tmp_path / "peer")
    monkeypatch.setattr(runner, "_run_worker", canned_worker(tmp_path / "log"))
    code = runner.main(["--peer", str(peer), "--node", str(tmp_path / "no-such-node"),
                        "--only", "plan", "--out", str(tmp_path / "o.json")])
    assert code == 2
    err = capsys.readouterr().err
    assert "node not found" in err and "no-such-node" in err
    assert not (tmp_path / "log").exists() and not (tmp_path / "o.json").exists()


@needs_node
def test_missing_script_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    code = runner.main(["--peer", str(tmp_path / "empty"), "--only", "plan",
                        "--out", str(tmp_path / "o.json")])
    assert code == 2
    err = capsys.readouterr().err
    assert "peer benchmark script not found" in err
    assert str(Path("scripts") / "context-memory-benchmark.mjs") in err
    assert not (tmp_path / "o.json").exists()


@needs_node
def test_failing_peer_exits_2_with_its_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    peer = fake_peer(tmp_path / "peer", fail=True)
    monkeypatch.setattr(runner, "_run_worker", canned_worker(tmp_path / "log"))
    code = runner.main(["--peer", str(peer), "--only", "plan", "--out", str(tmp_path / "o.json")])
    assert code == 2
    err = capsys.readouterr().err
    assert "exit 3" in err and "not a clean checkout" in err
    assert not (tmp_path / "log").exists()


def test_unknown_workload_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        runner.main(["--only", "no_such_workload"])
    assert info.value.code == 2
    assert "no_such_workload" in capsys.readouterr().err
