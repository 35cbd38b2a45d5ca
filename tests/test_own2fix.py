"""A new user's own system of more than two groups, audited through every door: the
command line and the Python API fork Lambda on the same number of units, benefit fairness
compares the decomposition's pair, the temporal graph takes the policy, and a decision
log of more than two actions or of one level is refused naming what to do (docs/logs.md,
docs/graph.md, docs/decomposition.md)."""

from __future__ import annotations

import json
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

import causalfair as cf
from causalfair.errors import InputError
from causalfair.graph import temporal_graph as structure_graph
from causalfair.logs import audit_logs
from causalfair.logs.errors import LogError
from causalfair.policies.grid import reads_group

# Three groups, one feature, two actions. Group a gains most from d1, group c least, and
# the policy (x > 0) favours c: V^pi is largest for a and smallest for c, so the
# decomposition's default pair is (a, c), not the first two groups.
SIM = '''
import numpy as np
import causalfair as cf


class Three:
    n_groups = 3
    group_names = ("a", "b", "c")
    n_actions = 2
    feature_names = ("x",)
    horizon = 2

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=int), (n,)).copy()
        return {"x": rng.normal(np.array([0.0, -1.0, 1.0])[g], 1.0), "g": g, "t": 0}

    def observe(self, s):
        return cf.Observation(group=s["g"], features=s["x"][:, None], t=s["t"])

    def draw_noise(self, n, rng):
        return rng.normal(size=n)

    def step(self, s, d, noise):
        gain = np.where(np.asarray(d) == 1, np.array([0.5, 0.4, 0.05])[s["g"]], 0.0)
        gain = gain + 0.1 * noise
        return cf.StepResult(state={"x": s["x"] + gain, "g": s["g"], "t": s["t"] + 1},
                             reward=gain, gain=gain)


def make():
    return Three()


def policy():
    return lambda obs: (obs.features[:, 0] > 0).astype(float)
'''


@pytest.fixture
def three(tmp_path, monkeypatch):
    """The module ``three_groups`` (SIM), importable from ``tmp_path``."""
    (tmp_path / "three_groups.py").write_text(textwrap.dedent(SIM))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("three_groups", None)
    import three_groups

    yield three_groups
    sys.modules.pop("three_groups", None)


def test_the_cli_forks_lambda_on_what_cf_decompose_forks(three, tmp_path, cli_here):
    """``causalfair decompose`` used to fork Lambda on --n units per group (100,000 by
    default, 5x the time of cf.decompose, which forks min(n, 20000)): with n just above
    that cap the two gave different Lambdas for the same seed."""
    n = 20_001  # just above Lambda's forks' cap (docs/decomposition.md, "Lambda")
    proc = cli_here("decompose", "--system", "three_groups:make", "--policy",
                    "three_groups:policy", "--n", n, "--seed", 3, "--jobs", 1, "--json",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    api = cf.decompose(cf.as_system(three.make()), three.policy(), n=n, seed=3, jobs=1)
    assert api.benefit.method == "mc" and out["benefit"]["method"] == "mc"
    assert out["Lambda"] == api.Lambda, (out["Lambda"], api.Lambda)
    assert out["Lambda_ci"] == list(api.Lambda_ci)


def test_benefit_fairness_compares_the_decompositions_pair_by_forks(three):
    """With three groups benefit_fairness used to compare groups (0, 1) while decompose
    compared the largest and smallest V^pi (here a and c): two Lambdas of two pairs, and a
    Proposition-1 DPE that was not the decomposition's."""
    system = cf.as_system(three.make())
    dec = cf.decompose(system, three.policy(), n=400, seed=2)
    ben = cf.benefit_fairness(system, three.policy(), n=400, seed=2)
    assert dec.pair == (0, 2) and ben.pair == dec.pair
    assert ben.Lambda == dec.Lambda and ben.ci == dec.Lambda_ci
    assert ben.dpe_prop1 == dec.benefit.dpe_prop1
    # a pair given is the pair compared; Lambda_T takes the same default
    assert cf.benefit_fairness(system, three.policy(), n=400, seed=2, pair=(0, 1)).pair == (0, 1)
    assert cf.benefit_fairness(system, three.policy(), n=400, seed=2,
                               horizon_benefit=True).pair == (0, 2)


def _three_group_model() -> cf.TabularModel:
    """Levels 0..2 moving up under d1 most for group 0 and least for group 1."""
    K = 3
    kernel = np.zeros((3, 2, K, K))
    x = np.arange(K)
    for g, up in enumerate((0.6, 0.1, 0.3)):
        kernel[g, 0, x, x] = 1.0
        kernel[g, 1, x, np.minimum(x + 1, K - 1)] += up
        kernel[g, 1, x, x] += 1.0 - up
    return cf.TabularModel(kernel=kernel, initial=np.full((3, K), 1.0 / K),
                           potential=np.stack([x / 2.0] * 3), group_names=("a", "b", "c"))


def test_benefit_fairness_compares_the_decompositions_pair_exactly():
    """The exact engine: the same default pair as decompose, (a, b) on a model whose
    extreme V^pi are a and b, and (a, c) on the model with b's and c's kernels swapped,
    where benefit_fairness used to compare (a, b) still."""
    model = _three_group_model()
    pol = np.full((3, 3), 0.5)
    dec = cf.decompose(model, pol, 4)
    ben = cf.benefit_fairness(model, pol, 4)
    assert dec.pair == (0, 1) and ben.pair == dec.pair and ben.Lambda == dec.Lambda
    swapped = cf.TabularModel(kernel=model.kernel[[0, 2, 1]], initial=model.initial,
                              potential=model.potential, group_names=("a", "b", "c"))
    dec = cf.decompose(swapped, pol, 4)
    ben = cf.benefit_fairness(swapped, pol, 4)
    assert dec.pair == (0, 2) and ben.pair == (0, 2)
    assert ben.Lambda == dec.Lambda
    assert ben.dpe_prop1 == pytest.approx(dec.DPE, abs=1e-12)


def test_temporal_graph_takes_the_policy():
    """cf.temporal_graph(system, T, policy=pol) used to be refused (unknown keyword): the
    user had to find policy_reads_s, which causalfair graph derives with reads_group."""
    system = cf.systems.make("lending-1")
    by_group = lambda obs: (np.asarray(obs.group) == 0).astype(float)  # noqa: E731
    for pol, reads in ((by_group, True), ("blind:0.5", False)):
        g = cf.temporal_graph(system, 2, policy=pol)
        assert g.graph.has_edge("S", "D0") is reads
        derived = reads_group(cf.as_policy(pol, system), system=system)
        assert derived is reads
        assert sorted(g.edges()) == sorted(
            structure_graph(system, 2, policy_reads_s=derived).edges())
    with pytest.raises(InputError, match=r"^policy_reads_s: True contradicts the policy, "
                                         r"which does not read S"):
        cf.temporal_graph(system, 2, policy="blind:0.5", policy_reads_s=True)
    with pytest.raises(InputError, match="^policy: a CausalStructure alone"):
        cf.temporal_graph(system.structure, 2, policy="blind:0.5")
    assert cf.temporal_graph(system, 2).graph.has_edge("S", "D0")  # no policy: as before


def _log(decision: int = 1, level: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [dict(id=i, t=t, group="ab"[i % 2], level=level, next_level=level,
                 decision=int(rng.random() < 0.5), reward=0.0)
            for i in range(20) for t in range(3)]
    df = pd.DataFrame(rows)
    df.loc[12, "decision"] = decision
    return df


def test_a_log_of_three_actions_is_refused_with_the_fix():
    """A decision 2 used to be refused without saying what to do with a third action."""
    with pytest.raises(LogError) as err:
        audit_logs(_log(decision=2), n_boot=0)
    msg = str(err.value)
    assert msg.startswith("logs: column 'decision' must be 0 or 1, got 2 at row 12; ")
    assert "collapse the actions to the decision of interest" in msg
    assert "(df['decision'] == ADMIT).astype(int)" in msg and "--system" in msg


def test_a_log_of_one_level_names_the_level_column(tmp_path, cli_here):
    """Every level 0 used to be refused as "kernel: needs at least 2 levels", a field the
    user never passed; also on the command line (exit 2, one line) and with a state binned
    into one level."""
    with pytest.raises(LogError, match=r"^logs: columns 'level' and 'next_level' hold only "
                                       r"level 0, so the log has K = 1 level; .*state=") as err:
        audit_logs(_log(), n_boot=0)
    assert "kernel" not in str(err.value)
    _log().to_csv(tmp_path / "one.csv", index=False)
    proc = cli_here("decompose", "--logs", "one.csv", "--boot", 0, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "columns 'level' and 'next_level' hold only level 0" in proc.stderr, proc.stderr
    feats = _log().drop(columns=["level", "next_level"]).assign(x=1.0, next_x=1.0)
    with pytest.raises(LogError, match=r"^logs: the state \['x'\] is binned into K = 1 "
                                       r"level; .*bins=N with N >= 2"):
        audit_logs(feats, state="x", bins=1, n_boot=0)
