"""The population agents of Yin et al. (NeurIPS 2023) as policies
(causalfair.train.population trains them; causalfair.policies.checkpoint loads them): an
agent maps the groups' qualification rates (q_1, q_2) and the step t to one threshold per
group. Numpy only: an audit of a saved agent imports no torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causalfair.errors import CheckpointError
from causalfair.policies.nets import FeatureEncoding, NumpyMLPPolicy

__all__ = ["PopulationAgent", "ThresholdActor", "LUCBFairActor", "GridPolicy", "torch_layers"]


@dataclass
class PopulationAgent:
    """A trained population-level agent: ``act(q, t)`` gives thresholds (n, 2) for states
    q (n, 2) at step t (deterministic: TD3's actor, or L-UCBFair's most probable cell).
    A trained agent's ``act`` is a :class:`ThresholdActor` or :class:`LUCBFairActor`
    (numpy, float32 products in fixed blocks: the same thresholds under any thread
    count), which :func:`save_agent` writes and :func:`load_agent` reads back."""

    name: str
    act: Any
    history: list[dict[str, float]] = field(default_factory=list)


def _net(layers: list[tuple[np.ndarray, np.ndarray]], where: str = "population agent") -> Any:
    """An MLP (ReLU between layers) evaluated by the checkpoints' numpy forward pass."""
    return NumpyMLPPolicy(layers, FeatureEncoding("features", width_=int(layers[0][0].shape[1])),
                          activation="relu", name=where)


def torch_layers(module: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    import torch

    return [(m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy())
            for m in module.modules() if isinstance(m, torch.nn.Linear)]


class ThresholdActor:
    """R-TD3's actor: thresholds sigmoid(MLP(q_1, q_2, t / H))."""

    kind = "r-td3"

    def __init__(self, layers: list[tuple[np.ndarray, np.ndarray]], horizon: int):
        self.layers, self.H = layers, int(horizon)
        self._net = _net(layers, "r-td3 actor")

    def __call__(self, q: np.ndarray, t: int) -> np.ndarray:
        q = np.asarray(q, dtype=np.float64)
        x = np.concatenate([q, np.full((len(q), 1), t / self.H)], axis=1)
        return 1.0 / (1.0 + np.exp(-self._net.outputs(x)))

    def arrays(self) -> dict[str, np.ndarray]:
        return _layer_arrays("net", self.layers)


class LUCBFairActor:
    """L-UCBFair's policy: a softmax over the loci of alpha (Q_r + nu Q_g), the optimistic
    Q's linear in phi(s, a) with per-step weights W_r, W_g and bonus beta ||phi||_{Lambda^-1}
    (capped at H). ``act`` takes the most probable locus. Training updates the arrays in
    place."""

    kind = "l-ucbfair"

    def __init__(self, phi_layers: list[tuple[np.ndarray, np.ndarray]], loci: np.ndarray,
                 W_r: np.ndarray, W_g: np.ndarray, Linv: np.ndarray, *, alpha: float,
                 beta: float, nu: float, horizon: int):
        self.phi_layers, self.loci = phi_layers, np.asarray(loci, dtype=np.float64)
        self.W_r, self.W_g, self.Linv = W_r, W_g, Linv
        self.alpha, self.beta, self.nu, self.H = float(alpha), float(beta), float(nu), int(horizon)
        self._phi = _net(phi_layers, "l-ucbfair phi")

    def phi(self, q: np.ndarray, a: np.ndarray) -> np.ndarray:
        """phi(s, a) (..., d): the network's softmax output on (q_1, q_2, a_1, a_2)."""
        x = np.concatenate([np.broadcast_to(q, a.shape), a], -1).reshape(-1, 4)
        z = self._phi.outputs(x)
        e = np.exp(z - z.max(1, keepdims=True))
        return (e / e.sum(1, keepdims=True)).reshape(*a.shape[:-1], -1)

    def loci_features(self, states: np.ndarray) -> np.ndarray:
        """phi(s, I_i) (n, M, d) for states (n, 2) at every locus I_i."""
        M = len(self.loci)
        return self.phi(np.repeat(states[:, None, :], M, 1),
                        np.broadcast_to(self.loci, (len(states), M, 2)))

    def q_values(self, states: np.ndarray, h: int, features: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Optimistic Q_r, Q_g (n, M) at the loci for states (n, 2) at step h
        (``features``: their :meth:`loci_features`, when already computed)."""
        f = self.loci_features(states) if features is None else features
        bonus = self.beta * np.sqrt(np.einsum("nmd,de,nme->nm", f, self.Linv[h], f).clip(0.0))
        return (np.minimum(f @ self.W_r[h] + bonus, self.H),
                np.minimum(f @ self.W_g[h] + bonus, self.H))

    def probs(self, states: np.ndarray, h: int, features: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(softmax over loci, Q_r, Q_g) at step h with the current dual variable nu."""
        qr, qg = self.q_values(states, h, features)
        z = self.alpha * (qr + self.nu * qg)
        p = np.exp(z - z.max(1, keepdims=True))
        return p / p.sum(1, keepdims=True), qr, qg

    def __call__(self, q: np.ndarray, t: int) -> np.ndarray:
        p, _, _ = self.probs(np.asarray(q, dtype=np.float64), min(int(t), self.H - 1))
        return self.loci[p.argmax(1)]

    def arrays(self) -> dict[str, np.ndarray]:
        return {**_layer_arrays("phi", self.phi_layers), "loci": self.loci, "W_r": self.W_r,
                "W_g": self.W_g, "Linv": self.Linv}


def _layer_arrays(prefix: str, layers: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    return {f"{prefix}.{i}.{k}": v for i, (W, b) in enumerate(layers)
            for k, v in (("weight", W), ("bias", b))}


class GridPolicy:
    """A population agent as a policy on ``replicator-1`` (see :func:`audit_policy`);
    ``grid`` the system's thresholds without "reject all"."""

    def __init__(self, grid: np.ndarray, agent: PopulationAgent, name: str,
                 source: str | None = None):
        self.grid, self.agent, self.name, self.source = np.asarray(grid, dtype=np.float64), agent, name, source

    def action_probs(self, obs: Any) -> np.ndarray:
        f = np.asarray(obs.features, dtype=np.float64)
        g = np.asarray(obs.group)
        q = np.where((g == 0)[:, None], f, f[:, ::-1])  # (q_1, q_2) for every unit
        a = self.agent.act(q, int(obs.t))
        mine = a[np.arange(len(g)), g]
        k = np.abs(mine[:, None] - self.grid[None, :]).argmin(1)
        probs = np.zeros((len(g), len(self.grid) + 1))
        probs[np.arange(len(g)), k] = 1.0
        return probs

    def check_system(self, system: Any) -> None:
        """Refuse a system this policy cannot act on: replicator dynamics with the same
        threshold grid (the features (q_own, q_other), two groups)."""
        where = f"checkpoint {self.source}" if self.source else f"policy {self.name!r}"
        sim = system.make_simulator()
        grid = getattr(sim, "thresholds", None)
        if tuple(system.features or ()) != ("q_own", "q_other") or grid is None:
            raise CheckpointError(
                f"{where}: a population agent (R-TD3, L-UCBFair) acts on replicator dynamics "
                f"(features q_own, q_other), not on system {system.id!r}.")
        if not np.array_equal(np.asarray(grid[:-1], dtype=np.float64), self.grid):
            raise CheckpointError(
                f"{where}: trained for the threshold grid {self.grid.tolist()}, but system "
                f"{system.id!r} has {[float(x) for x in grid[:-1]]}; pass --param thresholds=... "
                "to match.")
