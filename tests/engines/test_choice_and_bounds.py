"""Monte Carlo requests are bounded before they start (a ceiling on unit-steps, batches
generated lazily; a sweep's seed range counted before it is listed), and the Python
entry points choose the engine a system supports: exact with a tabular model, else
Monte Carlo, with Lambda and its interval either way."""

from __future__ import annotations

import json
import math
import resource
import time
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from tests.conftest import describe, run_cli

ROOT = Path(__file__).resolve().parents[2]

#: A system written outside the project: 2 groups, 3 actions, 3 continuous features,
#: no levels, no tabular model, a declared horizon of 8.
OUTSIDE = '''
from dataclasses import dataclass

import numpy as np

import causalfair as cf


@dataclass
class State:
    x: np.ndarray
    g: np.ndarray
    t: int


class Outside:
    n_groups = 2
    group_names = ("a", "b")
    n_actions = 3
    baseline = 0

    def reset(self, n, group, rng):
        return State(x=rng.normal(0.3 * group, 1.0, size=(n, 3)),
                     g=np.full(n, group, dtype=np.intp), t=0)

    def observe(self, s):
        return cf.Observation(group=s.g, features=s.x, t=s.t)

    def draw_noise(self, n, rng):
        return rng.normal(size=(n, 3))

    def step(self, s, d, noise):
        d = np.asarray(d, dtype=np.intp)
        eff = np.array([0.0, 0.1, 0.25])[d] * (1.0 - 0.3 * s.g)
        x = 0.9 * s.x + 0.1 * noise + eff[:, None]
        gain = x.sum(1) - s.x.sum(1)
        return cf.StepResult(state=State(x=x, g=s.g, t=s.t + 1), gain=gain,
                             reward=gain - 0.05 * d)


class Severe:
    name = "severe"

    def action_probs(self, obs):
        p2 = 1.0 / (1.0 + np.exp(-np.asarray(obs.features)[:, 0]))
        return np.stack([0.5 * (1 - p2), 0.5 * (1 - p2), p2], axis=1)


def make():
    return cf.System(id="outside", groups=("a", "b"),
                     decisions=cf.DecisionSet(labels=("none", "small", "big"), baseline=0),
                     features=("f0", "f1", "f2"), horizon=8, simulator=Outside)
'''


@pytest.fixture(scope="module")
def outside():
    ns: dict = {}
    exec(compile(OUTSIDE, "outside.py", "exec"), ns)  # noqa: S102 - the test's own source
    return ns["make"](), ns["Severe"]()


def _limited(args, cwd=ROOT, extra_path=None):
    """The CLI with at most 1.5 GiB of address space and 120 s: an unbounded request
    fails (MemoryError, a traceback) instead of taking the machine."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))

    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(ROOT) + (f":{extra_path}" if extra_path else "")}
    t0 = time.perf_counter()
    proc = run_cli(*args, cwd=cwd, env=env, timeout=120, preexec_fn=cap)
    return proc, time.perf_counter() - t0


# ------------------------------------------------------------------- bounded requests
@pytest.mark.parametrize("args", [
    ["decompose", "--system", "lending-1", "--engine", "mc", "--n", "1000000000000"],
    ["decompose", "--system", "infectious-1", "--policy", "never", "--n", "1000000000000"],
])
def test_a_huge_monte_carlo_n_is_refused_before_it_starts(args):
    proc, seconds = _limited(args)
    assert proc.returncode == 2, describe(proc, 2)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "unit-steps" in lines[0], describe(proc)
    assert "CAUSALFAIR_MAX_UNIT_STEPS" in lines[0], describe(proc)
    assert seconds < 30, (seconds, describe(proc))


def test_the_ceiling_is_set_by_its_environment_variable(monkeypatch):
    system = cf.systems.make("lending-1")
    pol = cf.parse_policy("threshold:0.5", system)
    monkeypatch.setenv("CAUSALFAIR_MAX_UNIT_STEPS", "1000")
    with pytest.raises(cf.CausalfairError, match=r"1\.6e\+03 unit-steps .* limit of 1e\+03"):
        cf.decompose_mc(system, pol, 8, n=100)  # 100 x 2 groups x 8 epochs
    with pytest.raises(cf.CausalfairError, match="unit-steps"):  # two policies: twice the work
        cf.engines.montecarlo.compare_mc(system, pol, pol, 8, n=50)
    assert cf.decompose_mc(system, pol, 8, n=50).n == 50  # 800 unit-steps: under it
    monkeypatch.setenv("CAUSALFAIR_MAX_UNIT_STEPS", "lots")
    with pytest.raises(cf.CausalfairError, match="CAUSALFAIR_MAX_UNIT_STEPS: bad value 'lots'"):
        cf.decompose_mc(system, pol, 8, n=50)


def test_a_huge_sweep_seed_range_is_refused_in_one_line():
    proc, seconds = _limited(["sweep", "--algo", "ppo", "--seeds", "0-100000000000",
                              "--out", "never-written"])
    assert proc.returncode == 2, describe(proc, 2)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "seeds:" in lines[0] and "10000" in lines[0], describe(proc)
    assert seconds < 30, (seconds, describe(proc))
    assert not (ROOT / "never-written").exists()
    from causalfair.train.sweep import parse_seeds

    with pytest.raises(cf.CausalfairError, match="over the limit of 10000"):
        parse_seeds("0-5000,6000-11000")
    assert parse_seeds("0-2,7") == [0, 1, 2, 7]


# --------------------------------------------------------- engines and Lambda everywhere
def _finite_lambda_with_interval(res):
    assert math.isfinite(res.Lambda) and res.Lambda >= 0
    lo, hi = res.Lambda_ci
    assert math.isfinite(lo) and math.isfinite(hi) and 0 <= lo <= hi
    assert res.Lambda_ci_level == pytest.approx(0.95)


def test_decompose_on_a_system_without_tabular_model_uses_monte_carlo(outside):
    system, pol = outside
    res = cf.decompose(system, pol, n=400, seed=1)
    assert res.engine == "mc" and res.horizon == 8 and res.n == 400
    for k in ("C", "DPE", "IPE", "SPE"):
        assert math.isfinite(getattr(res, k)), k
    assert res.C == pytest.approx(res.DPE + res.IPE + res.SPE, abs=1e-12)
    _finite_lambda_with_interval(res)
    assert res.to_dict()["Lambda"] == res.Lambda
    with pytest.raises(cf.CausalfairError, match="engine: bad value 'exact'.*no tabular model"):
        cf.decompose(system, pol, engine="exact")


def test_decompose_on_a_tabular_system_stays_exact():
    system = cf.systems.make("lending-1")
    pol = cf.parse_policy("threshold:0.5", system)
    res = cf.decompose(system, pol)
    ref = cf.decompose(system.tabular, pol, system.horizon)
    assert res.engine == "exact" and res.horizon == system.horizon
    assert (res.C, res.Lambda) == (ref.C, ref.Lambda)
    mc = cf.decompose(system, pol, engine="mc", n=500)
    assert mc.engine == "mc" and mc.Lambda == pytest.approx(ref.Lambda, abs=1e-12)


def test_benefit_fairness_on_a_system_without_tabular_model(outside):
    system, pol = outside
    ben = cf.benefit_fairness(system, pol, n=300, seed=2)
    assert ben.method == "mc" and math.isfinite(ben.Lambda) and ben.se is not None
    lo, hi = ben.ci
    assert 0 <= lo <= hi and ben.delta.shape[0] == 2
    again = cf.benefit_fairness(system, pol, n=300, seed=2)
    assert again.Lambda == ben.Lambda  # seeded
    with pytest.raises(cf.CausalfairError, match="engine: bad value 'exact'"):
        cf.benefit_fairness(system, pol, engine="exact")


def test_decompose_mc_returns_lambda_with_its_interval(outside):
    system, pol = outside
    res = cf.decompose_mc(system, pol, n=300, seed=0)
    _finite_lambda_with_interval(res)
    assert res.benefit is not None and res.benefit.Lambda == res.Lambda
    d = res.to_dict()
    assert d["Lambda_ci"] == list(res.Lambda_ci) and d["Lambda_se"] == res.benefit.se
    assert "Lambda" in res.summary() and "CI" in res.summary().split("Lambda")[1].splitlines()[0]


def test_decompose_mc_on_coupled_units_has_lambda():
    system = cf.systems.make("infectious-1")
    res = cf.decompose_mc(system, cf.parse_policy("never", system), 4, n=20, seed=0)
    assert res.Lambda is not None and res.Lambda_ci is not None
    assert res.benefit.method == "mc"  # unit-alone forks (causalfair.engines.benefit_mc)


def test_cli_engine_mc_json_has_a_finite_lambda(tmp_path):
    (tmp_path / "outside.py").write_text(OUTSIDE)
    proc, _ = _limited(["decompose", "--system", "outside:make", "--policy", "uniform",
                        "--engine", "mc", "--n", "300", "--json"], cwd=tmp_path,
                       extra_path=tmp_path)
    assert proc.returncode == 0, describe(proc, 0)
    doc = json.loads(proc.stdout)
    assert doc["horizon"] == 8 and np.isfinite(doc["Lambda"]), describe(proc)
    assert len(doc["Lambda_ci"]) == 2 and doc["benefit"]["Lambda"] == doc["Lambda"]


def test_benefit_fairness_has_the_lambda_ci_the_readme_names():
    """h8sys F2: README: "cf.decompose and cf.benefit_fairness also take a System ... and
    Lambda always comes with its interval (result.Lambda_ci)"; cf.benefit_fairness's
    result had only ``ci`` (None on the exact engine), so ``result.Lambda_ci`` raised
    AttributeError. It is the decomposition's: the forks' interval, zero width exact."""
    model = cf.lending_setting("lending-1").tabular
    exact = cf.benefit_fairness(model, "threshold:0.5", horizon=3)
    assert exact.Lambda_ci == cf.decompose(model, "threshold:0.5", horizon=3).Lambda_ci
    assert exact.Lambda_ci == (exact.Lambda, exact.Lambda)
    mc = cf.benefit_fairness(model, "threshold:0.5", horizon=3, engine="mc", n=400)
    assert mc.Lambda_ci == mc.ci and mc.Lambda_ci[0] <= mc.Lambda <= mc.Lambda_ci[1]
