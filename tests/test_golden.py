"""Golden test: the shipped lending specs give the same numbers as before the
"any system" refactor (tests/golden/ holds audit.json of audits/lending-{1,2,3}.toml
written by the code at commit 1e09cc7, without timing, provenance and figure files).

Every key path of the golden file must exist in today's audit.json with the same value;
new keys may be added. Strings, integers and booleans are compared exactly, floats to
1e-12 relative: numpy's summation order may move the last bits between machines and
versions (seen on a new machine on 2026-11-24: 0.05649574843427729 against
0.056495748434277515 for benefit/DPE_prop1, numpy 2.4.6), while any change of the
method moves them by far more. The spec echo is left out: the shipped specs now spell
the system as ``[system] id``.
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
    elif isinstance(golden, float) and isinstance(new, float):
        assert abs(golden - new) <= 1e-12 * max(1.0, abs(golden)), f"{path}: {golden!r} != {new!r}"
    else:
        assert golden == new, f"{path}: {golden!r} != {new!r}"


@pytest.mark.parametrize("setting", [1, 2, 3])
def test_shipped_lending_audits_keep_their_numbers(setting):
    golden = json.loads((ROOT / "tests" / "golden" / f"audit-lending-{setting}.json").read_text())
    res = cf.audit(ROOT / "audits" / f"lending-{setting}.toml")
    new = json.loads(json.dumps(res.to_dict()))
    _walk(golden, new)
