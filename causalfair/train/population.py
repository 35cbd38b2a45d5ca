"""The algorithms of Yin et al. (NeurIPS 2023) on ``replicator-1``: R-TD3 and
L-UCBFair, population-level agents choosing one feature threshold per group.

The population MDP (Yin et al. section 2): the state is the groups' qualification rates
s = (q_1, q_2); the action a = (a_1, a_2) in [0, 1]^2 is a threshold per group (accept iff
X >= a_g, X ~ N(Y, 1)); the dynamics are ``replicator-1``'s replicator equation with its
utility matrix U. Per step (Eq. 8 and Table 1):

- reward r(s, a) = sum_g w_g (alpha q_g TPR(a_g) + beta (1 - q_g)(1 - FPR(a_g))), the
  system's group-weighted utility (1 - L);
- disparity D(s, a) = 1/2 (xi_1 - xi_2)^2, xi_g = P(Y_hat = 1 | g) (demographic parity),
  and the "utility" of the constraint g(s, a) = 1 - D.

**R-TD3** (section 2b): TD3 on the per-step reward -[(1 - lambda_t) L + lambda_t D] with the
paper's lambda_tau = tau/H, tau = 1..H: (t + 1)/H at the 0-based step t (1/H first, 1 last).
**L-UCBFair** (Algorithm 1): LSVI-UCB over a learned feature map phi(s, a) (an MLP with a
softmax output, fitted on random-policy samples to predict r and g with two linear heads,
App. D.1; ours: on standardised targets, :func:`_fit_phi`), optimistic Q_r, Q_g at the loci of a Voronoi grid of [0, 1]^2, a softmax over
cells of Q_r + nu Q_g, and a projected dual step on nu after every episode.

Both return a :class:`PopulationAgent`, and :func:`audit_policy` turns it into a policy the
Monte Carlo engine audits on ``replicator-1`` (each unit's threshold snapped to the
system's grid). :func:`save_agent` writes a trained agent as an ``.npz`` checkpoint that
``causalfair audit`` / ``decompose --checkpoint`` load (``causalfair train --system
replicator-1 --algo r-td3|l-ucbfair`` does both). The paper's online metrics:
:func:`regret_and_violation`. Where our choices depart from the paper's (initial states,
exploration noise, budgets), the config says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causalfair._limits import check_memory
from causalfair._validation import check_lr, check_seed, finite
from causalfair.engines.montecarlo import decompose_mc
from causalfair.errors import CheckpointError, ConfigError, short
from causalfair.policies.checkpoint import (
    load_checkpoint,
    load_checkpoint_for,
    mlp,
    write_npz,
)
from causalfair.policies.checkpoint_format import CHECKPOINT_FORMAT, CHECKPOINT_VERSION
from causalfair.policies.population import (  # the agents and their policy, re-exported
    GridPolicy,
    LUCBFairActor,
    PopulationAgent,
    ThresholdActor,
    torch_layers,
)
from causalfair.systems.replicator import ReplicatorSimulator, tpr_fpr
from causalfair.train.adam import Adam
from causalfair.train.checkpoint import write_metrics

__all__ = ["PopulationEnv", "PopulationAgent", "RTD3Config", "LUCBFairConfig", "train_rtd3",
           "train_lucbfair", "myopic", "audit_policy", "episode_values", "regret_and_violation",
           "best_constant", "lucbfair_alpha", "rtd3_weight", "GridPolicy", "ThresholdActor",
           "LUCBFairActor", "save_agent", "load_agent", "ALGOS", "PopulationRun", "make_config", "run_agent"]


class PopulationEnv:
    """``replicator-1``'s dynamics for continuous thresholds, many populations at once
    (arrays (n, 2)). Built from the system's simulator, so U, alpha, beta and the group
    weights are the system's."""

    def __init__(self, system: Any):
        sim = system.make_simulator()
        if not isinstance(sim, ReplicatorSimulator):
            raise ConfigError("system: R-TD3 and L-UCBFair (Yin et al., NeurIPS 2023) run on "
                              "replicator-1, replicator-binding or another replicator system, "
                              f"got {system.id!r}.")
        self.U, self.alpha, self.beta = sim.U, sim.alpha, sim.beta
        self.q0 = np.asarray(sim.q0, dtype=np.float64)
        self.w = np.asarray(system.group_weights, dtype=np.float64)
        self.H = int(system.horizon)
        self.grid = np.asarray(sim.thresholds[:-1], dtype=np.float64)  # without "reject all"

    def rates(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return tpr_fpr(a)

    def step(self, q: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(q', r, D) for states q (n, 2) and thresholds a (n, 2)."""
        tpr, fpr = self.rates(a)
        U = self.U
        w_pos = U[1, 1] * tpr + U[1, 0] * (1.0 - tpr)
        w_neg = U[0, 1] * fpr + U[0, 0] * (1.0 - fpr)
        q_next = q * w_pos / (q * w_pos + (1.0 - q) * w_neg)
        r = (self.w * (self.alpha * q * tpr + self.beta * (1.0 - q) * (1.0 - fpr))).sum(1)
        xi = q * tpr + (1.0 - q) * fpr
        D = 0.5 * (xi[:, 0] - xi[:, 1]) ** 2
        return q_next, r, D


def episode_values(env: PopulationEnv, agent: PopulationAgent, q0: np.ndarray | None = None
                   ) -> dict[str, Any]:
    """Roll the agent for H steps from q0 (default the system's): V_r = sum of r, V_g = sum
    of g = 1 - D, the final qualification rates and the path."""
    q = np.atleast_2d(env.q0 if q0 is None else np.asarray(q0, dtype=np.float64))
    Vr, Vg, path = np.zeros(len(q)), np.zeros(len(q)), [q.copy()]
    for t in range(env.H):
        q, r, D = env.step(q, agent.act(q, t))
        Vr += r
        Vg += 1.0 - D
        path.append(q.copy())
    return {"V_r": Vr, "V_g": Vg, "q_final": q, "path": np.stack(path)}


def best_constant(env: PopulationEnv, c: float, q0: np.ndarray | None = None) -> dict[str, Any]:
    """The reference for regret: the best constant pair of grid thresholds whose V_g meets
    c, from each start in ``q0`` ((2,) or (n, 2); default the system's). The constrained
    optimum V* of the paper has no closed form: this is ours, a lower bound on V*. Every
    (start, pair) is rolled at once. Returns arrays (n,) V_r, V_g and thresholds (n, 2)."""
    G = env.grid
    pairs = np.array([(x, y) for x in G for y in G])
    starts = np.atleast_2d(env.q0 if q0 is None else np.asarray(q0, dtype=np.float64))
    n, P = len(starts), len(pairs)
    q = np.repeat(starts, P, axis=0)
    a = np.tile(pairs, (n, 1))
    Vr, Vg = np.zeros(n * P), np.zeros(n * P)
    for _ in range(env.H):
        q, r, D = env.step(q, a)
        Vr += r
        Vg += 1.0 - D
    Vr, Vg = Vr.reshape(n, P), Vg.reshape(n, P)
    ok = Vg >= c
    if not ok.any(axis=1).all():
        raise ConfigError(f"c: from some start no constant threshold pair meets V_g >= {c:g} "
                          f"(best V_g {Vg.max(1).min():.4g}); lower the constraint.")
    i = np.argmax(np.where(ok, Vr, -np.inf), axis=1)
    rows = np.arange(n)
    return {"thresholds": pairs[i], "V_r": Vr[rows, i], "V_g": Vg[rows, i]}


def myopic(env: PopulationEnv, lam: float = 0.0, resolution: int = 101) -> PopulationAgent:
    """The paper's repeated-risk-minimisation baselines (Eq. 7a, 7b): at every step the
    thresholds minimising (1 - lam) L(s, a) + lam D(s, a) for the current state, over a
    grid of [0, 1]^2 (``resolution`` points a side; the paper uses gradient descent).
    ``lam`` = 0: Myopic; 0.5: Myopic-Fair as in its figures."""
    if not 0.0 <= lam < 1.0:
        raise ConfigError(f"lam: must be in [0, 1), got {lam!r}.")
    ax = np.linspace(0.0, 1.0, resolution)
    pairs = np.array([(x, y) for x in ax for y in ax])

    def act(q: np.ndarray, t: int) -> np.ndarray:
        q = np.asarray(q, dtype=np.float64)
        qq = np.repeat(q, len(pairs), axis=0)
        _, r, D = env.step(qq, np.tile(pairs, (len(q), 1)))
        cost = ((1.0 - lam) * (1.0 - r) + lam * D).reshape(len(q), len(pairs))
        return pairs[cost.argmin(1)]

    return PopulationAgent("myopic" if lam == 0 else f"myopic-fair({lam:g})", act)


def regret_and_violation(V_r: np.ndarray, V_g: np.ndarray, V_star: float, c: float
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The paper's online metrics after each episode k (Eq. 3): Regret(k) = sum_{j<=k}
    (V* - V_r^j) and Drtn(k) = max(0, sum_{j<=k} (c - V_g^j))."""
    V_r, V_g = np.asarray(V_r, dtype=np.float64), np.asarray(V_g, dtype=np.float64)
    return np.cumsum(V_star - V_r), np.maximum(0.0, np.cumsum(c - V_g))


def audit_policy(env: PopulationEnv, agent: PopulationAgent, name: str | None = None) -> Any:
    """The agent as a policy on ``replicator-1``: each unit (group g of a replica) reads
    (q_own, q_other), the replica's state is put back together, and the unit takes the
    grid threshold nearest to the agent's a_g (probability 1)."""
    return GridPolicy(env.grid, agent, name or agent.name)


def _check_fields(cfg: Any, ints: tuple[str, ...], positive: tuple[str, ...],
                  nonnegative: tuple[str, ...] = (), unit: tuple[str, ...] = ()) -> None:
    """Config validation, each error naming the field: ``ints`` integers >= 1,
    ``positive`` finite numbers > 0, ``nonnegative`` finite numbers >= 0, ``unit`` numbers
    in (0, 1] (a discount, a Polyak rate); and the seed (:func:`check_seed`)."""
    check_seed(cfg.seed, "seed", ConfigError)
    for name in ints:
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{name}: bad value {short(v)}; must be an integer >= 1.")
    for names, ok, what in ((positive, lambda v: v > 0, "a finite number > 0"),
                            (nonnegative, lambda v: v >= 0, "a finite number >= 0"),
                            (unit, lambda v: 0 < v <= 1, "a number in (0, 1]")):
        for name in names:
            v = getattr(cfg, name)
            if (isinstance(v, bool) or not isinstance(v, (int, float))
                    or not finite(v) or not ok(v)):
                raise ConfigError(f"{name}: bad value {short(v)}; must be {what}.")


def _check_widths(name: str, widths: Any, n_in: int, n_out: int, rows: int,
                  out_name: str = "") -> tuple[int, ...]:
    """``widths``, the hidden layers of an MLP (the field ``name``), as a tuple of integers
    >= 1, and its memory (weights, Adam's moments, ``rows`` activations of a batch) within
    the limit (:func:`causalfair._limits.check_memory`); ``out_name``: the field that sets
    its ``n_out`` outputs, if any (named in that error too)."""
    if (isinstance(widths, (str, bytes)) or not hasattr(widths, "__iter__")
            or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 1
                       for h in widths)):
        raise ConfigError(f"{name}: bad value {short(widths)}; must be a list of layer widths, "
                          "integers >= 1, e.g. [256, 256].")
    widths = tuple(widths)
    sizes = (n_in, *widths, n_out)
    weights = sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))
    outs = f" and {out_name} {n_out}" if out_name else ""
    check_memory(4.0 * (16 * weights + 4 * rows * (sum(widths) + n_out)),
                 f"{name} {list(widths)}{outs}",
                 f"use narrower layers ({name}{' or ' + out_name if out_name else ''})")
    return widths


def _initial_states(n: int, rng: np.random.Generator) -> np.ndarray:
    """Training episodes start from random states (the paper: "randomly sampled states";
    ours: q ~ U(0.1, 0.9)^2)."""
    return rng.uniform(0.1, 0.9, size=(n, 2))


# ------------------------------------------------------------------------------ R-TD3
def rtd3_weight(t: int, horizon: int) -> float:
    """R-TD3's time weight of the disparity at the 0-based step ``t`` of an episode of
    ``horizon`` steps: Yin et al.'s lambda_tau = tau / H with tau = 1..H (their steps count
    from 1), so (t + 1) / H: 1/H at the first step, 1 (pure disparity) at the last."""
    return (t + 1) / horizon


@dataclass(frozen=True)
class RTD3Config:
    """R-TD3 (Yin et al. 2023: stable-baselines3's TD3 with default parameters on the
    time-weighted Lagrangian). SB3 2.x defaults: lr 1e-3, batch 256, tau 0.005, gamma
    0.99, policy_delay 2, target noise 0.2 clipped at 0.5, learning_starts 100, nets
    [256, 256] (hidden). Ours: ``steps`` (paper 200,000), ``envs`` populations stepped
    together, Gaussian exploration noise ``action_noise`` (SB3's default is none, which
    leaves a deterministic system unexplored), the observation (q_1, q_2, t / H) (the
    paper does not say whether t is observed; lambda_t depends on it)."""

    steps: int = 20_000
    envs: int = 8
    lr: float = 1e-3
    batch: int = 256
    tau: float = 0.005
    gamma: float = 0.99
    policy_delay: int = 2
    target_noise: float = 0.2
    noise_clip: float = 0.5
    learning_starts: int = 100
    hidden: tuple[int, ...] = (256, 256)
    action_noise: float = 0.1
    fair: bool = True  # False: "TD3, no constraint" (lambda = 0)
    seed: int = 0
    threads: int = 1

    def __post_init__(self) -> None:
        _check_fields(self, ("steps", "envs", "batch", "policy_delay", "learning_starts",
                             "threads"), (), ("target_noise", "noise_clip", "action_noise"),
                      ("tau", "gamma"))
        check_lr(self.lr, "lr", ConfigError)
        if not isinstance(self.fair, bool):  # "False" or 0 would train the other objective
            raise ConfigError(f"fair: bad value {short(self.fair)}; must be true (R-TD3's "
                              "time-weighted Lagrangian) or false (TD3, no constraint).")
        # the actor, two critics and their targets (Adam's moments included), a batch
        object.__setattr__(self, "hidden", _check_widths("hidden", self.hidden, 5, 2,
                                                         max(self.batch, self.envs)))
        if self.steps > 10_000_000:
            raise ConfigError(f"steps: bad value {self.steps}; at most 10,000,000 (the replay "
                              "buffer holds every step).")


def train_rtd3(system: Any, config: RTD3Config = RTD3Config()) -> PopulationAgent:
    """Train R-TD3 on ``replicator-1``; the agent's ``history`` holds, per finished
    episode, V_r and V_g (the paper's online quantities)."""
    import torch

    c = config
    env = PopulationEnv(system)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([c.seed, 2])))
    threads = torch.get_num_threads()
    torch.set_num_threads(c.threads)
    torch.manual_seed(c.seed)
    try:
        actor = torch.nn.Sequential(mlp(3, c.hidden, 2, "relu"), torch.nn.Sigmoid())
        critics = [mlp(5, c.hidden, 1, "relu") for _ in range(2)]
        targets = [torch.nn.Sequential(mlp(3, c.hidden, 2, "relu"), torch.nn.Sigmoid())] + [
            mlp(5, c.hidden, 1, "relu") for _ in range(2)]
        for t_, s_ in zip(targets, [actor] + critics, strict=True):
            t_.load_state_dict(s_.state_dict())
        opt_a = Adam(actor.parameters(), lr=c.lr)
        opt_c = Adam([p for q in critics for p in q.parameters()], lr=c.lr)
        H, n = env.H, c.envs
        cap = c.steps
        buf = {k: np.zeros((cap, w), dtype=np.float32) for k, w in
               (("o", 3), ("a", 2), ("r", 1), ("o2", 3), ("done", 1))}
        size = 0
        q, t = _initial_states(n, rng), 0
        start = q.copy()
        ep_r, ep_g = np.zeros(n), np.zeros(n)
        history: list[dict[str, float]] = []
        updates = 0

        def obs(qq: np.ndarray, tt: int) -> np.ndarray:
            return np.concatenate([qq, np.full((len(qq), 1), tt / H)], axis=1).astype(np.float32)

        for step in range(0, c.steps, n):
            o = obs(q, t)
            if step < c.learning_starts:
                a = rng.uniform(0.0, 1.0, size=(n, 2))
            else:
                with torch.no_grad():
                    a = actor(torch.from_numpy(o)).double().numpy()
                a = np.clip(a + c.action_noise * rng.standard_normal((n, 2)), 0.0, 1.0)
            q2, r, D = env.step(q, a)
            lam = rtd3_weight(t, H) if c.fair else 0.0
            reward = -((1.0 - lam) * (1.0 - r) + lam * D)
            ep_r += r
            ep_g += 1.0 - D
            done = t + 1 >= H
            k = min(n, cap - size)
            for key, val in (("o", o), ("a", a), ("r", reward[:, None]), ("o2", obs(q2, t + 1)),
                             ("done", np.full((n, 1), float(done)))):
                buf[key][size:size + k] = val[:k]
            size += k
            q, t = q2, t + 1
            if done:
                history += [{"V_r": float(x), "V_g": float(y), "q1": float(s0[0]),
                             "q2": float(s0[1])} for x, y, s0 in zip(ep_r, ep_g, start, strict=True)]
                q, t = _initial_states(n, rng), 0
                start = q.copy()
                ep_r[:], ep_g[:] = 0.0, 0.0
            if step < c.learning_starts:
                continue
            for _ in range(n):  # one gradient step per environment step (train_freq 1)
                idx = rng.integers(0, size, c.batch)
                o_b, a_b, r_b, o2_b, d_b = (torch.from_numpy(buf[k][idx]) for k in
                                            ("o", "a", "r", "o2", "done"))
                with torch.no_grad():
                    noise = (torch.randn_like(a_b) * c.target_noise).clamp(-c.noise_clip, c.noise_clip)
                    a2 = (targets[0](o2_b) + noise).clamp(0.0, 1.0)
                    x2 = torch.cat([o2_b, a2], 1)
                    y = r_b + c.gamma * (1.0 - d_b) * torch.min(targets[1](x2), targets[2](x2))
                x = torch.cat([o_b, a_b], 1)
                loss_c = sum(((qn(x) - y) ** 2).mean() for qn in critics)
                opt_c.zero_grad()
                loss_c.backward()
                opt_c.step()
                updates += 1
                if updates % c.policy_delay == 0:
                    loss_a = -critics[0](torch.cat([o_b, actor(o_b)], 1)).mean()
                    opt_a.zero_grad()
                    loss_a.backward()
                    opt_a.step()
                    with torch.no_grad():
                        for t_, s_ in zip(targets, [actor] + critics, strict=True):
                            for pt, ps in zip(t_.parameters(), s_.parameters(), strict=True):
                                pt.mul_(1.0 - c.tau).add_(c.tau * ps)
        return PopulationAgent("r-td3" if c.fair else "td3",
                               ThresholdActor(torch_layers(actor), H), history)
    finally:
        torch.set_num_threads(threads)


# -------------------------------------------------------------------------- L-UCBFair
@dataclass(frozen=True)
class LUCBFairConfig:
    """L-UCBFair (Yin et al. Algorithm 1; its supplementary code's values where given):
    loci the 5 x 5 grid {0.1, ..., 0.9}^2 (eps = 0.1), softmax temperature ``alpha`` = 1
    (``alpha="paper"``: Algorithm 1's alpha = log(M) K / (2 (1 + chi + H)) with M = 25 cells,
    K = ``episodes``; 18.6 at K = 300, H = 15, chi = 10; :func:`lucbfair_alpha`), bonus ``beta`` = 0.05, ridge ``varsigma`` = 1, feature dimension ``d`` = 10, ``episodes``
    K = 500, constraint c = H - ``slack`` (code: H - 1.5). Ours: ``chi`` (the dual bound;
    the code's 0 switches the dual off, the paper's H / gamma needs the unknown Slater
    gap gamma), the feature network [64, 64] -> softmax(d) fitted on ``phi_samples``
    random-policy samples (paper 100,000 and [256, 128, 64, 64]) for ``phi_epochs``, its
    targets r and g standardised (the paper's raw targets collapse phi; :func:`_fit_phi`)."""

    episodes: int = 500
    alpha: float | str = 1.0
    beta: float = 0.05
    varsigma: float = 1.0
    d: int = 10
    chi: float = 10.0
    slack: float = 1.5
    phi_samples: int = 20_000
    phi_epochs: int = 20
    phi_hidden: tuple[int, ...] = (64, 64)
    seed: int = 0
    threads: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.alpha, str) and self.alpha != "paper":
            raise ConfigError(f"alpha: bad value {self.alpha!r}; a number > 0 or \"paper\" (Yin "
                              "et al. Algorithm 1's log(M) K / (2 (1 + chi + H))).")
        _check_fields(self, ("episodes", "d", "phi_samples", "phi_epochs", "threads"),
                      ("beta", "varsigma", "slack") + (() if self.alpha == "paper" else ("alpha",)))
        if (isinstance(self.chi, bool) or not isinstance(self.chi, (int, float))
                or not finite(self.chi) or self.chi < 0):
            raise ConfigError(f"chi: bad value {short(self.chi)}; must be a finite number >= 0 (0 "
                              "switches the dual off, as the paper's code does).")
        # phi's network, fitted in minibatches of 128 on phi_samples samples (each sample's
        # state, action, targets and their float32 copies: about 128 bytes)
        object.__setattr__(self, "phi_hidden", _check_widths(
            "phi_hidden", self.phi_hidden, 4, self.d, 128, "d"))
        check_memory(128.0 * self.phi_samples, f"phi_samples {self.phi_samples}",
                     "use fewer samples (phi_samples)")
        if self.episodes > 100_000:
            raise ConfigError(f"episodes: bad value {self.episodes}; at most 100,000 (every "
                              "episode's features are kept).")


def lucbfair_alpha(config: LUCBFairConfig, horizon: int, cells: int = 25) -> float:
    """L-UCBFair's softmax temperature: ``config.alpha``, or for ``"paper"`` Algorithm 1's
    alpha = log(M) K / (2 (1 + chi + H)) (M ``cells``, K episodes, H ``horizon``)."""
    if config.alpha != "paper":
        return float(config.alpha)
    return math.log(cells) * config.episodes / (2.0 * (1.0 + config.chi + horizon))


def _fit_phi(env: PopulationEnv, c: LUCBFairConfig, rng: np.random.Generator
             ) -> list[tuple[np.ndarray, np.ndarray]]:
    """phi(s, a): an MLP with a softmax output (||phi|| <= 1), fitted together with two
    bias-free heads predicting r and g from it (App. D.1); returns the MLP's layers.

    The paper fits "a combination of MSE losses of r and g" on the raw targets. Ours: each
    target standardised (zero mean, unit variance over the samples) first. On the raw
    targets a constant phi fits most of the loss (g = 1 - D is 1 up to a variance of 0.002,
    r's mean dominates its variance): phi saturates on one softmax coordinate, whose
    gradient then vanishes, and r, g are carried by deviations of about 0.04 that the
    ridge of LSVI (varsigma = 1) shrinks to nothing, so Q is the same at every locus.
    Standardised, a constant phi explains nothing and phi spreads over its coordinates.
    phi still sums to 1, so LSVI's weights represent the targets' means."""
    import torch

    n = c.phi_samples
    q = rng.uniform(0.0, 1.0, size=(n, 2))
    a = rng.uniform(0.0, 1.0, size=(n, 2))
    _, r, D = env.step(q, a)
    Y = np.stack([r, 1.0 - D], 1)
    Y = (Y - Y.mean(0)) / np.maximum(Y.std(0), 1e-12)
    x = torch.from_numpy(np.concatenate([q, a], 1).astype(np.float32))
    y = torch.from_numpy(Y.astype(np.float32))
    net = mlp(4, c.phi_hidden, c.d, "relu")
    heads = torch.nn.Linear(c.d, 2, bias=False)
    opt = Adam(list(net.parameters()) + list(heads.parameters()), lr=1e-3, weight_decay=1e-4)
    gen = torch.Generator().manual_seed(c.seed)
    for _ in range(c.phi_epochs):
        for idx in torch.randperm(n, generator=gen).split(128):
            loss = ((heads(torch.softmax(net(x[idx]), dim=1)) - y[idx]) ** 2).sum(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return torch_layers(net)


def train_lucbfair(system: Any, config: LUCBFairConfig = LUCBFairConfig()) -> PopulationAgent:
    """Train L-UCBFair on a replicator system (module docstring); ``history`` holds per
    episode V_r, V_g (from the episode's random start) and the dual variable nu."""
    import torch

    c = config
    env = PopulationEnv(system)
    H, K = env.H, c.episodes
    loci = np.array([(x, y) for x in np.arange(0.1, 1.0, 0.2) for y in np.arange(0.1, 1.0, 0.2)])
    M = len(loci)
    gib = K * (H + 1) * M * c.d * 8 / 2**30
    if gib > 2.0:
        raise ConfigError(f"episodes: bad value {K}; phi at every locus of every visited state "
                          f"(episodes x (H + 1) x {M} x d floats) would take {gib:.1f} GiB, over "
                          "2 GiB: lower episodes or d.")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([c.seed, 3])))
    threads = torch.get_num_threads()
    torch.set_num_threads(c.threads)
    torch.manual_seed(c.seed)
    try:
        phi_layers = _fit_phi(env, c, rng)
    finally:
        torch.set_num_threads(threads)
    d = c.d
    pol = LUCBFairActor(phi_layers, loci, np.zeros((H, d)), np.zeros((H, d)),
                        np.stack([np.eye(d) / c.varsigma] * H),
                        alpha=lucbfair_alpha(c, H, len(loci)), beta=c.beta,
                        nu=0.0, horizon=H)
    cons = H - c.slack
    eta = c.chi / math.sqrt(K * H * H)
    S = np.zeros((K, H + 1, 2))  # states seen, per episode and step
    F = np.zeros((K, H + 1, M, d))  # phi(s, I_i) at those states (phi is fixed after its fit)
    Phi = np.zeros((K, H, d))  # phi(s_h, a_h) of the actions taken
    R = np.zeros((K, H))
    Gv = np.zeros((K, H))
    history: list[dict[str, float]] = []

    for k in range(K):
        # backward pass on the k episodes so far (ridge LSVI per step, targets r + V_{h+1})
        if k:
            for h in range(H - 1, -1, -1):
                X = Phi[:k, h]
                Lam = X.T @ X + c.varsigma * np.eye(d)
                pol.Linv[h] = np.linalg.inv(Lam)
                if h + 1 < H:
                    p, qr, qg = pol.probs(S[:k, h + 1], h + 1, F[:k, h + 1])
                    vr, vg = (p * qr).sum(1), (p * qg).sum(1)
                else:
                    vr = vg = np.zeros(k)
                pol.W_r[h] = pol.Linv[h] @ (X.T @ (R[:k, h] + vr))
                pol.W_g[h] = pol.Linv[h] @ (X.T @ (Gv[:k, h] + vg))
        # forward pass: one episode from a random start
        s = _initial_states(1, rng)
        S[k, 0] = s[0]
        F[k, 0] = pol.loci_features(s)[0]
        vr_ep = vg_ep = 0.0
        v1g = None
        for h in range(H):
            p, qr, qg = pol.probs(s, h, F[k, h][None])
            if h == 0:
                v1g = float((p * qg).sum())
            i = int(np.searchsorted(np.cumsum(p[0]), rng.random(), side="right").clip(0, M - 1))
            a = np.clip(loci[i] + rng.uniform(-0.1, 0.1, 2), 0.0, 1.0)[None]  # uniform in the cell
            s2, r, D = env.step(s, a)
            Phi[k, h] = pol.phi(s, a)[0]
            R[k, h], Gv[k, h] = r[0], 1.0 - D[0]
            vr_ep += r[0]
            vg_ep += 1.0 - D[0]
            s = s2
            S[k, h + 1] = s[0]
            F[k, h + 1] = pol.loci_features(s)[0]
        pol.nu = min(max(pol.nu + eta * (cons - v1g), 0.0), c.chi)  # the projected dual step
        history.append({"V_r": vr_ep, "V_g": vg_ep, "nu": pol.nu, "q1": S[k, 0, 0],
                        "q2": S[k, 0, 1]})

    return PopulationAgent("l-ucbfair", pol, history)


# ------------------------------------------------------------------------ checkpoints
def save_agent(path: Any, agent: PopulationAgent, grid: Any, *,
               metadata: dict[str, Any] | None = None) -> None:
    """Write a trained R-TD3 or L-UCBFair agent as a causalfair ``.npz`` checkpoint
    (architecture type ``population``; no pickle), atomically. ``grid``: the thresholds
    the audit snaps to (the system's, without "reject all"). ``causalfair audit`` and
    ``causalfair decompose --checkpoint`` load it as a :class:`GridPolicy`."""
    from pathlib import Path

    actor = agent.act
    if not isinstance(actor, (ThresholdActor, LUCBFairActor)):
        raise ConfigError(f"agent {agent.name!r}: only trained R-TD3 and L-UCBFair agents are "
                          "saved (the myopic baselines are recomputed from the system).")
    if Path(path).suffix.lower() != ".npz":
        raise ConfigError(f"path: a population agent is saved as .npz, got {str(path)!r}.")
    arch: dict[str, Any] = {"type": "population", "algo": actor.kind, "horizon": actor.H}
    if isinstance(actor, LUCBFairActor):
        arch.update(alpha=actor.alpha, beta=actor.beta, nu=actor.nu)
    meta = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "architecture": arch,
            "metadata": {"name": agent.name, "grid": [float(x) for x in np.asarray(grid)],
                         **(metadata or {})}}
    write_npz(path, actor.arrays(), meta)


def load_agent(path: Any) -> PopulationAgent:
    """The agent of a checkpoint written by :func:`save_agent` (no pickle, no torch)."""
    pol, _ = load_checkpoint(path)
    if not isinstance(pol, GridPolicy):
        raise CheckpointError(f"checkpoint {path}: not a population agent (R-TD3, L-UCBFair).")
    return pol.agent


# ------------------------------------------------------------------ one run (train, sweep)
#: The population agents, by their ``--algo`` name.
ALGOS = ("r-td3", "l-ucbfair")


def _config_class(algo: str) -> type:
    if algo not in ALGOS:
        raise ConfigError(f"algo: bad value {algo!r}; the population agents are "
                          f"{', '.join(ALGOS)}.")
    return RTD3Config if algo == "r-td3" else LUCBFairConfig


def make_config(algo: str, seed: int, horizon: int, iterations: int | None = None,
                fields: Mapping[str, Any] | None = None) -> RTD3Config | LUCBFairConfig:
    """The agent's config as ``causalfair train --algo ALGO --seed SEED [--iterations N]
    [--set FIELD=VALUE ...]`` makes it (``causalfair sweep`` makes its runs' with it):
    ``fields`` (the ``--set`` values; a ``seed`` among them wins), then ``iterations``:
    L-UCBFair's episodes, R-TD3's steps rounded up to whole rounds of one episode
    (``horizon`` steps) per population env (``envs``); a ``steps`` (``episodes``) field
    given with ``iterations`` is refused. Lists become tuples."""
    cls = _config_class(algo)
    kw = {"seed": seed, **dict(fields or {})}
    if iterations is not None:
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
            raise ConfigError(f"iterations: bad value {iterations!r}; must be an integer >= 1.")
        own = "steps" if algo == "r-td3" else "episodes"
        if own in kw:  # the last word used to win silently: iterations, over --set's
            raise ConfigError(f"{own}: given as a field ({short(kw[own], 30)}) and as "
                              f"iterations ({iterations}) as well; keep one.")
        if algo == "r-td3":  # whole rounds of episodes, one per population env
            envs = kw.get("envs", RTD3Config.envs)
            envs = envs if isinstance(envs, int) and envs >= 1 else 1
            kw["steps"] = -(-iterations // envs) * envs * int(horizon)
        else:
            kw["episodes"] = iterations
    try:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()})
    except TypeError as exc:
        raise ConfigError(f"{cls.__name__}: {exc}") from None


@dataclass(frozen=True)
class PopulationRun:
    """One run of a population agent (what ``causalfair train --algo r-td3|l-ucbfair`` and
    a sweep's task train): the algorithm, the system (id and factory parameters) and the
    agent's config (:func:`make_config`)."""

    algo: str
    system: str
    config: RTD3Config | LUCBFairConfig
    system_params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def seed(self) -> int:
        return int(self.config.seed)


def _audit(system: Any, policy: Any) -> Any:
    """The audit of a population agent's policy a run reports: the Monte Carlo engine with
    2 replicas (the dynamics are deterministic) from the system's q0, seed 0."""
    return decompose_mc(system, policy, n=2, seed=0)


def _audited(d: Any) -> dict[str, float]:
    """The audit's numbers a run reports beside the checkpoint's metrics: ``utility`` and
    (when the audit has it) ``Lambda``."""
    return {"utility": float(d.total_utility),
            **({"Lambda": float(d.Lambda)} if d.Lambda is not None else {})}


def audit_checkpoint(path: Any, system: Any) -> dict[str, float]:
    """``utility`` and ``Lambda`` of the agent in checkpoint ``path`` (``checkpoint.npz``),
    by the audit :func:`run_agent` makes (the loaded agent's thresholds are the trained
    one's, bit for bit, so the numbers are those the run reported): what a resumed sweep
    fills in for a run an earlier causalfair finished without them."""
    policy, _ = load_checkpoint_for(path, system)
    return _audited(_audit(system, policy))


def run_agent(run: PopulationRun, system: Any, out: Any = None) -> dict[str, Any]:
    """Train ``run`` on ``system`` (made from ``run.system``), audit the agent from the
    system's q0 (the Monte Carlo engine with 2 replicas: the dynamics are deterministic)
    and, with a run folder ``out``, write ``checkpoint.npz`` (its metadata: algorithm,
    seed, system, parameters, config, metrics) and per-episode ``metrics.jsonl`` /
    ``metrics.csv``. Returns ``{"metrics", "wall_s", "history", "pair", "checkpoint"}``
    (``pair``: the two group names the audit's C compares, first minus second).

    ``metrics``: the agent's own return ``V_r``, ``V_g`` and final rates from q0 (its
    continuous thresholds), then C, DPE, IPE, SPE, ``episodes``, and the same audit's
    ``utility`` (its total utility) and ``Lambda``: the audit of the policy the checkpoint
    loads as (thresholds snapped to the system's grid), the quantities a PPO run reports
    under those names. The checkpoint's metadata holds the metrics up to ``episodes``
    (``utility`` and ``Lambda`` came later; its bytes did not change)."""
    import dataclasses
    import time
    from pathlib import Path

    env = PopulationEnv(system)  # refuses a system that is not a replicator system
    t0 = time.perf_counter()
    agent = (train_rtd3 if run.algo == "r-td3" else train_lucbfair)(system, run.config)
    wall = time.perf_counter() - t0
    ev = episode_values(env, agent)
    d = _audit(system, audit_policy(env, agent))
    m = {"V_r": float(ev["V_r"][0]), "V_g": float(ev["V_g"][0]),
         "q1_final": float(ev["q_final"][0, 0]), "q2_final": float(ev["q_final"][0, 1]),
         **{k: float(getattr(d, k)) for k in ("C", "DPE", "IPE", "SPE")},
         "episodes": len(agent.history)}
    # the audit's utility and Lambda (the PPO rows' ``utility`` and ``Lambda``: one column
    # for every algorithm of a sweep); not in the checkpoint's metadata, whose bytes stay
    audited = _audited(d)
    history = [{"episode": i, **row} for i, row in enumerate(agent.history)]
    ck = None
    if out is not None:
        config_d = {k: list(v) if isinstance(v, tuple) else v
                    for k, v in dataclasses.asdict(run.config).items()}
        ck = Path(out) / "checkpoint.npz"
        save_agent(ck, agent, env.grid, metadata={
            "algorithm": run.algo, "seed": run.seed, "system": run.system,
            "system_params": dict(system.params), "config": config_d, "metrics": m})
        write_metrics(out, history)
    a, b = d.pair
    return {"metrics": {**m, **audited}, "wall_s": wall, "history": history, "checkpoint": ck,
            "pair": (str(d.groups[a]), str(d.groups[b]))}
