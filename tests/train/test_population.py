"""The algorithms of Yin et al. (NeurIPS 2023) on replicator-1: the continuous-threshold population
MDP against the system's own simulator, the reference and metrics by hand, the myopic
baselines, the audit of a population agent, and short seeded runs of R-TD3 and L-UCBFair."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

import causalfair as cf
from causalfair.errors import ConfigError
from causalfair.train import population as P


@pytest.fixture(scope="module")
def system():
    return cf.systems.make("replicator-1", horizon=6)


def test_the_population_mdp_is_the_systems_simulator(system):
    env = P.PopulationEnv(system)
    sim = system.make_simulator()
    rng = np.random.default_rng(0)
    q = rng.uniform(0.05, 0.95, size=(7, 2))
    k = rng.integers(0, len(env.grid), size=(7, 2))
    q2, r, D = env.step(q, env.grid[k])
    s = sim.reset(7, None, rng)
    s.q[:] = q.reshape(-1)
    res = sim.step(s, k.reshape(-1), sim.draw_noise(14, rng))
    np.testing.assert_allclose(q2.reshape(-1), res.state.q, rtol=0, atol=1e-15)
    np.testing.assert_allclose(r, (res.reward.reshape(7, 2) * env.w).sum(1), atol=1e-15)
    # demographic parity by hand: xi_g = q TPR + (1 - q) FPR, X ~ N(+-1, 1)
    a = env.grid[k]
    xi = q * (1 - norm.cdf(a - 1)) + (1 - q) * (1 - norm.cdf(a + 1))
    np.testing.assert_allclose(D, 0.5 * (xi[:, 0] - xi[:, 1]) ** 2, atol=1e-12)


def test_regret_and_violation_by_hand():
    reg, drtn = P.regret_and_violation([1.0, 2.0, 3.0], [4.0, 6.0, 5.5], V_star=3.0, c=5.0)
    np.testing.assert_allclose(reg, [2.0, 3.0, 3.0])
    np.testing.assert_allclose(drtn, [1.0, 0.0, 0.0])  # max(0, 1), max(0, 1 - 1), max(0, -0.5)


def test_best_constant_is_the_best_feasible_pair(system):
    env = P.PopulationEnv(system)
    starts = np.array([[0.3, 0.7], [0.8, 0.2]])
    c = 5.9
    ref = P.best_constant(env, c, starts)
    for i, s0 in enumerate(starts):  # every pair rolled one at a time
        best = -np.inf
        for x in env.grid:
            for y in env.grid:
                agent = P.PopulationAgent("c", lambda q, t, x=x, y=y: np.tile([x, y], (len(q), 1)))
                v = P.episode_values(env, agent, s0)
                if v["V_g"][0] >= c:
                    best = max(best, v["V_r"][0])
        assert ref["V_r"][i] == pytest.approx(best, abs=1e-12)
    with pytest.raises(ConfigError, match="no constant threshold pair meets V_g >= 7"):
        P.best_constant(env, 7.0, starts)


def test_myopic_baselines(system):
    env = P.PopulationEnv(system)
    q = np.array([[0.3, 0.7]])
    # task "tp" (alpha 1, beta 0): r = sum_g w_g q_g TPR(a_g) falls with every threshold
    np.testing.assert_array_equal(P.myopic(env).act(q, 0), [[0.0, 0.0]])
    # lam -> 1 (disparity only): the chosen pair equalises acceptance as well as the grid can
    a = P.myopic(env, lam=0.999).act(q, 0)
    _, _, D = env.step(q, a)
    assert D[0] < 1e-4
    with pytest.raises(ConfigError, match="lam: must be in"):
        P.myopic(env, lam=1.0)


def test_an_agent_audits_on_the_system(system):
    env = P.PopulationEnv(system)
    agent = P.PopulationAgent("const", lambda q, t: np.tile([0.31, 0.68], (len(q), 1)))
    d = cf.decompose_mc(system, P.audit_policy(env, agent), n=2, seed=0)
    snapped = P.PopulationAgent("snap", lambda q, t: np.tile([0.3, 0.7], (len(q), 1)))
    v = P.episode_values(env, snapped)
    assert d.total_utility == pytest.approx(v["V_r"][0], abs=1e-12)
    assert d.C == pytest.approx(d.DPE + d.IPE + d.SPE, abs=1e-12)
    with pytest.raises(ConfigError, match="replicator-1"):
        P.PopulationEnv(cf.systems.make("attention-1"))


def test_rtd3_and_lucbfair_run_seeded(system):
    env = P.PopulationEnv(system)
    c = P.RTD3Config(steps=480, envs=4, learning_starts=48, hidden=(16, 16), batch=32)
    a, b = P.train_rtd3(system, c), P.train_rtd3(system, c)
    assert len(a.history) == 480 // 6 and a.history == b.history
    q = np.random.default_rng(0).uniform(0.1, 0.9, (5, 2))
    out = a.act(q, 3)
    assert out.shape == (5, 2) and ((0 <= out) & (out <= 1)).all()
    np.testing.assert_array_equal(out, b.act(q, 3))
    lc = P.LUCBFairConfig(episodes=12, phi_samples=2000, phi_epochs=2, d=6)
    u, v = P.train_lucbfair(system, lc), P.train_lucbfair(system, lc)
    assert len(u.history) == 12 and u.history == v.history
    assert all(0.0 <= h["nu"] <= lc.chi for h in u.history)
    loci = np.arange(0.1, 1.0, 0.2)
    acts = u.act(q, 0)
    assert np.isin(np.round(acts, 10), np.round(loci, 10)).all()  # a locus of the 5 x 5 grid
    assert P.episode_values(env, u)["V_r"].shape == (1,)


def test_bad_configs_name_the_field():
    with pytest.raises(ConfigError, match="steps: bad value 0"):
        P.RTD3Config(steps=0)
    with pytest.raises(ConfigError, match="lr: bad value -1"):
        P.RTD3Config(lr=-1)
    with pytest.raises(ConfigError, match="chi: bad value -1"):
        P.LUCBFairConfig(chi=-1)
    assert P.LUCBFairConfig(chi=0).chi == 0  # the supplementary code's setting
    with pytest.raises(ConfigError, match="episodes: bad value 1000000"):
        P.LUCBFairConfig(episodes=1_000_000)


# ------------------------------------------------------------------ checkpoints and CLI
@pytest.fixture(scope="module")
def trained(system):
    rt = P.train_rtd3(system, P.RTD3Config(steps=240, envs=4, learning_starts=48,
                                           hidden=(16, 16), batch=32))
    lu = P.train_lucbfair(system, P.LUCBFairConfig(episodes=8, phi_samples=1000,
                                                   phi_epochs=2, d=6))
    return {"r-td3": rt, "l-ucbfair": lu}


@pytest.mark.parametrize("algo", ["r-td3", "l-ucbfair"])
def test_a_saved_agent_acts_and_audits_exactly_as_trained(algo, system, trained, tmp_path):
    env = P.PopulationEnv(system)
    agent = trained[algo]
    path = tmp_path / "agent.npz"
    P.save_agent(path, agent, env.grid, metadata={"note": "x"})
    back = P.load_agent(path)
    q = np.random.default_rng(1).uniform(0.05, 0.95, (9, 2))
    for t in (0, 3, 5):
        np.testing.assert_array_equal(back.act(q, t), agent.act(q, t))
    pol, meta = cf.load_checkpoint(path)
    assert meta["architecture"]["algo"] == algo and meta["metadata"]["note"] == "x"
    a = cf.decompose_mc(system, pol, n=2, seed=0)
    b = cf.decompose_mc(system, P.audit_policy(env, agent), n=2, seed=0)
    assert a.estimates() == b.estimates()
    assert a.C == pytest.approx(a.DPE + a.IPE + a.SPE, abs=1e-12)


def _rewrite(src, dst, edit):
    """Copy an .npz checkpoint through ``edit(meta, arrays)``."""
    import json

    with np.load(src, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays.pop("meta_json")))
    edit(meta, arrays)
    np.savez(dst, meta_json=np.array(json.dumps(meta)), **arrays)


@pytest.mark.parametrize("edit, msg", [
    (lambda m, a: m["architecture"].update(algo="dqn"), "architecture.algo: bad value 'dqn'"),
    (lambda m, a: m["architecture"].update(horizon=0), "architecture.horizon: bad value 0"),
    (lambda m, a: m["architecture"].update(nu=float("nan")), "architecture.nu: bad value"),
    (lambda m, a: m["metadata"].update(grid="0.5"), "metadata.grid: bad value"),
    (lambda m, a: a.pop("W_g"), "array 'W_g' is missing"),
    (lambda m, a: a.update(Linv=a["Linv"][:, :2]), "array 'Linv' has shape"),
    (lambda m, a: a.update({"phi.0.weight": a["phi.0.weight"][:, :3]}), "layer phi.0 has shapes"),
    (lambda m, a: a["W_r"].__setitem__((0, 0), np.inf), "array 'W_r' must hold finite floats"),
    (lambda m, a: a.update(extra=np.zeros(2)), "unexpected arrays \\['extra'\\]"),
])
def test_a_bad_population_checkpoint_names_the_field(edit, msg, system, trained, tmp_path):
    from causalfair.errors import CheckpointError

    good, bad = tmp_path / "good.npz", tmp_path / "bad.npz"
    P.save_agent(good, trained["l-ucbfair"], P.PopulationEnv(system).grid)
    _rewrite(good, bad, edit)
    with pytest.raises(CheckpointError, match=msg):
        cf.load_checkpoint(bad)


def test_only_trained_agents_save_and_only_as_npz(system, trained, tmp_path):
    env = P.PopulationEnv(system)
    with pytest.raises(ConfigError, match="only trained R-TD3 and L-UCBFair"):
        P.save_agent(tmp_path / "m.npz", P.myopic(env), env.grid)
    with pytest.raises(ConfigError, match="saved as .npz"):
        P.save_agent(tmp_path / "m.pt", trained["r-td3"], env.grid)
    assert not any(tmp_path.iterdir())


def test_cli_trains_saves_and_the_audit_reads_the_checkpoint(tmp_path, capsys):
    import json

    from causalfair.cli import main

    out = tmp_path / "run"
    args = ["train", "--system", "replicator-1", "--param", "horizon=6", "--algo", "l-ucbfair",
            "--iterations", "5", "--set", "phi_samples=500", "--set", "phi_epochs=1",
            "--set", "d=4", "--out", str(out), "--json"]
    assert main(args) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["metrics"]["episodes"] == 5
    assert len((out / "metrics.csv").read_text().splitlines()) == 1 + 5
    assert main(["decompose", "--system", "replicator-1", "--param", "horizon=6", "--n", "2",
                 "--checkpoint", str(out / "checkpoint.npz"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["C"] == pytest.approx(res["metrics"]["C"], abs=1e-12)
    assert d["benefit"]["Lambda"] >= 0  # benefit by unit-alone forks on coupled units
    # the agent is refused on a system it cannot act on
    assert main(["decompose", "--system", "infectious-1", "--n", "2",
                 "--checkpoint", str(out / "checkpoint.npz")]) == 2
    assert "acts on replicator dynamics" in capsys.readouterr().err


def test_cli_r_td3_runs_whole_rounds_of_episodes(tmp_path, capsys):
    import json

    from causalfair.cli import main

    args = ["train", "--system", "replicator-1", "--param", "horizon=4", "--algo", "r-td3",
            "--iterations", "5", "--set", "envs=4", "--set", "hidden=[8, 8]",
            "--set", "learning_starts=8", "--set", "batch=8", "--out", str(tmp_path / "r"),
            "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["episodes"] == 8  # 2 rounds of 4
    back = P.load_agent(tmp_path / "r" / "checkpoint.npz")
    assert back.act(np.array([[0.5, 0.5]]), 0).shape == (1, 2)


@pytest.mark.parametrize("extra, msg", [
    (["--beta-c", "1"], "--beta-c: not used by --algo r-td3"),
    (["--set", "nope=1"], "--set nope: not a field of RTD3Config"),
    (["--iterations", "0"], "--iterations: bad value 0"),
    (["--system", "lending-1"], "R-TD3 and L-UCBFair (Yin et al., NeurIPS 2023) run on replicator-1"),
])
def test_cli_usage_errors_exit_2_and_write_nothing(extra, msg, tmp_path, capsys):
    from causalfair.cli import main

    out = tmp_path / "run"
    assert main(["train", "--algo", "r-td3", "--out", str(out), *extra]) == 2
    assert msg in capsys.readouterr().err
    assert not out.exists()
