"""Benchmark: Lambda by forks for every pair of a multi-group system, as an audit with a
``max_Lambda`` threshold or ``cf.compare_groups`` computes it
(:func:`causalfair.engines.groups.lambda_by_forks`).

The system: 4 groups (shares of the population do not matter here), 3 actions, 4
continuous-ish features (score, gpa, hardship, group: each group has cells of its own),
6 steps, an admissions-like dynamics; the policy a fixed softmax of the features.

Printed, in one run, for the 6 pairs:
- the shared path: one dict kept across the pairs (what ``lambda_by_forks`` does): one
  rollout, one set of cell means and bootstrap replicates, each pair's own mask and terms;
- the baseline path, measured in the same run: each pair given only the rollout (what the
  pairs shared before: every pair recomputed every group's cell means and bootstrap
  replicates);
- the ratio, and whether every number (Lambda, se, interval, eps, cells, contributions)
  is identical bit for bit (it must be);
- the audit's path (:mod:`causalfair.audit.run`): the decomposition's own pair, then the
  6 pairs of the group comparison, given one dict (the audit now) against one dict each
  (before: the group comparison made the rollout, cell means and replicates again),
  rollouts included, and whether the numbers are identical.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_lambda_pairs.py [--n 20000] [--boot 200]``
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

import causalfair as cf
from causalfair.engines.benefit_mc import benefit_fairness_mc


class Admissions:
    """Four groups, three actions (reject, waitlist, admit), readiness q observed through
    a score, a gpa and a hardship; admit raises q most."""

    n_groups, n_actions, horizon = 4, 3, 6
    action_labels, baseline = ("reject", "waitlist", "admit"), 0
    feature_names = ["score", "gpa", "hardship", "group"]

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=int), (n,)).copy()
        q = rng.normal(np.array([0.3, 0.0, -0.2, -0.4])[g], 1.0)
        h = np.clip(rng.normal(np.array([0.2, 0.4, 0.6, 0.8])[g], 0.2), 0, 1)
        return {"q": q, "h": h, "g": g, "score": 1000 + 150 * q - 80 * h + rng.normal(0, 60, n),
                "gpa": np.clip(3.0 + 0.4 * q + rng.normal(0, 0.3, n), 0, 4)}

    def observe(self, s):
        x = np.column_stack([s["score"], s["gpa"], s["h"], s["g"].astype(float)])
        return cf.Observation(group=s["g"], features=x)

    def draw_noise(self, n, rng):
        return rng.normal(size=(n, 3))

    def step(self, s, d, u):
        d = np.asarray(d)
        q = s["q"] + np.select([d == 2, d == 1], [0.4, 0.1], 0.0) * (1 + 0.3 * s["h"]) \
            - 0.1 * s["q"] + 0.1 * u[:, 0]
        nxt = {"q": q, "h": s["h"], "g": s["g"],
               "score": 1000 + 150 * q - 80 * s["h"] + 60 * u[:, 1],
               "gpa": np.clip(3.0 + 0.4 * q + 0.3 * u[:, 2], 0, 4)}
        return cf.StepResult(state=nxt, reward=np.zeros(len(d)), gain=q - s["q"])


class Softmax:
    """pi(a | x): softmax of (0, score / 200 - 5, gpa - 3)."""

    def action_probs(self, obs):
        f = obs.features
        z = np.column_stack([np.zeros(len(f)), f[:, 0] / 200 - 5, f[:, 1] - 3])
        e = np.exp(z - z.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)


def _numbers(r):
    return (r.Lambda, r.se, r.ci, r.eps, r.cells, r.contributions.tobytes())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000, help="units per group")
    ap.add_argument("--boot", type=int, default=200, help="bootstrap replicates")
    args = ap.parse_args()
    sim, pol = Admissions(), Softmax()
    pairs = list(itertools.combinations(range(4), 2))
    kw = {"n": args.n, "n_boot": args.boot, "seed": 0, "eps": 0.05, "jobs": 1}

    t0 = time.perf_counter()
    shared: dict = {}
    new = [benefit_fairness_mc(sim, pol, 6, pair=ab, shared=shared, **kw) for ab in pairs]
    t_shared = time.perf_counter() - t0
    rollout = shared["rollout"]
    t0 = time.perf_counter()
    old = [benefit_fairness_mc(sim, pol, 6, pair=ab, shared={"rollout": rollout}, **kw)
           for ab in pairs]
    t_base = time.perf_counter() - t0
    K = new[0].contributions.shape[0]
    same = all(_numbers(a) == _numbers(b) for a, b in zip(new, old, strict=True))
    print(f"{len(pairs)} pairs, n = {args.n} per group, {args.boot} replicates, {K} cells")
    print(f"shared path (rollout included):        {t_shared:6.2f} s")
    print(f"baseline, each pair its own cell means: {t_base:6.2f} s (rollout not included)")
    print(f"ratio baseline / shared: {t_base / t_shared:.1f}x; numbers identical: {same}")

    def audit_path(one: bool) -> tuple[float, list]:
        t0 = time.perf_counter()
        own: dict = {}
        res = [benefit_fairness_mc(sim, pol, 6, pair=pairs[0], shared=own, **kw)]
        rest = own if one else {}
        res += [benefit_fairness_mc(sim, pol, 6, pair=ab, shared=rest, **kw) for ab in pairs]
        return time.perf_counter() - t0, res

    t_one, one = audit_path(True)
    t_two, two = audit_path(False)
    same = all(_numbers(a) == _numbers(b) for a, b in zip(one, two, strict=True))
    print(f"audit path, its pair then the {len(pairs)} pairs: one dict {t_one:.2f} s, one each "
          f"{t_two:.2f} s ({t_two / t_one:.1f}x); numbers identical: {same}")


if __name__ == "__main__":
    main()
