"""Infectious disease on a contact graph (ml-fairness-gym's SIR environment, as Xu et al.
ICML 2024 and Hu et al. BigData 2023 run it): the ``infectious-1`` and
``infectious-harder`` systems.

The population is the 34 members of Zachary's karate club (``networkx.karate_club_graph``,
78 edges, unweighted). The groups are the two communities of the first Girvan-Newman split
(15 and 19 members); member 0 (degree 16) is in the 15-member community and is the one
infected at the start. Each member is susceptible (S), infected (I) or recovered (R).
One step, for every replica at once:

1. treatment: a vaccinated S member becomes R (I and R members are unchanged);
2. infection: each S member becomes I with probability 1 - (1 - tau)^k, k = its infected
   neighbours (counted after treatment), tau = 0.5;
3. recovery: each I member becomes R with probability rho = 0.005;
4. (``infectious-harder`` only) each R member becomes S again with probability 0.2.

Steps 2-4 read the state after step 1, so the transitions of one step are simultaneous.
Each member draws one uniform per step (``draw_noise``), used by whichever of 2-4 its
health allows, so the pi^PS fork and pi0 replay the same epidemic luck. An episode
starts with one burn-in step without treatment (ml-fairness-gym) and lasts 20 steps.

As a :class:`~causalfair.systems.System`: one replica is the whole graph
(``units_per_replica = 34``: the members interact); each member is a unit of its
community's group. The decision per step is one vaccine or none (``DecisionSet(budget=1)``):
a policy gives each member its probability of being the one vaccinated (at most 1 in all
per replica), and the Monte Carlo engine draws one categorical per replica. The baseline
action is "no vaccine" (feasible here). The potential is f = 1[not infected], so a member's
qualification gain is -1 when infected and +1 when recovered. The reward of a member-step
is f after the step (ours: the published code's RL reward differs between seeds), so the
utility is the expected share of healthy member-steps.

What the decomposition means with interference (docs/simulators.md, section 8): the fork
re-runs one step with nobody vaccinated from the same state and noise, so DPE is the
infections the policy's vaccines prevented *within the step* (a vaccinated S member cannot
be infected that step) and IPE everything that follows from the epidemic taking another
course: herd effects, including on members never vaccinated. SPE is the no-vaccine
epidemic's gap between the communities, lopsided because member 0 starts infected. Same-
step spillover is zero here (vaccination moves S to R, and S members infect nobody), so one
fork suffices. Monte Carlo only: the exact joint state space has 3^34 states.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from causalfair._validation import check_int
from causalfair.errors import SystemError_
from causalfair.model import CausalStructure
from causalfair.systems.system import DecisionSet, Gain, System
from causalfair.types import Observation, StepResult

__all__ = ["INF", "INFECTIOUS_DEFAULTS", "REC", "SUS", "InfectiousSimulator", "karate_graph", "make_infectious",
           "make_infectious_harder"]

SUS, INF, REC = 0, 1, 2  # health codes
#: Replicas stepped per block (:meth:`InfectiousSimulator.step`): 512 graphs of 34
#: members keep the step's temporaries (a few bytes per member each) in the L2 cache.
_BLOCK_REPLICAS = 512
#: A step whose members are at most this share susceptible takes the sparse path: no
#: matrix product, only the susceptible members count their infected neighbours, one by
#: one (an epidemic on the karate club passes this point within about four steps). Its
#: temporaries are int8 and bool only, so its blocks are larger: 2048 graphs, 70 KB an
#: array (below the 128 KiB from which glibc maps each allocation afresh).
_FEW_SUSCEPTIBLE = 1 / 32
_SPARSE_BLOCK_REPLICAS = 2048

#: The published parameters, with their sources.
INFECTIOUS_DEFAULTS: dict[str, Any] = {
    # ml-fairness-gym environments/infectious_disease.py::build_sir_model; ELBERT
    # infectious_experiment/main.py (infection probability per infected neighbour)
    "infection_probability": 0.5,
    # same sources (I -> R per step)
    "recovery_probability": 0.005,
    # ELBERT infectious_experiment/harder_env.py, DISABLE_PROBILITY (R -> S); 0 = original
    "immunity_loss_probability": 0.0,
    "harder_immunity_loss_probability": 0.2,
    # ml-fairness-gym / ELBERT: one treatment per step, 20 steps, one burn-in step
    "treatments_per_step": 1,
    "horizon": 20,
    "burn_in": 1,
    # ml-fairness-gym: member 0 starts infected
    "initially_infected": (0,),
}


#: The fair-RL methods' published hyper-parameters on infectious disease (TrainConfig
#: fields): A-PPO (1, 0.1, 0.1), omega 0.05 and F-PPO-L beta3 = beta4 = 0.25, omega 0.05
#: (Fairness-in-RL infectious/config.py, digest-001 sections 3c and 4); ELBERT-PO alpha 10
#: (original; its script uses 20) and 50 (harder) (Xu et al. Table 3).
INFECTIOUS_TRAIN_DEFAULTS: dict[str, dict[str, Any]] = {
    "infectious-1": {"appo_beta1": 0.1, "appo_beta2": 0.1, "appo_omega": 0.05,
                     "fppo_beta3": 0.25, "fppo_beta4": 0.25, "fppo_omega": 0.05,
                     "elbert_alpha": 10.0},
    "infectious-harder": {"appo_beta1": 0.1, "appo_beta2": 0.1, "appo_omega": 0.05,
                          "fppo_beta3": 0.25, "fppo_beta4": 0.25, "fppo_omega": 0.05,
                          "elbert_alpha": 50.0},
}


@lru_cache(maxsize=1)
def karate_graph() -> tuple[np.ndarray, np.ndarray]:
    """(adjacency (34, 34) of 0/1 floats, community (34,) in {0, 1}): community 0 is the
    one holding member 0 (the first Girvan-Newman split, 15 members)."""
    import networkx as nx

    g = nx.karate_club_graph()
    adj = nx.to_numpy_array(g, nodelist=range(34), weight=None)
    first = next(nx.community.girvan_newman(g))
    comm = np.ones(34, dtype=np.intp)
    home = next(c for c in first if 0 in c)
    comm[sorted(home)] = 0
    adj.setflags(write=False)
    comm.setflags(write=False)
    return adj, comm


@dataclass
class InfectiousState:
    health: np.ndarray  # (n * 34,) int8 in {S, I, R}, replica-major
    group: np.ndarray  # (n * 34,) community of each member
    t: int


class InfectiousSimulator:
    """The coupled-unit simulator protocol (docs/simulators.md): 34 units per replica;
    ``step`` takes one action per unit (1 = vaccinate)."""

    feature_names = ("susceptible", "infected", "recovered", "infected_neighbours", "degree")
    n_groups = 2
    group_names = ("community of member 0", "other community")
    n_actions = 2
    baseline = 0

    def __init__(self, infection_probability: float, recovery_probability: float,
                 immunity_loss_probability: float, burn_in: int,
                 initially_infected: tuple[int, ...]):
        self.adj, self.comm = karate_graph()
        self.deg = self.adj.sum(1)
        self.tau, self.rho = float(infection_probability), float(recovery_probability)
        self.loss = float(immunity_loss_probability)
        U = self.adj.shape[0]
        # the probability of a member's one possible transition, indexed by
        # health * (U + 1) + infected neighbours: S -> I with 1 - (1 - tau)^k, I -> R with
        # rho, R -> S with the loss of immunity
        # (float32, as the uniforms are)
        self._p_move = np.concatenate([1.0 - (1.0 - self.tau) ** np.arange(U + 1),
                                       np.full(U + 1, self.rho), np.full(U + 1, self.loss)]
                                      ).astype(np.float32)
        self._adj32 = self.adj.astype(np.float32)  # neighbour counts are exact in float32
        # each member's neighbours as offsets from it, padded with 0 (the member itself:
        # only susceptible members, never infected, read them)
        nbrs = [np.flatnonzero(row) - v for v, row in enumerate(self.adj)]
        self._nbr_offsets = np.zeros((U, max(map(len, nbrs))), dtype=np.intp)
        for v, offsets in enumerate(nbrs):
            self._nbr_offsets[v, :len(offsets)] = offsets
        self.burn_in = int(burn_in)
        self.initial = tuple(int(v) for v in initially_infected)

    @property
    def units(self) -> int:
        return self.adj.shape[0]

    def reset(self, n: int, group: Any, rng: np.random.Generator) -> InfectiousState:
        U = self.units
        h = np.full((n, U), SUS, dtype=np.int8)
        h[:, list(self.initial)] = INF
        s = InfectiousState(health=h.reshape(-1), group=np.tile(self.comm, n), t=0)
        no_vaccine = np.zeros(n * U, dtype=bool)
        for _ in range(self.burn_in):  # ml-fairness-gym's burn-in: steps without treatment
            s = self.step(s, no_vaccine, self.draw_noise(n * U, rng)).state
        return InfectiousState(health=s.health, group=s.group, t=0)

    def observe(self, s: InfectiousState) -> Any:
        h = s.health.reshape(-1, self.units)
        k = (h == INF).astype(np.float64) @ self.adj
        feats = np.stack([(s.health == SUS), (s.health == INF), (s.health == REC),
                          k.reshape(-1), np.tile(self.deg, h.shape[0])], axis=1).astype(np.float64)
        return Observation(group=s.group, features=feats, t=s.t)

    def long_term_gap(self, s: InfectiousState) -> np.ndarray:
        """F-PPO-L's long-term gap per replica (Hu et al.'s code): the distance between the
        two communities' (S, I, R) count vectors, each community a point in R^3."""
        h = s.health.reshape(-1, self.units)
        counts = [np.stack([((h == state) & (self.comm == g)).sum(axis=1)
                            for state in (SUS, INF, REC)], axis=1) for g in (0, 1)]
        return np.sqrt(((counts[0] - counts[1]) ** 2).sum(axis=1).astype(np.float64))

    def draw_noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """One uniform per member: its one possible transition of the step (S -> I,
        I -> R or R -> S, by its health after treatment) happens when the uniform falls
        below that transition's probability (float32: probabilities resolve to 2^-24)."""
        return rng.random(n, dtype=np.float32)

    def step(self, s: InfectiousState, d: Any, noise: Any) -> Any:
        U = self.units
        d = np.asarray(d, dtype=bool).reshape(-1)
        noise = np.asarray(noise).reshape(-1)
        health = s.health
        nxt = np.empty_like(health)
        demand = np.empty(health.shape, dtype=np.int8)
        # few susceptible members (treatment only makes fewer): the sparse path
        sparse = np.count_nonzero(health == SUS) <= _FEW_SUSCEPTIBLE * health.shape[0]
        # blocks of whole replicas, so that every temporary of the step stays in the cache
        block = U * (_SPARSE_BLOCK_REPLICAS if sparse else _BLOCK_REPLICAS)
        for lo in range(0, health.shape[0], block):
            sl = slice(lo, lo + block)
            self._step_block(health[sl], d[sl], noise[sl], nxt[sl], demand[sl], sparse)
        after = (nxt != INF).view(np.int8)
        # ELBERT's supply and demand: vaccines given, members newly infected
        info = {"supply": d.astype(np.int8), "demand": demand}
        return StepResult(state=InfectiousState(health=nxt, group=s.group, t=s.t + 1),
                          reward=after, gain=after - (health != INF).view(np.int8),
                          info=info)

    def _step_block(self, health: np.ndarray, d: np.ndarray, noise: np.ndarray,
                    nxt: np.ndarray, demand: np.ndarray, sparse: bool) -> None:
        """One step of whole replicas: the next health into ``nxt``, the members newly
        infected into ``demand``; ``sparse``: by the sparse path (the same draws)."""
        U = self.units
        treated = (d & (health == SUS)).view(np.int8)  # 1. treatment: S (0) -> R (2)
        h = health + REC * treated
        susceptible = h == SUS
        if not sparse:
            # every member's infected neighbours, by one matrix product per block
            k = ((h == INF).reshape(-1, U).astype(np.float32) @ self._adj32).reshape(-1)
            idx = h.astype(np.int16) * np.int16(U + 1) + k.astype(np.int16)
            move = noise < self._p_move.take(idx)  # 2.-4. infection, recovery, loss
        else:
            # 3.-4. recovery and loss of immunity: one probability each (the table's I and
            # R rows hold one value each)
            move = (h == INF) & (noise < self._p_move[U + 1])
            if self.loss:
                move |= (h == REC) & (noise < self._p_move[2 * (U + 1)])
            sus = susceptible.nonzero()[0]
            if sus.size:  # 2. infection: each susceptible member's infected neighbours
                nbr = sus[:, None] + self._nbr_offsets.take(sus % U, axis=0)
                k = (h.take(nbr) == INF).sum(axis=1)
                move[sus] = noise.take(sus) < self._p_move.take(k)  # S: index k
        np.add(h, move.view(np.int8), out=nxt)  # each code moves to the next: S -> I -> R (-> S)
        if self.loss:  # without loss of immunity no R member moves, and no code reaches 3
            nxt[nxt == 3] = SUS
        np.logical_and(move, susceptible, out=demand.view(bool))


def _prob(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
        raise SystemError_(f"{name}: must be a probability in [0, 1], got {v!r}.")
    return float(v)


def make_infectious(infection_probability: float = INFECTIOUS_DEFAULTS["infection_probability"],
                    recovery_probability: float = INFECTIOUS_DEFAULTS["recovery_probability"],
                    immunity_loss_probability: float = INFECTIOUS_DEFAULTS["immunity_loss_probability"],
                    horizon: int = INFECTIOUS_DEFAULTS["horizon"],
                    burn_in: int = INFECTIOUS_DEFAULTS["burn_in"],
                    initially_infected: Any = INFECTIOUS_DEFAULTS["initially_infected"],
                    *, id: str = "infectious-1") -> Any:
    """The ``infectious-1`` system (module docstring); ``infectious-harder`` adds loss of
    immunity."""
    tau = _prob("infection_probability", infection_probability)
    rho = _prob("recovery_probability", recovery_probability)
    loss = _prob("immunity_loss_probability", immunity_loss_probability)
    burn_in = check_int("burn_in", burn_in, 0, SystemError_)
    horizon = check_int("horizon", horizon, 1, SystemError_)
    # member indices as given: int(0.7) would infect member 0, int(True) member 1
    try:
        init = tuple(initially_infected)
    except TypeError:
        init = ()
    if not init or any(isinstance(v, bool) or not isinstance(v, (int, np.integer))
                       or not 0 <= v < 34 for v in init):
        raise SystemError_(f"initially_infected: must be member indices in [0, 34), got "
                           f"{initially_infected!r}.")
    _, comm = karate_graph()
    weights = np.bincount(comm, minlength=2) / 34.0
    return System(
        id=id,
        groups=InfectiousSimulator.group_names,
        decisions=DecisionSet(labels=("no vaccine", "vaccinate"), baseline=0, budget=1),
        features=InfectiousSimulator.feature_names,
        gain=Gain("health change", "members not infected",
                  "1[not infected] after the step minus before: -1 on infection, +1 on recovery"),
        reward="members not infected after the step (share of healthy member-steps)",
        horizon=int(horizon),
        structure=CausalStructure(exogenous={}, s_to_x0=True, s_to_transition=True),
        simulator=lambda: InfectiousSimulator(tau, rho, loss, burn_in, init),
        group_weights=weights,
        units_per_replica=34,
        params={"infection_probability": tau, "recovery_probability": rho,
                "immunity_loss_probability": loss, "horizon": int(horizon),
                "burn_in": burn_in, "initially_infected": [int(v) for v in init]},
        description="SIR epidemic on the karate-club graph, one vaccine per step "
                    "(ml-fairness-gym; seeds 000, 001)",
        train_defaults=INFECTIOUS_TRAIN_DEFAULTS.get(id, INFECTIOUS_TRAIN_DEFAULTS["infectious-1"]),
    )


def make_infectious_harder(**kw: Any) -> Any:
    """``infectious-harder`` (ELBERT): recovered members lose immunity with probability 0.2."""
    kw.setdefault("immunity_loss_probability",
                  INFECTIOUS_DEFAULTS["harder_immunity_loss_probability"])
    return make_infectious(**kw, id="infectious-harder")
