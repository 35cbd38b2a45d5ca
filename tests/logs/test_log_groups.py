"""Log audits with more than two groups (causalfair.logs.groups; docs/logs.md, "More than
two groups") and a Lambda interval that contains its estimate
(causalfair.logs.pretest.lambda_interval_of)."""

from __future__ import annotations

import json
from itertools import permutations

import numpy as np
import pandas as pd
import pytest

from causalfair.errors import InputError, ResourceLimitError
from causalfair.logs import audit_logs, simulate_logs
from causalfair.logs.bootstrap import check_boot_memory
from causalfair.logs.pretest import lambda_interval_of
from causalfair.model import TabularModel
from causalfair.policies.core import TablePolicy
from causalfair.thresholds import FAIL, PASS
from tests.conftest import schema_errors

GROUPS = ("A", "B", "C")


def tri_model() -> TabularModel:
    """Three groups, two levels: a higher level and a better d1 row for A than for C."""
    m0 = np.array([0.5, 0.7, 0.9])  # P(level 0) at t = 0
    up0, up1 = np.array([0.2, 0.1, 0.05]), np.array([0.6, 0.5, 0.3])
    k = np.zeros((3, 2, 2, 2))
    for s in range(3):
        k[s, 0, 0] = [1 - up0[s], up0[s]]
        k[s, 0, 1] = [1 - up1[s], up1[s]]
        k[s, 1, 0] = [0.2, 0.8]
        k[s, 1, 1] = [0.1, 0.9]
    reward = np.zeros((3, 2, 2))
    reward[:, 1, 0] = 1.0
    reward[:, 0, 1] = -0.2
    return TabularModel(kernel=k, initial=np.stack([m0, 1 - m0], 1),
                        potential=np.array([0.0, 1.0]), reward=reward,
                        group_names=list(GROUPS), name="tri")


@pytest.fixture(scope="module")
def tri_log() -> pd.DataFrame:
    p = np.array([[0.3, 0.8], [0.5, 0.6], [0.7, 0.4]])  # pi(d1 | x, s)
    return simulate_logs(tri_model(), TablePolicy(p), 900, 2, seed=3)


@pytest.fixture(scope="module")
def tri(tri_log):
    return audit_logs(tri_log, n_boot=40, seed=1)


def test_three_group_log_gets_every_pair_from_the_same_replicates(tri):
    gc = tri.groups
    assert gc is not None and gc.groups == GROUPS and gc.reference == "A"
    assert gc.engine == "logs" and list(gc.pairs) == ["B-A", "C-A", "B-C"]
    assert gc.reference_pairs == ["B-A", "C-A"]
    dec, boot = tri.decomposition, tri.bootstrap
    z = 1.959963984540054
    assert gc.chosen is not None and set(gc.chosen.split("-")) == {GROUPS[i] for i in dec.pair}
    for name, q in gc.pairs.items():
        a, b = name.split("-")
        ia, ib = GROUPS.index(a), GROUPS.index(b)
        # identity: a pair's C is the difference of the groups' V, and C = DPE + IPE + SPE
        assert q["C"][0] == pytest.approx(dec.V[ia] - dec.V[ib], abs=1e-14)
        assert q["SPE"][0] == pytest.approx(dec.V_0[ia] - dec.V_0[ib], abs=1e-14)
        assert q["C"][0] == pytest.approx(q["DPE"][0] + q["IPE"][0] + q["SPE"][0], abs=1e-12)
        # the interval: z * the sd over the replicates of V[a] - V[b] (same rows, no refit),
        # not the independent-groups se_a (+) se_b
        sd = (boot[f"V[{a}]"] - boot[f"V[{b}]"]).std(ddof=1)
        assert q["C"][3] == pytest.approx(sd, rel=1e-9)
        zz = 2.393979799818510 if name == gc.chosen else z  # the data-chosen pair: over 3
        assert q["C"][1:3] == pytest.approx((q["C"][0] - zz * sd, q["C"][0] + zz * sd),
                                            rel=1e-9)
        lo, hi = q["Lambda"][1:3]
        assert lo <= q["Lambda"][0] <= hi
        assert 0.0 <= q["ratio_V"][1] <= q["ratio_V"][0] <= q["ratio_V"][2] <= 1.0
    # the worst pair: the largest |C|, computed here from the groups' V
    worst = max(permutations(range(3), 2), key=lambda ab: dec.V[ab[0]] - dec.V[ab[1]])
    assert set(gc.worst.split("-")) == {GROUPS[worst[0]], GROUPS[worst[1]]}
    # the audited pair's Lambda is the audit's, with the audit's (normal) interval
    head = "-".join(GROUPS[i] for i in dec.pair)
    lam = gc.quantity(head, "Lambda")
    assert lam[0] == tri.decomposition.Lambda
    assert lam[1:3] == tri.lambda_interval(0.05, method="normal")
    # the summary and the JSON carry them
    text = tri.summary()
    assert f"worst pair {gc.worst}" in text and "B-C" in text
    d = json.loads(json.dumps(tri.to_dict(), allow_nan=False))
    assert d["pairs"]["worst"] == gc.worst and set(d["pairs"]["values"]) == set(gc.pairs)


def test_each_pair_equals_the_two_group_audit_of_its_sub_log(tri, tri_log):
    """An independent computation: the two-group log audit of the pair's rows only."""
    plug = audit_logs(tri_log, n_boot=0, lambda_estimator="plugin")
    for name in tri.groups.pairs:
        a, b = name.split("-")
        rows = tri_log[tri_log["group"].isin([a, b])].copy()
        rows["group"] = rows["group"].astype(str)  # the log's categories name all three
        sub = audit_logs(rows, n_boot=0, lambda_estimator="plugin")
        d = sub.decomposition
        assert sub.groups is None  # two groups, no reference: the two-group form
        pair = "-".join(d.groups[i] for i in d.pair)
        for k in ("C", "DPE", "IPE", "SPE"):
            assert tri.groups.quantity(pair, k)[0] == pytest.approx(getattr(d, k), abs=1e-12)
        assert plug.groups.quantity(pair, "Lambda")[0] == pytest.approx(d.Lambda, abs=1e-12)


def test_reference_group_and_bad_reference(tri_log):
    r = audit_logs(tri_log, n_boot=0, reference="C")
    assert r.groups.reference == "C" and list(r.groups.pairs)[:2] == ["A-C", "B-C"]
    with pytest.raises(InputError, match="reference: bad value 'D'.*A, B, C"):
        audit_logs(tri_log, n_boot=0, reference="D")


def _spec(tmp_path, body: str, top: str = ""):
    p = tmp_path / "spec.toml"
    p.write_text(f'name = "tri-logs"\n{top}[logs]\npath = "log.csv"\nn_boot = 40\nseed = 1\n'
                 + body, encoding="utf-8")
    return p


def test_pair_thresholds_on_a_log_audit(tmp_path, tri_log, tri):
    from causalfair.audit import audit

    tri_log.to_csv(tmp_path / "log.csv", index=False)
    worst = tri.groups.quantity(tri.groups.worst, "C")
    ok, bad = abs(worst[0]) + 1.0, 0.5 * min(abs(worst[1]), abs(worst[2]))
    assert np.sign(worst[1]) == np.sign(worst[2])  # the worst pair is clearly non-zero
    r = audit(_spec(tmp_path, f'[thresholds]\n"abs_C[{tri.groups.worst}]" = {ok}\n'
                              f'max_abs_C = {bad}\nmin_ratio_V = 0.0\n'))
    v = {x.key: x for x in r.verdicts}
    assert v[f"abs_C[{tri.groups.worst}]"].status == PASS
    assert v["max_abs_C"].status == FAIL
    assert v["max_abs_C"].estimate == pytest.approx(abs(worst[0]), abs=1e-12)
    assert v["min_ratio_V"].status == PASS
    assert r.overall == FAIL and r.group_comparison.worst == tri.groups.worst
    # the same numbers as the Python API at the spec's level
    assert r.group_comparison.pairs["B-C"]["C"] == tri.compare_groups(0.05).pairs["B-C"]["C"]
    doc = json.loads(json.dumps(r.to_dict(), allow_nan=False))  # audit.json's content
    (tmp_path / "audit.json").write_text(json.dumps(doc), encoding="utf-8")
    assert schema_errors(tmp_path / "audit.json", "audit") == []
    assert doc["pairs"]["worst"] == tri.groups.worst and doc["groups"]["engine"] == "logs"
    assert doc["pairs"]["values"]["B-C"]["ratio_selection"] is not None  # from the log
    # a reference that is not a group: the spec's error, naming the groups
    with pytest.raises(InputError, match=r"spec.toml: reference: bad value 'D'.*A, B, C"):
        audit(_spec(tmp_path, "", top='reference = "D"\n'))


# ------------------------------------------------ Lambda's interval contains its estimate
def _equal_groups_log() -> pd.DataFrame:
    """Two groups, two levels, one step: every (group, level) cell has 4 individuals, 2 of
    them given d1, so the logged policy is exactly equal across groups and levels and the
    plug-in Lambda is 0; every resampled log breaks the tie (Lambda* > 0)."""
    rows, i = [], 0
    for g in ("A", "B"):
        for level in (0, 1):
            for j in range(4):
                d = int(j < 2)
                rows.append(dict(id=i, t=0, group=g, level=level, decision=d,
                                 next_level=min(1, level + d * (j % 2)) if g == "A" else level,
                                 reward=float(d)))
                i += 1
    return pd.DataFrame(rows)


def test_plugin_lambda_interval_contains_its_estimate():
    a = audit_logs(_equal_groups_log(), n_boot=60, seed=0, lambda_estimator="plugin")
    lam = a.decomposition.Lambda
    assert lam == pytest.approx(0.0, abs=1e-15)
    # the replicates' own plug-in Lambda (every resampled |gap| > 0) all lie above the
    # estimate: the raw percentile interval of them excludes it, the hull with it does not
    from causalfair.engines.benefit import lambda_pairs

    folded = np.array([lambda_pairs(p, d, w, a.pair, a.benefit.eps).sum()
                       for p, d, w in zip(*a.replicate_arrays, strict=True)])
    assert np.quantile(folded, 0.025) > lam  # 0.021
    assert lambda_interval_of([(lam, folded)], 0.05)[0] <= lam
    # the plug-in's replicates are its tangent (linear in the benefit gaps: on both sides)
    raw = a.bootstrap["Lambda"].quantile([0.025, 0.975])
    assert raw.iloc[0] < lam < raw.iloc[1]
    lo, hi = a.lambda_interval(0.05)
    assert lo <= lam <= hi and hi == min(1.0, raw.iloc[1])  # Lambda <= 1: clipped
    ci = a.conf_int(0.05)
    assert ci.loc["Lambda", "lower"] <= lam <= ci.loc["Lambda", "upper"]
    assert a.to_dict()["ci"]["intervals"]["Lambda"][0] <= lam


def test_lambda_interval_of_contains_every_estimate():
    reps = np.linspace(0.2, 0.4, 50)
    for method in ("percentile", "normal"):
        lo, hi = lambda_interval_of([(0.05, reps), (0.5, reps)], 0.05, method)
        assert lo <= 0.05 and hi >= 0.5
    assert lambda_interval_of([(0.3, reps)], 0.05) == pytest.approx(
        tuple(np.quantile(reps, [0.025, 0.975])))
    with pytest.raises(InputError, match="method"):
        lambda_interval_of([(0.3, reps)], 0.05, "bca")


def test_cli_reports_every_pair_and_refuses_a_bad_reference(tmp_path, tri_log, capsys):
    from causalfair.cli import main

    path = tmp_path / "tri.csv"
    tri_log.to_csv(path, index=False)
    assert main(["decompose", "--logs", str(path), "--boot", "5", "--reference", "B",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["groups"]["reference"] == "B" and out["pairs"]["reference_pairs"] == ["A-B", "C-B"]
    assert main(["decompose", "--logs", str(path), "--boot", "5"]) == 0
    assert "worst pair" in capsys.readouterr().out
    # one replicate: no standard deviation, so no NaN in the JSON (it was a traceback)
    assert main(["decompose", "--logs", str(path), "--boot", "1", "--json"]) == 2  # no spread
    assert "--boot" in capsys.readouterr().err
    one = audit_logs(str(path), n_boot=1).to_dict()  # Python still takes one replicate
    assert one["pairs"]["values"]["B-A"]["C"]["se"] is None
    assert main(["decompose", "--logs", str(path), "--boot", "0", "--reference", "D"]) == 2
    err = capsys.readouterr().err.strip()
    assert "reference: bad value 'D'" in err and "\n" not in err, err


def test_no_replicates_no_intervals_for_any_pair_or_group(tmp_path, tri_log, capsys):
    """n_boot = 0 (--boot 0): the pairs and groups are estimates with no interval (null in
    JSON, n/a in the table, no sentence about replicates), as the two-group audit shows
    none; they were zero-width "95% normal intervals" (lower = upper = estimate)."""
    from causalfair.cli import main
    from causalfair.thresholds import INCONCLUSIVE, group_verdicts

    gc = audit_logs(tri_log, n_boot=0, seed=1).groups
    for vals in (*gc.pairs.values(), *gc.per_group.values()):
        for k, q in vals.items():
            if q is not None and k not in ("ratio_selection", "selection"):
                assert q[1:] == (None, None, None), (k, q)
    assert not gc.intervals
    frame = gc.to_frame().drop(index="ratio_selection", level="quantity")
    assert frame[["ci_lower", "ci_upper"]].isna().all().all()
    assert "no intervals" in str(gc) and "intervals at 95%" not in str(gc)
    assert {v.status for v in group_verdicts({"max_abs_C": 9.0, "abs_C[B-A]": 9.0,
                                              "min_ratio_V": 0.0}, gc)} == {INCONCLUSIVE}
    path = tmp_path / "tri.csv"
    tri_log.to_csv(path, index=False)
    assert main(["decompose", "--logs", str(path), "--boot", "0"]) == 0
    out = capsys.readouterr().out
    assert "normal intervals" not in out and "the same replicates" not in out
    assert "no intervals: no bootstrap replicates" in out
    row = next(x for x in out.splitlines() if x.strip().startswith("B-A "))
    assert row.split()[2:4] == ["n/a", "n/a"], row
    assert main(["decompose", "--logs", str(path), "--boot", "0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for sec in (doc["pairs"]["values"], doc["groups"]["values"]):
        for vals in sec.values():
            for k, q in vals.items():
                if q is not None and k not in ("ratio_selection", "selection"):
                    assert (q["ci_lower"], q["ci_upper"]) == (None, None), (k, q)
    (tmp_path / "b0.json").write_text(json.dumps(doc), encoding="utf-8")
    assert schema_errors(tmp_path / "b0.json", "decompose") == []
    assert audit_logs(tri_log, n_boot=5, seed=1).groups.intervals  # replicates: intervals


def test_many_groups_pairs_memory_refused_before_the_fit(monkeypatch):
    """A log of many groups: the every-pair comparison (G (G - 1) / 2 pairs, each with its
    values over the replicates) counts against the memory limit, refused before the fit
    (60 groups, 1770 pairs, 200 replicates: about 98 MB, where the replicates alone need 4)."""
    df = simulate_logs(tri_model(), TablePolicy(np.full((3, 2), 0.5)), 600, 1, seed=0)
    df["group"] = (df["id"] % 60).map(lambda i: f"g{i:02d}")
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "50M")
    with pytest.raises(ResourceLimitError, match=r"60 groups x 2 levels compared in 1770 "
                       r"pairs.*or merge groups"):
        audit_logs(df, n_boot=200, seed=0)
    check_boot_memory(200, 60, 2, compared=False)  # bootstrap_logs compares no pairs
    check_boot_memory(200, 2, 2)  # two groups: one pair, not counted
