"""The exact repair's search under pair constraints takes every pair from one exact pass a
step (engines.exact_torch.exact_metrics_by_pair): its constraint values equal, bit for bit,
those of one pass a pair (the search before); its memory bound:
tests/train/test_repair_thresholds.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from causalfair.engines.exact_torch import exact_metrics
from causalfair.train import repair
from tests.engines.test_groups_many import many

SETS = [
    ["max_abs_C<=0.05"],
    ["abs_C<=0.1", "max_Lambda<=0.2", "min_ratio_V>=0.8"],
    ["C[g2-g0]<=0.01", "Lambda<=0.3", "abs_DPE[g1-g3]<=0.02", "max_abs_SPE<=0.05",
     "IPE[g3-g2]<=0.0", "Lambda[g0-g2]<=0.1"],
]


def _old(model, T, cons, p, batched):
    """The search's constraint values before: one exact_metrics pass a pair."""
    targets = repair._targets(cons, 1e-3)

    def metrics(ab=None):
        return exact_metrics(model, p, T, eps=0.1, pair=ab, batched=batched)

    m = repair._add_pairs(metrics(), repair._pairs(model, cons), metrics)
    return m["utility"], torch.stack([((t - c.value(m)) if c.at_least else (c.value(m) - t)) / s
                                      for c, t, s in targets], dim=-1)


@pytest.mark.parametrize("texts", SETS)
@pytest.mark.parametrize("batched", [False, True])
def test_the_search_values_equal_one_pass_a_pair_exactly(texts, batched):
    rng = np.random.default_rng(len(texts))
    model = many(4, K=5, seed=len(texts))
    cons = repair.expand(model, [repair.parse_constraint(t) for t in texts])
    p = torch.tensor(rng.random((3, 4, 5) if batched else (4, 5)))
    fn = repair._objective(model, 6, 0.1, "visitation", cons, 1e-3, lambda: p, 1.0,
                           batched=batched)
    f, g = fn()
    f0, g0 = _old(model, 6, cons, p, batched)
    assert torch.equal(f, f0) and torch.equal(g, g0)
    assert g.shape == ((3, len(cons)) if batched else (len(cons),))

