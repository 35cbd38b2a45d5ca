"""A spec's [retrain] reaches the trainer: ``eval_every`` and ``audit_n`` (so PPO-Lagrangian's
multipliers can act within a short repair), the spec's ``[benefit] bins`` and ``[engine]
alpha`` for the trainer's audits, and the pair the gate's audit compared as the trainer's
``start_pair`` (docs/audit.md, docs/training.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from statistics import NormalDist

import pytest

from causalfair.audit import retrain as retrain_mod
from causalfair.audit.gate import run_gate
from causalfair.audit.spec import load_spec
from causalfair.errors import ConfigError, SpecError
from causalfair.train import fair_terms, generic
from causalfair.train.config import UNRECORDED_NONE, TrainConfig
from causalfair.train.generic import SystemTrainer
from causalfair.train.system_run import train_system
from tests.train.test_repair_thresholds import MODULE

ROOT = Path(__file__).parents[1]
SPEC = '''name = "g"
[system]
factory = "tri_rs:make_sim"
[policy]
checkpoint = "run/checkpoint.pt"
[engine]
kind = "mc"
n = 200
seed = 0
alpha = 0.1
[benefit]
bins = 2
[thresholds]
abs_C = 0.001
[retrain]
algo = "{algo}"
iterations = 3
min_utility = -inf
{retrain}
'''


@pytest.fixture
def tri(tmp_path, monkeypatch):
    """The three-group Monte Carlo system (groups A, B, C; T = 1; the level observed as a
    feature) as ``tri_rs``."""
    (tmp_path / "tri_rs.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import tri_rs

    yield tri_rs
    sys.modules.pop("tri_rs", None)


def _spec(retrain="", algo="ppo-c"):
    ck = Path("run/checkpoint.pt")
    if not ck.exists():  # the spec names one; tests that only load the spec never read it
        ck.parent.mkdir(exist_ok=True)
        ck.write_bytes(b"")
    path = "g.toml"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(SPEC.format(retrain=retrain, algo=algo))
    return path


# ------------------------------------------------------------------- the spec's keys
def test_eval_every_and_audit_n_are_read_and_kept_only_when_given(tri):
    spec = load_spec(_spec("eval_every = 1\naudit_n = 150"))
    assert spec.retrain["eval_every"] == 1 and spec.retrain["audit_n"] == 150
    bare = load_spec(_spec())
    assert "eval_every" not in bare.retrain and "audit_n" not in bare.retrain
    assert load_spec(_spec("eval_every = 3")).retrain["eval_every"] == 3  # = iterations


@pytest.mark.parametrize("retrain, algo, named", [
    ("eval_every = 0", "ppo-c", "[retrain] eval_every: bad value 0; allowed values: an "
                                "integer >= 1"),
    ("audit_n = 1.5", "ppo-c", "[retrain] audit_n: bad value 1.5; allowed values: an integer >= 1"),
    ("audit_n = true", "ppo-c", "[retrain] audit_n: bad value True"),
    ('eval_every = "2"', "ppo-c", "[retrain] eval_every: bad value '2'"),
    ("eval_every = 4", "ppo-c", "[retrain] eval_every: bad value 4; allowed values: an integer "
                                "from 1 to iterations (3)"),
    ("audit_n = 100", "exact", "[retrain] audit_n: algo 'exact' optimises on the exact engine"),
    ("eval_every = 1", "exact", "[retrain] eval_every: algo 'exact'"),
])
def test_bad_values_are_refused_naming_the_key_the_value_and_the_fix(tri, retrain, algo, named):
    with pytest.raises(SpecError) as info:
        load_spec(_spec(retrain, algo=algo))
    msg = str(info.value)
    assert "\n" not in msg and named in msg, msg


def test_schema_knows_the_new_keys():
    schema = json.loads((ROOT / "docs/schema/spec.schema.json")
                        .read_text(encoding="utf-8"))
    props = schema["properties"]["retrain"]["properties"]
    assert props["eval_every"]["minimum"] == 1 and props["audit_n"]["minimum"] == 1


# ------------------------------------------------------------------ TrainConfig
@pytest.mark.parametrize("kw, named", [
    ({"audit_bins": 0}, "audit_bins: bad value 0; must be an integer >= 1"),
    ({"audit_bins": 2.0}, "audit_bins: bad value 2.0; must be an integer"),
    ({"audit_alpha": 1.0}, "audit_alpha: bad value 1.0; must be a number in (0, 1)"),
    ({"audit_alpha": 0}, "audit_alpha: bad value 0; must be a number in (0, 1)"),
    ({"start_pair": 3}, "start_pair: bad value 3; give two group names"),
    ({"start_pair": "B-A", "pair": "A-B"}, "start_pair: bad value 'B-A'; pair 'A-B' already "
                                           "fixes"),
])
def test_train_config_refuses_bad_new_fields(kw, named):
    with pytest.raises(ConfigError) as info:
        TrainConfig(**kw)
    assert named in str(info.value), str(info.value)


def test_new_fields_leave_recorded_configs_as_they_were():
    """The lending trainer records TrainConfig.to_dict() in every checkpoint: the example
    checkpoints' config is still exactly what the same config records now (so their bytes
    do not change), and a set field is recorded and read back."""
    import torch

    payload = torch.load(ROOT / "reports/examples/checkpoints/lending-1-ppo.pt",
                         weights_only=True)
    recorded = json.loads(payload["meta_json"])["metadata"]["config"]
    now = TrainConfig(algo="ppo", setting="lending-1", iterations=100, seed=0, horizon=20)
    assert now.to_dict() == recorded
    assert not set(UNRECORDED_NONE) & set(recorded)
    c = TrainConfig(audit_bins=3, audit_alpha=0.1, start_pair=["B", "A"])
    d = c.to_dict()
    assert (d["audit_bins"], d["audit_alpha"], d["start_pair"]) == (3, 0.1, ["B", "A"])
    assert TrainConfig.from_dict(d) == c and TrainConfig.from_dict(recorded) == now


# ------------------------------------------------------------- the trainer uses them
def test_start_pair_is_the_penalty_pair_until_the_first_audit(tri, monkeypatch):
    """Before, PPO-C's penalty compared groups 0 and 1 (A-B) until the first audit."""
    seen = []
    real = generic.ppo_c_penalty

    def spy(ratio, q, grp, beta_c, pair, **kw):
        seen.append(tuple(pair))
        return real(ratio, q, grp, beta_c, pair, **kw)

    monkeypatch.setattr(generic, "ppo_c_penalty", spy)
    cfg = dict(algo="ppo-c", iterations=5, n_individuals=48, horizon=1, n_epochs=1)
    tr = SystemTrainer(tri.make_sim(1), TrainConfig(**cfg, start_pair=("C", "A")))
    assert tr.pair == (2, 0)
    tr.step()  # no audit yet (eval_every 5)
    assert seen and set(seen) == {(2, 0)}
    assert SystemTrainer(tri.make_sim(1), TrainConfig(**cfg)).pair == (0, 1)  # as before
    with pytest.raises(ConfigError, match="start_pair: 'Z' is not one of the groups"):
        SystemTrainer(tri.make_sim(1), TrainConfig(**cfg, start_pair=("Z", "A")))


def test_audit_alpha_sets_the_level_of_the_trainer_audits(tri):
    """Same policy, same audit stream: the C interval at alpha 0.1 is the 95% one shrunk by
    z_{1-0.1/(2m)} / z_{1-0.05/(2m)} about the same estimate (before: always 95%); m = 3,
    the pairs of tri's three groups, since the trainer compares the pair the data picks
    (simultaneous intervals, docs/decomposition.md)."""
    rows = []
    for alpha in (None, 0.1):
        tr = SystemTrainer(tri.make_sim(1), TrainConfig(algo="ppo", n_individuals=48, horizon=1,
                                                        audit_n=200, audit_alpha=alpha))
        rows.append(tr.audit())
    wide, narrow = rows
    assert wide["C"] == narrow["C"]
    ratio = NormalDist().inv_cdf(1 - 0.1 / 6) / NormalDist().inv_cdf(1 - 0.05 / 6)
    w = wide["C_ci"][1] - wide["C_ci"][0]
    assert w > 0 and narrow["C_ci"][1] - narrow["C_ci"][0] == pytest.approx(w * ratio, rel=1e-9)
    lo95, hi95 = wide["Lambda_ci"]
    lo90, hi90 = narrow["Lambda_ci"]
    assert lo95 <= lo90 <= hi90 <= hi95 and (lo95, hi95) != (lo90, hi90)


def test_audit_bins_and_alpha_reach_every_audit_engine(tri, monkeypatch):
    """decompose_mc, the group comparison's forks and PPO-Cb's batch cells all get the
    configured bins and alpha (before: 4 and 0.05 whatever was asked)."""
    seen = {}
    for mod, name in ((generic, "decompose_mc"), (generic, "measure_groups"),
                      (fair_terms, "visit_cells")):
        real = getattr(mod, name)

        def spy(*a, _real=real, _name=name, **kw):
            seen.setdefault(_name, []).append((a, kw))
            return _real(*a, **kw)

        monkeypatch.setattr(mod, name, spy)
    tr = SystemTrainer(tri.make_sim(1), TrainConfig(
        algo="ppo-cb", iterations=1, n_individuals=48, horizon=1, n_epochs=1, audit_n=150,
        audit_bins=2, audit_alpha=0.2, constraints=("Lambda[C-A]<=0.5",)))
    tr.step()  # the last iteration: audited
    (_, dkw), = seen["decompose_mc"]
    assert (dkw["benefit_bins"], dkw["alpha"]) == (2, 0.2)
    (_, gkw), = seen["measure_groups"]
    assert (gkw["bins"], gkw["alpha"]) == (2, 0.2)
    assert {a[2] for a, _ in seen["visit_cells"]} == {2}


# ------------------------------------------------- eval_every lets the multipliers act
def _multipliers(system, **kw):
    res = train_system(system, TrainConfig(algo="ppo-c", iterations=3, n_individuals=48,
                                           horizon=1, n_epochs=1, audit_n=200,
                                           constraints=("abs_C<=0.001",), **kw))
    return res.history["lagrange_multiplier"].tolist()


def test_eval_every_1_moves_the_multiplier_from_the_first_iteration(tri):
    """abs_C <= 0.001 fails on every audit: with eval_every 1 the multiplier is > 0 after
    iteration 1 and acts on iterations 2 and 3; with the trainer's default 5 (all a spec
    could give before) iterations 1 and 2 train with a zero multiplier, and only the last
    iteration is audited."""
    new = _multipliers(tri.make_sim(1), eval_every=1)
    old = _multipliers(tri.make_sim(1))
    assert new[0] > 0 and new[1] > new[0]
    assert old[:2] == [0.0, 0.0] and old[2] > 0


def test_gate_retrain_passes_the_spec_audits_and_pair_to_the_trainer(tri, monkeypatch):
    """End to end: the gate's retrain trains with [retrain] eval_every / audit_n, the
    spec's bins and alpha, and the pair its audit of the failing policy compared; its
    multiplier acts from iteration 2 on (before: 0 until the last iteration)."""
    train_system(tri.make_sim(1), TrainConfig(algo="ppo", iterations=1, n_individuals=48,
                                              horizon=1, audit_n=200), out="run")
    seen = []
    real = retrain_mod.train

    def spy(config, **kw):
        res = real(config, **kw)
        seen.append((config, res))
        return res

    monkeypatch.setattr(retrain_mod, "train", spy)
    gate = run_gate([_spec("eval_every = 1\naudit_n = 150")], retrain=True)
    (config, res), = seen
    before = gate.entries[0].before
    groups = ("A", "B", "C")
    assert config.start_pair == tuple(groups[g] for g in before.decomposition.pair)
    assert config.start_pair != ("A", "B") and config.pair is None
    assert (config.eval_every, config.audit_n) == (1, 150)
    assert (config.audit_bins, config.audit_alpha) == (2, 0.1)
    assert res.history["lagrange_multiplier"].iloc[0] > 0
    seen.clear()
    run_gate([_spec()], retrain=True)  # no eval_every: the trainer's 5
    (config, res), = seen
    assert config.eval_every == 5 and config.audit_n == 200  # [engine] n with thresholds
    assert res.history["lagrange_multiplier"].tolist()[:2] == [0.0, 0.0]
