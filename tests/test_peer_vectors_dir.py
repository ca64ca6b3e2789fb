"""PEER_VECTORS_DIR is respected, and a missing vector file fails (never skips)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEER = ROOT / "tests" / "vectors" / "peer"


def _pytest(env_dir: Path, target: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PEER_VECTORS_DIR=str(env_dir))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", target],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )


def test_missing_vector_file_fails_not_skips(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "tests/peer/test_peer_rpc.py")
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "skipped" not in proc.stdout.splitlines()[-1]
    assert "missing" in proc.stdout


def test_alternative_vector_dir_is_used(tmp_path: Path) -> None:
    # a vector set with the same format but only the digest file: the digest tests run
    # from it (same outcome), and the plan tests fail because their file is absent
    shutil.copy(PEER / "digest-vectors.json", tmp_path / "digest-vectors.json")
    ok = _pytest(tmp_path, "tests/peer/test_peer_digest.py")
    assert ok.returncode == 0, ok.stdout[-2000:]
    bad = _pytest(tmp_path, "tests/peer/test_peer_plan.py")
    assert bad.returncode == 1
