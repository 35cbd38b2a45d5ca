"""The figures the result objects draw (``Decomposition.plot``, ``BenefitResult.plot``,
``GroupComparison.plot``) and the audit report draws with the same functions
(:mod:`causalfair.report.figures`). matplotlib is imported inside the functions: importing
this module costs nothing. Every function returns a Figure on the Agg canvas (or draws into
a given Axes) and never shows or writes it."""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np

from causalfair._io import fixed
from causalfair._simultaneous import MARK, ci_label, simultaneous_sentence
from causalfair._validation import check_int, check_unit
from causalfair.errors import InputError, short

__all__ = ["new_figure", "wrap", "waterfall", "benefit_scatter", "benefit_actions",
           "benefit_figure", "GROUP_COLOURS", "group_marker", "same_size_markers", "lambda_label", "text_only",
           "check_axes"]

#: One colour per group, distinct up to 10 groups (e.g. an intersection of 5 x 2 attributes).
GROUP_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
                 "#17becf", "#bcbd22", "#ff7f0e", "#7f7f7f")


def text_only() -> Any:
    """A context in which the texts a figure creates are never mathtext: a group named
    ``"$x$"`` or ``"$\\alpha"`` is drawn as written (not as a formula, nor a ValueError at
    draw time), as in the report (:func:`causalfair.report.figures.build_figures`)."""
    import matplotlib

    return matplotlib.rc_context({"text.parse_math": False})


def check_axes(ax: Any) -> Any:
    """``ax`` when it is None or one matplotlib Axes, else an InputError naming what it is
    (the array of ``plt.subplots(1, 2)``, a Figure)."""
    if ax is None:
        return ax
    from matplotlib.axes import Axes

    if not isinstance(ax, Axes):
        what = (f"an array of {ax.size} Axes" if isinstance(ax, np.ndarray)
                else f"a {type(ax).__name__}")
        raise InputError(f"ax: expected one matplotlib Axes, got {what}; pass one panel, e.g. "
                         "ax=axes[0] of fig, axes = plt.subplots(1, 2), or leave ax out for a "
                         "new Figure.")
    return ax


def new_figure(w: float, h: float) -> Any:
    """A Figure on the Agg canvas with matplotlib's constrained layout, which fits
    titles, labels, legends and colour bars inside the canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def wrap(text: str, width: int) -> str:
    """An axis label broken into lines of at most ``width`` characters (long units and
    group names stay inside the figure)."""
    return textwrap.fill(text, width, break_long_words=False, break_on_hyphens=False)


def waterfall(dec: Any, alpha: float = 0.05, unit: str = "gain units", *, ax: Any = None
              ) -> tuple[Any, dict[str, Any]]:
    """C built up from SPE, IPE and DPE of a decomposition ``dec`` (a waterfall), each bar
    with its 1 - ``alpha`` confidence interval (none for exact results), on a new Figure
    or into ``ax``. Returns the Figure and the data it draws."""
    check_axes(ax)
    ci = dec.conf_int(alpha)
    a, b = dec.pair
    ga, gb = dec.groups[a], dec.groups[b]
    exact = not dec.se
    level = int(round(100 * (1 - alpha)))
    colours = {"SPE": "#8c8c8c", "IPE": "#4c72b0", "DPE": "#d9822b", "C": "#333333"}
    words = {"SPE": "spurious\n(no decisions)", "IPE": "indirect\n(delayed)",
             "DPE": "direct", "C": "total gap"}
    if ax is None:
        fig = new_figure(8.0, 3.8)
        ax = fig.subplots()
    else:
        fig = ax.figure
    start, data = 0.0, {}
    ticks = []
    for i, k in enumerate(("SPE", "IPE", "DPE", "C")):
        v = float(getattr(dec, k))
        lo, hi = float(ci.loc[k, "lower"]), float(ci.loc[k, "upper"])
        base = 0.0 if k == "C" else start
        ax.bar(i, v, bottom=base, width=0.6, color=colours[k], edgecolor="black", linewidth=0.5)
        if not exact:
            ax.errorbar(i, base + v, yerr=[[v - lo], [hi - v]], color="black", capsize=5, lw=1)
        if k != "C":
            ax.plot([i + 0.3, i + 0.7], [base + v, base + v], color="#777777", lw=0.8, ls=":")
            start += v
        label = f"{k}: {words[k]}\n{fixed(v, 4, sign=True)}"
        if not exact:
            label += f"\n[{fixed(lo, 4, sign=True)}, {fixed(hi, 4, sign=True)}]"
        ticks.append(label)
        data[k] = {"estimate": v, "ci_lower": lo, "ci_upper": hi, "bottom": base}
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(range(4), ticks, fontsize=8)
    ax.set_ylabel(wrap(f"gap, {ga} minus {gb} ({unit})", 44), fontsize=8)
    m = 1 if exact else getattr(dec, "simultaneous", 1)  # a data-chosen pair: over m pairs
    how = ("exact: no sampling error" if exact else f"error bars: {level}% confidence intervals"
           if m == 1 else f"error bars: {ci_label(level, m)}")  # the mark, then the sentence
    note = "" if m == 1 else "\n" + wrap(f"{MARK} {simultaneous_sentence(f'{ga}-{gb}', m, alpha)}",
                                         130)
    ax.set_title(wrap(f"C = SPE + IPE + DPE over T = {dec.horizon} decisions; positive favours "
                      f"{ga}, negative favours {gb} ({how})", 110) + note, fontsize=9)
    return fig, {"effects": data, "exact": exact, "ci_level": level, "pair": [ga, gb]}


# ------------------------------------------------------------------ benefit fairness
def group_marker(i: int) -> dict[str, Any]:
    """Scatter style of group i: the first filled and translucent, the others hollow with
    another shape and drawn on top, so coinciding points of two groups both stay visible."""
    c = GROUP_COLOURS[i % len(GROUP_COLOURS)]
    if i == 0:
        return {"marker": "o", "color": c, "alpha": 0.55, "edgecolors": "black",
                "linewidths": 0.4, "zorder": 2}
    return {"marker": "sD^v"[(i - 1) % 4], "facecolors": "none", "edgecolors": c,
            "linewidths": 1.6, "zorder": 3}


def same_size_markers(legend: Any, size: float = 40.0) -> None:
    """One marker size for every group in a scatter legend (a group's largest state would
    otherwise set its marker, and with several groups the markers overlap)."""
    for handle in legend.legend_handles:
        if hasattr(handle, "set_sizes"):
            handle.set_sizes([size])


def lambda_label(ben: Any) -> str:
    """Lambda's name in a figure (``ben.notion``: Lambda, or Lambda_T): "Lambda" with two
    groups, "Lambda[A-B]" (the pair it compares) with more."""
    name = getattr(ben, "notion", None) or "Lambda"  # Lambda_T: the benefit to the horizon
    if len(ben.groups) <= 2:
        return name
    a, b = ben.pair
    return f"{name}[{ben.groups[a]}-{ben.groups[b]}]"


def _seen(ben: Any, values: np.ndarray, hide_unvisited: bool) -> np.ndarray:
    """``values`` (G, K, ...) with the cells no unit of the group visits as NaN (no
    estimate there; a scatter leaves NaN out), when ``hide_unvisited`` and the result says
    which cells were visited (Monte Carlo by forks)."""
    if not hide_unvisited or getattr(ben, "visited", None) is None:
        return values
    seen = np.asarray(ben.visited, dtype=bool)
    seen = seen.reshape(seen.shape + (1,) * (values.ndim - seen.ndim))
    return np.where(seen, values, np.nan)


def benefit_scatter(ben: Any, unit: str, *, worst: int, label: str | None, ax: Any = None,
                    hide_unvisited: bool = False) -> tuple[Any, dict[str, Any]]:
    """Benefit fairness of a two-action :class:`~causalfair.results.BenefitResult` ``ben``:
    Delta(x, s) (in ``unit``) against P(``label`` | x, s) per group, marker area ~ P(x | s),
    the ``worst`` pairs of Lambda joined and ranked. ``label``: the favourable action's
    name; None or "approve" keep the paper's words (P(d1), approval). On a new Figure
    (legend beside the axes) or into ``ax`` (legend inside it). ``hide_unvisited``: leave
    out the cells a group never visits (Monte Carlo by forks: no estimate there). Returns
    the Figure and the data it draws."""
    from matplotlib.lines import Line2D

    if check_axes(ax) is None:
        fig = new_figure(8.0, 3.8)
        ax = fig.subplots()
        into = None
    else:
        fig = into = ax.figure
    delta, p_d1 = _seen(ben, ben.delta, hide_unvisited), _seen(ben, ben.p_d1, hide_unvisited)
    a, b = ben.pair
    for i, g in enumerate(ben.groups):
        size = 20 + 400 * np.asarray(ben.state_weights[i])
        ax.scatter(delta[i], p_d1[i], s=size, label=f"{g} (area ~ P(x | {g}))",
                   **group_marker(i))
    table = ben.worst_pairs(worst)
    K = ben.contributions.shape[0]
    order = np.argsort(-ben.contributions, axis=None, kind="stable")[: worst]
    order = order[ben.contributions.reshape(-1)[order] > 0]  # a pair adding 0 is no worst pair
    xa, xb = np.unravel_index(order, (K, K))
    span = max(float(np.ptp(ben.delta)), 1e-12)
    labels: list[list[Any]] = []  # [x, y, ranks]: pairs whose midpoints nearly coincide share one
    for rank, (i, j) in enumerate(zip(xa, xb, strict=True), start=1):
        p1 = (ben.delta[a, i], ben.p_d1[a, i])
        p2 = (ben.delta[b, j], ben.p_d1[b, j])
        ax.plot([p1[0], p2[0]], [p1[1], p2[1]], color="#444444", lw=0.9, ls=":")
        mid = ((p1[0] + p2[0]) / 2, (p1[1] + p2[1]) / 2)
        for lab in labels:
            if abs(lab[0] - mid[0]) < 0.06 * span and abs(lab[1] - mid[1]) < 0.08:
                lab[2].append(rank)
                break
        else:
            labels.append([mid[0], mid[1], [rank]])
    for x, y, ranks in labels:
        ax.annotate(", ".join(f"#{k}" for k in ranks), (x, y), xytext=(4, 4),
                    textcoords="offset points", fontsize=7, color="#222222",
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
    notion = getattr(ben, "notion", None) or "Lambda"
    ax.set_xlabel(f"benefit Delta(x, s) = h1 - h0 ({unit})" if notion == "Lambda" else
                  f"benefit to the horizon Delta^T(x, s) ({unit})", fontsize=8)
    lending = label in (None, "approve")  # the paper's words: P(d1), approval
    ax.set_ylabel("P(d1 | x, s) (probability)" if lending else f"P({label} | x, s) (probability)",
                  fontsize=8)
    ax.set_ylim(-0.08, 1.08)
    ax.set_title(f"Benefit vs {'approval' if lending else f'P({label})'} ({lambda_label(ben)} = "
                 f"{ben.Lambda:.4f})", fontsize=9)
    between = "" if len(ben.groups) <= 2 else f" between {ben.groups[a]} and {ben.groups[b]}\n"
    handles, _ = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="#444444", lw=0.9, ls=":",
                          label=f"worst pairs of {notion}{between or ' '}"
                                + (f"(#1 = largest, {len(order)} shown)" if len(order) else
                                   "(none: every pair adds 0)")))
    if into is None:
        legend = fig.legend(handles=handles, fontsize=7, frameon=False, loc="outside right upper")
    else:  # a panel of the caller's figure: the legend stays on its own axes
        legend = ax.legend(handles=handles, fontsize=7, frameon=False, loc="best")
    if len(ben.groups) > 2 or into is not None:
        same_size_markers(legend)
    data = {"delta": {g: ben.delta[i].tolist() for i, g in enumerate(ben.groups)},
            "p_d1": {g: ben.p_d1[i].tolist() for i, g in enumerate(ben.groups)},
            "state_weights": {g: np.asarray(ben.state_weights[i]).tolist()
                              for i, g in enumerate(ben.groups)},
            "worst_pairs": table.to_dict(orient="records")}
    return fig, data


def benefit_actions(ben: Any, unit: str, *, base: int | None, actions: list[int] | None = None,
                    ax: Any = None, hide_unvisited: bool = False) -> tuple[Any, dict[str, Any]]:
    """Benefit fairness of a :class:`~causalfair.results.BenefitResult` ``ben`` with A > 2
    actions: one panel per action other than the baseline ``base`` (None: not known, every
    action whose benefit is not 0 everywhere), or per index of ``actions``,
    Delta_a(x, s) (in ``unit``) against pi(a | x, s); an action whose benefit is 0 for
    every group and level keeps its panel, with a note saying so. With ``ax``: the one
    action of ``actions`` drawn into it. Returns the Figure and the data it draws."""
    # the baseline's benefit over itself is 0 everywhere: one panel per other action
    acts = actions if actions is not None else (
        [i for i in range(ben.delta.shape[-1]) if i != base] if base is not None else
        [i for i in range(ben.delta.shape[-1]) if np.any(ben.delta[..., i] != 0)])
    if check_axes(ax) is None:
        fig = new_figure(8.0, 3.4)
        axes = np.atleast_1d(fig.subplots(1, max(1, len(acts))))
    else:
        fig, axes = ax.figure, np.array([ax])
    delta, probs = _seen(ben, ben.delta, hide_unvisited), _seen(ben, ben.p_d1, hide_unvisited)
    for panel, a_i in zip(axes, acts, strict=False):
        for i, g in enumerate(ben.groups):
            size = 20 + 400 * np.asarray(ben.state_weights[i])
            panel.scatter(delta[i, :, a_i], probs[i, :, a_i], s=size, label=g,
                          **group_marker(i))
        if not np.any(ben.delta[..., a_i] != 0):
            panel.text(0.5, 0.5, "benefit 0 for every\ngroup and level", transform=panel.transAxes,
                       ha="center", va="center", fontsize=7, color="#555555")
        panel.set_title(f"action {ben.actions[a_i]}", fontsize=8)
        panel.set_ylim(-0.08, 1.08)
    title = (f"Benefit vs action probability ({lambda_label(ben)} = {ben.Lambda:.4f}); "
             "marker area ~ P(x | s)")
    if ax is None:
        # one x label and one legend for the row: per panel they overlap with 3+ panels
        fig.supxlabel(f"benefit over the baseline ({unit})", fontsize=8)
        axes[0].set_ylabel("P(action | x, s) (probability)")
        same_size_markers(fig.legend(*axes[0].get_legend_handles_labels(), fontsize=7,
                                     frameon=False, loc="outside right upper"))
        fig.suptitle(title, fontsize=9)
    else:
        a_i = acts[0]
        ax.set_xlabel(f"benefit of {ben.actions[a_i]} over the baseline ({unit})", fontsize=8)
        ax.set_ylabel(f"P({ben.actions[a_i]} | x, s) (probability)", fontsize=8)
        same_size_markers(ax.legend(fontsize=7, frameon=False, loc="best"))
        ax.set_title(wrap(f"action {ben.actions[a_i]}: {title}", 70), fontsize=8)
    data = {"delta": {g: ben.delta[i].tolist() for i, g in enumerate(ben.groups)},
            "probs": {g: ben.p_d1[i].tolist() for i, g in enumerate(ben.groups)},
            "actions": list(ben.actions)}
    return fig, data


def benefit_figure(result: Any, n_worst: int, unit: str | None, *, action: str | None,
                   ax: Any) -> Any:
    """The figure of :meth:`causalfair.results.BenefitResult.plot` (its arguments checked
    there: ``n_worst``, ``unit``, ``action``, ``ax``)."""
    n_worst = check_int("n_worst", n_worst, 0)
    unit = check_unit(unit) or result.gain_unit or "gain units"
    if action is not None and (not result.multi or action not in result.actions):
        raise InputError(f"action: bad value {short(action, 40)}; "
                         + (f"allowed values: {', '.join(map(str, result.actions))}."
                            if result.multi else "only a result with more than two actions "
                            "draws one panel per action; leave action out."))
    if result.multi and ax is not None and action is None:
        raise InputError(f"action: required with ax= for a result with {len(result.actions)} "
                         f"actions (one panel each); name one of "
                         f"{', '.join(map(str, result.actions))}, or leave ax out.")
    with text_only():  # group and action names as written, never mathtext
        if result.multi:
            acts = None if action is None else [result.actions.index(action)]
            return benefit_actions(result, unit, base=None, actions=acts, ax=ax,
                                   hide_unvisited=True)[0]
        label = result.actions[1] if len(result.actions) == 2 else None
        return benefit_scatter(result, unit, worst=n_worst, label=label, ax=ax,
                               hide_unvisited=True)[0]
