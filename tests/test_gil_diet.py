"""The Monte Carlo tasks' per-step work, made lighter under the interpreter lock (issue
28): the numbers stay bit for bit those of the plain formulas, and the checks refuse what
they refused, with the same messages."""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from causalfair.errors import PolicyError
from causalfair.policies import nets
from causalfair.policies.nets import FeatureEncoding, NumpyMLPPolicy, _probs_from_outputs
from causalfair.types import check_probs


def _reference_forward(layers, x, act):
    """The forward as written before: per block of 8,192 rows, h @ Wt, += b, activation
    in place, in float32; then float64."""
    out = np.empty((len(x), layers[-1][0].shape[0]), dtype=np.float32)
    for start in range(0, len(x), 8192):
        h = x[start:start + 8192]
        for i, (W, b) in enumerate(layers):
            h = h @ np.ascontiguousarray(W.T)
            h += b
            if i < len(layers) - 1:
                if act == "tanh":
                    np.tanh(h, out=h)
                else:
                    np.maximum(h, 0.0, out=h)
        out[start:start + len(h)] = h
    return out.astype(np.float64)


@pytest.mark.parametrize("act,dims", [("tanh", (4, 64, 64, 1)), ("relu", (7, 33, 3)),
                                      ("tanh", (5, 128, 17, 64, 2))])
def test_numpy_forward_is_the_blockwise_formula_bit_for_bit(act, dims):
    rng = np.random.default_rng(3)
    layers = [(rng.standard_normal((dims[i + 1], dims[i])).astype(np.float32),
               rng.standard_normal(dims[i + 1]).astype(np.float32)) for i in range(len(dims) - 1)]
    pol = NumpyMLPPolicy(layers, FeatureEncoding("features", width_=dims[0]), activation=act)
    x = (3 * rng.standard_normal((3 * nets._BLOCK_ROWS + 77, dims[0]))).astype(np.float32)
    with threadpool_limits(1, user_api="blas"):
        ref = _reference_forward(layers, x, act)
    for threads in (1, 2):  # the engine's tasks (BLAS at 1 thread), a caller's 2 threads
        with threadpool_limits(threads, user_api="blas"):
            got = pol._outputs(x)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, ref)
    assert pol._outputs(x[:0]).shape == (0, dims[-1])


def test_sigmoid_probabilities_are_the_plain_formula_bit_for_bit():
    z = np.concatenate([np.random.default_rng(0).standard_normal(50_000) * 20,
                        [0.0, -0.0, 700.0, -700.0, 1e-300]])
    for dtype in (np.float64, np.float32):
        out = z.astype(dtype)[:, None]
        with np.errstate(over="ignore"):
            p = 1.0 / (1.0 + np.exp(-out[:, 0]))
            got = _probs_from_outputs(out, "logits", "w")
        ref = np.stack([1.0 - p, p], axis=1)
        assert got.dtype == ref.dtype
        np.testing.assert_array_equal(got, ref)
    q = np.array([[0.0], [0.25], [1.0]])
    np.testing.assert_array_equal(_probs_from_outputs(q, "probs", "w"),
                                  [[1.0, 0.0], [0.75, 0.25], [0.0, 1.0]])


@pytest.mark.parametrize("p,message", [
    ([0.5, np.nan], "returned NaN or inf probabilities (nan at index 1)"),
    ([np.inf, 0.5], "returned NaN or inf probabilities (inf at index 0)"),
    ([0.5, -np.inf], "returned NaN or inf probabilities (-inf at index 1)"),
    ([1.5, np.nan], "returned NaN or inf probabilities (nan at index 1)"),  # NaN named first
    ([0.5, -1e-300], "returned a value outside [0, 1] (-1e-300 at index 1)"),
    ([0.5, 1.0000001], "returned a value outside [0, 1] (1 at index 1)"),
])
def test_check_probs_refuses_as_before(p, message):
    with pytest.raises(PolicyError) as err:
        check_probs(np.array(p), 2, "policy 'x'")
    assert str(err.value).startswith(f"policy 'x': {message}")


def test_check_probs_passes_probabilities_unchanged():
    p = np.array([0.0, -0.0, 1.0, 0.3])
    np.testing.assert_array_equal(check_probs(p, 4, "w"), p)
    assert check_probs(np.array([]), 0, "w").shape == (0,)
