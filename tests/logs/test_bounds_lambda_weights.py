"""Positivity bounds of Lambda when the audited policy takes decisions at rows the log has
no data for: P(x | s) then depends on those rows, and the bounds range over it too
(causalfair.logs.fit.positivity_bounds). They held it at the fitted model's visitation, so
a model of the identification set had Lambda 0.652 above the reported upper bound 0.531."""

from __future__ import annotations

import numpy as np
import pandas as pd

import causalfair as cf
from causalfair.logs import audit_logs


def _log() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for i in range(400):  # every decision d0: the d1 rows have no data
        x = 0
        for t in range(3):
            xn = x if x == 1 else int(rng.random() < 0.5)
            rows.append(dict(id=i, t=t, group="ab"[i % 2], level=x, decision=0,
                             next_level=xn, reward=0.0))
            x = xn
    return pd.DataFrame(rows)


def test_lambda_bounds_cover_every_model_of_the_identification_set():
    cand = np.array([[1.0, 0.0], [0.0, 1.0]])  # a approved at level 0, b at level 1
    audit = audit_logs(_log(), policy=cand, on_positivity="bounds", potential=[0.0, 1.0],
                       eps=0.1, n_boot=0)
    bounds, fitted = audit.bounds, audit.model
    lo, hi = bounds.loc["Lambda", "lower"], bounds.loc["Lambda", "upper"]
    kern = np.array(fitted.kernel)
    kern[:, 1] = [[1.0, 0.0], [1.0, 0.0]]  # the unknown d1 rows: back to level 0
    worst = cf.decompose(fitted.with_(kernel=kern), cand, 3, eps=0.1)
    assert worst.Lambda > 0.65  # a model the log cannot rule out
    assert lo <= worst.Lambda <= hi
    rng = np.random.default_rng(1)
    for _ in range(300):  # and any other completion of the unknown rows
        kern[:, 1] = rng.dirichlet(np.full(2, 0.2), size=(2, 2))
        dec = cf.decompose(fitted.with_(kernel=kern), cand, 3, eps=0.1)
        assert lo - 1e-12 <= dec.Lambda <= hi + 1e-12
        for key in ("C", "DPE", "IPE", "SPE"):
            assert bounds.loc[key, "lower"] - 1e-12 <= getattr(dec, key) <= \
                bounds.loc[key, "upper"] + 1e-12
