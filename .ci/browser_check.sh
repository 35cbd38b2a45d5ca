#!/usr/bin/env bash
# Check the HTML audit report in a real headless browser (Chromium from Debian's packages).
# Installs Chromium when missing (needs root), then runs the tests marked `browser`; the
# screenshot lands in build/browser/screenshot.png.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1; then
    apt-get update
    apt-get install -y --no-install-recommends chromium
fi
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MPLBACKEND=Agg
python -m pytest -q -p no:cacheprovider -m browser tests/report/test_browser.py
