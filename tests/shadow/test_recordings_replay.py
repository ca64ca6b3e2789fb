"""`shadow run --recordings DIR`: the candidate's provider answers come from the cassettes.

Both sides consume the same recorded answer; a request no recording answers is a blocking
``shadow.side_effect`` attributed to the candidate (test_candidate_consistency,
test_divergence); a recordings folder without the scenario's cassette quarantines the
scenario; nothing reaches the network.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from shadow.run import RunOptions, execute

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("network blocked in tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def _corpus(tmp_path: Path, names: list[str]) -> Path:
    root = tmp_path / "fixtures"
    for n in names:
        shutil.copytree(ROOT / "fixtures" / n, root / n)
    return root


def _run(tmp_path: Path, fixtures: Path, recordings: Path | None) -> dict[str, object]:
    res = execute(RunOptions(fixtures=str(fixtures), out=str(tmp_path / "out"),
                             recordings=None if recordings is None else str(recordings)))
    return res.report


def test_cassette_replay_equals_capture_replay(tmp_path: Path, no_network: list[object]) -> None:
    fixtures = _corpus(tmp_path, ["provider-summary-ok", "provider-usage-unknown",
                                  "provider-cancelled"])
    with_cassettes = _run(tmp_path, fixtures, ROOT / "recordings")
    embedded = _run(tmp_path, fixtures, None)
    assert with_cassettes["divergences"] == embedded["divergences"]
    assert with_cassettes["legacy_defects"] == embedded["legacy_defects"]
    # three fixtures are too few for the gate (NO-GO either way), but nothing blocks
    assert with_cassettes["verdict"] == embedded["verdict"]
    assert with_cassettes["totals"]["blocking"] == 0
    assert no_network == []


def test_missing_cassette_quarantines_the_scenario(tmp_path: Path,
                                                   no_network: list[object]) -> None:
    """Recordings without the scenario's cassette are stale input, not a kernel request
    to blame: the scenario is quarantined (blocking, NO-GO) with the rebuild command, and
    nothing reaches the network.  (A request the cassette does not answer is still
    ``shadow.side_effect``: test_candidate_consistency and test_divergence.)"""
    fixtures = _corpus(tmp_path, ["provider-summary-ok"])
    recordings = tmp_path / "recordings"
    recordings.mkdir()  # an empty recordings folder: no cassette for the scenario
    report = _run(tmp_path, fixtures, recordings)
    assert report["verdict"] == "NO-GO"
    invalid = [d for d in report["divergences"] if d["reason_code"] == "fixture.invalid"]
    assert [(d["fixture"], d["severity"]) for d in invalid] == [("provider-summary-ok",
                                                                 "blocking")]
    assert "shadow.providers.importer" in invalid[0]["detail"]["expected"]
    assert no_network == []
