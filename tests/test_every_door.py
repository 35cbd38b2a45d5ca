"""One outside-style system through every door: a simulator written outside the project
(2 groups, 3 actions, 3 continuous features, declared horizon 8, no tabular model) and two
variants that break the simulator contract (a ``step`` that changes its input state, one
that draws from the global ``np.random``), driven through the command line (decompose,
audit, gate, graph, frontier, train, sweep, gate --retrain), the Python API
(``cf.decompose``, ``cf.benefit_fairness``, ``cf.audit``, ``causalfair.train.train``) and
the Gymnasium view (``causalfair/System-v0``). At each door: a broken simulator is refused
(exit 2 / a ``cf.CausalfairError`` naming the broken method); Lambda is finite with an
interval; the horizon is the system's; an in-memory stable-baselines3 ``Discrete(3)``
model gives the probabilities and audit numbers of its ``.zip``. Public surface only."""

from __future__ import annotations

import json
import math
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from tests.conftest import describe, run_cmd

ROOT = Path(__file__).resolve().parents[1]

SYSTEM_SRC = '"""An outside-style system: 2 groups, 3 actions, 3 continuous features, horizon 8."""\nfrom dataclasses import dataclass\n\nimport numpy as np\n\nimport causalfair as cf\n\nACTIONS = ("hold", "coach", "fund")\nEFFECT = np.array([0.0, 0.15, 0.35])\nCOST = np.array([0.0, 0.05, 0.2])\n\n\n@dataclass\nclass State:\n    x: np.ndarray      # (n, 3) float\n    group: np.ndarray  # (n,) int\n    t: int\n\n\nclass Sim:\n    n_groups = 2\n    group_names = ("north", "south")\n    n_actions = 3\n    action_labels = ACTIONS\n    baseline = 0\n    feature_names = ("skill", "savings", "age")\n\n    def reset(self, n, group, rng):\n        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()\n        x = rng.normal(0.0, 1.0, (n, 3))\n        x[:, 0] += np.where(g == 0, 0.5, -0.5)\n        return State(x=x, group=g, t=0)\n\n    def observe(self, state):\n        return cf.Observation(group=state.group, features=state.x.copy(), t=state.t)\n\n    def draw_noise(self, n, rng):\n        return rng.normal(0.0, 0.1, (n, 3))\n\n    def step(self, state, decisions, noise):\n        a = np.asarray(decisions, dtype=np.intp)\n        x = state.x + noise\n        x[:, 0] += EFFECT[a] * (1.0 - 0.5 * state.group)\n        gain = x[:, 0] - state.x[:, 0]\n        return cf.StepResult(state=State(x=x, group=state.group, t=state.t + 1),\n                             reward=gain - COST[a], gain=gain, info={})\n\n\nclass MutatingSim(Sim):\n    def step(self, state, decisions, noise):\n        res = super().step(state, decisions, noise)\n        state.x += 0.0 * state.x + 1e-3  # changes the caller\'s state in place\n        return res\n\n\nclass GlobalRandomSim(Sim):\n    def step(self, state, decisions, noise):\n        res = super().step(state, decisions, noise)\n        jitter = np.random.normal(0.0, 0.1, len(res.gain))  # global numpy generator\n        return cf.StepResult(state=res.state, reward=res.reward + jitter,\n                             gain=res.gain + jitter, info={})\n\n\ndef _system(sim_cls, name):\n    return cf.System(\n        id=name, groups=("north", "south"),\n        decisions=cf.DecisionSet(labels=ACTIONS, baseline=0),\n        features=("skill", "savings", "age"),\n        gain=cf.Gain("skill gain", "skill units"), reward="skill gain minus cost",\n        horizon=8, simulator=sim_cls,\n        structure=cf.CausalStructure(exogenous={"U": (True, False)}, s_to_x0=True,\n                                     s_to_transition=True),\n        description="outside-style system")\n\n\ndef make_outside():\n    return _system(Sim, "outside")\n\n\ndef make_mutating():\n    return _system(MutatingSim, "outside-mutating")\n\n\ndef make_global_random():\n    return _system(GlobalRandomSim, "outside-global-random")\n'

BROKEN = {
    "mutating": ("make_mutating", ["MutatingSim.step", "modified its input state in place"]),
    "global-random": ("make_global_random", ["GlobalRandomSim.step",
                                             "not a deterministic function"]),
}

SPEC = """name = "{name}"

[system]
factory = "outside:{factory}"

[policy]
{policy}

[engine]
n = 2000

[thresholds]
abs_C = {abs_c}
Lambda = 1.0
{extra}"""


def write_spec(folder: Path, name: str, factory: str = "make_outside",
               policy: str = 'builtin = "uniform"', abs_c: float = 5.0, extra: str = "") -> Path:
    path = folder / f"{name}.toml"
    path.write_text(SPEC.format(name=name, factory=factory, policy=policy, abs_c=abs_c,
                                extra=extra))
    return path


@pytest.fixture
def door(tmp_path):
    (tmp_path / "outside.py").write_text(SYSTEM_SRC)
    yield tmp_path
    sys.modules.pop("outside", None)


def cli(folder: Path, *args, timeout: float = 120):
    env = {"OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(ROOT)}
    return run_cmd([sys.executable, "-m", "causalfair", *args], cwd=folder, env=env,
                   timeout=timeout)


def system(folder: Path, factory: str = "make_outside"):
    return cf.systems.make(f"outside:{factory}", search_path=folder)


def assert_lambda(where: str, lam, ci) -> None:
    """Lambda finite, with a finite interval (lower <= upper)."""
    assert lam is not None and math.isfinite(lam), (where, lam)
    assert ci is not None and len(ci) == 2, (where, ci)
    lo, hi = float(ci[0]), float(ci[1])
    assert math.isfinite(lo) and math.isfinite(hi) and lo <= hi, (where, ci)


# ------------------------------------------------------------- (a) broken simulators
def cli_door_args(name: str, folder: Path, factory: str) -> list[str]:
    sid = f"outside:{factory}"
    if name in ("audit", "gate"):
        spec = write_spec(folder, f"door-{factory}", factory)
        return (["audit", spec.name, "--no-report"] if name == "audit" else
                ["gate", spec.name, "--junit", "gate.xml", "--json", "gate.json"])
    return {
        "decompose": ["decompose", "--system", sid, "--policy", "uniform", "--n", "2000", "--json"],
        "graph": ["graph", "--system", sid, "--policy", "uniform", "--out", "g.graphml"],
        "frontier": ["frontier", "--system", sid, "--points", "3", "--out", "fr", "--no-plot"],
        "train": ["train", "--system", sid, "--algo", "ppo", "--iterations", "1",
                  "--individuals", "64", "--out", "run", "--no-progress"],
        "sweep": ["sweep", "--algo", "ppo", "--seeds", "0", "--system", sid, "--iterations",
                  "1", "--set", "n_individuals=64", "--out", "sw"],
    }[name]


@pytest.mark.parametrize("broken", sorted(BROKEN))
@pytest.mark.parametrize("name", ["decompose", "audit", "gate", "graph", "frontier", "train",
                                  "sweep"])
def test_cli_door_refuses_a_broken_simulator(door, name, broken, cli_here):
    factory, needles = BROKEN[broken]
    args = cli_door_args(name, door, factory)
    # the doors that train run in this process (a second interpreter imports torch again)
    proc = cli_here(*args, cwd=door) if name in ("train", "sweep") else cli(door, *args)
    assert proc.returncode == 2, describe(proc, 2)
    line = proc.stderr.strip()
    assert "Traceback" not in line, describe(proc)
    for needle in needles:
        assert needle in line, (needle, describe(proc))
    assert not (door / "g.graphml").exists() and not (door / "fr").exists(), describe(proc)


def python_door(name: str, folder: Path, factory: str):
    if name == "decompose":
        return cf.decompose(system(folder, factory), cf.parse_policy("uniform", system(folder)),
                            n=2000)
    if name == "benefit_fairness":
        return cf.benefit_fairness(system(folder, factory),
                                   cf.parse_policy("uniform", system(folder)), n=2000)
    if name == "audit-dict":
        return cf.audit({"name": "d", "system": {"factory": f"outside:{factory}"},
                         "policy": {"builtin": "uniform"}, "engine": {"n": 2000},
                         "thresholds": {"abs_C": 5.0, "Lambda": 1.0}},
                        system=system(folder, factory))
    if name == "audit-path":
        return cf.audit(write_spec(folder, "p", factory))
    if name == "train":
        from causalfair.train import TrainConfig, train

        return train(TrainConfig(algo="ppo", iterations=1, n_individuals=64),
                     system=system(folder, factory))
    if name == "gymnasium":
        import gymnasium

        env = gymnasium.make("causalfair/System-v0", system=system(folder, factory))
        env.reset(seed=0)
        return env
    raise AssertionError(name)


PY_DOORS = ["decompose", "benefit_fairness", "audit-dict", "audit-path", "train", "gymnasium"]


@pytest.mark.parametrize("broken", sorted(BROKEN))
@pytest.mark.parametrize("name", PY_DOORS)
def test_python_door_refuses_a_broken_simulator(door, name, broken):
    factory, needles = BROKEN[broken]
    with pytest.raises(cf.CausalfairError) as info:
        python_door(name, door, factory)
    for needle in needles:
        assert needle in str(info.value), (name, str(info.value))


# ------------------------------------ (b) Lambda with its interval, (c) the system's horizon
def test_cli_decompose_audit_and_gate(door):
    proc = cli(door, "decompose", "--system", "outside:make_outside", "--policy", "uniform",
               "--n", "2000", "--json")
    assert proc.returncode == 0, describe(proc, 0)
    out = json.loads(proc.stdout)
    assert out["horizon"] == 8 and out["engine"] == "mc", out["horizon"]
    assert_lambda("decompose --json", out["Lambda"], out["Lambda_ci"])

    spec = write_spec(door, "good")
    proc = cli(door, "audit", spec.name, "--out", "rep")
    assert proc.returncode == 0, describe(proc, 0)
    doc = json.loads((door / "rep" / "audit.json").read_text())
    assert doc["decomposition"]["horizon"] == 8
    assert_lambda("audit.json", doc["decomposition"]["Lambda"], doc["decomposition"]["Lambda_ci"])
    assert doc["decomposition"]["C"] == out["C"]  # the same seed gives the same numbers

    proc = cli(door, "gate", spec.name, "--junit", "gate.xml", "--json", "gate.json")
    assert proc.returncode == 0, describe(proc, 0)
    verdicts = {v["key"]: v for v in json.loads((door / "gate.json").read_text())
                ["specs"][0]["verdicts"]}
    lam = verdicts["Lambda"]
    assert_lambda("gate --json", lam["estimate"], (lam["lower"], lam["upper"]))
    assert lam["estimate"] == doc["decomposition"]["Lambda"]
    assert ET.parse(door / "gate.xml").getroot().get("tests") == "2"


def test_cli_graph_and_frontier(door):
    proc = cli(door, "graph", "--system", "outside:make_outside", "--policy", "uniform",
               "--out", "g.graphml")
    assert proc.returncode == 0 and (door / "g.graphml").is_file(), describe(proc, 0)
    # the frontier LP needs a tabular model: a clear refusal, nothing written
    proc = cli(door, "frontier", "--system", "outside:make_outside", "--points", "3",
               "--out", "fr")
    assert proc.returncode == 2, describe(proc, 2)
    assert "tabular model" in proc.stderr and "Traceback" not in proc.stderr, describe(proc)
    assert not (door / "fr").exists()


def test_cli_train_reports_lambda_with_interval_at_the_systems_horizon(door, cli_here):
    proc = cli_here("train", "--system", "outside:make_outside", "--algo", "ppo",
                    "--iterations", "1", "--individuals", "64", "--out", "run", "--no-progress",
                    "--json", cwd=door)
    assert proc.returncode == 0, describe(proc, 0)
    metrics = json.loads(proc.stdout)["metrics"]
    assert_lambda("train --json", metrics["Lambda"], metrics.get("Lambda_ci"))
    numbers = {k: v for k, v in metrics.items() if not isinstance(v, (list, dict, str))}
    assert all(v is not None and math.isfinite(v) for v in numbers.values()), numbers  # NaN: null
    config = json.loads((door / "run" / "config.json").read_text())
    assert config["horizon"] == 8 and "n_levels" not in config, config
    row = json.loads((door / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert_lambda("metrics.jsonl", row["Lambda"], row.get("Lambda_ci"))


@pytest.mark.slow
def test_cli_sweep(door, cli_here):
    proc = cli_here("sweep", "--algo", "ppo", "--seeds", "0-1", "--system",
                    "outside:make_outside", "--iterations", "1", "--set", "n_individuals=64",
                    "--out", "sw", cwd=door)
    assert proc.returncode == 0, describe(proc, 0)
    import csv

    with (door / "sw" / "table.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    lam = [r for r in rows if r["metric"] == "Lambda"]
    assert len(lam) == 1, rows
    assert_lambda("sweep table.csv", float(lam[0]["mean"]),
                  (float(lam[0]["lower"]), float(lam[0]["upper"])))
    configs = sorted((door / "sw").rglob("config.json"))
    assert len(configs) == 2, configs
    assert all(json.loads(p.read_text())["horizon"] == 8 for p in configs)


@pytest.mark.slow
def test_cli_gate_retrain_of_a_checkpoint_trained_on_the_system(door, cli_here):
    proc = cli_here("train", "--system", "outside:make_outside", "--algo", "ppo",
                    "--iterations", "1", "--individuals", "64", "--out", "run", "--no-progress",
                    cwd=door)
    assert proc.returncode == 0, describe(proc, 0)
    spec = write_spec(door, "retrain", policy='checkpoint = "run/checkpoint.pt"', abs_c=0.001,
                      extra='\n[retrain]\nalgo = "ppo-c"\niterations = 1\n')
    proc = cli_here("gate", spec.name, "--retrain", "--json", "gate.json", "--junit",
                    "gate.xml", "--reports", "reps", cwd=door)
    assert proc.returncode == 1, describe(proc, 1)  # |C| <= 0.001 fails before and after
    entry = json.loads((door / "gate.json").read_text())["specs"][0]
    assert Path(door / entry["retrained_checkpoint"]).is_file(), entry
    for when in ("before", "after"):
        lam = {v["key"]: v for v in entry[when]["verdicts"]}["Lambda"]
        assert_lambda(f"gate --retrain {when}", lam["estimate"], (lam["lower"], lam["upper"]))
    doc = json.loads((door / "reps" / "retrain" / "audit.json").read_text())
    assert doc["decomposition"]["horizon"] == 8
    assert_lambda("retrain audit.json", doc["decomposition"]["Lambda"],
                  doc["decomposition"]["Lambda_ci"])


@pytest.mark.parametrize("name", ["decompose", "benefit_fairness", "audit-dict", "audit-path",
                                  "train"])
def test_python_door_lambda_and_horizon(door, name):
    res = python_door(name, door, "make_outside")
    if name == "benefit_fairness":
        assert_lambda(name, res.Lambda, res.ci)
        return
    if name == "train":
        assert res.config.horizon == 8 or res.config.horizon is None, res.config
        assert_lambda(name, res.metrics["Lambda"], res.metrics.get("Lambda_ci"))
        return
    dec = res if name == "decompose" else res.decomposition
    assert dec.horizon == 8 and dec.engine == "mc"
    assert_lambda(name, dec.Lambda, dec.Lambda_ci)


def test_gymnasium_view_runs_the_systems_horizon(door):
    import gymnasium

    env = gymnasium.make("causalfair/System-v0", system=system(door))
    assert env.action_space == gymnasium.spaces.Discrete(3)
    assert env.observation_space.shape == (3,)
    env.reset(seed=0)
    steps, done = 0, False
    while not done:
        _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert np.isfinite(reward)
        steps += 1
        done = terminated or truncated
    assert steps == 8


# ------------------------------------------------ (d) an in-memory SB3 model and its .zip
@pytest.fixture
def sb3_model(door):
    pytest.importorskip("stable_baselines3")
    import gymnasium
    import torch
    from stable_baselines3 import PPO

    class Features(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (3,), dtype=np.float32)
        action_space = gymnasium.spaces.Discrete(3)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(3, np.float32), {}

        def step(self, action):
            return np.zeros(3, np.float32), 0.0, True, False, {}

    torch.manual_seed(0)
    model = PPO("MlpPolicy", Features(), seed=0, n_steps=8, batch_size=8, device="cpu",
                policy_kwargs={"net_arch": [8]})
    model.save(door / "model.zip")
    return model


def test_in_memory_sb3_discrete3_equals_its_zip(door, sb3_model):
    s = system(door)
    mem = cf.as_policy(sb3_model)
    saved, _ = cf.load_checkpoint(door / "model.zip")
    obs = s.make_simulator().observe(s.make_simulator().reset(50, 1, np.random.default_rng(0)))
    p_mem, p_zip = mem.action_probs(obs), saved.action_probs(obs)
    assert p_mem.shape == (50, 3)
    np.testing.assert_array_equal(p_mem, p_zip)
    # the model itself, the adapter and the file audit to the same numbers, same seed
    a = cf.decompose(s, sb3_model, n=2000, seed=3)
    b = cf.decompose(s, saved, n=2000, seed=3)
    assert (a.C, a.DPE, a.Lambda, a.Lambda_ci) == (b.C, b.DPE, b.Lambda, b.Lambda_ci)
    assert_lambda("sb3 decompose", a.Lambda, a.Lambda_ci)
    assert cf.benefit_fairness(s, sb3_model, n=2000).Lambda == cf.benefit_fairness(
        s, saved, n=2000).Lambda
    spec = {"name": "sb3", "system": {"factory": "outside:make_outside"},
            "engine": {"n": 2000}, "thresholds": {"abs_C": 5.0}}
    r_mem = cf.audit(spec, system=s, policy=sb3_model)
    r_zip = cf.audit(write_spec(door, "zip", policy='checkpoint = "model.zip"'))
    assert r_mem.decomposition.C == r_zip.decomposition.C
    assert r_mem.decomposition.Lambda == r_zip.decomposition.Lambda
    assert r_zip.decomposition.horizon == 8
