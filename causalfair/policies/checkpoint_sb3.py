"""stable-baselines3 models as checkpoints, read without unpickling: the ``.zip`` reader
(:func:`load_sb3_zip`, which :func:`causalfair.policies.checkpoint.load_checkpoint` calls)
and :func:`sb3_network`, the one builder of an SB3 ``MlpPolicy``'s action network from its
weights, for a saved ``.zip`` and a model in memory
(:class:`causalfair.policies.sb3.SB3Policy`) alike."""

from __future__ import annotations

import io
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from causalfair._safe_read import open_zip, read_json, read_member
from causalfair.errors import CheckpointError, short
from causalfair.policies.checkpoint_format import (
    MAX_PARAMETERS,
    MAX_PTH_BYTES,
    check_torch_archive,
)
from causalfair.policies.nets import FeatureEncoding, NumpyMLPPolicy
from causalfair.policies.torchzip import TorchZipError, load_weights

__all__ = ["load_sb3_zip", "sb3_network"]

_MAX_DATA_BYTES = 64 << 20
_SB3_PRE = "mlp_extractor.policy_net."


def load_sb3_zip(path: Path, activation: str) -> tuple[NumpyMLPPolicy, dict[str, Any]]:
    """A stable-baselines3 PPO/A2C policy with a Discrete action space, read without
    unpickling: the weights of ``policy.pth`` (``weights_only``, its inner archive's sizes
    checked first) and the plain JSON fields of ``data`` (the observation shape), each
    member's declared size checked before it is inflated; the network is built by
    :func:`sb3_network`."""
    where = f"checkpoint {path}"
    with open_zip(path, where, CheckpointError) as zf:
        names = set(zf.namelist())
        if "policy.pth" not in names:
            raise CheckpointError(f"{where}: not a stable-baselines3 model (no policy.pth in the "
                                  "archive).")
        raw = read_member(zf, "policy.pth", where, CheckpointError, cap=MAX_PTH_BYTES,
                          fix="use a smaller network")
        data = read_json(read_member(zf, "data", where, CheckpointError, cap=_MAX_DATA_BYTES),
                         f"{where}: member data", CheckpointError) if "data" in names else {}
    check_torch_archive(io.BytesIO(raw), f"{where}: member policy.pth")
    try:
        state = load_weights(io.BytesIO(raw), cap=MAX_PTH_BYTES, where=f"{where}: member policy.pth")
    except TorchZipError as exc:
        raise CheckpointError(
            f"{where}: cannot be read as a stable-baselines3 model without unpickling "
            f"({exc}).") from None
    space = data.get("observation_space") if isinstance(data, dict) else None
    shape = space.get("_shape", space.get("shape")) if isinstance(space, dict) else None
    return sb3_network(state, shape, activation, where=where, name=path.stem, source=str(path))


def sb3_network(state: Any, obs_shape: Any, activation: str, *, where: str, name: str,
                source: str | None = None) -> tuple[NumpyMLPPolicy, dict[str, Any]]:
    """The action network of a stable-baselines3 ``MlpPolicy`` on a ``Discrete(n)`` action
    space, from its ``state_dict``: the ``mlp_extractor.policy_net`` layers then
    ``action_net`` (logits over the n actions, softmax as SB3's categorical distribution),
    as a :class:`NumpyMLPPolicy` reading ``prod(obs_shape)`` features. The one reader of
    SB3 weights: a saved ``.zip`` and a model in memory
    (:class:`causalfair.policies.adapters.SB3Policy`) give the same network. Every key, dtype and
    shape is checked, and ``obs_shape`` (None: not checked) against the input width. The
    weights are numpy arrays (read from a file) or torch tensors (a model in memory)."""
    if not isinstance(state, Mapping) or not all(isinstance(k, str) for k in state):
        raise CheckpointError(f"{where}: policy.pth is not a state dict (names to tensors).")
    extractor = sorted(k for k in state if "features_extractor." in k)
    if extractor:
        raise CheckpointError(
            f"{where}: the policy has its own features extractor ({short(extractor[0])}); "
            "causalfair reads MlpPolicy networks only; audit the model in memory with "
            "causalfair.policies.adapters.SB3Policy(model).")
    idx = set()
    for k in state:
        if k.startswith(_SB3_PRE):
            i, _, kind = k[len(_SB3_PRE):].partition(".")
            if not i.isdigit() or kind not in ("weight", "bias"):
                raise CheckpointError(
                    f"{where}: unexpected key {short(k)} in policy.pth (expected "
                    f"{_SB3_PRE}<integer>.weight / .bias).")
            idx.add(int(i))
    keys = [f"{_SB3_PRE}{i}" for i in sorted(idx)] + ["action_net"]
    if "action_net.weight" not in state and any(k.startswith("q_net.") for k in state):
        raise CheckpointError(
            f"{where}: a DQN model (its q_net gives Q-values, not action probabilities); "
            "audit the model in memory, acting greedily as DQN does: a [policy] factory "
            "returning stable_baselines3.DQN.load(path), or cf.as_policy(DQN.load(path), "
            "system).")
    if "action_net.weight" not in state:
        raise CheckpointError(f"{where}: no action_net in policy.pth (a Discrete action space "
                              "is needed).")
    layers, width, prev = [], None, "the input"
    for key in keys:
        W, b = state.get(f"{key}.weight"), state.get(f"{key}.bias")
        for part, t in (("weight", W), ("bias", b)):
            if t is None:
                raise CheckpointError(f"{where}: policy.pth has no {key}.{part}.")
            kind = _weight_kind(t)
            if kind:
                raise CheckpointError(f"{where}: policy.pth {key}.{part} is {kind}; expected "
                                      "a floating-point tensor.")
        if W.ndim != 2 or tuple(b.shape) != (W.shape[0],):
            raise CheckpointError(
                f"{where}: policy.pth {key} has shapes {tuple(W.shape)} / {tuple(b.shape)}; "
                "expected (out, in) / (out,).")
        if width is not None and W.shape[1] != width:
            raise CheckpointError(
                f"{where}: policy.pth {key} takes {W.shape[1]} inputs, but {prev} gives {width}.")
        layers.append((W, b))
        width, prev = int(W.shape[0]), key
    sizes = [int(layers[0][0].shape[1])] + [int(W.shape[0]) for W, _ in layers]
    n_params = sum((a + 1) * o for a, o in zip(sizes[:-1], sizes[1:], strict=False))
    if n_params > MAX_PARAMETERS:
        raise CheckpointError(f"{where}: {n_params} parameters, over the limit of "
                              f"{MAX_PARAMETERS}.")
    if sizes[-1] < 2:
        raise CheckpointError(f"{where}: action_net gives {sizes[-1]} action(s); a decision "
                              "needs at least 2.")
    if obs_shape is not None:
        if not isinstance(obs_shape, (list, tuple)) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in obs_shape):
            raise CheckpointError(f"{where}: observation_space shape: bad value {short(obs_shape)}; "
                                  "expected a list of integers.")
        if math.prod(obs_shape) != sizes[0]:
            raise CheckpointError(
                f"{where}: the observation space has shape {tuple(obs_shape)} "
                f"({math.prod(obs_shape)} inputs), but the network takes {sizes[0]} inputs.")
    arrays = [(_float32(W), _float32(b)) for W, b in layers]
    if not all(np.isfinite(W).all() and np.isfinite(b).all() for W, b in arrays):
        raise CheckpointError(f"{where}: weights contain NaN or inf.")
    enc = FeatureEncoding("features", width_=sizes[0])
    meta = {"format": "stable-baselines3", "architecture": {
        "type": "mlp", "input_dim": sizes[0], "hidden": sizes[1:-1], "output_dim": sizes[-1],
        "activation": activation}, "encoding": enc.to_dict(),
        "metadata": {"name": name, "n_actions": sizes[-1]}}
    return NumpyMLPPolicy(arrays, enc, activation=activation, name=name, source=source), meta


def _is_tensor(t: Any) -> bool:
    torch = sys.modules.get("torch")  # a tensor exists only once torch is imported
    return torch is not None and isinstance(t, torch.Tensor)


def _weight_kind(t: Any) -> str:
    """'' for a floating-point array or tensor, else what ``t`` is (for the message)."""
    if isinstance(t, np.ndarray):
        return "" if t.dtype.kind == "f" else f"a torch.{t.dtype} tensor"
    if _is_tensor(t):
        return "" if t.is_floating_point() else f"a {t.dtype} tensor"
    return type(t).__name__


def _float32(t: Any) -> np.ndarray:
    if _is_tensor(t):
        return t.detach().cpu().float().numpy()
    return t.astype(np.float32, copy=False)
