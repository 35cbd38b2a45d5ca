"""Policies for the infectious-disease example spec (audits/infectious-1.toml): under a
budget of one vaccine per step, each member's probability is its share of that one
vaccine (the shares of a graph sum to at most 1)."""

import numpy as np


class ExposedFirst:
    """Vaccinate the susceptible member with the most infected neighbours (ties share
    the vaccine); nobody when no susceptible member is exposed."""

    name = "exposed-first"

    def action_probs(self, obs):
        f = obs.features.reshape(-1, 34, 5)  # susceptible, infected, recovered, k, degree
        score = np.where((f[..., 0] > 0) & (f[..., 3] > 0), f[..., 3], -1.0)
        best = (score == score.max(axis=1, keepdims=True)) & (score > 0)
        p = (best / np.maximum(best.sum(axis=1, keepdims=True), 1)).reshape(-1)
        return np.stack([1.0 - p, p], axis=1)


def exposed_first():
    return ExposedFirst()
