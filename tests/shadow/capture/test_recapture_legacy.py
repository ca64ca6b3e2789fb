"""Recapture the bundled fixtures from a real legacy checkout: byte for byte.

Runs only with ``LEGACY_ROOT`` (a checkout of chainlesschain/chainlesschain at the
fixtures' ``legacy_commit``, with its npm dependencies installed) and
``JETBRAINS_CLASSPATH`` (the JetBrains plugin's classes, built by you from that checkout).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shadow.cli import main
from tests.shadow.capture.standin import needs_node, tree_bytes

LEGACY_ROOT = os.environ.get("LEGACY_ROOT")
JETBRAINS_CLASSPATH = os.environ.get("JETBRAINS_CLASSPATH")
FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"

pytestmark = [needs_node, pytest.mark.skipif(
    not (LEGACY_ROOT and JETBRAINS_CLASSPATH),
    reason="set LEGACY_ROOT and JETBRAINS_CLASSPATH to recapture from a legacy checkout")]


def test_recapture_reproduces_fixtures_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = main(["capture", "--legacy-root", str(LEGACY_ROOT), "--inputs", str(FIXTURES),
                 "--out", str(out), "--jetbrains-classpath", str(JETBRAINS_CLASSPATH)])
    assert code == 0
    want, got = tree_bytes(FIXTURES), tree_bytes(out)
    assert sorted(got) == sorted(want)
    differ = sorted(k for k in want if want[k] != got[k])
    assert differ == []
