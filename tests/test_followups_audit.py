"""Follow-ups of the audit door: a [logs] spec audits a candidate checkpoint or factory
(pinned by SHA-256, named in the report), a bare registered gym id pins its module and
reads, an audit's benefit knows its unit, the positivity error names the spec's way, a
missing checkpoint is named as the spec wrote it."""

from __future__ import annotations

import hashlib
import json
import sys

import pytest

import causalfair as cf
from causalfair.logs import audit_logs, simulate_logs
from tests.test_retrain_leftovers import CSV_ENV


@pytest.fixture(scope="module")
def log():
    df = simulate_logs("lending-1", "random:0.5", 300, 4, seed=1)
    df["group"] = df["group"].astype(str)  # as read from a CSV
    return df


def _sha(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _spec(tmp_path, log, body: str, name: str = "spec.toml"):
    log.to_csv(tmp_path / "log.csv", index=False)
    spec = tmp_path / name
    spec.write_text(f'name = "t"\n[logs]\npath = "log.csv"\nn_boot = 4\n{body}\n')
    return spec


def _checkpoint(path, n_levels: int):
    pytest.importorskip("torch")
    import torch

    from causalfair.policies.nets import mlp

    torch.manual_seed(0)
    enc = cf.FeatureEncoding("onehot", n_levels=n_levels, n_groups=2)
    cf.save_checkpoint(path, mlp(enc.width, (4,), 1), encoding=enc,
                       architecture={"type": "mlp", "input_dim": enc.width, "hidden": [4],
                                     "activation": "tanh", "output_dim": 1})
    return path


POLICY_MODULE = '''
import numpy as np


class Up:
    """Approves above a level (a policy a factory makes)."""

    def __init__(self, level):
        self.level = level

    def prob_d1(self, obs):
        return (np.asarray(obs.level) >= self.level).astype(float)


def make(level=3):
    return Up(level)
'''


# ------------------------------------------------ 1. a [logs] spec's checkpoint / factory
def test_a_logs_spec_audits_a_candidate_checkpoint_as_the_python_call(log, tmp_path):
    """[logs] + [policy] checkpoint was refused ("not with [logs]")."""
    from causalfair.logs import fit_logs
    from causalfair.policies.resolver import resolve

    model = fit_logs(log)[0]
    ck = _checkpoint(tmp_path / "cand.npz", model.n_levels)
    res = cf.audit(_spec(tmp_path, log, '[policy]\ncheckpoint = "cand.npz"'))
    py = audit_logs(log, n_boot=4, seed=0, policy=resolve(ck, model).policy)
    assert res.decomposition.C == py.decomposition.C
    assert res.quantities["C"][3] == py.decomposition.se["C"] > 0
    assert res.checkpoint_sha256 == _sha(ck)
    doc = res.to_dict()
    assert doc["policy"]["checkpoint_sha256"] == _sha(ck)


def test_a_logs_spec_audits_a_candidate_factory_and_pins_its_module(log, tmp_path,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "candpol.py").write_text(POLICY_MODULE, encoding="utf-8")
    try:
        res = cf.audit(_spec(tmp_path, log, '[policy]\nfactory = "candpol:make"\n'
                                            'params = { level = 4 }'))
        from candpol import make  # the same module, imported from the spec's folder

        py = audit_logs(log, n_boot=4, seed=0, policy=make(4))
    finally:
        sys.modules.pop("candpol", None)
    assert res.decomposition.C == py.decomposition.C
    assert res.quantities["C"][3] == py.decomposition.se["C"]
    assert {"role": "policy.factory", "module": "candpol", "path": "candpol.py",
            "sha256": _sha(tmp_path / "candpol.py")} in res.inputs


def test_reproduce_refuses_a_swapped_candidate_checkpoint(log, tmp_path, monkeypatch):
    from causalfair._io import to_jsonable
    from causalfair.audit.reproduce import reproduce
    from causalfair.errors import InputError
    from causalfair.logs import fit_logs

    monkeypatch.chdir(tmp_path)
    n_levels = fit_logs(log)[0].n_levels
    _checkpoint(tmp_path / "cand.npz", n_levels)
    res = cf.audit(_spec(tmp_path, log, '[policy]\ncheckpoint = "cand.npz"'))
    (tmp_path / "rep").mkdir()
    (tmp_path / "rep" / "audit.json").write_text(json.dumps(to_jsonable(res.to_dict())))
    assert reproduce(tmp_path / "rep").identical
    import torch

    torch.manual_seed(1)  # other weights under the same name
    from causalfair.policies.nets import mlp

    enc = cf.FeatureEncoding("onehot", n_levels=n_levels, n_groups=2)
    cf.save_checkpoint(tmp_path / "cand.npz", mlp(enc.width, (4,), 1), encoding=enc,
                       architecture={"type": "mlp", "input_dim": enc.width, "hidden": [4],
                                     "activation": "tanh", "output_dim": 1})
    with pytest.raises(InputError, match="SHA-256"):
        reproduce(tmp_path / "rep")


# ------------------------------------------------ 2. the candidate is named
def test_a_logs_candidate_is_named_in_audit_json_summary_and_report(log, tmp_path):
    res = cf.audit(_spec(tmp_path, log, '[policy]\nbuiltin = "threshold:0.6"'))
    label = res.to_dict()["policy"]["label"]
    assert label == "builtin threshold:0.6 (candidate, on the model fitted from logs log.csv)"
    assert "policy: builtin threshold:0.6 (candidate" in res.summary()
    out = res.write_report(tmp_path / "rep")
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "builtin threshold:0.6 (candidate" in md
    assert "the dynamics and the policy are estimated" not in md
    assert ("the dynamics are fitted from the decision logs" in md
            and "(builtin threshold:0.6) is audited on them" in md), md


def test_a_plain_log_audit_keeps_its_label_and_methods_line(log, tmp_path):
    res = cf.audit(_spec(tmp_path, log, ""))
    assert res.to_dict()["policy"]["label"] == "logs log.csv"  # as the spec gives it
    assert "policy: from logs" in res.summary()
    from causalfair.report.explain import assumptions

    assert assumptions(res.to_dict())[0].startswith(
        "Log audit: the dynamics and the policy are estimated from the decision logs")


# ------------------------------------------------ 3. a bare registered gym id
# tests/test_retrain_leftovers.py's env that reads a CSV when constructed, under its own
# names (a registered id is global to the process)
GYM_ENV = CSV_ENV.replace("rates.csv", "rates_fu.csv").replace('"CsvEnv-v0"', '"CsvFuEnv-v0"')


def test_a_bare_registered_gym_id_pins_its_module_and_reads(tmp_path, monkeypatch):
    pytest.importorskip("gymnasium")
    import importlib

    import gymnasium

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "csvgym_fu.py").write_text(GYM_ENV, encoding="utf-8")
    (tmp_path / "rates_fu.csv").write_text("0.3,0.2", encoding="utf-8")
    (tmp_path / "g.toml").write_text(
        'name = "g"\nhorizon = 2\n[system]\ngym = "CsvFuEnv-v0"\ngroups = ["a", "b"]\n'
        '[policy]\nbuiltin = "uniform"\n[engine]\nkind = "mc"\nn = 40\n')
    try:
        importlib.import_module("csvgym_fu")  # registers CsvFuEnv-v0
        res = cf.audit(tmp_path / "g.toml")
    finally:
        sys.modules.pop("csvgym_fu", None)
        gymnasium.envs.registration.registry.pop("CsvFuEnv-v0", None)
    assert res.inputs == [
        {"role": "system.gym", "module": "csvgym_fu", "path": "csvgym_fu.py",
         "sha256": _sha(tmp_path / "csvgym_fu.py")},
        {"role": "system.gym.read", "module": "csvgym_fu", "path": "rates_fu.csv",
         "sha256": _sha(tmp_path / "rates_fu.csv")}]


# ------------------------------------------------ 4. the benefit's unit
def test_an_audits_benefit_has_the_systems_gain_unit():
    res = cf.audit({"name": "u", "horizon": 3, "system": {"id": "lending-1"},
                    "policy": {"builtin": "threshold:0.5"}})
    unit = res.system.gain.unit
    assert unit and unit != "gain units"
    assert res.benefit.gain_unit == unit


# ------------------------------------------------ 6. positivity names the spec's way
def test_a_spec_positivity_error_says_how_to_get_bounds(log, tmp_path):
    from causalfair.logs import PositivityError

    df = log.copy()
    df.loc[df["group"] == df["group"].iloc[0], "decision"] = 1  # one group always approved
    spec = _spec(tmp_path, df, "")
    with pytest.raises(PositivityError) as ei:
        cf.audit(spec)
    msg = str(ei.value)
    assert msg.startswith(f"audit spec {spec}: [logs] path: logs: positivity violated"), msg
    assert "An audit spec has no bounds option" in msg, msg
    assert "causalfair decompose --logs" in msg and "--on-positivity bounds" in msg, msg
    assert "\n" not in msg


# ------------------------------------------------ 7. a missing checkpoint, as written
def test_a_missing_checkpoint_is_named_as_the_spec_wrote_it(tmp_path):
    (tmp_path / "models").mkdir()
    spec = tmp_path / "c.toml"
    spec.write_text('name = "c"\n[system]\nid = "lending-1"\n[policy]\n'
                    'checkpoint = "models/p.pt"\n')
    with pytest.raises(cf.errors.SpecError) as ei:
        cf.audit(spec)
    msg = str(ei.value)
    assert "[policy] checkpoint: bad value 'models/p.pt'; no such file 'p.pt' in " \
           f"{tmp_path / 'models'} ('models/p.pt' is relative to the spec's folder " \
           f"{tmp_path})" in msg, msg


# ------------------------------------------------ (found on the way) audit(policy=) on logs
def test_a_policy_passed_to_a_logs_spec_is_audited_not_ignored(log, tmp_path):
    """cf.audit(logs_spec, policy="always") audited the logged policy and said so."""
    spec = _spec(tmp_path, log, "")
    res = cf.audit(spec, policy="always")
    py = audit_logs(log, n_boot=4, seed=0, policy="always")
    assert res.decomposition.C == py.decomposition.C != cf.audit(spec).decomposition.C
    assert res.to_dict()["policy"]["label"].startswith("builtin always (candidate")
    assert res.to_dict()["spec"]["resolved"]["logs_options"]["policy"] == "always"
    with pytest.raises(cf.errors.SpecError, match="system: an audit from logs fits"):
        cf.audit(spec, system="lending-1")
