"""Golden test over every shipped spec: the audit.json that ``causalfair audit`` writes for
each ``*.toml`` under ``audits/`` and ``reports/examples/`` is identical, bit for bit, to the
stored copy under ``tests/golden/specs/`` (the timing field ``seconds`` and ``provenance``
aside). Regenerate the stored copies with ``python tests/test_golden_specs.py`` only when a
change of the numbers is intended.

Bit for bit holds on the CPU kernels the copies were made with (``KERNELS.json``: the BLAS
core type numpy calls, docs/limits.md "Reproducibility"); on other kernels (another CPU
family, e.g. a CI runner without AVX-512) the last bits of float products move, so there
every number must agree to 1e-9 relative and everything else exactly.
``python tests/test_golden_specs.py --compare`` prints how this machine's audits differ from
the stored copies (identical, or how many numbers by how much) without writing anything.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "specs"
SKIP = ("seconds", "provenance")
SPECS = sorted([*ROOT.glob("audits/*.toml"), *ROOT.glob("reports/examples/*.toml")])
# Specs whose audit takes over ~5 s on one core run only with -m slow.
SLOW = {"audits__infectious-1", "audits__infectious-harder"}


def _kernels() -> dict:
    from causalfair.audit.result import kernels

    return {k: v for k, v in kernels().items() if k == "blas"}


def _same_kernels() -> bool:
    """Whether this machine's BLAS kernel is the one the golden copies were made with."""
    path = GOLDEN / "KERNELS.json"
    return path.exists() and json.loads(path.read_text(encoding="utf-8")) == _kernels()


def _assert_close(old, new, where: str) -> None:
    """``new`` equals ``old`` but for numbers, which agree to 1e-9 relative (1e-12 absolute
    near zero): the tolerance of other CPU kernels' last bits."""
    if isinstance(old, dict):
        assert isinstance(new, dict) and sorted(old) == sorted(new), where
        for k in old:
            _assert_close(old[k], new[k], f"{where}.{k}")
    elif isinstance(old, list):
        assert isinstance(new, list) and len(old) == len(new), where
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            _assert_close(a, b, f"{where}[{i}]")
    elif isinstance(old, float) or isinstance(new, float):
        assert isinstance(new, (int, float)) and not isinstance(new, bool), where
        assert abs(old - new) <= max(1e-9 * abs(old), 1e-12), f"{where}: {old!r} != {new!r}"
    else:
        assert old == new, f"{where}: {old!r} != {new!r}"


def _key(spec: Path) -> str:
    return f"{spec.parent.name}__{spec.stem}"


def audit_json(spec: Path, out: Path) -> str:
    """The audit.json text ``causalfair audit SPEC --out OUT`` writes, without SKIP fields."""
    from causalfair.audit import audit, load_spec

    result = audit(load_spec(spec))
    folder = result.write_report(out)
    doc = json.loads((folder / "audit.json").read_text(encoding="utf-8"))
    for k in SKIP:
        doc.pop(k, None)
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _params():
    for spec in SPECS:
        marks = [pytest.mark.slow] if _key(spec) in SLOW else []
        yield pytest.param(spec, id=_key(spec), marks=marks)


def test_every_shipped_spec_has_a_golden_copy():
    assert SPECS, "no specs found"
    missing = [_key(s) for s in SPECS if not (GOLDEN / f"{_key(s)}.json").exists()]
    assert not missing, f"no golden copy for {missing}: run python tests/test_golden_specs.py"


@pytest.mark.parametrize("spec", list(_params()))
def test_audit_json_is_identical_to_golden(spec, tmp_path):
    golden = GOLDEN / f"{_key(spec)}.json"
    if not golden.exists():
        pytest.fail(f"no golden copy {golden}")
    new = audit_json(spec, tmp_path / "report")
    doc = json.loads(new)
    dec = doc["decomposition"]
    # the identity C = DPE + IPE + SPE and a verdict per threshold, on the audit itself
    assert dec["C"] == pytest.approx(dec["DPE"] + dec["IPE"] + dec["SPE"], abs=1e-12), spec
    assert doc["overall"] in ("PASS", "FAIL", "INCONCLUSIVE") and doc["verdicts"], spec
    old = golden.read_text(encoding="utf-8")
    if new != old and not _same_kernels():
        _assert_close(json.loads(old), doc, spec.name)
        return
    if new != old:
        import difflib

        diff = "".join(list(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                 "golden", "new", n=1))[:80])
        pytest.fail(f"{spec.relative_to(ROOT)}: audit.json differs from {golden.name}:\n{diff}")


def _differences(old, new, out: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """(|old|, |old - new|) of every number that differs between two audit.json documents."""
    if isinstance(old, dict):
        for k in old:
            _differences(old[k], new.get(k), out)
    elif isinstance(old, list):
        for a, b in zip(old, new, strict=False):
            _differences(a, b, out)
    elif isinstance(old, float) and isinstance(new, (int, float)) and old != new:
        out.append((abs(old), abs(old - new)))
    elif old != new:  # another value, or a number's type changed: no size to give
        out.append((float("nan"), float("nan")))
    return out


if __name__ == "__main__":  # regenerate the stored copies (and print how long each takes),
    import tempfile  # or with --compare print how this machine's audits differ from them

    if "--compare" in sys.argv:
        print(f"kernels here {_kernels()}, golden {json.loads((GOLDEN / 'KERNELS.json').read_text())}")
        same = 0
        for spec in SPECS:
            with tempfile.TemporaryDirectory() as d:
                text = audit_json(spec, Path(d) / "report")
            old = (GOLDEN / f"{_key(spec)}.json").read_text(encoding="utf-8")
            same += text == old
            d = _differences(json.loads(old), json.loads(text), [])
            nums = [(a, e) for a, e in d if a == a]
            rel = max((e / a for a, e in nums if a >= 1e-6), default=0.0)
            print(f"{_key(spec)}: " + ("identical" if text == old else (
                f"{len(nums)} numbers differ, by at most "
                f"{max((e for _, e in nums), default=0.0):.1e} (relative, of those above "
                f"1e-6: {rel:.1e})" + (f"; {len(d) - len(nums)} other values differ"
                                       if len(d) > len(nums) else "")
                if d else "differs in its text only (key order or formatting)")), flush=True)
        print(f"{same} of {len(SPECS)} identical")
        raise SystemExit(0)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[1:])
    if not only and not _same_kernels():  # all the copies are bit for bit on these kernels
        (GOLDEN / "KERNELS.json").write_text(json.dumps(_kernels(), indent=2) + "\n",
                                             encoding="utf-8")
    for spec in SPECS:
        if only and _key(spec) not in only:
            continue
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as d:
            text = audit_json(spec, Path(d) / "report")
        (GOLDEN / f"{_key(spec)}.json").write_text(text, encoding="utf-8")
        print(f"{_key(spec)}: {time.perf_counter() - t0:.1f} s", flush=True)
