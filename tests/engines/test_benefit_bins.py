"""Lambda's cells on a system observed through features: ``benefit_bins`` quantile bins
per feature, the same through every door (decompose_mc, cf.decompose, the spec's
``[benefit] bins``, ``causalfair decompose --benefit-bins``), and a refusal for too many
cells that names those knobs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.audit.spec import load_spec
from causalfair.engines.benefit_mc import benefit_fairness_mc
from causalfair.engines.montecarlo import decompose_mc
from causalfair.errors import InputError, ResourceLimitError, SpecError
from causalfair.policies.adapters import callable_policy
from tests.conftest import one_line_error, run_cli
from tests.systems.gym_students import Student

REPO = Path(__file__).resolve().parents[2]
POLICY = callable_policy(lambda f: 1.0 / (1.0 + np.exp(-2.0 * f[:, 0])), inputs="features",
                         name="logistic")


@pytest.fixture(scope="module")
def system():
    return cf.systems.from_gym(Student, groups=["a", "b"], horizon=3)


def test_bins_reach_lambda_through_every_python_door(system):
    two = decompose_mc(system, POLICY, n=400, seed=1, benefit_bins=2)
    four = decompose_mc(system, POLICY, n=400, seed=1)
    # x0 continuous: `bins` quantile bins; x1 the group (0 or 1): one bin per value
    assert "(2x2 cells" in two.benefit.cells and "(4x2 cells" in four.benefit.cells
    assert two.Lambda != four.Lambda
    alone = benefit_fairness_mc(system, POLICY, 3, n=400, seed=1, bins=2)
    assert alone.Lambda == two.Lambda and alone.ci == two.Lambda_ci
    api = cf.decompose(system, POLICY, n=400, seed=1, benefit_bins=2)
    assert api.Lambda == two.Lambda
    ben = cf.benefit_fairness(system, POLICY, n=400, seed=1, benefit_bins=2)
    assert ben.Lambda == two.Lambda and "(2x2 cells" in ben.cells
    lam_t = cf.benefit_fairness(system, POLICY, n=100, seed=1, benefit_bins=2,
                                horizon_benefit=True)
    assert lam_t.notion == "Lambda_T" and "(2x2 cells" in lam_t.cells
    pairs = cf.compare_groups(system, POLICY, n=400, seed=1, benefit_bins=2)
    assert pairs.quantity("a-b", "Lambda")[0] == two.Lambda
    with pytest.raises(InputError, match=r"benefit_bins: must be an integer >= 1, got 0"):
        decompose_mc(system, POLICY, n=400, seed=1, benefit_bins=0)


def test_too_many_cells_names_the_knobs(system, monkeypatch):
    """The pair terms' check (its estimate, benefit_mc.pair_bytes, made large here: on this
    small system the pairs of its cells take less memory than its envs) names the bins."""
    from causalfair.engines import benefit_mc

    monkeypatch.setattr(benefit_mc, "pair_bytes", lambda *a, **k: 1 << 40)
    with pytest.raises(ResourceLimitError, match=r"lower the quantile bins per feature "
                       r"\(now 4: benefit_bins= in Python, --benefit-bins on the command line, "
                       r"\[benefit\] bins in a spec\)"):
        benefit_fairness_mc(system, POLICY, 3, n=50, seed=0)


def test_spec_benefit_bins():
    base = {"name": "x", "system": {"id": "lending-1"}}
    assert load_spec(base).benefit_bins == 4
    assert load_spec({**base, "benefit": {"bins": 2}}).benefit_bins == 2
    with pytest.raises(SpecError, match=r"\[benefit\] bins: bad value 0"):
        load_spec({**base, "benefit": {"bins": 0}})


def test_cli_benefit_bins(tmp_path):
    err = one_line_error(run_cli("decompose", "--system", "lending-1", "--benefit-bins", "2",
                                 expect=2, cwd=tmp_path))
    assert "--benefit-bins: only with the Monte Carlo engine" in err
    gym = ["--system", "gym", "--param", "env=tests.systems.gym_students:Student",
           "--param", 'groups=["a","b"]', "--policy", "uniform", "--horizon", "3", "--n", "300"]
    err = one_line_error(run_cli("decompose", *gym, "--benefit-bins", "0", expect=2, cwd=REPO))
    assert "--benefit-bins: must be an integer >= 1, got 0" in err
    out = run_cli("decompose", *gym, "--benefit-bins", "2", "--json", expect=0, cwd=REPO)
    assert "(2x2 cells" in json.loads(out.stdout)["benefit"]["cells"]
