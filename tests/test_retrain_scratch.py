"""`gate --retrain` of a policy that is not a checkpoint: `[retrain] init = "scratch"`
trains a new network from a random init (a credit team's scikit-learn-style function, a
builtin), writes it beside the spec as SPECSTEM.retrained-ALGO-N.pt and re-audits it;
without the opt-in the refusal names it (docs/ci-gate.md, `--retrain`)."""

from __future__ import annotations

import hashlib
import json
import shutil
import textwrap
from pathlib import Path

import pytest

import causalfair as cf
from causalfair.audit.retrain import retrain_target
from causalfair.audit.spec import load_spec
from causalfair.errors import SpecError
from tests.train.test_repair import small_model as repair_model

T = 5
BOUND = 0.3  # |C| of the failing policy is 0.52; the constant "never" table's 0.246 meets it
MOD = "scratch_credit_policy"
POLICY = (
    "import numpy as np\n"
    "def make(cut=0.5):\n"
    "    def approve(obs):  # a scorecard that approves group 0 only: a large C\n"
    "        return (obs.group == 0).astype(float)\n"
    "    return approve\n")


def small_model(seed=5, K=5):
    """tests/train/test_repair.py's random model, at seed 5."""
    return repair_model(seed=seed, K=K)


def _approve(obs):
    return (obs.group == 0).astype(float)


def _case(folder: Path, retrain: str, policy: str = f'factory = "{MOD}:make"',
          thresholds: str = f"abs_C = {BOUND}") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cf.systems.save_tabular(folder / "model.npz", small_model())
    (folder / f"{MOD}.py").write_text(POLICY)
    spec = folder / "credit.toml"
    spec.write_text(textwrap.dedent(f"""\
        name = "credit"
        horizon = {T}
        [system]
        tabular = "model.npz"
        [policy]
        {policy}
        [engine]
        kind = "exact"
        [thresholds]
        {thresholds}
        [retrain]
        """) + textwrap.dedent(retrain))
    return spec


EXACT = """\
    algo = "exact"
    init = "scratch"
    hidden = [8]
    starts = 0
    iterations = 2
    """
PPO = """\
    algo = "ppo-c"
    init = "scratch"
    hidden = [8]
    activation = "relu"
    iterations = 2
    eval_every = 1
    min_utility = -inf
    """


@pytest.fixture
def gate(cli_here, monkeypatch):
    monkeypatch.setenv("CAUSALFAIR_PROGRESS_SECONDS", "0")

    def run(spec: Path, *extra: str):
        return cli_here("gate", spec.name, "--retrain", "--json", "gate.json", "--junit",
                        "gate.xml", *extra, cwd=spec.parent)

    return run


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_exact_from_scratch_repairs_a_factory_policy_beside_the_spec(tmp_path, gate):
    spec = _case(tmp_path, EXACT)
    model = small_model()
    failing = cf.decompose(model, _approve, T, eps="auto")
    assert abs(failing.C) > BOUND  # the policy fails the gate
    out = gate(spec, "--accept-repaired", "--reports", "rep")
    assert out.returncode == 0, out.stdout + out.stderr
    new = tmp_path / "credit.retrained-exact-1.pt"
    assert new.is_file() and sorted(p.name for p in tmp_path.glob("*.pt")) == [new.name]
    assert "retrained checkpoint: credit.retrained-exact-1.pt" in out.stdout
    entry = json.loads((tmp_path / "gate.json").read_text())["specs"][0]
    assert entry["retrained_checkpoint"] == new.name
    assert entry["before"]["overall"] == "FAIL" and entry["overall"] == "PASS"
    assert entry["checkpoint_sha256"] is None  # the policy under version control has none
    assert entry["after"]["checkpoint_sha256"] == _sha(new)
    # the repair's "original" is the factory policy's numbers, not the random network's
    assert entry["repair"]["original"]["C"] == pytest.approx(failing.C, abs=1e-12)
    assert entry["repair"]["original"]["utility"] == pytest.approx(failing.total_utility,
                                                                   abs=1e-12)
    assert new.name in (tmp_path / "gate.xml").read_text()
    assert new.name in (tmp_path / "rep" / "credit" / "report.md").read_text()
    # the checkpoint loads and audits on its own: the numbers of the gate's re-audit
    pol, meta = cf.load_checkpoint(new)
    assert meta["architecture"]["hidden"] == [8] and meta["architecture"]["activation"] == "tanh"
    assert meta["encoding"]["name"] == "onehot"
    assert meta["metadata"]["repaired_from"] == {"checkpoint": None, "sha256": None,
                                                 "policy": f"{MOD}:make"}
    d = cf.decompose(model, pol, T, eps="auto")
    assert abs(d.C) <= BOUND
    after = {v["key"]: v for v in entry["verdicts"]}
    assert abs(d.C) == pytest.approx(after["abs_C"]["estimate"], abs=1e-12)
    audit_dir = tmp_path / "rep" / "credit"
    doc = json.loads((audit_dir / "audit.json").read_text())
    assert doc["extra"]["retrained_from"]["policy"] == f"{MOD}:make"
    assert doc["extra"]["retrained_from"]["retrain"]["init"] == "scratch"


def test_without_the_opt_in_the_refusal_names_it(tmp_path, gate):
    spec = _case(tmp_path, 'algo = "exact"\n')
    out = gate(spec)
    assert out.returncode == 2
    assert "cannot be retrained" in out.stderr
    assert '[retrain] init = "scratch"' in out.stderr
    assert not list(tmp_path.glob("*.pt"))
    # the failing audit's report offers the same option
    from causalfair.cli import main

    assert main(["audit", str(spec), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Repair options: the policy is not a checkpoint" in md
    assert 'set [retrain] init = "scratch"' in md.replace("\\", "")


def _twice(tmp_path: Path, gate, retrain: str, policy: str, name: str) -> list[str]:
    """The gate run on the same case in two folders: each checkpoint's SHA-256 (the name
    in its metadata is the file's, so the folders differ, not the names)."""
    shas = []
    for sub in ("a", "b"):
        spec = _case(tmp_path / sub, retrain, policy=policy)
        out = gate(spec)
        assert out.returncode == 1, out.stdout + out.stderr  # the policy itself still fails
        new = spec.parent / name
        entry = json.loads((spec.parent / "gate.json").read_text())["specs"][0]
        assert entry["retrained_checkpoint"] == new.name
        shas.append(_sha(new))
    return shas


def test_ppo_from_scratch_of_a_builtin_same_seed_same_bytes(tmp_path, gate):
    """PPO-C on the generic trainer, from a random init, for a builtin policy: the
    network of [retrain] hidden and activation over the system's own inputs, its audit the
    gate's re-audit; the same seed gives the same bytes; a third run the next free name."""
    name = "credit.retrained-ppo-c-1.pt"
    shas = _twice(tmp_path, gate, PPO, 'builtin = "always"', name)
    assert shas[0] == shas[1]
    new = tmp_path / "b" / name
    pol, meta = cf.load_checkpoint(new)
    assert meta["architecture"]["hidden"] == [8]
    assert meta["architecture"]["activation"] == "relu"
    assert meta["encoding"]["name"] == "onehot"  # the system's own inputs
    entry = json.loads((tmp_path / "b" / "gate.json").read_text())["specs"][0]
    d = cf.decompose(small_model(), pol, T, eps="auto")
    assert abs(d.C) == pytest.approx({v["key"]: v for v in entry["verdicts"]}["abs_C"]["estimate"],
                                     abs=1e-12)
    assert entry["before"]["overall"] == "FAIL"
    out = gate(tmp_path / "b" / "credit.toml")
    assert (tmp_path / "b" / "credit.retrained-ppo-c-2.pt").is_file()
    # no checkpoint under version control: the table says what holds the exit code
    assert "the exit code counts the spec's policy until its [policy] names the repaired " \
           "checkpoint or you pass --accept-repaired)" in out.stdout, out.stdout
    assert _sha(new) == shas[1]  # never overwritten


@pytest.mark.slow
def test_exact_from_scratch_same_seed_same_bytes(tmp_path, gate):
    shas = _twice(tmp_path, gate, EXACT, f'factory = "{MOD}:make"', "credit.retrained-exact-1.pt")
    assert shas[0] == shas[1]


def test_scratch_on_a_checkpoint_policy_ignores_its_weights(tmp_path, gate):
    """A checkpoint policy with init = "scratch": a new network of [retrain] hidden (a warm
    start refuses another architecture), beside the checkpoint in its format (.npz)."""
    import torch

    torch.manual_seed(0)
    m = small_model()
    net = cf.policies.checkpoint.mlp(m.n_levels + 2, (4,), 1)
    cf.save_checkpoint(tmp_path / "pol.npz", net,
                       encoding=cf.FeatureEncoding("onehot", n_levels=m.n_levels, n_groups=2),
                       architecture={"type": "mlp", "input_dim": m.n_levels + 2, "hidden": [4],
                                     "activation": "tanh", "output_dim": 1})
    spec = _case(tmp_path, PPO, policy='checkpoint = "pol.npz"',
                 thresholds="abs_C = 0.0001")  # whatever it does, it fails
    before = _sha(tmp_path / "pol.npz")
    out = gate(spec)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "the exit code counts the checkpoint under version control until you commit the " \
           "repair or pass --accept-repaired)" in out.stdout, out.stdout
    new = tmp_path / "pol.retrained-ppo-c-1.npz"
    assert new.is_file() and not list(tmp_path.glob("credit.retrained-*"))
    assert cf.load_checkpoint(new)[1]["architecture"]["hidden"] == [8]
    assert _sha(tmp_path / "pol.npz") == before


def test_spec_keys_are_checked(tmp_path):
    for retrain, match in [
        ('algo = "exact"\nhidden = [8]\n', r'\[retrain\] hidden: a warm start trains.*init = "scratch"'),
        ('algo = "exact"\nactivation = "relu"\n', r"\[retrain\] activation: a warm start"),
        ('algo = "exact"\ninit = "fresh"\n', r'\[retrain\] init: bad value .*"scratch"'),
        ('algo = "exact"\ninit = "scratch"\nhidden = []\n', r"\[retrain\] hidden: bad value"),
        ('algo = "exact"\ninit = "scratch"\nhidden = [8, true]\n', r"\[retrain\] hidden: bad value"),
        ('algo = "exact"\ninit = "scratch"\nactivation = "gelu"\n',
         r"\[retrain\] activation: bad value 'gelu'; allowed values: tanh, relu"),
    ]:
        shutil.rmtree(tmp_path / "c", ignore_errors=True)
        with pytest.raises(SpecError, match=match):
            load_spec(_case(tmp_path / "c", retrain))
    # absent keys stay absent: a warm-starting spec's [retrain] reads as before
    r = load_spec(_case(tmp_path / "d", 'algo = "exact"\n')).retrain
    assert not {"init", "hidden", "activation"} & set(r)


def test_target_beside_the_spec_or_its_base_dir(tmp_path):
    spec = load_spec(_case(tmp_path, EXACT))
    assert retrain_target(spec) == tmp_path.resolve() / "credit.retrained-exact-1.pt"
    taken = [retrain_target(spec)]
    assert retrain_target(spec, taken).name == "credit.retrained-exact-2.pt"
    raw = {"name": "py", "horizon": T, "system": {"tabular": "model.npz"},
           "policy": {"builtin": "always"}, "retrain": {"algo": "exact", "init": "scratch"}}
    py = load_spec(raw, base_dir=tmp_path)
    assert retrain_target(py) == tmp_path.resolve() / "py.retrained-exact-1.pt"


def test_ppo_from_scratch_on_the_lending_trainer(tmp_path, gate):
    """A builtin policy on a lending setting: the lending settings' own trainer from a
    random init, the network of [retrain] hidden over the one-hot (level, group)."""
    spec = tmp_path / "lend.toml"
    spec.write_text(textwrap.dedent("""\
        name = "lend"
        horizon = 4
        [model]
        setting = "lending-1"
        [policy]
        builtin = "threshold:0.5"
        [thresholds]
        abs_C = 0.0001
        [retrain]
        algo = "ppo-c"
        init = "scratch"
        iterations = 1
        hidden = [16]
        min_utility = -inf
        allow_worse = ["abs_C"]
        """))
    out = gate(spec)
    assert out.returncode == 1, out.stdout + out.stderr
    new = tmp_path / "lend.retrained-ppo-c-1.pt"
    pol, meta = cf.load_checkpoint(new)
    assert meta["architecture"]["hidden"] == [16] and meta["encoding"]["name"] == "onehot"
    assert meta["metadata"]["setting"] == "lending-1"
    entry = json.loads((tmp_path / "gate.json").read_text())["specs"][0]
    assert entry["retrained_checkpoint"] == new.name
    d = cf.decompose(cf.lending_setting("lending-1").tabular, pol, 4)
    assert abs(d.C) == pytest.approx({v["key"]: v for v in entry["verdicts"]}["abs_C"]["estimate"],
                                     abs=1e-12)


def test_exact_from_scratch_on_a_system_with_features(tmp_path, gate):
    """The clinic (three actions, two continuous features, a tabular model): the new
    network reads the system's feature columns by name, standardised over its grid."""
    shutil.copy(Path(__file__).parents[1] / "docs" / "examples" / "clinic.py",
                tmp_path / "scratch_clinic.py")
    (tmp_path / "scratch_triage.py").write_text(
        "import numpy as np\n"
        "def make():\n"
        "    return lambda obs: np.eye(3)[np.where(obs.group == 0, 2, 0)]\n")
    spec = tmp_path / "clinic.toml"
    spec.write_text(textwrap.dedent("""\
        name = "clinic"
        [system]
        factory = "scratch_clinic:make_clinic"
        params = { levels = 3 }
        [policy]
        factory = "scratch_triage:make"
        [engine]
        kind = "exact"
        [thresholds]
        abs_C = 0.05
        [retrain]
        algo = "exact"
        init = "scratch"
        starts = 0
        iterations = 2
        hidden = [8]
        min_utility = -inf
        """))
    out = gate(spec, "--accept-repaired")
    assert out.returncode == 0, out.stdout + out.stderr
    pol, meta = cf.load_checkpoint(tmp_path / "clinic.retrained-exact-1.pt")
    enc = meta["encoding"]
    assert enc["name"] == "features" and enc["names"] == ["severity", "distance"]
    assert meta["architecture"]["output_dim"] == 3
    entry = json.loads((tmp_path / "gate.json").read_text())["specs"][0]
    assert entry["before"]["overall"] == "FAIL" and entry["overall"] == "PASS"


def test_own_system_scratch_spec_is_a_valid_spec(tmp_path):
    """docs/own-system.md's scikit-learn spec with [retrain] init = "scratch" reads as
    written and passes the retrain checks (the clinic has a tabular model)."""
    import re

    from causalfair.audit.retrain import check_retrain, from_scratch

    text = (Path(__file__).parents[1] / "docs" / "own-system.md").read_text(encoding="utf-8")
    block = re.search(r"```toml\n(\s*# triage\.toml, beside triage_policy\.py\n.*?)```", text,
                      re.S)
    assert block is not None
    shutil.copy(Path(__file__).parents[1] / "docs" / "examples" / "clinic.py", tmp_path)
    (tmp_path / "triage.toml").write_text(textwrap.dedent(block.group(1)))
    spec = load_spec(tmp_path / "triage.toml")
    assert from_scratch(spec) and spec.retrain["hidden"] == [32, 32]
    check_retrain(spec)  # no refusal: the opt-in is there, and the clinic is tabular
    assert retrain_target(spec).name == "triage.retrained-exact-1.pt"


def test_a_logs_spec_is_refused_with_the_route_to_a_repair(tmp_path, gate):
    """A [logs] spec audits decisions already made: --retrain refuses it before any audit,
    in one line naming the fitted model route (it crashed in the exact repair, or spoke
    of the lending settings)."""
    from causalfair.logs import simulate_logs

    simulate_logs("lending-1", "random:0.5", n_individuals=200, horizon=3, seed=1).to_csv(
        tmp_path / "log.csv", index=False)
    for algo in ("exact", "ppo-cb"):
        spec = tmp_path / "lg.toml"
        spec.write_text('name = "lg"\n[logs]\npath = "log.csv"\nn_boot = 2\n[thresholds]\n'
                        f'abs_C = 0.0001\n[retrain]\nalgo = "{algo}"\ninit = "scratch"\n',
                        encoding="utf-8")
        out = gate(spec)
        assert out.returncode == 2, out.stdout + out.stderr
        assert "lg.toml: [retrain]: a [logs] spec audits decisions already made, which " \
               "--retrain cannot change; to repair a policy, save the model fitted from the " \
               "logs (causalfair.logs.audit_logs(...).model" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and not list(tmp_path.glob("*.pt"))
