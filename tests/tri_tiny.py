"""The tiny triage case (two groups insured / uninsured, levels sick / well plus the
absorbing ``left``, actions monitor / admit, T = 2) that tests/test_triage_user.py and
tests/test_departed*.py compute by hand: its module source ``TINY`` (written to a temporary
folder as ``tinytri``, so that a spec run in a subprocess can name ``tinytri:make``), the
policies ``PI`` / ``PI_BASELINE_AT_LEFT``, the hand values ``HAND`` and the fixture
``tiny`` (the imported module; a test module imports it as
``from tests.tri_tiny import tiny_module  # noqa: F401`` and asks for ``tiny``)."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

TINY = textwrap.dedent('''
    import numpy as np
    import causalfair as cf

    GROUPS = ("insured", "uninsured")
    LEVELS = ("sick", "well", "left")
    # P(x' | x, d) for both groups; 'left' is absorbing under every action
    K0 = np.array([[0.5, 0.2, 0.3], [0.1, 0.8, 0.1], [0.0, 0.0, 1.0]])
    K1 = np.array([[0.2, 0.6, 0.2], [0.0, 0.9, 0.1], [0.0, 0.0, 1.0]])
    KERNEL = np.stack([np.stack([K0, K1])] * 2)
    INITIAL = np.array([[0.3, 0.7, 0.0], [0.7, 0.3, 0.0]])
    HEALTH = np.array([0.0, 1.0, 0.0])          # a patient who leaves keeps 0 afterwards


    class TinySim:
        n_groups = 2
        group_names = GROUPS
        n_levels = 3

        def reset(self, n, group, rng):
            g = np.broadcast_to(np.asarray(group), (n,)).astype(int).copy()
            x = np.minimum((rng.random(n)[:, None] >= np.cumsum(INITIAL[g], 1)).sum(1), 2)
            return (x, g, 0)

        def observe(self, st):
            return cf.Observation(group=st[1], level=st[0], t=st[2])

        def draw_noise(self, n, rng):
            return rng.random(n)

        def step(self, st, d, u):
            x, g, t = st
            cdf = np.cumsum(KERNEL[g, np.asarray(d, int), x], 1)
            nx = np.minimum((u[:, None] >= cdf).sum(1), 2)
            gain = HEALTH[nx] - HEALTH[x]
            return cf.StepResult(state=(nx, g, t + 1), reward=gain, gain=gain)


    def make(horizon=2):
        tab = cf.TabularModel(kernel=KERNEL, initial=INITIAL, potential=HEALTH,
                              reward=np.einsum("saxy,y->sax", KERNEL, HEALTH) - HEALTH,
                              group_names=GROUPS, name="tiny")
        return cf.System(id="tiny", groups=GROUPS,
                         decisions=cf.DecisionSet(labels=("monitor", "admit"), baseline=0),
                         levels=LEVELS, horizon=horizon, simulator=TinySim, tabular=tab,
                         gain=cf.Gain("health index change", "index points"),
                         reward="health change")


    class TablePolicy:
        name = "table"
        reads_only_level_group = True

        def __init__(self, pi):
            self.pi = np.asarray(pi, dtype=float)

        def prob_d1(self, obs):
            return self.pi[obs.group, obs.level]


    def make_policy(left=0.0):
        return TablePolicy([[0.8, 0.3, left], [0.5, 0.1, left]])


    def make_bare(departed=None, horizon=2):
        """The same system without its tabular model: audited by Monte Carlo only."""
        return cf.System(id="bare", groups=GROUPS, levels=LEVELS, horizon=horizon,
                         decisions=cf.DecisionSet(labels=("monitor", "admit"), baseline=0),
                         simulator=TinySim, departed=departed,
                         gain=cf.Gain("health index change", "index points"))
''')

# pi(admit | group, level); what it says at 'left' changes no transition and no gain
PI = np.array([[0.8, 0.3, 0.9], [0.5, 0.1, 0.1]])
PI_BASELINE_AT_LEFT = np.array([[0.8, 0.3, 0.0], [0.5, 0.1, 0.0]])

# By hand (T = 2). Group insured: x0 = (0.3, 0.7, 0); under pi, from sick
# 0.2 K0 + 0.8 K1 = (0.26, 0.52, 0.22), from well 0.7 K0 + 0.3 K1 = (0.07, 0.83, 0.10), so
# x1 = (0.127, 0.737, 0.136) and P(well at T) = 0.127 * 0.52 + 0.737 * 0.83 = 0.67775:
# V = 0.67775 - 0.7. Group uninsured: x1 = (0.272, 0.523, 0.205), P(well at T) = 0.53243,
# V = 0.53243 - 0.3. Under pi0 (monitor everywhere): 0.54 - 0.7 and 0.38 - 0.3.
# Benefit of admit: sick 0.6 - 0.2 = 0.4, well -0.1 - (-0.2) = 0.1, left 0.
# direct = sum_t E[pi Delta]: insured 0.117 + 0.06275, uninsured 0.143 + 0.05963.
HAND = {"V_a": 0.67775 - 0.7, "V_b": 0.53243 - 0.3, "SPE": (0.54 - 0.7) - (0.38 - 0.3),
        "DPE": (0.117 + 0.06275) - (0.143 + 0.05963)}
HAND["C"] = HAND["V_a"] - HAND["V_b"]
HAND["IPE"] = HAND["C"] - HAND["DPE"] - HAND["SPE"]


@pytest.fixture(name="tiny")
def tiny_module(tmp_path, monkeypatch):
    """The module ``tinytri`` (``TINY``), importable from a temporary folder."""
    (tmp_path / "tinytri.py").write_text(TINY)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("tinytri", None)
    import tinytri

    yield tinytri
    sys.modules.pop("tinytri", None)
