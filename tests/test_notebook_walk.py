"""An analyst's notebook on a simulator of their own (three groups, continuous features,
a torch network in memory): the frictions the walk found, each pinned by a test."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import causalfair as cf

torch = pytest.importorskip("torch")

GROUPS = ("north", "south", "east")


@dataclass(frozen=True)
class _State:
    skill: np.ndarray
    years: np.ndarray
    group: np.ndarray
    t: int = 0


class HiringSim:
    """Three groups, two continuous features; hiring (action 1) trains skill."""

    n_groups = 3
    group_names = GROUPS
    feature_names = ("skill", "years")

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
        return _State(rng.normal(np.array([0.6, 0.0, -0.4])[g], 1.0), rng.gamma(2.0, 2.0, n), g)

    def observe(self, s):
        return cf.Observation(group=s.group, features=np.column_stack([s.skill, s.years]), t=s.t)

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, s, decisions, noise):
        d = np.asarray(decisions) == 1
        ok = noise < 1 / (1 + np.exp(-s.skill))
        skill = s.skill + np.where(d, np.where(ok, 0.4, -0.1), 0.0)
        return cf.StepResult(state=_State(skill, s.years + d, s.group, s.t + 1),
                             reward=np.where(d, np.where(ok, 1.0, -0.8), 0.0),
                             gain=skill - s.skill, info={})


def make_hiring() -> cf.System:
    return cf.System(id="hiring", groups=GROUPS, features=("skill", "years"),
                     decisions=cf.DecisionSet(labels=("reject", "hire"), baseline=0),
                     gain=cf.Gain("skill gain", "skill points"), horizon=4,
                     simulator=HiringSim)


def _net():
    torch.manual_seed(0)
    return cf.policies.checkpoint.mlp(2, (8,), 1)


def test_torch_policy_with_the_systems_feature_names_runs_as_the_bare_module():
    """The encoding the README's TorchPolicy takes, with the system's names, gives the same
    numbers as the bare module (whose encoding causalfair derives from the system)."""
    system, net = make_hiring(), _net()
    pol = cf.TorchPolicy(net, cf.FeatureEncoding("features", names=("skill", "years")))
    a = cf.decompose(system, pol, n=300, seed=1)
    b = cf.decompose(system, net, n=300, seed=1)
    assert a.C == b.C and a.DPE == b.DPE and a.Lambda == b.Lambda


def test_torch_policy_reading_other_feature_names_is_refused_naming_both_lists():
    """A network in memory whose encoding names features the system does not give (here
    'age' for 'years') ran silently on the system's columns; a checkpoint with the same
    encoding was refused. Now every door refuses both, naming both lists."""
    system = make_hiring()
    pol = cf.TorchPolicy(_net(), cf.FeatureEncoding("features", names=("skill", "age")))
    for call in (lambda: cf.decompose(system, pol, n=300),
                 lambda: cf.benefit_fairness(system, pol, n=300),
                 lambda: cf.compare_groups(system, pol, n=300),
                 lambda: cf.decompose_mc(system, pol, n=300),
                 lambda: cf.attribute(system, pol, "never", n=300, pair="north-east"),
                 lambda: cf.decompose(HiringSim(), pol, n=300)):  # a bare simulator too
        with pytest.raises(cf.PolicyError) as err:
            call()
        msg = str(err.value)
        assert "[skill, age]" in msg and "[skill, years]" in msg and "\n" not in msg


def test_torch_policy_reading_the_wrong_number_of_features_is_refused():
    system = make_hiring()
    pol = cf.TorchPolicy(cf.policies.checkpoint.mlp(3, (4,), 1),
                         cf.FeatureEncoding("features", width_=3))
    with pytest.raises(cf.PolicyError, match=r"reads 3 features but the system gives 2 "
                                             r"\(skill, years\)"):
        cf.decompose(system, pol, n=300)


def test_torch_policy_with_the_default_onehot_encoding_on_features_names_the_fix():
    """cf.TorchPolicy(module) (the README's form, one-hot by default) on a system that
    observes features said only "encoding 'onehot' needs observation levels; the
    observation has none."; now the message names the encoding to give."""
    system = make_hiring()
    with pytest.raises(cf.PolicyError) as err:
        cf.decompose(system, cf.TorchPolicy(_net()), n=300)
    msg = str(err.value)
    assert 'FeatureEncoding("features", names=("skill", "years"))' in msg
    assert "\n" not in msg


def test_onehot_encoding_on_an_observation_without_levels_names_the_fix():
    """The encoder itself (any door, a policy called by hand) names the fix too."""
    enc = cf.FeatureEncoding("onehot", 7, 2)
    obs = cf.Observation(group=np.array([0, 1]), features=np.zeros((2, 2)))
    with pytest.raises(cf.PolicyError, match=r'FeatureEncoding\("features"'):
        enc.encode(obs)


def test_attribution_on_three_groups_names_the_groups_to_choose_from():
    """cf.attribute on three groups by Monte Carlo needs the pair; the message offered
    pair=(0, 2) without saying which groups these are. It now names them."""
    system = make_hiring()
    with pytest.raises(cf.InputError if hasattr(cf, "InputError") else cf.errors.InputError
                       ) as err:
        cf.attribute(system, "uniform", "never", n=300)
    msg = str(err.value)
    assert "north, south, east" in msg and "pair=('north', 'east')" in msg
    got = cf.attribute(system, "uniform", "never", n=300, pair=("north", "east"))
    dec = cf.decompose(system, "uniform", n=300, pair=("north", "east"))
    assert got.to_frame().loc[("north-east", "C"), "estimate"] == pytest.approx(dec.C - dec.SPE)


def test_attribution_plots_like_its_siblings_with_the_systems_unit():
    """Decomposition, BenefitResult and GroupComparison have plot(ax=); Attribution had
    none. Its figure: the change in C per step, DPE and IPE bars whose heights are the
    steps_frame's, error bars at the attribution's level, the system's gain unit on the
    axis; nothing shown or written."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    att = cf.attribute(make_hiring(), "uniform", "never", n=300, pair="north-east")
    fig = att.plot()
    ax, = fig.axes
    ylabel, title = (x.replace("\n", " ") for x in (ax.get_ylabel(), ax.get_title()))
    assert ax.get_xlabel() == "decision epoch t (steps)"
    assert "(skill points)" in ylabel and "north minus east" in ylabel
    heights = {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers
               if hasattr(c, "patches")}
    steps = att.steps_frame()
    assert heights["DPE"] == pytest.approx(steps["DPE"].tolist())
    assert heights["IPE"] == pytest.approx(steps["IPE"].tolist())
    assert "95% intervals" in title and "from never to uniform" in title
    _, axes = plt.subplots(1, 2)
    assert att.plot(unit="points", ax=axes[1]) is axes[1].figure
    assert "(points)" in axes[1].get_ylabel() and not axes[0].has_data()
    plt.close("all")
    with pytest.raises(cf.errors.InputError, match="ax: expected one matplotlib Axes"):
        att.plot(ax=axes)


def test_registering_the_same_system_again_is_a_no_op_another_is_refused():
    """A notebook cell `cf.systems.register("hiring", make_hiring)` run a second time
    raised "already registered"; the same entry again is now a no-op, another factory
    (or other defaults) under the id is still refused, naming override=True."""
    registry = cf.systems.registry._REGISTRY
    try:
        for _ in range(2):  # the cell, run twice
            cf.systems.register("nb-hiring", make_hiring, description="hiring")
        assert cf.systems.make("nb-hiring").groups == GROUPS
        for other in (lambda: cf.systems.register("nb-hiring", make_hiring),  # no description
                      lambda: cf.systems.register("nb-hiring", lambda: make_hiring(),
                                                  description="hiring")):
            with pytest.raises(cf.errors.SystemError_, match="pass override=True"):
                other()
        cf.systems.register("nb-hiring", "tests.test_notebook_walk:make_hiring", override=True)
        cf.systems.register("nb-hiring", "tests.test_notebook_walk:make_hiring")
        assert registry["nb-hiring"].entry_point == "tests.test_notebook_walk:make_hiring"
    finally:
        registry.pop("nb-hiring", None)


def test_exact_attribution_plot_has_no_error_bars_and_the_same_bars():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib.container import BarContainer, ErrorbarContainer

    att = cf.attribute(cf.systems.make("lending-1"), "threshold:0.5", "threshold:0.3", 5)
    ax, = att.plot().axes
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [c.get_label() for c in bars] == ["DPE", "IPE"]
    total = sum(p.get_height() for c in bars for p in c.patches)
    assert total == pytest.approx(att.change, abs=1e-12)  # the steps sum to the change
    assert not any(isinstance(c, ErrorbarContainer) for c in ax.containers)
    assert "intervals" not in ax.get_title()
