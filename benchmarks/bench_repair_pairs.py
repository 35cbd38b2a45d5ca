"""Benchmark: one step of the exact repair's search under a constraint on every pair of
groups (``max_abs_C``, or ``max_Lambda`` with ``--key``), the old way (one exact pass a
pair, as before exact_metrics_by_pair) and the new (one pass for every pair), in the
same run: forward + backward of the augmented Lagrangian's objective over S starting
tables, median of a few steps, and the ratio old / new.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_repair_pairs.py [--groups 6 20 60]
[--levels 10] [--horizon 20] [--starts 17] [--key max_abs_C] [--steps 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def _model(G: int, K: int, seed: int = 0):  # as tests/engines/test_groups_many.py:many
    from causalfair.model import TabularModel

    rng = np.random.default_rng(seed)
    k = rng.random((G, 2, K, K)) + 0.1
    ini = rng.random((G, K)) + 0.1
    return TabularModel(kernel=k / k.sum(-1, keepdims=True), initial=ini / ini.sum(-1, keepdims=True),
                        potential=np.linspace(0.0, 1.0, K), group_names=[f"g{i}" for i in range(G)])


def _old_objective(model, T, eps, cons, p):
    """The search's objective before: one exact_metrics pass a pair."""
    import torch

    from causalfair.engines.exact_torch import exact_metrics
    from causalfair.train import repair

    targets = repair._targets(cons, 1e-3)
    pairs = repair._pairs(model, cons)

    def fn():
        def metrics(ab=None):
            return exact_metrics(model, p, T, eps=eps, pair=ab, batched=True)

        m = repair._add_pairs(metrics(), pairs, metrics)
        g = torch.stack([((tgt - c.value(m)) if c.at_least else (c.value(m) - tgt)) / sc
                         for c, tgt, sc in targets], dim=-1)
        return m["utility"], g

    return fn


def _step(fn, p) -> float:
    import torch

    t0 = time.perf_counter()
    f, g = fn()
    loss = -f.sum() + (torch.clamp(g, min=0.0) ** 2).sum()
    p.grad = None
    loss.backward()
    return time.perf_counter() - t0


def main() -> int:
    import torch

    torch.set_num_threads(1)
    from causalfair.thresholds import Constraint
    from causalfair.train import repair

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, nargs="+", default=[6, 20, 60])
    ap.add_argument("--levels", type=int, default=10)
    ap.add_argument("--horizon", type=int, default=20)
    ap.add_argument("--starts", type=int, default=17)
    ap.add_argument("--key", default="max_abs_C")
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    print(f"key {args.key}, K = {args.levels}, T = {args.horizon}, S = {args.starts} starts; "
          "seconds a step (forward + backward), median of", args.steps)
    print(f"{'groups':>6} {'pairs':>6} {'old s':>9} {'new s':>9} {'old/new':>8} {'max |dg|':>9}")
    for G in args.groups:
        model = _model(G, args.levels)
        cons = repair.expand(model, [Constraint(args.key, 0.05)])
        rng = np.random.default_rng(1)
        p = torch.tensor(rng.random((args.starts, G, args.levels)), requires_grad=True)
        new = repair._objective(model, args.horizon, 0.1, "visitation", cons, 1e-3, lambda p=p: p,
                                1.0, batched=True)
        old = _old_objective(model, args.horizon, 0.1, cons, p)
        with torch.no_grad():
            dg = float((old()[1] - new()[1]).abs().max())  # the forward values: 0 expected
        t_old = statistics.median(_step(old, p) for _ in range(args.steps))
        t_new = statistics.median(_step(new, p) for _ in range(args.steps))
        print(f"{G:>6} {len(cons):>6} {t_old:>9.4f} {t_new:>9.4f} {t_old / t_new:>8.1f} {dg:>9.2g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
