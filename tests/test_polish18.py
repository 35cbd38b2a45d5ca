"""Small defects found in session 18, each pinned by a test that failed on the old code:
rounding noise printed as -0.000000 by the text outputs that did not use
``causalfair._texttable.fixed`` (attribution, frontier, the Monte Carlo decompose table,
log audits, the dowhy cross-check, the repair and train lines, the sweep table); numbers
given in Python echoed as strings in backends' errors (timeout, address, device); the
forks' weights check is :func:`causalfair._validation.check_weights` (one class)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest

import causalfair as cf
from causalfair.errors import InputError, ModelError

NOISE = -4.4e-16  # rounding noise of a quantity that is 0: prints as 0.000000
NEGATIVE_ZERO = re.compile(r"-0\.0+(?![0-9])")  # -0.0000, -0.000000, never -0.0001


def _no_negative_zero(text: str) -> None:
    assert not NEGATIVE_ZERO.search(text), text


# ------------------------------------------------------------------ 1: no negative zero
def _attribution(se: float):
    from causalfair.engines.attribution import Attribution

    return Attribution(
        engine="mc" if se else "exact", groups=("a", "b"), pair=(0, 1), horizon=1,
        policy="p", baseline="q",
        total={"C": (NOISE, se), "DPE": (NOISE, se), "IPE": (-1e-9, se)},
        by_step=np.zeros((2, 1)), by_step_se=np.zeros((2, 1)),
        by_cell=np.zeros((2, 2, 1)), by_cell_se=np.zeros((2, 2, 1)),
        cells="levels", cell_labels=("0",))


@pytest.mark.parametrize("se", [0.0, 1e-20])
def test_attribution_text_prints_no_negative_zero(se):
    """Attribution.summary printed C -0.000000 (and its CI [-0.000000, -0.000000]); its
    HTML table -0.000000."""
    att = _attribution(se)
    for text in (att.summary(), att._repr_html_()):
        _no_negative_zero(text)
    assert "C    +0.000000" in att.summary()
    if se:
        assert "CI [+0.000000, +0.000000]" in att.summary()


def test_frontier_text_prints_no_negative_zero():
    """The LP's C at eps = 0 is rounding noise (1e-10 here; its sign is the solver's):
    negative, Frontier.summary and its HTML printed -0.000000."""
    from causalfair.engines.frontier import frontier

    front = frontier(cf.lending_setting("lending-1").tabular, 3, points=2, audit=False)
    first = dataclasses.replace(front.points[0], C=-1e-10, DPE=NOISE)
    front = dataclasses.replace(front, points=(first, *front.points[1:]))
    assert front.to_frame()["C"].iloc[0] < 0  # the noise is there, negative
    for text in (front.summary(), front._repr_html_()):
        _no_negative_zero(text)
    assert "0.000000" in front.summary()


def test_frontier_command_table_prints_no_negative_zero(tmp_path, capsys, monkeypatch):
    """causalfair frontier's table of placed policies (its own float_format)."""
    from causalfair.cli import main
    from causalfair.engines import frontier as fr

    placed = fr.Frontier.place

    def noisy(self, policies, names=None):
        df = placed(self, policies, names)
        df["C"] = NOISE
        return df

    monkeypatch.setattr(fr.Frontier, "place", noisy)
    assert main(["frontier", "--setting", "lending-1", "--horizon", "3", "--points", "2",
                 "--no-plot", "--out", str(tmp_path / "f")]) == 0
    out = capsys.readouterr().out
    assert "Policies against the frontier" in out
    _no_negative_zero(out)


def _noisy_ipe(dec):
    """``dec`` with V = V_ps one ulp below V_0 for the first group: DPE 0, IPE one ulp
    below 0 (rounding noise), SPE and C as they were, to the ulp."""
    a = dec.pair[0]
    v = dec.V_0.copy()
    v[a] = np.nextafter(v[a], -np.inf)
    return dataclasses.replace(dec, V=v, V_ps=v.copy())


def test_decompose_mc_table_prints_no_negative_zero():
    """causalfair decompose's Monte Carlo table (estimate, se, CI per quantity)."""
    from causalfair.commands.decompose import _mc_text

    dec = cf.decompose(cf.systems.make("lending-1"), "threshold:0.5", 2, engine="mc", n=200,
                       seed=0)
    noisy = _noisy_ipe(dec)
    assert f"{noisy.IPE:+.6f}" == "-0.000000"  # the old text
    text = _mc_text(noisy, 0.05)
    _no_negative_zero(text)
    assert re.search(r"\n  IPE +\+0\.000000", text), text


def test_dowhy_check_summary_prints_no_negative_zero():
    """A placebo refuter's new effect is about 0: -3e-7 printed as -0.00000."""
    from causalfair.logs.dowhy_check import DowhyCheck

    chk = DowhyCheck(delta=None, pooled=-4e-7, graph_gml="", estimand="", n_rows=10, seed=0,
                     refuters=[{"name": "placebo_treatment_refuter", "new_effect": -3e-7,
                                "p_value": 0.9, "passed": True}])
    text = chk.summary()
    _no_negative_zero(text)
    assert "= +0.00000" in text and "new effect +0.00000" in text


def test_log_audit_summary_prints_no_negative_zero(monkeypatch):
    """A log audit's headline rows (estimate and percentile CI) and its bounds rows."""
    from causalfair.logs import audit_logs, simulate_logs
    from causalfair.logs.result import LogAudit
    from causalfair.policies.core import TablePolicy

    lm = cf.lending_setting("lending-1")
    soft = TablePolicy(0.15 + 0.7 / (1.0 + np.exp(-(lm.p_repay - 0.5) / 0.08)))  # both actions
    a = audit_logs(simulate_logs(lm, soft, 2000, 2, seed=0), n_boot=20, seed=0, horizon=2)
    frame = a.to_frame(0.05)

    def noisy(self, alpha=0.05):
        df = frame.copy()
        df.loc[:, ["estimate", "ci_lower", "ci_upper"]] = NOISE
        return df

    monkeypatch.setattr(LogAudit, "to_frame", noisy)
    text = a.summary()
    headline = [x for x in text.splitlines() if "percentile CI" in x]
    assert headline, text
    for line in headline:
        _no_negative_zero(line)
        assert "= +0.000000" in line
    bounds = pd.DataFrame({"lower": NOISE, "upper": NOISE, "identified": False},
                          index=["C", "DPE", "IPE", "SPE", "Lambda"])
    unidentified = dataclasses.replace(a, decomposition=None, bounds=bounds, dowhy=None,
                                       groups=None, lambda_estimate=None)
    lines = [x for x in unidentified.summary().splitlines() if " in [" in x]
    assert len(lines) == 5
    for line in lines:
        _no_negative_zero(line)


def test_gate_repair_lines_print_no_negative_zero():
    from causalfair.audit.gate import repair_lines

    rep = {"passed": True, "result": {"utility": NOISE, "C": NOISE, "Lambda": 0.0},
           "original": {"utility": 1.0}, "ratios": {}}
    text = "\n".join(repair_lines(rep))
    _no_negative_zero(text)
    assert "C +0.0000" in text
    failed = "\n".join(repair_lines({**rep, "passed": False}))
    _no_negative_zero(failed)
    assert "C +0.0000" in failed


def test_repair_summary_prints_no_negative_zero():
    from causalfair.train.repair import Attempt, Constraint, RepairResult

    att = Attempt("start", np.zeros((2, 2)), {"utility": NOISE, "C": NOISE}, True)
    res = RepairResult(constraints=(Constraint("abs_C", 0.05),), attempts=[att], best=att,
                       original={"utility": NOISE, "C": 0.1}, best_found=att, bound=NOISE)
    text = res.summary()
    _no_negative_zero(text)
    assert "utility +0.0000" in text


def test_train_metrics_line_prints_no_negative_zero():
    from causalfair.commands.train import metrics_line

    text = metrics_line({"utility": 1.5, "C": NOISE, "C_ci": (NOISE, NOISE * 2),
                         "Lambda": 0.0})
    _no_negative_zero(text)
    assert "C=+0.0000" in text and "utility=+1.5000" in text


def test_sweep_table_prints_no_negative_zero():
    from causalfair.train.sweep import SweepResult, tabulate

    runs = pd.DataFrame({"system": ["lending-1"] * 3, "algo": ["ppo"] * 3, "seed": [0, 1, 2],
                         "C": [NOISE, 2 * NOISE, 3 * NOISE], "utility": [1.0, 1.1, 1.2]})
    text = SweepResult(runs=runs, table=tabulate(runs)).to_markdown(("utility", "C"))
    _no_negative_zero(text)
    assert "| 0.0000 [0.0000, 0.0000] |" in text


def test_waterfall_labels_print_no_negative_zero():
    """The waterfall's tick labels (estimate and interval per path)."""
    dec = cf.decompose(cf.lending_setting("lending-1").tabular, "threshold:0.5", horizon=2)
    noisy = _noisy_ipe(dec)
    assert f"{noisy.IPE:+.4f}" == "-0.0000"  # the old label
    fig = noisy.plot()
    labels = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels()]
    assert labels
    for label in labels:
        _no_negative_zero(label)


# ------------------------------------------------------------------ 2: values as given
@pytest.mark.parametrize(("call", "said"), [
    (lambda b: b.check_timeout(-5, "timeout"), "timeout: bad value -5;"),
    (lambda b: b.check_timeout(0.0, "--timeout"), "--timeout: bad value 0.0;"),
    (lambda b: b.check_timeout("5", "timeout"), "timeout: bad value '5';"),  # a string, as given
    (lambda b: b.check_address(6379), "--address: bad value 6379;"),
    (lambda b: b.check_address("6379"), "--address: bad value '6379';"),
    (lambda b: b.resolve_device(0), "--device: bad value 0;"),
    (lambda b: b.resolve_device("gpu"), "--device: bad value 'gpu';"),
])
def test_backends_echo_a_bad_value_as_given(call, said):
    """A number given in Python was echoed as the string '5'; now as given (as
    resolve_jobs echoes jobs=0), a string still quoted."""
    from causalfair import backends

    with pytest.raises(InputError) as info:
        call(backends)
    assert said in str(info.value), str(info.value)


# ------------------------------------------------------------------ 3: one weights check
def test_forks_weights_check_is_the_one_check():
    """system_benefit (the forks' door of decompose_mc and benefit_fairness) raised its own
    InputError; now _validation.check_weights: ModelError, the same message as every door."""
    from causalfair._validation import check_weights
    from causalfair.engines.benefit_mc import system_benefit

    system = cf.systems.make("lending-1")
    for bad in ("initial", "uniform"):
        with pytest.raises(ModelError) as info:
            system_benefit(system, "threshold:0.5", 2, engine="mc", n=50, weights=bad)
        with pytest.raises(ModelError) as want:
            check_weights(bad, "mc")
        assert str(info.value) == str(want.value)
