"""Judge the seeds' headline claims on their own environments, on our runs, with statistics.

Usage (from the repository root; about 15 minutes on 2 cores with the default budget):

    OMP_NUM_THREADS=1 python reports/reproduce_seeds.py --jobs 2

Options: ``--budget default|paper`` (``paper``: the seeds' published training lengths,
hours), ``--seeds S``, ``--iterations N``, ``--eval-n N`` (override the budget), ``--jobs N``
/ ``--backend ray`` (training runs as tasks of :func:`causalfair.train.sweep.train_many`, the
same numbers as one process; evaluations and seed 002's agents in N local processes),
``--quick`` (a smoke run: infectious-1 and attention-central on 20-step episodes, 2 seeds,
2 iterations, tiny evaluations and agents, written to /tmp/causalfair-seeds-quick),
``--systems a,b`` (a subset of the systems, e.g. ``--systems attention-central`` to time one
cell; seed 002's part runs when ``replicator-binding`` is named), ``--out``.

Seed 001's attention claims run on its published setup, ``attention-central`` (one central
policy over all sites, 200-step episodes; ``CELLS``); seed 000's attention-harder claims
keep the per-site policy. Each verdict names the system it ran on (``system``,
``system_params``).

Per cell (system, method) it trains every seed with the method's published hyper-parameters
(``System.train_defaults``), then evaluates each trained policy with the Monte Carlo engine
(one fixed evaluation seed): the reward (``utility``), the causal decomposition, ELBERT's
benefit-rate bias (seed 000), the long-term gap (seed 001) and Lambda. Each claim is judged by
:func:`causalfair.stats.judge`: a two-sided Welch test of the method against each competitor
over the training seeds, Holm-corrected, with effect size and interval; policies that take the
same actions (total-variation distance of their action probabilities, summed over a replica's
units and averaged over the audited states, at most :data:`SAME_ACTIONS_TOL`) are *indistinguishable*, and a fairness claim counts
only policies whose utility is not collapsed (:func:`causalfair.stats.collapse_floor` over
the better of the uniform and the baseline policy). Writes ``reports/seeds/``:

- ``runs.csv``: one row per (system, method, seed): training wall time and the evaluation;
- ``table.csv`` / ``table.md``: mean and 95% t-interval over seeds per system and method;
- ``replicator_runs.csv``: seed 002's part (L-UCBFair, R-TD3, Myopic, Myopic-Fair);
- ``verdicts.json``: one entry per claim (the claim as its paper states it, the seed paper,
  n_seeds, effect, ci, p_value, utility, verdict and every comparison);
- ``README.md``: the command, the machine, wall times, each claim with its verdict.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import pandas as pd

from causalfair._io import atomic_write_text
from causalfair.stats import collapse_floor, judge, verdict_table
from causalfair.train.sweep import t_interval

#: system id -> (system parameters, methods trained on it). Each system carries the methods
#: its claims compare (PPO = seed 000's G-PPO). Seed 001's attention claims run on its
#: published setup, ``attention-central`` (one central policy over all sites: the 8-step
#: history of every site, a logit in {-3, ..., 3} per site, softmax and greedy placement;
#: 200-step episodes, causalfair/systems/attention.py) with its own per-site increases
#: (0.2, 0.26, 0.4, 0.6, 0.3), the variant its Fig. 3 uses. attention-harder (seed 000)
#: keeps the per-site policy.
CELLS: dict[str, tuple[dict, tuple[str, ...]]] = {
    "attention-central": ({"increase": "f-ppo"}, ("ppo", "a-ppo", "f-ppo-l")),
    "attention-harder": ({}, ("ppo", "a-ppo", "elbert-po")),
    "infectious-1": ({}, ("ppo", "a-ppo", "f-ppo-l", "elbert-po")),
    "infectious-harder": ({}, ("ppo", "a-ppo", "elbert-po")),
}
#: units per unit-step: 5 sites per attention world, 34 members per contact graph
UNIT_SIZE = {"attention": 5, "infectious": 34}
#: the seeds' training lengths in environment steps (seed 000, ELBERT: original attention
#: 2e7 (also the central setup's), original infectious 1e7, the harder ones 5e6 each; seed
#: 001's are shorter)
PAPER_STEPS = {"attention-central": 2e7, "attention-harder": 5e6, "infectious-1": 1e7,
               "infectious-harder": 5e6}
#: budgets: ``default`` fits the regeneration of reports/seeds and reports/paper in 30
#: minutes on 2 cores; ``paper`` trains as long as the seeds did (hours). ``worlds``:
#: replicas per iteration, by system id or else by kind (the id's first word); the central
#: system's 200-step episodes make 32 worlds 6,400 world-steps per iteration (the per-site
#: cells: 128 x 20 = 2,560)
BUDGETS = {
    "default": {"seeds": 10, "iterations": 20,
                "worlds": {"attention": 128, "attention-central": 32, "infectious": 32},
                "eval_n": 200, "lucb_episodes": 300, "rtd3_steps": 6000},
    "paper": {"seeds": 10, "iterations": None,
              "worlds": {"attention": 256, "attention-central": 64, "infectious": 64},
              "eval_n": 1000, "lucb_episodes": 2000, "rtd3_steps": 200_000},
}
#: units per group of the trainer's own end-of-run audit (TrainConfig.audit_n): its numbers
#: are not used (every trained policy is evaluated below) and, with no constraints and the
#: audit after the last update, it changes no weight; the default 2,000 cost ~1.5 s a run
TRAIN_AUDIT_N = 10
METRICS = ("utility", "elbert_bias", "allocation_parity", "long_term_gap", "Lambda", "C", "DPE",
           "IPE", "SPE")
#: replicas of the rollout that measures seed 001's allocation parity (Eq. 9; attention)
EQ9_WORLDS = 200
EVAL_SEED = 20261125
#: two policies take the same actions when the mean total-variation distance between their
#: action probabilities over the audited states is at most this, on every training seed
SAME_ACTIONS_TOL = 0.02
#: replicas (worlds, graphs) of the rollout whose states the same-actions rule compares on
AUDIT_WORLDS = 16
REPLICATOR = "replicator-binding"  # seed 002's DP constraint binds there (replicator.py)
#: the reference policies of the collapse floor (the better of the two): the baseline
#: (``never``) and a uniform one (infectious: each member vaccinated with probability just
#: under 1/34, the one-vaccine-per-graph budget spread evenly)
REFERENCE = {"attention": ("never", "uniform"), "infectious": ("never", "random:0.0294117")}


def worlds_for(sid: str, budget: dict) -> int:
    """Replicas per training iteration: the budget's number for the system, else its kind's."""
    w = budget["worlds"]
    return int(w.get(sid, w[sid.split("-")[0]]))


def horizon_of(sid: str, params: dict) -> int:
    """The episode length the system trains and is audited on."""
    import causalfair as cf

    return int(cf.systems.make(sid, **params).horizon)


def iterations_for(sid: str, budget: dict, cells=CELLS) -> int:
    if budget["iterations"] is not None:
        return int(budget["iterations"])
    return math.ceil(PAPER_STEPS[sid] / (worlds_for(sid, budget)
                                         * horizon_of(sid, cells[sid][0])))


def configs(seeds, budget: dict, cells=CELLS):
    from causalfair.train import TrainConfig

    out = []
    for sid, (params, algos) in cells.items():
        kind = sid.split("-")[0]
        iters = iterations_for(sid, budget, cells)
        for algo in algos:
            extra = {"appo_gap": "after"} if algo == "a-ppo" else {}  # both published codes
            # seed 001's code: F-PPO-L's long-term signal from the observed incidents (the
            # trained policy is evaluated on the cell's system like every other)
            train_params = {**params, **({"long_gap": "observed"} if algo == "f-ppo-l"
                                         and kind == "attention" else {})}
            for seed in seeds:
                out.append(TrainConfig(algo=algo, system=sid, system_params=train_params,
                                       seed=seed, iterations=iters, eval_every=iters,
                                       n_individuals=worlds_for(sid, budget) * UNIT_SIZE[kind],
                                       audit_n=TRAIN_AUDIT_N, **extra))
    return out


def rollout(system, policy, worlds: int):
    """A rollout of ``policy`` over the horizon from ``worlds`` replicas (fixed seed): its
    observations, and on attention systems the units each site got per step (T, worlds, K)."""
    from causalfair.policies.core import action_probs

    sim = system.make_simulator()
    rng = np.random.default_rng(EVAL_SEED)
    state = sim.reset(worlds, np.arange(worlds) % sim.n_groups, rng)
    states, attention = [], []
    for _ in range(system.horizon):
        obs = sim.observe(state)
        states.append(obs)
        cum = np.cumsum(action_probs(policy, obs, system.n_actions), 1)
        acts = np.minimum((rng.random(len(obs))[:, None] > cum).sum(1), system.n_actions - 1)
        state = sim.step(state, acts, sim.draw_noise(len(obs), rng)).state
        if hasattr(state, "attention"):
            attention.append(np.asarray(state.attention, dtype=np.float64).reshape(worlds, -1))
    return states, (np.stack(attention) if attention else None)


def audited_states(system, worlds: int = AUDIT_WORLDS):
    """The states on which two trained policies' actions are compared: a rollout of the
    system's first reference policy (``REFERENCE``)."""
    from causalfair.policies.core import parse_policy

    return rollout(system, parse_policy(REFERENCE[system.id.split("-")[0]][0], system),
                   worlds)[0]


def _probs(policy, states, n_actions: int) -> np.ndarray:
    """Action probabilities on the audited states, (steps x replicas, units per replica, A)
    (the observations are replica-major)."""
    from causalfair.policies.core import action_probs

    p = np.stack([np.asarray(action_probs(policy, o, n_actions), dtype=np.float64)
                  for o in states])
    return p.reshape(p.shape[0] * AUDIT_WORLDS, -1, n_actions)


def evaluate(job: tuple) -> dict:
    """The trained policy's Monte Carlo audit on its system (fixed evaluation seed), and its
    action probabilities on the audited states (``probs``)."""
    sid, params, checkpoint, n = job
    import causalfair as cf
    from causalfair.engines.benefit_mc import benefit_fairness_mc

    system = cf.systems.make(sid, **params)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "checkpoint.pt"
        path.write_bytes(checkpoint)
        pol, _ = cf.load_checkpoint(path)
    d = cf.decompose_mc(system, pol, n=n, seed=EVAL_SEED)
    row = {k: float(getattr(d, k)) for k in ("C", "DPE", "IPE", "SPE")}
    row.update({f"{k}_se": float(d.se[k]) for k in ("C", "DPE", "IPE", "SPE")})
    row["utility"], row["utility_se"] = float(d.total_utility), float(d.se["utility"])
    for k in ("elbert_bias", "long_term_gap"):
        row[k] = float(d.notions.get(k, np.nan))
        row[f"{k}_se"] = float(d.notions.get(f"{k}_se", np.nan))
    # Lambda pairs individuals by their features: none on the central system (its
    # observation is the whole history, causalfair/systems/attention.py)
    row["Lambda"] = math.nan if system.features is None else float(benefit_fairness_mc(
        system, pol, n=n, seed=EVAL_SEED, n_boot=0, pair=tuple(d.pair)).Lambda)
    row["probs"] = _probs(pol, audited_states(system), system.n_actions)
    row["allocation_parity"] = math.nan
    if sid.startswith("attention"):  # seed 001's short-term fairness (Eq. 9)
        from causalfair.systems.attention import allocation_parity

        att = rollout(system, pol, EQ9_WORLDS)[1]
        row["allocation_parity"] = float(allocation_parity(att, system.make_simulator().units).mean())
    return row


def reference_utility(job: tuple) -> float:
    """The better of the reference policies' utilities on a system (``REFERENCE``)."""
    sid, params, n = job
    import causalfair as cf
    from causalfair.policies.core import parse_policy

    system = cf.systems.make(sid, **params)
    return max(float(cf.decompose_mc(system, parse_policy(p, system), n=n,
                                     seed=EVAL_SEED).total_utility) for p in REFERENCE[sid.split("-")[0]])


def pmap(fn, items: list, jobs: int) -> list:
    """``fn`` over ``items``, in ``jobs`` fresh local processes when jobs > 1."""
    if jobs <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as ex:
        return list(ex.map(fn, items))


def table(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (sid, algo), grp in runs.groupby(["system", "algo"], sort=False):
        row = {"system": sid, "algo": algo, "seeds": len(grp)}
        for m in METRICS:
            mean, lo, hi = t_interval(grp[m])
            row.update({m: mean, f"{m}_lo": lo, f"{m}_hi": hi})
        rows.append(row)
    return pd.DataFrame(rows)


def _tv(p: np.ndarray, q: np.ndarray) -> float:
    d = 0.5 * np.abs(p - q).sum(-1)
    return float((d if d.ndim == 1 else d.sum(-1)).mean())


def action_gaps(probs: dict, sid: str, method: str, others) -> dict[str, float]:
    """Per competitor: the largest over training seeds of the total-variation distance
    between the method's and the competitor's action probabilities, summed over the units of
    a replica (a budget of one vaccine per graph spreads each unit's probability thin) and
    averaged over the audited states. ``probs``: (states, units per replica, A) arrays, or
    (states, A) with one unit per replica."""
    out = {}
    for o in others:
        gaps = [_tv(probs[(sid, method, s)], probs[(sid, o, s)])
                for (sy, a, s) in probs if sy == sid and a == method and (sid, o, s) in probs]
        out[o] = float(max(gaps)) if gaps else math.nan
    return out


#: (seed paper, system, method, competitors, metric, lower is better, fairness claim, the
#: claim as its paper states it, where)
CLAIMS = (
    ("000", "infectious-harder", "elbert-po", ("ppo", "a-ppo"), "elbert_bias", True, True,
     "(2) Infectious. ELBERT-PO achieves the lowest bias of 0.01 among all methods.",
     "Sec. 5, Fig. 4"),
    ("000", "infectious-harder", "elbert-po", ("a-ppo",), "utility", False, False,
     "Furthermore, ELBERT-PO obtains the same reward as G-PPO, higher than other bias "
     "mitigation baselines.", "Sec. 5, Fig. 4"),
    ("000", "attention-harder", "elbert-po", ("ppo", "a-ppo"), "elbert_bias", True, True,
     "(3) Allocation. ELBERT-PO achieves the lowest bias and the highest reward of among all "
     "methods. [the bias]", "Sec. 5, Fig. 4"),
    ("000", "attention-harder", "elbert-po", ("ppo", "a-ppo"), "utility", False, False,
     "(3) Allocation. ELBERT-PO achieves the lowest bias and the highest reward of among all "
     "methods. [the reward]", "Sec. 5, Fig. 4"),
    ("000", "infectious-1", "elbert-po", ("ppo", "a-ppo"), "utility", False, False,
     "(1) Infectious (original). ELBERT-PO achieves the highest reward among all baselines, "
     "including G-PPO.", "App. D.3, Fig. 6"),
    ("001", "attention-central", "f-ppo-l", ("ppo", "a-ppo"), "long_term_gap", True, True,
     "Our F-PPO achieves the best long-term fairness performance while maintaining relatively "
     "low short-term bias values and high rewards. [tested: F-PPO-L, its long-term part]",
     "Sec. 6, Fig. 3"),
    ("001", "attention-central", "a-ppo", ("ppo", "f-ppo-l"), "allocation_parity", True,
     True,
     "As a comparison, although A-PPO produces the best short-term fairness performance, its "
     "long-term fairness performance and utility are among the worst.", "Sec. 6, Fig. 3"),
    ("001", "infectious-1", "f-ppo-l", ("ppo", "a-ppo"), "long_term_gap", True, True,
     "F-PPO achieves the best performance in terms of long-term fairness [tested: F-PPO-L]",
     "Sec. 6, Fig. 4"),
    ("001", "infectious-1", "a-ppo", ("ppo", "f-ppo-l"), "elbert_bias", True, True,
     "A-PPO achieves the best performance in terms of short-term fairness, but produces the "
     "worst performance in gaining rewards.", "Sec. 6, Fig. 4"),
)


def verdicts(runs: pd.DataFrame, probs: dict, ref_util: dict, cells=CELLS) -> list[dict]:
    """One entry per claim of ``CLAIMS``, each naming the system it ran on (``system``, with
    the parameters it was made with, ``system_params``)."""
    out = []
    for seed_paper, sid, method, comps, metric, lower, fair, text, where in CLAIMS:
        names = (method, *comps)
        sub = runs[runs.system == sid]
        where_run = {"system": sid,
                     "system_params": dict(cells.get(sid, CELLS.get(sid, ({},)))[0])}
        if sub.empty or not set(names) <= set(sub.algo) or \
                sub.groupby("algo").size().min() < 2:
            out.append({"claim": text, "seed_paper": seed_paper, "where": where, **where_run,
                        "verdict": "not tested", "reason": "not run, or fewer than 2 seeds"})
            continue
        vals = {a: sub[sub.algo == a].sort_values("seed")[metric].tolist() for a in names}
        util = {a: sub[sub.algo == a].sort_values("seed")["utility"].tolist() for a in names}
        best = max(float(np.mean(u)) for u in util.values())
        floor = collapse_floor(ref_util[sid], best)
        v = judge(vals, method, lower=lower, utility=util, claim=text, metric=metric,
                  fairness=fair, utility_floor=floor,
                  action_gap=action_gaps(probs, sid, method, comps), tol=SAME_ACTIONS_TOL)
        out.append({"claim": text, "seed_paper": seed_paper, "where": where, **where_run,
                    "reference_utility": ref_util[sid], **v.to_dict()})
    return out


# ------------------------------------------------------------------ seed 002 (replicator)
def replicator_seed(job: tuple) -> list[dict]:
    """L-UCBFair, R-TD3 and the myopic baselines for one seed on ``REPLICATOR`` (task tp,
    DP constraint c = H - 1.5): the episode from the system's q0, the decomposition, and for
    the learners the training regret against the best feasible constant thresholds from each
    episode's start (ours: a lower bound on V*) and the violation."""
    seed, episodes, steps = job
    import causalfair as cf
    from causalfair.train import population as P

    system = cf.systems.make(REPLICATOR)
    env = P.PopulationEnv(system)
    c = system.horizon - 1.5
    agents = [P.train_lucbfair(system, P.LUCBFairConfig(episodes=episodes, alpha="paper",
                                                        phi_samples=min(20_000, 100 * episodes),
                                                        seed=seed)),
              P.train_rtd3(system, P.RTD3Config(steps=steps, learning_starts=min(100, steps // 5),
                                                seed=seed)),
              P.myopic(env), P.myopic(env, 0.5)]
    rows = []
    for ag in agents:
        ev = P.episode_values(env, ag)
        d = cf.decompose_mc(system, P.audit_policy(env, ag), n=2, seed=EVAL_SEED)
        row = {"algo": ag.name, "seed": seed, "V_r": float(ev["V_r"][0]),
               "V_g": float(ev["V_g"][0]), "violation": max(0.0, c - float(ev["V_g"][0])),
               "q1_final": float(ev["q_final"][0, 0]), "q2_final": float(ev["q_final"][0, 1]),
               **{k: float(getattr(d, k)) for k in ("C", "DPE", "IPE", "SPE")}}
        if ag.history:
            h = pd.DataFrame(ag.history)
            ref = P.best_constant(env, c, h[["q1", "q2"]].to_numpy())["V_r"]
            per = ref - h["V_r"].to_numpy()
            _, drtn = P.regret_and_violation(h["V_r"], h["V_g"], 0.0, c)
            third = max(1, len(per) // 3)
            row.update({"episodes": len(h), "regret_per_episode": float(per.mean()),
                        "regret_first_third": float(per[:third].mean()),
                        "regret_last_third": float(per[-third:].mean()),
                        "drtn_per_episode": float(drtn[-1] / len(h))})
        rows.append(row)
    return rows


REPLICATOR_CLAIMS = (
    ("l-ucbfair", "q_min", ("myopic", "myopic-fair(0.5)"),
     "the baseline, greedy policies drive the system (indicated by streamlines) to promote low "
     "qualification rates in each group (lower left corner of each plot), while the RL agents "
     "are able to drive the system to more favorable equilibria characterized by higher "
     "qualification rates (upper right). [L-UCBFair]", "App. D.2, Table 2"),
    ("r-td3", "q_min", ("myopic", "myopic-fair(0.5)"),
     "the baseline, greedy policies drive the system (indicated by streamlines) to promote low "
     "qualification rates in each group (lower left corner of each plot), while the RL agents "
     "are able to drive the system to more favorable equilibria characterized by higher "
     "qualification rates (upper right). [R-TD3]", "App. D.2, Table 2"),
)


def replicator_verdicts(runs: pd.DataFrame) -> list[dict]:
    """Seed 002's claims: the qualification the RL agents reach (the smaller final q of the
    two groups) against the myopic baselines, and L-UCBFair's regret falling over training
    (last third of the episodes against the first third, per seed)."""
    out = []
    runs = runs.assign(q_min=runs[["q1_final", "q2_final"]].min(axis=1))
    util = {a: g.sort_values("seed")["V_r"].tolist() for a, g in runs.groupby("algo")}
    for method, metric, comps, text, where in REPLICATOR_CLAIMS:
        vals = {a: runs[runs.algo == a].sort_values("seed")[metric].tolist()
                for a in (method, *comps)}
        v = judge(vals, method, lower=False, utility={a: util[a] for a in vals}, claim=text,
                  metric=metric)
        out.append({"claim": text, "seed_paper": "002", "where": where, "system": REPLICATOR,
                    "system_params": {}, **v.to_dict()})
    lu = runs[runs.algo == "l-ucbfair"].sort_values("seed")
    v = judge({"last third": lu.regret_last_third.tolist(),
               "first third": lu.regret_first_third.tolist()}, "last third", lower=True,
              utility={"last third": lu.V_r.tolist(), "first third": lu.V_r.tolist()},
              metric="regret per episode",
              claim="We emphasize that both loss and disparity decrease in time, as required "
              "for the sublinear regret and distortion guaranteed by (Theorem 3.3).")
    out.append({"claim": v.claim, "seed_paper": "002", "where": "Sec. 5, Fig. 3",
                "system": REPLICATOR, "system_params": {}, **v.to_dict()})
    return out


# ------------------------------------------------------------------ report
def _markdown(df: pd.DataFrame) -> list[str]:
    """A DataFrame (index = first column) as markdown lines, numbers to 4 significant digits."""
    cols = [df.index.name or ""] + list(df.columns)
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for idx, r in df.iterrows():
        out.append(f"| {idx} | " + " | ".join(
            "" if pd.isna(v) else f"{v:.4g}" for v in r.to_numpy(dtype=float)) + " |")
    return out


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (the workers)."""
    import resource

    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


def machine() -> str:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"numpy {np.__version__}, torch {torch.__version__}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", choices=tuple(BUDGETS), default="default")
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--eval-n", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--backend", default=None, choices=(None, "process", "ray"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--systems", default=None,
                    help=f"comma-separated subset of {', '.join((*CELLS, REPLICATOR))} "
                         "(default: all)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    # the counts before any work: --eval-n 0 failed only after every training run
    for opt, val, least in (("--iterations", args.iterations, 1), ("--seeds", args.seeds, 1),
                            ("--eval-n", args.eval_n, 2), ("--jobs", args.jobs, 1)):
        if val is not None and val < least:
            ap.error(f"{opt}: must be an integer >= {least}, got {val}")
    budget, cells = {**BUDGETS[args.budget]}, CELLS
    if args.quick:  # seed 001's central attention on 20-step episodes, to stay a smoke run
        cells = {"infectious-1": CELLS["infectious-1"], "attention-central": (
            {**CELLS["attention-central"][0], "horizon": 20}, CELLS["attention-central"][1])}
        budget.update(seeds=2, iterations=2, eval_n=50, lucb_episodes=6, rtd3_steps=120,
                      worlds={"attention": 16, "infectious": 4})
    with_replicator = True
    if args.systems is not None:
        chosen = [x.strip() for x in args.systems.split(",") if x.strip()]
        bad = sorted(set(chosen) - {*cells, REPLICATOR})
        if bad or not set(chosen) & set(cells):
            ap.error(f"--systems: bad value {args.systems!r}; use a comma-separated subset "
                     f"of {', '.join((*cells, REPLICATOR))} with at least one of "
                     f"{', '.join(cells)}")
        cells = {sid: cells[sid] for sid in cells if sid in chosen}
        with_replicator = REPLICATOR in chosen
    for key, val in (("seeds", args.seeds), ("iterations", args.iterations),
                     ("eval_n", args.eval_n)):
        if val is not None:
            budget[key] = val
    seeds = list(range(budget["seeds"]))
    out = Path(args.out or ("/tmp/causalfair-seeds-quick" if args.quick else "reports/seeds"))
    from causalfair.backends import make_backend
    from causalfair.train.sweep import train_many

    t0, cpu0 = time.perf_counter(), cpu_seconds()
    cfgs = configs(seeds, budget, cells)
    backend = make_backend(args.jobs, args.backend) if (args.jobs > 1 or args.backend) else None
    results = train_many(cfgs, backend=backend)
    t_train = time.perf_counter() - t0
    keep = [(c, r) for c, r in zip(cfgs, results, strict=True) if isinstance(r, dict)]
    for cfg, res in zip(cfgs, results, strict=True):
        if not isinstance(res, dict):
            print(f"run {cfg.system} {cfg.algo} seed {cfg.seed} failed: {res}", file=sys.stderr)
    t_eval = time.perf_counter()
    evals = pmap(evaluate, [(c.system, cells[c.system][0], r["files"]["checkpoint.pt"],
                             budget["eval_n"]) for c, r in keep], args.jobs)
    ref = dict(zip(cells, pmap(reference_utility, [(sid, p, budget["eval_n"]) for sid, (p, _)
                                                   in cells.items()], args.jobs), strict=True))
    rows, probs = [], {}
    for (cfg, res), ev in zip(keep, evals, strict=True):
        probs[(cfg.system, cfg.algo, cfg.seed)] = ev.pop("probs")
        rows.append({"system": cfg.system, "algo": cfg.algo, "seed": cfg.seed,
                     "iterations": cfg.iterations, "train_s": round(res["wall_s"], 2), **ev})
    t_eval = time.perf_counter() - t_eval
    t_rep = time.perf_counter()
    rep_rows = pmap(replicator_seed, [(s, budget["lucb_episodes"], budget["rtd3_steps"])
                                      for s in seeds] if with_replicator else [], args.jobs)
    rep_runs = pd.DataFrame([r for rows_ in rep_rows for r in rows_])
    t_rep = time.perf_counter() - t_rep
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    runs = pd.DataFrame(rows)
    tab = table(runs)
    entries = verdicts(runs, probs, ref, cells) + (replicator_verdicts(rep_runs)
                                                    if with_replicator else [])
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "runs.csv", runs.to_csv(index=False, float_format="%.12g"))
    atomic_write_text(out / "table.csv", tab.to_csv(index=False, float_format="%.6g"))
    if with_replicator:
        atomic_write_text(out / "replicator_runs.csv",
                          rep_runs.to_csv(index=False, float_format="%.12g"))
    atomic_write_text(out / "verdicts.json", json.dumps(entries, indent=1) + "\n")
    md = ["| system | algo | seeds | " + " | ".join(METRICS) + " |",
          "|---|---|---|" + "---|" * len(METRICS)]
    for _, r in tab.iterrows():
        md.append(f"| {r.system} | {r.algo} | {r.seeds} | " + " | ".join(
            f"{r[m]:.4g} [{r[f'{m}_lo']:.3g}, {r[f'{m}_hi']:.3g}]" for m in METRICS) + " |")
    atomic_write_text(out / "table.md", "\n".join(md) + "\n")
    rep_tab = (rep_runs.drop(columns=["seed"]).groupby("algo", sort=False).mean()
               if with_replicator else None)
    cmd = ("OMP_NUM_THREADS=1 python reports/reproduce_seeds.py "
           + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    counts = pd.Series([e["verdict"] for e in entries]).value_counts().to_dict()
    readme = readme_text(cmd, budget, args.budget, wall, cpu, t_train, t_eval, t_rep, len(cfgs),
                         entries, counts, md, rep_tab, cells)
    atomic_write_text(out / "README.md", "\n".join(readme) + "\n")
    print(f"wrote {out}/ ({len(rows)} runs, {wall / 60:.1f} min)")
    for e in entries:
        print(f"  [{e['verdict']}] {e['seed_paper']} {e['system']}: {e['claim'][:90]}")
    return 0 if len(rows) == len(cfgs) else 1


def readme_text(cmd, budget, name, wall, cpu, t_train, t_eval, t_rep, n_runs, entries, counts, md,
                rep_tab, cells) -> list[str]:
    def unit(sid: str) -> str:
        return "graphs" if sid.startswith("infectious") else "worlds"

    per = ", ".join(f"{sid} {iterations_for(sid, budget, cells)} x {worlds_for(sid, budget)} "
                    f"{unit(sid)} x {horizon_of(sid, p)} steps" for sid, (p, _) in cells.items())
    central = "attention-central" in cells
    if central:
        c_t = horizon_of("attention-central", cells["attention-central"][0])
        c_steps = (iterations_for("attention-central", budget, cells)
                   * worlds_for("attention-central", budget) * c_t)
    setups = (
        "Setups: seed 001's attention claims run on `attention-central`, its published setup "
        "(one central policy over all sites: every site reads the 8-step history of all "
        "sites and its own index and emits a logit in {-3, ..., 3}; softmax and the greedy "
        "placement of the published code; seed 001's per-site increases (0.2, 0.26, 0.4, 0.6, "
        "0.3); causalfair/systems/attention.py); seed 000's attention-harder claims keep our "
        "per-site policy (each site picks a priority from its own last step), a departure. "
        "Every verdict names its system (`system`, `system_params` in verdicts.json).")
    central_dep = (
        "seed 001's central setup departs from the published one in four ways: the logits "
        "lie on a 7-point grid (continuous in the published Box(-3, 3)^5; one step changes a "
        f"site's share by a factor e); episodes last {c_t} "
        "steps (published: 1,000; at 200 the dynamics order hand-written allocations as at "
        "1,000, docs/simulators.md), so allocation parity is taken over the whole episode, "
        "shorter than its 300-step window; its observation's delta sums seen and occurred "
        "over the 8 history steps (published: the episode so far, or 300 steps) and its "
        "columns go site by site (published: all sites' seen, then occurred, ...; "
        "docs/simulators.md); and the budget above is "
        f"{c_steps:,} "
        "environment steps per run (a central run costs about 5x a per-site one, its cost "
        "being mostly per step; 20 iterations of 32 worlds keep the default run near 15 "
        "minutes), against the 2e7 of `--budget paper`, so the policies are far from "
        "converged and every verdict on it says \"at this budget\". It has no "
        "Lambda (its 165-column observation pairs no individuals). " if central else "")
    rep_part = [] if rep_tab is None else [
        f"## Seed 002 on {REPLICATOR}",
        "",
        "Task tp with the demographic-parity constraint V_g >= H - 1.5, H = 15 (seed 002's "
        "code) on replicator-binding (replicator-1's U, q0 = (0.9, 0.1): the constraint binds, "
        f"causalfair/systems/replicator.py). L-UCBFair: {budget['lucb_episodes']} episodes from "
        "random starts with the paper's softmax temperature (`alpha=\"paper\"`); R-TD3: "
        f"{budget['rtd3_steps']} environment steps (the paper: 2,000 iterations and 200,000 "
        "steps); Myopic and Myopic-Fair (lambda = 0.5) are deterministic. Evaluation: one "
        "episode from q0. Regret is against the best feasible constant thresholds from each "
        "episode's start (ours: V* has no closed form). Means over seeds "
        "(replicator_runs.csv has every run):",
        "",
        "",
        *_markdown(rep_tab),
        "",
    ]
    return [
        "# The seeds' claims on their environments, judged on our runs",
        "",
        f"Generated by `{cmd}` (reports/reproduce_seeds.py, budget `{name}`) on "
        f"{time.strftime('%Y-%m-%d')}. Machine: {machine()}. Wall time: {wall / 60:.1f} min "
        f"({t_train / 60:.1f} min training {n_runs} runs, {t_eval / 60:.1f} min evaluating, "
        f"{t_rep / 60:.1f} min for seed 002's replicator part); CPU time {cpu / 60:.1f} min "
        "over all its processes (the wall time also depends on what else the machine runs).",
        "",
        f"Every cell: {budget['seeds']} training seeds; per system, iterations x replicas per "
        f"iteration x episode length: {per}; each method with its seed's published "
        "hyper-parameters (`System.train_defaults`, docs/training.md); A-PPO with the fairness "
        "gap after the step (`appo_gap=after`, both published codes); F-PPO-L on attention "
        "trains on the observed incidents (`long_gap=observed`, seed 001's code). The `paper` "
        "budget (`--budget paper`) trains as long as seed 000 did (attention 2e7, infectious-1 "
        "1e7, the harder ones 5e6 environment steps; hours on this machine). Each trained "
        f"policy is evaluated by the Monte Carlo engine on {budget['eval_n']} replicas (seed "
        f"{EVAL_SEED}): `utility` (mean per-unit reward), `elbert_bias` (seed 000's "
        "benefit-rate bias: max - min over groups of E[supply] / E[demand]), `long_term_gap` "
        "(seed 001: attention max_k |lambda_k - mean lambda| at the end of the episode, "
        "infectious the distance between the communities' (S, I, R) counts), `Lambda` and "
        "C = DPE + IPE + SPE.",
        "",
        setups,
        "",
        "## Claims",
        "",
        f"Verdicts: {', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}.",
        "",
        "Rule (causalfair/stats.py): the method against each competitor its paper compares it "
        "with, a two-sided Welch test over the training seeds, Holm-corrected across the "
        "competitors at alpha 0.05. *supported*: significantly better than every competitor; "
        "*refuted*: some competitor significantly better; *indistinguishable*: some competitor "
        "takes the same actions (the total-variation distance of the action probabilities, "
        "summed over a replica's units and averaged "
        "over the states of a rollout of the baseline (no-action) policy, at most "
        f"{SAME_ACTIONS_TOL} on every seed, or "
        "identical per-seed numbers); *inconclusive*: otherwise. A fairness claim counts only "
        "policies whose mean utility is at least the better of the uniform and the baseline "
        "policy's utility plus a quarter of the best compared policy's gain over it; collapsed "
        "policies are listed and not counted (a collapsed method gets *inconclusive*). The "
        "effect is mean(method) - mean(competitor) in the metric's units, for the deciding "
        "competitor. verdicts.json has every comparison (t, df, raw and Holm p, Hedges' g, the "
        "action gap). Our budget is far below the papers' (see above), so a refutation says "
        "\"not at this budget\", not that the paper is wrong.",
        "",
        "Departures that remain: " + central_dep + "Seed 001's claims are about F-PPO (with "
        "massaging), ours test F-PPO-L (F-PPO's massaging exists only on the lending "
        "settings); its short-term fairness is its Eq. 9 allocation parity on attention "
        f"(`allocation_parity`: max_k |share of the units site k got - 1/K|, a {EQ9_WORLDS}-"
        "replica rollout of the trained policy) and ELBERT's benefit-rate bias on infectious "
        "(its epidemic metric is not ours); seed 000's attention-harder claims are judged on "
        "the per-site policy (its central setup, `attention-central` with `harder=true`, is "
        "not in this budget); seed 000's R-PPO is not ours.",
        "",
        *verdict_table(entries),
        "",
        "## Results",
        "",
        *md,
        "",
        *rep_part,
        "## The decomposition, system by system",
        "",
        "- attention: IPE is 0 to rounding for every policy (the no-attention gain does not "
        "depend on the state with the published parameters; docs/simulators.md section 7); "
        "the disparity between sites is what the allocation does and what the sites' own "
        "increases do (SPE).",
        "- infectious: SPE is the no-vaccine epidemic's disparity (member 0 starts infected "
        "in community 0); DPE is what this step's vaccine does, IPE what earlier vaccines did "
        "through the graph (herd effects between neighbours).",
        "- replicator: IPE is what earlier thresholds did through the qualification rates, SPE "
        "the drift of the two groups without any acceptance.",
        "",
        "Files: runs.csv (one row per run, with standard errors), table.csv, table.md, "
        "replicator_runs.csv, verdicts.json.",
    ]

if __name__ == "__main__":
    sys.exit(main())
