"""The pair a gate judges is the pair a repair optimises: ``TrainConfig.pair`` (the generic
trainer's audits, penalties and plain-key constraints), ``causalfair train --pair`` and
``gate --retrain`` on a spec with ``[engine] pair`` (docs/training.md, docs/audit.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from causalfair.audit import retrain as retrain_mod
from causalfair.audit.gate import run_gate
from causalfair.audit.spec import load_spec
from causalfair.engines.effects import decompose
from causalfair.engines.groups import compare
from causalfair.errors import ConfigError
from causalfair.policies.checkpoint import load_checkpoint
from causalfair.policies.grid import policy_table
from causalfair.thresholds import Constraint
from causalfair.train.config import TrainConfig
from causalfair.train.generic import SystemTrainer
from causalfair.train.system_run import train_system
from tests.train.test_repair_thresholds import MODULE

SPEC = '''name = "g"
[system]
factory = "tri_rp:make_sim"
[policy]
checkpoint = "run/checkpoint.pt"
[engine]
kind = "mc"
n = 300
seed = 0
pair = ["B", "A"]
[thresholds]
abs_C = 0.001
[retrain]
algo = "ppo-c"
iterations = 1
betas = { C = 1.0 }
min_utility = -inf
'''


@pytest.fixture
def tri(tmp_path, monkeypatch):
    """The module of the three-group system (groups A, B, C; ``make``: tabular,
    ``make_sim``: Monte Carlo only), importable as ``tri_rp``."""
    (tmp_path / "tri_rp.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import tri_rp

    yield tri_rp
    sys.modules.pop("tri_rp", None)


def _exact_c(system, policy, name):
    """The exact C of the pair ``name`` ("B-A") of ``policy`` on the tabular ``system``, and
    the pair the engine compares by default."""
    m = system.tabular
    dec = decompose(m, policy_table(policy, m, 1), 1)
    return compare(dec).quantity(name, "C")[0], tuple(int(g) for g in dec.pair)


def test_a_trainer_given_a_pair_audits_that_pair_at_every_audit(tri):
    """Before, every audit compared the engine's own pair (the largest and smallest V^pi:
    here never B-A), and so did the C penalty; now both are the configured pair's."""
    system = tri.make(1)
    tr = SystemTrainer(system, TrainConfig(algo="ppo-c", iterations=3, eval_every=1,
                                           n_individuals=48, horizon=1, pair=("B", "A")))
    assert tr.pair == (1, 0)  # the penalty's pair from the first iteration on
    for _ in range(3):
        row = tr.step()
        c_ba, default = _exact_c(system, tr.policy(), "B-A")
        assert default != (1, 0)  # the engine alone would compare another pair
        assert row["C"] == pytest.approx(c_ba, abs=1e-12)
        assert tr.pair == (1, 0)
    # "A-B" as thresholds name a pair is the same check, the other order
    tr = SystemTrainer(system, TrainConfig(algo="ppo", iterations=1, n_individuals=48,
                                           horizon=1, pair="A-B"))
    assert tr.step()["C"] == pytest.approx(-_exact_c(system, tr.policy(), "B-A")[0], abs=1e-12)


def test_a_monte_carlo_trainer_audits_its_pair(tri):
    system = tri.make_sim(1)
    res = train_system(system, TrainConfig(algo="ppo-c", iterations=1, n_individuals=48,
                                           horizon=1, audit_n=200, pair=["C", "A"]))
    assert res.extra["pair"] == "C-A" and res.config.pair == ("C", "A")


@pytest.mark.parametrize("pair, named", [
    (("B", "Z"), "'Z' is not one of the groups"),
    ("A-A", "names no two groups"),
])
def test_a_bad_pair_is_refused_in_one_line_naming_the_groups(tri, pair, named):
    with pytest.raises(ConfigError) as info:
        SystemTrainer(tri.make(1), TrainConfig(horizon=1, pair=pair))
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("pair: ") and named in msg, msg
    assert "groups A, B, C" in msg, msg
    with pytest.raises(ConfigError, match="pair: bad value 3; give two group names"):
        TrainConfig(pair=3)


def test_the_lending_trainer_takes_its_two_groups_in_either_order():
    from causalfair.train.core import Trainer

    assert Trainer(TrainConfig(horizon=20, pair=("s-", "s+"))).G == 2
    with pytest.raises(ConfigError, match=r"pair: 'B' is not one of the groups; name two of "
                                          r"the groups s\+, s-"):
        Trainer(TrainConfig(horizon=20, pair=("s+", "B")))


def test_gate_retrain_trains_with_the_spec_pair(tri, monkeypatch):
    """Before, the retrain's config had no pair: the repair optimised the trainer's own."""
    train_system(tri.make_sim(1), TrainConfig(algo="ppo", iterations=1, n_individuals=48,
                                              horizon=1, audit_n=200), out="run")
    spec_path = Path("g.toml")
    spec_path.write_text(SPEC, encoding="utf-8")
    seen = []
    real = retrain_mod.train

    def spy(config, **kw):
        seen.append(config)
        return real(config, **kw)

    monkeypatch.setattr(retrain_mod, "train", spy)
    gate = run_gate([spec_path], retrain=True)
    (config,) = seen
    assert config.pair == ("B", "A") and config.constraints == ("abs_C<=0.001",)
    entry = gate.entries[0]
    assert entry.after is not None, entry.to_dict()
    assert entry.after.decomposition.pair == (1, 0)


def test_the_exact_repair_imposes_plain_keys_on_the_spec_pair(tri):
    Path("run").mkdir()
    Path("run/checkpoint.pt").write_bytes(b"")  # the spec names one; only the spec is read
    Path("x.toml").write_text(SPEC.replace('"tri_rp:make_sim"', '"tri_rp:make"'),
                              encoding="utf-8")
    spec = load_spec("x.toml")
    cons = [Constraint("abs_C", 0.1), Constraint("max_abs_C", 0.5),
            Constraint("Lambda[C-A]", 0.2), Constraint("C", 0.0)]
    out = retrain_mod._on_spec_pair(cons, spec, ("A", "B", "C"))
    assert [k.key for k in out] == ["abs_C[B-A]", "max_abs_C", "Lambda[C-A]", "C[B-A]"]
    assert [k.bound for k in out] == [0.1, 0.5, 0.2, 0.0]


def test_train_command_pair(tri, cli_here, tmp_path):
    bad = cli_here("train", "--system", "tri_rp:make", "--algo", "ppo", "--pair", "B-Z",
                   "--iterations", "1", "--out", "bad", cwd=tmp_path)
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and len(lines) == 1, bad.stderr
    assert "pair: 'B-Z' names no two groups" in lines[0] and "A, B, C" in lines[0], bad.stderr
    ok = cli_here("train", "--system", "tri_rp:make", "--algo", "ppo-c", "--pair", "B-A",
                  "--iterations", "1", "--individuals", "48", "--horizon", "1",
                  "--no-progress", "--out", "ok", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads((tmp_path / "ok" / "config.json").read_text())["pair"] == "B-A"
    row = json.loads((tmp_path / "ok" / "metrics.jsonl").read_text().splitlines()[-1])
    pol = load_checkpoint(tmp_path / "ok" / "checkpoint.pt", tri.make(1).tabular)[0]
    assert row["C"] == pytest.approx(_exact_c(tri.make(1), pol, "B-A")[0], abs=1e-6)
    exact = cli_here("train", "--system", "tri_rp:make", "--algo", "exact", "--pair", "B-A",
                     "--constraint", "abs_C<=0.1", "--out", "ex", cwd=tmp_path)
    assert exact.returncode == 2 and "abs_C[B-A]<=0.05" in exact.stderr, exact.stderr
