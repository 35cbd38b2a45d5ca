"""Retraining: PPO and its fair variants on any system (method.md section 5).

``train(config, out=None, resume=False, init_checkpoint=None) -> TrainResult`` runs one
configuration (:class:`TrainConfig`) and returns the trained policy (a
:class:`~causalfair.policies.core.TorchPolicy`), the checkpoint path (when ``out`` is given)
and the per-iteration history. Algorithms: ppo, ppo-c, ppo-cb, a-ppo, f-ppo-l, f-ppo,
elbert-po (see :mod:`causalfair.train.objectives`). See docs/training.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from causalfair import _progress
from causalfair.backends import resolve_device
from causalfair.errors import first_line
from causalfair.policies.checkpoint import NumpyMLPPolicy, load_checkpoint_for
from causalfair.policies.core import CheckpointError, load_checkpoint
from causalfair.policies.vecnormalize import refuse_warm_start
from causalfair.systems import as_system, make
from causalfair.systems.lending.settings import SETTINGS
from causalfair.train import checkpoint as ck
from causalfair.train.checkpoint import prepare_run_folder
from causalfair.train.config import ALGORITHMS, ENVIRONMENTS, ConfigError, TrainConfig
from causalfair.train.device import device_determinism
from causalfair.train.result import TrainResult

__all__ = ["train", "TrainResult", "TrainConfig", "ALGORITHMS", "ENVIRONMENTS", "ConfigError",
           "EXIT_AFTER_ENV", "warm_start_config"]

#: Test hook: when set to k, the process exits abruptly (os._exit(75), no cleanup, like a
#: kill) right after iteration k has finished, whether or not it was a checkpoint.
EXIT_AFTER_ENV = "CAUSALFAIR_TRAIN_EXIT_AFTER"
#: Decision epochs of the lending settings' episodes (lending.md section A).
LENDING_HORIZON = 20


def train(config: TrainConfig, out: str | os.PathLike[str] | None = None, resume: bool = False,
          init_checkpoint: str | os.PathLike[str] | None = None, *,
          progress: bool = False, system: Any = None, device: str = "cpu",
          evaluate: bool = True) -> TrainResult:
    """Train one configuration.

    The system is ``config.system`` (an id or ``module:callable``, made with
    ``config.system_params``), or ``system`` (a :class:`~causalfair.systems.System` or
    anything :func:`~causalfair.systems.as_system` accepts), else the lending ``setting``.
    Lending systems use the lending trainer; any other system the generic one
    (:mod:`causalfair.train.generic`). ``config.horizon`` None trains and audits over the
    system's own horizon. Training uses exactly ``config.threads`` torch
    threads (restored afterwards), so the weights do not depend on the machine's thread
    settings.

    ``out``: run folder (checkpoints, logs); None keeps everything in memory.
    ``resume``: continue the run in ``out`` from its last checkpoint (same config; only
    ``iterations`` may differ). ``init_checkpoint``: warm start the policy network from a
    causalfair checkpoint (e.g. the audited policy), training its own network
    (:func:`warm_start_config`). Both trainers write ``out/checkpoint.pt`` every
    ``checkpoint_every`` iterations and at the end (the lending trainer also its resume
    state); a run stopped by Ctrl-C leaves the last one.
    ``progress``: show a tqdm bar with utility and |C|.
    ``device``: where the networks train: ``"cpu"`` (default), ``"cuda"`` (``"cuda:N"``) or
    ``"auto"`` (the GPU when torch sees one, for the generic trainer; the CPU for the lending
    trainer, which evaluates its networks on the (group, level) grid only); rollouts stay
    numpy on the CPU and each iteration's batch moves to the device once (docs/training.md,
    "Training on a GPU").
    ``evaluate=False``: a constrained run on the generic trainer skips its final audit
    of the kept policy on the evaluation stream (its ``metrics`` are then the selection
    audit's, optimistic), for a caller that audits the policy itself (``gate --retrain``
    re-audits it with the spec's own audit).
    """
    if not isinstance(config, TrainConfig):
        raise ConfigError(f"config: expected a TrainConfig, got {type(config).__name__}.")
    if init_checkpoint is not None:
        refuse_warm_start(init_checkpoint, "init_checkpoint")
    # the lending trainer evaluates its networks on the (group, level) grid only
    asked, device = device, resolve_device(device, "device", grid=True)

    if system is not None or (config.system and config.system not in SETTINGS):
        system = as_system(system) if system is not None else make(
            config.system, **config.system_params)
        if system.id not in SETTINGS:
            if resume:
                raise ConfigError("resume: continuing a run is supported for the lending "
                                  "systems only; start the run again (same seed, same weights).")
            if init_checkpoint is not None:
                config = warm_start_config(config, init_checkpoint, system)
            from causalfair.train.system_run import train_system

            return train_system(system, config, out, init_checkpoint, progress,
                                device=resolve_device(asked, "device"), evaluate=evaluate)
        config = config.replace(system="", setting=system.id,
                                n_levels=int(system.params.get("levels", config.n_levels)),
                                interest=float(system.params.get("interest", config.interest)),
                                horizon=config.horizon or system.horizon)
    elif config.system:
        config = config.replace(
            system="", setting=config.system,
            n_levels=int(config.system_params.get("levels", config.n_levels)),
            interest=float(config.system_params.get("interest", config.interest)))
    if config.horizon is None:  # the lending settings' horizon (lending.md section A)
        config = config.replace(horizon=LENDING_HORIZON)
    if init_checkpoint is not None:
        config = warm_start_config(config, init_checkpoint)
    if config.constraints:
        raise ConfigError(
            f"constraints: the lending settings are tabular; repair under {', '.join(config.constraints)} "
            "with the exact constrained repair (causalfair train --algo exact --constraint ..., "
            "or [retrain] algo = \"exact\" in a spec).")
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        with device_determinism(device):  # a GPU run repeats bit for bit
            return _train_lending(config, out, resume, init_checkpoint, progress, device)
    finally:
        torch.set_num_threads(threads)


_DEFAULT_ARCH = (TrainConfig.__dataclass_fields__["hidden"].default,
                 TrainConfig.__dataclass_fields__["activation"].default)


def warm_start_config(config: TrainConfig, init_checkpoint: str | os.PathLike[str],
                      system: Any = None) -> TrainConfig:
    """``config`` for a warm start from ``init_checkpoint``: the checkpoint's own network
    (hidden sizes and activation) is trained, so a config that leaves ``hidden`` and
    ``activation`` at their defaults takes the checkpoint's, and one that names others is
    refused (one line naming both). With ``system``, its outputs are checked against the
    system's actions; its inputs are checked where every warm start on a system goes,
    the trainer's construction (:func:`causalfair.train.generic.warm_encoding`), before
    anything is trained."""
    where = f"init_checkpoint {init_checkpoint}"
    _, meta = load_checkpoint(init_checkpoint)
    arch = meta.get("architecture") or {}
    if arch.get("type") != "mlp" or "hidden" not in arch:
        return config  # a population agent or another network: the trainer refuses it
    hidden = tuple(int(h) for h in arch["hidden"])
    act = str(arch.get("activation", config.activation))
    if system is not None and "output_dim" in arch and not (meta.get("metadata") or {}).get("choice"):
        want = 1 if system.n_actions == 2 else system.n_actions
        # two logits over two actions (a stable-baselines3 action_net) train as one, l1 - l0
        # (NumpyMLPPolicy.to_torch(1), what the generic trainer loads)
        if int(arch["output_dim"]) not in ((want, 2) if want == 1 else (want,)):
            raise CheckpointError(
                f"{where}: the network has {arch['output_dim']} output(s), but system "
                f"{system.id} has {system.n_actions} actions ({want} output"
                f"{'' if want == 1 else 's'}); warm-start from a policy of this system's actions.")
    if (config.hidden, config.activation) == (hidden, act):
        return config
    if (config.hidden, config.activation) != _DEFAULT_ARCH:
        raise ConfigError(
            f"{where}: the checkpoint's network is hidden {list(hidden)} {act}, the config asks "
            f"hidden {list(config.hidden)} {config.activation}; a warm start trains the "
            "checkpoint's network: leave hidden and activation out, or train from scratch.")
    return config.replace(hidden=hidden, activation=act)


def _train_lending(config: TrainConfig, out: Any, resume: bool, init_checkpoint: Any,
                   progress: bool, device: str = "cpu") -> TrainResult:
    import time

    from causalfair.train.core import Trainer

    t_start = time.perf_counter()
    trainer = Trainer(config, device)
    out_path = Path(out) if out is not None else None
    if resume:
        if out_path is None:
            raise ConfigError("resume: needs the run folder (out) to continue from.")
        state = ck.read_state(out_path)
        mine = config.to_dict()
        # a key the saved run lacks (written before the key existed) reads as its default
        saved = {**TrainConfig().to_dict(), **json.loads(state["json"])["config"]}
        diff = sorted(k for k in mine if k != "iterations" and saved.get(k) != mine[k])
        if diff:
            raise ConfigError(
                f"resume: the config differs from the saved run in {diff} "
                f"(saved {[saved.get(k) for k in diff]}, given {[mine[k] for k in diff]}); "
                "resume with the same settings or start a new run folder."
            )
        trainer.load_state_dict(state)
        if trainer.iteration > config.iterations:  # nothing to train: the run is further on
            raise ConfigError(
                f"iterations: bad value {config.iterations}; the run in {out_path} has "
                f"trained {trainer.iteration} iterations already: resume with iterations "
                f">= {trainer.iteration} (the total to reach), or start a new run folder.")
        ck.write_metrics(out_path, trainer.history)
    elif init_checkpoint is not None:
        # a stable-baselines3 .zip of causalfair/Lending-v0 reads the one-hot (level,
        # group), as its audit does; its two logits train as one (l1 - l0)
        policy, meta = load_checkpoint_for(init_checkpoint, trainer.model)
        try:
            net = (policy.to_torch(1) if isinstance(policy, NumpyMLPPolicy)
                   else policy.to_torch())
            trainer.policy_net.load_state_dict(net.state_dict())
        except RuntimeError as exc:
            raise CheckpointError(
                f"init_checkpoint {init_checkpoint}: architecture differs from the config "
                f"(hidden={list(config.hidden)}, activation={config.activation}): "
                f"{first_line(str(exc))}"
            ) from None
    if out_path is not None:
        prepare_run_folder(out_path, resume)
        if not resume:
            for name in ("metrics.jsonl", "metrics.csv"):
                (out_path / name).unlink(missing_ok=True)
        text = json.dumps(config.to_dict(), indent=2)
        ck.atomic_write_bytes(out_path / "config.json", lambda fh: fh.write(text.encode()))
    exit_after = os.environ.get(EXIT_AFTER_ENV)
    exit_after = int(exit_after) if exit_after else None

    bar = _progress.start(f"train {config.algo} {config.setting} seed {config.seed}",
                          config.iterations - trainer.iteration, "iterations", force=progress)
    ckpt: Path | None = None
    try:
        while trainer.iteration < config.iterations:
            row = trainer.step()
            if out_path is not None:
                ck.append_jsonl(out_path / "metrics.jsonl", row)
                if ck.checkpoint_due(trainer.iteration, config):
                    ckpt = ck.write_checkpoint(out_path, trainer)
                    ck.write_metrics(out_path, trainer.history)
            last = ck.last_metrics(trainer.history)
            post = {"utility": f"{row['rollout/utility_per_episode']:.3f}"}
            if last:
                post["|C|"] = f"{abs(last['C']):.4f}"
                post["Lambda"] = f"{last['Lambda']:.3f}"
            bar.update(1, **post)
            if exit_after is not None and trainer.iteration == exit_after:
                os._exit(75)
    finally:
        bar.close()
    if out_path is not None and ckpt is None:
        ckpt = ck.write_checkpoint(out_path, trainer)
        ck.write_metrics(out_path, trainer.history)
    from causalfair.train.core import exact_metrics

    table = trainer.policy_table()
    metrics = exact_metrics(trainer.model, table, config.horizon, trainer.eps)
    return TrainResult(
        policy=trainer.torch_policy(),
        checkpoint=ckpt,
        history=trainer.history,  # a DataFrame when first read (TrainResult.history)
        metrics=metrics,
        config=config,
        table=table,
        wall_s=time.perf_counter() - t_start,
    )
