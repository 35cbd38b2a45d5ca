"""The fairness terms of the generic trainer's PPO (method.md section 5), mixed into
:class:`causalfair.train.generic.SystemTrainer`: the PPO-Lagrangian's anchored-C terms of
the constraints' own pairs, PPO-Cb's differentiable Lambda (on the tabular benefit table,
or on the batch's benefit cells from unit-alone forks,
:func:`causalfair.engines.benefit_forks.unit_benefits`), and the supply / demand signals
that A-PPO, F-PPO-L and ELBERT-PO record in a rollout and turn into advantages
(:mod:`causalfair.train.fair_signals`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair.engines.benefit import auto_eps
from causalfair.engines.benefit_cells import visit_cells
from causalfair.policies.checkpoint import FeatureEncoding
from causalfair.train.config import TrainConfig
from causalfair.train.fair_signals import fair_advantage
from causalfair.train.objectives import lambda_cells_torch, lambda_torch, ppo_c_penalty
from causalfair.types import Observation

__all__ = ["FairnessTerms"]


class FairnessTerms:
    """The fairness terms of :class:`causalfair.train.generic.SystemTrainer`, mixed into
    it. They read the trainer's state (the attributes below) and call its methods
    ``_to_device``, ``_logits`` and ``_dist``."""

    config: TrainConfig
    sim: Any
    G: int  # groups
    T: int  # the horizon
    base: int  # the baseline action
    bins: int  # Lambda's quantile bins per feature
    eps: float | None  # Lambda's benefit resolution (None: "auto", fixed by the first batch)
    pair: tuple[int, int]  # the audited pair
    lag: Any  # the PPO-Lagrangian bookkeeping, or None
    fair: bool  # A-PPO, F-PPO-L or ELBERT-PO
    encoding: FeatureEncoding
    tabular: Any  # the exact tabular model, or None
    delta: Any  # its benefit table on the device (a tabular Lambda term)
    grid_obs: Observation  # its (group, level) grid

    def _pair_c_terms(self, ratio: Any, q: Any, grp: Any, b: dict[str, np.ndarray],
                      T: int) -> Any:
        """sum over the constraints' explicit pairs (a, b) of their multipliers' terms on
        that pair's anchored C (:func:`ppo_c_penalty` with the pair's batch C)."""
        pen = 0.0
        total, g = b["gain"].sum(0), b["group"][0]
        for ab in self.lag.loss_pairs("C"):
            wa, wc = self.lag.weight("abs_C", ab), self.lag.weight("C", ab)
            if not (wa or wc):
                continue
            c_ab = float(total[g == ab[0]].mean() - total[g == ab[1]].mean())
            _, cv = ppo_c_penalty(ratio, q, grp, 0.0, ab, c_batch=c_ab, scale=float(T))
            pen = pen + wa * cv.abs() + wc * cv
        return pen

    def _lambda_loss(self, x: Any, cb: dict[str, Any] | None,
                     pair: tuple[int, int] | None = None) -> Any:
        """The batch policy's Lambda of ``pair`` (None: the audit's), differentiable: on the
        batch's benefit table (unit-alone forks, ``cb``) or on the tabular model's over its
        grid."""
        if cb is not None:
            return self._lambda_cells(self._dist(self._logits(x)).double(), cb, pair)
        grid = self._to_device(self.encoding.encode(self.grid_obs))
        pg = self._dist(self._logits(grid))[:, 1].double().reshape(self.G, -1)
        w = self._to_device(self.tabular.propagate(pg.detach().cpu().numpy(), self.T)[:self.T].mean(0))
        return lambda_torch(pg, self.delta, w, self.eps, self.pair if pair is None else pair)

    # ------------------------------------------------ PPO-Cb by unit-alone forks
    def _benefit_cells(self, x: np.ndarray, group: np.ndarray, delta: np.ndarray
                       ) -> dict[str, Any]:
        """The batch's benefit table: every visit's cell (joint quantile bins of its
        features, ``audit_bins`` per feature, 4 by default), per (group, cell) the mean
        benefit and the visitation weight; returned with what :meth:`_lambda_cells` needs."""

        (cells,), K, _, _ = visit_cells(None, [np.asarray(x, dtype=np.float64)], self.bins,
                                        None, None)
        key = np.asarray(group, dtype=np.intp) * K + cells
        count = np.bincount(key, minlength=self.G * K).astype(np.float64)
        safe = np.maximum(count, 1.0)
        delta_cell = np.stack([np.bincount(key, weights=delta[:, a], minlength=self.G * K) / safe
                               for a in range(delta.shape[1])], axis=1).reshape(self.G, K, -1)
        w = count.reshape(self.G, K)
        w = w / np.maximum(w.sum(1, keepdims=True), 1.0)
        if self.eps is None:  # "auto", fixed from the run's first benefits
            self.eps = auto_eps(np.delete(delta_cell, self.base, axis=-1))[0]
        dev = self._to_device
        return {"key": dev(key), "safe": dev(safe)[:, None], "delta": dev(delta_cell),
                "w": dev(w), "K": K}

    def _lambda_cells(self, probs: Any, cb: dict[str, Any],
                      pair: tuple[int, int] | None = None) -> Any:
        """Lambda of ``pair`` (None: the audit's) of the action distributions ``probs``
        (visits, A) of the batch's visits, averaged per (group, cell), against the batch's
        benefit table."""
        import torch

        p = torch.zeros(self.G * cb["K"], probs.shape[1], dtype=probs.dtype, device=probs.device)
        p = p.index_add(0, cb["key"], probs) / cb["safe"]
        return lambda_cells_torch(p.reshape(self.G, cb["K"], -1), cb["delta"], cb["w"],
                                  self.eps, self.pair if pair is None else pair)

    # ------------------------ A-PPO, F-PPO-L, ELBERT-PO (advantage changes per replica)
    def _start_fair(self, state: Any) -> dict[str, list[np.ndarray]]:
        """The signals a rollout records for A-PPO, F-PPO-L and ELBERT-PO (F-PPO-L: the
        long-term gap at the start too) and PPO-Cb's unit-alone benefits."""
        fair: dict[str, list[np.ndarray]] = {"supply": [], "demand": [], "long_gap": [],
                                             "delta": []}
        if self.fair and self.config.algo == "f-ppo-l":
            fair["long_gap"].append(np.asarray(self.sim.long_term_gap(state), dtype=np.float64))
        return fair

    def _record_fair(self, fair: dict[str, list[np.ndarray]], res: Any, state: Any) -> None:
        if not self.fair:
            return
        fair["supply"].append(np.asarray(res.info["supply"], dtype=np.float64))
        fair["demand"].append(np.asarray(res.info["demand"], dtype=np.float64))
        if self.config.algo == "f-ppo-l":
            fair["long_gap"].append(np.asarray(self.sim.long_term_gap(state), dtype=np.float64))

    def _fair_advantage(self, adv: np.ndarray, b: dict[str, np.ndarray], adv_rep: np.ndarray,
                        unit_rep: np.ndarray, unit_group: np.ndarray) -> tuple[np.ndarray, dict]:
        """A-PPO's, F-PPO-L's or ELBERT-PO's advantages of the batch
        (:func:`causalfair.train.fair_signals.fair_advantage`)."""
        return fair_advantage(self.config, self.G, adv, b, adv_rep, unit_rep, unit_group)
