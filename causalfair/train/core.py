"""The PPO core: one readable loop shared by every objective.

Per iteration:

1. **rollout** with pi_old (:mod:`causalfair.train.rollout`), vectorised over the batch;
2. **advantages**: GAE(gamma, lambda) of the utility reward from the value network
   (:func:`gae`); objectives that reshape the advantage do it here (a-ppo, f-ppo-l,
   f-ppo, elbert-po); PPO-C/Cb precompute Q_g;
3. **update**: ``n_epochs`` passes of ``n_minibatches`` minibatches minimising

       loss = pg_loss + kl_penalty + fairness_penalty + vf_coef * v_loss - ent_coef * entropy

   - ``pg_loss`` = -mean(ratio * A) (KL mode, the paper's L_UTIL) or the clipped surrogate;
   - ``kl_penalty`` = beta_KL * mean KL(pi_old || pi_theta) (KL mode);
   - ``fairness_penalty`` = beta_C * C_hat^2 (+ beta_Lambda * Lambda) for ppo-c / ppo-cb;
4. **adaptive beta_KL** (PPO paper, section 4): with d = KL(pi_old || pi_new) over the
   whole rollout after the update, beta_KL *= 2 if d > 1.5 kl_target, beta_KL /= 2 if
   d < kl_target / 1.5;
5. every ``eval_every`` iterations the **exact audit** of the current policy table
   (C, DPE, IPE, SPE, Lambda, utility and the other notions).

Log keys: ``losses/*`` (pg_loss, v_loss, kl_penalty, fairness_penalty, entropy),
``fairness/*`` (batch C_hat, Lambda, TPR gap, ...), ``rollout/*``, ``ppo/*`` and, on audit
iterations, ``exact/*``.

With one-hot (level, group) inputs the policy has G*K distinct inputs, so the network
is evaluated on that grid and gathered (:meth:`Trainer._grid_logits`): the same numbers
as running it row by row, at a fraction of the cost.

Device (``device="cuda"``): the networks, the grids and the update live on the GPU; the
rollout stays numpy (the policy enters it as a (G, K) table) and each iteration's batch
moves to the device once, through pinned host memory (:func:`causalfair.train.device.to_device`). The
initial weights are drawn on the CPU, so a GPU run starts from the CPU run's weights and
agrees with it to float32 rounding; ``"cpu"`` (the default) is the plain CPU path.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from causalfair.engines.benefit import model_eps
from causalfair.engines.effects import value_tables
from causalfair.engines.exact import exact_numbers
from causalfair.policies.core import FeatureEncoding, TorchPolicy, mlp
from causalfair.systems.lending.settings import lending_setting
from causalfair.thresholds import OTHER_NOTIONS
from causalfair.train import objectives as obj
from causalfair.train.adam import Adam
from causalfair.train.config import TrainConfig, resolved_pair
from causalfair.train.device import to_device
from causalfair.train.rollout import Batch, make_rollout

__all__ = ["gae", "bernoulli_kl", "Trainer", "exact_metrics", "adapt_beta_kl"]


def gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, gamma: float,
        lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation along axis 0.

    ``rewards``, ``dones``: (L, M); ``values``: (L + 1, M), the last row the bootstrap
    value after the final step. ``dones[t]`` means the episode ends after step t (no
    bootstrap across it). Returns (advantages, returns = advantages + values[:-1])."""
    L = rewards.shape[0]
    adv = np.zeros_like(rewards, dtype=np.float64)
    last = np.zeros(rewards.shape[1:], dtype=np.float64)
    for t in range(L - 1, -1, -1):
        cont = 1.0 - dones[t].astype(np.float64)
        delta = rewards[t] + gamma * values[t + 1] * cont - values[t]
        last = delta + gamma * lam * cont * last
        adv[t] = last
    return adv, adv + values[:-1]


def bernoulli_kl(p_old: torch.Tensor, p_new: torch.Tensor) -> torch.Tensor:
    """KL(Bern(p_old) || Bern(p_new)), elementwise (probabilities clamped to [1e-7, 1-1e-7])."""
    e = 1e-7
    po, pn = p_old.clamp(e, 1 - e), p_new.clamp(e, 1 - e)
    return po * (po.log() - pn.log()) + (1 - po) * ((1 - po).log() - (1 - pn).log())


def adapt_beta_kl(beta: float, kl: float, target: float) -> float:
    """The PPO paper's rule: double beta when KL > 1.5 target, halve it when KL < target/1.5."""
    if kl > 1.5 * target:
        return beta * 2.0
    if kl < target / 1.5:
        return beta / 2.0
    return beta


def exact_metrics(model: Any, table: np.ndarray, horizon: int,
                  eps: float | str | None = None) -> dict[str, float]:
    """Exact audit of a policy table: C, DPE, IPE, SPE, Lambda, utility, TPR gap, ELBERT
    bias, W1 at T and the demographic-parity gap (:func:`causalfair.engines.exact.exact_numbers`)."""
    n = exact_numbers(model, table, horizon, eps=eps, notions=True)
    s = n.scalars()
    out = {k: s[k] for k in ("C", "DPE", "IPE", "SPE", "Lambda", "utility")}
    o = n.notions
    for k in OTHER_NOTIONS:
        out[k] = float(o[k]) if o.get(k) is not None else float("nan")
    return out


class Trainer:
    """Holds the networks, optimiser, random state and history of one run."""

    def __init__(self, config: TrainConfig, device: str = "cpu"):
        self.config = c = config
        self.device = torch.device(device)
        torch.manual_seed(c.seed)
        self.rng = np.random.default_rng(c.seed)
        self.lending = lending_setting(c.setting, n_levels=c.n_levels, interest=c.interest)
        self.model = self.lending.tabular
        self.G, self.K = self.model.n_groups, self.model.n_levels
        resolved_pair(c, self.model.group_names)  # its two groups, either order (config.pair)
        self.T = c.horizon
        self.encoding = FeatureEncoding("onehot", self.K, self.G)
        self.rollout = make_rollout(c, self.lending)
        self.value_T = self.T if c.env == "individual" else 1
        self.n_heads = 1 + (2 * self.G if c.algo == "elbert-po" else 0)
        width = self.encoding.width
        self.policy_net = mlp(width, c.hidden, 1, c.activation)
        self.value_net = mlp(width + self.value_T, c.hidden, self.n_heads, c.activation)
        self.policy_net.to(self.device)
        self.value_net.to(self.device)
        self.optimizer = Adam(
            list(self.policy_net.parameters()) + list(self.value_net.parameters()), lr=c.lr)
        self.beta_kl = float(c.beta_kl)
        self.iteration = 0
        self.history: list[dict[str, Any]] = []
        self.env_steps = 0
        # input grids: policy rows (s, x) -> s*K + x; value rows (t, s, x) -> (t*G + s)*K + x
        G, K = self.G, self.K
        gp = np.zeros((G * K, width), np.float32)
        idx = np.arange(G * K)
        gp[idx, idx % K] = 1.0
        gp[idx, K + idx // K] = 1.0
        self.grid_pi = self._to_device(gp)
        TV = self.value_T
        gv = np.zeros((TV * G * K, width + TV), np.float32)
        vidx = np.arange(TV * G * K)
        gv[:, :width] = np.tile(gp, (TV, 1))
        gv[vidx, width + vidx // (G * K)] = 1.0
        self.grid_v = self._to_device(gv)
        self.delta = self._to_device(self.model.benefit())
        self.eps = model_eps(config.lambda_eps, self.model)[0]  # 0.1: the setting declares it

    def _to_device(self, a: np.ndarray) -> Any:
        return to_device(a, self.device)

    # ------------------------------------------------------------------ policy views
    def _grid_logits(self) -> torch.Tensor:
        return self.policy_net(self.grid_pi)[:, 0]

    def policy_table(self) -> np.ndarray:
        """pi_theta(d1 | x, s) as a (G, K) float64 table (what the audit reads)."""
        with torch.no_grad():
            return torch.sigmoid(self._grid_logits().double()).cpu().numpy().reshape(self.G, self.K)

    def torch_policy(self) -> TorchPolicy:
        """The policy for the audit engines (on the CPU: a copy when training runs on a GPU)."""
        net = self.policy_net if self.device.type == "cpu" else copy.deepcopy(self.policy_net).cpu()
        return TorchPolicy(net, self.encoding, name=self.config.name or self.config.algo)

    def architecture(self) -> dict[str, Any]:
        return {"type": "mlp", "input_dim": self.encoding.width, "hidden": list(self.config.hidden),
                "activation": self.config.activation, "output_dim": 1}

    # ------------------------------------------------------------------- one iteration
    def _values(self, level: np.ndarray, group: np.ndarray, t: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            v = self.value_net(self.grid_v).double().cpu().numpy()
        tt = np.minimum(t, self.value_T - 1)
        return v[(tt * self.G + group) * self.K + level]  # (..., heads)

    def _advantages(self, b: Batch) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        """(advantage used by the policy loss, value targets (L, M, heads), log entries)."""
        c = self.config
        heads = [b.reward]
        if c.algo == "elbert-po":
            sup = [(b.group == g) & b.action & b.repay for g in range(self.G)]
            dem = [(b.group == g) & b.repay for g in range(self.G)]
            heads += [s.astype(np.float64) for s in sup] + [d.astype(np.float64) for d in dem]
        v = self._values(b.level, b.group, b.t)  # (L, M, H)
        if b.bootstrap is None:
            v_last = np.zeros((1, *v.shape[1:]))
        else:
            bs = b.bootstrap
            v_last = self._values(bs["level"], bs["group"], bs["t"])[None]
        vals = np.concatenate([v, v_last], 0)
        advs, rets = [], []
        for h, r in enumerate(heads):
            a, ret = gae(r, vals[..., h], b.done, c.gamma, c.gae_lambda)
            advs.append(a)
            rets.append(ret)
        adv = advs[0]
        log: dict[str, float] = {}
        if c.algo in ("a-ppo", "f-ppo-l", "f-ppo"):
            sig = self.rollout.signals(b)
            if c.algo == "a-ppo":
                seen = sig["gap_state_after" if c.appo_gap == "after" else "gap_state"]
                adv = obj.appo_advantage(adv, seen, sig["gap_after"] - sig["gap_before"],
                                         c.appo_beta0, c.appo_beta1, c.appo_beta2, c.appo_omega)
                log["fairness/batch_tpr_gap"] = float(sig["gap_after"].mean())
            else:
                violated = sig["cohort_gap"] > c.fppo_omega
                adv = obj.fppol_advantage(adv, violated, sig["dw1"], c.fppo_beta0,
                                          c.fppo_beta3, c.fppo_beta4)
                log["fairness/violated_share"] = float(violated.mean())
                log["fairness/mean_dw1"] = float(sig["dw1"].mean())
        elif c.algo == "elbert-po":
            def norm(a: np.ndarray) -> np.ndarray:
                return (a - a.mean()) / (a.std() + 1e-8)
            G = self.G
            eta_s = np.array([heads[1 + g].sum() for g in range(G)]) / b.n_episodes
            eta_d = np.array([heads[1 + G + g].sum() for g in range(G)]) / b.n_episodes
            adv = obj.elbert_advantage(norm(adv), np.stack([norm(a) for a in advs[1:1 + G]]),
                                       np.stack([norm(a) for a in advs[1 + G:]]), eta_s, eta_d,
                                       c.elbert_alpha)
            z = eta_s / np.maximum(eta_d, 1e-8)
            log["fairness/elbert_bias_batch"] = float(z.max() - z.min())
        if c.normalize_advantage:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        return adv, np.stack(rets, -1), log

    def _gain_q(self, b: Batch) -> tuple[np.ndarray, float | None]:
        """(Q_g per sample, C of pi_old or None) for PPO-C/Cb.

        ``return``: the undiscounted gain-to-go of the individual's own trajectory and the
        batch's Monte Carlo C; ``exact``: Q_pi - V_pi from value_tables for pi_old (the
        state-value baseline leaves the gradient's expectation unchanged and cuts its
        variance) and the exact C of pi_old."""
        c = self.config
        if c.env == "individual":
            if c.gain_q == "exact":
                vt = value_tables(self.model, self._table_old, self.T)
                Q, V = vt["Q_pi"], vt["V_pi"]
                q = (Q[b.t, b.group, b.action.astype(np.int64), b.level]
                     - V[b.t, b.group, b.level])
                v0 = (V[0] * self.model.initial).sum(1)
                return q, float(v0[0] - v0[1])
            total = b.gain.sum(0)
            g0 = b.group[0]
            return obj.gain_to_go(b.gain), float(total[g0 == 0].mean() - total[g0 == 1].mean())
        # population env: the group's gain-to-go within the rollout, per environment
        q = np.zeros_like(b.gain)
        for g in range(self.G):
            m = b.group == g
            q += m * obj.gain_to_go(b.gain * m)
        return q, None

    def step(self) -> dict[str, Any]:
        """One iteration: rollout, advantages, update, beta_KL adaptation, (audit)."""
        c = self.config
        t0 = time.perf_counter()
        self._table_old = self.policy_table()
        tau = None
        if c.algo == "f-ppo":
            tau = obj.massage_tau(self.iteration + 1, c.massage_tau_s, c.massage_start,
                                  c.massage_decay)
        b = self.rollout.collect(self._table_old, self.rng, massage_tau=tau)
        t_roll = time.perf_counter() - t0
        adv, rets, log = self._advantages(b)
        n = b.size
        dev = self._to_device
        pi_idx = dev((b.group * self.K + b.level).reshape(-1))
        tt = np.minimum(b.t, self.value_T - 1)
        v_idx = dev(((tt * self.G + b.group) * self.K + b.level).reshape(-1))
        act = dev(b.action.reshape(-1))
        grp = dev(b.group.reshape(-1))
        p_old_d1 = dev(b.p_d1.reshape(-1))
        p_old = torch.where(act, p_old_d1, 1 - p_old_d1).clamp_min(1e-12)
        logp_old = p_old.log()
        A = dev(adv.reshape(-1))
        R = dev(rets.reshape(n, -1))
        fair = c.algo in ("ppo-c", "ppo-cb")
        Q, c_batch, c_scale = None, None, 1.0
        if fair:
            q_np, c_old = self._gain_q(b)
            Q = dev(q_np.reshape(-1))
            if c.c_estimator == "anchored" and c_old is not None:
                c_batch, c_scale = c_old, float(b.level.shape[0])
                log["fairness/C_old"] = c_old
        W = dev(obj.batch_visitation(b.level, b.group, self.G, self.K))
        sums: dict[str, float] = {}
        n_mb = 0
        for _ in range(c.n_epochs):
            perm = dev(self.rng.permutation(n))  # one copy per epoch
            for mb in torch.tensor_split(perm, c.n_minibatches):
                logits_grid = self._grid_logits().double()
                logit = logits_grid[pi_idx[mb]]
                logp = torch.where(act[mb], F.logsigmoid(logit), F.logsigmoid(-logit))
                ratio = torch.exp(logp - logp_old[mb])
                if c.surrogate == "kl":
                    pg_loss = -(ratio * A[mb]).mean()
                else:
                    r_cl = ratio.clamp(1 - c.clip_range, 1 + c.clip_range)
                    pg_loss = -torch.min(ratio * A[mb], r_cl * A[mb]).mean()
                p_new = torch.sigmoid(logit)
                kl = bernoulli_kl(p_old_d1[mb], p_new).mean()
                kl_penalty = (self.beta_kl * kl if c.surrogate == "kl"
                              else torch.zeros((), dtype=kl.dtype, device=kl.device))
                entropy = -(p_new * F.logsigmoid(logit) + (1 - p_new) * F.logsigmoid(-logit)).mean()
                v = self.value_net(self.grid_v).double()[v_idx[mb]]
                v_loss = ((v - R[mb]) ** 2).mean()
                fairness_penalty = torch.zeros((), dtype=torch.float64, device=self.device)
                extra: dict[str, float] = {}
                if fair:
                    pen, chat = obj.ppo_c_penalty(ratio, Q[mb], grp[mb], c.beta_c,
                                                  c_batch=c_batch, scale=c_scale)
                    fairness_penalty = fairness_penalty + pen
                    extra["fairness/C_hat"] = chat.item()
                    if c.algo == "ppo-cb":
                        p_grid = torch.sigmoid(logits_grid).reshape(self.G, self.K)
                        lam = obj.lambda_torch(p_grid, self.delta, W, self.eps)
                        fairness_penalty = fairness_penalty + c.beta_lambda * lam
                        extra["fairness/Lambda_batch"] = lam.item()
                loss = pg_loss + kl_penalty + fairness_penalty + c.vf_coef * v_loss - c.ent_coef * entropy
                self.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(
                    list(self.policy_net.parameters()) + list(self.value_net.parameters()),
                    c.max_grad_norm)
                self.optimizer.step()
                vals = {"losses/pg_loss": pg_loss.item(), "losses/v_loss": v_loss.item(),
                        "losses/kl_penalty": kl_penalty.item(),
                        "losses/fairness_penalty": fairness_penalty.item(),
                        "losses/entropy": entropy.item(), "ppo/kl_minibatch": kl.item(), **extra}
                for k, val in vals.items():
                    sums[k] = sums.get(k, 0.0) + val
                n_mb += 1
        table_new = self.policy_table()
        w = dev(table_new.reshape(-1))[pi_idx]
        kl_full = float(bernoulli_kl(p_old_d1, w).mean())
        beta_used = self.beta_kl
        if c.surrogate == "kl":
            self.beta_kl = adapt_beta_kl(self.beta_kl, kl_full, c.kl_target)
        self.iteration += 1
        self.env_steps += n
        row: dict[str, Any] = {"iteration": self.iteration, "env_steps": self.env_steps}
        row.update({k: v / n_mb for k, v in sums.items()})
        row.update(log)
        ep_util = b.reward.sum() / b.n_episodes
        row.update({
            "rollout/utility_per_episode": float(ep_util),
            "rollout/reward_per_step": float(b.reward.mean()),
            "rollout/approval_rate": float(b.action.mean()),
            "rollout/massaged": int(b.massaged),
            "ppo/kl": kl_full, "ppo/beta_kl": beta_used, "ppo/beta_kl_next": self.beta_kl,
            "time/rollout_s": t_roll, "time/iteration_s": time.perf_counter() - t0,
        })
        if self.iteration % c.eval_every == 0 or self.iteration == c.iterations:
            ex = exact_metrics(self.model, table_new, self.T, self.eps)
            row.update({f"exact/{k}": v for k, v in ex.items()})
        self.history.append(row)
        return row

    # ----------------------------------------------------------------- state for resume
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit for bit (weights, optimiser, RNG, history)."""
        import json

        return {
            "policy": {k: v.detach().cpu().clone() for k, v in self.policy_net.state_dict().items()},
            "value": {k: v.detach().cpu().clone() for k, v in self.value_net.state_dict().items()},
            "optimizer": _to_cpu(self.optimizer.state_dict()),
            "torch_rng": torch.get_rng_state(),
            "json": json.dumps({
                "config": self.config.to_dict(),
                "iteration": self.iteration,
                "env_steps": self.env_steps,
                "beta_kl": self.beta_kl,
                "rng": _jsonable(self.rng.bit_generator.state),
                "rollout": self.rollout.get_state(),
                "history": _clean(self.history),
            }, allow_nan=True),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        import json

        meta = json.loads(state["json"])
        self.policy_net.load_state_dict(state["policy"])
        self.value_net.load_state_dict(state["value"])
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        self.iteration = int(meta["iteration"])
        self.env_steps = int(meta["env_steps"])
        self.beta_kl = float(meta["beta_kl"])
        self.rng.bit_generator.state = meta["rng"]
        self.rollout.set_state(meta["rollout"])
        self.history = meta["history"]


def _to_cpu(d: Any) -> Any:
    """An optimiser state with its tensors on the CPU (what a run folder stores, whichever
    device trained it; loading moves them back to the parameters' device)."""
    if isinstance(d, torch.Tensor):
        return d if d.device.type == "cpu" else d.cpu()
    if isinstance(d, dict):
        return {k: _to_cpu(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_to_cpu(v) for v in d]
    return d


def _jsonable(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _jsonable(v) for k, v in d.items()}
    if isinstance(d, (np.integer,)):
        return int(d)
    return d


def _clean(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        out.append({k: (float(v) if isinstance(v, float) and math.isfinite(v) else v)
                    for k, v in r.items()})
    return out
