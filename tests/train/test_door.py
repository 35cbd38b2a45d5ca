"""The train and retrain doors give the guarantees the audit doors give, on a system
written outside the project (2 groups, 3 actions, 3 continuous features, horizon 8, no
tabular model): the simulator contract, the system's horizon, the system's own config
fields, finite printed numbers, a retrained checkpoint in its source's format, and
messages that name what a spec holds."""

from __future__ import annotations

import json
import math
import re
import sys

import numpy as np
import pytest

import causalfair as cf
from causalfair.cli import main
from causalfair.errors import SimulatorContractError

MOD = "outside_door_sim"
SIM = '''
from dataclasses import dataclass
import numpy as np
import causalfair as cf
from causalfair.systems.simulator import StepResult


@dataclass
class St:
    x: np.ndarray
    group: np.ndarray
    t: int = 0


class Sim:
    n_groups = 2
    n_actions = 3
    baseline = 0
    feature_names = ("a", "b", "c")
    horizon = 8

    def __init__(self, mode):
        self.mode = mode

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
        return St(x=rng.normal(size=(n, 3)) + 0.5 * g[:, None], group=g)

    def observe(self, s):
        return cf.Observation(group=s.group, features=s.x, t=s.t)

    def draw_noise(self, n, rng):
        return rng.normal(size=n)

    def step(self, s, d, noise):
        d = np.asarray(d, dtype=np.intp)
        if self.mode == "random":  # breaks the contract: randomness of its own
            noise = noise + np.random.normal(size=noise.shape)
        x = s.x.copy()
        x[:, 0] += np.array([0.0, 0.1, 0.3])[d] - 0.1 * s.group + 0.1 * noise
        if self.mode == "mutate":  # breaks the contract: changes its input state
            s.x[:, 0] += 1.0
        gain = x[:, 0] - s.x[:, 0]
        return StepResult(state=St(x=x, group=s.group, t=s.t + 1), gain=gain,
                          reward=gain - np.array([0.0, 0.05, 0.2])[d])


def make(mode="ok"):
    return Sim(mode)


class Uniform:
    def action_probs(self, obs):
        return np.full((len(obs.group), 3), 1.0 / 3.0)


def make_policy():
    return Uniform()
'''
LENDING_ONLY = {"setting", "n_levels", "interest", "env", "pop_steps", "pop_max_steps",
                "pop_mass", "c_estimator", "gain_q"}


@pytest.fixture
def here(tmp_path, monkeypatch):
    (tmp_path / f"{MOD}.py").write_text(SIM)
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop(MOD, None)


def _train(*extra):
    return ["train", "--system", f"{MOD}:make", "--algo", "ppo", "--iterations", "2",
            "--individuals", "32", "--set", "audit_n=200", "--no-progress", *extra]


def _error_line(err: str) -> str:
    return err.strip().splitlines()[-1].split("error: ", 1)[-1]


@pytest.mark.parametrize("mode", ["mutate", "random"])
def test_train_refuses_a_contract_breaking_simulator_as_decompose_does(here, capsys, mode):
    assert main(["decompose", "--system", f"{MOD}:make", "--param", f"mode={mode}",
                 "--policy", "uniform", "--n", "200"]) == 2
    expected = _error_line(capsys.readouterr().err)
    assert "simulator Sim.step:" in expected, expected
    assert main(_train("--param", f"mode={mode}", "--out", "run")) == 2
    err = capsys.readouterr().err
    assert _error_line(err) == expected, err
    assert "Traceback" not in err and not (here / "run").exists()
    # the Python door refuses it too
    with pytest.raises(SimulatorContractError, match=re.escape(expected)):
        cf.train.train(cf.train.TrainConfig(algo="ppo", iterations=1, n_individuals=32),
                       system=cf.systems.make(f"{MOD}:make", search_path=here, mode=mode))


def test_train_uses_the_system_horizon_records_its_fields_and_prints_finite_numbers(here, capsys):
    assert main(_train("--out", "run")) == 0
    out = capsys.readouterr().out
    assert "T = 8" in out and re.search(r"--horizon 8(\s|$)", out, re.M), out
    numbers = re.findall(r"(\w+)=([-+]?\S+?)(?=\s|$)", out.splitlines()[1])
    assert {"C", "DPE", "IPE", "SPE"} <= {k for k, _ in numbers}, out
    assert all(math.isfinite(float(v)) for _, v in numbers), out
    assert "C_hat" not in out  # plain PPO computes no C_hat
    assert re.search(r"C=\S+ \(95% CI \[[-+]\S+, [-+]\S+\]\)", out), out  # Monte Carlo C
    config = json.loads((here / "run" / "config.json").read_text())
    assert config["horizon"] == 8 and config["system"] == f"{MOD}:make"
    assert not LENDING_ONLY & set(config), sorted(LENDING_ONLY & set(config))
    # --json: strict JSON (no NaN), every metric finite
    assert main(_train("--out", "run2", "--algo", "ppo-c", "--json")) == 0
    doc = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(c))
    numbers = {k: v for k, v in doc["metrics"].items() if not isinstance(v, (list, dict, str))}
    assert all(v is not None and math.isfinite(v) for v in numbers.values()), numbers  # NaN: null
    # the command line overrides the system's horizon
    assert main(_train("--out", "run3", "--set", "horizon=5")) == 0
    assert "T = 5" in capsys.readouterr().out
    assert json.loads((here / "run3" / "config.json").read_text())["horizon"] == 5


def test_the_python_door_trains_over_the_system_horizon(here):
    system = cf.systems.make(f"{MOD}:make", search_path=here)
    res = cf.train.train(cf.train.TrainConfig(algo="ppo", iterations=1, n_individuals=32,
                                              audit_n=50), system=system)
    assert res.config.horizon == 8
    # the lending settings keep theirs
    assert cf.train.TrainConfig().horizon is None


def _npz_checkpoint(here):
    """A network for the outside system, saved as .npz."""
    from causalfair.policies.checkpoint import save_checkpoint

    system = cf.systems.make(f"{MOD}:make", search_path=here)
    res = cf.train.train(cf.train.TrainConfig(algo="ppo", iterations=1, n_individuals=32,
                                              audit_n=50), out=here / "run", system=system)
    pol, meta = cf.load_checkpoint(res.checkpoint)
    save_checkpoint(here / "p.npz", pol.to_torch(), architecture=meta["architecture"],
                    encoding=pol.encoding, metadata=meta["metadata"])
    return here / "p.npz"


def test_a_retrained_npz_checkpoint_stays_npz(here, capsys):
    from causalfair.audit.retrain import retrained_checkpoint_path

    assert retrained_checkpoint_path(here / "m.npz", "ppo").name == "m.retrained-ppo-1.npz"
    assert retrained_checkpoint_path(here / "m.pt", "ppo").name == "m.retrained-ppo-1.pt"
    _npz_checkpoint(here)
    (here / "g.toml").write_text(
        f'name = "g"\n[system]\nfactory = "{MOD}:make"\n[policy]\ncheckpoint = "p.npz"\n'
        '[engine]\nkind = "mc"\nn = 200\n[thresholds]\nabs_C = 0.0\n'
        '[retrain]\nalgo = "ppo"\niterations = 1\n')
    code = main(["gate", "g.toml", "--retrain"])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    new = here / "p.retrained-ppo-1.npz"
    assert new.is_file() and not list(here.glob("p.retrained-*.pt")), sorted(here.iterdir())
    with np.load(new, allow_pickle=False) as z:  # a real .npz checkpoint, no pickle
        assert "meta_json" in z.files
    pol, meta = cf.load_checkpoint(new)
    assert meta["metadata"]["system"] == f"{MOD}:make"
    assert "p.retrained-ppo-1.npz" in captured.out


def test_gate_retrain_names_a_factory_policy(here, capsys):
    (here / "f.toml").write_text(
        f'name = "f"\n[system]\nfactory = "{MOD}:make"\n[policy]\nfactory = "{MOD}:make_policy"\n'
        '[engine]\nkind = "mc"\nn = 200\n[thresholds]\nabs_C = 0.0\n'
        '[retrain]\nalgo = "ppo"\niterations = 1\n')
    assert main(["gate", "f.toml", "--retrain"]) == 2
    err = capsys.readouterr().err
    assert "[policy] factory: --retrain warm-starts from the network" in err, err
    assert f"a factory '{MOD}:make_policy'" in err and "cannot be retrained" in err, err
    assert "builtin None" not in err


def test_thresholds_have_one_home():
    from causalfair import thresholds
    from causalfair.audit import run, spec, spec_sections
    from causalfair.train import algorithms, generic, repair

    assert repair.Constraint is thresholds.Constraint and run.judge is thresholds.judge
    assert spec.THRESHOLD_KEYS is thresholds.THRESHOLD_KEYS
    assert spec_sections.PPO_LAG_KEYS is thresholds.PPO_LAG_KEYS
    # abs_ keys judge the interval of the absolute value
    assert thresholds.judge_key("abs_C", -0.04, 0.03, 0.05) == thresholds.PASS
    assert thresholds.judge_key("C", -0.2, -0.1, -0.15) == thresholds.INCONCLUSIVE
    assert thresholds.parse_constraint("abs_C<=0.05").judge(-0.2, -0.1) == thresholds.FAIL
    # one registry of algorithms behind every list
    assert spec.RETRAIN_ALGOS == algorithms.names(retrain=True)
    assert generic.GENERIC_ALGOS == algorithms.names(generic=True)
    assert cf.train.ALGORITHMS == algorithms.names(trainer="ppo", runs_as="")
