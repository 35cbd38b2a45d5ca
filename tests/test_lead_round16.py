"""The lead's fixes of session 16, each found by a helper's walkthrough: the gate names a
spec that cannot be read by the audit's own reading (a deep or huge TOML was a
RecursionError traceback, exit 1); decompose's --alpha is the library's rule for every
engine (1.5 was accepted by the exact engine); a model's selection rates stay in [0, 1]
(approve-everyone gave 1 + 2e-16, which audit.json's schema refuses)."""

from __future__ import annotations

import json

import causalfair as cf
from tests.conftest import run_cli, schema_errors


def test_gate_refuses_a_deeply_nested_spec_in_one_line(tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text('name = "deep"\nx = ' + "[" * 5000 + "]" * 5000 + "\n")
    dots = tmp_path / "dots.toml"
    dots.write_text('name = "dots"\n' + ".".join(["a"] * 3000) + " = 1\n")
    for spec, words in ((deep, "nested more than"), (dots, "more than 100 parts")):
        r = run_cli("gate", str(spec), expect=2)
        assert "Traceback" not in r.stderr and "RecursionError" not in r.stderr, r.stderr
        assert words in r.stderr, r.stderr


def test_decompose_alpha_is_the_librarys_rule_on_every_engine():
    for alpha, words in (("1.5", "--alpha: must be in (0, 1), got 1.5"),
                         ("0.95", "--alpha: 0.95 is the error level of 5% intervals")):
        r = run_cli("decompose", "--setting", "lending-1", "--alpha", alpha, expect=2)
        assert words in r.stderr, r.stderr


def test_approve_everyone_has_selection_rates_at_most_one_and_a_valid_audit_json(tmp_path):
    spec = {"name": "always", "horizon": 20, "system": {"id": "lending-1"},
            "policy": {"builtin": "always"}, "engine": {"kind": "exact"},
            "thresholds": {"abs_C": 0.5}}
    r = cf.audit(spec)
    rates = r.to_dict()["selection"]
    for per_action in rates["rate"].values():
        for series in per_action.values():
            assert all(0.0 <= x <= 1.0 for x in series), series
    assert all(x == 1.0 for g in rates["rate_overall"].values() for x in g.values())
    out = tmp_path / "audit.json"
    out.write_text(json.dumps(r.to_dict()))
    assert schema_errors(out, "audit") == []


def test_a_gate_keeps_the_other_specs_when_one_breaks_the_simulator_contract(tmp_path):
    """The contract check of an exact audit runs where the audit runs (a gate's worker,
    under the time limit), so a spec that breaks it is that spec's ERROR; it ran in the
    driver's preparation of every spec once, and the gate then lost the others' verdicts."""
    from tests.test_hallway4 import BROKEN, ROOT, WRONG

    (tmp_path / "brokenclinic_l16.py").write_text(
        f"CLINIC = {str(ROOT / 'docs/examples/clinic.py')!r}\n" + BROKEN, encoding="utf-8")
    (tmp_path / "b.toml").write_text('name = "b"\n[system]\nfactory = "brokenclinic_l16:make_broken"\n'
                                     '[policy]\nbuiltin = "uniform"\n[thresholds]\nabs_C = 0.9\n',
                                     encoding="utf-8")
    (tmp_path / "ok.toml").write_text('name = "ok"\nhorizon = 5\n[system]\nid = "lending-1"\n'
                                      '[policy]\nbuiltin = "always"\n[thresholds]\nabs_C = 0.9\n',
                                      encoding="utf-8")
    for jobs in ("1", "2"):
        r = run_cli("gate", "b.toml", "ok.toml", "--jobs", jobs, "--json", "-",
                    cwd=tmp_path, expect=2)
        doc = json.loads(r.stdout)
        got = {e["name"]: e["overall"] for e in doc["specs"]}
        assert got == {"b": "ERROR", "ok": "PASS"}, (jobs, got)
        assert WRONG in r.stdout + r.stderr


def test_a_constraint_pair_is_read_by_the_one_pair_reader():
    """The repair's and the Lagrangian's refusals of a pair that names no two groups are
    resolve_pair's (the thresholds' and the engines' words), each naming its key; each had
    its own wording."""
    import pytest

    from causalfair.engines.groups import resolve_pair
    from causalfair.errors import ConfigError, InputError
    from causalfair.thresholds import parse_constraint
    from causalfair.train.lagrangian import Lagrangian
    from causalfair.train.repair import expand

    with pytest.raises(InputError) as ref:
        resolve_pair("B-Z", ("A", "B", "C"), "X")
    words = str(ref.value).removeprefix("X")
    with pytest.raises(ConfigError) as lag:
        Lagrangian(["abs_C[B-Z]<=0.1"], ("A", "B", "C"), lr=0.5, system_id="tri")
    assert str(lag.value) == "constraints: abs_C[B-Z] <= 0.1" + words

    class Model:
        group_names = ("A", "B", "C")

    with pytest.raises(InputError) as rep:
        expand(Model(), [parse_constraint("abs_C[B-Z]<=0.1")])
    assert str(rep.value) == "constraint abs_C[B-Z]" + words


def test_a_sweeps_alpha_is_the_librarys_rule():
    """alpha = 0.95 (the confidence level given for the error level) made 5% t-intervals;
    the sweep checked only (0, 1)."""
    import pandas as pd
    import pytest

    from causalfair.errors import ConfigError
    from causalfair.train.sweep import tabulate

    with pytest.raises(ConfigError, match="0.95 is the error level of 5% intervals"):
        tabulate(pd.DataFrame({"system": ["s"], "algo": ["ppo"], "seed": [0], "C": [0.1]}), 0.95)


def test_resume_refuses_a_state_whose_json_is_nested_too_deep(tmp_path):
    """A state.pt whose metadata is JSON nested 100,000 deep: a RecursionError traceback;
    now read within the limits of every JSON causalfair reads, and refused in one line."""
    import torch

    torch.save({"policy": {}, "value": {}, "optimizer": {}, "torch_rng": torch.zeros(1),
                "json": "[" * 100_000 + "]" * 100_000}, tmp_path / "state.pt")
    r = run_cli("train", "--resume", "--out", str(tmp_path), expect=2)
    assert "Traceback" not in r.stderr and "state.pt: json is missing or malformed" in r.stderr


PRINTING = '''
import importlib.util, sys
import causalfair as cf

_spec = importlib.util.spec_from_file_location("clinic_l16_base", CLINIC)
clinic = importlib.util.module_from_spec(_spec)
sys.modules["clinic_l16_base"] = clinic
_spec.loader.exec_module(clinic)

class Chatty(clinic.ClinicSimulator):
    def step(self, state, decisions, noise):
        print("debug: stepping", len(decisions))
        return super().step(state, decisions, noise)

def make_chatty(levels: int = 5):
    return clinic.make_clinic(levels).with_(simulator=lambda: Chatty(levels))
'''


def test_a_simulator_that_prints_on_every_step_leaves_the_json_whole(tmp_path):
    """Each step's print went into `decompose --json` / `audit --json` (only the factory's
    and its import's prints were sent to stderr)."""
    from tests.test_hallway4 import ROOT

    (tmp_path / "chatty_l16.py").write_text(
        f"CLINIC = {str(ROOT / 'docs/examples/clinic.py')!r}\n" + PRINTING, encoding="utf-8")
    (tmp_path / "c.toml").write_text('name = "c"\nhorizon = 3\n[system]\nfactory = '
                                     '"chatty_l16:make_chatty"\n[policy]\nbuiltin = "uniform"\n'
                                     '[engine]\nkind = "mc"\nn = 200\n[thresholds]\nabs_C = 0.9\n',
                                     encoding="utf-8")
    for args in (("decompose", "--system", "chatty_l16:make_chatty", "--policy", "uniform",
                  "--engine", "mc", "--n", "200", "--horizon", "3", "--json"),
                 ("audit", "c.toml", "--json", "--no-report")):
        r = run_cli(*args, cwd=tmp_path, expect=0)
        json.loads(r.stdout)  # nothing else on stdout
        assert "debug: stepping" in r.stderr


def test_annex_iv_says_a_monte_carlo_audits_group_values_are_estimates(tmp_path):
    """report.md said so (and gives their intervals); Annex IV listed the same values as if
    exact. The exact examples' Annex IV is unchanged (checked by --reproduce elsewhere)."""
    spec = tmp_path / "mc.toml"
    spec.write_text('name = "mc"\nhorizon = 5\n[system]\nid = "lending-1"\n[policy]\n'
                    'builtin = "threshold:0.5"\n[engine]\nkind = "mc"\nn = 500\n'
                    '[thresholds]\nabs_C = 0.5\n', encoding="utf-8")
    run_cli("audit", str(spec), "--out", str(tmp_path / "r"), expect=0)
    annex = (tmp_path / "r" / "annex-iv.md").read_text(encoding="utf-8")
    line = next(x for x in annex.splitlines() if x.startswith("- Outcomes per group"))
    assert "Monte Carlo estimates, not exact values" in line
    report = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert "standard error" in report


def test_benefit_by_forks_called_directly_checks_the_policy_as_the_decomposition_does():
    """benefit_fairness_mc (and system_benefit on a system without a tabular model) ran a
    batch-mean policy silently; decompose_mc refused it (the check is now one function,
    engines._mc_base.check_policy_state, that both call)."""
    import numpy as np
    import pytest

    from causalfair.engines.benefit_mc import benefit_fairness_mc
    from causalfair.errors import PolicyError
    from causalfair.policies.resolver import callable_policy

    centred = callable_policy(lambda lv, g: 1.0 / (1.0 + np.exp(-(lv - lv.mean()))),
                              inputs="level_group", name="centred")
    row_wise = callable_policy(lambda lv, g: 1.0 / (1.0 + np.exp(-(lv - 3.0))),
                               inputs="level_group", name="row_wise")
    system = cf.systems.make("lending-1")
    with pytest.raises(PolicyError, match="centred"):
        benefit_fairness_mc(system, centred, 3, n=200, n_boot=0)
    with pytest.raises(PolicyError, match="centred"):
        cf.decompose(system, centred, 3, engine="mc", n=200)
    assert benefit_fairness_mc(system, row_wise, 3, n=200, n_boot=0).Lambda >= 0.0
