"""Training on any system (method.md section 5): PPO, PPO-C and PPO-Cb over the simulator
protocol, for systems other than the lending settings (which keep their own, faster
trainer in :mod:`causalfair.train.core`).

- The policy is an MLP over the observation: the one-hot (level, group) when the system
  observes levels and no features, else the feature matrix (normalised with the mean and
  standard deviation of the initial states, recorded in the checkpoint with the feature
  names; :mod:`causalfair.train.encoding`). One logit for two actions (P(d1) = sigmoid),
  A logits for A actions.
- Rollouts: ``n_individuals`` units split over the groups, T steps, actions drawn with the
  run's seeded generator; no Python loop per unit. Coupled units (``units_per_replica``
  U > 1): ``n_individuals / U`` replicas, every unit a learner sharing the policy.
  Actions outside ``DecisionSet.allowed`` are masked by pinning their logits at -1e9
  (zero weights: probability and gradient exactly 0, and the mask is in the checkpoint).
  One choice per replica (budget 1): a replica-level agent (:mod:`causalfair.policies.choice`),
  one softmax over the units' scores and a learned "nobody" logit, trained by the steps of
  :mod:`causalfair.train.replica_choice`.
- Advantages: GAE with a value network over (observation, t / T); A-PPO, F-PPO-L and
  ELBERT-PO change them with the supply/demand signals per replica
  (:mod:`causalfair.train.fair_signals`).
- Gain action values, model-free (method.md section 5): the gain-to-go of each unit's
  trajectory, Q_g(x_t, d_t) = sum_{t' >= t} g_t'. PPO-C adds beta_C * C^2 with the
  anchored C estimator of :func:`causalfair.train.objectives.c_hat_anchored`.
- PPO-Cb's Lambda term: systems with an exact tabular model and two actions use its
  benefit table (as the lending trainer). Every other system estimates it from each
  iteration's rollout: each visited unit's benefit by unit-alone forks
  (:func:`causalfair.engines.benefit_mc.unit_benefits`: the unit alone takes each action, every
  other unit the baseline, same state and noise), pooled in joint quantile bins of the
  features (``audit_bins`` per feature, 4 by default, as the Monte Carlo audit) per
  group; the loss's Lambda takes the policy's mean action distribution per cell over the
  whole batch (differentiable) and the rollout's visitation weights. These terms, and the
  supply/demand signals, are :class:`causalfair.train.fair_terms.FairnessTerms`.
- The compared groups (``config.pair``, e.g. ``("B", "A")``; None: each audit's own,
  ``start_pair`` before the first) are those of every audit, of the C and Lambda
  penalties and of the constraints on plain keys, so a repair optimises the pair its
  gate judges (a spec's ``[engine] pair``, else its audit's).
- Every ``eval_every`` iterations the policy is audited: exactly when the system has a
  tabular model of independent units, else by Monte Carlo (``audit_n`` units per group,
  default 2,000; Lambda's cells of ``audit_bins``, intervals at 1 - ``audit_alpha``) on
  the run's selection stream (:func:`selection_seed`), never the random numbers of a
  user's audit; a constrained run's final metrics are one more such
  audit of the policy it keeps, on its evaluation stream (:func:`evaluation_seed`).
- Run folder (:func:`causalfair.train.system_run.train_system`): ``checkpoint.pt`` every
  ``checkpoint_every`` iterations (the policy of that iteration, atomically) and at the end
  (the kept policy); after Ctrl-C the last periodic one stays (docs/training.md, "Run
  folders, checkpoints, resume").
- PPO-Lagrangian (``constraints``, e.g. ``("abs_C<=0.05", "Lambda<=0.1",
  "abs_C[B-A]<=0.1", "max_abs_C<=0.2")``), with any of these objectives: one multiplier per
  constraint (per pair for a ``max_*`` key) on top of the objective's own penalty
  (:class:`SystemTrainer` says which keys enter the loss and which only the selection of
  the kept policy; the bookkeeping is :mod:`causalfair.train.lagrangian`).
- Device (``device="cuda"``): the networks and the update run on the GPU; the simulator
  stays numpy, each rollout step moves its observations to the device once (pinned host
  memory) and its action probabilities back, and each iteration's batch moves once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair.engines.benefit import eps_for, model_eps
from causalfair.engines.benefit_forks import unit_benefits
from causalfair.engines.exact import exact_numbers
from causalfair.engines.montecarlo import decompose_mc
from causalfair.errors import ConfigError
from causalfair.policies.checkpoint import NumpyMLPPolicy, TorchPolicy, mlp
from causalfair.policies.choice import ReplicaChoicePolicy
from causalfair.train.adam import Adam
from causalfair.train.algorithms import names
from causalfair.train.config import TrainConfig, check_lending_fields, resolved_pair
from causalfair.train.device import to_device
from causalfair.train.encoding import (  # warm_encoding: documented here (docs/training.md)
    system_encoding,
    warm_encoding,
)
from causalfair.train.fair_signals import (
    FAIR_ADVANTAGE_ALGOS,
    check_fair_signals,
    signal_replicas,
)
from causalfair.train.fair_terms import FairnessTerms
from causalfair.train.lagrangian import Lagrangian, check_constraints_supported, measure_groups
from causalfair.train.objectives import gain_to_go, ppo_c_penalty
from causalfair.train.replica_choice import ReplicaChoiceTraining
from causalfair.types import Observation, check_batch_size

__all__ = ["SystemTrainer", "GENERIC_ALGOS", "selection_seed", "SELECTION_STREAM",
           "evaluation_seed", "EVALUATION_STREAM", "warm_encoding", "lambda_by_forks",
           "no_features_for_lambda"]

#: The objectives the generic trainer implements (the registry, causalfair.train.algorithms).
GENERIC_ALGOS = names(generic=True)

#: The tag of the selection audits' random stream in :func:`selection_seed` ("SELE").
SELECTION_STREAM = 0x53454C45


def selection_seed(seed: int) -> int:
    """The seed of the Monte Carlo audits a training run of seed ``seed`` makes to choose
    what it keeps (the audits every ``eval_every`` iterations: constraint checks, the
    kept policy, the PPO-Lagrangian multipliers): 2**64 plus the first 64-bit word of
    ``np.random.SeedSequence([seed, SELECTION_STREAM])``.

    It is at least 2**64, so it is never the seed of an audit a user makes (``[engine]
    seed``, ``decompose --seed``, the gate's re-audit of a repair: integers below 2**64,
    0 by default), and its streams (``SeedSequence(seed, spawn_key=...)``, whose entropy
    words then differ in the third) are not theirs either: a policy kept because its
    audit fell on the right side of a bound is judged afterwards on random numbers it
    was not chosen on (docs/training.md, "Constrained repair")."""
    return _stream_seed(seed, SELECTION_STREAM)


#: The tag of a constrained run's final audit's random stream in :func:`evaluation_seed`
#: ("EVAL").
EVALUATION_STREAM = 0x4556414C


def evaluation_seed(seed: int) -> int:
    """The seed of the Monte Carlo audit that gives a constrained run's final metrics (the
    kept policy judged again: :meth:`SystemTrainer.finish`), as :func:`selection_seed`
    with another tag: never a user's seed, nor the selection audits' streams, so the
    numbers a run reports are not those its policy was kept on."""
    return _stream_seed(seed, EVALUATION_STREAM)


def _stream_seed(seed: int, tag: int) -> int:
    word = np.random.SeedSequence([int(seed), tag]).generate_state(1, np.uint64)[0]
    return 2**64 + int(word)


def lambda_by_forks(system: Any) -> bool:
    """Whether a Lambda in the loss (PPO-Cb's term, a Lambda constraint's) takes its
    benefits from unit-alone forks on ``system``: it has no two-action tabular model with
    baseline 0 whose exact benefit table would give them."""
    tab = system.tabular if "exact" in system.engines else None
    return tab is None or system.n_actions != 2 or system.decisions.baseline != 0


def no_features_for_lambda(what: str, system: Any) -> str | None:
    """Why a Lambda in the loss cannot train on ``system`` (None: it can): benefits by forks
    are pooled in cells of the features, and the system observes none. ``what``: "ppo-cb"
    or "constraint" (a Lambda constraint), which the message names with its fix."""
    if not lambda_by_forks(system) or system.features is not None:
        return None
    head, fix = (("algo: 'ppo-cb'", "train ppo-c there (its C term without Lambda), or ppo-cb "
                  "on a system that observes features") if what == "ppo-cb" else
                 ("constraints: Lambda", "drop the Lambda constraint there (C, DPE, IPE, SPE and "
                  "min_ratio_V constraints apply)"))
    return (f"{head} on system {system.id!r}: benefit fairness pairs units through their "
            f"features, and the system observes none (no two-action tabular model gives "
            f"its benefits either); {fix}.")


class SystemTrainer(ReplicaChoiceTraining, FairnessTerms):
    """One training run on a :class:`~causalfair.systems.System`.

    PPO-Lagrangian (``config.constraints``, keys :data:`causalfair.thresholds.PPO_LAG_KEYS`,
    the exact repair's, each also for one pair ``key[A-B]`` or every pair ``max_key``):
    every constraint q <= b has its own multiplier lambda
    (:class:`causalfair.train.lagrangian.Lagrangian`; a ``max_*`` key one per pair), moved
    at every audit on the audit's value of ITS key in units of |b|, taken at the far end of
    its 95% CI (the gate's rule, :meth:`causalfair.thresholds.Constraint.interval`; exact
    audits: the value itself; another pair's quantity from the audit's group comparison,
    :func:`causalfair.thresholds.group_verdicts`): lambda <- max(0, lambda + lagrange_lr
    (q_far - b) / |b|). In the loss, on top of the objective's own penalty (``ppo-c``'s
    beta_C C^2, ``ppo-cb``'s and its beta_Lambda Lambda; none for ``ppo``):

    - ``C``, ``abs_C``: lambda * C_anch / |b| (``abs_C``: |C_anch|), the anchored C
      estimator of PPO-C (:func:`causalfair.train.objectives.ppo_c_penalty`) of the
      constraint's pair (the audit's own pair when it names none);
    - ``Lambda``: lambda * Lambda / |b|, PPO-Cb's differentiable Lambda (the tabular
      benefit table, else unit-alone forks pooled in feature cells) of its pair;
    - ``DPE``, ``IPE``, ``SPE`` and their ``abs_`` forms: no term. The path-specific
      effects need the pi^PS and pi0 counterfactual rollouts of the audit, and no cheap
      differentiable estimate from the batch exists here; their multipliers are recorded
      but move nothing.

    Every constraint, with or without a term, is imposed by the selection: an audit judges
    all of them with the gate's rule (``audit_n`` units per group, so the CIs must be
    narrower than the bounds) and the run ends with the best-utility audited policy that
    met all of them (``constraints_met``; False and the last policy when none did).
    History rows carry ``lagrange_<key>`` per constraint (``lagrange_multiplier``: the
    first one's) and the audit's ``C_ci``, ``DPE_ci``, ``IPE_ci``, ``SPE_ci``,
    ``Lambda_ci``."""

    def __init__(self, system: Any, config: TrainConfig, init: Any = None, device: str = "cpu"):
        import torch

        self.device = torch.device(device)
        if config.algo not in GENERIC_ALGOS:
            raise ConfigError(
                f"algo: {config.algo!r} needs lending's ground truth (the qualified role and the "
                f"lending population); on system {system.id!r} use one of "
                f"{', '.join(GENERIC_ALGOS)}.")
        check_lending_fields(config, system.id)  # fields it would not read
        # the system's published hyper-parameters, for fields left at their defaults
        default = TrainConfig()
        changes = {k: v for k, v in dict(system.train_defaults).items()
                   if getattr(config, k) == getattr(default, k)}
        if config.horizon is None:  # the system's own horizon
            changes.setdefault("horizon", system.horizon)
        c = self.config = config.replace(**changes)
        self.U = system.units_per_replica
        budget = system.decisions.budget
        self.choice = self.U > 1 and budget == 1
        if self.U > 1 and budget is not None and not (
                budget == 1 and system.n_actions == 2 and system.decisions.baseline == 0):
            raise ConfigError(
                f"system {system.id!r}: a budget of {budget} action(s) per replica over "
                f"{system.n_actions} actions is not trained here (the replica-choice policy "
                "takes budget 1 with two actions, baseline 0).")
        if c.constraints:
            check_constraints_supported(system)
        self.system = system
        self.sim = system.make_simulator()
        self.fair = c.algo in FAIR_ADVANTAGE_ALGOS
        self.rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(c.seed)))
        self.audit_seed = selection_seed(c.seed)  # the selection audits' own streams
        torch.manual_seed(c.seed)
        self.A, self.base = system.n_actions, system.decisions.baseline
        self.G, self.T = system.n_groups, c.horizon
        if self.fair:
            check_fair_signals(c.algo, system, self.sim)
        # a warm start reads inputs as it was trained to, and only the system's own
        self.encoding = warm_encoding(system, system_encoding(system, self.sim, self.rng), init)
        width = self.encoding.width
        self.n_out = 1 if self.A == 2 else self.A
        self.policy_net = mlp(width, c.hidden, self.n_out, c.activation)
        if init is not None:
            module = init.to_torch(self.n_out) if isinstance(init, NumpyMLPPolicy) else \
                getattr(init, "module", None)
            if module is None:
                raise ConfigError("init_checkpoint: not an MLP checkpoint.")
            try:
                self.policy_net.load_state_dict(module.state_dict())
            except RuntimeError:
                raise ConfigError(
                    f"init_checkpoint: architecture differs from the config: the config's "
                    f"network is {_layers(self.policy_net)} (hidden={list(c.hidden)}, "
                    f"activation={c.activation}), the checkpoint's {_layers(module)}; set "
                    f"hidden (and activation) to the checkpoint's ([retrain] hidden = [...] "
                    f"in a spec, TrainConfig(hidden=...) in Python).") from None
        allowed = system.decisions.allowed
        if allowed is not None and self.A > 2:
            # actions the deployed policy may not take (e.g. "no attention anywhere"): their
            # logits are pinned at -1e9 with zero weights, so their probability is exactly 0,
            # their gradient 0 (they stay pinned), and the checkpoint carries the mask
            import torch

            out_layer = [m for m in self.policy_net.modules() if isinstance(m, torch.nn.Linear)][-1]
            banned = [a for a in range(self.A) if a not in allowed]
            with torch.no_grad():
                out_layer.weight[banned] = 0.0
                out_layer.bias[banned] = -1e9
        # the compared groups: config.pair's at every audit and in every penalty, else the
        # audit's own (updated at every audit)
        self.fixed_pair = resolved_pair(c, system.groups)
        self.pair = self.fixed_pair or resolved_pair(c, system.groups, "start_pair") or (0, 1)
        # Lambda's cells and the audits' interval level: the spec's in a gate's retrain
        self.bins = 4 if c.audit_bins is None else c.audit_bins
        self.alpha = 0.05 if c.audit_alpha is None else c.audit_alpha
        self.value_net = mlp(width + 1, c.hidden, 1, c.activation)
        self.policy_net.to(self.device)
        self.value_net.to(self.device)
        # one choice per replica: the "nobody" logit competes with the units' scores
        self.nobody = torch.nn.Parameter(torch.zeros(1, dtype=torch.float32, device=self.device))
        extra = [self.nobody] if self.choice else []
        self.opt = Adam(list(self.policy_net.parameters())
                        + list(self.value_net.parameters()) + extra, lr=c.lr)
        tab = system.tabular if "exact" in system.engines else None
        self.tabular = tab
        # Lambda's eps, one number for the run: given, declared, or "auto" from the exact
        # benefit table, else from the first batch's benefit cells (audits before: "auto")
        eps = eps_for(c.lambda_eps, system)[0]
        self.eps = model_eps(eps, tab)[0] if tab is not None else (None if eps == "auto" else eps)
        # PPO-Lagrangian: one multiplier per constraint, on its quantity in units of |bound|
        self.lag = Lagrangian(c.constraints, system.groups, lr=c.lagrange_lr,
                              system_id=system.id) if c.constraints else None
        self.cons = self.lag.cons if self.lag is not None else []
        # a differentiable Lambda: PPO-Cb's term, or a Lambda constraint's
        self.lambda_term = c.algo == "ppo-cb" or any(k.metric == "Lambda" for k in self.cons)
        # the anchored C: PPO-C's and PPO-Cb's term, or a C constraint's
        self.c_term = c.algo in ("ppo-c", "ppo-cb") or any(k.metric == "C" for k in self.cons)
        # its benefits: the exact table, or unit-alone forks in every rollout
        self.cb_forks = self.lambda_term and lambda_by_forks(system)
        if self.cb_forks and system.features is None:
            raise ConfigError(no_features_for_lambda(
                "ppo-cb" if c.algo == "ppo-cb" else "constraint", system))
        if self.lambda_term and not self.cb_forks:
            self.delta = self._to_device(tab.benefit())
            G, K = tab.n_groups, tab.n_levels
            feats = tab.features
            self.grid_obs = Observation(group=np.repeat(np.arange(G), K),
                                        level=np.tile(np.arange(K), G),
                                        features=None if feats is None else feats.reshape(G * K, -1))
        self.iteration = 0
        self.history: list[dict[str, Any]] = []

    # -------------------------------------------------------------------- policy
    def _to_device(self, a: np.ndarray) -> Any:
        return to_device(a, self.device)

    def _logits(self, x: Any) -> Any:
        return self.policy_net(x)

    def _dist(self, logits: Any) -> Any:
        import torch

        if self.n_out == 1:
            p1 = torch.sigmoid(logits[:, 0])
            return torch.stack([1 - p1, p1], dim=1)
        return torch.softmax(logits, dim=1)

    def policy(self) -> Any:
        """The policy for the audit engines (on the CPU: a copy when training runs on a GPU)."""
        import copy

        net = self.policy_net if self.device.type == "cpu" else copy.deepcopy(self.policy_net).cpu()
        pol = TorchPolicy(net, self.encoding, name=f"{self.config.algo}-{self.system.id}")
        if self.choice:
            return ReplicaChoicePolicy(pol, self.U, float(self.nobody.detach()[0]), name=pol.name)
        return pol

    def architecture(self) -> dict[str, Any]:
        return {"type": "mlp", "input_dim": self.encoding.width, "hidden": list(self.config.hidden),
                "activation": self.config.activation, "output_dim": self.n_out}

    # ------------------------------------------------------------------- rollout
    def collect(self) -> dict[str, np.ndarray]:
        """One iteration's rollouts, arrays (T, units): ``n_individuals`` independent units
        split over the groups, or ``n_individuals / U`` replicas of U coupled units (every
        unit a learner sharing the policy, with its own reward and gain)."""
        if self.U > 1:
            return self._rollout(max(2, self.config.n_individuals // self.U), None)
        n_g = max(2, self.config.n_individuals // self.G)
        parts = [self._rollout(n_g, g) for g in range(self.G)]
        return {k: np.concatenate([b[k] for b in parts], axis=1) for k in parts[0]}

    def _rollout(self, n: int, group: int | None) -> dict[str, np.ndarray]:
        """T steps from ``sim.reset(n, group)``, actions drawn per unit."""
        import torch

        state = self.sim.reset(n, group, self.rng)
        keys = ("x", "action", "logp", "reward", "gain", "group")
        out: dict[str, list[np.ndarray]] = {k: [] for k in keys}
        fair = self._start_fair(state)
        for _ in range(self.T):
            obs = self.sim.observe(state)
            check_batch_size(obs, n * self.U, "the policy in training")
            x = self.encoding.encode(obs)
            m = x.shape[0]
            with torch.no_grad():
                probs = self._dist(self._logits(self._to_device(x))).double().cpu().numpy()
            u = self.rng.random(m)
            a = np.minimum((u[:, None] >= np.cumsum(probs[:, :-1], axis=1)).sum(1), self.A - 1)
            noise = self.sim.draw_noise(m, self.rng)
            if self.cb_forks:
                fair["delta"].append(unit_benefits(self.sim, state, noise, m // self.U, self.U,
                                                   self.A, self.base))
            res = self.sim.step(state, a.astype(bool) if self.A == 2 and self.base == 0 else a,
                                noise)
            for k, v in zip(keys, (x, a, np.log(np.maximum(probs[np.arange(m), a], 1e-12)),
                                   np.asarray(res.reward, dtype=np.float64),
                                   np.asarray(res.gain, dtype=np.float64),
                                   np.broadcast_to(np.asarray(obs.group, dtype=np.intp), (m,))),
                            strict=True):
                out[k].append(v)
            state = res.state
            self._record_fair(fair, res, state)
        return {k: np.stack(v) for k, v in {**out, **fair}.items() if v}

    def _advantages(self, b: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        import torch

        T, N = b["reward"].shape
        c = self.config
        tt = np.broadcast_to((np.arange(T) / T)[:, None, None], (T, N, 1)).astype(np.float32)
        vin = self._to_device(np.concatenate([b["x"], tt], axis=2).reshape(T * N, -1))
        with torch.no_grad():
            v = self.value_net(vin).double().cpu().numpy().reshape(T, N)
        adv = np.zeros((T, N))
        last = np.zeros(N)
        for t in range(T - 1, -1, -1):
            nxt = v[t + 1] if t + 1 < T else 0.0
            delta = b["reward"][t] + c.gamma * nxt - v[t]
            last = delta + c.gamma * c.gae_lambda * last
            adv[t] = last
        return adv, adv + v

    # --------------------------------------------------------------------- update
    def step(self) -> dict[str, Any]:
        if self.choice:
            return self._step_choice()
        import torch

        c = self.config
        b = self.collect()
        T, N = b["reward"].shape
        adv, ret = self._advantages(b)
        fair_row: dict[str, float] = {}
        if self.fair:  # every unit of a replica gets its replica's signal
            rep = signal_replicas(c.algo, N, self.U)
            adv, fair_row = self._fair_advantage(adv, b, rep, rep, b["group"][0])
        q = gain_to_go(b["gain"])
        total = b["gain"].sum(0)
        g0, g1 = b["group"][0] == self.pair[0], b["group"][0] == self.pair[1]
        c_batch = float(total[g0].mean() - total[g1].mean())
        flat = lambda a: self._to_device(a.reshape(T * N, *a.shape[2:]))  # noqa: E731
        x, act, logp_old = flat(b["x"]), flat(b["action"]).long(), flat(b["logp"])
        advt, rett, qt, grp = flat(adv), flat(ret), flat(q), flat(b["group"])
        if c.normalize_advantage:
            advt = (advt - advt.mean()) / (advt.std() + 1e-8)
        tt = self._to_device(np.broadcast_to((np.arange(T) / T)[:, None], (T, N))
                             .astype(np.float32).reshape(-1, 1))
        cb = self._benefit_cells(b["x"].reshape(T * N, -1), b["group"].reshape(-1),
                                 b["delta"].reshape(T * N, -1)) if self.cb_forks else None
        if cb is not None:
            with torch.no_grad():
                fair_row["Lambda_batch"] = float(self._lambda_cells(
                    self._dist(self._logits(x)).double(), cb))

        def logp_of(idx: Any) -> Any:
            probs = self._dist(self._logits(x[idx])).double()
            return torch.log(probs.gather(1, act[idx][:, None])[:, 0].clamp_min(1e-12))

        def penalties(idx: Any, ratio: Any, loss: Any) -> tuple[Any, float | None]:
            cv = None
            if self.c_term:
                beta_c = c.beta_c if c.algo in ("ppo-c", "ppo-cb") else 0.0
                pen, cval = ppo_c_penalty(ratio, qt[idx], grp[idx], beta_c, self.pair,
                                          c_batch=c_batch, scale=float(T))
                if self.lag is not None:  # PPO-Lagrangian: + lambda_i * q_i / |b_i|
                    pen = pen + (self.lag.weight("abs_C") * cval.abs()
                                 + self.lag.weight("C") * cval)
                    pen = pen + self._pair_c_terms(ratio, qt[idx], grp[idx], b, T)
                loss = loss + pen
                cv = float(cval.detach())
            beta_l = c.beta_lambda if c.algo == "ppo-cb" else 0.0
            if self.lag is not None:
                beta_l = beta_l + self.lag.weight("Lambda")
                for ab in self.lag.loss_pairs("Lambda"):
                    w = self.lag.weight("Lambda", ab)
                    if w:
                        loss = loss + w * self._lambda_loss(x, cb, ab)
            if self.lambda_term and beta_l:
                loss = loss + beta_l * self._lambda_loss(x, cb)
            return loss, cv

        def value_of(idx: Any) -> Any:
            return self.value_net(torch.cat([x[idx], tt[idx]], dim=1))[:, 0].double()

        last_c = self._ppo_epochs(T * N, logp_of, logp_old, advt, rett, value_of, penalties)
        self.iteration += 1
        row: dict[str, Any] = {"iteration": self.iteration, "utility_batch": float(
            b["reward"].sum(0).mean()), "C_batch": c_batch, **self._c_hat(last_c), **fair_row}
        if self.iteration % c.eval_every == 0 or self.iteration == c.iterations:
            row.update(self.audit())
            if self.lag is not None:
                self.lag.after_audit(row, self._groups, lambda: self.lag.state(self.policy_net))
        if self.lag is not None:
            self.lag.record(row)
        self.history.append(row)
        return row

    def _ppo_epochs(self, n: int, logp_of: Any, logp_old: Any, adv: Any, ret: Any,
                    value_of: Any, penalties: Any) -> float:
        """PPO's clipped-surrogate update over one batch of ``n`` samples (Schulman et al.
        2017; method.md section 5): ``n_epochs`` passes, each over a fresh shuffle (the
        run's generator) cut into ``n_minibatches`` minibatches (sizes differing by at most
        one); per minibatch ``idx`` the
        loss -mean(min(r A, clip(r) A)) + vf_coef mean((V - R)^2), with r =
        exp(``logp_of(idx)`` - ``logp_old[idx]``) and V = ``value_of(idx)``, plus what
        ``penalties(idx, r, loss)`` adds (it returns the new loss and the minibatch's C or
        None), then one optimiser step. Returns the last minibatch's C (nan when none)."""
        import torch

        c = self.config
        order = np.arange(n)
        # exactly n_minibatches of sizes differing by at most one (torch.tensor_split's, as
        # the lending trainer cuts): n // n_minibatches each and a remainder minibatch of
        # its own made one optimiser step more per epoch, on a handful of samples
        k = min(c.n_minibatches, n)
        bounds = np.cumsum([0] + [n // k + (i < n % k) for i in range(k)])
        last_c = float("nan")
        for _ in range(c.n_epochs):
            self.rng.shuffle(order)
            order_t = self._to_device(order)  # one copy per epoch
            for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
                idx = order_t[start:stop]
                ratio = torch.exp(logp_of(idx) - logp_old[idx])
                surr = torch.min(ratio * adv[idx],
                                 ratio.clamp(1 - c.clip_range, 1 + c.clip_range) * adv[idx])
                loss = -surr.mean() + c.vf_coef * ((value_of(idx) - ret[idx]) ** 2).mean()
                loss, cv = penalties(idx, ratio, loss)
                if cv is not None:
                    last_c = cv
                self._apply(loss)
        return last_c

    def _c_hat(self, last_c: float) -> dict[str, float]:
        """The row's C_hat (the anchored estimator PPO-C and PPO-Cb penalise, and a C
        constraint's); the other objectives compute none."""
        return {"C_hat": last_c} if self.c_term else {}

    def _apply(self, loss: Any) -> None:
        """One optimiser step on ``loss``, gradients clipped over every trained parameter."""
        import torch

        self.opt.zero_grad()
        loss.backward()
        params = [p for g in self.opt.param_groups for p in g["params"]]
        torch.nn.utils.clip_grad_norm_(params, self.config.max_grad_norm)
        self.opt.step()

    def finish(self, evaluate: bool = True) -> dict[str, Any]:
        """End of a constrained run: restore the best passing policy (if any); the final
        metrics are its audit's, with ``constraints_met`` (whether a policy passed the
        selection audits). The policy kept (or the last) is audited once more, by Monte
        Carlo on the evaluation stream (:func:`evaluation_seed`), and the final numbers are
        that audit's: a policy kept because its audit fell on the right side of a bound
        is reported on random numbers it was not chosen on (it can miss the bound there);
        an exact audit repeats the kept row's numbers, and the run's :attr:`pair` is the
        kept policy's either way. ``evaluate=False`` skips that audit (the numbers stay the
        selection's), for a caller that audits the kept policy itself (``gate --retrain``)."""
        final = dict(self.history[-1]) if self.history else {}
        if self.lag is None:
            return final
        final = self.lag.finish(final, self.policy_net.load_state_dict)
        if self.history and evaluate:
            fresh = self.audit(evaluation_seed(self.config.seed))
            self.lag.judge(fresh, self._groups)  # the constraints' own quantities, there too
            final.update(fresh)
        return final

    def audit(self, seed: int | None = None) -> dict[str, float]:
        """C, DPE, IPE, SPE, utility (and Lambda) of the current policy: exact when the
        system has a tabular model of independent units, else Monte Carlo with ``audit_n``
        units per group on the selection stream (:func:`selection_seed`), or on ``seed``'s
        (the final audit of a constrained run); of ``config.pair`` when given, else of the
        engine's own pair (with more than two groups the largest and smallest V^pi)."""
        pol = self.policy()
        seed = self.audit_seed if seed is None else seed
        forks: dict = {}  # Lambda's forks: made once, for d's pair and measure_groups' pairs
        if self.tabular is not None:
            d = exact_numbers(self.tabular, pol, self.T, eps=self.eps,
                              pair=self.fixed_pair).decomposition
        else:
            d = decompose_mc(self.system, pol, self.T, n=self.config.audit_n, seed=seed,
                             check=False, eps=self.eps or "auto", pair=self.fixed_pair,
                             benefit_n=self.config.audit_n, benefit_shared=forks,
                             alpha=self.alpha, benefit_bins=self.bins)
        self.pair = tuple(int(g) for g in d.pair)
        self._groups = None if self.lag is None or not self.lag.needs_groups else measure_groups(
            self.system, pol, self.T, d, tabular=self.tabular, n=self.config.audit_n,
            seed=seed, eps=self.eps or "auto",
            lambda_pairs=self.lag.lambda_pairs, coupled=self.U > 1, shared=forks,
            alpha=self.alpha, bins=self.bins)
        out = {k: float(getattr(d, k)) for k in ("C", "DPE", "IPE", "SPE")}
        out["utility"] = float(d.total_utility)
        ci = d.intervals(self.alpha) if d.se else None  # (no pandas in a training worker)
        for k in ("C", "DPE", "IPE", "SPE"):
            out[f"{k}_ci"] = (out[k], out[k]) if ci is None else (
                float(ci[k][0]), float(ci[k][1]))
        if d.Lambda is not None:  # None only when nothing observed pairs individuals
            out["Lambda"] = float(d.Lambda)
            if d.Lambda_ci is not None:
                out["Lambda_ci"] = (float(d.Lambda_ci[0]), float(d.Lambda_ci[1]))
        return out


def _layers(module: Any) -> str:
    """A network's layer widths, input first (``4-64-64-1``), read from its weights."""
    shapes = [tuple(v.shape) for k, v in module.state_dict().items()
              if k.endswith("weight") and len(v.shape) == 2]
    if not shapes:
        return "not an MLP"
    return "-".join(str(w) for w in [shapes[0][1], *(s[0] for s in shapes)])
