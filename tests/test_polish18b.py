"""Session 18, second polish: one function prints numbers without a negative zero
(:func:`causalfair._texttable.fixed`; the report's tables and its sentences call it);
numbers given in Python are echoed as given in errors (a float 2.5, not the string
'2.5': :func:`causalfair.errors.short`); the gate's repair lines live in
causalfair/audit/gate_repair.py (gate.py under the size cap), re-exported unchanged."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from causalfair._io import fixed
from causalfair.errors import InputError, ModelError, PolicyError


# ------------------------------------------------------------------ 1: one formatter
def _values() -> list[float]:
    """Values around every rounding edge of 4 and 6 decimals, both signs, zeros of both
    signs, rounding noise, non-finite values, and random values of many magnitudes."""
    rng = np.random.default_rng(18)
    edges = [0.0, -0.0, 4.4e-16, -4.4e-16, 1e-9, -1e-9, 4.9e-7, -4.9e-7, 5e-7, -5e-7,
             5.1e-7, -5.1e-7, 4.999e-5, -4.999e-5, 5e-5, -5e-5, 5.0001e-5, -5.0001e-5,
             0.5, -0.5, 1.0, -1.0, 123456.7890125, -123456.7890125, 1e6, -1e6,
             math.inf, -math.inf, math.nan, -math.nan]
    random = (rng.standard_normal(3000) * 10.0 ** rng.integers(-9, 4, 3000)).tolist()
    return edges + random


def _old_render(v: float) -> str:  # causalfair/report/render.py _fmt before this change
    text = f"{float(v):.6f}"
    return text[1:] if text == "-0.000000" else text


def _old_explain(x: float) -> str:  # causalfair/report/explain.py fmt before this change
    text = f"{x:.4f}"
    return text[1:] if text == "-0.0000" else text


def test_report_formatters_print_what_they_printed():
    """The shipped reports cannot change: on values at every rounding edge (and 3000
    random ones, float and numpy float32/float64) the report's table cell and sentence
    number are character for character what the replaced code printed."""
    from causalfair.report.explain import fmt
    from causalfair.report.render import _fmt

    for v in _values():
        for x in (v, np.float64(v), np.float32(v)):
            assert _fmt(x) == _old_render(x), x
            assert fmt(x) == _old_explain(x), x
    assert _fmt(-4.4e-16) == "0.000000" and fmt(-4e-5) == "0.0000"
    assert _fmt(-5e-6) == "-0.000005" and fmt(-5.1e-5) == "-0.0001"
    assert _fmt(None) != "None" and _fmt(3) == "3" and _fmt("x") == "x"  # non-floats unchanged


def test_report_formatters_are_fixed(monkeypatch):
    """One function owns the rule: the report's cell and sentence formatters call
    causalfair._texttable.fixed (six and four decimals)."""
    import causalfair.report.explain as explain
    import causalfair.report.render as render

    calls = []

    def spy(x, digits=6, **kw):
        calls.append(digits)
        return fixed(x, digits, **kw)

    monkeypatch.setattr(render, "fixed", spy)
    monkeypatch.setattr(explain, "fixed", spy)
    assert render._fmt(-1e-12) == "0.000000" and explain.fmt(-1e-12) == "0.0000"
    assert calls == [6, 4]


# ------------------------------------------------------------------ 2: values as given
def test_pair_errors_echo_numbers_as_given():
    from causalfair.engines.groups import resolve_pair

    with pytest.raises(InputError, match=r"pair: expected two groups, got 5; name two"):
        resolve_pair(5, ("A", "B"))
    with pytest.raises(InputError, match=r"pair: 2\.5 is not one of the groups; name two"):
        resolve_pair((2.5, "A"), ("A", "B"))
    with pytest.raises(InputError, match=r"pair: 7 is not one of the groups"):
        resolve_pair(("A", 7), ("A", "B"))
    with pytest.raises(InputError, match=r"pair: 'C' is not one of the groups"):
        resolve_pair(("A", "C"), ("A", "B"))  # a string stays quoted
    with pytest.raises(InputError, match=r"got \['AB'\]; name two"):
        resolve_pair(["AB"], ("A", "B"))  # one string, not two groups: as given
    with pytest.raises(InputError) as err:
        resolve_pair(("A", "x" * 10_000), ("A", "B"))
    assert len(str(err.value)) < 300  # a huge value is cut


def _tabular(tmp_path, **fields):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"kernel": [[1.0]], "initial": [1.0], "potential": [0.0],
                                **fields}))
    return path


def test_tabular_file_errors_echo_numbers_as_given(tmp_path):
    from causalfair.systems.tabular_io import load_tabular

    with pytest.raises(ModelError, match=r"format 2 is not 'causalfair-tabular'"):
        load_tabular(_tabular(tmp_path, format=2))
    with pytest.raises(ModelError, match=r"format 'v2' is not 'causalfair-tabular'"):
        load_tabular(_tabular(tmp_path, format="v2"))
    with pytest.raises(ModelError, match=r"baseline must be an integer, got 1\.5\.$"):
        load_tabular(_tabular(tmp_path, baseline=1.5))
    with pytest.raises(ModelError, match=r"baseline must be an integer, got '1'\.$"):
        load_tabular(_tabular(tmp_path, baseline="1"))


def test_policy_errors_echo_numbers_as_given():
    from causalfair.policies.grid import hypothetical_policies
    from causalfair.types import check_probs

    with pytest.raises(PolicyError, match=r"got float 0\.5\.$"):
        hypothetical_policies(0.5)
    with pytest.raises(PolicyError, match=r"returned set \{0\.5\}, not numbers"):
        check_probs({0.5}, 1, "policy")
    with pytest.raises(PolicyError, match=r"returned list \['a'\], not numbers"):
        check_probs(["a"], 1, "policy")


# ------------------------------------------------------------------ 3: room under the cap
def test_moved_parts_keep_their_old_import_paths():
    """The gate's JUnit writers (causalfair/audit/gate_junit.py) and the reading of a log
    file (causalfair/logs/reading.py) left their modules; the names keep their old paths."""
    import causalfair as cf
    from causalfair.audit import gate, gate_junit
    from causalfair.logs import reading, schema

    assert gate.gate_error_junit is gate_junit.gate_error_junit
    assert schema.read_logs is reading.read_logs is cf.logs.read_logs
    assert "read_logs" in schema.__all__ and "gate_error_junit" in gate.__all__
