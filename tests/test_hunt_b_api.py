"""Python API fixes from the hunt_b report (findings 3-7, 10-12): bad input refused with
an error naming the argument, the value and the fix; ``jobs`` never starts more workers
than tasks."""

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import CausalfairError, PolicyError


@pytest.fixture(scope="module")
def model():
    return cf.lending_setting("lending-1").tabular


# ------------------------------------------------------------------ 3: one-hot width
@pytest.mark.parametrize("K, G", [(5, 2), (10, 2), (7, 3)])
def test_exact_engine_on_a_model_refuses_a_onehot_encoding_of_another_grid(model, K, G):
    torch = pytest.importorskip("torch")
    pol = cf.TorchPolicy(torch.nn.Linear(K + G, 1), cf.FeatureEncoding("onehot", K, G))
    for call in (lambda: cf.decompose(model, pol, horizon=3),
                 lambda: cf.policy_table(pol, model)):
        with pytest.raises(PolicyError, match=rf"encoded for {K} levels x {G} groups .* but "
                                              r"the model has 7 levels x 2 groups"):
            call()
    ok = cf.TorchPolicy(torch.nn.Linear(9, 1), cf.FeatureEncoding("onehot", 7, 2))
    assert cf.policy_table(ok, model).shape == (2, 7)
