"""The Python examples in README.md and docs/*.md run as written (each file's ```python
blocks in order, in a fresh process, in a scratch folder holding a copy of audits/)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SLOW = {"training.md"}  # trains two short runs


def blocks(path: Path) -> str:
    return "\n".join(re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S))


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW else p for p in DOCS if blocks(p)],
    ids=lambda p: p.name,
)
def test_doc_examples_run(path, tmp_path):
    shutil.copytree(ROOT / "audits", tmp_path / "audits")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, "-c", blocks(path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
