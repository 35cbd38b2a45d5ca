"""The observation statistics of stable-baselines3's ``VecNormalize`` (:class:`ObsNormalization`):
a policy trained behind ``VecNormalize(norm_obs=True)`` acts on
``clip((obs - mean) / sqrt(var + epsilon), -clip_obs, clip_obs)``, not on the raw
observation, so it is audited on the same transform (docs/own-system.md, "Audit your
Gymnasium env").

:func:`obs_normalization` is the one reader every door calls (``cf.as_policy(...,
vecnormalize=)``, ``cf.audit(..., vecnormalize=, baseline_vecnormalize=)``, an audit
spec's ``[policy] vecnormalize`` and ``[baseline] vecnormalize``, the command line's
``--vecnormalize`` and ``audit --baseline-vecnormalize``). It takes

- a ``vecnormalize.pkl`` as ``VecNormalize.save`` writes it, read by a restricted unpickler
  (:class:`_StatsUnpickler`) that never runs code: numpy's array and dtype reconstruction
  are the only callables it lets through; SB3's ``VecNormalize`` and ``RunningMeanStd``,
  gymnasium's spaces and numpy's random generators load as inert stand-ins that only
  store their state; any other global is refused with one line naming it;
- the same statistics exported as ``.npz`` (read without pickle) or ``.json``: ``mean``,
  ``var``, ``epsilon``, ``clip_obs`` (and optionally ``norm_obs``);
- a ``VecNormalize`` object in memory (its ``obs_rms``, ``clip_obs``, ``epsilon`` and
  ``norm_obs`` attributes are read; nothing is pickled), or an :class:`ObsNormalization`.

Dict observation spaces (``norm_obs_keys``) are refused: causalfair audits flat ``Box``
observations. :func:`sibling_stats` finds the ``vecnormalize.pkl`` that stable-baselines3
users (and rl-zoo) keep beside a ``.zip``, so that a checkpoint is not silently audited on
raw observations: :func:`refuse_stats_beside` refuses such a checkpoint given without
statistics, naming the option of the door that takes them (:func:`stats_fix`).
"""

from __future__ import annotations

import copy
import io
import math
import os
import pickle
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from causalfair._limits import check_memory, format_bytes
from causalfair._safe_read import not_a_file, read_json_file, read_npz
from causalfair.errors import CheckpointError, PolicyError, ResourceLimitError, first_line, short
from causalfair.policies.checkpoint import file_sha256
from causalfair.policies.nets import FeatureEncoding
from causalfair.types import Observation, check_probs

__all__ = ["ObsNormalization", "obs_normalization", "read_obs_normalization", "sibling_stats",
           "refuse_stats_beside", "refuse_warm_start", "stats_fix", "NormalizedNetwork",
           "VECNORMALIZE_NONE",
           "STATS_NAME", "STATS_SUFFIXES"]

#: The value that audits a policy on raw observations although a statistics file is near.
VECNORMALIZE_NONE = "none"
#: The file name ``VecNormalize.save`` is given by stable-baselines3 users and rl-zoo.
STATS_NAME = "vecnormalize.pkl"
#: The statistics files :func:`read_obs_normalization` reads.
STATS_SUFFIXES = (".pkl", ".pickle", ".npz", ".json")
#: The largest statistics file read (a VecNormalize pickle is a few kilobytes).
MAX_STATS_BYTES = 64 << 20
_FIELDS = ("mean", "var", "epsilon", "clip_obs")


@dataclass(frozen=True, eq=False)
class ObsNormalization:
    """The observation normalisation of stable-baselines3's ``VecNormalize``: ``mean`` and
    ``var`` (float64, one per observation column), ``epsilon`` and ``clip_obs``;
    ``source`` names where they were read, ``sha256`` the file's digest."""

    mean: np.ndarray
    var: np.ndarray
    epsilon: float
    clip_obs: float
    source: str = "VecNormalize"
    sha256: str | None = None

    @property
    def width(self) -> int:
        return int(self.mean.shape[0])

    def apply(self, x: np.ndarray) -> np.ndarray:
        """(n, width) float32 network inputs from raw observations (n, width), with
        ``VecNormalize.normalize_obs``'s arithmetic: the float32 observation (the ``Box``
        dtype SB3 stores) against float64 statistics, clipped, cast to float32."""
        x = np.asarray(x, dtype=np.float32)
        out = np.clip((x - self.mean) / np.sqrt(self.var + self.epsilon),
                      -self.clip_obs, self.clip_obs)
        return out.astype(np.float32)

    def check_width(self, width: int, what: str) -> None:
        """Refuse statistics for another observation width than ``what`` reads."""
        if self.width != width:
            raise PolicyError(
                f"{what}: the observation statistics ({self.source}) have {self.width} "
                f"columns, but the network reads {width} inputs; pass the VecNormalize "
                "statistics saved with this model.")

    def to_dict(self) -> dict[str, Any]:
        """Provenance: where the statistics came from (recorded in the checkpoint's metadata)."""
        source = Path(self.source).name if self.sha256 else self.source  # a file: its name
        return {"source": source, "sha256": self.sha256, "width": self.width,
                "epsilon": self.epsilon, "clip_obs": self.clip_obs}


# --------------------------------------------------------------------------- reading
def obs_normalization(value: Any, where: str = "vecnormalize") -> ObsNormalization | None:
    """The statistics ``value`` names or holds (module docstring), or None when the policy
    reads raw observations: ``value`` is ``"none"``, or the statistics were kept with
    ``norm_obs=False``. ``where`` names ``value`` in errors (``"--vecnormalize"``)."""
    if isinstance(value, ObsNormalization):
        return value
    if isinstance(value, str) and value.strip().lower() == VECNORMALIZE_NONE:
        return None
    if isinstance(value, (str, os.PathLike)):
        return read_obs_normalization(value, where)
    if isinstance(value, Mapping):
        return _from_fields(value, f"{where} (a mapping)")
    rms = getattr(value, "obs_rms", None)
    if rms is None:
        raise PolicyError(
            f"{where}: cannot use {type(value).__name__} as observation statistics; pass a "
            f"{STATS_NAME} path (or .npz/.json with {', '.join(_FIELDS)}), a VecNormalize "
            f"object, or {VECNORMALIZE_NONE!r} to audit on raw observations.")
    fields = {"norm_obs": getattr(value, "norm_obs", True),
              "norm_obs_keys": getattr(value, "norm_obs_keys", None),
              "clip_obs": getattr(value, "clip_obs", None),
              "epsilon": getattr(value, "epsilon", None)}
    if isinstance(rms, Mapping):
        fields["obs_rms"] = rms
    else:
        fields.update(mean=getattr(rms, "mean", None), var=getattr(rms, "var", None))
    return _from_fields(fields, f"{where} ({type(value).__name__} object)")


def read_obs_normalization(path: str | os.PathLike[str], where: str = "vecnormalize"
                           ) -> ObsNormalization | None:
    """The statistics of a file (``.pkl`` as ``VecNormalize.save`` writes it, ``.npz``,
    ``.json``), read without running code; None when it says ``norm_obs`` is false."""
    path = Path(path)
    where = f"{where} {path}"
    suffix = path.suffix.lower()
    if suffix not in STATS_SUFFIXES:
        raise CheckpointError(
            f"{where}: unknown suffix {suffix or '(none)'!r}; observation statistics are a "
            f"{STATS_NAME} (VecNormalize.save), or .npz / .json with {', '.join(_FIELDS)}.")
    if not path.is_file():
        raise CheckpointError(f"{where}: {not_a_file(path)}.")
    if suffix == ".npz":
        arrays = read_npz(path, where, CheckpointError,
                          pickle_fix=f"save plain numeric arrays {', '.join(_FIELDS)}")
        fields: Mapping[str, Any] = {k: (v[()] if v.ndim == 0 else v) for k, v in arrays.items()}
    elif suffix == ".json":
        fields = read_json_file(path, where, CheckpointError)
        if not isinstance(fields, Mapping):
            raise CheckpointError(f"{where}: expected a JSON object with {', '.join(_FIELDS)}, "
                                  f"got {type(fields).__name__}.")
    else:
        fields = _read_pickle(path, where)
    stats = _from_fields(fields, where)
    if stats is None:
        return None
    return ObsNormalization(stats.mean, stats.var, stats.epsilon, stats.clip_obs,
                            source=str(path), sha256=file_sha256(path))


def sibling_stats(checkpoint: str | os.PathLike[str]) -> Path | None:
    """The ``vecnormalize.pkl`` kept with a stable-baselines3 ``.zip``: beside it
    (``model.save("ppo.zip"); venv.save("vecnormalize.pkl")``) or in the folder named
    after it (rl-zoo: ``<env>.zip`` and ``<env>/vecnormalize.pkl``); None if neither is."""
    path = Path(checkpoint)
    for cand in (path.parent / STATS_NAME, path.parent / path.stem / STATS_NAME):
        if cand.is_file():
            return cand
    return None


def stats_fix(where: str) -> str:
    """How a refusal of a checkpoint without its statistics says to give them, in the
    words of the door that takes them: a command-line option (``"--vecnormalize"``,
    ``"--baseline-vecnormalize"``), a spec key (``"audit spec X: [baseline]
    vecnormalize"``), a Python keyword (``"baseline_vecnormalize"``), or the default
    ``"vecnormalize"`` (the Python API in general: every door named)."""
    if where.startswith("--"):
        return f"pass {where} PATH, or {where} {VECNORMALIZE_NONE} to audit on raw observations"
    owner, _, key = where.rpartition(": ")
    if key.startswith("["):
        return (f'set {key} = "PATH" in {owner or "the spec"} (relative to it), or '
                f'"{VECNORMALIZE_NONE}" to audit on raw observations')
    if where != "vecnormalize":
        return (f'pass {where}=PATH, or {where}="{VECNORMALIZE_NONE}" to audit on raw '
                "observations")
    return ("pass --vecnormalize PATH (spec: [policy] vecnormalize; Python: vecnormalize= "
            "of cf.as_policy or cf.audit) or --vecnormalize none to audit on raw observations")


def refuse_stats_beside(checkpoint: str | os.PathLike[str], where: str) -> None:
    """Refuse a stable-baselines3 ``checkpoint`` given without statistics when a
    ``vecnormalize.pkl`` is kept with it (:func:`sibling_stats`): its network was trained
    on normalized observations. The message names ``where``, the option or key of the
    door that takes the statistics (:func:`stats_fix`)."""
    near = sibling_stats(checkpoint)
    if near is not None:
        raise PolicyError(
            f"checkpoint {checkpoint}: {near} next to the checkpoint: the policy was trained on "
            f"normalized observations; {stats_fix(where)}.")


def refuse_warm_start(checkpoint: str | os.PathLike[str], where: str) -> None:
    """Refuse to start training from a stable-baselines3 ``checkpoint`` kept with a
    ``vecnormalize.pkl`` (:func:`sibling_stats`): its network reads normalized
    observations, and causalfair trains on the raw ones, so it would start from a policy
    of other inputs. ``where`` names the option (``--init-checkpoint``,
    ``init_checkpoint``)."""
    near = sibling_stats(checkpoint)
    if near is not None:
        raise PolicyError(
            f"{where} {checkpoint}: {near} next to the checkpoint: the policy was trained on "
            "normalized observations and causalfair trains on raw ones, so it cannot start "
            f"from it; train from scratch (leave {where} out), or start from a policy trained "
            "without VecNormalize.")


def _from_fields(fields: Mapping[str, Any], where: str) -> ObsNormalization | None:
    """Validated statistics from named fields (a file's or an object's)."""
    keys = fields.get("norm_obs_keys")
    if keys or isinstance(fields.get("obs_rms"), Mapping):
        raise PolicyError(
            f"{where}: normalises a Dict observation space (norm_obs_keys {short(keys)}); "
            "causalfair audits flat Box observations: flatten the observation (gymnasium's "
            "FlattenObservation) and retrain, or audit the model through obs_fn.")
    norm = fields.get("norm_obs", True)
    if isinstance(norm, np.ndarray) and norm.ndim == 0:
        norm = norm.item()
    if not isinstance(norm, (bool, np.bool_)):
        raise PolicyError(f"{where}: norm_obs: bad value {short(norm)}; expected true or false.")
    if not norm:
        return None
    missing = [k for k in _FIELDS if fields.get(k) is None]
    if missing:
        raise PolicyError(f"{where}: missing {', '.join(missing)}; observation statistics need "
                          f"{', '.join(_FIELDS)} (as VecNormalize keeps them).")
    arrays = []
    for key in ("mean", "var"):
        try:
            arr = np.asarray(fields[key], dtype=np.float64)
        except (TypeError, ValueError):
            raise PolicyError(f"{where}: {key}: bad value {short(fields[key])}; expected a list "
                              "of numbers, one per observation column.") from None
        if arr.ndim != 1 or arr.size == 0:
            raise PolicyError(
                f"{where}: {key} has shape {arr.shape}; causalfair audits flat Box "
                "observations, so expected one number per observation column (shape (width,)).")
        if not np.isfinite(arr).all() or (key == "var" and (arr < 0).any()):
            raise PolicyError(f"{where}: {key} holds NaN, inf{' or negatives' if key == 'var' else ''}; "
                              "expected the running statistics VecNormalize keeps.")
        arrays.append(arr)
    mean, var = arrays
    if mean.shape != var.shape:
        raise PolicyError(f"{where}: mean has {mean.size} values but var has {var.size}; expected "
                          "one of each per observation column.")
    scalars = []
    for key in ("epsilon", "clip_obs"):
        v = fields[key]
        if isinstance(v, np.ndarray) and v.ndim == 0:
            v = v.item()
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number)) \
                or not math.isfinite(float(v)) or float(v) < 0 \
                or (key == "clip_obs" and float(v) == 0):
            raise PolicyError(f"{where}: {key}: bad value {short(v)}; expected a finite number "
                              f"{'> 0' if key == 'clip_obs' else '>= 0'}.")
        scalars.append(float(v))
    if not (var + scalars[0] > 0).all():
        raise PolicyError(f"{where}: var + epsilon is 0 for some column; expected epsilon > 0 "
                          "(VecNormalize's default is 1e-8).")
    return ObsNormalization(mean, var, scalars[0], scalars[1], source=where)


# ----------------------------------------------------------------- restricted unpickler
class _Inert:
    """Stands in for a global the statistics do not need (gymnasium spaces, numpy random
    generators): it stores what it is given and runs nothing."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state: Any) -> None:
        self.state = state


class _VecNormalizeState(_Inert):
    """Stands in for ``stable_baselines3...VecNormalize``: its pickled state only."""


class _RunningMeanStdState(_Inert):
    """Stands in for ``stable_baselines3...RunningMeanStd``: its pickled ``__dict__`` only."""


def _numpy_globals() -> dict[tuple[str, str], Any]:
    """numpy's array, dtype and scalar reconstruction, under the module names numpy 1
    (``numpy.core``) and numpy 2 (``numpy._core``) pickle them with."""
    recon_np = np.zeros(1).__reduce__()[0]
    scalar = np.float64(1.0).__reduce__()[0]

    def recon(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
        # an empty ndarray whose data __setstate__ then fills: no subclass, no huge shape
        if subtype is not np.ndarray or not isinstance(shape, tuple) or not all(
                isinstance(d, int) and 0 <= d <= MAX_STATS_BYTES for d in shape) \
                or math.prod(shape) > MAX_STATS_BYTES:
            raise pickle.UnpicklingError(f"an array of {short(shape)} elements is refused")
        return recon_np(subtype, shape, dtype)

    def frombuffer(buf: Any, dtype: Any, shape: Any, order: str) -> np.ndarray:
        if not isinstance(dtype, np.dtype) or dtype.hasobject:
            raise pickle.UnpicklingError("an array from a buffer must have a numeric dtype")
        arr = np.frombuffer(buf, dtype=dtype)
        return arr.reshape(shape, order="F" if order == "F" else "C").copy()

    out: dict[tuple[str, str], Any] = {("numpy", "dtype"): np.dtype, ("numpy", "ndarray"): np.ndarray,
                                       ("collections", "OrderedDict"): OrderedDict}
    for core in ("numpy.core", "numpy._core"):
        out[(f"{core}.multiarray", "_reconstruct")] = recon
        out[(f"{core}.multiarray", "scalar")] = scalar
        out[(f"{core}.numeric", "_frombuffer")] = frombuffer
    return out


_STAND_INS = {
    ("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize"): _VecNormalizeState,
    ("stable_baselines3.common.running_mean_std", "RunningMeanStd"): _RunningMeanStdState,
}
_INERT_MODULES = ("gymnasium.spaces.", "gym.spaces.", "numpy.random.")


class _StatsUnpickler(pickle.Unpickler):
    """Loads a ``VecNormalize`` pickle without running code (module docstring)."""

    allowed = _numpy_globals()

    def find_class(self, module: str, name: str) -> Any:
        key = (module, name)
        if key in _STAND_INS:
            return _STAND_INS[key]
        if key in self.allowed:
            return self.allowed[key]
        if module.startswith(_INERT_MODULES):
            return _Inert
        raise _Refused(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent ids are not allowed")


class _Refused(pickle.UnpicklingError):
    """A global the restricted unpickler does not load."""


def _read_pickle(path: Path, where: str) -> dict[str, Any]:
    """The fields of a pickled ``VecNormalize`` (its state, ``obs_rms`` unpacked)."""
    size = path.stat().st_size
    if size > MAX_STATS_BYTES:
        raise ResourceLimitError(f"{where}: {format_bytes(size)}, over the limit of "
                                 f"{format_bytes(MAX_STATS_BYTES)} for observation statistics.")
    check_memory(8 * size, f"{where}: {format_bytes(size)} of pickle", "use a smaller file")
    try:
        obj = _StatsUnpickler(io.BytesIO(path.read_bytes())).load()
    except _Refused as exc:
        raise CheckpointError(
            f"{where}: refused global {exc} in the pickle (nothing was run); a VecNormalize "
            "file holds numpy arrays and SB3's VecNormalize/RunningMeanStd state only. Save it "
            f"with VecNormalize.save, or export {', '.join(_FIELDS)} to .npz or .json.") from None
    except (pickle.UnpicklingError, EOFError, TypeError, ValueError, AttributeError, IndexError,
            KeyError, OverflowError, MemoryError, RecursionError, UnicodeDecodeError) as exc:
        detail = first_line(str(exc))[:120] if str(exc) else ""
        raise CheckpointError(
            f"{where}: cannot be read as a VecNormalize pickle ({type(exc).__name__}"
            f"{': ' + detail if detail else ''}); save it with VecNormalize.save, or export "
            f"{', '.join(_FIELDS)} to .npz or .json.") from None
    state = getattr(obj, "state", None)
    if not isinstance(obj, _VecNormalizeState) or not isinstance(state, dict):
        raise CheckpointError(f"{where}: holds {type(obj).__name__}, not a VecNormalize (save "
                              "the statistics with VecNormalize.save).")
    fields = {k: state.get(k) for k in ("norm_obs", "norm_obs_keys", "clip_obs", "epsilon")}
    fields["norm_obs"] = state.get("norm_obs", True)
    rms = state.get("obs_rms")
    if isinstance(rms, Mapping):
        fields["obs_rms"] = rms
    elif isinstance(rms, _RunningMeanStdState) and isinstance(getattr(rms, "state", None), dict):
        fields.update(mean=rms.state.get("mean"), var=rms.state.get("var"))
    else:
        raise CheckpointError(f"{where}: the VecNormalize has no observation statistics "
                              f"(obs_rms is {type(rms).__name__}).")
    return fields


# ------------------------------------------------------------------------- applying
class NormalizedNetwork:
    """A stable-baselines3 network read from its ``.zip``
    (:func:`causalfair.policies.checkpoint.sb3_network`) evaluated on normalized
    observations: its input (the observation's features, or one-hot level and group) goes
    through ``stats`` (:meth:`ObsNormalization.apply`) before the network."""

    def __init__(self, net: Any, stats: ObsNormalization):
        self.net, self.stats = net, stats
        self.name, self.source = net.name, getattr(net, "source", None)
        self.encoding = net.encoding
        self._evaluator = _copy_with_encoding(net, FeatureEncoding("features",
                                                                   width_=net.encoding.width))

    @property
    def n_actions(self) -> int:
        return int(self.net.n_actions)

    def action_probs(self, obs: Observation) -> np.ndarray:
        x = self.stats.apply(self.encoding.encode(obs))
        return self._evaluator.action_probs(Observation(group=obs.group, features=x, t=obs.t))

    def prob_d1(self, obs: Observation) -> np.ndarray:
        probs = self.action_probs(obs)
        if probs.shape[1] != 2:
            raise PolicyError(f"policy {self.name!r}: has {probs.shape[1]} actions; use "
                              "action_probs(obs).")
        return check_probs(probs[:, 1], len(obs), f"policy {self.name!r}")

    def __repr__(self) -> str:
        return f"NormalizedNetwork({self.net!r}, stats from {self.stats.source})"


def _copy_with_encoding(net: Any, encoding: FeatureEncoding) -> Any:
    out = copy.copy(net)  # shares the weights
    out.encoding = encoding
    return out
