"""The audit report's figures (:mod:`causalfair.report.render` writes the report).

Figures (matplotlib on the Agg canvas with constrained layout, imported lazily; pyplot's
global state is not touched), each saved as ``NAME.png`` at :data:`DPI` and embedded in
the HTML as base64:

- ``waterfall`` (headline): C built up as SPE + IPE + DPE, with confidence intervals;
- ``decomposition``: C, DPE, IPE, SPE with their confidence intervals, and the per-group
  direct / indirect / spurious terms;
- ``steps``: per-step contributions to the gain (direct and indirect) per group;
- ``levels``: the groups' level distributions over time under pi and under pi0;
- ``benefit``: benefit Delta(x, s) against the probability of the decision per group (of
  the favourable action with two actions, the worst pairs of Lambda marked; one panel per
  action other than the baseline with more);
- ``graph``: the temporal causal graph (first epochs) of the deployed policy;
- ``notions``: the other notions (TPR gap, ELBERT bias, W1, DP gap) and their thresholds;
- ``frontier``: the utility-fairness frontier with the policy placed on it, when the
  model is tabular and ``causalfair.engines.frontier`` is installed.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from causalfair._simultaneous import ci_label
from causalfair._validation import z_quantile
from causalfair.graph import temporal_graph
from causalfair.plotting import (
    GROUP_COLOURS,
    benefit_actions,
    benefit_scatter,
    new_figure,
    waterfall,
    wrap,
)
from causalfair.policies.grid import reads_group
from causalfair.thresholds import OTHER_NOTIONS

#: An audit result (causalfair.audit.AuditResult), read by duck typing (no import circle).
AuditResult = Any

__all__ = ["make_figures", "figure_png", "figure_png_base64", "skipped_sections", "FIGURES",
           "DPI", "GRAPH_EPOCHS", "FRONTIER_POINTS", "THUMBNAIL_DPI", "headline_figure",
           "figure_titles"]

#: Resolution of the PNG figures: twice a 75-dpi screen, so they stay sharp on
#: high-density displays and in print.
DPI = 150
#: Resolution of the headline figure's preview in a notebook (``AuditResult._repr_html_``):
#: small enough that the cell stays a few tens of KB.
THUMBNAIL_DPI = 48
#: Grid points of the utility-fairness frontier drawn in the report.
FRONTIER_POINTS = 8
#: Epochs of the temporal causal graph drawn in the report (the graph widens with T).
GRAPH_EPOCHS = 3


def gain_unit(r: AuditResult) -> str:
    """The unit of the qualification gain (the system's, else generic gain units)."""
    return getattr(getattr(r.system, "gain", None), "unit", None) or "gain units"


def favourable_label(r: AuditResult) -> str | None:
    """The label of the one action other than the baseline of a two-action audit (lending's
    "approve"), else None (more actions, or no labels known)."""
    decisions = getattr(r.system, "decisions", None)
    labels = tuple(decisions.labels) if decisions is not None else tuple(
        getattr(r.benefit, "actions", None) or ())
    base = int(decisions.baseline) if decisions is not None else 0
    others = [lab for i, lab in enumerate(labels) if i != base]
    return str(others[0]) if len(labels) == 2 else None


def _probability_words(r: AuditResult) -> str:
    """What the benefit figure plots Delta against, in the system's actions: "approval
    probability" where the favourable action is "approve" (lending), "the probability of
    LABEL" for another two-action system, "action probability" with more actions."""
    label = favourable_label(r)
    if label is None:
        return "action probability"
    return "approval probability" if label == "approve" else f"the probability of {label}"


def figure_titles(r: AuditResult) -> dict[str, str]:
    """name -> the title of each report figure (:data:`FIGURES`) in ``r``'s words: its
    gain's name (:class:`causalfair.systems.Gain`) and its actions
    (``DecisionSet.labels``)."""
    gain = getattr(getattr(r.system, "gain", None), "name", None) or "gain"
    out = {n: t for n, t, _ in FIGURES}
    out["decomposition"] = f"Decomposition of the {gain.replace(' ', '-')} disparity, per group"
    out["benefit"] = f"Benefit fairness: Delta vs {_probability_words(r)}"
    return out


def ci_level(r: AuditResult) -> int:
    """The audit's interval level in percent, 100 (1 - alpha)."""
    return int(round(100 * (1 - r.spec.alpha)))


def _fig_waterfall(r: AuditResult):
    """The headline figure: C built up from SPE, IPE and DPE (a waterfall), each bar
    with its confidence interval (none for exact results; :func:`causalfair.results.waterfall`,
    also ``Decomposition.plot()``)."""
    fig, data = waterfall(r.decomposition, r.spec.alpha, gain_unit(r))
    m = getattr(r.decomposition, "simultaneous", 1)
    if m > 1 and not data["exact"]:  # its bars: the data-chosen pair's, over m pairs
        data["simultaneous"] = m
    return fig, data


def headline_figure(r: AuditResult) -> Any:
    """The report's headline figure (the waterfall) alone, without building the others."""
    return _fig_waterfall(r)[0]


def figure_png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def figure_png_base64(fig: Any, dpi: int = DPI) -> str:
    """The figure as a base64 PNG at ``dpi`` (:data:`DPI`; :data:`THUMBNAIL_DPI` for the
    small preview a notebook shows)."""
    if dpi == DPI:
        return base64.b64encode(figure_png(fig)).decode("ascii")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return base64.b64encode(buf.getvalue()).decode("ascii")


# ---------------------------------------------------------------------------- figures
def _fig_decomposition(r: AuditResult):
    dec = r.decomposition
    ci = dec.conf_int(r.spec.alpha)
    names = ["C", "DPE", "IPE", "SPE"]
    est = np.array([getattr(dec, k) for k in names])
    lo = np.array([ci.loc[k, "lower"] for k in names])
    hi = np.array([ci.loc[k, "upper"] for k in names])
    fig = new_figure(8.0, 3.4)
    ax1, ax2 = fig.subplots(1, 2)
    unit = gain_unit(r)
    ax1.bar(names, est, color=["#555555", "#d9822b", "#4c72b0", "#8c8c8c"],
            yerr=np.vstack([est - lo, hi - est]), capsize=4)
    ax1.axhline(0, color="black", lw=0.6)
    a, b = dec.pair
    ax1.set_title(f"C = DPE + IPE + SPE ({dec.groups[a]} - {dec.groups[b]})", fontsize=9)
    ax1.set_ylabel(wrap(f"gap ({unit})", 36), fontsize=8)
    parts = ("direct", "indirect", "spurious")
    G = len(dec.groups)
    width = 0.8 / G
    x = np.arange(len(parts))
    per_group = {}
    for i, g in enumerate(dec.groups):
        vals = np.array([dec.V[i] - dec.V_ps[i], dec.V_ps[i] - dec.V_0[i], dec.V_0[i]])
        keys = (f"direct[{g}]", f"indirect[{g}]", f"V_0[{g}]")
        err = None
        if dec.se:
            se = np.array([dec.se.get(k, 0.0) for k in keys])
            err = z_quantile(r.spec.alpha) * se
        ax2.bar(x + (i - (G - 1) / 2) * width, vals, width, yerr=err, capsize=3, label=g,
                color=GROUP_COLOURS[i % len(GROUP_COLOURS)])
        per_group[g] = {"direct": float(vals[0]), "indirect": float(vals[1]),
                        "spurious": float(vals[2]),
                        "half_width": None if err is None else err.tolist()}
    ax2.set_xticks(x, parts)
    ax2.axhline(0, color="black", lw=0.6)
    ax2.set_title("Per group: V^pi - V^PS, V^PS - V^pi0, V^pi0", fontsize=9)
    ax2.set_ylabel(wrap(f"expected total gain ({unit})", 36), fontsize=8)
    m = getattr(dec, "simultaneous", 1)  # C, DPE, IPE, SPE of a data-chosen pair: over m
    title = None if not dec.se else f"error bars: {ci_label(ci_level(r))}" + (
        "" if m == 1 else f"; C, DPE, IPE, SPE: {ci_label(ci_level(r), m)}")
    if G <= 2:
        ax2.legend(fontsize=8, frameon=False, title=title, title_fontsize=7)
    else:  # more groups: beside the panels, never over the bars
        fig.legend(*ax2.get_legend_handles_labels(), fontsize=8, frameon=False, title=title,
                   title_fontsize=7, loc="outside right upper")
    level = int(round(100 * (1 - r.spec.alpha)))
    data = {"effects": {k: {"estimate": float(e), "ci_lower": float(lo_), "ci_upper": float(hi_)}
                        for k, e, lo_, hi_ in zip(names, est, lo, hi, strict=True)},
            "ci_level": level, "groups": per_group}
    if dec.se and m > 1:
        data["simultaneous"] = m
    return fig, data


def _fig_steps(r: AuditResult):
    dec = r.decomposition
    steps = dec.steps
    T = steps.shape[2]
    fig = new_figure(8.0, 3.2)
    ax = fig.subplots()
    t = np.arange(T)
    data = {}
    for i, g in enumerate(dec.groups):
        c = GROUP_COLOURS[i % len(GROUP_COLOURS)]
        direct = steps[0, i] - steps[1, i]
        indirect = steps[1, i] - steps[2, i]
        ax.plot(t, direct, color=c, lw=1.6, label=f"direct, {g}")
        ax.plot(t, indirect, color=c, lw=1.6, ls="--", label=f"indirect, {g}")
        data[g] = {"direct": direct.tolist(), "indirect": indirect.tolist(),
                   "pi": steps[0, i].tolist(), "ps": steps[1, i].tolist(),
                   "pi0": steps[2, i].tolist()}
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xlabel("decision epoch t (steps)")
    ax.set_ylabel(wrap(f"expected gain at step t ({gain_unit(r)})", 34), fontsize=8)
    ax.set_title("Per-step contributions: direct (pi - pi^PS) and indirect (pi^PS - pi0)",
                 fontsize=9)
    fig.legend(fontsize=7, frameon=False, ncol=_legend_columns(dec.groups),
               loc="outside lower center")
    return fig, data


#: Characters of fontsize-7 legend text that fit across the 8-inch figures, handles included.
_LEGEND_CHARS = 120


def _legend_columns(groups: Sequence[str]) -> int:
    """Columns of the steps legend ("direct, G" and "indirect, G" per group): as many
    whole groups per row as fit across the figure, at least one."""
    per_entry = len("indirect, ") + max(len(str(g)) for g in groups) + 6  # + handle, padding
    return 2 * max(1, min(len(groups), _LEGEND_CHARS // (2 * per_entry)))


def _fig_levels(r: AuditResult):
    if r.mu_pi is None or r.mu_0 is None or r.model is None:
        return None  # reason: see skipped_sections
    groups = r.model.group_names
    G = len(groups)
    fig = new_figure(8.0, 1.8 * G + 0.8)
    axes = np.atleast_2d(fig.subplots(G, 2, sharex=True, sharey=True))
    K = r.mu_pi.shape[2]
    im = None
    for i, g in enumerate(groups):
        for j, (mu, lab) in enumerate(((r.mu_pi, "pi"), (r.mu_0, "pi0"))):
            ax = axes[i, j]
            im = ax.imshow(mu[:, i, :].T, origin="lower", aspect="auto", cmap="viridis",
                           vmin=0.0, vmax=1.0, extent=(-0.5, mu.shape[0] - 0.5, 0.5, K + 0.5))
            ax.set_title(f"{g} under {lab}", fontsize=8)
            if j == 0:
                ax.set_ylabel("level")
            if i == G - 1:
                ax.set_xlabel("decision epoch t (steps)")
    fig.colorbar(im, ax=axes, label="P(level | group) (probability)")
    data = {"pi": {g: r.mu_pi[:, i, :].tolist() for i, g in enumerate(groups)},
            "pi0": {g: r.mu_0[:, i, :].tolist() for i, g in enumerate(groups)},
            "levels": list(r.model.level_labels)}
    return fig, data


def _baseline_action(r: AuditResult) -> int | None:
    """The index of the baseline action pi0 takes: the system's, else the one the audit's
    selection rates name; None when neither says."""
    decisions = getattr(r.system, "decisions", None)
    if decisions is not None:
        return int(decisions.baseline)
    label = (r.selection or {}).get("baseline_action")
    return r.benefit.actions.index(label) if label in r.benefit.actions else None


def _fig_benefit(r: AuditResult):
    """Benefit Delta(x, s) against the probability of the favourable action per group, the
    worst pairs of Lambda marked (:func:`causalfair.plotting.benefit_scatter`, also
    ``BenefitResult.plot()``); with A > 2 actions one panel per action other than the
    baseline (:func:`causalfair.plotting.benefit_actions`)."""
    ben = r.benefit
    if ben is None or not hasattr(ben, "contributions"):
        return None
    if getattr(ben, "multi", False):  # (cells a group never visits: no estimate, not drawn)
        return benefit_actions(ben, gain_unit(r), base=_baseline_action(r), hide_unvisited=True)
    return benefit_scatter(ben, gain_unit(r), worst=r.spec.worst, label=favourable_label(r),
                           hide_unvisited=True)


def _fig_graph(r: AuditResult):
    source = r.system if r.system is not None else r.model
    if source is None:
        return None
    T = min(GRAPH_EPOCHS, r.decomposition.horizon)
    if r.policy is None and (r.policy_table is None or r.model is None):
        reads = True  # nothing tells: the conservative graph
    else:
        reads = reads_group(r.policy if r.policy is not None else r.policy_table, r.model,
                            system=r.system, table=r.policy_table)
    tg = temporal_graph(source, T, policy_reads_s=reads, variant="pi")
    fig = tg.draw()
    ax = fig.axes[0]
    ax.set_title(f"{ax.get_title()} (first {T} of {r.decomposition.horizon} epochs drawn)",
                 fontsize=10, parse_math=True)
    data = {"horizon_drawn": T, "policy_reads_s": bool(reads),
            "nodes": tg.nodes(), "edges": [list(e) for e in tg.edges()]}
    return fig, data


_NOTION_UNITS = {"tpr_gap": "probability", "elbert_bias": "ratio", "w1_final": "levels",
                 "dp_gap": "probability"}


def _fig_notions(r: AuditResult):
    vals = {k: r.notions.get(k) for k in OTHER_NOTIONS}
    vals = {k: float(v) for k, v in vals.items() if isinstance(v, (int, float))}
    if not vals:
        return None
    fig = new_figure(8.0, 2.6)
    ax = fig.subplots()
    names = list(vals)
    y = np.arange(len(names))
    ax.barh(y, [vals[k] for k in names], color="#4c72b0")
    for i, k in enumerate(names):
        thr = r.spec.thresholds.get(k)
        if thr is not None:
            ax.plot([thr, thr], [i - 0.4, i + 0.4], color="#cf222e", lw=2)
        ax.annotate(f"{vals[k]:.4f}", (vals[k], i), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=8)
    ax.set_yticks(y, [f"{k} ({_NOTION_UNITS[k]})" for k in names], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("value (unit per notion, on the left)", fontsize=8)
    ax.set_title("Other notions (red bar: threshold)", fontsize=9)
    data = {"values": vals, "thresholds": {k: r.spec.thresholds[k] for k in names
                                           if k in r.spec.thresholds}}
    return fig, data


def _fig_frontier(r: AuditResult):
    if r.model is None or r.spec.source != "model" or (
            r.system is not None and "frontier" not in r.system.engines):
        return None
    from causalfair.engines.frontier import frontier

    fr = frontier(r.model, r.decomposition.horizon, points=FRONTIER_POINTS)
    tables = {r.decomposition.policy_name: r.policy_table}
    rep = r.extra.get("repair") or {}
    for name, tab in (rep.get("tables") or {}).items():  # a constrained repair's references
        if tab is not None:
            tables[name] = np.asarray(tab, dtype=np.float64)
    placed = fr.place(tables)
    fig = fr.plot(placed=placed)
    bound = rep.get("lp_bound")
    lin = [c for c in (bound or {}).get("constraints", []) if c in r.spec.thresholds]
    if bound and lin and lin[0] == f"abs_{fr.constraint}":
        ax = fig.axes[0]
        ax.plot([r.spec.thresholds[lin[0]]], [bound["utility"]], "k*", ms=11,
                label=f"LP bound ({', '.join(bound['constraints'])})")
        ax.legend(fontsize=8, loc="best")
    data = fr.to_dict()
    data["placed"] = placed.to_dict(orient="records")
    return fig, data


#: (name, title, builder) in report order.
FIGURES: tuple[tuple[str, str, Callable[[Any], Any]], ...] = (
    ("waterfall", "The gap C built up from its three parts (headline)", _fig_waterfall),
    ("decomposition", "Decomposition of the qualification-gain disparity, per group",
     _fig_decomposition),
    ("steps", "Per-step gain contributions", _fig_steps),
    ("levels", "Level distributions over time under pi and pi0", _fig_levels),
    ("benefit", "Benefit fairness: Delta vs approval probability", _fig_benefit),
    ("graph", "Temporal causal graph", _fig_graph),
    ("notions", "Other fairness notions", _fig_notions),
    ("frontier", "Utility-fairness frontier", _fig_frontier),
)


def build_figures(r: AuditResult, names: Sequence[str] | None = None,
                  figures: Sequence[tuple[str, str, Callable[[Any], Any]]] = FIGURES
                  ) -> dict[str, tuple[Any, dict[str, Any]]]:
    """name -> (Figure, data) for the applicable figures of ``figures`` among ``names``
    (default all)."""
    import matplotlib

    out = {}
    # user strings (group names, labels) are text, never mathtext: "$x$" stays "$x$"
    with matplotlib.rc_context({"text.parse_math": False}):
        for name, _, builder in figures:
            if names is None or name in names:
                made = builder(r)
                if made is not None:
                    out[name] = made
    return out


def skipped_sections(r: AuditResult) -> dict[str, str]:
    """name -> one-line reason, for every report figure that does not apply."""
    out: dict[str, str] = {}
    sysname = r.system.id if r.system is not None else "this audit"
    if r.model is None or r.mu_pi is None:
        out["levels"] = (f"no level distributions: {sysname} has no tabular model of "
                         "independent units (Monte Carlo audit)")
    if r.benefit is None or not hasattr(r.benefit, "contributions"):
        out["benefit"] = r.extra.get("benefit") if isinstance(r.extra.get("benefit"), str) else (
            "benefit fairness is summarised in the tables (Monte Carlo estimate by forks)")
    if r.spec.source == "model" and (r.model is None or (
            r.system is not None and "frontier" not in r.system.engines)):
        tab = r.model if r.model is not None else getattr(r.system, "tabular", None)
        has = f"one with {tab.n_actions} actions" if tab is not None and tab.n_actions != 2 \
            else "none"
        out["frontier"] = (f"no utility-fairness frontier: the LP needs a tabular model with "
                           f"two actions, and {sysname} has {has}")
    if not any(isinstance(r.notions.get(k), (int, float)) for k in OTHER_NOTIONS):
        out["notions"] = (f"no other notions: TPR, ELBERT, W1 and DP are computed on a tabular "
                          f"model, and {sysname} has none (Monte Carlo audit)" if r.model is None
                          else "no other notions: TPR, ELBERT, W1 and DP need a tabular model "
                          "(and a p_repay table for TPR/ELBERT)")
    return out


def make_figures(r: AuditResult) -> dict[str, Any]:
    """name -> matplotlib Figure for every applicable figure."""
    return {k: fig for k, (fig, _) in build_figures(r).items()}
