"""One hallway, checked again: each guarantee in one function every door calls.

- the simulator contract (:meth:`causalfair.systems.System.check_contract`): the command
  line checked it, an audit spec and ``cf.decompose`` & co. on the exact engine did not;
- the engine choice (:func:`causalfair._validation.engine_for`): ``cf.decompose``,
  ``cf.attribute`` and the audit spec each had a copy with their own words and classes;
- the z quantile of an interval (:func:`causalfair._validation.z_quantile`): inline copies;
- a torch checkpoint read safely (:func:`causalfair.policies.checkpoint.read_pt`): the
  retrain's ``.pt`` -> ``.npz`` conversion called ``torch.load`` itself;
- an audit spec file read (:func:`causalfair.audit.spec.read_spec_file`): ``--reproduce``
  parsed it a second way.
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair._validation import engine_for, z_quantile
from causalfair.errors import CausalfairError, InputError, SpecError
from tests.conftest import clinic_module

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "causalfair"

# --------------------------------------------------------------- the simulator contract
#: A clinic (docs/examples/clinic.py) whose simulator's step returns one gain too few: its
#: tabular model is fine, so only the contract check can tell.
BROKEN = textwrap.dedent('''
    import importlib.util, sys
    from pathlib import Path
    import causalfair as cf

    _spec = importlib.util.spec_from_file_location("clinic_hw4_base", CLINIC)
    clinic = importlib.util.module_from_spec(_spec)
    sys.modules["clinic_hw4_base"] = clinic
    _spec.loader.exec_module(clinic)

    class Broken(clinic.ClinicSimulator):
        def step(self, state, decisions, noise):
            r = super().step(state, decisions, noise)
            return cf.StepResult(state=r.state, reward=r.reward, gain=r.gain[:-1], info=r.info)

    def make_broken(levels: int = 5):
        return clinic.make_clinic(levels).with_(simulator=lambda: Broken(levels))
''')

WRONG = "simulator Broken.step: wrong shape: StepResult.gain has shape (63,), expected (64,)"


@pytest.fixture(scope="module")
def broken_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("hw4broken")
    (d / "brokenclinic_hw4.py").write_text(
        f"CLINIC = {str(ROOT / 'docs/examples/clinic.py')!r}\n" + BROKEN, encoding="utf-8")
    (d / "b.toml").write_text('name = "b"\n[system]\nfactory = "brokenclinic_hw4:make_broken"\n'
                              '[policy]\nbuiltin = "uniform"\n', encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def broken(broken_dir):
    return cf.systems.make("brokenclinic_hw4:make_broken", search_path=broken_dir)


def test_the_command_line_refuses_the_broken_simulator(broken_dir, cli_here):
    r = cli_here("decompose", "--system", "brokenclinic_hw4:make_broken", "--policy", "uniform",
                 cwd=broken_dir)
    assert r.returncode == 2 and WRONG in r.stderr


def test_an_audit_spec_refuses_it_as_the_command_line_does(broken_dir, cli_here):
    """Was audited on the exact engine (exit 0 or 1, numbers printed)."""
    with pytest.raises(CausalfairError) as exc:
        cf.audit(broken_dir / "b.toml")
    assert WRONG in str(exc.value) and "b.toml: the audit failed" in str(exc.value)
    r = cli_here("audit", "b.toml", "--no-report", cwd=broken_dir)
    assert r.returncode == 2 and WRONG in r.stderr


@pytest.mark.parametrize("door", ["decompose", "benefit_fairness", "compare_groups",
                                  "attribute"])
def test_the_python_doors_refuse_it_on_the_exact_engine(broken, door):
    """Was: C = -0.2466 (decompose), Lambda 0.0, the worst pair, an attribution."""
    args = (broken, "uniform") + (("never",) if door == "attribute" else ())
    with pytest.raises(CausalfairError, match=WRONG.replace("(", r"\(").replace(")", r"\)")):
        getattr(cf, door)(*args, horizon=3)


def test_the_contract_check_keeps_a_good_system_and_its_numbers():
    with clinic_module("clinic_hw4_good") as mod:
        system = mod.make_clinic()
        dec = cf.decompose(system, "uniform", horizon=4)
        exact = cf.decompose(system.tabular, cf.parse_policy("uniform", system.tabular),
                             horizon=4)
    assert dec.C == exact.C and dec.engine == "exact"


# ------------------------------------------------------------------- the engine choice
def _system_without_tabular():
    return cf.systems.make("attention-1")


@pytest.mark.parametrize("door", ["decompose", "benefit_fairness", "attribute"])
def test_an_unknown_engine_is_refused_in_one_wording(door):
    """cf.decompose raised ModelError, cf.attribute its own InputError."""
    system = cf.lending_setting("lending-1").tabular
    args = (system, "uniform") + (("never",) if door == "attribute" else ())
    with pytest.raises(InputError) as exc:
        getattr(cf, door)(*args, engine="fast")
    assert type(exc.value) is InputError
    assert str(exc.value) == "engine: bad value 'fast'; allowed values: auto, exact, mc."


def test_exact_without_a_tabular_model_is_refused_in_one_wording():
    system = _system_without_tabular()
    with pytest.raises(InputError) as ref:
        engine_for(system, "exact")
    for fn, args in ((cf.decompose, (system, "uniform")),
                     (cf.attribute, (system, "uniform", "never"))):
        with pytest.raises(InputError) as exc:
            fn(*args, engine="exact")
        assert str(exc.value) == str(ref.value)
    assert "'attention-1' has no tabular model" in str(ref.value)


def test_the_spec_door_names_its_key_with_the_same_rule(tmp_path):
    spec = tmp_path / "att.toml"
    spec.write_text('name = "att"\n[system]\nid = "attention-1"\n[policy]\nbuiltin = '
                    '"uniform"\n[engine]\nkind = "exact"\n', encoding="utf-8")
    with pytest.raises(SpecError) as exc:
        cf.audit(spec)
    msg = str(exc.value)
    assert msg == (f"audit spec {spec}: [engine] kind: bad value 'exact'; system "
                   "'attention-1' has no tabular model of independent units, so only the "
                   "Monte Carlo engine applies (use kind 'mc' or 'auto').")


# ------------------------------------------------------------- a pair of groups named
def test_a_threshold_key_pair_is_refused_as_every_pair_is(tmp_path, cli_here):
    """A threshold key's pair had its own refusal ("pair 'B-X': not two of the groups"),
    beside --pair's, [engine] pair's and pair='s (resolve_pair); "B-B" too."""
    from causalfair.audit.result import display_path
    from tests.tri_system import tri_source

    (tmp_path / "tri.py").write_text(tri_source(1), encoding="utf-8")
    fix = ('name two of the groups A, B, C, the first minus the second, e.g. "C-A" or '
           '["C", "A"].')
    r = cli_here("decompose", "--system", "tri:make", "--policy", "tri:policy", "--pair", "B-X",
                 cwd=tmp_path)
    assert r.returncode == 2 and f"--pair: 'B-X' names no two groups; {fix}" in r.stderr
    for key in ("abs_C[B-X]", "abs_C[B-B]"):
        spec = tmp_path / "t.toml"
        spec.write_text('name = "tri"\n[system]\nfactory = "tri:make"\n[policy]\nfactory = '
                        f'"tri:policy"\n[thresholds]\n"{key}" = 0.1\n', encoding="utf-8")
        with pytest.raises(SpecError) as exc:
            cf.audit(spec)
        # the spec named relative to the working directory (docs/ci-gate.md), found before
        # the audit runs (causalfair.audit.run.check_on_system)
        assert str(exc.value) == (f"audit spec {display_path(spec)}: [thresholds] {key}: "
                                  f"'{key[6:-1]}' names no two groups; {fix}")
    g = cf.compare_groups(cf.systems.make("tri:make", search_path=tmp_path), "tri:policy")
    with pytest.raises(InputError, match="^pair: 'B-X' names no two groups; name two"):
        g.quantity("B-X", "C")
    assert g.quantity(("B", "A"), "C") == g.quantity("B-A", "C")  # as every pair= takes it


# ---------------------------------------------------------------------- the z quantile
def _calls_inv_cdf(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and n.attr == "inv_cdf"]


def test_the_z_quantile_has_one_home():
    found = {str(p.relative_to(PKG)): lines for p in sorted(PKG.rglob("*.py"))
             if (lines := _calls_inv_cdf(p))}
    assert set(found) == {"_simultaneous.py"}, found  # z_quantile and pair_z read it there


def test_audit_and_groups_intervals_use_the_shared_quantile():
    """Monte Carlo intervals at alpha = 0.2: estimate +- z_quantile(0.2) * se, in the audit's
    quantities and in every pair of the group comparison."""
    with clinic_module("clinic_hw4_z") as mod:
        system = mod.make_clinic()
        r = cf.audit({"name": "mc", "horizon": 3, "policy": {"builtin": "uniform"},
                      "engine": {"kind": "mc", "n": 400, "alpha": 0.2},
                      "thresholds": {"max_abs_C": 10.0}}, system=system)
    z = z_quantile(0.2)
    assert z == pytest.approx(1.2815515655446004, rel=1e-15)
    e, lo, hi, se = r.quantities["C"]
    assert se > 0 and (lo, hi) == pytest.approx((e - z * se, e + z * se), rel=0, abs=1e-15)
    g = r.group_comparison
    assert g is not None and g.level == pytest.approx(0.8)
    for q in g.pairs.values():
        e, lo, hi, se = q["C"]
        assert (lo, hi) == pytest.approx((e - z * se, e + z * se), rel=0, abs=1e-15)


# ------------------------------------------------------------- the safe checkpoint read
def test_the_retrain_conversion_reads_the_pt_without_torch_load(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from causalfair.audit.retrain import _pt_to_npz
    from causalfair.policies.checkpoint import FeatureEncoding, mlp, save_checkpoint, write_npz

    pt = tmp_path / "net.pt"
    save_checkpoint(pt, mlp(9, (8,), 2), architecture={
        "type": "mlp", "input_dim": 9, "hidden": [8], "output_dim": 2, "activation": "tanh"},
        encoding=FeatureEncoding("onehot", 7, 2))
    ref = torch.load(pt, map_location="cpu", weights_only=True)

    def refuse(*a, **k):
        raise AssertionError("torch.load called: not the safe reader")
    monkeypatch.setattr(torch, "load", refuse)
    out = _pt_to_npz(pt, tmp_path / "net.npz")
    write_npz(tmp_path / "old.npz", {k: v.numpy() for k, v in ref["state_dict"].items()},
              json.loads(ref["meta_json"]))  # what the conversion wrote with torch.load
    assert out.read_bytes() == (tmp_path / "old.npz").read_bytes()
    with np.load(out, allow_pickle=False) as z:
        assert json.loads(str(z["meta_json"])) == json.loads(ref["meta_json"])
        for k, v in ref["state_dict"].items():
            np.testing.assert_array_equal(z[k], v.numpy())
            assert z[k].dtype == v.numpy().dtype
    a, _ = cf.load_checkpoint(pt)
    b, _ = cf.load_checkpoint(out)
    obs = cf.Observation(group=np.repeat([0, 1], 7), level=np.tile(np.arange(7), 2))
    np.testing.assert_array_equal(a.action_probs(obs), b.action_probs(obs))


def test_the_retrain_conversion_refuses_a_deep_meta_as_a_checkpoint_does(tmp_path):
    torch = pytest.importorskip("torch")
    from causalfair.audit.retrain import _pt_to_npz
    from causalfair.errors import CheckpointError

    pt = tmp_path / "deep.pt"
    torch.save({"state_dict": {}, "meta_json": "[" * 500 + "]" * 500}, pt)
    with pytest.raises(CheckpointError, match="nested more than 100 deep"):
        _pt_to_npz(pt, tmp_path / "deep.npz")
    with pytest.raises(CheckpointError, match="nested more than 100 deep"):
        cf.load_checkpoint(pt)


# ------------------------------------------------------------------ the spec file read
def test_reproduce_reads_the_spec_file_as_the_spec_loader_does(tmp_path):
    from causalfair.audit.reproduce import _check_spec_file
    from causalfair.audit.spec import read_spec_file

    deep = tmp_path / "deep.toml"
    deep.write_text('name = "deep"\nx = ' + "[" * 300 + "]" * 300 + "\n", encoding="utf-8")
    with pytest.raises(SpecError) as a:
        read_spec_file(deep)
    with pytest.raises(SpecError) as b:
        cf.audit(deep)
    with pytest.raises(SpecError) as c:
        _check_spec_file(str(deep), {}, None, "audit.json")
    assert str(a.value) == str(b.value) == str(c.value)
    ok = tmp_path / "ok.toml"
    ok.write_text('name = "ok"\nhorizon = 3\n', encoding="utf-8")
    assert read_spec_file(ok) == {"name": "ok", "horizon": 3}


@pytest.mark.parametrize("value", ["0", "-2", "2.0", "true", '"3"'])
def test_the_spec_horizon_reads_as_every_spec_integer(tmp_path, value):
    spec = tmp_path / "h.toml"
    spec.write_text(f'name = "h"\nhorizon = {value}\n', encoding="utf-8")
    from causalfair.audit.spec import load_spec

    with pytest.raises(SpecError) as exc:
        load_spec(spec)
    assert str(exc.value).endswith("horizon: bad value " + {
        "0": "0", "-2": "-2", "2.0": "2.0", "true": "True", '"3"': "'3'"}[value]
        + "; allowed values: an integer >= 1.")
