"""Attribution of a change in C between two policies on one system
(causalfair.engines.attribution): exact parts sum to the observed change; Monte Carlo parts
are sums of the same paired samples and cover the exact change; the audit, the gate line,
``causalfair audit --baseline`` and ``cf.compare`` carry it."""

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair._io import to_jsonable
from causalfair.audit import attribution, audit, compare
from causalfair.engines.attribution import attribute, attribute_exact, attribute_mc, check_sums
from causalfair.engines.montecarlo import compare_mc
from causalfair.errors import InputError
from causalfair.report.render import render_markdown
from tests.conftest import describe, run_cli

ROOT = Path(__file__).resolve().parents[2]
NEW, OLD = "threshold:0.5", "threshold:0.3"


@pytest.fixture(scope="module")
def lending():
    return cf.systems.make("lending-1")


@pytest.fixture(scope="module")
def clinic(tmp_path_factory):
    d = tmp_path_factory.mktemp("clinic")
    shutil.copy(ROOT / "docs" / "examples" / "clinic.py", d / "clinic.py")
    yield cf.systems.make("clinic:make_clinic", search_path=d)
    sys.modules.pop("clinic", None)


def test_exact_parts_sum_to_the_observed_change(lending):
    m = lending.tabular
    att = attribute_exact(m, NEW, OLD, 20, system=lending)
    a, b = cf.decompose(m, NEW, 20), cf.decompose(m, OLD, 20)
    for k in ("C", "DPE", "IPE"):
        assert att.total[k][0] == pytest.approx(getattr(a, k) - getattr(b, k), abs=1e-12), k
    assert a.SPE == b.SPE  # the system's: it cancels
    assert np.abs(att.by_step.sum(1) - [att.total["DPE"][0], att.total["IPE"][0]]).max() < 1e-12
    assert abs(att.by_cell.sum() - (a.C - b.C)) < 1e-12
    assert check_sums(att) < 1e-12
    assert att.by_step.shape == (2, 20) and att.by_cell.shape == (2, 2, m.n_levels)
    big = att.largest()
    assert big["path"] == max(("DPE", "IPE"), key=lambda p: abs(att.total[p][0]))
    assert abs(big["step_estimate"]) == pytest.approx(np.abs(att.by_step.sum(0)).max())


def test_exact_against_pi0_is_the_policy_s_own_dpe_and_ipe(lending):
    m = lending.tabular
    att = attribute(m, NEW, "pi0", 20)
    d = cf.decompose(m, NEW, 20)
    assert att.total["DPE"][0] == pytest.approx(d.DPE, abs=1e-12)
    assert att.total["IPE"][0] == pytest.approx(d.IPE, abs=1e-12)


def test_three_actions_exact_sums_and_mc_covers_it(clinic):
    ex = attribute(clinic, "uniform", "action:1", engine="exact")
    a = cf.decompose(clinic.tabular, "uniform", clinic.horizon)
    b = cf.decompose(clinic.tabular, "action:1", clinic.horizon)
    assert ex.change == pytest.approx(a.C - b.C, abs=1e-12)
    assert check_sums(ex) < 1e-12
    mc = attribute(clinic, "uniform", "action:1", engine="mc", n=4000, seed=0)
    assert mc.engine == "mc" and mc.cells == "levels"
    # the parts are sums of the same samples: they add up to the total to rounding
    assert check_sums(mc) < 1e-12
    # and the total covers the exact change (95% interval)
    for k in ("C", "DPE", "IPE"):
        e, se = mc.total[k]
        assert se > 0 and abs(e - ex.total[k][0]) < 1.96 * se, (k, e, se, ex.total[k][0])


def test_mc_total_is_the_paired_comparison_of_the_gate(lending):
    mc = attribute_mc(lending, NEW, OLD, 8, n=3000, seed=4)
    paired = compare_mc(lending, NEW, OLD, 8, n=3000, seed=4)
    for k in ("C", "DPE", "IPE"):
        assert mc.total[k][0] == pytest.approx(paired[k]["diff"], abs=1e-12)
        assert mc.total[k][1] == pytest.approx(paired[k]["se"], rel=1e-9)


def test_feature_cells_when_units_observe_only_features(clinic):
    import clinic as mod

    class FeaturesOnly(mod.ClinicSimulator):
        def observe(self, state):
            o = super().observe(state)
            return cf.Observation(group=o.group, level=None, features=o.features, t=o.t)

    sys_f = cf.System(id="clinic-features", groups=clinic.groups, decisions=clinic.decisions,
                      features=("severity", "distance"), horizon=6, simulator=FeaturesOnly)
    mc = attribute(sys_f, "uniform", "action:2", n=2000, seed=0)
    assert "joint quantile bins of severity, distance" in mc.cells
    assert all("severity:q" in lab for lab in mc.cell_labels)
    assert check_sums(mc) < 1e-12
    assert mc.to_dict()["largest_cells"][0]["cell"] in mc.cell_labels


def test_audit_with_baseline_writes_attribution_and_the_gate_line(tmp_path):
    spec = tmp_path / "b.toml"
    spec.write_text('name = "b"\n[system]\nid = "lending-1"\n[policy]\nbuiltin = "threshold:0.5"\n'
                    '[thresholds]\nabs_C = 0.01\n[baseline]\nbuiltin = "threshold:0.3"\n'
                    '[baseline.thresholds]\nabs_C = 0.0\n')
    r = audit(spec)
    doc = json.loads(json.dumps(to_jsonable(r.to_dict())))  # as audit.json holds it
    att = doc["attribution"]
    m = r.model
    diff = cf.decompose(m, NEW, 20).C - cf.decompose(m, OLD, 20).C
    assert att["total"]["C"]["estimate"] == pytest.approx(diff, abs=1e-12)
    assert att["baseline"] == "threshold:0.3" and att["largest"]["path"] in ("DPE", "IPE")
    md = render_markdown(r, doc, {})
    assert "### What changed" in md and "SPE is the system's and cancels" in md
    from causalfair.audit.gate import GateEntry

    line = GateEntry(spec=r.spec, before=r).to_dict()["attribution"]
    assert line.startswith(f"C moved {diff:+.4g} vs threshold:0.3: mostly {att['largest']['path']}")


def test_audit_command_baseline_option():
    proc = run_cli("audit", ROOT / "audits" / "lending-1.toml", "--baseline", "threshold:0.3",
                   "--no-report", "--json", timeout=240)
    assert proc.returncode == 0, describe(proc, 0)
    doc = json.loads(proc.stdout)
    assert doc["attribution"]["baseline"] == "threshold:0.3", proc.stderr
    assert doc["attribution"]["line"].startswith("C moved "), proc.stderr


def test_compare_two_audits_attributes_the_change(lending):
    a = audit(ROOT / "audits" / "lending-1.toml", policy=OLD)
    b = audit(ROOT / "audits" / "lending-1.toml", policy=NEW)
    table = compare(a, b)
    att = table.attrs["attribution"]
    assert att.change == pytest.approx(b.decomposition.C - a.decomposition.C, abs=1e-12)
    assert att.policy == b.decomposition.policy_name and att.baseline == a.decomposition.policy_name
    assert cf.compare is compare and cf.attribute is attribute
    other = audit(ROOT / "audits" / "lending-2.toml")
    assert "attribution" not in compare(a, other).attrs  # different systems: a table only
    with pytest.raises(InputError, match="same system"):
        attribution(a, other)
    with pytest.raises(InputError, match=r"attribution: argument 1 \(before\) is a "
                                         r"Decomposition; .*cf.attribute\(system, policy"):
        attribution(a.decomposition, b)
    with pytest.raises(InputError, match="attribution: unknown keyword argument 'afer'; "
                                         "did you mean 'after'"):
        attribution(before=a, afer=b)


def test_bad_engine_and_many_groups_without_pair_are_refused(lending):
    with pytest.raises(InputError, match="engine: bad value 'fast'"):
        attribute(lending, NEW, OLD, engine="fast")
