"""A stable-baselines3 model as a causalfair policy (:class:`SB3Policy`), evaluated by the
network its ``.zip`` loads as (:func:`causalfair.policies.checkpoint.sb3_network`).
stable-baselines3 itself is never imported here: a model in memory is read through its
attributes. Re-exported by :mod:`causalfair.policies.adapters`; every engine evaluates an
SB3 model through it (:func:`causalfair.policies.core.action_probs`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from causalfair.errors import CheckpointError, PolicyError
from causalfair.policies.checkpoint_sb3 import sb3_network
from causalfair.policies.nets import FeatureEncoding
from causalfair.policies.vecnormalize import ObsNormalization
from causalfair.types import Observation, check_probs

__all__ = ["SB3Policy", "is_sb3_model", "greedy_probs"]


def greedy_probs(values: np.ndarray) -> np.ndarray:
    """(n, A) one-hot rows on each row's largest value (ties to the lower action, as
    ``argmax`` and SB3's and CleanRL's greedy acting): the greedy policy of Q-values."""
    out = np.zeros(values.shape)
    out[np.arange(len(values)), values.argmax(axis=1)] = 1.0
    return out


def is_sb3_model(obj: Any) -> bool:
    """Whether ``obj`` looks like a stable-baselines3 algorithm (PPO, A2C, DQN, ...)."""
    mod = type(obj).__module__ or ""
    return mod.startswith("stable_baselines3") or (
        hasattr(obj, "policy") and hasattr(obj, "predict") and hasattr(obj, "action_space")
        and hasattr(obj, "observation_space")
    )


class SB3Policy:
    """The action distribution of a stable-baselines3 model on a ``Discrete(n)`` action
    space, n >= 2 (actions 0..n-1, the system's decisions; with two, 0 = d0 and 1 = d1).

    ``model``: a trained PPO / A2C / DQN (any ``BaseAlgorithm`` whose policy has an
    action distribution or a ``q_net``). Observations are turned into the network input
    by ``obs_fn(obs) -> float array (n, width)`` if given, else by ``encoding`` (default:
    the observation's features when there are ``width`` of them, as the model's ``.zip``
    reads them, else one-hot level then one-hot group, the :class:`~causalfair.systems.gym.lending.LendingEnv`
    observation, with ``n_groups`` groups and ``n_levels`` levels; when ``n_levels`` is
    not given, the rest of the width is taken as levels, so pass it whenever the
    observation may carry extras). The Monte Carlo engine refuses an encoding whose
    number of levels differs from the simulator's.

    A PPO / A2C ``MlpPolicy`` (tanh or ReLU) is evaluated by the network the model's
    ``.zip`` loads as (:func:`causalfair.policies.checkpoint.sb3_network`, read from the model's
    current weights), so the model in memory and its saved file give the same
    probabilities; other policies (DQN, custom feature extractors) run SB3's own forward
    pass. ``deterministic=True`` gives the greedy action (probability 1) instead of the
    distribution; DQN models are always greedy (ties go to the lower action, as SB3).

    ``obs_norm``: the observation statistics of the ``VecNormalize`` the model was trained
    behind (:class:`~causalfair.policies.vecnormalize.ObsNormalization`); the network
    input is then normalized as ``VecNormalize.normalize_obs`` does before the network.
    """

    def __init__(self, model: Any, *, encoding: FeatureEncoding | None = None,
                 obs_fn: Callable[[Observation], np.ndarray] | None = None,
                 deterministic: bool = False, n_groups: int = 2, n_levels: int | None = None,
                 name: str | None = None, batch_size: int = 65_536,
                 obs_norm: ObsNormalization | None = None):
        import gymnasium as gym

        self.model = model
        self.name = name or f"sb3:{type(model).__name__}"
        act = getattr(model, "action_space", None)
        if not isinstance(act, gym.spaces.Discrete) or int(act.n) < 2 or int(act.start) != 0:
            raise PolicyError(
                f"policy {self.name!r}: the SB3 model's action space is {act!r}; causalfair "
                "audits discrete decisions: Discrete(n) with n >= 2 actions 0..n-1.")
        self.n_actions = int(act.n)
        space = getattr(model, "observation_space", None)
        shape = getattr(space, "shape", None)
        if not shape or len(shape) != 1:
            raise PolicyError(
                f"policy {self.name!r}: the SB3 model's observation space {space!r} is not a "
                "flat Box; pass obs_fn to build its input.")
        self.width = int(shape[0])
        self._default_input = obs_fn is None and encoding is None
        if obs_fn is None and encoding is None:
            levels = self.width - n_groups if n_levels is None else int(n_levels)
            if n_levels is None and levels < 1:  # too narrow for one-hot: features only
                pass
            elif levels < 1 or levels + n_groups != self.width:
                raise PolicyError(
                    f"policy {self.name!r}: the SB3 model's observation width is {self.width}, "
                    f"but one-hot level ({levels}) + one-hot group ({n_groups}) gives "
                    f"{levels + n_groups}; for observations with extras (e.g. LendingEnv(extras="
                    "True)) pass obs_fn to build the model's input.")
            else:
                encoding = FeatureEncoding("onehot", n_levels=levels, n_groups=n_groups)
        self.encoding = encoding
        self.obs_fn = obs_fn
        self.deterministic = bool(deterministic)
        self.batch_size = int(batch_size)
        if obs_norm is not None:
            obs_norm.check_width(self.width, f"policy {self.name!r}")
        self.obs_norm = obs_norm
        self._dqn = hasattr(model.policy, "q_net")
        self._net: Any = None
        self._net_key: tuple[int, ...] | None = None

    def _inputs(self, obs: Observation) -> np.ndarray:
        feats = obs.features
        if self._default_input and feats is not None and np.ndim(feats) == 2 \
                and np.shape(feats)[1] == self.width:  # the observed features, as its .zip reads
            x = feats
        elif self.obs_fn is not None:
            x = self.obs_fn(obs)
        elif self.encoding is None:
            raise PolicyError(
                f"policy {self.name!r}: the SB3 model reads {self.width} inputs, too few for "
                f"one-hot level and group, and the observation has "
                f"{'no features' if feats is None else f'{np.shape(feats)[-1]} features'}; "
                "pass obs_fn to build the model's input.")
        else:
            x = self.encoding.encode(obs)
        x = np.asarray(x, dtype=np.float32)
        if x.ndim != 2 or x.shape != (len(obs), self.width):
            raise PolicyError(
                f"policy {self.name!r}: input has shape {x.shape}; the SB3 model expects "
                f"({len(obs)}, {self.width}). Check the encoding (levels/groups) or obs_fn.")
        return x if self.obs_norm is None else self.obs_norm.apply(x)

    def _network(self) -> Any:
        """The model's action network as a NumpyMLPPolicy (rebuilt when the weights
        change, e.g. by more training), or None when the policy is not an MlpPolicy."""
        pol = self.model.policy
        params = list(pol.parameters())
        key = tuple(p.data_ptr() for p in params) + tuple(p._version for p in params)
        if key != self._net_key:
            import torch.nn as nn

            self._net, self._net_key = None, key
            act = {nn.Tanh: "tanh", nn.ReLU: "relu"}.get(getattr(pol, "activation_fn", None))
            if act is not None and not self._dqn:
                try:
                    self._net, _ = sb3_network(pol.state_dict(), None, act,
                                               where=f"policy {self.name!r}", name=self.name)
                except CheckpointError:  # another layout: SB3's own forward pass
                    self._net = None
        return self._net

    def _outputs_torch(self, x: np.ndarray) -> np.ndarray:
        import torch

        pol = self.model.policy
        out = np.empty((x.shape[0], self.n_actions))
        with torch.no_grad():
            for start in range(0, x.shape[0], self.batch_size):
                t = torch.as_tensor(x[start:start + self.batch_size], device=pol.device)
                v = pol.q_net(t) if self._dqn else pol.get_distribution(t).distribution.probs
                out[start:start + t.shape[0]] = v.double().cpu().numpy()
        return out

    def action_probs(self, obs: Observation) -> np.ndarray:
        """(n, n_actions) action distributions (one-hot for greedy decisions)."""
        x = self._inputs(obs)
        net = self._network()
        where = f"policy {self.name!r}"
        if net is not None:  # the .zip's evaluator, on the model's input
            probs = net.action_probs(Observation(group=obs.group, features=x, t=obs.t))
        else:
            probs = self._outputs_torch(x)  # DQN: Q-values; else probabilities
        if self._dqn or self.deterministic:
            probs = greedy_probs(probs)
        if probs.shape[1] != self.n_actions or not np.isfinite(probs).all():
            raise PolicyError(f"{where}: the SB3 network returned {probs.shape[1]} outputs with "
                              f"NaN or inf, or not {self.n_actions}; check the model's weights.")
        return probs

    def prob_d1(self, obs: Observation) -> np.ndarray:
        if self.n_actions != 2:
            raise PolicyError(f"policy {self.name!r}: has {self.n_actions} actions; use "
                              "action_probs(obs).")
        return check_probs(self.action_probs(obs)[:, 1], len(obs), f"policy {self.name!r}")

    def __repr__(self) -> str:
        norm = "" if self.obs_norm is None else f", obs_norm from {self.obs_norm.source}"
        return (f"SB3Policy({type(self.model).__name__}, n_actions={self.n_actions}, "
                f"deterministic={self.deterministic}{norm})")
