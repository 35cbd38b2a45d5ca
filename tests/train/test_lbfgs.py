"""causalfair.train.lbfgs.LBFGS: torch.optim.LBFGS bit for bit (the exact repair's
distillation, smooth problems in float64 and float32, both line searches, several steps),
and refusals of what it does not implement. That an exact repair never imports
torch._dynamo is checked with the training process's (tests/train/test_adam.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import causalfair as cf
import causalfair.train.repair as repair
from causalfair.errors import ConfigError
from causalfair.train.lbfgs import LBFGS

DISTIL = dict(lr=1.0, max_iter=500, tolerance_grad=1e-12, tolerance_change=1e-14,
              history_size=50, line_search_fn="strong_wolfe")


def _counting(cls: type, log: list[tuple[float, int]]) -> type:
    """``cls`` whose ``step`` records (its first loss, the closure calls it made)."""

    class Counting(cls):  # type: ignore[misc, valid-type]
        def step(self, closure):  # noqa: ANN001, ANN202
            calls = [0]

            def counted():  # noqa: ANN202
                calls[0] += 1
                return closure()

            out = super().step(counted)
            log.append((out.item(), calls[0]))
            return out

    return Counting


def test_the_exact_repairs_distillation_is_torch_lbfgs_bit_for_bit(monkeypatch):
    """``repair._distil`` on lending-1 (5 levels) onto a random table, with this class and
    with torch's in its place: the same weights, the same closure calls."""
    model = cf.lending_setting("lending-1", n_levels=5).tabular
    enc = cf.FeatureEncoding("onehot", n_levels=5, n_groups=2)
    x = repair._grid_input(model, enc)
    target = np.random.default_rng(0).uniform(size=(2, 5))
    nets, logs = [], []
    for cls in (LBFGS, torch.optim.LBFGS):
        log: list[tuple[float, int]] = []
        monkeypatch.setattr(repair, "LBFGS", _counting(cls, log))
        torch.manual_seed(0)
        net = cf.policies.checkpoint.mlp(enc.width, (8,), 1)
        repair._distil(model, net, x, target)
        nets.append(net)
        logs.append(log)
    assert logs[0] == logs[1] and logs[0][0][1] > 20, logs  # one step, many evaluations
    for a, b in zip(nets[0].parameters(), nets[1].parameters(), strict=True):
        assert torch.equal(a, b)
    with torch.no_grad():  # it did distil: the table is the target to ~1e-4
        table = repair._net_table(model, nets[0], x).numpy()
    assert np.abs(table - target).max() < 1e-3


def _rosenbrock() -> tuple[list[torch.Tensor], object]:
    x = torch.tensor([-1.2, 1.0], dtype=torch.float64, requires_grad=True)
    return [x], lambda: (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


def _mlp_least_squares() -> tuple[list[torch.Tensor], object]:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    gen = torch.Generator().manual_seed(1)
    xs, ys = torch.randn(40, 3, generator=gen), torch.randn(40, 2, generator=gen)
    params = list(net.parameters())
    params[-1].requires_grad_(False)  # a parameter without a gradient: zeros in the flat view
    return params, lambda: ((net(xs) - ys) ** 2).mean()


def _run(opt_cls: type, problem: object, kw: dict, steps: int) -> tuple:
    params, f = problem()
    opt = opt_cls(params, **kw)
    calls = [0]

    def closure():  # noqa: ANN202
        calls[0] += 1
        opt.zero_grad()
        loss = f()
        loss.backward()
        return loss

    losses = [opt.step(closure).item() for _ in range(steps)]
    st = opt.state[params[0]]
    return params, losses, calls[0], st["func_evals"], st["n_iter"], st["prev_loss"]


SW = "strong_wolfe"


@pytest.mark.parametrize("problem, kw, steps, why", [
    # float64, strong Wolfe: zoom phases of several trials; the second step continues
    # from the saved state (its curvature pairs) and stops at once
    (_rosenbrock, dict(max_iter=100, line_search_fn=SW), 2, "zoom"),
    # an overlong first step (lr=10): trials pulled in from the bracket's ends
    # (insufficient progress), then growing steps; the second step returns at once on
    # tolerance_grad
    (_rosenbrock, dict(lr=10.0, max_iter=100, tolerance_change=1e-14, line_search_fn=SW), 2,
     "converged"),
    # a short first step (lr=0.1): brackets grown by extrapolation, cubics without a
    # minimum (the midpoint), a line search cut short by max_eval
    (_rosenbrock, dict(lr=0.1, max_iter=20, max_eval=22, line_search_fn=SW), 2, "max_eval"),
    # float32, the distillation's tolerances: zooms down to a bracket below 1e-9, a step
    # below tolerance_change
    (_mlp_least_squares, dict(max_iter=300, history_size=50, tolerance_grad=1e-12,
                              tolerance_change=1e-14, line_search_fn=SW), 1, "tolerance"),
    # float32, a history shorter than the run (pairs dropped); stops on the loss change
    (_mlp_least_squares, dict(max_iter=300, history_size=5, tolerance_change=1e-5,
                              line_search_fn=SW), 1, "tolerance"),
    # the fixed step (line_search_fn=None), state carried over between steps
    (_rosenbrock, dict(lr=1e-3, max_iter=15), 3, "max_iter"),
    (_mlp_least_squares, dict(lr=0.1, max_iter=20, max_eval=12), 2, "max_eval"),
])
def test_steps_are_torch_lbfgs_bit_for_bit(problem, kw, steps, why):
    ours = _run(LBFGS, problem, kw, steps)
    theirs = _run(torch.optim.LBFGS, problem, kw, steps)
    assert ours[1:] == theirs[1:]
    for a, b in zip(ours[0], theirs[0], strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b)
    params0, _ = problem()
    assert not torch.equal(ours[0][0], params0[0])  # it moved
    n_iter, evals = ours[4], ours[3]
    max_iter = kw["max_iter"]
    max_eval = kw.get("max_eval") or max_iter * 5 // 4
    if why == "zoom":
        assert evals > n_iter + 5  # line searches with several trials
    elif why == "converged":  # the second step made one evaluation
        assert ours[2] == evals and ours[0][0].grad.abs().max() <= 1e-7
    elif why == "tolerance":  # stopped before max_iter and max_eval
        assert n_iter < max_iter and evals < max_eval
    elif why == "max_iter":
        assert n_iter == steps * max_iter
    else:  # each step stops at max_eval evaluations (a line search may make one more)
        assert steps * max_eval <= evals <= steps * (max_eval + 1)


def test_what_it_does_not_implement_is_refused():
    params = list(torch.nn.Linear(2, 1).parameters())
    for kw, word in [(dict(line_search_fn="backtracking"), "line_search_fn='backtracking'"),
                     (dict(history_size=0), "history_size=0"), (dict(lr=-1.0), "lr=-1.0"),
                     (dict(max_iter=2.5), "max_iter=2.5"), (dict(lr=torch.tensor(1.0)), "lr=")]:
        with pytest.raises(ConfigError, match=word):
            LBFGS(params, **kw)
    with pytest.raises(ConfigError, match="parameter groups"):
        LBFGS([{"params": params}])
    with pytest.raises(ConfigError, match="twice"):
        LBFGS(params + params[:1])
    with pytest.raises(ConfigError, match="mix torch.float32 on cpu, torch.float64 on cpu"):
        LBFGS([params[0], params[1].detach().double().requires_grad_()])
    with pytest.raises(ConfigError, match="complex"):
        LBFGS([torch.zeros(2, dtype=torch.complex64, requires_grad=True)])
    with pytest.raises(ConfigError, match="closure"):
        LBFGS(params).step(None)
    assert LBFGS(params, max_iter=8).param_groups[0]["max_eval"] == 10  # torch's default

