"""PPO for a replica-level agent: on coupled units with a budget of one action per
replica, each step the agent picks one unit of its replica, or nobody, from one softmax
over the units' scores and a learned "nobody" logit (the policy
:class:`causalfair.policies.choice.ReplicaChoicePolicy` deploys). The replica's reward
is the sum of its units'; PPO-C's C is the within-replica gap of the pair's mean
gain-to-go (method.md section 5).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair.engines.benefit_forks import unit_benefits
from causalfair.policies.checkpoint import FeatureEncoding
from causalfair.train.config import TrainConfig
from causalfair.train.objectives import gain_to_go
from causalfair.types import check_batch_size

__all__ = ["ReplicaChoiceTraining"]


class ReplicaChoiceTraining:
    """The replica-choice steps of :class:`causalfair.train.generic.SystemTrainer`, mixed
    into it. They read the trainer's state (the attributes below) and call its methods
    ``_to_device``, ``_start_fair``, ``_record_fair``, ``_fair_advantage``,
    ``_benefit_cells``, ``_lambda_cells``, ``_ppo_epochs``, ``_c_hat`` and ``audit``."""

    config: TrainConfig
    U: int  # units per replica
    T: int  # the horizon
    encoding: FeatureEncoding
    sim: Any
    rng: np.random.Generator
    policy_net: Any
    value_net: Any
    nobody: Any  # the "nobody" logit, a torch Parameter
    pair: tuple[int, int]
    fair: bool
    cb_forks: bool
    iteration: int
    history: list[dict[str, Any]]

    def _choice_logits(self, x: Any) -> Any:
        """(replicas, 1 + U) logits: "nobody" first, then the units' scores; ``x`` is
        (replicas, U, width)."""
        import torch

        scores = self.policy_net(x.reshape(-1, x.shape[-1]))[:, 0].reshape(x.shape[0], self.U)
        return torch.cat([self.nobody.expand(x.shape[0], 1), scores], dim=1)

    def _unit_choice_probs(self, x: Any) -> Any:
        """(replicas * U, 2): each unit's chance of being the replica's choice (the softmax
        entry) and of not being it, for ``x`` (replicas, U, width)."""
        import torch

        pu = torch.softmax(self._choice_logits(x), 1)[:, 1:].double().reshape(-1)
        return torch.stack([1.0 - pu, pu], dim=1)

    def _step_choice(self) -> dict[str, Any]:
        """One PPO iteration for a replica-level agent: one categorical choice per replica
        and step (unit or nobody), the replica's summed reward, a value that sums per-unit
        values; PPO-C's C is the within-replica gap of the pair's mean gain-to-go."""
        import torch

        c = self.config
        n_rep = max(2, c.n_individuals // self.U)
        U, T, W = self.U, self.T, self.encoding.width
        state = self.sim.reset(n_rep, None, self.rng)
        xs, ks, logps, rews, gains, groups = [], [], [], [], [], []
        fair = self._start_fair(state)
        group = None
        for _ in range(T):
            obs = self.sim.observe(state)
            check_batch_size(obs, n_rep * U, "the policy in training")
            group = np.asarray(obs.group, dtype=np.intp).reshape(n_rep, U)
            x = self.encoding.encode(obs).reshape(n_rep, U, W)
            with torch.no_grad():
                probs = torch.softmax(self._choice_logits(self._to_device(x)), 1).double().cpu().numpy()
            u = self.rng.random(n_rep)
            k = np.minimum((u[:, None] >= np.cumsum(probs, axis=1)[:, :-1]).sum(1), U)
            d = np.zeros((n_rep, U), dtype=bool)
            hit = np.nonzero(k > 0)[0]
            d[hit, k[hit] - 1] = True
            noise = self.sim.draw_noise(n_rep * U, self.rng)
            if self.cb_forks:
                fair["delta"].append(unit_benefits(self.sim, state, noise, n_rep, U, 2, 0))
                groups.append(group.reshape(-1))
            res = self.sim.step(state, d.reshape(-1), noise)
            xs.append(x)
            ks.append(k)
            logps.append(np.log(np.maximum(probs[np.arange(n_rep), k], 1e-12)))
            rews.append(np.asarray(res.reward, dtype=np.float64).reshape(n_rep, U).sum(1))
            gains.append(np.asarray(res.gain, dtype=np.float64).reshape(n_rep, U))
            state = res.state
            self._record_fair(fair, res, state)
        X, K, LP = np.stack(xs), np.stack(ks), np.stack(logps)  # (T, n, U, W), (T, n), (T, n)
        R, Gn = np.stack(rews), np.stack(gains)  # (T, n), (T, n, U)
        a, b_ = self.pair
        in_a, in_b = (group == a), (group == b_)
        q = gain_to_go(Gn)  # (T, n, U)
        q_diff = ((q * in_a).sum(2) / np.maximum(in_a.sum(1), 1)
                  - (q * in_b).sum(2) / np.maximum(in_b.sum(1), 1))  # (T, n)
        total = Gn.sum(0)
        c_batch = float(((total * in_a).sum(1) / np.maximum(in_a.sum(1), 1)
                         - (total * in_b).sum(1) / np.maximum(in_b.sum(1), 1)).mean())
        tt = np.broadcast_to((np.arange(T) / T)[:, None, None, None], (T, n_rep, U, 1)).astype(np.float32)
        vin = np.concatenate([X, tt], axis=3)
        with torch.no_grad():
            v = self.value_net(self._to_device(vin.reshape(-1, W + 1))).double().cpu().numpy(
            ).reshape(T, n_rep, U).sum(2)
        adv, last = np.zeros((T, n_rep)), np.zeros(n_rep)
        for t in range(T - 1, -1, -1):
            nxt = v[t + 1] if t + 1 < T else 0.0
            last = R[t] + c.gamma * nxt - v[t] + c.gamma * c.gae_lambda * last
            adv[t] = last
        ret = adv + v
        fair_row: dict[str, float] = {}
        if self.fair:
            sd = {k: np.stack(v) for k, v in fair.items() if v}
            adv, fair_row = self._fair_advantage(adv, sd, np.arange(n_rep),
                                                 np.repeat(np.arange(n_rep), U), group.reshape(-1))
        flat = lambda arr: self._to_device(arr.reshape(T * n_rep, *arr.shape[2:]))  # noqa: E731
        xt, kt, lpt = flat(X), flat(K).long(), flat(LP)
        advt, rett, qdt = flat(adv), flat(ret), flat(q_diff)
        vint = flat(vin)
        if c.normalize_advantage:
            advt = (advt - advt.mean()) / (advt.std() + 1e-8)
        cb = self._benefit_cells(X.reshape(T * n_rep * U, W), np.concatenate(groups),
                                 np.concatenate(fair["delta"])) if self.cb_forks else None
        if cb is not None:
            with torch.no_grad():
                fair_row["Lambda_batch"] = float(self._lambda_cells(self._unit_choice_probs(xt), cb))

        def logp_of(idx: Any) -> Any:
            logp = torch.log_softmax(self._choice_logits(xt[idx]), 1).double()
            return logp.gather(1, kt[idx][:, None])[:, 0]

        def penalties(idx: Any, ratio: Any, loss: Any) -> tuple[Any, float | None]:
            cv = None
            if c.algo in ("ppo-c", "ppo-cb"):  # C_anch = c_batch + T mean((ratio - 1) q_diff)
                cval = c_batch + float(T) * ((ratio - 1.0) * qdt[idx]).mean()
                loss = loss + c.beta_c * cval * cval
                cv = float(cval.detach())
            if cb is not None:
                loss = loss + c.beta_lambda * self._lambda_cells(self._unit_choice_probs(xt), cb)
            return loss, cv

        last_c = self._ppo_epochs(
            T * n_rep, logp_of, lpt, advt, rett,
            lambda idx: self.value_net(vint[idx].reshape(-1, W + 1)).reshape(-1, U).sum(1).double(),
            penalties)
        self.iteration += 1
        row: dict[str, Any] = {"iteration": self.iteration, "utility_batch": float(R.sum(0).mean()),
                               "C_batch": c_batch, **self._c_hat(last_c), **fair_row}
        if self.iteration % c.eval_every == 0 or self.iteration == c.iterations:
            row.update(self.audit())
        self.history.append(row)
        return row
