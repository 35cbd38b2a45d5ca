"""What a policy reads decides the edges S -> D_t of the temporal causal graph: a network
over features reads S only if the group is one of its input features, at every door
(`causalfair graph`, report.html, audit.json), whether or not the system has a tabular
model."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.cli import main

ROOT = Path(__file__).resolve().parents[1]

VARIANTS = '''
import dataclasses
from clinic import make_clinic

def no_model():
    """The clinic as an outside simulator: features, 3 actions, no tabular model."""
    s = make_clinic()
    return dataclasses.replace(s, tabular=None, horizon=8)

def distance_is_group():
    """The same, declaring that the feature 'distance' carries the group."""
    s = no_model()
    return dataclasses.replace(s, roles={**s.roles, "group": "distance"})
'''


def _network(path: Path, encoding) -> Path:
    import torch

    from causalfair.policies.checkpoint import save_checkpoint
    from causalfair.policies.nets import mlp

    torch.manual_seed(0)
    net = mlp(encoding.width, (8,), 3)
    save_checkpoint(path, net, architecture={"type": "mlp", "input_dim": encoding.width,
                                             "hidden": [8], "activation": "tanh",
                                             "output_dim": 3},
                    encoding=encoding, metadata={"name": path.stem, "n_actions": 3})
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("reads")
    shutil.copy(ROOT / "docs" / "examples" / "clinic.py", d / "clinic.py")
    (d / "variants.py").write_text(VARIANTS)
    _network(d / "features.npz", cf.FeatureEncoding("features", names=("severity", "distance")))
    _network(d / "width.npz", cf.FeatureEncoding("features", width_=2))  # names not recorded
    _network(d / "onehot.npz", cf.FeatureEncoding("onehot", n_levels=5, n_groups=2))
    yield d
    for m in ("clinic", "variants"):
        sys.modules.pop(m, None)


def graph(folder: Path, system: str, checkpoint: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["graph", "--system", system, "--search-path", str(folder),
                   "--checkpoint", str(folder / checkpoint), "--paths", "S"])
    assert rc == 0, err.getvalue()
    return out.getvalue()


@pytest.mark.parametrize("system", ["clinic:make_clinic", "variants:no_model"])
@pytest.mark.parametrize("checkpoint", ["features.npz", "width.npz"])
def test_a_features_only_network_does_not_read_s(folder, system, checkpoint):
    text = graph(folder, system, checkpoint)
    assert "(reads S: no)" in text, text
    assert "S->D" not in text and "S -> D" not in text, text  # no edge, no path through it


@pytest.mark.parametrize("system, checkpoint", [
    ("variants:distance_is_group", "features.npz"),  # the group is one of its features
    ("variants:distance_is_group", "width.npz"),
    ("variants:no_model", "onehot.npz"),  # a one-hot encoding holds the group
    ("clinic:make_clinic", "onehot.npz"),
])
def test_a_network_reading_the_group_keeps_the_edges(folder, system, checkpoint):
    text = graph(folder, system, checkpoint)
    assert "(reads S: yes)" in text, text
    assert "S->D0" in text and "S -> D0" in text, text


def test_the_answer_is_one_function():
    from causalfair.policies.grid import reads_group

    clinic = cf.systems.make("clinic:make_clinic", search_path=ROOT / "docs" / "examples")
    try:
        enc = cf.FeatureEncoding("features", names=("severity", "distance"))
        net = cf.TorchPolicy(lambda x: pytest.fail("called"), enc)  # reads_group never calls it
        assert reads_group(net, system=clinic) is False
        assert reads_group(net, clinic.tabular) is False
        import dataclasses

        declared = dataclasses.replace(clinic, roles={"group": ["distance"]})
        assert reads_group(net, system=declared) is True
    finally:
        sys.modules.pop("clinic", None)


def test_report_says_the_features_network_does_not_read_s(folder, tmp_path):
    from causalfair.policies.checkpoint import load_checkpoint

    system = cf.systems.make("clinic:make_clinic", search_path=folder)
    policy, _ = load_checkpoint(folder / "features.npz")
    res = cf.audit({"name": "feat", "horizon": 3, "thresholds": {"abs_C": 1.0}},
                   system=system, policy=policy)
    out = res.write_report(tmp_path / "rep")
    html = (out / "report.html").read_text()
    assert "the policy reads S: no (no edge S -&gt; D_t)" in html
    data = json.loads((out / "audit.json").read_text())["figures"]["graph"]["data"]
    assert data["policy_reads_s"] is False
    assert not [e for e in data["edges"] if e[0] == "S" and e[1].startswith("D")]


@pytest.mark.parametrize("params", [{}, {"harder": True}])
def test_the_central_attention_network_reads_its_site_and_the_site_is_the_group(params):
    """attention-central's observation ends with the one-hot of the unit's own site, and the
    sites are the groups: a network over its 165 columns (the trainer's encoding, names f0..)
    reads S, so the graph keeps S -> D_t (h6 hunt2 F1: it said 'reads S: no')."""
    from causalfair.policies.grid import reads_group
    from causalfair.systems.attention import central_group_columns

    system = cf.systems.make("attention-central", **params)
    sim = system.make_simulator()
    width = np.shape(sim.observe(sim.reset(1, None, np.random.default_rng(0))).features)[1]
    names = tuple(f"f{j}" for j in range(width))
    # the named columns are the one-hot of the site: column k is 1 exactly for site k
    x = sim.observe(sim.reset(2, None, np.random.default_rng(0))).features
    cols = [names.index(c) for c in central_group_columns(len(system.groups))]
    assert np.array_equal(x[:, cols], np.tile(np.eye(len(system.groups)), (2, 1)))
    net = cf.TorchPolicy(lambda x: pytest.fail("called"), cf.FeatureEncoding("features",
                                                                              names=names))
    assert reads_group(net, system=system) is True
    g = cf.temporal_graph(system, 2, policy=net)
    assert g.graph.has_edge("S", "D0") and g.graph.has_edge("S", "D1")
    site = cf.systems.make("attention-1")  # the per-site policy reads its own last step only
    enc = cf.FeatureEncoding("features", names=tuple(site.features))
    assert reads_group(cf.TorchPolicy(lambda x: None, enc), system=site) is False


def test_a_checkpoint_of_another_action_set_is_refused_at_load(tmp_path):
    """h6hunt2 F4: `causalfair graph` drew the graph of an 8-action attention-central network
    on a 4-action setting (--param logits=[-1,0,1]); decompose refused it only once the
    engine evaluated it. load_checkpoint_for refuses it, naming both action counts."""
    from causalfair.errors import CheckpointError
    from causalfair.policies.checkpoint import load_checkpoint_for, save_checkpoint
    from causalfair.policies.nets import mlp

    system = cf.systems.make("attention-central")
    names = [f"f{j}" for j in range(165)]
    path = tmp_path / "central.npz"
    save_checkpoint(path, mlp(165, (4,), 8),
                    architecture={"type": "mlp", "input_dim": 165, "hidden": [4],
                                  "activation": "tanh", "output_dim": 8},
                    encoding=cf.FeatureEncoding("features", names=tuple(names)),
                    metadata={"name": "central", "n_actions": 8})
    assert load_checkpoint_for(path, system)[0].n_actions == 8  # its own setting loads
    other = cf.systems.make("attention-central", logits=[-1, 0, 1])
    with pytest.raises(CheckpointError, match=r"chooses among 8 actions, but the system has 4"):
        load_checkpoint_for(path, other)
    for cmd in ("graph", "decompose"):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = main([cmd, "--system", "attention-central", "--param", "logits=[-1,0,1]",
                       "--param", "horizon=3", "--checkpoint", str(path)])
        assert rc == 2 and "chooses among 8 actions" in err.getvalue(), err.getvalue()
