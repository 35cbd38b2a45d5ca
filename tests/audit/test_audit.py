"""Audit specs, verdicts (the CI rule), results and reports (causalfair.audit / report)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import causalfair as cf
from causalfair.audit import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    AuditSpec,
    SpecError,
    abs_interval,
    audit,
    compare,
    judge,
    load_spec,
    overall_verdict,
    retrained_checkpoint_path,
)
from causalfair.audit.gate import GateEntry, GateResult
from causalfair.audit.run import _quantities, _verdicts
from causalfair.engines.effects import Decomposition
from causalfair.errors import CausalfairError
from causalfair.report import render as report
from tests.conftest import SMALL_SPEC, one_line_error, run_cli, run_cmd


def write_spec(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


BASE = """
name = "t"
horizon = 10
[model]
setting = "lending-1"
[policy]
builtin = "threshold:0.5"
"""


# ------------------------------------------------------------------ the CI rule
@pytest.mark.parametrize("lo,hi,thr,status", [
    (0.01, 0.04, 0.05, PASS),
    (0.01, 0.05, 0.05, PASS),           # "<=": the bound itself passes
    (0.06, 0.09, 0.05, FAIL),
    (0.04, 0.06, 0.05, INCONCLUSIVE),
    (0.05, 0.05, 0.05, PASS),           # exact at the threshold
    (0.0500001, 0.0500001, 0.05, FAIL),
])
def test_judge(lo, hi, thr, status):
    assert judge(lo, hi, thr) == status


@pytest.mark.parametrize("lo,hi,expected", [
    (0.1, 0.3, (0.1, 0.3)),
    (-0.3, -0.1, (0.1, 0.3)),
    (-0.2, 0.1, (0.0, 0.2)),
    (-0.1, 0.4, (0.0, 0.4)),
])
def test_abs_interval(lo, hi, expected):
    assert abs_interval(lo, hi) == pytest.approx(expected)


def test_overall_verdict():
    assert overall_verdict([PASS, PASS]) == PASS
    assert overall_verdict([PASS, INCONCLUSIVE]) == INCONCLUSIVE
    assert overall_verdict([INCONCLUSIVE, FAIL, PASS]) == FAIL
    assert overall_verdict([]) == PASS


def _fake_mc(C: float, se_C: float) -> Decomposition:
    """A Monte Carlo result with hand-set values: group a V = C, group b V = 0."""
    z = np.zeros(2)
    V = np.array([C, 0.0])
    return Decomposition(
        engine="mc", groups=("s+", "s-"), pair=(0, 1), horizon=3, V=V, V_ps=V.copy(), V_0=z,
        steps=np.zeros((3, 2, 3)), utility_by_group=z, group_weights=np.array([0.5, 0.5]),
        Lambda=0.2, se={"C": se_C, "DPE": 0.0, "IPE": se_C, "SPE": 0.0, "utility": 0.0},
        n=100, seed=0,
    )


@pytest.mark.parametrize("thr,status", [(0.12, INCONCLUSIVE), (0.15, PASS), (0.05, FAIL)])
def test_ci_rule_on_monte_carlo_estimates(tmp_path, thr, status):
    # C = -0.1, se 0.02, alpha 0.05: CI of C = -0.1 -+ 1.959964 * 0.02 = [-0.139199, -0.060801],
    # so |C| lies in [0.060801, 0.139199].
    spec = load_spec({"name": "mc", "thresholds": {"abs_C": thr, "C": 0.0}}, base_dir=tmp_path)
    q = _quantities(spec, _fake_mc(-0.1, 0.02), {})
    assert q["C"][1] == pytest.approx(-0.1 - 1.959964 * 0.02, abs=1e-6)
    assert q["C"][2] == pytest.approx(-0.1 + 1.959964 * 0.02, abs=1e-6)
    verdicts = {v.key: v for v in _verdicts(spec, q)}
    assert verdicts["abs_C"].status == status
    assert verdicts["abs_C"].lower == pytest.approx(0.1 - 1.959964 * 0.02, abs=1e-6)
    assert verdicts["C"].status == PASS  # signed: the whole CI is below 0


def test_alpha_widens_the_interval(tmp_path):
    narrow = load_spec({"name": "a", "engine": {"alpha": 0.5}, "thresholds": {"abs_C": 0.12}},
                       base_dir=tmp_path)
    q = _quantities(narrow, _fake_mc(-0.1, 0.02), {})
    # 50% CI: 0.1 + 0.674490 * 0.02 = 0.11349 < 0.12
    assert _verdicts(narrow, q)[0].status == PASS


# ------------------------------------------------------------------ spec validation
@pytest.mark.parametrize("extra,needles", [
    ('[engine]\nkind = "exactly"\n', ["[engine] kind", "'exactly'", "exact, mc"]),
    ('[thresholds]\nabs_X = 0.1\n', ["[thresholds] abs_X", "unknown key", "abs_C", "tpr_gap"]),
    ('[thresholds]\nabs_C = -0.1\n', ["[thresholds] abs_C", "-0.1", "a number >= 0"]),
    ('[thresholds]\nLambda = "small"\n', ["[thresholds] Lambda", "'small'", "a number >= 0"]),
    ('[engine]\nn = 1\n', ["[engine] n", "1", "an integer >= 2"]),
    ('[engine]\nalpha = 1.5\n', ["[engine] alpha", "1.5", "> 0", "<= 0.5"]),
    ('[engine]\nalpha = 0.95\n', ["[engine] alpha", "0.95", "> 0", "<= 0.5"]),
    ('[benefit]\nweights = "final"\n', ["[benefit] weights", "'final'", "visitation, initial"]),
    ('metrics = ["C", "XYZ"]\n', ["metrics", "'XYZ'", "DPE", "tpr_gap"]),
    ('[retrain]\nalgo = "sgd"\n', ["[retrain] algo", "'sgd'", "ppo-cb"]),
    ('[retrain]\nbetas = { D = 1.0 }\n', ["[retrain] betas D", "unknown key", "C, Lambda, KL"]),
    ('colour = "red"\n', ["colour", "unknown key", "thresholds"]),
])
def test_spec_errors_name_key_value_and_allowed(tmp_path, extra, needles):
    # top-level keys must come before the tables in TOML
    text = (extra + BASE) if not extra.startswith("[") else (BASE + extra)
    with pytest.raises(SpecError) as err:
        load_spec(write_spec(tmp_path, text))
    msg = str(err.value)
    assert "\n" not in msg
    for n in needles:
        assert n in msg, (n, msg)


@pytest.mark.parametrize("text,needles", [
    ('name = "t"\n[model]\nsetting = "lending-9"\n', ["[model] setting", "'lending-9'", "lending-1, lending-2, lending-3"]),
    ('name = "t"\n[model]\nlevels = 2\n', ["[model] levels", "2", "an integer >= 3"]),
    ('name = "t"\nhorizon = 0\n', ["horizon", "0", "an integer >= 1"]),
    ('name = "t"\nhorizon = true\n', ["horizon", "True", "an integer >= 1"]),
    ('name = "a b"\n', ["name", "'a b'", "letters, digits"]),
    ('horizon = 3\n', ["name: missing"]),
    ('name = "t"\n[policy]\nbuiltin = "sometimes"\n', ["[policy] builtin", "'sometimes'", "threshold:P"]),
    ('name = "t"\n[policy]\ncheckpoint = "nope.pt"\n', ["[policy] checkpoint", "'nope.pt'", "no such file"]),
    ('name = "t"\n[policy]\nbuiltin = "always"\ncheckpoint = "x.pt"\n', ["[policy]", "both builtin and checkpoint"]),
    ('name = "t"\n[logs]\npath = "x.csv"\n[model]\nsetting = "lending-1"\n', ["[logs]", "cannot be combined"]),
    ('name = "t"\n[model]\ncolour = 1\n', ["[model] colour", "unknown key", "setting, levels, interest"]),
    ('name = = "t"\n', ["not valid TOML"]),
])
def test_more_spec_errors(tmp_path, text, needles):
    with pytest.raises(SpecError) as err:
        load_spec(write_spec(tmp_path, text))
    for n in needles:
        assert n in str(err.value), (n, str(err.value))


def test_missing_spec_file(tmp_path):
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "absent.toml")


def test_defaults_and_relative_checkpoint(tmp_path):
    ck = tmp_path / "sub" / "pol.pt"
    ck.parent.mkdir()
    ck.write_bytes(b"x")
    s = load_spec(write_spec(tmp_path / "sub", 'name = "d"\n[policy]\ncheckpoint = "pol.pt"\n'))
    assert isinstance(s, AuditSpec)
    assert s.checkpoint == ck.resolve() and s.builtin is None
    assert (s.setting, s.levels, s.horizon, s.engine, s.alpha) == ("lending-1", 7, 20, "exact", 0.05)
    assert s.thresholds == {}


def test_example_specs_are_valid():
    root = Path(__file__).resolve().parents[2] / "audits"
    specs = sorted(root.glob("*.toml"))
    assert {p.name for p in specs} >= {"lending-1.toml", "lending-2.toml", "lending-3.toml",
                                       "lending-harder.toml", "attention-1.toml",
                                       "infectious-1.toml", "replicator-1.toml",
                                       "attention-harder.toml", "infectious-harder.toml"}
    for p in specs:
        s = load_spec(p)
        assert s.thresholds, p


# ------------------------------------------------------------------ audits
def test_never_policy_has_zero_direct_indirect_and_lambda(tmp_path):
    # pi = pi0: V^pi = V^PS = V^pi0 so DPE = IPE = 0 and C = SPE; every approval
    # probability is 0, so Lambda = 0, and nobody is approved: TPR gap = DP gap = 0.
    spec = write_spec(tmp_path, """
        name = "never"
        horizon = 10
        [policy]
        builtin = "never"
        [thresholds]
        abs_DPE = 0.0
        abs_IPE = 0.0
        Lambda = 0.0
        tpr_gap = 0.0
        dp_gap = 0.0
        abs_C = 0.0
    """)
    r = audit(spec)
    st = {v.key: v.status for v in r.verdicts}
    assert st == {"abs_DPE": PASS, "abs_IPE": PASS, "Lambda": PASS, "tpr_gap": PASS,
                  "dp_gap": PASS, "abs_C": FAIL}
    assert r.overall == FAIL and not r.passed
    assert r.quantities["C"][0] == pytest.approx(r.quantities["SPE"][0], abs=1e-12)
    # the initial distributions differ, so the spurious effect is not zero
    assert abs(r.quantities["SPE"][0]) > 0.01


def test_audit_matches_the_engines(tmp_path):
    spec = write_spec(tmp_path, BASE + "[thresholds]\nabs_C = 0.05\n")
    r = audit(spec)
    m = cf.lending_setting("lending-1").tabular
    pol = cf.parse_policy("threshold:0.5", m)
    d = cf.decompose(m, pol, 10)
    from causalfair.engines.notions import other_notions

    on = other_notions(m, pol, 10)
    for k in ("C", "DPE", "IPE", "SPE"):
        assert r.quantities[k][0] == getattr(d, k)
        assert r.quantities[k][1] == r.quantities[k][2] == getattr(d, k)  # exact: no width
    assert r.quantities["Lambda"][0] == d.Lambda
    assert r.quantities["tpr_gap"][0] == on["tpr_gap"]
    v = r.verdicts[0]
    assert v.estimate == abs(d.C)
    assert v.status == (PASS if abs(d.C) <= 0.05 else FAIL)
    np.testing.assert_allclose(r.mu_pi, m.propagate(cf.policy_table(pol, m), 10))
    np.testing.assert_allclose(r.mu_0, m.propagate(0.0, 10))


def test_policy_override_and_compare(tmp_path):
    spec = write_spec(tmp_path, BASE + "[thresholds]\nLambda = 0.05\n")
    a = audit(spec)
    b = audit(spec, policy="never")
    assert b.quantities["Lambda"][0] == 0.0
    assert b.verdicts[0].status == PASS
    df = compare(a, b)  # one row per audit
    assert list(df.index) == ["threshold:0.5", "never"]
    assert df.loc["never", "overall"] == PASS
    assert df.loc["threshold:0.5", "Lambda"] == a.quantities["Lambda"][0]


def test_checkpoint_audit_records_sha256(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = cf.policies.core.mlp(9, (8,), 1)
    ck = tmp_path / "pol.pt"
    cf.save_checkpoint(ck, net, architecture={"type": "mlp", "input_dim": 9, "hidden": [8],
                                              "activation": "tanh", "output_dim": 1},
                       encoding=cf.FeatureEncoding("onehot", 7, 2))
    spec = write_spec(tmp_path, 'name = "ck"\nhorizon = 5\n[policy]\ncheckpoint = "pol.pt"\n'
                                "[thresholds]\nabs_C = 1.0\n")
    r = audit(spec)
    assert r.checkpoint_sha256 == hashlib.sha256(ck.read_bytes()).hexdigest()
    out = r.write_report(tmp_path / "rep")
    doc = json.loads((out / "audit.json").read_text())
    assert doc["policy"]["checkpoint_sha256"] == r.checkpoint_sha256
    assert doc["policy"]["checkpoint"] == str(ck.resolve())


# ------------------------------------------------------------------ reports
@pytest.fixture(scope="module")
def lending1_result(tmp_path_factory):
    d = tmp_path_factory.mktemp("spec")
    return audit(write_spec(d, BASE + "[thresholds]\nabs_C = 0.05\nLambda = 0.5\ntpr_gap = 0.1\n"))


@pytest.fixture(scope="module")
def lending1_report(tmp_path_factory, lending1_result):
    """lending1_result's report folder, written once (into a folder whose parents do not
    exist yet) for the tests that only read it."""
    return lending1_result.write_report(tmp_path_factory.mktemp("rep") / "reports" / "t")


def test_report_contents(lending1_result, lending1_report):
    r, out = lending1_result, lending1_report
    names = {p.name for p in out.iterdir()}
    figs = {"decomposition", "steps", "levels", "benefit", "graph", "notions"}
    assert {"report.html", "report.md", "audit.json"} | {f"{f}.png" for f in figs} <= names
    html = (out / "report.html").read_text()
    # self-contained: every figure embedded, nothing fetched
    imgs = re.findall(r"<img [^>]*src='data:image/png;base64,([^']+)'", html)
    pngs = sorted(p for p in names if p.endswith(".png"))
    assert len(imgs) == len(pngs)
    embedded = {hashlib.sha256(base64.b64decode(b)).hexdigest() for b in imgs}
    on_disk = {hashlib.sha256((out / p).read_bytes()).hexdigest() for p in pngs}
    assert embedded == on_disk
    assert "http://" not in html and "https://" not in html and "<script" not in html
    assert r.overall in html
    doc = json.loads((out / "audit.json").read_text())
    assert set(doc["figures"]) == {p[:-4] for p in pngs}
    assert doc["figures"]["decomposition"]["data"]["effects"]["C"]["estimate"] == r.decomposition.C
    assert doc["overall"] == r.overall
    assert [v["status"] for v in doc["verdicts"]] == [v.status for v in r.verdicts]
    assert doc["spec"]["resolved"]["thresholds"] == {"abs_C": 0.05, "Lambda": 0.5, "tpr_gap": 0.1}
    assert doc["provenance"]["dependencies"]["numpy"] == np.__version__
    assert doc["provenance"]["causalfair"] == cf.__version__
    md = (out / "report.md").read_text()
    for p in pngs:
        assert f"({p})" in md
    assert "| abs_C \\<= 0.05 |" in md  # "<" escaped: user strings never become HTML


def test_report_replaces_atomically_and_interrupt_leaves_nothing(tmp_path, lending1_result,
                                                                 lending1_report, monkeypatch):
    target = tmp_path / "rep"
    # 1. interrupted first run: no report, no temp folder
    def boom(r):
        raise KeyboardInterrupt

    figs = tuple((n, t, boom if n == "benefit" else b) for n, t, b in report.FIGURES)
    monkeypatch.setattr(report, "FIGURES", figs)
    with pytest.raises(KeyboardInterrupt):
        report.write_report(lending1_result, target)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    # 2. a complete report (a copy of one written by write_report), then an interrupted
    # rewrite keeps the old one intact
    shutil.copytree(lending1_report, target)
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    monkeypatch.setattr(report, "FIGURES", figs)
    with pytest.raises(KeyboardInterrupt):
        report.write_report(lending1_result, target)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_report_written_twice_is_the_same_bytes(tmp_path, lending1_result, lending1_report):
    one = _files(lending1_report)  # written earlier in this process, by another fixture
    two = _files(report.write_report(lending1_result, tmp_path / "two"))
    assert one == two  # every PNG, audit.json, report.md, report.html and the manifest
    assert ".causalfair-report.json" in one


def _interrupt(r):
    raise KeyboardInterrupt


def test_notebook_repr_and_frames(lending1_result):
    r = lending1_result
    h = r._repr_html_()
    assert "Audit t" in h and r.overall in h
    assert h.count("<img") == 1 and len(h) < 50_000  # the headline thumbnail only
    vf = r.verdicts_frame()
    assert list(vf.index) == ["abs_C", "Lambda", "tpr_gap"]
    assert list(vf["status"]) == [v.status for v in r.verdicts]
    wp = r.worst_pairs(3)
    assert len(wp) == 3 and wp["contribution"].is_monotonic_decreasing
    assert "C" in r.quantities_frame().index
    assert str(r).startswith(f"Audit t: {r.overall}")


def test_before_after_table(tmp_path, lending1_result):
    spec = lending1_result.spec.with_policy(builtin="never")
    after = audit(spec)
    out = after.write_report(tmp_path / "ba", before=lending1_result)
    md = (out / "report.md").read_text()
    assert "## Before and after retraining" in md
    b, a = lending1_result.quantities["utility"][0], after.quantities["utility"][0]
    assert f"| utility | {b:.6f} | n/a | {a:.6f} | n/a |" in md
    doc = json.loads((out / "audit.json").read_text())
    assert doc["before"]["overall"] == lending1_result.overall


# ------------------------------------------------------------------ retrain naming
def test_retrained_checkpoint_path_never_overwrites(tmp_path):
    ck = tmp_path / "ppo.pt"
    ck.write_bytes(b"a")
    p1 = retrained_checkpoint_path(ck, "ppo-cb")
    assert p1.name == "ppo.retrained-ppo-cb-1.pt"
    p1.write_bytes(b"b")
    assert retrained_checkpoint_path(ck, "ppo-cb").name == "ppo.retrained-ppo-cb-2.pt"
    assert retrained_checkpoint_path(ck, "ppo-c").name == "ppo.retrained-ppo-c-1.pt"


def test_top_level_import_stays_light():
    import sys

    code = ("import sys, causalfair, causalfair.audit, causalfair.report.render; "
            "print(any(m in sys.modules for m in ('matplotlib', 'pandas', 'torch')))")
    out = run_cmd([sys.executable, "-c", code], expect=0)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ the analyst notebook
@pytest.mark.notebook
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_analyst_notebook_executes(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    root = Path(__file__).resolve().parents[2]
    path = root / "docs" / "notebooks" / "analyst.ipynb"
    nb = nbformat.read(path, as_version=4)
    # run outside the checkout: the notebook needs only the installed package
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any("Audit lending-1-ppo" in h for h in html)
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2
    assert any("image/svg+xml" in o.get("data", {}) for o in outputs)  # the graph, inline


def test_packaged_examples_equal_reports_examples():
    """causalfair.examples ships copies of reports/examples' lending-1 files (written by
    regenerate.sh): they must not drift."""
    import causalfair as cf

    root = Path(__file__).resolve().parents[2] / "reports" / "examples"
    names = cf.examples.names()
    assert names == ["checkpoints/lending-1-ppo.pt",
                     "checkpoints/lending-1-ppo.retrained-exact-1.pt", "lending-1-ppo.toml"]
    for name in names:
        assert cf.examples.path(name).read_bytes() == (root / name).read_bytes(), name
    with pytest.raises(cf.errors.InputError, match="examples: unknown file 'x.toml'"):
        cf.examples.path("x.toml")


# ------------------------------------------------------------------ log audits
def test_logs_spec_uses_bootstrap_intervals(tmp_path):
    logs = pytest.importorskip("causalfair.logs")
    df = logs.simulate_logs("lending-1", "random:0.5", 600, 4, seed=0)
    df.to_csv(tmp_path / "log.csv", index=False)
    spec = write_spec(tmp_path, """
        name = "logs"
        [logs]
        path = "log.csv"
        n_boot = 20
        seed = 1
        [thresholds]
        abs_C = 10.0
        abs_DPE = 0.0
    """)
    r = audit(spec)
    direct = logs.audit_logs(df, n_boot=20, seed=1)
    assert r.quantities["C"][0] == pytest.approx(direct.decomposition.C, abs=1e-12)
    e, lo, hi, se = r.quantities["DPE"]
    assert se == pytest.approx(direct.decomposition.se["DPE"]) and se > 0
    assert lo < e < hi
    st = {v.key: v.status for v in r.verdicts}
    assert st["abs_C"] == PASS
    # a zero threshold on an estimate with a CI of positive width cannot PASS
    assert st["abs_DPE"] in (FAIL, INCONCLUSIVE)
    assert r.extra["logs"]["n_boot"] == 20


def test_module_is_callable(tmp_path):
    import causalfair.audit as mod

    spec = write_spec(tmp_path, BASE + "[thresholds]\nabs_C = 1.0\n")
    r = mod(spec)
    assert r.overall == PASS and r.quantities["C"][0] == audit(spec).quantities["C"][0]
    assert mod.load_spec is load_spec


def test_audit_with_a_policy_override_is_labelled_with_that_policy(tmp_path):
    res = cf.audit(_spec(tmp_path), policy="always")
    assert res.spec.policy_label == "builtin always"
    doc = res.to_dict()
    assert doc["policy"]["label"] == "builtin always"
    assert doc["decomposition"]["policy"] == "always"
    obj = cf.ConstantPolicy(0.25, name="quarter")
    res = cf.audit(_spec(tmp_path), policy=obj)
    assert res.to_dict()["policy"]["label"] == "policy object quarter"
    assert "quarter" in res.summary() and "threshold:0.5" not in res.summary()


def _spec(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('name = "s"\n[system]\nid = "lending-1"\n[policy]\nbuiltin = "threshold:0.5"\n')
    return p


def _entry(before: str, after: str | None) -> GateEntry:
    r = lambda status: SimpleNamespace(overall=status, verdicts=[])  # noqa: E731
    return GateEntry(spec=SimpleNamespace(name="x"), before=r(before),
                     after=r(after) if after else None)


def test_retrain_exit_code_needs_accept_repaired():
    repaired = [_entry("FAIL", "PASS")]
    assert GateResult(repaired).exit_code == 1
    assert GateResult(repaired, accept_repaired=True).exit_code == 0
    assert GateResult([_entry("FAIL", "FAIL")], accept_repaired=True).exit_code == 1
    assert GateResult([_entry("PASS", None)]).exit_code == 0
    assert GateResult([_entry("INCONCLUSIVE", "PASS")], inconclusive="pass").exit_code == 0
    assert GateResult([_entry("INCONCLUSIVE", "PASS")]).exit_code == 1


def test_echoed_values_are_capped_and_names_cannot_end_in_a_newline(tmp_path):
    p = tmp_path / "s.toml"
    # a million characters: any echo that is not capped is over 1600 times the bound
    p.write_text('name = "' + "x" * 1_000_000 + '!"\n')
    err = one_line_error(run_cli("audit", p, cwd=tmp_path))
    assert len(err) < 600
    p.write_text('name = "rep\\n"\n')
    err = one_line_error(run_cli("audit", p, cwd=tmp_path))
    assert "name: bad value 'rep\\n'" in err


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
                     st.binary(max_size=10).map(lambda b: b.decode("latin-1")))


_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=12)


_KEYS = st.sampled_from(["name", "horizon", "metrics", "system", "model", "logs", "policy",
                         "engine", "benefit", "thresholds", "retrain", "zzz"])


_SECTION_KEYS = st.sampled_from(["id", "factory", "tabular", "params", "setting", "levels",
                                 "interest", "builtin", "checkpoint", "kind", "n", "seed",
                                 "alpha", "eps", "weights", "worst", "abs_C", "Lambda", "algo",
                                 "iterations", "betas", "path", "n_boot", "bins"])


_SPECS = st.dictionaries(_KEYS, st.one_of(_VALUES, st.dictionaries(_SECTION_KEYS, _VALUES,
                                                                     max_size=5)), max_size=8)


def _mutations():
    import tomllib

    base = tomllib.loads(SMALL_SPEC)
    return st.builds(lambda k, v: {**base, k: v}, _KEYS, _VALUES)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(_SPECS, _mutations()))
def test_fuzzed_specs_raise_only_causalfair_errors(tmp_path_factory, raw):
    try:
        spec = load_spec(raw, base_dir=tmp_path_factory.getbasetemp())
    except CausalfairError:
        return
    from causalfair.audit.run import prepare

    try:
        prepare(spec)
    except CausalfairError:
        pass
