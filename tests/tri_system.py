"""The three-group tabular model of tests/engines/test_groups.py (hand-checked there at
T = 1), as the source of a system module an audit spec names (``system = "tri:make"``):
``make(horizon)``, ``policy`` (the table P) and ``mixed`` (another table)."""

from __future__ import annotations

import textwrap


def tri_source(default_horizon: int) -> str:
    """The module's source, its ``make`` defaulting to ``default_horizon`` epochs."""
    return textwrap.dedent('''
        import numpy as np
        from causalfair.model import TabularModel
        from causalfair.policies.core import TablePolicy
        from causalfair.systems import System

        M = np.array([0.5, 0.8, 1.0]); Q = np.array([0.6, 0.5, 0.4]); R = np.array([0.2, 0.1, 0.0])
        P = np.array([[1.0, 0.0], [0.5, 0.0], [0.25, 0.0]])

        def make(horizon=HORIZON):
            k = np.zeros((3, 2, 2, 2))
            for s in range(3):
                k[s, 0, 0] = [1 - R[s], R[s]]; k[s, 1, 0] = [1 - Q[s], Q[s]]; k[s, :, 1] = [0, 1]
            reward = np.zeros((3, 2, 2)); reward[:, 1, 0] = 1.0
            m = TabularModel(kernel=k, initial=np.stack([M, 1 - M], 1), potential=np.array([0., 1.]),
                             reward=reward, group_names=["A", "B", "C"], name="tri")
            return System(id="tri", groups=("A", "B", "C"), tabular=m, horizon=horizon,
                          levels=("low", "high"))

        def policy(system=None):
            return TablePolicy(P)

        def mixed(system=None):
            return TablePolicy(np.array([[0.8, 0.3], [0.5, 0.2], [0.25, 0.4]]))
    ''').replace("HORIZON", str(int(default_horizon)))
