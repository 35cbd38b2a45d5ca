"""reports/examples/ regenerates bit for bit (issue 12): run regenerate.sh in a copy of
the checkout and compare every file, the timing fields aside (audit.json "seconds",
JUnit "time")."""

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import run_cmd

ROOT = Path(__file__).resolve().parents[1]


def _normalised(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name == "audit.json":
        doc = json.loads(data)
        doc.pop("seconds", None)
        doc.pop("provenance", None)
        doc.get("extra", {}).pop("repair_wall_s", None)
        return json.dumps(doc, sort_keys=True).encode()
    if path.suffix == ".xml":
        return re.sub(rb'time="[0-9.]+"', b'time=""', data)
    return data


@pytest.mark.slow
def test_examples_regenerate_bit_for_bit(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info",
                                                              "__pycache__", ".causalfair"))
    run_cmd(["bash", "reports/examples/regenerate.sh"], cwd=copy, timeout=1200,
            env={**os.environ, "PYTHONPATH": str(copy)}, expect=0)
    ex = Path("reports/examples")
    for f in sorted((ROOT / ex).rglob("*")):
        if f.is_file() and f.name != "screenshot.png":
            rel = f.relative_to(ROOT)
            assert _normalised(copy / rel) == _normalised(f), rel
