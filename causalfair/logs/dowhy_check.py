"""dowhy cross-check of the benefit Delta(x, s) estimated from logs, with refuters.

The one-step causal graph of a decision log is the temporal graph of the decision
process (:func:`causalfair.graph.temporal_graph`, method.md section 7) over one epoch,
``horizon=1``, built from the fitted model (its declared structure, checked against its
tables) with a policy that may read S, and restricted to the log's columns: S, X_t (X0),
D_t (D0), X_next (X1) and gain (G0, gain = f^S(X_next) - f^S(X_t)). Nodes the log does
not record (the reward, exogenous variables) are projected out: an edge u -> v is kept
where a directed path from u reaches v through unrecorded nodes only. For the fitted
model of a log (s_to_x0, s_to_transition, no exogenous variable) this gives::

    S -> X_t,  S -> D_t,  X_t -> D_t,  S -> X_next,  X_t -> X_next,  D_t -> X_next,
    X_t -> gain, X_next -> gain     (and S -> gain where f^s differs between groups)

The effect of D_t on the gain is identified by the
backdoor criterion with adjustment set {X_t, S}; within a stratum (X_t = x, S = s) it is
Delta(x, s) = E[gain | do(D_t = d1), x, s] - E[gain | do(D_t = d0), x, s]. dowhy
(``CausalModel``, ``identify_effect``, ``backdoor.linear_regression``: a statsmodels OLS
of the gain on D_t and the adjustment set) estimates it per stratum, independently of
the fitted transition kernel: a cross-check of the model-based Delta = h1 - h0. The
refuters (placebo treatment, random common cause, data subset) are run on the pooled
effect of D_t adjusted for (X_t, S).

``import dowhy`` happens inside the functions (it is slow to import). dowhy and the
libraries it drives emit FutureWarning / UserWarning / RuntimeWarning on routine calls
(deprecations inside dowhy, pandas dtype notes, constant columns in a stratum); they do
not bear on the estimates, and pytest runs with ``filterwarnings = error``, so every
dowhy call is wrapped in ``warnings.catch_warnings()`` with those categories ignored, and
the ``dowhy`` logger is quieted to WARNING for the duration (restored afterwards).
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair import _progress
from causalfair._io import fixed
from causalfair.graph import temporal_graph
from causalfair.logs.errors import LogError
from causalfair.logs.schema import LogData
from causalfair.model import CausalStructure

__all__ = ["DowhyCheck", "dowhy_check", "one_step_graph", "LOG_COLUMNS", "REFUTERS"]

REFUTERS = ("placebo_treatment_refuter", "random_common_cause", "data_subset_refuter")


#: The log's column for each node of the one-epoch temporal graph it records.
LOG_COLUMNS = {"S": "S", "X0": "X_t", "D0": "D_t", "X1": "X_next", "G0": "gain"}


def one_step_graph(model: Any = None) -> Any:
    """The one-step causal graph (networkx DiGraph) of a decision log.

    ``temporal_graph(model, horizon=1)`` (the policy may read S) restricted to the log's
    columns (:data:`LOG_COLUMNS`), unrecorded nodes projected out (see the module
    docstring). ``model``: the fitted :class:`~causalfair.model.TabularModel` (or a
    :class:`~causalfair.model.CausalStructure`); None: the default structure.
    """
    import networkx as nx

    full = temporal_graph(CausalStructure() if model is None else model, 1,
                          policy_reads_s=True).graph
    cols = list(LOG_COLUMNS.values())
    edges = set()
    for u, col in LOG_COLUMNS.items():
        seen, stack = set(), list(full.successors(u))
        while stack:  # directed paths from u through unrecorded nodes
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in LOG_COLUMNS:
                edges.add((col, LOG_COLUMNS[v]))
            else:
                stack.extend(full.successors(v))
    g = nx.DiGraph()
    g.add_nodes_from(cols)
    # by target, then source, in column order (a set's order follows string hashing): the
    # same GML in every process
    g.add_edges_from(sorted(edges, key=lambda e: (cols.index(e[1]), cols.index(e[0]))))
    return g


def _gml(g: Any) -> str:
    import networkx as nx

    return "".join(nx.generate_gml(g))


def _identify(m: Any) -> Any:
    """dowhy's identified estimand with each adjustment set in a fixed order.

    dowhy lists an adjustment set in an order that follows string hashing, so it changes
    from one process to the next; that order is the order of the regressors, and within
    a stratum (X_t and S constant) the regression is rank-deficient, so the estimates'
    last digits followed it. A fixed order makes the check reproducible.
    """
    est_id = m.identify_effect(proceed_when_unidentifiable=True)
    cols = ["X_t", "S", "D_t", "X_next", "gain"]  # the state first, as the summary says
    for attr in ("backdoor_variables", "general_adjustment_variables"):
        sets = getattr(est_id, attr, None)
        if isinstance(sets, dict):
            for key, value in sets.items():
                if isinstance(value, (list, tuple)):
                    sets[key] = sorted(value, key=lambda v: cols.index(v) if v in cols else len(cols))
    return est_id


@contextlib.contextmanager
def _quiet():
    import logging

    logger = logging.getLogger("dowhy")
    old = logger.level
    logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            for cat in (FutureWarning, UserWarning, RuntimeWarning, DeprecationWarning):
                warnings.simplefilter("ignore", cat)
            yield
    finally:
        logger.setLevel(old)


@dataclass(frozen=True, eq=False)
class DowhyCheck:
    """Result of :func:`dowhy_check`.

    ``delta``: DataFrame per (group, level): ``delta_dowhy`` (backdoor linear regression
    within the stratum), its OLS ``ci_lower``/``ci_upper`` (dowhy's intervals), ``n_d0``,
    ``n_d1`` (rows per arm; strata with fewer than ``min_per_arm`` rows in an arm are
    NaN). ``pooled``: the pooled effect of D_t on the gain adjusted for (X_t, S).
    ``refuters``: one dict per refuter (name, estimated_effect, new_effect, p_value,
    passed). ``graph_gml``: the causal graph; ``estimand``: dowhy's identified estimand;
    ``adjustment``: its backdoor adjustment set (in regressor order).
    """

    delta: Any
    pooled: float
    refuters: list[dict[str, Any]]
    graph_gml: str
    estimand: str
    n_rows: int
    seed: int
    adjustment: tuple[str, ...] = ("X_t", "S")

    def compare(self, delta_model: np.ndarray, groups: tuple[str, ...]) -> Any:
        """``delta`` with the model-based Delta(x, s) (G, K) and their difference."""
        df = self.delta.copy()
        gi = {g: i for i, g in enumerate(groups)}
        df["delta_model"] = [float(delta_model[gi[g], x]) for g, x in zip(df["group"], df["level"], strict=True)]
        df["difference"] = df["delta_dowhy"] - df["delta_model"]
        return df

    def to_dict(self) -> dict[str, Any]:
        def clean(v: Any) -> Any:
            if isinstance(v, (float, np.floating)):
                return None if not np.isfinite(v) else float(v)
            if isinstance(v, (np.integer,)):
                return int(v)
            if isinstance(v, (np.bool_,)):
                return bool(v)
            return v

        return {
            "graph_gml": self.graph_gml,
            "estimand": self.estimand,
            "adjustment": list(self.adjustment),
            "method": "backdoor.linear_regression per (level, group) stratum",
            "delta": [{k: clean(v) for k, v in r.items()} for r in self.delta.to_dict(orient="records")],
            "pooled_effect": float(self.pooled),
            "refuters": [{k: clean(v) for k, v in r.items()} for r in self.refuters],
            "n_rows": self.n_rows,
            "seed": self.seed,
        }

    def summary(self) -> str:
        lines = [f"dowhy cross-check (backdoor on {{{', '.join(self.adjustment)}}}; "
                 f"{self.n_rows} rows): pooled "
                 f"effect of D_t on the gain = {fixed(self.pooled, 5, sign=True)}"]
        for r in self.refuters:
            pv = r.get("p_value")
            pv_txt = "n/a" if pv is None or not np.isfinite(pv) else f"{pv:.3f}"
            lines.append(f"  {r['name']:<28} new effect {fixed(r['new_effect'], 5, sign=True)}  "
                         f"p = {pv_txt}  "
                         f"{'passed' if r['passed'] else 'FAILED'}")
        return "\n".join(lines)


def _frame(data: LogData, potential: np.ndarray, rows: np.ndarray | None = None) -> Any:
    import pandas as pd

    idx = slice(None) if rows is None else rows
    g, x, xn, d = data.g[idx], data.x[idx], data.xn[idx], data.d[idx]
    return pd.DataFrame({
        "S": g.astype(np.int64),
        "X_t": x.astype(np.int64),
        "D_t": d.astype(bool),
        "X_next": xn.astype(np.int64),
        "gain": potential[g, xn] - potential[g, x],
    })


def _refutation(name: str, res: Any, est: float, p_threshold: float) -> dict[str, Any]:
    new = res.new_effect
    new = float(np.mean(new)) if np.ndim(new) else float(new)
    pv = None
    rr = getattr(res, "refutation_result", None)
    if isinstance(rr, dict):
        pv = rr.get("p_value")
    pv = float(pv) if pv is not None else float("nan")
    if name == "placebo_treatment_refuter":
        passed = abs(new) < max(0.1 * abs(est), 1e-12) or (np.isfinite(pv) and pv >= p_threshold)
    else:
        passed = not np.isfinite(pv) or pv >= p_threshold
    return {"name": name, "estimated_effect": float(est), "new_effect": new,
            "p_value": pv, "passed": bool(passed)}


def dowhy_check(data: LogData, potential: np.ndarray, *, model: Any = None, seed: int = 0,
                min_per_arm: int = 5,
                refuters: tuple[str, ...] = REFUTERS, n_simulations: int = 20,
                subset_fraction: float = 0.8, max_rows: int | None = 20_000,
                p_threshold: float = 0.05) -> DowhyCheck:
    """Estimate Delta(x, s) per stratum with dowhy and run the refuters (seeded).

    ``model``: the model fitted to the log, whose one-step graph dowhy is given
    (:func:`one_step_graph`; None: the default structure).

    ``max_rows``: the refuters re-estimate the pooled effect ``n_simulations`` times
    each; they run on a seeded random subsample of at most this many rows (None: all).
    The per-stratum estimates always use every row.
    """
    import pandas as pd

    unknown = [r for r in refuters if r not in REFUTERS]
    if unknown:
        raise LogError(f"refuters: unknown {unknown!r}; allowed values: {', '.join(REFUTERS)}.")
    try:
        with _quiet():
            from dowhy import CausalModel
    except ImportError:
        raise LogError("dowhy: the dowhy cross-check needs dowhy, which does not import; "
                       "reinstall it with pip install 'dowhy>=0.12' (a core dependency of "
                       "causalfair), or drop --dowhy / [logs] dowhy.") from None

    pot = np.asarray(potential, dtype=np.float64)
    gml = _gml(one_step_graph(model))
    full = _frame(data, pot)
    G, K = data.n_groups, data.n_levels
    cell = full["S"].to_numpy() * K + full["X_t"].to_numpy()
    order = np.argsort(cell, kind="stable")
    bounds = np.searchsorted(cell[order], np.arange(G * K + 1))
    records = []
    estimand_txt = ""
    for c in range(G * K):
        sub = full.iloc[order[bounds[c]:bounds[c + 1]]]
        n1 = int(sub["D_t"].sum())
        n0 = len(sub) - n1
        rec = {"group": data.groups[c // K], "level": c % K, "n_d0": n0, "n_d1": n1,
               "delta_dowhy": float("nan"), "ci_lower": float("nan"), "ci_upper": float("nan")}
        if n0 >= min_per_arm and n1 >= min_per_arm:
            with _quiet():
                m = CausalModel(data=sub.reset_index(drop=True), treatment="D_t", outcome="gain",
                                graph=gml)
                est_id = _identify(m)
                est = m.estimate_effect(est_id, method_name="backdoor.linear_regression",
                                        confidence_intervals=True, test_significance=False)
                ci = np.asarray(est.get_confidence_intervals(), dtype=np.float64).reshape(-1)
            estimand_txt = estimand_txt or str(est_id)
            rec.update(delta_dowhy=float(est.value), ci_lower=float(ci[0]), ci_upper=float(ci[-1]))
        records.append(rec)
    delta = pd.DataFrame(records)

    rng = np.random.default_rng(seed)
    rows = None
    if max_rows is not None and data.n_rows > max_rows:
        rows = np.sort(rng.choice(data.n_rows, size=int(max_rows), replace=False))
    pooled_df = _frame(data, pot, rows)
    out_ref = []

    prog = _progress.start("dowhy refuters", len(refuters), "refuters")
    with _quiet():
        m = CausalModel(data=pooled_df, treatment="D_t", outcome="gain", graph=gml)
        est_id = _identify(m)
        estimand_txt = str(est_id)
        adjustment = tuple(est_id.get_backdoor_variables())
        est = m.estimate_effect(est_id, method_name="backdoor.linear_regression",
                                test_significance=False)
        pooled = float(est.value)
        for k, name in enumerate(refuters):
            kw: dict[str, Any] = {"num_simulations": int(n_simulations),
                                  "random_seed": int(seed) + k}
            if name == "placebo_treatment_refuter":
                kw["placebo_type"] = "permute"
            if name == "data_subset_refuter":
                kw["subset_fraction"] = float(subset_fraction)
            res = m.refute_estimate(est_id, est, method_name=name, **kw)
            out_ref.append(_refutation(name, res, pooled, p_threshold))
            prog.update(last=name)
    prog.close()
    return DowhyCheck(delta=delta, pooled=pooled, refuters=out_ref, graph_gml=gml,
                      estimand=estimand_txt, n_rows=int(pooled_df.shape[0]), seed=int(seed),
                      adjustment=adjustment)
