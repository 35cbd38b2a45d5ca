"""A user's Gymnasium env audited through ``cf.systems.from_gym`` and ``[system] gym``:
the decomposition agrees with the same dynamics written as a batched four-method
simulator; forks that would lose common random numbers are refused with exit 2 and one
line; spec, gate and SB3 policies (a .zip and an in-memory model) run on it."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.montecarlo import decompose_mc
from causalfair.errors import InputError
from causalfair.policies.adapters import callable_policy
from causalfair.systems.gym.door import GymForkError
from causalfair.types import Observation, StepResult
from tests.conftest import describe, run_cmd

# A textbook Gymnasium env: one student per env, its own np_random, the group pinned
# through reset(options=), the qualification gain in info. Tutoring (action 1) succeeds
# with probability sigmoid(x); without it the skill reverts towards 0.
ENV_SRC = textwrap.dedent('''
    import threading

    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces

    MU = (0.5, -0.5)


    class TutorEnv(gym.Env):
        def __init__(self, horizon=5):
            self.observation_space = spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float64)
            self.action_space = spaces.Discrete(2)
            self.horizon = horizon

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.g = int((options or {}).get("group", 0))
            self.x = float(self.np_random.normal(MU[self.g], 1.0))
            self.t = 0
            return np.array([self.x, float(self.g), 0.0]), {"group": self.g}

        def _draws(self, action):
            return self.np_random.random(), self.np_random.normal()

        def step(self, action):
            u, z = self._draws(action)
            p = 1.0 / (1.0 + np.exp(-self.x))
            dx = (0.4 if u < p else -0.3) if action == 1 else -0.1 * self.x
            dx += 0.1 * z
            self.x += dx
            self.t += 1
            reward = (1.0 if u < p else -1.0) if action == 1 else 0.0
            return (np.array([self.x, float(self.g), float(self.t)]), reward, False, self.t >= self.horizon,
                    {"gain": dx})


    class ActionDraws(TutorEnv):  # draws u only when it tutors
        def _draws(self, action):
            u = self.np_random.random() if action == 1 else 0.5
            return u, self.np_random.normal()


    class GlobalRng(TutorEnv):  # reads numpy's global generator
        def _draws(self, action):
            return np.random.random(), self.np_random.normal()


    class Locked(TutorEnv):  # holds a lock: cannot be copied
        def __init__(self, horizon=5):
            super().__init__(horizon)
            self.lock = threading.Lock()


    def make_env(horizon=5):
        return TutorEnv(horizon)


    def make_action_draws():
        return ActionDraws()


    def make_global_rng():
        return GlobalRng()


    def make_locked():
        return Locked()
''')

MU = (0.5, -0.5)


class TutorSim:
    """The dynamics of ENV_SRC's TutorEnv as a batched four-method simulator."""

    n_groups = 2

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group), (n,)).astype(int)
        return (rng.normal(np.take(MU, g), 1.0), g, 0)

    def observe(self, state):
        x, g, t = state
        return Observation(group=g, features=np.column_stack([x, g.astype(float), np.full(len(x), float(t))]), t=t)

    def draw_noise(self, n, rng):
        return {"u": rng.random(n), "z": rng.normal(size=n)}

    def step(self, state, decisions, noise):
        x, g, t = state
        d = np.asarray(decisions, dtype=bool)
        ok = noise["u"] < 1.0 / (1.0 + np.exp(-x))
        dx = np.where(d, np.where(ok, 0.4, -0.3), -0.1 * x) + 0.1 * noise["z"]
        reward = np.where(d, np.where(ok, 1.0, -1.0), 0.0)
        return StepResult(state=(x + dx, g, t + 1), reward=reward, gain=dx)


POLICY = callable_policy(lambda f: 1.0 / (1.0 + np.exp(-3.0 * f[:, 0])), inputs="features",
                         name="logistic skill")
KEYS = ("C", "DPE", "IPE", "SPE")


@pytest.fixture(scope="module")
def envmod(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gymenv")
    (folder / "tutor_env.py").write_text(ENV_SRC, encoding="utf-8")
    sys.path.insert(0, str(folder))
    try:
        import tutor_env

        yield folder, tutor_env
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("tutor_env", None)


def _agree(seed: int, envmod, n: int = 1500, T: int = 4) -> None:
    _, mod = envmod
    system = cf.systems.from_gym(mod.make_env, groups=["s+", "s-"], horizon=T)
    a = decompose_mc(system, POLICY, n=n, seed=seed, benefit_n=4)
    b = decompose_mc(cf.systems.as_system(TutorSim()), POLICY, horizon=T, n=n, seed=seed + 1000,
                     benefit_n=4)
    ea, eb = a.estimates(), b.estimates()
    for k in KEYS:
        se = float(np.hypot(a.se[k], b.se[k]))
        assert abs(ea[k] - eb[k]) <= 4 * se + 1e-12, (k, ea[k], eb[k], se)
    assert abs(ea["IPE"]) > 4 * a.se["IPE"]  # the test has an indirect effect to agree on


def test_decomposition_agrees_with_batched_simulator(envmod):
    _agree(0, envmod)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 9))
def test_decomposition_agrees_over_seeds(envmod, seed):
    _agree(seed, envmod, n=4000, T=5)


def test_forks_share_random_numbers(envmod):
    """A fork leaves its state unchanged and, with the same noise and action, repeats the
    transition; different actions from one state see the same random numbers."""
    _, mod = envmod
    sim = cf.systems.from_gym(mod.make_env, groups=["a", "b"]).make_simulator()
    rng = np.random.default_rng(1)
    state = sim.reset(8, 1, rng)
    x0 = state.obs.copy()
    noise = sim.draw_noise(8, rng)
    r1 = sim.step(state, np.ones(8, int), noise)
    r2 = sim.step(state, np.ones(8, int), noise)
    r0 = sim.step(state, np.zeros(8, int), noise)
    np.testing.assert_array_equal(state.obs, x0)
    np.testing.assert_array_equal(r1.gain, r2.gain)
    np.testing.assert_array_equal(r1.state.obs, r2.state.obs)
    # the baseline fork: dx = -0.1 x + 0.1 z with the same z as the tutored branch
    z = (r0.gain + 0.1 * x0[:, 0]) / 0.1
    p = 1 / (1 + np.exp(-x0[:, 0]))
    tutored = r1.gain - 0.1 * z
    assert np.all(np.isclose(tutored, 0.4) | np.isclose(tutored, -0.3))
    assert np.all(state.group == 1) and np.all(x0[:, 1] == 1.0)
    assert r1.reward.shape == (8,) and 0 < p.mean() < 1


@pytest.mark.parametrize("factory, words", [
    ("make_action_draws", "different random numbers under different actions"),
    ("make_global_rng", "global random generator"),
    ("make_locked", "cannot be copied"),
])
def test_bad_forks_refused_in_process(envmod, factory, words):
    _, mod = envmod
    with pytest.raises(GymForkError, match=words) as exc:
        cf.systems.from_gym(getattr(mod, factory), groups=["a", "b"])
    assert isinstance(exc.value, InputError) and "\n" not in str(exc.value)


SPEC = """name = "tutor"
horizon = 4

[system]
gym = "tutor_env:{factory}"
groups = ["White", "Black"]
group = "options"
gain = "info:gain"
baseline = 0

[policy]
{policy}

[engine]
kind = "mc"
n = 300

[thresholds]
C = 5.0
"""


def _spec(folder: Path, name: str, factory: str = "make_env",
          policy: str = 'builtin = "uniform"') -> Path:
    (folder / "tutor_env.py").write_text(ENV_SRC, encoding="utf-8")
    path = folder / f"{name}.toml"
    path.write_text(SPEC.format(factory=factory, policy=policy), encoding="utf-8")
    return path


@pytest.mark.parametrize("factory, words", [
    ("make_action_draws", "draw the same random numbers whatever the action"),
    ("make_global_rng", "np.random"),
    ("make_locked", "get_state"),
])
def test_bad_forks_exit_2_with_one_line(tmp_path, factory, words):
    spec = _spec(tmp_path, "bad", factory)
    proc = run_cmd([sys.executable, "-m", "causalfair", "audit", spec, "--no-report"],
                   cwd=tmp_path, expect=2, timeout=120)
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and words in err and "Traceback" not in err, proc.stderr


def test_spec_audit_and_gate(tmp_path):
    spec = _spec(tmp_path, "tutor")
    res = cf.audit(spec)
    est = res.decomposition.estimates()
    assert res.system.id == "gym:tutor_env:make_env" and res.system.n_actions == 2
    assert abs(est["C"] - (est["DPE"] + est["IPE"] + est["SPE"])) < 1e-9
    proc = run_cmd([sys.executable, "-m", "causalfair", "gate", spec, "--junit", "gate.xml"],
                   cwd=tmp_path, expect=0, timeout=180)
    assert (tmp_path / "gate.xml").is_file(), proc.stderr


@pytest.mark.slow
def test_sb3_zip_and_in_memory_model(tmp_path, envmod):
    sb3 = pytest.importorskip("stable_baselines3")
    _, mod = envmod
    model = sb3.PPO("MlpPolicy", mod.make_env(), n_steps=32, batch_size=32, n_epochs=1, seed=0,
                    device="cpu")
    model.learn(32)
    model.save(tmp_path / "tutor.zip")
    spec = _spec(tmp_path, "sb3", policy='checkpoint = "tutor.zip"')
    from_zip = cf.audit(spec).decomposition.estimates()
    in_memory = cf.audit(spec, policy=model).decomposition.estimates()
    for k in KEYS:
        assert from_zip[k] == pytest.approx(in_memory[k], abs=1e-9), k


def test_spec_gym_keys_checked(tmp_path):
    from causalfair.audit.spec import load_spec
    from causalfair.errors import SpecError

    with pytest.raises(SpecError, match=r"\[system\] groups: only used with \[system\] gym"):
        load_spec({"name": "x", "system": {"id": "lending-1", "groups": ["a", "b"]}})
    with pytest.raises(SpecError, match=r"\[system\] groups: bad value \['a'\]"):
        load_spec({"name": "x", "system": {"gym": "m:f", "groups": ["a"]}})
    spec = load_spec({"name": "x", "system": {"gym": "m:f", "groups": ["a", "b"], "gain": "reward"}})
    assert spec.system_id == "gym" and spec.system_params["gain"] == "reward"


# ------------------------------------------------------------------ policies, CLI doors, views
def _agent(width: int = 3, forward: bool = True):
    """A CleanRL-style PPO agent over the observation vector: an ``actor`` of logits (and a
    ``critic``), with or without its own ``forward``."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Agent(nn.Module):
        def __init__(self):
            super().__init__()
            self.critic = nn.Sequential(nn.Linear(width, 8), nn.Tanh(), nn.Linear(8, 1))
            self.actor = nn.Sequential(nn.Linear(width, 8), nn.Tanh(), nn.Linear(8, 2))

        def get_value(self, x):
            return self.critic(x)

    class WithForward(Agent):
        def forward(self, x):
            return self.actor(x)

    torch.manual_seed(0)
    return WithForward() if forward else Agent()


def test_cleanrl_torch_module_audits_directly(envmod):
    """An nn.Module over the observation vector audits as it is (through cf.as_policy);
    a CleanRL agent without forward is read through its actor, giving the same numbers."""
    _, mod = envmod
    system = cf.systems.from_gym(mod.make_env, groups=["s+", "s-"], horizon=3)
    with_fwd, no_fwd = _agent(), _agent(forward=False)
    pol = cf.as_policy(no_fwd, system)
    obs = Observation(group=np.zeros(4, int), features=np.random.default_rng(0).normal(size=(4, 3)))
    assert pol.action_probs(obs).shape == (4, 2)
    a = decompose_mc(system, with_fwd, n=200, seed=0).estimates()
    b = decompose_mc(system, no_fwd, n=200, seed=0).estimates()
    for k in KEYS:
        assert a[k] == b[k], k
    assert abs(a["C"] - (a["DPE"] + a["IPE"] + a["SPE"])) < 1e-9


def test_torch_module_width_checked_against_the_env(envmod):
    _, mod = envmod
    system = cf.systems.from_gym(mod.make_env, groups=["s+", "s-"], horizon=3)
    from causalfair.errors import PolicyError

    with pytest.raises(PolicyError, match=r"reads 5 inputs .* observes 3 features \(x0, x1, x2\)"
                       ) as exc:
        cf.as_policy(_agent(width=5), system)
    assert "\n" not in str(exc.value)


def test_label_names_the_env_and_group_column_detected(tmp_path, envmod):
    """A spec's system label names the env; the observation column that carries the group
    is the system's group role, so a network reading it reads S."""
    _, mod = envmod
    spec = _spec(tmp_path, "label")
    res = cf.audit(spec)
    assert "gym:tutor_env:make_env" in res.summary()
    system = cf.systems.from_gym(mod.make_env, groups=["a", "b"])
    assert system.id == "gym:tutor_env:make_env" and dict(system.roles) == {"group": ["x1"]}
    assert cf.policies.resolve(_agent(), system).reads_group is True


def test_gymnasium_view_round_trips(envmod):
    """gymnasium.make('causalfair/System-v0', system=from_gym(...)) steps like the env:
    the observation is the env's, info['gain'] its skill change, truncation at the horizon."""
    gymnasium = pytest.importorskip("gymnasium")
    import causalfair.systems.gym.system  # noqa: F401 - registers the ids

    _, mod = envmod
    system = cf.systems.from_gym(mod.make_env, groups=["s+", "s-"], horizon=4)
    env = gymnasium.make("causalfair/System-v0", system=system)
    o, info = env.reset(seed=3)
    assert o.shape == (3,) and o[1] == float(info["group"][0]) and o[2] == 0.0
    for t, a in enumerate([1, 0, 1, 1], start=1):
        o2, r, term, trunc, info = env.step(a)
        assert o2[2] == t and o2[1] == o[1]
        assert info["gain"][0] == pytest.approx(o2[0] - o[0], abs=1e-5)
        assert (r in (-1.0, 1.0)) if a == 1 else r == 0.0
        assert trunc == (t == 4) and not term
        o = o2


def test_jobs_2_identical_to_serial(envmod):
    from causalfair.backends import make_backend

    _, mod = envmod
    system = cf.systems.from_gym(mod.make_env, groups=["s+", "s-"], horizon=3)
    serial = decompose_mc(system, POLICY, n=400, seed=5, batch_size=100)
    two = decompose_mc(system, POLICY, n=400, seed=5, batch_size=100,
                       backend=make_backend(jobs=2, backend="process"))
    for k in KEYS:
        assert serial.estimates()[k] == two.estimates()[k], k
        assert serial.se[k] == two.se[k], k


@pytest.mark.slow
def test_train_hint_runs_and_gate_retrain_reaudits(tmp_path, cli_here, monkeypatch):
    """`causalfair train` on a gym system writes its checkpoint and prints a runnable audit
    command (its --param values kept), which runs in a shell of its own; `gate --retrain`
    on a failing threshold retrains that checkpoint on the gym system and re-audits the new
    one. train and gate run in this process (a second interpreter imports torch again)."""
    import shlex

    _spec(tmp_path, "unused")
    monkeypatch.delitem(sys.modules, "tutor_env", raising=False)  # this folder's module
    proc = cli_here("train", "--system", "gym", "--param", "env=tutor_env:make_env",
                    "--param", 'groups=["A","B"]', "--horizon", "3", "--iterations", "1",
                    "--out", "run", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, describe(proc, 0)
    assert (tmp_path / "run" / "checkpoint.pt").is_file(), describe(proc)
    hint = next(ln for ln in proc.stdout.splitlines() if "audit it:" in ln).split("audit it:")[1]
    words = shlex.split(hint)
    assert words[:2] == ["causalfair", "decompose"] and "env=tutor_env:make_env" in words, hint
    run_cmd([sys.executable, "-m", *words, "--n", "200", "--json"], cwd=tmp_path, expect=0,
            timeout=300)
    spec = tmp_path / "retrain.toml"
    spec.write_text(SPEC.format(factory="make_env", policy='checkpoint = "run/checkpoint.pt"')
                    .replace("C = 5.0", "C = -1.0").replace('horizon = 4', 'horizon = 3')
                    + '\n[retrain]\nalgo = "ppo-cb"\niterations = 1\nbetas = { C = 1.0 }\n',
                    encoding="utf-8")
    proc = cli_here("gate", spec, "--retrain", "--junit", "gate.xml", cwd=tmp_path)
    assert proc.returncode == 1, describe(proc, 1)
    new = tmp_path / "run" / "checkpoint.retrained-ppo-cb-1.pt"
    assert new.is_file(), proc.stderr
    xml = (tmp_path / "gate.xml").read_text(encoding="utf-8")
    assert "checkpoint.retrained-ppo-cb-1.pt" in xml and "gym:tutor_env:make_env" in xml, proc.stderr
    assert "before retraining" in xml, proc.stderr
