"""report.html opens in headless Chromium, offline, with no console message at all.

Skipped (with the reason) where ``/usr/bin/chromium`` is absent; docs/user-guide.md
gives the same check by hand.  ``SHADOW_UPDATE_SCREENSHOT=1`` also renders the bundled
corpus's report and writes the user guide's screenshot, ``docs/img/report.png``.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from shadow.run import RunOptions, execute

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT = ROOT / "docs" / "img" / "report.png"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND",  # offline
         "--enable-logging=stderr", "--v=0")

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(),
                                reason="/usr/bin/chromium not installed (manual check in "
                                       "docs/user-guide.md)")


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"  # fresh every time
    return subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def _report(tmp: Path, scenarios: tuple[str, ...] | None) -> Path:
    if scenarios is None:
        fixtures = ROOT / "fixtures"
    else:
        fixtures = tmp / "fx"
        for name in scenarios:
            shutil.copytree(ROOT / "fixtures" / name, fixtures / name)
    whole = scenarios is None  # the bundled corpus exactly as `nox -s shadow` runs it
    res = execute(RunOptions(fixtures=str(fixtures), out=str(tmp / "out"),
                             recordings=str(ROOT / "recordings") if whole else None,
                             now=dt.datetime(2026, 9, 1, tzinfo=dt.UTC),
                             determinism=whole))
    return res.report_path.parent / "report.html"


def test_report_html_renders_offline_without_console_errors(tmp_path: Path) -> None:
    html = _report(tmp_path, ("pending-approval", "ide-budget-zero"))
    done = _chromium(tmp_path, "--dump-dom", html.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    # two fixtures are too few for the gate at phase 1: the banner says NO-GO, the ladder why
    assert '<header class="banner nogo">' in done.stdout and "<svg" in done.stdout
    assert 'id="ladder"' in done.stdout
    assert 'id="c-pending-approval--cli.compress"' in done.stdout


@pytest.mark.skipif(os.environ.get("SHADOW_UPDATE_SCREENSHOT") != "1",
                    reason="set SHADOW_UPDATE_SCREENSHOT=1 to rewrite docs/img/report.png")
def test_update_the_user_guide_screenshot(tmp_path: Path) -> None:
    html = _report(tmp_path, None)  # the bundled corpus, as `nox -s shadow` renders it
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    done = _chromium(tmp_path, "--hide-scrollbars", "--window-size=1280,2300",
                     f"--screenshot={SCREENSHOT}", html.as_uri())
    assert done.returncode == 0 and SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
