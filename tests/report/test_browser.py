"""The HTML report in a real headless browser (Chromium from Debian's packages).

Marked ``browser``: the default run (``-m 'not slow and not browser'``) skips it; run it
with ``pytest -m browser tests/report/test_browser.py`` (``.ci/browser_check.sh`` installs
Chromium and does so). Checks: the page loads with no console messages (the report has
no scripts, so any console output is an error such as a blocked or failed resource), every
<img> decodes (naturalWidth > 0), and a screenshot is saved to
build/browser/screenshot.png (git-ignored) for review; reports/examples/screenshot.png is
a reviewed copy of it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from causalfair.audit import audit
from tests.conftest import describe, run_cmd

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CAUSALFAIR_CHROMIUM", "/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CONSOLE = re.compile(r":CONSOLE[(:]")

if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)

PROBE = """<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  var root = document.documentElement;
  var sections = Array.prototype.slice.call(document.querySelectorAll('section'));
  document.title = 'IMGCHECK ' + JSON.stringify({n: imgs.length, ok: ok.length,
    widths: imgs.map(function (i) { return i.naturalWidth; }),
    overflow: root.scrollWidth > root.clientWidth,
    wide: imgs.filter(function (i) { return i.getBoundingClientRect().right > root.clientWidth + 1; }).length,
    sections: sections.map(function (s) { return s.id; }),
    headline: !!document.querySelector('#summary figure#fig-waterfall img')});
});
</script></body>"""


def chromium(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return run_cmd([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr",
                    "--v=0", *extra, url], timeout=120)


def console_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if CONSOLE.search(ln)]


def image_check(tmp_path: Path, page: Path) -> dict:
    probe = tmp_path / f"probe-{page.name}"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE), encoding="utf-8")
    proc = chromium(tmp_path, probe.as_uri(), "--dump-dom", "--virtual-time-budget=5000")
    m = re.search(r"<title>IMGCHECK (.*?)</title>", proc.stdout)
    assert m, describe(proc)
    return json.loads(m.group(1).replace("&quot;", '"'))


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("browser")
    spec = d / "spec.toml"
    spec.write_text(textwrap.dedent("""
        name = "browser"
        horizon = 20
        [model]
        setting = "lending-1"
        [policy]
        builtin = "threshold:0.5"
        [thresholds]
        abs_C = 0.05
        Lambda = 0.1
        tpr_gap = 0.1
    """))
    return audit(spec).write_report(d / "report")


def test_detectors_work_on_a_broken_page(tmp_path):
    # positive control: a console error and a missing image are both caught
    page = tmp_path / "broken.html"
    page.write_text("<html><head><title>x</title></head><body><img src='missing.png'>"
                    "<script>console.error('boom')</script></body></html>")
    proc = chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert any("boom" in ln for ln in console_lines(proc.stderr))
    res = image_check(tmp_path, page)
    assert res["n"] == 1 and res["ok"] == 0


def test_report_loads_cleanly_and_shows_every_figure(tmp_path, report_dir):
    page = report_dir / "report.html"
    n_png = len(list(report_dir.glob("*.png")))
    proc = chromium(tmp_path, page.as_uri(), "--dump-dom", "--virtual-time-budget=5000")
    assert proc.returncode == 0, describe(proc)
    assert "<h1>" in proc.stdout and "browser" in proc.stdout
    assert console_lines(proc.stderr) == []
    res = image_check(tmp_path, page)
    assert res["n"] == n_png >= 7
    assert res["ok"] == n_png, res
    # the page reads top to bottom: summary (with the headline figure), details, glossary,
    # assumptions; nothing wider than the window
    assert res["sections"] == ["summary", "details", "glossary", "assumptions", "provenance",
                               "spec"], res
    assert res["headline"], res
    assert not res["overflow"] and res["wide"] == 0, res
    # the figures are 2x (150 dpi): an 8-inch figure is 1200 px wide
    assert max(res["widths"]) >= 1200, res
    # screenshot for review
    out = ROOT / "build" / "browser" / "screenshot.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    shot = tmp_path / "shot.png"
    proc = chromium(tmp_path, page.as_uri(), f"--screenshot={shot}", "--window-size=1100,9000",
                    "--hide-scrollbars")
    assert shot.is_file() and shot.stat().st_size > 10_000, describe(proc)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shutil.copyfile(shot, out)
