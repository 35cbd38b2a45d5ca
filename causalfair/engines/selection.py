"""Selection rates in the sense of bias-audit rules such as New York City's Local Law 144:
per group, step and non-baseline action, the share of the group given that action (of a
model audit, a log's observed decisions, or the decisions a Monte Carlo run drew), with
the counts behind them where there are individuals. Read by the group comparison
(``ratio_selection``, :mod:`causalfair.engines.groups`) and ``causalfair export ll144``."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["selection_rates", "counted_selection"]


def selection_rates(model: Any, table: Any, mu_pi: Any, T: int, *, source: str,
                    labels: Any = None, logs: Any = None) -> dict[str, Any]:
    """Selection rates in the sense of bias-audit rules such as NYC Local Law 144: per
    group, per step t < T and per non-baseline action a, the share of the group given a,
    sum_x mu_t(x | s) pi_t(a | x, s) (``rate``; method.md section 2, mu under pi), and
    its mean over the steps (``rate_overall``). From ``logs`` (a log audit): the decisions
    observed in the log instead, with the counts behind them (``n``: individuals of the
    group at step t, ``count``: those given a; :func:`counted_selection` for a Monte Carlo
    audit); a model audit has no individuals, so its counts are null. ``labels``: the
    action names (default: the model's, else d0, d1, ...). A model that declares
    ``departed_levels`` (individuals who left): the shares of those present."""
    import numpy as np

    labels = [str(x) for x in labels or model.action_labels
              or [f"d{a}" for a in range(model.n_actions)]]
    acts = [a for a in range(model.n_actions) if a != model.baseline]
    groups = [str(g) for g in model.group_names]
    out: dict[str, Any] = {"source": source, "baseline_action": labels[model.baseline],
                           "actions": [labels[a] for a in acts], "groups": groups,
                           "steps": int(T), "rate": {}, "rate_overall": {}, "n": None,
                           "count": None}
    if logs is None:
        pa = model.action_table(table)
        pa = pa if pa.ndim == 4 else np.broadcast_to(pa, (T, *pa.shape))
        # (G, A, T); a share in [0, 1], kept there against rounding (1 + 2e-16 from a group
        # given a by everyone: audit.json's schema, and a reader, expect at most 1)
        share = np.clip(np.einsum("tsx,tsxa->sat", mu_pi[:T], pa[:T]), 0.0, 1.0)
        if getattr(model, "departed_levels", None):  # the share of those present
            return _present_rates(out, model, mu_pi[:T], pa[:T], labels, acts)
        for i, g in enumerate(groups):
            out["rate"][g] = {labels[a]: share[i, a].tolist() for a in acts}
            out["rate_overall"][g] = {labels[a]: float(share[i, a].mean()) for a in acts}
        return out
    steps = sorted(int(t) for t in logs["t"].unique())
    n = logs.groupby(["group", "t"]).size()
    c = logs.groupby(["group", "t", "decision"]).size()
    out.update(steps=len(steps), t=steps)
    return _rates_of_counts(out, {g: [int(n.get((g, t), 0)) for t in steps] for g in groups},
                            {g: {labels[a]: [int(c.get((g, t, a), 0)) for t in steps]
                                 for a in acts} for g in groups})


def _present_rates(out: dict[str, Any], model: Any, mu: Any, pa: Any, labels: list[str],
                   acts: list[int]) -> dict[str, Any]:
    """Model rates over those present (a model that declares ``departed_levels``): at step
    t the share of the group's present mass given a (None where none is present), and
    overall the selected present mass over the present mass summed over the steps."""
    import numpy as np

    here = np.ones(mu.shape[-1])
    here[list(model.departed_levels)] = 0.0
    mass = np.einsum("tsx,x->st", mu, here)  # (G, T)
    given = np.einsum("tsx,tsxa,x->sat", mu, pa, here)  # (G, A, T)
    for i, g in enumerate(out["groups"]):
        out["rate"][g] = {labels[a]: [min(1.0, max(0.0, float(x / m))) if m > 0 else None
                                      for x, m in zip(given[i, a], mass[i], strict=True)]
                          for a in acts}
        total = float(mass[i].sum())
        out["rate_overall"][g] = {labels[a]: min(1.0, max(0.0, float(given[i, a].sum()) / total))
                                  if total > 0 else None for a in acts}
    return out


def counted_selection(decisions: Any, groups: Any, labels: Any, baseline: int,
                      worlds: int | None = None) -> dict[str, Any]:
    """The selection rates of :func:`selection_rates` from the decisions a Monte Carlo run
    drew (``decisions``: (G, A, T) counts of the units of each group given each action at
    each step, :attr:`causalfair.results.Decomposition.decisions`; their sum over the actions
    is the units of the group at that step), with those counts (``source`` "mc"). A system
    that declares departed levels: the run counts only the units present at each step (the
    Monte Carlo engines), so these are the rates of those present, as the model's.
    ``worlds``: the number of worlds when the units are coupled (they share worlds), for
    the standard errors (:func:`_rates_of_counts`)."""
    import numpy as np

    cnt = np.asarray(decisions, dtype=np.int64)
    labels = [str(x) for x in labels]
    acts = [a for a in range(cnt.shape[1]) if a != baseline]
    groups = [str(g) for g in groups]
    out: dict[str, Any] = {"source": "mc", "baseline_action": labels[baseline],
                           "actions": [labels[a] for a in acts], "groups": groups,
                           "steps": int(cnt.shape[2]), "rate": {}, "rate_overall": {}}
    return _rates_of_counts(out, {g: cnt[i].sum(0).tolist() for i, g in enumerate(groups)},
                            {g: {labels[a]: cnt[i, a].tolist() for a in acts}
                             for i, g in enumerate(groups)}, worlds)


def _rates_of_counts(out: dict[str, Any], n: dict[str, list[int]],
                     count: dict[str, dict[str, list[int]]], worlds: int | None = None
                     ) -> dict[str, Any]:
    """``out`` with ``n`` (units per group and step), ``count`` (per group and action) and
    the rates they give (None where a group has no unit at a step), and ``se_selected``:
    per group, a standard error of its overall share given any non-baseline action (the
    sum of its ``rate_overall``), for the interval of ``ratio_selection``.

    The counts are of sampled units (a Monte Carlo run's, a log's individuals), so that
    share is an estimate. It is the steps' shares p_t weighted by their units n_t / N; the
    same units are counted at every step, so the steps' shares are correlated, by at most
    1: the standard error is bounded by sum_t (n_t / N) sqrt(p_t (1 - p_t) / m_t)
    (Cauchy-Schwarz), each step's binomial one, m_t = n_t independent units (or ``worlds``
    worlds of coupled units: a world's share of the group is one draw in [0, 1] of variance
    at most p_t (1 - p_t)). Conservative: exact for perfectly correlated steps, wider
    otherwise (docs/decomposition.md). p_t is read there as (x_t + 1/2) / (n_t + 1), x_t
    the units selected, so a step where the sample selected none or all of the group still
    has an error (a zero-width interval would claim a certainty no sample gives)."""
    out.update(n=n, count=count, rate={}, rate_overall={}, se_selected={})
    for g, ng in n.items():
        out["rate"][g] = {a: [x / m if m else None for x, m in zip(ca, ng, strict=True)]
                          for a, ca in count[g].items()}
        out["rate_overall"][g] = {a: sum(ca) / sum(ng) if sum(ng) else None
                                  for a, ca in count[g].items()}
        total, se = sum(ng), 0.0
        for t, m in enumerate(ng):
            if m:  # the share read as (x + 1/2) / (m + 1): a sample's 0 or 1 keeps an error
                p = min(1.0, (sum(ca[t] for ca in count[g].values()) + 0.5) / (m + 1))
                se += m / total * math.sqrt(p * (1.0 - p) / (worlds or m))
        out["se_selected"][g] = se if total else None
    return out
