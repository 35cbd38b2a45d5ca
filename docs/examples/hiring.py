"""An example system with three groups: a hiring pipeline that rejects (the baseline) or
hires each candidate every round (docs/own-system.md, "More than two groups").

- three groups ``A`` (index 0), ``B`` and ``C``, with population shares 0.5 / 0.3 / 0.2
  (``group_weights``: the utility is weighted by them; C, DPE, IPE, SPE and Lambda are not);
- ``make_hiring``: two continuous features, ``skill`` (the qualification; the gain is its
  change) and ``referral`` (how well connected the candidate is, higher in group A), and
  no tabular model: every engine runs by Monte Carlo;
- ``make_hiring_levels``: the same pipeline on four seniority levels, with an exact
  tabular model (exact engine, frontier, the exact repair) whose shares the system takes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import causalfair as cf

GROUPS = ("A", "B", "C")
ACTIONS = ("reject", "hire")
SHARES = np.array([0.5, 0.3, 0.2])
SKILL0 = np.array([0.6, 0.45, 0.3])   # mean starting skill per group
REFERRAL = np.array([0.8, 0.5, 0.2])  # mean referral score per group


@dataclass(frozen=True)
class HiringState:
    skill: np.ndarray     # (n,) float in [0, 1]
    referral: np.ndarray  # (n,) float in [0, 1]
    group: np.ndarray     # (n,) int
    t: int = 0


class HiringSimulator:
    """Batch simulator: reset / observe / draw_noise / step."""

    n_groups = 3
    group_names = GROUPS
    action_labels = ACTIONS
    feature_names = ("skill", "referral")

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
        skill = np.clip(rng.normal(SKILL0[g], 0.15), 0.0, 1.0)
        referral = np.clip(REFERRAL[g] + 0.1 * rng.standard_normal(n), 0.0, 1.0)
        return HiringState(skill, referral, g)

    def observe(self, state):
        return cf.Observation(group=state.group, t=state.t,
                              features=np.column_stack([state.skill, state.referral]))

    def draw_noise(self, n, rng):
        return {"u": rng.random(n), "z": rng.standard_normal(n)}

    def step(self, state, decisions, noise):
        hired = np.asarray(decisions).astype(bool)
        success = noise["u"] < 0.3 + 0.6 * state.skill   # drawn whatever the decision
        change = np.where(hired, np.where(success, 0.15, -0.05), -0.02) + 0.02 * noise["z"]
        skill = np.clip(state.skill + change, 0.0, 1.0)
        reward = np.where(hired, np.where(success, 1.0, -0.8), 0.0)
        return cf.StepResult(state=HiringState(skill, state.referral, state.group, state.t + 1),
                             reward=reward, gain=skill - state.skill, info={"success": success})


def make_hiring(horizon: int = 6) -> cf.System:
    """Hiring with continuous features, Monte Carlo only.

    ``[system] factory = "hiring:make_hiring"``."""
    return cf.System(
        id="hiring", groups=GROUPS, decisions=cf.DecisionSet(labels=ACTIONS, baseline=0),
        features=("skill", "referral"), gain=cf.Gain("skill gain", "skill units"),
        reward="value of the hires", horizon=horizon, simulator=HiringSimulator,
        group_weights=SHARES, description="hiring: three groups, continuous features")


def referral_policy(obs):
    """P(hire) from the features: skill, and the referral score (which favours group A)."""
    skill, referral = obs.features[:, 0], obs.features[:, 1]
    return 1.0 / (1.0 + np.exp(-6.0 * (0.6 * skill + 0.4 * referral - 0.5)))


def hiring_model(levels: int = 4) -> cf.TabularModel:
    """Seniority levels 0..K-1: a hire moves a candidate up more often than a rejection,
    less so in groups B and C; the model carries the groups' shares."""
    K, G = levels, len(GROUPS)
    kernel = np.zeros((G, 2, K, K))
    for s in range(G):
        for x in range(K):
            hire_up = 0.2 + 0.15 * x / (K - 1) - 0.05 * s
            for a, (up, down) in enumerate([(0.05, 0.15 + 0.05 * s),       # reject
                                            (hire_up, 0.15 + 0.05 * s)]):  # hire
                up, down = (0.0 if x == K - 1 else up), (0.0 if x == 0 else down)
                kernel[s, a, x, x] = 1.0 - up - down
                if x + 1 < K:
                    kernel[s, a, x, x + 1] = up
                if x > 0:
                    kernel[s, a, x, x - 1] = down
    p_success = 0.3 + 0.6 * np.arange(K) / (K - 1)
    reward = np.zeros((G, 2, K))
    reward[:, 1] = p_success - 0.8 * (1.0 - p_success)
    initial = np.array([[0.1, 0.2, 0.4, 0.3], [0.2, 0.3, 0.3, 0.2], [0.35, 0.35, 0.2, 0.1]])
    return cf.TabularModel(kernel=kernel, initial=initial, potential=np.arange(K, dtype=float),
                           reward=reward, group_weights=SHARES, name="hiring-levels",
                           aux={"p_success": np.tile(p_success, (G, 1))})


def make_hiring_levels(horizon: int = 5) -> cf.System:
    """Hiring on four seniority levels, with an exact tabular model.

    ``[system] factory = "hiring:make_hiring_levels"``: exact and Monte Carlo; no
    group_weights here, so the system takes the model's shares."""
    return cf.System(
        id="hiring-levels", groups=GROUPS, decisions=cf.DecisionSet(labels=ACTIONS, baseline=0),
        levels=("junior", "mid", "senior", "lead"), gain=cf.Gain("seniority gain", "levels"),
        horizon=horizon, tabular=hiring_model(), roles={"score": "p_success"},
        description="hiring: three groups, four seniority levels, exact model")


def tier_policy(obs):
    """P(hire) per (group, level): a scorecard that asks more of groups B and C."""
    table = np.array([[0.2, 0.5, 0.8, 0.9], [0.1, 0.4, 0.7, 0.9], [0.05, 0.3, 0.6, 0.8]])
    return table[obs.group, obs.level]


def make_referral():
    """``--policy hiring:make_referral``, ``[policy] factory = "hiring:make_referral"``: a
    factory (called with no arguments) returning the policy function."""
    return referral_policy


def make_tier():
    """``--policy hiring:make_tier``: the scorecard, for ``make_hiring_levels``."""
    return tier_policy
