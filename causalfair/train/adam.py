"""Adam (Kingma & Ba 2015, "Adam: A Method for Stochastic Optimization", Algorithm 1): the
optimiser of every training path (method.md section 5), in plain tensor operations.

:class:`Adam` is ``torch.optim.Adam`` with its default flags, bit for bit: the same
operations in the same order as torch's ``_single_tensor_adam`` (parameters on the CPU) and
``_multi_tensor_adam`` (``foreach`` kernels: parameters all on an accelerator, or
``foreach=True``), and ``state_dict()`` / ``load_state_dict()`` in torch's format, so a run
folder written with either optimiser resumes with the other. It exists for start-up time:
torch's ``Optimizer`` wraps ``add_param_group``, ``zero_grad``, ``state_dict`` and
``load_state_dict`` in ``torch._disable_dynamo``, whose first call imports ``torch._dynamo``
(about a second on a CPU, several on a loaded many-core machine) in every training process,
sweep worker and retraining gate worker; this class imports nothing beyond ``torch``.

What it does not implement (``amsgrad``, ``maximize``, ``capturable``, ``differentiable``,
``fused``, decoupled weight decay, parameter groups, complex or sparse tensors, closures) is
refused with a one-line error, never ignored. Both update paths are compared with torch's on
the CPU (tests/train/test_adam.py; ``foreach=True`` runs torch's foreach path there too).
Across the torch versions pyproject allows (>= 2.4) the update is the same: the first moment
has used ``lerp_`` since torch 2.1 (pytorch PR 104796), and the second moment's
``addcmul_(grad, grad.conj(), ...)`` of older versions is the same numbers for real tensors;
groups saved by a torch without the ``decoupled_weight_decay`` flag get it on loading, as
torch's own ``__setstate__`` does.
"""

from __future__ import annotations

import copy
from typing import Any

from causalfair.errors import CheckpointError, ConfigError, short

__all__ = ["Adam", "tensor_list"]

#: torch.optim.Adam's flags after ``betas, eps, weight_decay``, with the value this class
#: implements (``foreach`` is free: None/False/True pick the kernels as torch does).
_FLAGS: tuple[tuple[str, Any], ...] = (
    ("amsgrad", False), ("maximize", False), ("foreach", None), ("capturable", False),
    ("differentiable", False), ("fused", None), ("decoupled_weight_decay", False))
#: Device types with foreach kernels (torch.utils._foreach_utils, plus privateuse1).
_FOREACH_DEVICES = ("cuda", "xpu", "mtia")


def _flag_ok(name: str, value: Any) -> bool:
    if name == "foreach":
        return value in (None, False, True)
    if name == "fused":
        return value in (None, False)
    return value is False or value == 0


def tensor_list(owner: str, params: Any) -> list[Any]:
    """``params`` as the list of tensors one of causalfair's optimisers (``owner``: Adam,
    LBFGS) updates, in order: refused with a one-line ConfigError if it is a tensor or a set
    (no order), empty, holds parameter groups (dicts), something that is not a tensor, a
    non-leaf tensor, or a tensor twice."""
    import torch

    if isinstance(params, torch.Tensor) or isinstance(params, (set, frozenset)):
        raise ConfigError(f"{owner}: params must be an ordered list of tensors, got "
                          f"{type(params).__name__}; pass list(module.parameters()).")
    params = list(params)
    if not params:
        raise ConfigError(f"{owner}: params is empty; pass the tensors to optimise.")
    for p in params:
        if isinstance(p, dict):
            raise ConfigError(f"{owner}: parameter groups (dicts in params) are not "
                              f"implemented; pass one list of tensors or use torch.optim.{owner}.")
        if not isinstance(p, torch.Tensor):
            raise ConfigError(f"{owner}: params holds a {type(p).__name__}, not a tensor; "
                              "pass the tensors to optimise.")
        if not (p.is_leaf or p.retains_grad):
            raise ConfigError(f"{owner}: params holds a non-leaf tensor; optimise the leaf "
                              "tensors (e.g. module.parameters()).")
    if len({id(p) for p in params}) != len(params):
        raise ConfigError(f"{owner}: params holds a tensor twice; pass each tensor once.")
    return params


class Adam:
    """Adam over one list of tensors, ``torch.optim.Adam(params, lr, betas, eps,
    weight_decay, foreach=...)`` bit for bit (see the module docstring).

    ``param_groups`` is torch's: one dict whose ``"lr"`` (and other hyperparameters) a
    caller may read or set between steps; ``state`` maps each parameter that has taken a
    step to its ``step`` (0-d tensor), ``exp_avg`` and ``exp_avg_sq``.
    """

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, **flags: Any) -> None:
        import torch

        for name, value in flags.items():
            if name not in dict(_FLAGS):
                raise ConfigError(f"Adam: unknown option {name}={short(value)} (causalfair.train."
                                  "adam.Adam takes lr, betas, eps, weight_decay, foreach).")
            if not _flag_ok(name, value):
                raise ConfigError(f"Adam: {name}={short(value)} is not implemented (causalfair."
                                  "train.adam.Adam is torch.optim.Adam with default flags); "
                                  f"leave {name} at its default or use torch.optim.Adam.")
        params = tensor_list("Adam", params)
        for p in params:
            if torch.is_complex(p):
                raise ConfigError(f"Adam: complex parameters ({p.dtype}) are not implemented; "
                                  "use torch.optim.Adam.")
        betas = tuple(betas)
        for name, v, ok in (("lr", lr, 0.0 <= lr), ("eps", eps, 0.0 <= eps),
                            ("weight_decay", weight_decay, 0.0 <= weight_decay),
                            ("betas", betas, len(betas) == 2 and all(
                                isinstance(b, float) and 0.0 <= b < 1.0 for b in betas))):
            if not ok:
                raise ConfigError(f"Adam: {name}={short(v)} is invalid; lr, eps and "
                                  "weight_decay are >= 0, betas two floats in [0, 1).")
        group: dict[str, Any] = {"params": params, "lr": lr, "betas": betas, "eps": eps,
                                 "weight_decay": weight_decay}
        for name, default in _FLAGS:
            group[name] = flags.get(name, default)
        self.defaults = {k: v for k, v in group.items() if k != "params"}
        self.param_groups: list[dict[str, Any]] = [group]
        self.state: dict[Any, dict[str, Any]] = {}

    # ------------------------------------------------------------------------ gradients
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient (``None``, or zeros when ``set_to_none=False``)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if p.grad.grad_fn is not None:
                        p.grad.detach_()
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()

    def step(self) -> None:
        """One Adam update of every parameter that has a gradient."""
        import torch

        with torch.no_grad():
            for group in self.param_groups:
                self._check_group(group, ConfigError, "Adam")
                params, grads, states = [], [], []
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if p.grad.is_sparse:
                        raise ConfigError("Adam: sparse gradients are not implemented; use "
                                          "torch.optim.SparseAdam.")
                    state = self.state.setdefault(p, {})
                    if not state:
                        state["step"] = torch.tensor(0.0, dtype=_scalar_dtype(torch), device="cpu")
                        state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                        state["exp_avg_sq"] = torch.zeros_like(
                            p, memory_format=torch.preserve_format)
                    params.append(p)
                    grads.append(p.grad)
                    states.append(state)
                if not params:
                    continue
                foreach = group["foreach"]
                if foreach is None:  # torch's default: foreach kernels iff all on such devices
                    foreach = all(type(p) in (torch.Tensor, torch.nn.Parameter)
                                  and p.device.type in _FOREACH_DEVICES + (
                                      torch._C._get_privateuse1_backend_name(),)
                                  for p in params)
                (_foreach_update if foreach else _single_update)(torch, group, params, grads,
                                                                 states)

    # ------------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """torch's optimiser state format: ``{"state": {index: {...}}, "param_groups":
        [{hyperparameters..., "params": [indices]}]}`` (tensors shared, not copied)."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            start = len(index)
            index.update({id(p): i for i, p in enumerate(group["params"], start)})
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        return {"state": {index[id(p)]: v for p, v in self.state.items()},
                "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue from ``state_dict`` (this class's or torch.optim.Adam's): the saved
        hyperparameters replace the current ones and the moment tensors move to each
        parameter's device and dtype, as torch's ``Optimizer.load_state_dict`` does."""
        import torch

        what = "optimizer state"
        try:
            saved_groups = copy.deepcopy(state_dict["param_groups"])
            saved_state = state_dict["state"]
        except (KeyError, TypeError):
            raise CheckpointError(f"{what}: not an optimiser state_dict (needs 'state' and "
                                  "'param_groups'); resume from a run folder train wrote.") \
                from None
        if len(saved_groups) != len(self.param_groups) or any(
                len(s.get("params", ())) != len(g["params"])
                for s, g in zip(saved_groups, self.param_groups, strict=True)):
            raise CheckpointError(
                f"{what}: {[len(s.get('params', ())) for s in saved_groups]} saved parameters "
                f"per group, the optimiser has {[len(g['params']) for g in self.param_groups]};"
                " resume with the configuration that wrote the run folder.")
        id_map = {i: p for s, g in zip(saved_groups, self.param_groups, strict=True)
                  for i, p in zip(s["params"], g["params"], strict=True)}
        state: dict[Any, dict[str, Any]] = {}
        for k, v in saved_state.items():
            if k not in id_map or not isinstance(v, dict):
                raise CheckpointError(f"{what}: entry {short(k)} names no parameter of the "
                                      "optimiser; resume from a run folder train wrote.")
            p = id_map[k]
            entry = {}
            for key, val in v.items():
                if key not in ("step", "exp_avg", "exp_avg_sq"):
                    raise CheckpointError(f"{what}: key {short(key)} is not Adam's (step, "
                                          "exp_avg, exp_avg_sq); it needs torch.optim.Adam.")
                if key == "step":
                    entry[key] = val if torch.is_tensor(val) else torch.tensor(
                        float(val), dtype=_scalar_dtype(torch), device="cpu")
                elif p.is_floating_point():
                    entry[key] = val.to(dtype=p.dtype, device=p.device)
                else:
                    entry[key] = val.to(device=p.device)
            state[p] = entry
        groups = []
        for s, g in zip(saved_groups, self.param_groups, strict=True):
            s["params"] = g["params"]
            for name, default in _FLAGS:
                s.setdefault(name, default)
            self._check_group(s, CheckpointError, what)
            groups.append(s)
        self.param_groups = groups
        self.state = state

    @staticmethod
    def _check_group(group: dict[str, Any], error: type[Exception], what: str) -> None:
        for name, _ in _FLAGS:
            if not _flag_ok(name, group.get(name)):
                raise error(f"{what}: {name}={short(group.get(name))} is not implemented "
                            "(causalfair.train.adam.Adam is torch.optim.Adam with default "
                            "flags); it needs torch.optim.Adam.")


def _scalar_dtype(torch: Any) -> Any:
    """The dtype of a ``step`` counter (torch.optim.optimizer._get_scalar_dtype)."""
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32


def _single_update(torch: Any, group: dict[str, Any], params: list[Any], grads: list[Any],
                   states: list[dict[str, Any]]) -> None:
    """torch.optim.adam._single_tensor_adam with default flags, one tensor at a time."""
    lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
    for p, grad, state in zip(params, grads, states, strict=True):
        exp_avg, exp_avg_sq, step_t = state["exp_avg"], state["exp_avg_sq"], state["step"]
        step_t += 1
        if wd != 0:
            grad = grad.add(p, alpha=wd)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step = step_t.item()
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        denom = (exp_avg_sq.sqrt() / bias_correction2 ** 0.5).add_(eps)
        p.addcdiv_(exp_avg, denom, value=-step_size)


def _foreach_update(torch: Any, group: dict[str, Any], params: list[Any], grads: list[Any],
                    states: list[dict[str, Any]]) -> None:
    """torch.optim.adam._multi_tensor_adam with default flags: foreach kernels per
    (device, dtype) bucket of parameters."""
    lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
    buckets: dict[Any, list[int]] = {}
    for i, p in enumerate(params):
        buckets.setdefault((p.device, p.dtype), []).append(i)
    for idx in buckets.values():
        ps = [params[i] for i in idx]
        gs = [grads[i] for i in idx]
        m = [states[i]["exp_avg"] for i in idx]
        v = [states[i]["exp_avg_sq"] for i in idx]
        steps = [states[i]["step"] for i in idx]
        if steps[0].is_cpu:
            torch._foreach_add_(steps, torch.tensor(1.0, device="cpu"), alpha=1.0)
        else:
            torch._foreach_add_(steps, 1)
        if wd != 0:
            gs = torch._foreach_add(gs, ps, alpha=wd)
        torch._foreach_lerp_(m, gs, 1 - beta1)
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, gs, gs, 1 - beta2)
        step_size = [(lr / (1 - beta1 ** s.item())) * -1 for s in steps]
        bias_correction2_sqrt = [(1 - beta2 ** s.item()) ** 0.5 for s in steps]
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, bias_correction2_sqrt)
        torch._foreach_add_(denom, eps)
        torch._foreach_addcdiv_(ps, m, denom, step_size)
