"""The Monte Carlo options (n, seed, jobs, device, benefit_bins) are checked by one function
(causalfair.engines._mc_base.mc_options) on every engine: the exact engine ignores a valid
value and refuses a bad one with the Monte Carlo engine's words (h6hunt1 F1)."""

from __future__ import annotations

import pytest

import causalfair as cf
from causalfair.errors import InputError
from tests.conftest import run_cli

BAD = [({"seed": "x"}, "seed"), ({"seed": -1}, "seed"), ({"n": 0}, "n"),
       ({"jobs": "many"}, "jobs"), ({"jobs": 0}, "jobs"), ({"device": "tpu"}, "device"),
       ({"benefit_bins": 0}, "benefit_bins")]


@pytest.fixture(scope="module")
def lending():
    return cf.systems.make("lending-1")


@pytest.mark.parametrize("kw,field", BAD)
@pytest.mark.parametrize("tabular", [False, True])
def test_decompose_exact_refuses_bad_mc_options(lending, kw, field, tabular):
    model = lending.tabular if tabular else lending
    with pytest.raises(InputError, match=rf"^{field}: "):
        cf.decompose(model, "threshold:0.5", 3, **kw)


@pytest.mark.parametrize("kw,field", [b for b in BAD if b[1] in ("seed", "n", "benefit_bins")])
def test_benefit_and_attribute_exact_refuse_bad_mc_options(lending, kw, field):
    with pytest.raises(InputError, match=rf"^{field}: "):
        cf.benefit_fairness(lending.tabular, "threshold:0.5", 3, **kw)
    if field != "benefit_bins":
        with pytest.raises(InputError, match=rf"^{field}: "):
            cf.attribute(lending.tabular, "threshold:0.5", "never", 3, **kw)


def test_compare_groups_exact_refuses_bad_jobs(lending):
    with pytest.raises(InputError, match=r"^jobs: "):
        cf.compare_groups(lending.tabular, "threshold:0.5", 3, jobs="many")


def test_valid_mc_options_stay_accepted_on_exact(lending):
    ref = cf.decompose(lending, "threshold:0.5", 3)
    got = cf.decompose(lending, "threshold:0.5", 3, n=5, seed=7, jobs=2, device="cpu",
                       benefit_bins=2)
    assert got.engine == "exact" and got.C == ref.C


def test_cli_exact_refuses_negative_seed():
    r = run_cli("decompose", "--system", "lending-1", "--horizon", "3", "--seed", "-3")
    assert r.returncode == 2 and "--seed: must be an integer >= 0" in r.stderr
