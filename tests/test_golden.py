"""Golden test: the shipped lending specs give the same numbers as before the
"any system" refactor (tests/golden/ holds audit.json of audits/lending-{1,2,3}.toml
written by the code at commit 1e09cc7, without timing, provenance and figure files).

Every key path of the golden file must exist in today's audit.json with an identical
value (floats compared exactly); new keys may be added. The spec echo is left out: the
shipped specs now spell the system as ``[system] id``.
"""

import json
from pathlib import Path

import pytest

import causalfair as cf

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"seconds", "provenance", "figures", "spec"}


def _walk(golden, new, path=""):
    if isinstance(golden, dict):
        assert isinstance(new, dict), path
        for k, v in golden.items():
            if not path and k in SKIP:
                continue
            assert k in new, f"{path}/{k} missing"
            _walk(v, new[k], f"{path}/{k}")
    elif isinstance(golden, list):
        assert isinstance(new, list) and len(new) == len(golden), path
        for i, (a, b) in enumerate(zip(golden, new, strict=True)):
            _walk(a, b, f"{path}[{i}]")
    else:
        assert golden == new, f"{path}: {golden!r} != {new!r}"


@pytest.mark.parametrize("setting", [1, 2, 3])
def test_shipped_lending_audits_keep_their_numbers(setting):
    golden = json.loads((ROOT / "tests" / "golden" / f"audit-lending-{setting}.json").read_text())
    res = cf.audit(ROOT / "audits" / f"lending-{setting}.toml")
    new = json.loads(json.dumps(res.to_dict()))
    _walk(golden, new)
