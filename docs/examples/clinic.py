"""An example system of your own: a clinic that decides, each month, whether a patient
waits, gets medication or gets surgery (docs/own-system.md walks through it).

- two groups, ``urban`` (index 0, s+) and ``rural`` (s-);
- health levels 0..K-1 (the qualification; the gain is the change in health);
- three actions: 0 ``wait`` (the baseline), 1 ``medication``, 2 ``surgery``;
- a policy observes two continuous features, ``severity`` (1 at the worst level, 0 at
  the best) and ``distance`` (km to the clinic);
- the clinic's reward is the patient's health change minus the treatment's cost.

The simulator implements the four-method protocol of docs/simulators.md with array
operations. Because the features are a function of (group, level), the same dynamics
also have an exact tabular model, so every causalfair engine applies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import causalfair as cf

GROUPS = ("urban", "rural")
ACTIONS = ("wait", "medication", "surgery")
COST = np.array([0.0, 0.2, 1.0])  # per action
DISTANCE = np.array([5.0, 40.0])  # km, per group


def step_probabilities(K: int, rural_penalty: float) -> np.ndarray:
    """P(health moves -1, 0, +1 | group, action, level): array (G, A, K, 3)."""
    up = np.zeros((2, 3, K))
    down = np.zeros((2, 3, K))
    level = np.arange(K)
    for s in range(2):
        pen = rural_penalty * s
        up[s, 0], down[s, 0] = 0.10, 0.20 + pen          # wait
        up[s, 1], down[s, 1] = 0.35 - pen, 0.10           # medication
        up[s, 2] = np.where(level <= K // 2, 0.60, 0.30) - pen  # surgery helps the sick most
        down[s, 2] = 0.15
    return np.stack([down, 1.0 - up - down, up], axis=-1)


@dataclass
class ClinicState:
    level: np.ndarray  # (n,) int
    group: np.ndarray  # (n,) int
    t: int


class ClinicSimulator:
    """Batch simulator: reset / observe / draw_noise / step."""

    n_groups = 2
    group_names = GROUPS
    n_actions = 3
    action_labels = ACTIONS
    baseline = 0
    feature_names = ("severity", "distance")

    def __init__(self, levels: int = 5, rural_penalty: float = 0.05):
        self.K = levels
        self.probs = step_probabilities(levels, rural_penalty)  # (G, A, K, 3)
        self.cdf = np.cumsum(self.probs, axis=-1)[..., :2]      # (G, A, K, 2)
        self.initial = initial_distribution(levels)

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
        cdf = np.cumsum(self.initial, axis=1)[g]
        level = np.minimum((rng.random(n)[:, None] >= cdf).sum(1), self.K - 1)
        return ClinicState(level=level, group=g, t=0)

    def observe(self, state):
        severity = (self.K - 1 - state.level) / (self.K - 1)
        features = np.stack([severity, DISTANCE[state.group]], axis=1)
        return cf.Observation(group=state.group, level=state.level, features=features, t=state.t)

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, state, decisions, noise):
        a = np.asarray(decisions, dtype=np.intp)
        c = self.cdf[state.group, a, state.level]                  # (n, 2)
        move = (noise[:, None] >= c).sum(1) - 1                     # -1, 0, +1
        nxt = np.clip(state.level + move, 0, self.K - 1)
        gain = (nxt - state.level).astype(np.float64)
        reward = gain - COST[a]
        return cf.StepResult(
            state=ClinicState(level=nxt, group=state.group, t=state.t + 1),
            reward=reward, gain=gain, info={"improved": nxt > state.level})


def initial_distribution(K: int) -> np.ndarray:
    """Rural patients start sicker."""
    x = np.arange(K)
    urban = np.exp(-0.5 * ((x - 0.6 * (K - 1)) / 1.2) ** 2)
    rural = np.exp(-0.5 * ((x - 0.4 * (K - 1)) / 1.2) ** 2)
    p = np.stack([urban, rural])
    return p / p.sum(1, keepdims=True)


def tabular_model(levels: int = 5, rural_penalty: float = 0.05) -> cf.TabularModel:
    """The exact model of the same dynamics (kernel (G, A, K, K))."""
    K = levels
    probs = step_probabilities(K, rural_penalty)
    kernel = np.zeros((2, 3, K, K))
    x = np.arange(K)
    for m, move in enumerate((-1, 0, 1)):
        nxt = np.clip(x + move, 0, K - 1)
        np.add.at(kernel, (slice(None), slice(None), x, nxt), probs[..., m])
    h = np.einsum("saxy,y->sax", kernel, x.astype(float)) - x  # expected health change
    reward = h - COST[None, :, None]
    severity = (K - 1 - x) / (K - 1)
    features = np.stack([np.stack([severity, np.full(K, DISTANCE[s])], axis=1) for s in range(2)])
    return cf.TabularModel(
        kernel=kernel, initial=initial_distribution(K), potential=x.astype(float),
        reward=reward, group_names=GROUPS, action_labels=ACTIONS, baseline=0,
        features=features, feature_names=("severity", "distance"), name="clinic",
        structure=cf.CausalStructure(exogenous={"U": (True, False)}, s_to_x0=True,
                                     s_to_transition=True),
    )


def make_clinic(levels: int = 5, rural_penalty: float = 0.05) -> cf.System:
    """The factory an audit spec names: ``[system] factory = "clinic:make_clinic"``."""
    return cf.System(
        id="clinic",
        groups=GROUPS,
        decisions=cf.DecisionSet(labels=ACTIONS, baseline=0),
        features=("severity", "distance"),
        levels=tuple(str(i) for i in range(levels)),
        gain=cf.Gain("health gain", "health levels"),
        reward="health gain minus treatment cost",
        horizon=12,
        structure=cf.CausalStructure(exogenous={"U": (True, False)}, s_to_x0=True,
                                     s_to_transition=True),
        simulator=lambda: ClinicSimulator(levels, rural_penalty),
        tabular=tabular_model(levels, rural_penalty),
        roles={"qualified": "improved"},
        description="clinic: wait / medication / surgery, continuous features",
    )
