"""A user's own admissions system (4 groups, one rare; reject / waitlist / admit; three
continuous features plus the group) and a policy trained with the user's own torch loop,
saved as a state_dict, as TorchScript, as an ExportedProgram and as a whole pickled module (docs/own-system.md,
docs/checkpoints.md)."""

import warnings

import numpy as np
import pytest
import torch
from torch import nn

import causalfair as cf
from causalfair.engines.montecarlo import check_simulator, decompose_mc
from causalfair.errors import CheckpointError, SystemError_

GROUPS = ("A", "B", "C", "D")
SHARE = np.array([0.55, 0.30, 0.12, 0.03])
FEATURES = ("test_score", "gpa", "hardship", "group")
MEAN, STD = (1000.0, 3.0, 0.3, 0.6), (170.0, 0.5, 0.25, 0.8)
Q0 = np.array([0.3, 0.0, -0.2, -0.4])  # mean initial readiness per group


class AdmissionsSim:
    """Latent readiness q; admitting raises it, every round it reverts by 10 %."""

    n_groups = 4
    group_names = list(GROUPS)
    group_weights = SHARE
    n_actions = 3
    action_labels = ["reject", "waitlist", "admit"]
    feature_names = list(FEATURES)
    horizon = 3

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=int), (n,)).copy()
        q = rng.normal(Q0[g], 1.0)
        hardship = np.clip(rng.normal(0.2 + 0.2 * g, 0.2), 0, 1)
        return {"q": q, "h": hardship, "score": 1000 + 150 * q - 80 * hardship,
                "gpa": np.clip(3.0 + 0.4 * q, 0, 4), "g": g, "t": 0}

    def observe(self, s):
        X = np.column_stack([s["score"], s["gpa"], s["h"], s["g"].astype(float)])
        return cf.Observation(group=s["g"], features=X, t=s["t"])

    def draw_noise(self, n, rng):
        return rng.normal(size=(n, 2))

    def step(self, s, decisions, noise):
        d = np.asarray(decisions)
        boost = np.select([d == 2, d == 1], [0.4, 0.1], 0.0)
        q = s["q"] + boost * (1 + 0.3 * s["h"]) - 0.1 * s["q"] + 0.1 * noise[:, 0]
        nxt = {"q": q, "h": s["h"], "score": 1000 + 150 * q - 80 * s["h"] + 60 * noise[:, 1],
               "gpa": np.clip(3.0 + 0.4 * q, 0, 4), "g": s["g"], "t": s["t"] + 1}
        reward = np.where(d == 2, s["q"] - 0.2, np.where(d == 1, 0.05, 0.0))
        return cf.StepResult(state=nxt, reward=reward, gain=q - s["q"], info={})


def make_admissions(weights=SHARE):
    return cf.System(id="admissions", groups=GROUPS,
                     decisions=cf.DecisionSet(labels=("reject", "waitlist", "admit")),
                     features=FEATURES, horizon=3, group_weights=weights,
                     simulator=AdmissionsSim, roles={"group": "group"})


class AdmitNet(nn.Module):
    """The user's own architecture: its own layer names, relu."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 32)
        self.fc2 = nn.Linear(32, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


ARCH = {"type": "mlp", "input_dim": 4, "hidden": [32], "output_dim": 3, "activation": "relu"}
ENC = cf.FeatureEncoding("features", names=FEATURES, mean=MEAN, std=STD)


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    return AdmitNet()


def _obs(n=50):
    sim = AdmissionsSim()
    return sim.observe(sim.reset(n, np.arange(n) % 4, np.random.default_rng(1)))


def test_state_dict_of_own_architecture_saves_and_loads(net, tmp_path):
    """cf.save_checkpoint of a module with its own layer names (fc1, fc2) wrote a file that
    load_checkpoint then refused ("missing 0.weight"); it now loads, equal to torch."""
    obs = _obs()
    with torch.no_grad():
        x = torch.tensor((obs.features - np.array(MEAN)) / np.array(STD), dtype=torch.float32)
        want = torch.softmax(net(x), 1).numpy()
    for name in ("admit.pt", "admit.npz"):
        cf.save_checkpoint(tmp_path / name, net, architecture=ARCH, encoding=ENC)
        policy, meta = cf.load_checkpoint(tmp_path / name)
        assert meta["encoding"]["names"] == list(FEATURES)
        np.testing.assert_allclose(policy.action_probs(obs), want, atol=1e-6)


def test_save_checkpoint_refuses_a_module_that_is_not_the_declared_mlp(net, tmp_path):
    """A relu network declared tanh used to be saved and audited as another network."""
    path = tmp_path / "p.npz"
    with pytest.raises(CheckpointError, match=r"not the declared MLP .*activation 'tanh'"):
        cf.save_checkpoint(path, net, architecture={**ARCH, "activation": "tanh"}, encoding=ENC)
    with pytest.raises(CheckpointError, match=r"state_dict holds .*fc1\.weight"):
        cf.save_checkpoint(path, net, architecture={**ARCH, "hidden": [16]}, encoding=ENC)
    assert not path.exists()


def test_torchscript_and_pickled_module_are_refused_then_converted(net, tmp_path):
    ts, whole = tmp_path / "admit_ts.pt", tmp_path / "admit_full.pt"
    with warnings.catch_warnings():  # torch 2.13 deprecates TorchScript; users still have it
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(net).save(str(ts))
        scripted = torch.jit.load(str(ts))
    torch.save(net, whole)
    with pytest.raises(CheckpointError, match=r"is a TorchScript archive .*torch\.jit\.load"):
        cf.load_checkpoint(ts)
    with pytest.raises(CheckpointError, match=r"cannot be loaded safely .*AdmitNet"):
        cf.load_checkpoint(whole)
    exported = tmp_path / "admit.pt2"  # torch.export, TorchScript's successor
    torch.export.save(torch.export.export(net, (torch.zeros(2, 4),), dynamic_shapes={
        "x": {0: torch.export.Dim("batch")}}), exported)
    with pytest.raises(CheckpointError, match=r"ExportedProgram .*torch\.export\.load"):
        cf.load_checkpoint(exported)
    cf.save_checkpoint(tmp_path / "from_pt2.npz", torch.export.load(exported).module(),
                       architecture=ARCH, encoding=ENC)
    # the docs' way out: load it in your own session and save it as a checkpoint
    cf.save_checkpoint(tmp_path / "from_ts.npz", scripted, architecture=ARCH,
                       encoding=ENC)
    cf.save_checkpoint(tmp_path / "direct.npz", net, architecture=ARCH, encoding=ENC)
    a, _ = cf.load_checkpoint(tmp_path / "from_ts.npz")
    b, _ = cf.load_checkpoint(tmp_path / "direct.npz")
    c, _ = cf.load_checkpoint(tmp_path / "from_pt2.npz")
    np.testing.assert_array_equal(a.action_probs(_obs()), b.action_probs(_obs()))
    np.testing.assert_array_equal(c.action_probs(_obs()), b.action_probs(_obs()))


def test_simulator_group_weights_must_match_the_system():
    """A System without group_weights used to drop the simulator's silently (uniform)."""
    with pytest.raises(SystemError_, match=r"group_weights = \[0\.55, 0\.3, 0\.12, 0\.03\].*"
                                           r"A 0\.25.*System\(group_weights=\.\.\.\)"):
        make_admissions(weights=None).make_simulator()


def test_decomposition_of_the_users_system_by_hand(net, tmp_path):
    check_simulator(AdmissionsSim())
    cf.save_checkpoint(tmp_path / "admit.npz", net, architecture=ARCH, encoding=ENC)
    policy, _ = cf.load_checkpoint(tmp_path / "admit.npz")
    res = decompose_mc(make_admissions(), policy, n=4000, seed=0, benefit_n=200)
    # under "reject all" the gain of a step is -0.1 q_t with E q_t = 0.9^t E q_0
    for g, name in enumerate(GROUPS):
        hand = -0.1 * Q0[g] * sum(0.9 ** t for t in range(3))
        assert abs(res.V_0[g] - hand) < 4 * res.se[f"V_0[{name}]"] + 1e-12, (name, res.V_0[g])
    assert res.utility == pytest.approx(float(SHARE @ res.utility_by_group), rel=1e-12)
    assert res.C == pytest.approx(res.DPE + res.IPE + res.SPE, abs=1e-12)
