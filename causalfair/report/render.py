"""Audit reports: report.html (self-contained), report.md, card.md, audit.json and PNG
figures.

:func:`write_report` renders the whole report in memory (:func:`render_report`, which a
gate's worker runs where it audited, sending the bytes back), writes it into a temporary
folder beside the target and renames that into place (:func:`write_rendered`), so a report
is never half-written: an interrupted or failed run leaves the previous report (or
nothing) behind.

The report reads top to bottom: the verdict and one generated sentence per threshold and
per effect (:mod:`causalfair.report.explain`), the headline figure, then the details (tables,
figures), a glossary, the assumptions, provenance and the spec. ``card.md`` is the audit
card (:mod:`causalfair.report.card`): YAML metadata and one paragraph per metric.

Figures: :mod:`causalfair.report.figures` (each saved as ``NAME.png`` and embedded in
the HTML as base64).

audit.json holds every figure's data, the spec, package and dependency versions, seeds
and the checkpoint's SHA-256; the Provenance section shows them, and audit.json's
``inputs`` (the other files the audit read, with their SHA-256 or package version) as a
table of their own.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from causalfair._io import beside, fixed, to_jsonable, unicode_text, write_folder
from causalfair._simultaneous import ci_label
from causalfair._texttable import cell_columns, cell_word
from causalfair.engines.attribution import attribute_exact
from causalfair.engines.groups import benefit_for_pair
from causalfair.report.card import audited_on, card_markdown, spec_sha256
from causalfair.report.compared import compared_mark, compared_row, compared_sentence
from causalfair.report.explain import (
    about_c,
    assumptions,
    doc_glossary,
    failure_drivers,
    fmt,
    glossary,
    inconclusive_steps,
    md_code,
    md_escape,
    sentences,
    verdict_has_interval,
    what_changed,
)
from causalfair.report.export import (
    INPUT_HEADER,
    export_files,
    input_rows,
    links_markdown,
    report_exports,
)
from causalfair.report.figures import (  # the figures, re-exported
    DPI,
    FIGURES,
    FRONTIER_POINTS,
    GRAPH_EPOCHS,
    build_figures,
    ci_level,
    favourable_label,
    figure_png,
    figure_png_base64,
    figure_titles,
    gain_unit,
    make_figures,
    skipped_sections,
)
from causalfair.report.marks import mark_note, simultaneous_note, widened_by

#: The report reads an audit result (causalfair.audit.AuditResult) by duck typing: this
#: module imports nothing from causalfair.audit, so the import graph has no circle.
AuditResult = Any

__all__ = ["write_report", "write_error_report", "render_report", "write_rendered", "make_figures",
           "figure_png_base64", "FIGURES", "DPI", "GRAPH_EPOCHS", "FRONTIER_POINTS", "render_html",
           "render_markdown"]


_STATUS_COLOUR = {"PASS": "#1a7f37", "FAIL": "#cf222e", "INCONCLUSIVE": "#9a6700"}


# ---------------------------------------------------------------------------- tables
#: How a missing value (an exact result's standard error, an absent notion) reads,
#: in every table of the report.
MISSING = "n/a"


def _is_exact(r: AuditResult) -> bool:
    return r.spec.source == "model" and r.decomposition.engine == "exact"


def _exact_note(r: AuditResult) -> str:
    """The title note of a table with intervals that also holds values without one (a
    Monte Carlo audit's Lambda and notions, exact on the tabular model; a log audit's
    notions, plug-in values of the fitted model): their interval cells read n/a, not a
    zero-width "confidence interval"."""
    if r.decomposition.engine == "logs":
        return " (n/a interval: a plug-in value of the model fitted to the logs, no interval computed)"
    if getattr(r.system, "tabular", None) is None:  # a simulator alone: nothing is exact
        return " (n/a interval: no interval computed for this value)"
    return " (n/a interval: a value computed exactly on the tabular model, no sampling error)"


def _no_interval(se: Any, lower: float, upper: float) -> bool:
    """Whether a value has no interval in an audit that has intervals: no standard error
    and a zero-width interval (a value computed exactly on the tabular model, as the Monte
    Carlo engine's Lambda; :func:`causalfair.report.explain.verdict_has_interval` for a
    verdict), whichever quantity it is."""
    return se is None and lower == upper


def _unit_of(r: AuditResult, key: str) -> str:
    dec = r.decomposition
    pair = (dec.groups[dec.pair[0]], dec.groups[dec.pair[1]])
    reward = getattr(r.system, "reward", None)
    return glossary(pair, gain_unit(r), reward).get(key, ("", "", ""))[2]


def _fmt(v: Any) -> str:
    if v is None:
        return MISSING
    if isinstance(v, (float, np.floating)):
        return fixed(v)  # six decimals, no negative zero
    return str(v)


def _md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = ["| " + " | ".join(md_escape(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(md_escape(_fmt(c)) if not isinstance(c, (float, np.floating))
                              else _fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _html_table(header: Sequence[str], rows: Sequence[Sequence[Any]],
                status_col: int | None = None) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            text = html.escape(_fmt(c))
            if i == status_col and c in _STATUS_COLOUR:
                text = f"<span class='status {text}'>{text}</span>"
            cells.append(f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _tables(r: AuditResult, before: AuditResult | None, doc: dict[str, Any] | None = None
            ) -> list[tuple[str, Any, Any, int | None]]:
    """(title, header, rows, status column) for every table of the report (``doc``: its
    audit.json document, default ``r``'s); header None: ``rows`` is a sentence shown in the
    table's place."""
    doc = to_jsonable(r.to_dict()) if doc is None else doc
    tabs = []
    if before is not None:
        after = {v.key: v for v in r.verdicts}
        rows = []
        for v in before.verdicts:
            a = after.get(v.key)
            rows.append([v.shown, beside(v.estimate, v.threshold, 6), v.status,
                         beside(a.estimate, a.threshold, 6) if a else None,
                         a.status if a else None,
                         _unit_of(r, v.key.removesuffix(" vs baseline").removeprefix("abs_"))])
        rows.append(["overall", None, before.overall, None, r.overall, ""])
        for k in r.spec.metrics:  # what the change cost or bought, thresholded or not
            if k in before.quantities and k in r.quantities:
                rows.append([k, before.quantities[k][0], None, r.quantities[k][0], None,
                             _unit_of(r, k)])
        tabs.append(("Before and after retraining",
                     ["threshold", "before", "verdict before", "after", "verdict after", "unit"],
                     rows, 2))
        rep = r.extra.get("repair")
        if rep:
            tabs.append(_repair_table(rep, {k: _unit_of(r, k) for k in ("utility", "C", "Lambda")}))
    q = r.quantities
    of = _pair_note(r)
    if _is_exact(r):  # one number each: no sampling error, no interval
        rows = [[v.shown, beside(v.estimate, v.threshold, 6), v.status] for v in r.verdicts]
        tabs.append(("Verdicts (exact values)", ["threshold", "value", "verdict"], rows, 2))
        rows = [[k, q[k][0], _unit_of(r, k)] for k in r.spec.metrics if k in q]
        tabs.append(("Metrics (exact values" + of + ")", ["quantity", "value", "unit"], rows, None))
    else:
        level, dec = ci_level(r), r.decomposition
        sim = (getattr(dec, "simultaneous", 1), dec.pair_name)  # what marks a label
        rows = [[v.shown, beside(v.estimate, v.threshold, 6),
                 *((beside(v.lower, v.threshold, 6), beside(v.upper, v.threshold, 6))
                   if verdict_has_interval(doc, v.to_dict())
                   else (MISSING, MISSING)), v.status] for v in r.verdicts]
        m = max([widened_by(*sim, v.key, v.pair) for v in r.verdicts
                 if v.lower != v.upper] + [1])  # a simultaneous interval: the label's mark
        ci = ci_label(level, m)
        tabs.append(("Verdicts" + _exact_note(r) * any(x[2] == MISSING for x in rows)
                     + (f" ({mark_note(m, sim[1], r.spec.alpha)})" if m > 1 else ""),
                     ["threshold", "estimate", f"{ci} lower", f"{ci} upper", "verdict"], rows, 4))
        rows = [[k, q[k][0], q[k][3],
                 *((MISSING, MISSING) if _no_interval(q[k][3], q[k][1], q[k][2])
                   else (q[k][1], q[k][2])), _unit_of(r, k)]
                for k in r.spec.metrics if k in q]
        m = max([widened_by(*sim, k) for k in r.spec.metrics if k in q and q[k][3]] + [1])
        ci = ci_label(level, m)
        tabs.append(("Metrics" + (f" ({of[2:]})" if of else "")
                     + _exact_note(r) * any(x[3] == MISSING for x in rows)
                     + (f" ({mark_note(m, sim[1], r.spec.alpha)})" if m > 1 else ""),
                     ["quantity", "estimate", "standard error", f"{ci} lower", f"{ci} upper",
                      "unit"], rows, None))
    dec = r.decomposition
    rows = [[g, dec.V[i], dec.V_ps[i], dec.V_0[i], dec.V[i] - dec.V_ps[i],
             dec.V_ps[i] - dec.V_0[i], dec.utility_by_group[i]] for i, g in enumerate(dec.groups)]
    gain, reward = _unit_of(r, "C") or gain_unit(r), _unit_of(r, "utility")
    sampled = _per_group_intervals(r, gain, reward) if dec.se else None
    tabs.append((per_group_title(gain, reward) + (sampled[0] if sampled else ""),
                 ["group", "V^pi", "V^PS", "V^pi0", "direct", "indirect", "utility"], rows, None))
    if sampled:
        tabs.append(sampled[1])
    gc = getattr(r, "group_comparison", None)
    if gc is not None:  # every pair of groups (causalfair.engines.groups), the compared marked
        said = r._groups_dict()["pairs"]  # two groups: no compared pair, as before
        here, rows = compared_row(said.get("compared"), gc.pairs), gc.rows()
        for row in rows:
            row[-1] = ", ".join(([row[-1]] if row[-1] else []) + (
                [compared_mark(row[0], said["compared"])] if row[0] == here else []))
        how = compared_sentence(said, gc.engine)
        tabs.append((f"Pairs of groups (reference {gc.reference}; worst pair {gc.worst}, "
                     f"the largest |C|; C, DPE, IPE, SPE in {gain_unit(r)}, the first group "
                     "minus the second; ratios min/max of the two groups, n/a where a value is "
                     "<= 0)" + (f". {how}" if how else ""),
                     [h or ("worst pair, compared" if how else "worst pair") for h in gc.HEADER],
                     rows, None))
    if r.benefit is not None:
        extra_tabs = []
        note = f"; eps = {r.benefit.eps:g} {gain_unit(r)}, {r.benefit.eps_source}"
        if getattr(r.benefit, "multi", False) and r.benefit.shares_meaningful:
            note += ("; a row per pair and action: weight, contribution and share are the "
                     "pair's, repeated on each action's row")
        a, b = (r.benefit.groups[i] for i in r.benefit.pair)
        of = "" if len(r.benefit.groups) == 2 else f" of groups {a} and {b}"
        shown = set()  # one table per pair, however many of its verdicts fail
        for v in r.verdicts:  # a failing Lambda of another pair: that pair's worst pairs
            if v.status == "PASS" or v.pair is None or "Lambda" not in v.key or v.pair in shown:
                continue
            if str(v.pair) in (f"{a}-{b}", f"{b}-{a}"):  # the audited pair (Lambda is symmetric)
                continue
            shown.add(v.pair)
            other = benefit_for_pair(r.benefit, str(v.pair))
            if other is None:
                note += (f"; {v.key} {v.status} at pair {v.pair}, whose worst benefit pairs "
                         f"need an audit of that pair ([engine] pair = \"{v.pair}\")")
            elif other is not r.benefit:
                extra_tabs.append((v, other))
        titled = [(f"Worst benefit pairs{of} (Lambda = {r.benefit.Lambda:.6f}{note}",
                   r.benefit, "; Delta in the same unit as eps")]
        titled += [(f"Worst benefit pairs of pair {v.pair}, where {v.key} is {v.status} "
                    f"(Lambda = {other.Lambda:.6f}", other, f"; Delta in {gain_unit(r)}")
                   for v, other in extra_tabs]
        for title, ben, delta in titled:
            if not ben.shares_meaningful:  # every pair contributes 0: one sentence, no rows
                tabs.append((f"{title})", None, no_pairs_sentence(
                    ben, f"{cell_word(r.system)}s"), None))
                continue
            df = ben.worst_pairs_table(r.spec.worst)
            tabs.append((f"{title}{delta}{_PAIR_COLUMNS}; values rounded to 4 decimals)",
                         _cell_header(r, df.columns),
                         [[fmt(float(c)) if isinstance(c, (float, np.floating)) else c
                           for c in row] for row in df.values.tolist()], None))
    rows = [[k, v, _notion_unit(r, k)] for k, v in r.notions.items()
            if isinstance(v, (int, float)) or v is None]
    for k, v in r.notions.items():
        if isinstance(v, dict):
            rows += [[f"{_notion_label(r, k)}[{g}]", x, _notion_unit(r, k)] for g, x in v.items()]
    if any(v is not None for _, v, _ in rows):  # else "Not shown" says why
        exact = r.decomposition.engine == "mc" and r.model is not None  # two utilities else
        tabs.append(("Other notions" + (" (exact values from the tabular model; the metrics "
                                        "above are Monte Carlo estimates)" if exact else ""),
                     ["notion", "value", "unit"], rows, None))
    dw = (r.extra.get("logs") or {}).get("dowhy")
    if dw:
        rows = [["pooled effect of D_t on the gain (backdoor on {X_t, S})",
                 dw["pooled_effect"], None, None]]
        rows += [[f["name"], f.get("new_effect"), f.get("p_value"),
                  "passed" if f.get("passed") else "FAILED"] for f in dw["refuters"]]
        tabs.append((f"dowhy cross-check and refuters ({dw['n_rows']} rows)",
                     ["check", "effect", "p-value", "result"], rows, None))
    lg = r.extra.get("logs") or {}
    rows = [[f"individuals in group {g}", n] for g, n in (lg.get("group_sizes") or {}).items()]
    for c, cuts in ((lg.get("state_binning") or {}).get("cuts") or {}).items():
        rows.append([f"bin cut points of {c} (bins right-closed)", ", ".join(f"{v:.6g}" for v in cuts)])
    rows += [["note", n] for n in lg.get("notes") or ()]
    if rows:
        tabs.append(("Decision log", ["item", "value"], rows, None))
    return tabs


#: What the worst benefit pairs' columns are (the engines' lambda_pairs).
_PAIR_COLUMNS = ("; weight: the product of the two cells' shares of their groups; "
                 "contribution: the pair's term of Lambda, weight x the gap in decision "
                 "probabilities x eps / (eps + the gap in Delta), the terms of all pairs "
                 "summing to Lambda")


def per_group_title(gain: str, reward: str) -> str:
    """The per-group table's title: what its columns are, and their units (``gain``: the
    system's gain unit; ``reward``: its reward unit)."""
    return ("Per-group values (V^pi, V^PS, V^pi0: the group's expected total gain over the T "
            "decisions under the policy pi, the path-specific policy pi^PS and the baseline "
            f"policy pi0; direct = V^pi - V^PS; indirect = V^PS - V^pi0; these five in {gain}"
            + (f"; utility in {reward}" if reward else "") + ")")


#: The per-group table's columns and the keys of their values in ``Decomposition.se``.
_PER_GROUP_KEYS = {"V^pi": "V", "V^PS": "V_ps", "V^pi0": "V_0", "direct": "direct",
                   "indirect": "indirect", "utility": "utility"}


def _per_group_intervals(r: AuditResult, gain: str, reward: str) -> tuple[str, Any] | None:
    """For an audit whose per-group values are estimates (a Decomposition with standard
    errors: Monte Carlo, or a log audit's bootstrap): the note the per-group table's title
    gets, and the table of their standard errors and intervals (``Decomposition.intervals``:
    estimate +- z x standard error); None when the Decomposition has no per-group standard
    error."""
    dec = r.decomposition
    se = dec.se or {}
    est, ci = dec.estimates(), dec.intervals(r.spec.alpha)
    rows = [[g, label, est[k], se[k], *ci[k], reward if key == "utility" else gain]
            for g in dec.groups for label, key in _PER_GROUP_KEYS.items()
            if (k := f"{key}[{g}]") in se]
    if not rows:
        return None
    level = ci_level(r)
    what = ("estimates from the decision log (bootstrap standard errors)"
            if dec.engine == "logs" else "Monte Carlo estimates")
    note = (f" - {what}, not exact values: their standard errors and {level}% intervals "
            "in the next table")
    title = (f"Per-group values: standard errors and {level}% intervals (normal "
             "approximation: estimate +- z x standard error)")
    return note, (title, ["group", "value", "estimate", "standard error", f"{level}% CI lower",
                          f"{level}% CI upper", "unit"], rows, None)


def no_pairs_sentence(ben: Any, cells: str = "levels") -> str:
    """What the report says in place of a worst-pairs table whose every pair contributes 0
    (Lambda at most :data:`~causalfair.results.SHARE_FLOOR`): no rows of zeros. ``cells``:
    what the system's cells are ("levels", or "states" of binned features)."""
    return (f"Not listed: {ben.no_pairs_note(cells)}: at every pair of {cells} the two "
            "groups get the same decision probabilities, so there is no worst pair.")


#: The units of the other notions that are not quantities of the glossary: the per-group
#: rates and levels behind the gaps, and the initial distance (the glossary has the rest).
_NOTION_UNITS = {"approval_rate": "probability", "selection_rate": "probability",
                 "Lambda_T": "probability (0 to 1)",
                 "tpr": "probability", "elbert_rate": "ratio", "mean_level_final": "levels",
                 "w1_initial": "levels"}


def _notion_unit(r: AuditResult, key: str) -> str:
    """The unit of the notion ``key`` (its glossary unit, else :data:`_NOTION_UNITS`)."""
    return _unit_of(r, key) or _NOTION_UNITS.get(key, "")


def _notion_label(r: AuditResult, key: str) -> str:
    """The name a notion's row shows: its audit.json key, except that ``approval_rate``
    (the share given d1) shows as ``d1_rate`` for a decision log that does not name its
    decisions (``[logs] decisions``) and as ``LABEL_rate`` for a two-action system, or a
    log, whose d1 is not lending's "approve" (a triage's ``admit_rate``); audit.json keeps
    the key ``approval_rate``."""
    if key != "approval_rate":
        return key
    if r.spec.source == "logs" and not r.spec.logs_options.get("decisions"):
        return "d1_rate"
    label = favourable_label(r)
    return key if label in (None, "approve") else f"{label}_rate"


def _pair_note(r: AuditResult) -> str:
    """With more than two groups, "; C, DPE, IPE, SPE and Lambda: pair A-B" (the pair
    they compare, the first group's value minus the second's); else ""."""
    dec = r.decomposition
    if len(dec.groups) <= 2:
        return ""
    a, b = (dec.groups[i] for i in dec.pair)
    return (f"; C, DPE, IPE, SPE and Lambda: pair {a}-{b}, {a}'s value minus {b}'s; every "
            "pair: Pairs of groups below")


def _cell_header(r: AuditResult, columns: Sequence[Any]) -> list[str]:
    """The worst benefit pairs' column names: a cell is a "level[G]" where the system
    declares levels (lending, a log's levels), a "state[G]" (a cell of binned features)
    where it declares none, as ``causalfair decompose`` prints them."""
    return cell_columns(columns, cell_word(r.system))


def _repair_table(rep: dict[str, Any], units: dict[str, str] | None = None
                  ) -> tuple[str, list[str], list[list[Any]], int | None]:
    """The constrained repair against its references: utility, C, Lambda, and the
    repair's utility as a fraction of each; ``units``: the unit of each of the three,
    stated in the title."""
    res = rep.get("result") or {}
    u = res.get("utility")

    def frac(ref: Any) -> Any:
        return None if (not rep.get("passed") or ref is None or u is None or ref <= 0 or u < 0) else u / ref

    rows = []
    for name, m in (("original (failing)", rep.get("original")),
                    ("repair" if rep.get("passed") else "best attempt (fails)", res),
                    ("best found (not proven optimal)", rep.get("best_found"))):
        if m:
            rows.append([name, m.get("utility"), m.get("C"), m.get("Lambda"), frac(m.get("utility"))])
    lp = rep.get("lp_bound")
    if lp:
        rows.append([f"LP bound ({', '.join(lp.get('constraints') or []) or 'unconstrained'} only)",
                     lp["utility"], None, None, frac(lp["utility"])])
    title = "Constrained repair: " + ", ".join(rep.get("constraints", []))
    if not rep.get("passed"):
        title += " (no passing repair found)"
    title += ("; the rows are the repair's own evaluations of its policy tables: the written "
              "checkpoint (a float32 network) reproduces them to rounding, and its audit is "
              "the 'after' column above")
    if said := "; ".join(f"{k} in {u}" for k, u in (units or {}).items() if u):
        title += f"; {said}"
    return title, ["policy", "utility", "C", "Lambda", "repair utility / this"], rows, None


def _provenance_rows(doc: dict[str, Any]) -> list[list[Any]]:
    prov = doc["provenance"]
    rows = [["causalfair", prov["causalfair"]], ["python", prov["python"]],
            ["platform", prov["platform"]]]
    rows += [[k, v] for k, v in prov["dependencies"].items()]
    pol = doc["policy"]
    rows += [["policy", pol["label"]], ["checkpoint sha256", pol["checkpoint_sha256"]],
             ["spec sha256 (parsed spec, canonical JSON)", spec_sha256(doc)]]
    rows += [[f"seed ({k})", v] for k, v in doc["seeds"].items() if v is not None]
    return rows


def _spec_text(r: AuditResult) -> str:
    if r.spec.path is not None and r.spec.path.is_file():
        return r.spec.path.read_text(encoding="utf-8")
    return json.dumps(r.spec.raw, indent=2, default=str)


_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:980px;
color:#1f2328;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #d0d7de}
h3{font-size:1em;margin-top:1.2em}
table{border-collapse:collapse;margin:.5em 0;font-size:.85em;display:block;overflow-x:auto;max-width:100%}
td{overflow-wrap:anywhere}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:right;vertical-align:top}
#glossary td{text-align:left}.meta{color:#57606a;font-size:.9em}
.verdict{font-size:1.1em;font-weight:600}
th{background:#f6f8fa}td:first-child{text-align:left}
.status{font-weight:bold}.PASS{color:#1a7f37}.FAIL{color:#cf222e}.INCONCLUSIVE{color:#9a6700}
figure{margin:1em 0}img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#57606a}pre{background:#f6f8fa;padding:.8em;font-size:.8em;
overflow-x:auto}
"""


def _glossary_rows(r: AuditResult, doc: dict[str, Any]) -> list[list[str]]:
    """quantity, definition, sign convention, unit for every quantity the report shows."""
    words = doc_glossary(doc)
    keys = [k for k in words if k in doc.get("quantities", {}) or k in r.notions
            or any(v.key in (k, f"abs_{k}") for v in r.verdicts)]
    return [[k, *words[k]] for k in keys]


def logs_label(spec: Any) -> str:
    """A log audit's log file as its spec gives it (``[logs] path``, relative to the spec's
    folder), so that no output quotes where the checkout lives: an audit folder moved with
    its spec and log reproduces (``--reproduce``). A spec without that key (built in
    Python): the path relative to the working directory when it lies below it."""
    sec = spec.raw.get("logs")
    given = sec.get("path") if isinstance(sec, Mapping) else None
    if isinstance(given, str) and given:
        return given
    p = Path(spec.logs_path).resolve()
    try:
        return str(p.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def _header_line(r: AuditResult, doc: dict[str, Any]) -> str:
    spec = r.spec
    return (f"source: {spec.system_label if spec.source == 'model' else logs_label(spec)}; policy: "
            f"{doc['policy']['label']}; horizon T = {r.decomposition.horizon}; "
            f"engine: {spec.engine}" + (f" (n = {r.decomposition.sample_size or spec.n}, "
                                        f"seed = {spec.seed})"
                                        if spec.engine == "mc" and spec.source == "model" else "")
            + ("" if _is_exact(r) else f"; CI level {100 * (1 - spec.alpha):g}%")
            + (f"; {audited_on(date)}" if (date := (doc.get("provenance") or {}).get("date"))
               else ""))


def _summary(doc: dict[str, Any]) -> list[str]:
    return [s.text for s in sentences(doc)]


def _drivers(r: AuditResult, doc: dict[str, Any]) -> list[str]:
    """What a FAIL report opens with (:func:`causalfair.report.explain.failure_drivers`,
    docs/audit.md): a failing ``vs baseline`` threshold explained by the attribution against
    the [baseline] policy; a failing absolute one on C or a part of it by the exact
    attribution against pi0 where a tabular model gives one (its failure is the policy's own
    DPE + IPE), else by the attribution against the [baseline] policy; then, for each
    INCONCLUSIVE verdict, what would settle it
    (:func:`causalfair.report.explain.inconclusive_steps`)."""
    pi0 = None
    if (any(v.status == "FAIL" and about_c(v.key) and not v.key.endswith(" vs baseline")
            for v in r.verdicts) and r.model is not None and r.policy_table is not None):
        dec = r.decomposition
        pi0 = to_jsonable(attribute_exact(r.model, r.policy_table, "pi0", dec.horizon,
                                          gamma=dec.gamma, pair=dec.pair,
                                          policy_name=dec.policy_name
                                          ).to_dict(n_cells=1 << 30))  # all: one path's
    return failure_drivers(doc, doc.get("attribution"), pi0) + inconclusive_steps(doc)


_HEADLINE = "waterfall"


def _figure_note(name: str, doc: dict[str, Any]) -> str:
    """What a figure's caption adds to its title: for the temporal graph, whether the
    policy reads S (the edges S -> D_t, :func:`causalfair.policies.grid.reads_group`); for
    a figure whose error bars carry the mark of a data-chosen pair's simultaneous intervals
    (its data's ``simultaneous``), what the mark stands for."""
    data = (doc.get("figures", {}).get(name) or {}).get("data") or {}
    if data.get("simultaneous"):
        return f" ({simultaneous_note(doc)})"
    if name != "graph" or "policy_reads_s" not in data:
        return ""
    return (": the policy reads S: yes (edges S -> D_t)" if data["policy_reads_s"]
            else ": the policy reads S: no (no edge S -> D_t)")


def retrain_failed_text(error: str) -> str:
    """What the report of a spec whose retrain failed in the gate opens with: the gate's
    ERROR, the retrain's one-line ``error``, and that the report is the audit before it."""
    error = error.rstrip().removesuffix(".")  # the sentence's own full stop follows
    return (f"The gate's verdict is ERROR: this spec's retrain failed ({error}). This "
            "report is its audit before retraining, of the checkpoint as given.")


def render_html(r: AuditResult, doc: dict[str, Any], pngs: dict[str, bytes],
                before: AuditResult | None = None, retrain_error: str | None = None) -> str:
    """The self-contained HTML page (figures as data: URIs, inline CSS, no scripts):
    summary sentences and the headline figure, then the details, the glossary, the
    assumptions, provenance and the spec; with ``retrain_error``, first the gate's ERROR
    and the retrain's error (:func:`retrain_failed_text`)."""
    titles = figure_titles(r)
    status = r.overall
    spec = r.spec

    def figure(name: str, png: bytes) -> str:
        b64 = base64.b64encode(png).decode("ascii")
        return (f"<figure id='fig-{name}'><img alt='{html.escape(titles[name])}' "
                f"src='data:image/png;base64,{b64}'><figcaption>{html.escape(titles[name])}"
                f" ({name}.png){html.escape(_figure_note(name, doc))}</figcaption></figure>")

    summary = _summary(doc)
    parts = [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'>",
        f"<title>causalfair audit {html.escape(spec.name)}: {status}</title>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<style>{_CSS}{'.ERROR{color:#cf222e}' if retrain_error else ''}</style></head><body>",
        f"<h1>Audit <code>{html.escape(spec.name)}</code>: "
        f"<span class='status {status}'>{status}</span></h1>",
        *([f"<p class='verdict ERROR' id='retrain-error'>"
           f"{html.escape(retrain_failed_text(retrain_error))}</p>"] if retrain_error else []),
        f"<p class='meta'>{html.escape(_header_line(r, doc))}</p>",
        "<section id='summary'><h2>Summary</h2>",
        f"<p class='verdict'>{html.escape(summary[0])}</p>",
        *(f"<p class='drivers'>{html.escape(t)}</p>" for t in _drivers(r, doc)),
        "<ul>" + "".join(f"<li>{html.escape(t)}</li>" for t in summary[1:]) + "</ul>",
    ]
    if _HEADLINE in pngs:
        parts.append(figure(_HEADLINE, pngs[_HEADLINE]))
    if doc.get("attribution"):
        parts.append("<h3>What changed</h3><ul>" + "".join(
            f"<li>{html.escape(t)}</li>" for t in what_changed(doc["attribution"], unit=gain_unit(r))) + "</ul>")
    parts.append("</section><section id='details'><h2>Details</h2>")
    for title, header, rows, sc in _tables(r, before, doc):
        parts.append(f"<h3>{html.escape(title)}</h3>")
        parts.append(f"<p>{html.escape(rows)}</p>" if header is None  # a sentence
                     else _html_table(header, rows, sc))
    parts.append("<h3>Figures</h3>")
    parts += [figure(name, png) for name, png in pngs.items() if name != _HEADLINE]
    skipped = skipped_sections(r)
    if skipped:
        parts.append("<h3>Not shown</h3><ul>" + "".join(
            f"<li>{html.escape(titles.get(k, k))}: {html.escape(v)}</li>"
            for k, v in skipped.items()) + "</ul>")
    parts.append("</section><section id='glossary'><h2>Glossary</h2>")
    parts.append(_html_table(["quantity", "definition", "sign", "unit"], _glossary_rows(r, doc)))
    parts.append("</section><section id='assumptions'><h2>Assumptions</h2><ul>")
    parts += [f"<li>{html.escape(a)}</li>" for a in assumptions(doc)]
    parts.append("</ul></section><section id='provenance'><h2>Provenance</h2>")
    parts.append(_html_table(["item", "value"], _provenance_rows(doc)))
    if inputs := input_rows(doc):
        parts.append("<h3>Other inputs the audit read</h3>" + _html_table(INPUT_HEADER, inputs))
    parts.append("<p class='exports'>" + re.sub(  # links_markdown's [name](name) as <a>
        r"\[([\w.-]+)\]\(\1\)", r"<a href='\1'>\1</a>", html.escape(links_markdown(doc))) + "</p>")
    parts.append("</section><section id='spec'><h2>Spec</h2>")
    parts.append(f"<pre>{html.escape(_spec_text(r))}</pre></section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def render_markdown(r: AuditResult, doc: dict[str, Any], pngs: dict[str, bytes],
                    before: AuditResult | None = None, retrain_error: str | None = None) -> str:
    """report.md: the sections of :func:`render_html`, figures as linked PNG files."""
    titles = figure_titles(r)
    spec = r.spec
    summary = _summary(doc)
    lines = [f"# Audit {md_code(spec.name)}: {r.overall}", ""]
    if retrain_error:
        lines += [f"**{md_escape(retrain_failed_text(retrain_error))}**", ""]
    lines += [md_escape(_header_line(r, doc)), "",
             "## Summary", "", md_escape(summary[0]), ""]
    lines += [x for t in _drivers(r, doc) for x in (md_escape(t), "")]
    lines += [f"- {md_escape(t)}" for t in summary[1:]] + [""]
    if _HEADLINE in pngs:
        lines += [f"![{md_escape(titles[_HEADLINE])}]({_HEADLINE}.png)", ""]
    if doc.get("attribution"):
        lines += ["### What changed", ""]
        lines += [f"- {md_escape(t)}" for t in what_changed(doc["attribution"], unit=gain_unit(r))] + [""]
    lines += ["## Details", ""]
    for title, header, rows, _ in _tables(r, before, doc):
        lines += [f"### {md_escape(title)}", "",
                  md_escape(rows) if header is None else _md_table(header, rows), ""]
    lines += ["### Figures", ""]
    for name in pngs:
        if name != _HEADLINE:
            lines += [f"![{md_escape(titles[name])}]({name}.png)"  # titles: the gain's
                      f"{md_escape(_figure_note(name, doc))}", ""]  # name, an action's label
    for k, v in skipped_sections(r).items():
        lines += [f"- not shown, {md_escape(titles.get(k, k))}: {md_escape(v)}"]
    lines += ["", "## Glossary", "",
              _md_table(["quantity", "definition", "sign", "unit"], _glossary_rows(r, doc)), ""]
    lines += ["## Assumptions", ""] + [f"- {md_escape(a)}" for a in assumptions(doc)] + [""]
    lines += ["## Provenance", "", _md_table(["item", "value"], _provenance_rows(doc)), ""]
    if inputs := input_rows(doc):
        lines += ["### Other inputs the audit read", "", _md_table(INPUT_HEADER, inputs), ""]
    lines += [links_markdown(doc), ""]
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall("`+", _spec_text(r))), default=0))
    lines += ["## Spec", "", fence + "toml", _spec_text(r).rstrip(), fence, ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- writing
def render_report(r: AuditResult, *, before: AuditResult | None = None,
                  retrain_error: str | None = None, keep_figures: bool = False
                  ) -> dict[str, bytes]:
    """The files of ``r``'s report folder, name -> bytes, in the order
    :func:`write_report` writes them (the NAME.png figures, audit.json, the exports,
    report.md, report.html, card.md; the manifest is added when the folder is written):
    what a gate's worker renders and sends back for the driver to write
    (:func:`write_rendered`). ``before`` / ``retrain_error``: as in :func:`write_report`;
    ``keep_figures``: cache the matplotlib figures on ``r`` (``r.figures()``), which a
    result going back to the driver must not carry."""
    order = [n for n, _, _ in FIGURES]
    built = build_figures(r, None, FIGURES)  # the report's figures (FIGURES here)
    pngs = {name: figure_png(built[name][0]) for name in order if name in built}
    if keep_figures:
        r._figures = {k: fig for k, (fig, _) in built.items()}
    files = {f"{name}.png": png for name, png in pngs.items()}
    doc = r.to_dict()
    titles = figure_titles(r)
    doc["figures"] = {name: {"file": f"{name}.png", "title": titles[name],
                             "data": built[name][1]} for name in pngs}
    if before is not None:
        doc["before"] = {"overall": before.overall,
                         "checkpoint_sha256": before.checkpoint_sha256,
                         "verdicts": [v.to_dict() for v in before.verdicts],
                         "quantities": {k: v[0] for k, v in before.quantities.items()}}
    text = json.dumps(to_jsonable(doc), indent=2, allow_nan=False) + "\n"
    files["audit.json"] = text.encode("utf-8")
    for name, body in export_files(json.loads(text), report_exports(doc), audit_sha256=(
            hashlib.sha256(text.encode("utf-8")).hexdigest())).items():
        files[name] = body.encode("utf-8")
    files["report.md"] = render_markdown(r, doc, pngs, before, retrain_error).encode("utf-8")
    files["report.html"] = render_html(r, doc, pngs, before, retrain_error).encode("utf-8")
    files["card.md"] = card_markdown(doc).encode("utf-8")
    return files


def write_rendered(out: str | os.PathLike[str], files: dict[str, bytes]) -> Path:
    """Write the report folder ``out`` holding ``files`` (:func:`render_report`'s),
    atomically and replacing only a folder causalfair wrote, as :func:`write_report`
    does. Returns ``out`` as a Path."""
    return write_folder(out, lambda tmp: _put(tmp, files), kind="report")


def _put(folder: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (folder / name).write_bytes(data)


def write_report(r: AuditResult, out: str | os.PathLike[str], *,
                 before: AuditResult | None = None, retrain_error: str | None = None) -> Path:
    """Write the report folder ``out`` (report.html, report.md, audit.json, NAME.png)
    atomically (:func:`causalfair._io.write_folder`): everything is built in a temporary
    folder beside ``out`` and renamed into place. ``retrain_error``: the gate's one-line
    error of a retrain that failed after this audit; report.html and report.md open with
    it, audit.json stays the audit's. An existing ``out`` is replaced only if
    causalfair wrote it (it holds the manifest ``.causalfair-report.json``); a user's
    folder or file is never touched (:class:`~causalfair.errors.OutputError`). Returns
    ``out`` as a Path."""
    def fill(tmp: Path) -> None:  # rendered once the target is known to be writable
        _put(tmp, render_report(r, before=before, retrain_error=retrain_error,
                                keep_figures=True))

    return write_folder(out, fill, kind="report")


def write_error_report(out: str | os.PathLike[str], *, name: str, spec: str, error: str) -> Path:
    """Write the report folder ``out`` of a spec that could not be audited (the gate's
    ERROR): report.html and report.md stating the one-line ``error`` and the ``spec``
    file, and error.json with the same fields; no numbers, since nothing was measured.
    The folder is written as :func:`write_report` writes one (atomically, replacing only a
    folder causalfair wrote), so the previous run's report of that spec never stays
    behind; it holds no audit.json, so nothing reads it as an audit. Returns ``out``."""
    what = ("The audit did not run to the end, so this report has no numbers: fix the "
            "error and run the gate again.")
    name, spec, error = (unicode_text(str(t)) for t in (name, spec, error))  # file names
    doc = {"name": name, "spec": spec, "overall": "ERROR", "error": error}

    def fill(tmp: Path) -> None:
        (tmp / "error.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        (tmp / "report.md").write_text("\n".join([
            f"# Audit {md_code(name)}: ERROR", "", f"Spec: {md_code(spec)}", "",
            f"Error: {md_escape(error)}", "", what, ""]), encoding="utf-8")
        (tmp / "report.html").write_text("\n".join([
            "<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
            f"<title>causalfair audit {html.escape(name)}: ERROR</title>",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>",
            f"<style>{_CSS}.ERROR{{color:#cf222e}}</style></head><body>",
            f"<h1>Audit <code>{html.escape(name)}</code>: "
            "<span class='status ERROR'>ERROR</span></h1>",
            f"<p class='meta'>Spec: <code>{html.escape(spec)}</code></p>",
            f"<p class='verdict'>{html.escape(error)}</p>",
            f"<p>{html.escape(what)}</p>", "</body></html>", ""]), encoding="utf-8")

    return write_folder(out, fill, kind="report")
