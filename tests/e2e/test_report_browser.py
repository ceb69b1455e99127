"""`marlm report` on a real run, opened in a real headless Chromium (Debian's `chromium` package).

The run is real (warehouse env, rule planner, greedy executor, shield, no LLM so it takes seconds);
the page must render with every embedded image decoded and no console message at all (the page logs
nothing on success, so any console line is an error, an uncaught exception or a failed image).
A screenshot is kept as an artifact in ``$MARLM_ARTIFACTS`` (default ``runs/test-artifacts``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("MARLM_ARTIFACTS", REPO / "runs" / "test-artifacts"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="Debian's chromium is not installed (apt-get install -y chromium); CI requires it",
)


def chromium(page: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium on ``page`` with a fresh profile; stderr carries console messages."""
    if CHROMIUM is None:
        pytest.fail("chromium is required in CI: apt-get install -y chromium")
    with tempfile.TemporaryDirectory(prefix="marlm-chromium-") as profile:
        return subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                "--virtual-time-budget=5000",
                *args,
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run folder written by `marlm`'s controller (rule planner: no model needed)."""
    from marlm.hybrid.controller import run, run_config
    from marlm.hybrid.planning.planner import RulePlanner

    out = tmp_path_factory.mktemp("run")
    config = run_config(
        layout="small", steps=150, seed=3, planner="rule", executor="greedy", tick_ms=0
    )
    run(config, out, planner=RulePlanner())
    return out


def test_console_check_can_fail(tmp_path: Path) -> None:
    """The detector sees a console error and an uncaught exception (so the real check means something)."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>console.error('x'); nope();</script></body></html>")
    lines = console_lines(chromium(bad, "--dump-dom").stderr)
    assert any('"x"' in line for line in lines)
    assert any("nope is not defined" in line for line in lines)


def test_report_renders_in_headless_chromium(run_folder: Path) -> None:
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "marlm"), "report", str(run_folder)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    page = run_folder / "report.html"
    assert page.is_file() and str(page) in proc.stdout
    text = page.read_text(encoding="utf-8")
    assert "http://" not in text.replace("http://www.w3.org", "") and "https://" not in text
    # 3 plots (a rule run has no LLM call, so no LLM-call chart) + the episode GIF
    assert text.count('src="data:image/') == 4

    dom = chromium(page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_lines(dom.stderr) == []
    m = re.search(r'data-images-ok="(\d+)/(\d+)"', dom.stdout)
    assert m is not None, "the page's load handler did not run"
    assert m.group(1) == m.group(2) == "4"  # every image of the page loaded
    assert "marlm run report" in dom.stdout and "orders delivered" in dom.stdout

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report_screenshot.png"
    shot.unlink(missing_ok=True)
    snap = chromium(page, f"--screenshot={shot}", "--window-size=1200,3000", "--hide-scrollbars")
    assert snap.returncode == 0 and shot.is_file(), snap.stderr[-2000:]
    assert console_lines(snap.stderr) == []
    with Image.open(shot) as im:
        assert im.size == (1200, 3000)
        # Not a blank page: the rendered report has many colours (plots, table lines, text).
        assert len(im.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 50
