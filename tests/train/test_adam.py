"""causalfair.train.adam.Adam: torch.optim.Adam bit for bit (updates, state, both
state_dict directions), refusals of what it does not implement, and a training process
and an exact repair (whose distillation runs causalfair.train.lbfgs.LBFGS) that never
import torch._dynamo (what torch's Optimizer costs at start-up)."""

from __future__ import annotations

import inspect
import os
import sys
import textwrap

import pytest
import torch

from causalfair.errors import CheckpointError, ConfigError
from causalfair.train.adam import Adam
from tests.conftest import describe, run_cmd

#: torch < 2.5 has no ``decoupled_weight_decay`` flag (pyproject allows torch >= 2.4): its
#: state_dict lacks the key that ours always writes (a torch of either kind loads it).
TORCH_HAS_DWD = "decoupled_weight_decay" in inspect.signature(torch.optim.Adam).parameters


def _groups(sd: dict) -> list:
    """A state_dict's param_groups, without the flags the installed torch does not know."""
    return [{k: v for k, v in g.items() if TORCH_HAS_DWD or k != "decoupled_weight_decay"}
            for g in sd["param_groups"]]


def _net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def _grads(net: torch.nn.Module, gen: torch.Generator, skip: bool) -> None:
    """Random gradients; with ``skip`` the last bias gets none (a parameter without grad)."""
    params = list(net.parameters())
    for i, p in enumerate(params):
        g = torch.randn(p.shape, generator=gen) * (10.0 ** (i - 2))
        p.grad = None if skip and i == len(params) - 1 else g


def _same(a: torch.nn.Module, b: torch.nn.Module, oa: object, ob: object) -> None:
    for x, y in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(x, y)
    sa, sb = oa.state_dict(), ob.state_dict()
    assert _groups(sa) == _groups(sb)
    assert list(sa["state"]) == list(sb["state"])
    for k in sa["state"]:
        assert list(sa["state"][k]) == list(sb["state"][k]) == ["step", "exp_avg", "exp_avg_sq"]
        for key, t in sa["state"][k].items():
            u = sb["state"][k][key]
            assert t.dtype == u.dtype and torch.equal(t, u), (k, key)


def _run(pairs: list, gen_seed: int, steps: int) -> None:
    """Step every (net, optimiser) pair with the same gradients ``steps`` times."""
    gen = [torch.Generator().manual_seed(gen_seed) for _ in pairs]
    for s in range(steps):
        for (net, opt), g in zip(pairs, gen, strict=True):
            opt.zero_grad()
            _grads(net, g, skip=s < 3)  # the last bias starts its state late
            opt.step()


@pytest.mark.parametrize("kw", [dict(lr=3e-3), dict(lr=1e-3, weight_decay=1e-4),
                                dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, foreach=True)])
def test_updates_and_state_are_torch_adam_bit_for_bit(kw):
    a, b = _net(0), _net(0)
    ours, theirs = Adam(list(a.parameters()), **kw), torch.optim.Adam(b.parameters(), **kw)
    _run([(a, ours), (b, theirs)], 1, 30)
    _same(a, b, ours, theirs)
    assert not torch.equal(next(a.parameters()), next(_net(0).parameters()))  # it moved


def test_state_dict_round_trips_both_ways_and_lr_changes_apply():
    ref, x, y = _net(1), _net(1), _net(1)
    o_ref = torch.optim.Adam(ref.parameters(), lr=2e-3)
    o_x = Adam(list(x.parameters()), lr=2e-3)
    o_y = torch.optim.Adam(y.parameters(), lr=2e-3)
    _run([(ref, o_ref), (x, o_x), (y, o_y)], 2, 12)
    for o in (o_ref, o_x, o_y):  # an annealed step size, as repair.py sets it
        o.param_groups[0]["lr"] = 5e-4
    # ours -> a fresh torch Adam, torch -> a fresh one of ours (lr from the saved groups)
    x2 = torch.optim.Adam(x.parameters(), lr=9.0)
    x2.load_state_dict(o_x.state_dict())
    y2 = Adam(list(y.parameters()), lr=9.0)
    y2.load_state_dict(o_y.state_dict())
    assert y2.param_groups[0]["lr"] == 5e-4
    _run([(ref, o_ref), (x, x2), (y, y2)], 3, 18)
    _same(ref, x, o_ref, x2)
    _same(ref, y, o_ref, y2)


@pytest.mark.skipif(not TORCH_HAS_DWD, reason="this torch writes no decoupled_weight_decay "
                    "(the other tests load its groups)")
def test_an_old_torch_group_without_decoupled_weight_decay_loads_as_torch_does():
    net, ref = _net(2), _net(2)
    o_ref = torch.optim.Adam(ref.parameters())
    _run([(ref, o_ref)], 4, 2)
    sd = o_ref.state_dict()
    del sd["param_groups"][0]["decoupled_weight_decay"]  # torch 2.4 wrote no such key
    ours, theirs = Adam(list(net.parameters())), torch.optim.Adam(_net(2).parameters())
    ours.load_state_dict(sd)
    theirs.load_state_dict(sd)
    assert ours.state_dict()["param_groups"] == theirs.state_dict()["param_groups"]


def test_what_it_does_not_implement_is_refused():
    params = list(_net(0).parameters())
    for kw, word in [(dict(amsgrad=True), "amsgrad=True"), (dict(fused=True), "fused=True"),
                     (dict(nesterov=True), "unknown option nesterov"), (dict(lr=-1.0), "lr=-1.0")]:
        with pytest.raises(ConfigError, match=word):
            Adam(params, **kw)
    with pytest.raises(ConfigError, match="parameter groups"):
        Adam([{"params": params}])
    with pytest.raises(ConfigError, match="twice"):
        Adam(params + params[:1])
    Adam(params, amsgrad=False, maximize=False)  # the defaults are accepted
    saved = torch.optim.Adam(params, amsgrad=True).state_dict()
    with pytest.raises(CheckpointError, match="amsgrad=True"):
        Adam(params).load_state_dict(saved)
    with pytest.raises(CheckpointError, match="saved parameters"):
        Adam(params[:2]).load_state_dict(Adam(params).state_dict())


def test_training_and_an_exact_repair_never_import_torch_dynamo(tmp_path):
    """In one fresh interpreter: lending (core) and a gym system (generic) through the
    sweep worker's function, then a run folder written and resumed (state_dict /
    load_state_dict); then repair_network with its L-BFGS distillation (two distilled
    starts). The torch._dynamo modules loaded are printed after each part."""
    code = textwrap.dedent(f"""
        import sys
        def dynamo():
            print(sorted(m for m in sys.modules if m.startswith("torch._dynamo")))
        from causalfair.train import TrainConfig, train
        from causalfair.train.sweep import _train_config
        tiny = dict(n_individuals=32, horizon=4, hidden=(8,), n_epochs=1)
        _train_config((TrainConfig(algo="ppo-c", iterations=2, **tiny), "."))
        _train_config((TrainConfig(algo="ppo", system="infectious-1", iterations=1, **tiny), "."))
        train(TrainConfig(algo="ppo", iterations=1, **tiny), out={str(tmp_path)!r})
        train(TrainConfig(algo="ppo", iterations=2, **tiny), out={str(tmp_path)!r}, resume=True)
        dynamo()
        import torch
        import causalfair as cf
        from causalfair.thresholds import Constraint
        from causalfair.train.repair import repair_network
        m = cf.lending_setting("lending-1", n_levels=3).tabular
        torch.manual_seed(0)
        net = cf.policies.checkpoint.mlp(5, (4,), 1)
        enc = cf.FeatureEncoding("onehot", n_levels=3, n_groups=2)
        r = repair_network(m, 3, net, enc, [Constraint("abs_C", 10.0)], n_random=0, outer=1,
                           inner=2)
        print(sum(a.start.startswith("distilled") for a in r.attempts))
        dynamo()
    """)
    proc = run_cmd([sys.executable, "-c", code], env={**os.environ, "OMP_NUM_THREADS": "1"})
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines[-3:] == ["[]", "2", "[]"], describe(proc)
