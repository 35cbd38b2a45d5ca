"""One training run of the generic trainer on a system (:func:`train_system`, which
:func:`causalfair.train.train` calls for every system but the lending settings): its run
folder (``config.json``, ``metrics.jsonl``, ``checkpoint.pt`` every ``checkpoint_every``
iterations and at the end, each written atomically; docs/training.md, "Run folders,
checkpoints, resume"), its progress bar and its torch threads."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from causalfair import _progress
from causalfair.policies.checkpoint import load_checkpoint_for, save_checkpoint
from causalfair.train import checkpoint as ck
from causalfair.train.checkpoint import prepare_run_folder
from causalfair.train.config import TrainConfig
from causalfair.train.device import device_determinism
from causalfair.train.generic import SystemTrainer
from causalfair.train.result import TrainResult

__all__ = ["train_system"]


def _save(tr: SystemTrainer, c: TrainConfig, path: Path, extra: dict[str, Any]) -> None:
    """Write ``tr``'s current policy network to ``path`` (atomically), its metadata the
    run's (config ``c`` as given: name, system, params, algo (also as ``algorithm``, the
    lending trainer's key), seed, iterations, actions, feature names, the replica-choice
    head; ``config``: the configuration it trains with, as config.json, less
    ``checkpoint_every``, which changes no number, so the final file is the same bytes
    whatever it is) plus ``extra``."""
    system = tr.system
    save_checkpoint(path, tr.policy_net, architecture=tr.architecture(), encoding=tr.encoding,
                    metadata={"name": f"{c.algo}-{system.id}", "system": system.id,
                              "system_params": dict(system.params), "algo": c.algo,
                              "algorithm": c.algo,  # (the lending trainer's key)
                              "seed": c.seed, "iterations": c.iterations,
                              "config": {k: v for k, v in tr.config.to_dict(lending=False)
                                         .items() if k != "checkpoint_every"},
                              "n_actions": system.n_actions,
                              "feature_names": list(system.features or []),
                              **({"choice": {"units": tr.U,
                                             "nobody_logit": float(tr.nobody.detach()[0])}}
                                 if tr.choice else {}),
                              **extra})


def train_system(system: Any, config: TrainConfig, out: str | Path | None = None,
                 init_checkpoint: str | Path | None = None, progress: bool = False,
                 device: str = "cpu", evaluate: bool = True) -> Any:
    """Train ``config.algo`` on ``system``; write ``out/checkpoint.pt`` (the policy, its
    encoding with feature names, the system id and params) and ``metrics.jsonl``.

    ``out/checkpoint.pt`` is written every ``config.checkpoint_every`` iterations (the
    policy of that iteration, metadata ``iteration``; the rule the lending trainer
    follows, :func:`causalfair.train.checkpoint.checkpoint_due`) and when training ends
    (the kept policy: with constraints, the best passing audited one). Each write is
    atomic, so a run stopped by Ctrl-C (KeyboardInterrupt, re-raised) leaves the last
    periodic checkpoint, ``config.json`` and the ``metrics.jsonl`` rows of the
    iterations it finished. ``evaluate``:
    :meth:`~causalfair.train.generic.SystemTrainer.finish`'s."""
    import torch

    t0 = time.perf_counter()
    init = load_checkpoint_for(init_checkpoint, system)[0] if init_checkpoint is not None else None
    threads = torch.get_num_threads()
    torch.set_num_threads(int(getattr(config, "threads", 1)))
    try:
        with device_determinism(device):  # a GPU run repeats bit for bit
            tr = SystemTrainer(system, config, init, device)
            out_path = Path(out) if out is not None else None
            if out_path is not None:
                prepare_run_folder(out_path, resume=False)
                (out_path / "metrics.jsonl").unlink(missing_ok=True)  # a new run's log
                ck.atomic_write_bytes(out_path / "config.json", lambda fh: fh.write(
                    json.dumps(tr.config.to_dict(lending=False), indent=2).encode()))

            bar = _progress.start(f"train {config.algo} {system.id} seed {config.seed}",
                                  config.iterations, "iterations", force=progress)
            try:
                for _ in range(config.iterations):
                    row = tr.step()
                    if out_path is not None:
                        ck.append_jsonl(out_path / "metrics.jsonl", row)
                        it = tr.iteration
                        if ck.checkpoint_due(it, config) and it < config.iterations:
                            # the policy of iteration it; the last: the kept one, below
                            _save(tr, config, out_path / ck.CHECKPOINT_NAME, {"iteration": it})
                    bar.update(1)
            finally:
                bar.close()
            final = tr.finish(evaluate)
            checkpoint = None
            if out_path is not None:
                checkpoint = out_path / ck.CHECKPOINT_NAME
                _save(tr, config, checkpoint, {"constraints": list(config.constraints),
                                       "constraints_met": final["constraints_met"]}
                      if config.constraints else {})
    finally:
        torch.set_num_threads(threads)
    return TrainResult(policy=tr.policy(), checkpoint=checkpoint, history=tr.history,
                       metrics={k: v for k, v in final.items() if k != "iteration"},
                       config=tr.config, wall_s=time.perf_counter() - t0,
                       extra={"system": system.id,
                              "pair": "-".join(system.groups[g] for g in tr.pair),
                              "pair_groups": tuple(system.groups[g] for g in tr.pair)})
