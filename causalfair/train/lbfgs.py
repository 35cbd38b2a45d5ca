"""L-BFGS (Nocedal 1980, "Updating quasi-Newton matrices with limited storage"; Nocedal &
Wright 2006, "Numerical Optimization", Algorithm 7.4 and the strong-Wolfe line search of
Algorithms 3.5-3.6): the optimiser that distils a network onto a policy table in the exact
repair (method.md section 5), in plain tensor operations.

:class:`LBFGS` is ``torch.optim.LBFGS`` bit for bit, for one list of parameters and either
line search (``line_search_fn="strong_wolfe"`` or ``None``, a fixed step): the same two-loop
recursion over the last ``history_size`` curvature pairs, the same bracketing and zoom with
safeguarded cubic interpolation (minFunc's ``polyinterp`` for two points), the same
stopping rules (``tolerance_grad`` on the largest gradient entry, ``tolerance_change`` on
the directional derivative, the step and the loss change, ``max_iter`` iterations and
``max_eval`` evaluations, by default ``max_iter * 5 // 4``), with every operation in torch's
order and on the same Python-float or 0-d-tensor operands, since the bits depend on both.
State carries over between ``step`` calls as in torch. It exists for start-up time, as
:class:`causalfair.train.adam.Adam` does: torch's ``Optimizer`` base class imports
``torch._dynamo`` on first use (a second or more per process); this class imports nothing
beyond ``torch``.

What it does not implement (parameter groups, complex or sparse tensors, parameters of
several dtypes or devices, a tensor ``lr``, ``state_dict``) is refused with a one-line
error, never ignored. Compared with torch's on the CPU in tests/train/test_lbfgs.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from causalfair.errors import ConfigError, short
from causalfair.train.adam import Adam, tensor_list

__all__ = ["LBFGS"]

#: The line searches torch.optim.LBFGS knows.
_LINE_SEARCHES = (None, "strong_wolfe")
#: The zoom stops when the bracket is this short along the largest entry of the direction;
#: torch's line search keeps its own 1e-9 whatever the optimiser's ``tolerance_change``.
_ZOOM_TOLERANCE = 1e-9


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


class LBFGS:
    """L-BFGS over one list of tensors, ``torch.optim.LBFGS(params, lr, max_iter, max_eval,
    tolerance_grad, tolerance_change, history_size, line_search_fn)`` bit for bit (see the
    module docstring). ``step(closure)`` runs up to ``max_iter`` iterations; ``closure``
    clears the gradients, evaluates the loss, calls ``backward`` and returns the loss.

    ``param_groups`` is torch's (one dict of hyperparameters); ``state`` holds the one
    running state under the first parameter, as torch keeps it.
    """

    zero_grad = Adam.zero_grad  # one home for clearing gradients (None, or zeros)

    def __init__(self, params: Any, lr: float = 1, max_iter: int = 20,
                 max_eval: int | None = None, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if max_eval is None and _whole(max_iter):
            max_eval = max_iter * 5 // 4
        checks = (("lr", lr, _real(lr)), ("max_iter", max_iter, _whole(max_iter)),
                  ("max_eval", max_eval, _whole(max_eval)),
                  ("tolerance_grad", tolerance_grad, _real(tolerance_grad)),
                  ("tolerance_change", tolerance_change, _real(tolerance_change)),
                  ("history_size", history_size, _whole(history_size)))
        for name, value, ok in checks:
            if not ok:
                raise ConfigError(f"LBFGS: {name}={short(value)} is invalid; lr and the "
                                  "tolerances are numbers >= 0, max_iter, max_eval and "
                                  "history_size whole numbers >= 1.")
        if line_search_fn not in _LINE_SEARCHES:
            raise ConfigError(f"LBFGS: line_search_fn={short(line_search_fn)} is not "
                              "implemented; use 'strong_wolfe' or None.")
        params = tensor_list("LBFGS", params)
        for p in params:
            if not p.is_floating_point():
                raise ConfigError(f"LBFGS: {p.dtype} parameters are not implemented; pass "
                                  "real floating-point tensors.")
        kinds = sorted({f"{p.dtype} on {p.device}" for p in params})
        if len(kinds) > 1:
            raise ConfigError(f"LBFGS: the parameters mix {', '.join(kinds)}; put them all "
                              "on one device in one dtype.")
        group: dict[str, Any] = {
            "params": params, "lr": lr, "max_iter": max_iter, "max_eval": max_eval,
            "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
            "history_size": history_size, "line_search_fn": line_search_fn}
        self.defaults = {k: v for k, v in group.items() if k != "params"}
        self.param_groups: list[dict[str, Any]] = [group]
        self.state: dict[Any, dict[str, Any]] = {}
        self._params = params
        self._numel = sum(p.numel() for p in params)

    # ------------------------------------------------------------------ flat views
    def _flat_grad(self) -> Any:
        """Every gradient, flattened and concatenated (zeros for a parameter without one)."""
        import torch

        views = []
        for p in self._params:
            if p.grad is None:
                views.append(p.new_zeros(p.numel()))
            elif p.grad.is_sparse:
                raise ConfigError("LBFGS: sparse gradients are not implemented; use dense "
                                  "parameters.")
            else:
                views.append(p.grad.view(-1))
        return torch.cat(views, 0)

    def _move(self, t: Any, d: Any) -> None:
        """Parameters += t * d (``t`` a float or a 0-d tensor, ``d`` flat)."""
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(d[offset:offset + n].view_as(p), alpha=t)
            offset += n

    def _trial(self, closure: Callable[[], Any], x0: list[Any], t: Any,
               d: Any) -> tuple[float, Any]:
        """Loss and flat gradient at x0 + t * d; the parameters are put back to ``x0``."""
        self._move(t, d)
        loss = float(_evaluate(closure))
        grad = self._flat_grad()
        for p, saved in zip(self._params, x0, strict=True):
            p.copy_(saved)
        return loss, grad

    # ------------------------------------------------------------------ the step
    def step(self, closure: Callable[[], Any]) -> Any:
        """Up to ``max_iter`` L-BFGS iterations; returns the loss ``closure`` gave first."""
        import torch

        if not callable(closure):
            raise ConfigError("LBFGS.step: closure must be a function that re-evaluates "
                              "the loss (and calls backward); L-BFGS needs several.")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search = group["history_size"], group["line_search_fn"]
        if line_search not in _LINE_SEARCHES:
            raise ConfigError(f"LBFGS: line_search_fn={short(line_search)} is not "
                              "implemented; use 'strong_wolfe' or None.")
        with torch.no_grad():
            state = self.state.setdefault(self._params[0], {})
            state.setdefault("func_evals", 0)
            state.setdefault("n_iter", 0)

            first = _evaluate(closure)
            loss = float(first)
            evals = 1
            state["func_evals"] += 1
            g = self._flat_grad()
            if g.abs().max() <= tol_grad:
                return first

            d, t = state.get("d"), state.get("t")
            y_hist, s_hist = state.get("old_dirs"), state.get("old_stps")
            rho, h_diag = state.get("ro"), state.get("H_diag")
            g_prev, loss_prev = state.get("prev_flat_grad"), state.get("prev_loss")

            it = 0
            while it < max_iter:
                it += 1
                state["n_iter"] += 1
                # --- direction: steepest descent first, then the two-loop recursion
                if state["n_iter"] == 1:
                    d = g.neg()
                    y_hist, s_hist, rho, h_diag = [], [], [], 1
                else:
                    y = g.sub(g_prev)
                    s = d.mul(t)
                    ys = y.dot(s)
                    if ys > 1e-10:  # curvature condition: keep the pair
                        if len(y_hist) == history_size:
                            y_hist.pop(0)
                            s_hist.pop(0)
                            rho.pop(0)
                        y_hist.append(y)
                        s_hist.append(s)
                        rho.append(1.0 / ys)
                        h_diag = ys / y.dot(y)
                    m = len(y_hist)
                    alpha = state.setdefault("al", [None] * history_size)
                    q = g.neg()
                    for i in range(m - 1, -1, -1):
                        alpha[i] = s_hist[i].dot(q) * rho[i]
                        q.add_(y_hist[i], alpha=-alpha[i])
                    d = r = torch.mul(q, h_diag)
                    for i in range(m):
                        beta = y_hist[i].dot(r) * rho[i]
                        r.add_(s_hist[i], alpha=alpha[i] - beta)
                if g_prev is None:
                    g_prev = g.clone(memory_format=torch.contiguous_format)
                else:
                    g_prev.copy_(g)
                loss_prev = loss

                # --- step length
                t = min(1.0, 1.0 / g.abs().sum()) * lr if state["n_iter"] == 1 else lr
                gtd = g.dot(d)
                if gtd > -tol_change:  # not a descent direction any more
                    break
                if line_search is not None:
                    x0 = [p.clone(memory_format=torch.contiguous_format) for p in self._params]
                    loss, g, t, used = _strong_wolfe(
                        lambda step, x0=x0, d=d: self._trial(closure, x0, step, d),
                        t, d, loss, g, gtd, _ZOOM_TOLERANCE, max_ls=max_eval - evals)
                    self._move(t, d)
                    optimal = g.abs().max() <= tol_grad
                else:
                    self._move(t, d)
                    used, optimal = 0, False
                    if it != max_iter:  # the last fixed step is not re-evaluated
                        loss = float(_evaluate(closure))
                        g = self._flat_grad()
                        optimal = g.abs().max() <= tol_grad
                        used = 1
                evals += used
                state["func_evals"] += used

                # --- stopping rules, in torch's order
                if it == max_iter or evals >= max_eval or optimal:
                    break
                if d.mul(t).abs().max() <= tol_change:
                    break
                if abs(loss - loss_prev) < tol_change:
                    break

            state.update({"d": d, "t": t, "old_dirs": y_hist, "old_stps": s_hist,
                          "ro": rho, "H_diag": h_diag, "prev_flat_grad": g_prev,
                          "prev_loss": loss_prev})
        return first


def _evaluate(closure: Callable[[], Any]) -> Any:
    """``closure()`` with gradients enabled (the step itself runs without)."""
    import torch

    with torch.enable_grad():
        return closure()


def _cubic_min(x1: Any, f1: Any, g1: Any, x2: Any, f2: Any, g2: Any,
               bounds: tuple[Any, Any] | None = None) -> Any:
    """The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2, clipped
    to ``bounds`` (default: between x1 and x2); their midpoint where the cubic has no
    minimum (minFunc ``polyinterp``, two points with values and slopes)."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1**2 - g1 * g2
    if not disc >= 0:  # no real minimum (or NaN): the midpoint
        return (lo + hi) / 2.0
    d2 = disc.sqrt()
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


def _strong_wolfe(trial: Callable[[Any], tuple[float, Any]], t: Any, d: Any, f: float, g: Any,
                  gtd: Any, tolerance_change: float, max_ls: int, c1: float = 1e-4,
                  c2: float = 0.9) -> tuple[float, Any, Any, int]:
    """A step ``t`` along ``d`` meeting the strong Wolfe conditions (sufficient decrease
    ``c1``, curvature ``c2``; Nocedal & Wright Algorithms 3.5 and 3.6): bracket, then zoom
    by cubic interpolation, at most ``max_ls`` more trials after the first. ``trial(t)``
    gives the loss and flat gradient there. Returns (loss, gradient, t, trials used)."""
    import torch

    d_norm = d.abs().max()
    g = g.clone(memory_format=torch.contiguous_format)
    f_new, g_new = trial(t)
    used = 1
    gtd_new = g_new.dot(d)

    # bracketing: grow t until an interval holds a point meeting the conditions
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    k = 0
    while k < max_ls:
        if f_new > (f + c1 * t * gtd) or (k > 1 and f_new >= f_prev):
            pts, fs = [t_prev, t], [f_prev, f_new]
            gs = [g_prev, g_new.clone(memory_format=torch.contiguous_format)]
            slopes = [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            pts, fs, gs = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            pts, fs = [t_prev, t], [f_prev, f_new]
            gs = [g_prev, g_new.clone(memory_format=torch.contiguous_format)]
            slopes = [gtd_prev, gtd_new]
            break
        grown = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                           bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, gtd_prev = t, f_new, gtd_new
        g_prev = g_new.clone(memory_format=torch.contiguous_format)
        t = grown
        f_new, g_new = trial(t)
        used += 1
        gtd_new = g_new.dot(d)
        k += 1
    if k == max_ls:  # out of trials: the interval from the start to the last trial
        pts, fs, gs = [0, t], [f, f_new], [g, g_new]

    # zoom: shrink the bracket [pts[low], pts[high]] around a point meeting the conditions
    stalled = False
    low, high = (0, 1) if fs[0] <= fs[-1] else (1, 0)
    while not done and k < max_ls:
        if abs(pts[1] - pts[0]) * d_norm < tolerance_change:
            break
        t = _cubic_min(pts[0], fs[0], slopes[0], pts[1], fs[1], slopes[1])
        # a trial too near an end twice running (or at/after it) moves 10% inside
        top, bottom = max(pts), min(pts)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:
            if stalled or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        f_new, g_new = trial(t)
        used += 1
        gtd_new = g_new.dot(d)
        k += 1
        if f_new > (f + c1 * t * gtd) or f_new >= fs[low]:  # new high end
            pts[high], fs[high], slopes[high] = t, f_new, gtd_new
            gs[high] = g_new.clone(memory_format=torch.contiguous_format)
            low, high = (0, 1) if fs[0] <= fs[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (pts[high] - pts[low]) >= 0:  # the old low end becomes the high
                pts[high], fs[high], gs[high] = pts[low], fs[low], gs[low]
                slopes[high] = slopes[low]
            pts[low], fs[low], slopes[low] = t, f_new, gtd_new
            gs[low] = g_new.clone(memory_format=torch.contiguous_format)
    return fs[low], gs[low], pts[low], used
