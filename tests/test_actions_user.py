"""A user's own system beyond the lending shape: four actions (a non-zero baseline
included), three groups, continuous features read by a torch network, gains that are
negative for one group and zero for another, and policies that depend on t
(docs/own-system.md, docs/decomposition.md "More than two actions")."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.montecarlo import decompose_mc
from causalfair.engines.notions import other_notions
from causalfair.errors import CausalfairError
from causalfair.policies.grid import reads_group

GROUPS = ("north", "south", "east")
ACTIONS = ("home", "outpatient", "admit", "icu")
K, F, T = 4, 6, 5


def _model(blind: bool = False, baseline: int = 2, named: bool = True) -> cf.TabularModel:
    """Health levels 0..K-1 moving -1/0/+1; the potential is convex for north, falling for
    south (its gains are negative when health improves) and zero for east."""
    kernel = np.zeros((3, 4, K, K))
    x = np.arange(K)
    for g in range(3):
        for a in range(4):
            up = np.clip(0.05 + 0.12 * a * (1 - x / K) - 0.03 * g * (not blind), 0.01, 0.9)
            down = 0.25 - 0.04 * a + 0.02 * g * (not blind) + (0.08 if a == 3 else 0.0)
            for move, p in ((-1, down), (1, up), (0, 1 - up - down)):
                np.add.at(kernel[g, a], (x, np.clip(x + move, 0, K - 1)), p)
    centres = (2.0, 2.0, 2.0) if blind else (2.5, 1.0, 1.8)
    initial = np.stack([np.exp(-0.5 * ((x - c) / 1.1) ** 2) for c in centres])
    potential = np.stack([x ** 2 / 5.0] * 3) if blind else np.stack(
        [x ** 2 / 5.0, -0.5 * x, np.zeros(K)])
    feats = np.zeros((3, K, F))
    for g in range(3):
        gg = 0 if blind else g
        feats[g] = np.stack([x / K, (x / K) ** 2, np.sin(x), np.cos(x),
                             np.full(K, (5.0, 40.0, 20.0)[gg]), np.sqrt(x + 1.0)], 1)
    names = dict(group_names=GROUPS, action_labels=ACTIONS,
                 level_labels=tuple("ABCD")) if named else {}
    return cf.TabularModel(kernel=kernel, initial=initial / initial.sum(1, keepdims=True),
                           potential=potential, baseline=baseline, features=feats,
                           feature_names=tuple(f"f{i}" for i in range(F)), name="triage",
                           reward=-np.tile(np.array([0.0, 0.1, 0.5, 2.0])[None, :, None],
                                           (3, 1, K)), **names)


def _system(blind: bool = False, baseline: int = 2, named: bool = True) -> cf.System:
    return cf.System(id="triage", groups=GROUPS,
                     decisions=cf.DecisionSet(labels=ACTIONS, baseline=baseline),
                     features=tuple(f"f{i}" for i in range(F)), levels=tuple("ABCD"),
                     horizon=T, tabular=_model(blind, baseline, named))


class Escalating:
    """A stochastic policy that escalates with t and reads the group (no declarations)."""

    name = "escalating"

    def action_probs(self, obs):
        t = float(obs.t)  # fails on t=None: the exact engine must show it t
        lv, n = np.asarray(obs.level), len(obs)
        z = np.stack([np.full(n, 1.0), 0.3 * t - 0.2 * lv, 0.2 * t * (lv < 2),
                      -1.0 + 0.1 * t + 0.3 * np.asarray(obs.group)], 1)
        e = np.exp(z - z.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)


class EscalatingFromZero(Escalating):
    """The same policy, reading a missing t as 0 (so a stationary evaluation runs)."""

    def action_probs(self, obs):
        return super().action_probs(obs if obs.t is not None else dataclasses.replace(obs, t=0))


def _net(probs: bool):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    layers = [torch.nn.Linear(F, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)]
    return torch.nn.Sequential(*layers, *([torch.nn.Softmax(-1)] if probs else []))


def _parts(d):
    e = d.estimates()
    return np.array([e[k] for k in ("C", "DPE", "IPE", "SPE")])


def test_a_network_that_outputs_float32_probabilities_audits_like_its_logits():
    """A softmax network's float32 rows sum to 1 within 1e-7: the exact engine used to
    refuse them ("every row of an action table must be a distribution")."""
    system = _system()
    logits = cf.decompose(system, cf.as_policy(_net(False), system, output="logits"))
    probs = cf.decompose(system, cf.as_policy(_net(True), system, output="probs"))
    assert np.allclose(_parts(logits), _parts(probs), atol=1e-6)
    assert abs(logits.Lambda - probs.Lambda) < 1e-6


def test_a_policy_reading_t_is_evaluated_at_every_epoch_by_the_exact_engine():
    """A policy that reads obs.t without declaring time_dependent: the exact engine used to
    evaluate it once (t = None: a crash, or t read as 0 and numbers 10 standard errors
    from the Monte Carlo engine's, which shows it t)."""
    system = _system()
    exact = cf.decompose(system, EscalatingFromZero())
    assert np.array_equal(_parts(exact), _parts(cf.decompose(system, Escalating())))
    mc = cf.decompose(system, Escalating(), engine="mc", n=20_000, seed=1)
    z = (_parts(mc) - _parts(exact)) / np.maximum([mc.se[k] for k in ("C", "DPE", "IPE",
                                                                         "SPE")], 1e-12)
    assert np.abs(z).max() < 4, z
    # and the graph's S -> D_t question evaluates it over the epochs too
    assert reads_group(Escalating(), system=system) is True


def test_three_groups_with_the_same_values_default_to_the_first_pair():
    """A group-blind system: every V equal, so argmax V = argmin V; the default pair used
    to be (0, 0), refused as not two distinct groups."""
    system = _system(blind=True)
    for policy in ("uniform", cf.TablePolicy(np.full((3, K, 4), 0.25), n_actions=4)):
        d = cf.decompose(system, policy)
        assert d.pair == (0, 1) and abs(d.estimates()["C"]) < 1e-12
        assert float(np.ptp(d.V)) < 1e-12


def test_the_exact_engine_names_what_the_system_names():
    """A tabular model built without names inside a System that names groups, actions and
    levels: exact results used to say s0/s1/s2, d0..d3 and levels 1..K where Monte Carlo
    said north/south/east."""
    system = _system(named=False)
    assert system.tabular.group_names == GROUPS
    assert system.tabular.action_labels == ACTIONS
    assert system.tabular.level_labels == tuple("ABCD")
    assert cf.decompose(system, "uniform").groups == GROUPS
    ben = cf.benefit_fairness(system, "uniform")
    assert ben.actions == ACTIONS and ben.levels == tuple("ABCD")


def test_benefit_by_forks_labels_levels_as_the_system_does():
    """Lambda by forks paired levels labelled 1..K whatever the system's level names."""
    system = _system()
    ben = cf.benefit_fairness(system, Escalating(), engine="mc", n=400)
    assert ben.levels == tuple("ABCD")
    assert set(ben.worst_pairs(3)["level[north]"]) <= set("ABCD")


def test_two_action_builtins_are_refused_when_action_1_is_the_baseline():
    """'always' gives P(action 1) = 1; with baseline 1 it used to be the baseline policy
    itself, silently equal to 'never'."""
    tab = _model()
    kernel = tab.kernel[:, [0, 2]]
    model = cf.TabularModel(kernel=kernel, initial=tab.initial, potential=tab.potential,
                            group_names=GROUPS, action_labels=("home", "admit"), baseline=1)
    system = cf.System(id="two", groups=GROUPS, horizon=T, tabular=model,
                       decisions=cf.DecisionSet(labels=("home", "admit"), baseline=1))
    for spec in ("always", "random:0.3"):
        with pytest.raises(CausalfairError, match="baseline of system 'two'.*never"):
            cf.decompose(system, spec)
    never = cf.decompose(system, "never")
    assert never.estimates()["DPE"] == 0.0 and never.estimates()["IPE"] == 0.0
    assert cf.decompose(system, "action:0").estimates()["DPE"] != 0.0


def test_the_rate_of_non_baseline_actions_is_not_called_approval():
    """With four actions and the baseline 'admit', the notions' rate is of any action but
    'admit': named selection_rate, not approval_rate."""
    model = _system().tabular
    notions = other_notions(model, cf.TablePolicy(np.full((3, K, 4), 0.25), n_actions=4), T)
    assert "approval_rate" not in notions
    assert notions["selection_rate"] == pytest.approx({g: 0.75 for g in GROUPS})


def test_the_identities_on_four_actions_a_non_zero_baseline_and_a_time_indexed_table():
    """C = DPE + IPE + SPE, Proposition 1 computed here by hand from the model, the
    baseline policy's DPE = IPE = 0 exactly, and one-shot decisions (T = 1: IPE = 0)."""
    system = _system()
    model = system.tabular
    table = np.random.default_rng(0).dirichlet(np.ones(4), size=(T, 3, K))
    d = cf.decompose(system, table)
    C, DPE, IPE, SPE = _parts(d)
    assert abs(C - (DPE + IPE + SPE)) < 1e-12
    h = np.einsum("saxy,sy->sax", model.kernel, model.potential) - model.potential[:, None]
    delta = h - h[:, 2][:, None]
    mu, nu = model.propagate(table, T), model.propagate(model.baseline_table(), T)
    direct = np.einsum("tsx,tsxa,sax->s", mu[:T], table, delta)
    indirect = np.einsum("tsx,sx->s", mu[:T] - nu[:T], h[:, 2])
    assert np.allclose(d.V - d.V_ps, direct, atol=1e-12)
    assert np.allclose(d.V_ps - d.V_0, indirect, atol=1e-12)
    assert np.allclose(d.V, np.einsum("sx,sx->s", mu[T] - mu[0], model.potential), atol=1e-12)
    assert np.all(d.V[2] == 0) and d.V_0[2] == 0  # east's gain is zero
    for policy in ("never", "action:2"):
        e = cf.decompose(system, policy).estimates()
        assert e["DPE"] == 0.0 and e["IPE"] == 0.0
        m = decompose_mc(system, policy, T, n=500, seed=0).estimates()
        assert m["DPE"] == 0.0 and m["IPE"] == 0.0
    one = cf.decompose(system, table[:1], 1)
    assert one.estimates()["IPE"] == 0.0


def test_monte_carlo_on_the_user_system_is_the_same_on_one_or_two_threads():
    system = _system()
    a = decompose_mc(system, Escalating(), T, n=600, seed=4, jobs=1, batch_size=200)
    b = decompose_mc(system, Escalating(), T, n=600, seed=4, jobs=2, batch_size=200)
    assert a.estimates() == b.estimates() and a.se == b.se and a.Lambda == b.Lambda


def test_the_report_says_why_a_four_action_system_has_no_frontier():
    """It used to say the system had no tabular model when it has one with four actions."""
    from causalfair.report.figures import skipped_sections

    spec = {"name": "triage", "system": {"factory": "unused:make"}, "policy": {"builtin": "uniform"}}
    result = cf.audit(spec, system=_system(), policy="uniform")
    assert skipped_sections(result)["frontier"].endswith("has one with 4 actions")


class _TableSim:
    """A user's simulator of :func:`_model`'s dynamics, showing the features table; with
    ``drift`` its first feature also grows with t (the table cannot say so)."""

    n_groups, n_actions, n_levels = 3, 4, K

    def __init__(self, drift: float = 0.0):
        self.model, self.drift = _model(), drift

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
        level = (rng.random(n)[:, None] > np.cumsum(self.model.initial, 1)[g]).sum(1)
        return (np.minimum(level, K - 1), g, 0)

    def observe(self, state):
        level, g, t = state
        feats = self.model.features[g, level].copy()
        feats[:, 0] += self.drift * t
        return cf.Observation(group=g, level=level, features=feats, t=t)

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, state, decisions, u):
        level, g, t = state
        cdf = np.cumsum(self.model.kernel[g, np.asarray(decisions, dtype=np.intp), level], 1)
        nxt = np.minimum((u[:, None] > cdf).sum(1), K - 1)
        pot = self.model.potential
        return cf.StepResult(state=(nxt, g, t + 1), reward=np.zeros(len(g)),
                             gain=pot[g, nxt] - pot[g, level], info={})


def test_a_simulator_whose_features_differ_from_the_tabular_table_is_refused():
    """The exact engine evaluates a network on the tabular features table, Monte Carlo on
    the simulator's observations: features that drift with t made the two engines
    disagree by 5 standard errors, silently."""
    def system(drift):
        return dataclasses.replace(_system(), simulator=lambda: _TableSim(drift))

    policy = cf.as_policy(_net(False), _system())
    same = decompose_mc(system(0.0), policy, T, n=300, seed=0, benefit_n=2)
    assert np.isfinite(_parts(same)).all()
    with pytest.raises(CausalfairError, match=r"observe: at t = 1 .* f0 = .*features table"):
        decompose_mc(system(0.5), policy, T, n=300, seed=0, benefit_n=2)


def test_a_time_indexed_table_shorter_than_the_horizon_is_refused_by_monte_carlo_too():
    """On a system without a tabular model, Monte Carlo used to reuse the table's last row
    for the epochs it lacks, silently; the exact engine refuses it."""
    system = cf.System(id="sim-only", groups=GROUPS, horizon=T, levels=tuple("ABCD"),
                       decisions=cf.DecisionSet(labels=ACTIONS, baseline=2),
                       simulator=lambda: _TableSim())
    short = cf.TablePolicy(np.full((T - 1, 3, K, 4), 0.25), n_actions=4)
    with pytest.raises(CausalfairError, match="covers 4 epochs, horizon is 5"):
        decompose_mc(system, short, T, n=200, seed=0)
    full = cf.TablePolicy(np.full((T, 3, K, 4), 0.25), n_actions=4)
    assert np.isfinite(_parts(decompose_mc(system, full, T, n=200, seed=0))).all()


def test_a_network_over_features_on_a_table_without_features_names_the_table():
    """The exact engine used to say "the system's observations carry no features" when the
    simulator's observations do carry them and the tabular model has no features table."""
    model = _model().with_(features=None, feature_names=None)
    system = dataclasses.replace(_system(), tabular=model, simulator=lambda: _TableSim())
    policy = cf.as_policy(_net(False), system)
    with pytest.raises(CausalfairError, match="tabular model 'triage', which has no features "
                                              "table.*Monte Carlo"):
        cf.decompose(system, policy)
    assert np.isfinite(_parts(cf.decompose(system, policy, engine="mc", n=200))).all()
