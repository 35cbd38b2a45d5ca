"""Leftovers of session 16 (helper Leftovers3): the interval's z quantile has one home (see
tests/test_hallway4.py); `audit --reproduce` keeps a user's prints off stdout; a Monte Carlo
audit's report says its per-group values are estimates and gives their intervals; the
CLI's --levels and --horizon are the library's checks."""

from __future__ import annotations

from tests.conftest import run_cli
from tests.test_lead_round16 import PRINTING


def _chatty(tmp_path, module: str) -> None:
    from tests.test_hallway4 import ROOT

    (tmp_path / f"{module}.py").write_text(
        f"CLINIC = {str(ROOT / 'docs/examples/clinic.py')!r}\n"
        + PRINTING.replace("clinic_l16_base", f"{module}_base"), encoding="utf-8")
    (tmp_path / "c.toml").write_text(
        f'name = "c"\nhorizon = 3\n[system]\nfactory = "{module}:make_chatty"\n[policy]\n'
        'builtin = "uniform"\n[engine]\nkind = "mc"\nn = 200\n[thresholds]\nabs_C = 0.9\n',
        encoding="utf-8")


def test_reproduce_sends_a_printing_simulators_output_to_stderr(tmp_path):
    """`audit --reproduce` re-ran the simulator with stdout as it was: each step's print
    came before the `reproduced ...` and `checked:` lines on stdout."""
    _chatty(tmp_path, "chatty_l3b")
    run_cli("audit", "c.toml", "--out", "rep", cwd=tmp_path, expect=0)
    r = run_cli("audit", "--reproduce", "rep", cwd=tmp_path, expect=0)
    assert "debug: stepping" not in r.stdout, r.stdout
    assert "debug: stepping" in r.stderr, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("reproduced rep") and "every number identical" in lines[0], lines
    assert all(line.startswith("  ") for line in lines[1:]), lines


# ----------------------------------------------------- 3. Monte Carlo per-group values
def _mc_and_exact():
    import causalfair as cf
    from tests.conftest import clinic_module

    with clinic_module("clinic_l3b") as mod:
        mc = cf.audit({"name": "mc", "horizon": 3, "policy": {"builtin": "uniform"},
                       "engine": {"kind": "mc", "n": 300, "alpha": 0.1},
                       "thresholds": {"max_abs_C": 10.0}}, system=mod.make_clinic())
    exact = cf.audit({"name": "ex", "horizon": 3, "model": {"setting": "lending-1"},
                      "policy": {"builtin": "threshold:0.5"}, "engine": {"kind": "exact"},
                      "thresholds": {"abs_C": 1.0}})
    return mc, exact


def test_a_monte_carlo_report_says_its_per_group_values_are_estimates(tmp_path):
    """The per-group table of a Monte Carlo audit (V^pi, V^PS, V^pi0, direct, indirect,
    utility) read as the exact engine's does: no word that they are estimates, and no
    standard error or interval, though the Decomposition carries them."""
    from causalfair._validation import z_quantile
    from causalfair.report.render import _tables

    mc, exact = _mc_and_exact()
    tabs = {t[0]: t for t in _tables(mc, None)}
    title = next(t for t in tabs if t.startswith("Per-group values ("))
    assert "Monte Carlo estimates, not exact values" in title, title
    assert "90% intervals in the next table" in title, title
    se_title = next(t for t in tabs if t.startswith("Per-group values: standard errors"))
    _, header, rows, _ = tabs[se_title]
    assert header == ["group", "value", "estimate", "standard error", "90% CI lower",
                      "90% CI upper", "unit"]
    dec = mc.decomposition
    keys = {"V^pi": "V", "V^PS": "V_ps", "V^pi0": "V_0", "direct": "direct",
            "indirect": "indirect", "utility": "utility"}
    assert [(row[0], row[1]) for row in rows] == [(g, k) for g in dec.groups for k in keys]
    z = z_quantile(0.1)
    est = dec.estimates()
    for g, label, e, se, lo, hi, unit in rows:
        key = f"{keys[label]}[{g}]"
        assert se == dec.se[key] > 0 and e == est[key], (key, e, se)
        assert (lo, hi) == (e - z * se, e + z * se) == dec.intervals(0.1)[key]
        assert unit == ("health levels" if label != "utility"
                        else "health gain minus treatment cost (the system's reward units)")
    assert rows[0][2] == dec.V[0] and rows[3][2] == dec.V[0] - dec.V_ps[0]
    md = (mc.write_report(tmp_path / "mc") / "report.md").read_text(encoding="utf-8")
    assert "### Per-group values: standard errors and 90% intervals" in md
    assert "Monte Carlo estimates, not exact values" in md
    # the exact engine's values are exact: no note, no second table
    titles = [t[0] for t in _tables(exact, None)]
    per_group = [t for t in titles if t.startswith("Per-group values")]
    assert len(per_group) == 1 and "estimates" not in per_group[0], per_group


# ------------------------------------------------ 4. --levels and --horizon: the library's
def test_levels_and_horizon_flags_are_the_librarys_checks(capsys, tmp_path):
    """`--horizon 0` / `--levels 2` had the CLI's own wording ("must be >= 1"); they are now
    the library's checks (check_horizon; the integer >= 3 of [model] levels and the
    lending model's n_levels) with the flag named, exit 2, one line."""
    import pytest

    from causalfair._validation import check_horizon, check_int
    from causalfair.cli import main
    from causalfair.errors import InputError

    with pytest.raises(InputError) as h:
        check_horizon(0)
    with pytest.raises(InputError) as k:
        check_int("levels", 2, 3)
    assert str(h.value) == "horizon: must be an integer >= 1, got 0."
    assert str(k.value) == "levels: must be an integer >= 3, got 2."
    for command, *more in (("decompose",), ("graph",), ("frontier",),
                           ("simulate-logs", "--out", str(tmp_path / "log.csv"))):
        for flag, value, exc in (("--horizon", "0", h), ("--levels", "2", k)):
            assert main([command, flag, value, *more]) == 2, (command, flag)
            err = capsys.readouterr().err
            assert err == f"causalfair {command}: error: --{exc.value}\n", err
