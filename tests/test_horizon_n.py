"""``[benefit] horizon_n``: the n of Lambda_T's forks in an audit (a system without a
tabular model), recorded in audit.json's ``extra.Lambda_T.n``; default min([engine] n,
2000); refused without ``horizon_benefit``; a request beyond the memory limit is refused
before it runs."""

from __future__ import annotations

import sys
import textwrap

import pytest

import causalfair as cf
from causalfair.audit import load_spec
from causalfair.engines.benefit_horizon import lambda_horizon_mc
from causalfair.errors import CausalfairError, SpecError
from tests.test_own2fix import SIM

SPEC = ('name = "hn"\n[system]\nfactory = "hn_three:make"\n[policy]\nfactory = "hn_three:policy"\n'
        '[engine]\nkind = "mc"\nn = {n}\nseed = 3\n[benefit]\nhorizon_benefit = true\n{extra}')


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hn_three.py").write_text(textwrap.dedent(SIM), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("hn_three", None)
    yield tmp_path
    sys.modules.pop("hn_three", None)


def _audit(folder, n, extra=""):
    (folder / "hn.toml").write_text(SPEC.format(n=n, extra=extra), encoding="utf-8")
    return cf.audit(folder / "hn.toml")


def _forks(mod, n, pair, eps):
    """Lambda_T by forks as the audit calls it (seed 3), at ``n``."""
    return lambda_horizon_mc(mod.make(), cf.CallablePolicy(mod.policy()), n=n, seed=3,
                             pair=pair, eps=eps)


def test_horizon_n_sets_the_forks_n_and_is_recorded(folder):
    import hn_three

    res = _audit(folder, 500, "horizon_n = 300\n")
    lt = res.extra["Lambda_T"]
    assert lt["n"] == 300 and lt["engine"] == res.extra["Lambda_T"]["engine"]
    direct = _forks(hn_three, 300, res.decomposition.pair, lt["eps"])
    assert lt["estimate"] == direct.Lambda  # the audit's number is the n = 300 run's
    assert res.notions["Lambda_T"] == direct.Lambda
    # without the key: min([engine] n, 2000)
    default = _audit(folder, 500).extra["Lambda_T"]
    assert default["n"] == 500
    other = _forks(hn_three, 500, res.decomposition.pair, default["eps"])
    assert default["estimate"] == other.Lambda != direct.Lambda


def test_horizon_n_is_checked(folder):
    (folder / "a.toml").write_text('name = "a"\n[benefit]\nhorizon_n = 500\n', encoding="utf-8")
    with pytest.raises(SpecError, match=r"\[benefit\] horizon_n: bad value 500; allowed values: an "
                                        r"integer >= 2 together with horizon_benefit = true"):
        load_spec(folder / "a.toml")
    (folder / "b.toml").write_text(SPEC.format(n=500, extra="horizon_n = 1\n"), encoding="utf-8")
    with pytest.raises(SpecError, match=r"\[benefit\] horizon_n: bad value 1; allowed values: an "
                                        r"integer >= 2"):
        load_spec(folder / "b.toml")
    with pytest.raises(CausalfairError, match=r"[GT]iB of memory, over the limit"):
        _audit(folder, 500, "horizon_n = 1000000000\n")


def test_a_tabular_system_gives_the_exact_lambda_t_without_n():
    res = cf.audit({"name": "t", "horizon": 3, "system": {"id": "lending-1"},
                    "benefit": {"horizon_benefit": True, "horizon_n": 300}})
    assert res.extra["Lambda_T"]["engine"] == "exact" and "n" not in res.extra["Lambda_T"]
