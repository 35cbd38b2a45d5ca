"""Thresholds relative to a baseline checkpoint: "no worse than the checkpoint
on main by more than X", judged on the paired difference (common random numbers) with
the same CI rule."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.cli import main
from causalfair.engines._mc_base import Job
from causalfair.engines.montecarlo import _ready_policy, _setup, _simulate, compare_mc

ROOT = Path(__file__).resolve().parents[2]
CK = ROOT / "reports" / "examples" / "checkpoints"


def test_paired_differences_equal_two_runs_and_their_standard_error_is_the_paired_one():
    system = cf.systems.make("lending-1")
    p, b = cf.parse_policy("threshold:0.5", system), cf.parse_policy("threshold:0.6", system)
    kw = dict(n=3000, seed=4, batch_size=1000)
    out = compare_mc(system, p, b, 8, **kw)
    dp, db = cf.decompose_mc(system, p, 8, **kw), cf.decompose_mc(system, b, 8, **kw)
    for k in ("C", "DPE", "IPE", "SPE"):
        assert out[k]["policy"] == pytest.approx(getattr(dp, k), abs=1e-14)
        assert out[k]["baseline"] == pytest.approx(getattr(db, k), abs=1e-14)
        assert out[k]["diff"] == pytest.approx(getattr(dp, k) - getattr(db, k), abs=1e-14)
    w = system.group_weights
    assert out["utility"]["diff"] == pytest.approx(float(w @ dp.utility_by_group - w @ db.utility_by_group), abs=1e-12)
    # the standard errors by hand from the per-individual totals (one pass, no merging)
    sim, A, base, T, n, seed, _ = _setup(system, None, 8, 3000, 4, 3000)
    jobs = [Job(sim, _ready_policy(q, sim, A, base, True, None)[0], T, seed, True, A, base,
                 "x", "lending") for q in (p, b)]
    a, c = dp.pair
    tot = {g: (_simulate(jobs[0], g, 0, n)[1][0], _simulate(jobs[1], g, 0, n)[1][0])
           for g in (a, c)}
    se = math.sqrt(sum(np.var(x - y, ddof=1) for x, y in tot.values()) / n)
    one = compare_mc(system, p, b, 8, n=3000, seed=4, batch_size=3000)
    sp, sb = np.sign(one["C"]["policy"]), np.sign(one["C"]["baseline"])
    se_abs = math.sqrt(sum(np.var(sp * x - sb * y, ddof=1) for x, y in tot.values()) / n)
    assert one["C"]["se"] == pytest.approx(se, rel=1e-10)
    assert one["C"]["abs_se"] == pytest.approx(se_abs, rel=1e-10)
    # pairing pays: far below two independent runs' combined error
    assert out["C"]["se"] < 0.75 * math.hypot(dp.se["C"], db.se["C"])
    # a policy against itself: no difference, no error
    same = compare_mc(system, p, p, 8, **kw)
    assert all(same[k]["diff"] == 0.0 and same[k]["se"] == 0.0 for k in same)


SPEC = '''name = "rel"
horizon = 20
[system]
id = "lending-1"
[policy]
checkpoint = "{new}"
[engine]
kind = "{engine}"
{n}
[thresholds]
abs_C = 1.0
[baseline]
checkpoint = "{old}"
[baseline.thresholds]
{rel}
'''


def _spec(tmp_path: Path, engine: str, rel: str, name: str = "rel.toml") -> Path:
    p = tmp_path / name
    p.write_text(SPEC.format(new=CK / "lending-1-ppo.retrained-exact-1.pt",
                             old=CK / "lending-1-ppo.pt", engine=engine, rel=rel,
                             n="n = 20000" if engine == "mc" else ""))  # exact: no n
    return p


@pytest.mark.parametrize("engine", ["exact", "mc"])
def test_relative_verdicts_are_the_differences_of_two_audits(tmp_path, engine):
    spec = _spec(tmp_path, engine, "abs_C = 0.0\nutility = 0.5\nLambda = 0.0\nDPE = 1.0")
    res = cf.audit(spec)
    from dataclasses import replace

    from causalfair.audit.spec import load_spec

    # the same spec without the baseline, on each policy
    s = replace(load_spec(spec), baseline_thresholds={}, baseline_checkpoint=None)
    mine = cf.audit(s)
    theirs = cf.audit(s.with_policy(checkpoint=CK / "lending-1-ppo.pt"))
    v = {x.key: x for x in res.verdicts}
    q, qb = mine.quantities, theirs.quantities
    assert v["abs_C vs baseline"].estimate == pytest.approx(abs(q["C"][0]) - abs(qb["C"][0]),
                                                            abs=1e-12)
    assert v["utility drop vs baseline"].estimate == pytest.approx(
        qb["utility"][0] - q["utility"][0], abs=1e-12)
    assert v["Lambda vs baseline"].estimate == pytest.approx(q["Lambda"][0] - qb["Lambda"][0],
                                                             abs=1e-12)
    assert v["DPE vs baseline"].estimate == pytest.approx(q["DPE"][0] - qb["DPE"][0], abs=1e-12)
    # the repair cut |C| (PASS) and cost about 1 of utility (FAIL at 0.5)
    assert v["abs_C vs baseline"].status == "PASS"
    assert v["utility drop vs baseline"].status == "FAIL" and res.overall == "FAIL"
    if engine == "exact":
        assert all(x.lower == x.upper == x.estimate for x in v.values())
    else:  # paired CIs, narrower than the two audits' own intervals
        x = v["abs_C vs baseline"]
        width_pair = x.upper - x.lower
        width_own = (q["C"][2] - q["C"][1])
        assert 0 < width_pair < width_own
    assert res.extra["baseline"]["policy"] == "lending-1-ppo.pt"


def test_the_gate_fails_on_a_relative_threshold_and_refuses_bad_baselines(tmp_path, capsys):
    ok = _spec(tmp_path, "exact", "abs_C = 0.0", "ok.toml")
    bad = _spec(tmp_path, "exact", "utility = 0.5", "bad.toml")
    bad.write_text(bad.read_text().replace('name = "rel"', 'name = "rel-utility"'))  # one gate:
    # distinct names
    assert main(["gate", str(ok)]) == 0
    assert main(["gate", str(ok), str(bad), "--junit", str(tmp_path / "g.xml")]) == 1
    assert "utility drop vs baseline &lt;= 0.5" in (tmp_path / "g.xml").read_text()
    capsys.readouterr()
    cases = [
        ("abs_CC = 0.1", "[baseline.thresholds] abs_CC: unknown key"),
        ("", "[baseline.thresholds]: empty or not a table"),
    ]
    for rel, msg in cases:
        p = _spec(tmp_path, "exact", rel, "x.toml")
        assert main(["gate", str(p)]) == 2
        assert msg in capsys.readouterr().err
    p = _spec(tmp_path, "exact", "abs_C = 0.1", "y.toml")
    p.write_text(p.read_text().replace("[baseline]\n", '[baseline]\nbuiltin = "never"\n'))
    assert main(["gate", str(p)]) == 2
    assert "give exactly one of checkpoint" in capsys.readouterr().err
    # on a simulator-only system, Lambda has no paired estimate: refused before running
    (tmp_path / "clinic.py").write_text((ROOT / "docs" / "examples" / "clinic.py").read_text())
    q = tmp_path / "clinic.toml"
    q.write_text('name = "c"\n[system]\nfactory = "clinic:ClinicSimulator"\n'
                 '[policy]\nbuiltin = "action:2"\n[engine]\nkind = "mc"\nn = 1000\n[thresholds]\n'
                 '[baseline]\nbuiltin = "never"\n[baseline.thresholds]\nLambda = 0.1\n')
    code = main(["gate", str(q)])
    err = capsys.readouterr().err
    assert code == 2 and "[baseline.thresholds] Lambda: needs the exact value on both sides" in err, err
