"""Plain-language explanations of an audit, generated from its numbers (never written
per case): the summary sentences at the top of a report, the glossary, the assumptions
each engine makes, and the sections the pages share (what changed, the pairs of groups,
what drives a failure); the audit card that reads them is :mod:`causalfair.report.card`.

Everything here reads the audit's JSON document (:meth:`AuditResult.to_dict`, the
content of ``audit.json``), so every number a sentence prints can be traced to a key of
``audit.json``: :class:`Sentence` records those keys (``sources``) and the tests check
each against the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from causalfair._io import as_given, beside, fixed, sample_size_of
from causalfair._markdown import md_code, md_escape  # re-exported: the report's writers
from causalfair._simultaneous import MARK, ci_label
from causalfair.report.compared import compared_mark, compared_row, compared_sentence
from causalfair.report.marks import mark_note, widened
from causalfair.thresholds import pair_note, split_key, threshold_op

__all__ = ["Sentence", "sentences", "GLOSSARY", "glossary", "assumptions", "inconclusive_steps",
           "fmt", "what_changed", "failure_drivers", "change_lines", "pairs_lines", "PAIR_COLUMNS",
           "doc_gain_unit", "doc_pair", "has_interval", "verdict_has_interval",
           "threshold_label", "md_code", "md_escape"]

#: quantity -> (definition, sign convention, unit); in the definitions {gain} and {Gain}
#: stand for the system's gain, {levels} and {lvls} for its states, {dpe_example} and
#: {reward_example} for lending's examples (:func:`glossary` fills them)
GLOSSARY: dict[str, tuple[str, str, str]] = {
    "C": ("{Gain} disparity: the expected total {gain} of group s+ "
          "over the T decisions minus that of group s-, under the audited policy.",
          "positive: s+ gains more; negative: s- gains more.", "gain units"),
    "DPE": ("Direct policy effect: the part of C caused by the decisions' immediate effect on "
            "each step's gain (the policy against the path-specific policy pi^PS, which makes "
            "the same visits but scores each step's gain as if the baseline decision had been "
            "taken); equivalently the group gap in sum_t E[{dpe_term}]. It "
            "is not a measure of direct discrimination (of the policy reading the group): it "
            "is non-zero for a group-blind policy whenever the groups sit {at_levels} "
            "or benefit differently from the same decision{dpe_example}.", "positive: the decisions' direct effect favours s+.",
            "gain units"),
    "IPE": ("Indirect policy effect: the part of C caused by the policy moving people to "
            "other {levels}, whose gains under the baseline decision differ "
            "(pi^PS against the baseline policy pi0).",
            "positive: the delayed effect favours s+.", "gain units"),
    "SPE": ("Spurious policy effect: the gap that exists without any decision, under the "
            "baseline policy pi0 (different starting {lvls}, different dynamics). No policy "
            "changes it.", "positive: s+ gains more even without decisions.", "gain units"),
    "Lambda": ("Benefit fairness: how unequally individuals of the two groups with the same "
               "benefit of a decision (its effect on their expected gain) are treated; a "
               "weighted sum over pairs of {lvls} of |P(decision | s+) - P(decision | s-)|, "
               "down-weighted by eps / (eps + |benefit gap|): benefit gaps much smaller than "
               "eps (in the gain's units; the report says how it was chosen) count as equal "
               "benefit. It sees only the same-step benefit (Lambda_T adds the delayed one).",
               "0: equal benefit, equal treatment; larger: more unequal (no sign).",
               "probability (0 to 1)"),
    "utility": ("The decision maker's expected total reward over the T decisions"
                "{reward_example}, weighted by the groups' shares.",
                "larger is better for the decision maker.", "reward units"),
    "tpr_gap": ("True-positive-rate gap (A-PPO's short-term notion): difference in the rate "
                "of favourable decisions among the qualified, over the episode.",
                "absolute value, 0 is equal.", "probability"),
    "elbert_bias": ("ELBERT-PO's benefit-rate bias: largest minus smallest group ratio of "
                    "cumulative supply (favourable decisions that succeed) to cumulative demand "
                    "(the qualified).", "0 is equal.", "ratio"),
    "w1_final": ("F-PPO-L's long-term gap: the 1-Wasserstein distance between the groups' "
                 "level distributions after T decisions.", "0 is equal.", "levels"),
    "dp_gap": ("Demographic-parity gap: difference in the rate of favourable decisions (any "
               "action other than the baseline) over the episode.", "absolute value, 0 is equal.", "probability"),
}

#: The gain's name where a system declares none (:class:`causalfair.systems.Gain`).
NEUTRAL_GAIN = "gain"
#: Lending's gain, whose states are qualification levels (the paper's words).
_LENDING_GAIN = "qualification gain"


#: DPE's per-step term (method.md section 3, Proposition 1): with two actions, and with more
#: (Delta_a the benefit of action a over the baseline).
_DPE_TERM = {2: "pi(d1 | x_t, s) Delta(x_t, s)",
             None: "sum_a pi(a | x_t, s) Delta_a(x_t, s), Delta_a the benefit of action a over "
                   "the baseline"}


def glossary(groups: tuple[str, str] = ("s+", "s-"), gain_unit: str = "gain units",
             reward: str | None = None, gain: str = _LENDING_GAIN, n_actions: int = 2
             ) -> dict[str, tuple[str, str, str]]:
    """:data:`GLOSSARY` in a system's own words: its pair of groups for s+ and s-, the
    name of its gain (``gain``: what :class:`causalfair.systems.Gain` declares, e.g.
    "health change"; the neutral "gain" where it declares none) and its unit, the name of
    its reward, and its number of actions (DPE's term)."""
    a, b = groups
    lending = gain == _LENDING_GAIN  # the paper's words and examples; others: neutral ones
    fill = {"gain": gain, "Gain": gain[:1].upper() + gain[1:].replace(" ", "-"),
            "levels": "qualification levels" if lending else "states",
            "lvls": "levels" if lending else "states",
            "at_levels": "at different levels" if lending else "in different states",
            "dpe_example": " (approve-everyone has DPE +0.044 on lending-1)" if lending else "",
            "reward_example": " (for example the bank's profit)" if lending else "",
            "dpe_term": _DPE_TERM.get(n_actions, _DPE_TERM[None])}

    def words(text: str) -> str:
        text = re.sub(r"\{(gain|Gain|levels|lvls|at_levels|dpe_example|reward_example|dpe_term)\}",
                      lambda m: fill[m.group(1)], text)
        return re.sub(r"\bs[+-]", lambda m: a if m.group() == "s+" else b, text)

    out = {}
    for k, (definition, sign, unit) in GLOSSARY.items():
        unit = gain_unit if unit == "gain units" else unit
        if unit == "reward units" and reward:
            unit = f"{reward} (the system's reward units)"
        out[k] = (words(definition), words(sign), unit)
    return out


def doc_glossary(doc: Mapping[str, Any]) -> dict[str, tuple[str, str, str]]:
    """:func:`glossary` for an audit document (audit.json)."""
    name, unit = _unit(doc)
    labels = ((doc.get("system") or {}).get("decisions") or {}).get("labels") or ()
    return glossary(_groups(doc), unit, (doc.get("system") or {}).get("reward"), name,
                    len(labels) or 2)


_WORDS = {
    "DPE": "the direct effect DPE",
    "IPE": "the indirect effect IPE",
    "SPE": "the spurious effect SPE",
    "Lambda": "benefit unfairness Lambda",
    "tpr_gap": "the true-positive-rate gap",
    "elbert_bias": "ELBERT's benefit-rate bias",
    "w1_final": "the final level gap W1",
    "dp_gap": "the demographic-parity gap",
    "max_abs_C": "the largest |C| over the pairs of groups",
    "max_abs_DPE": "the largest |DPE| over the pairs of groups",
    "max_abs_IPE": "the largest |IPE| over the pairs of groups",
    "max_abs_SPE": "the largest |SPE| over the pairs of groups",
    "max_Lambda": "the largest Lambda over the pairs of groups",
    "min_ratio_V": "the smallest ratio of the groups' V^pi (min / max) over the pairs",
    "min_ratio_selection": ("the smallest selection-rate ratio (min / max) over the pairs (a "
                            "group's selection rate: its share given any action other than "
                            "the baseline; per-action ratios in ll144.md, `causalfair export "
                            "ll144`)"),
}


def fmt(x: float) -> str:
    """How sentences print a number: 4 decimals (the tests compare at this precision); a
    value that rounds to zero prints as 0.0000, never -0.0000 (:func:`fixed`)."""
    return fixed(x, 4)


def threshold_text(x: float) -> str:
    """How sentences print a threshold: 4 decimals where they give it exactly (0.0500),
    else as the spec gives it (4e-05, 0.16274: never 0.0000 or 0.1627); the numbers judged
    against it print on their side of it (:func:`causalfair._io.beside`)."""
    return fmt(x) if float(fmt(x)) == float(x) else as_given(x)


@dataclass(frozen=True)
class Sentence:
    """One generated sentence: ``topic``, ``text``, and ``sources``: (path, value) for
    every number the text prints, where path is the audit.json key (parts joined by '/';
    a leading '-' means the text prints the negated value) and value what it printed."""

    topic: str
    text: str
    sources: tuple[tuple[str, float], ...] = ()


def _q(doc: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    return (doc.get("quantities") or {}).get(key)


def has_interval(q: Mapping[str, Any]) -> bool:
    """A quantity with a sampling interval: a standard error, or bounds apart (exact values
    have neither: se null, a zero-width interval). A Monte Carlo estimate with a standard
    error of 0 (or 1e-17, whose bounds round to the estimate) has one, of zero width, as
    the report's tables show it (:func:`causalfair.report.render._no_interval`)."""
    return q.get("se") is not None or q.get("ci_lower") != q.get("ci_upper")


def judged_value(doc: Mapping[str, Any], verdict: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The value a verdict judges, with its standard error (``se``): audit.json's
    ``quantities/KEY`` (``abs_C``, ``Lambda``, ``tpr_gap``, their ``vs baseline`` forms: the
    audited policy's), or a pair's row ``pairs/values/PAIR/KEY`` (``abs_C[A-B]``,
    ``max_abs_C``, ``min_ratio_selection``: the pair that decides it); None when the
    document has neither."""
    key = str(verdict["key"]).removesuffix(" vs baseline")
    base, pair = split_key("utility" if key.startswith("utility drop") else key)
    every = base.startswith(("max_", "min_"))
    metric = base.removeprefix("max_").removeprefix("min_").removeprefix("abs_")
    if pair is None and every:
        pair = verdict.get("pair")
    if pair is not None:
        row = (((doc.get("pairs") or {}).get("values") or {}).get(pair) or {}).get(metric)
        if row is not None or every:
            return row
    return _q(doc, metric)


def threshold_label(verdict: Mapping[str, Any]) -> str:
    """A verdict's threshold as every output reads it (``C <= 0``, ``min_ratio_V >= 0.8``:
    :attr:`causalfair.thresholds.Verdict.label`, the report's, the gate's and JUnit's)."""
    return f"{verdict['key']} {threshold_op(verdict['key'])} {as_given(verdict['threshold'])}"


def verdict_has_interval(doc: Mapping[str, Any], verdict: Mapping[str, Any]) -> bool:
    """Whether a verdict's value has an interval: a value computed exactly (no standard
    error and a zero-width interval, as a Monte Carlo audit's Lambda or a selection rate
    from the tabular model) has none, and every output reads ``n/a`` in its interval
    columns (docs/audit.md, Details), whichever quantity it is."""
    if verdict["lower"] != verdict["upper"]:
        return True
    q = judged_value(doc, verdict)
    return q is not None and q.get("se") is not None


def _straddles_zero(q: Mapping[str, Any]) -> bool:
    """Whether a quantity's interval holds 0 (its sign, which group it favours, is then
    not established by the sample)."""
    return has_interval(q) and q["ci_lower"] <= 0.0 <= q["ci_upper"]


def _ci_text(doc: Mapping[str, Any], key: str, negate: bool = False
             ) -> tuple[str, list[tuple[str, float]]]:
    """" (95% CI lo to hi)" for a quantity with an interval, else ""; with ``negate``
    the interval of -quantity (sources then carry a leading '-')."""
    q = _q(doc, key)
    if q is None or not has_interval(q):
        return "", []
    level = 100 * (1 - float(doc["spec"]["resolved"].get("alpha", 0.05)))
    lo, hi = (f"quantities/{key}/ci_lower", q["ci_lower"]), (f"quantities/{key}/ci_upper", q["ci_upper"])
    if negate:
        lo, hi = ("-" + hi[0], -hi[1]), ("-" + lo[0], -lo[1])
    return f" ({ci_label(level, widened(doc, key))} {fmt(lo[1])} to {fmt(hi[1])})", [lo, hi]


def _groups(doc: Mapping[str, Any]) -> tuple[str, str]:
    dec = doc["decomposition"]
    names = list(dec["groups"])
    a, b = dec.get("pair") or (0, 1)
    return (a if isinstance(a, str) else names[a]), (b if isinstance(b, str) else names[b])


def doc_pair(doc: Mapping[str, Any]) -> tuple[str, str]:
    """The names of the pair of groups the audit ``doc`` compares (C is the first's gain
    minus the second's)."""
    return _groups(doc)


def _unit(doc: Mapping[str, Any]) -> tuple[str, str]:
    gain = (doc.get("system") or {}).get("gain") or {}
    return gain.get("name", NEUTRAL_GAIN), gain.get("unit", "gain units")


def doc_gain_unit(doc: Mapping[str, Any]) -> str:
    """The unit of C, its parts and Lambda's eps in the audit ``doc``: its system's gain unit."""
    return _unit(doc)[1]


def sentences(doc: Mapping[str, Any]) -> list[Sentence]:
    """The report's summary: the verdict, one sentence per threshold, what the
    decomposition says, and the utility."""
    out: list[Sentence] = []
    verdicts = doc.get("verdicts") or []
    n_fail = sum(v["status"] == "FAIL" for v in verdicts)
    n_inc = sum(v["status"] == "INCONCLUSIVE" for v in verdicts)
    if not verdicts:
        head = "No thresholds were set, so nothing was judged."
    elif doc["overall"] == "PASS":
        head = f"PASS: all {len(verdicts)} thresholds hold."
    else:
        n_pass = len(verdicts) - n_fail - n_inc
        parts = []
        if n_fail:
            parts.append(f"{n_fail} fail{'s' if n_fail == 1 else ''}")
        if n_inc:
            parts.append(f"{n_inc} cannot be settled with this many samples (the interval "
                         "straddles the threshold)")
        if n_pass:
            parts.append(f"{n_pass} pass{'es' if n_pass == 1 else ''}")
        head = f"{doc['overall']}: of {len(verdicts)} thresholds, " + ", ".join(parts) + "."
    before, was = doc.get("before") or {}, (doc.get("extra") or {}).get("retrained_from") or {}
    if before.get("overall") and before["overall"] != doc.get("overall"):
        # the gate's report of a repair: its verdict is the repair's, not the spec's checkpoint's
        head += (f" This is the verdict of the checkpoint `causalfair gate --retrain` wrote "
                 f"({(doc.get('policy') or {}).get('checkpoint')}); the spec's own checkpoint "
                 f"({was.get('checkpoint', 'the one the spec names')}) is "
                 f"{before['overall']} (Before and after retraining, in Details). Unless the "
                 "gate ran with --accept-repaired, its exit code counts the spec's checkpoint "
                 "until you commit the repair (point [policy] checkpoint at it).")
    out.append(Sentence("verdict", head))
    for i, v in enumerate(verdicts):
        key = v["key"]
        rel_key = key.endswith(" vs baseline")
        plain = key.removesuffix(" vs baseline").removeprefix("utility drop").strip() or "utility"
        base = plain[4:] if plain.startswith("abs_") else plain
        what = _WORDS.get(base, base) if base != "C" else f"the {_unit(doc)[0]} gap C"
        core = base.split("[", 1)[0].removeprefix("max_abs_")  # abs_C[B-A], max_abs_C: C
        unit = f" {_unit(doc)[1]}" if core in ("C", "DPE", "IPE", "SPE") else ""
        if plain.startswith("abs_"):
            what = f"the size of {what}"
        if rel_key and key.startswith("utility drop"):
            what = "the drop in utility from the baseline policy's"
        elif rel_key:
            what = f"{what} minus the baseline policy's"
        op = threshold_op(key)
        side = "below" if op == ">=" else "above"  # min_ratio_*: a ratio below its bound
        inside = "within" if op == "<=" else "at or above"  # a ratio passes above its floor
        rel = {"PASS": inside, "FAIL": side, "INCONCLUSIVE": "on both sides of"}[v["status"]]
        src = [(f"verdicts/{i}/estimate", v["estimate"]), (f"verdicts/{i}/threshold", v["threshold"])]
        ci = ""
        if verdict_has_interval(doc, v):
            level = 100 * (1 - float(doc["spec"]["resolved"].get("alpha", 0.05)))
            ci = (f" ({ci_label(level, widened(doc, key, v.get('pair')))} "
                  f"{beside(v['lower'], v['threshold'])} to {beside(v['upper'], v['threshold'])})")
            src += [(f"verdicts/{i}/lower", v["lower"]), (f"verdicts/{i}/upper", v["upper"])]
            rel_text = {"PASS": f"its whole interval lies {inside}",
                        "FAIL": f"its whole interval lies {side}",
                        "INCONCLUSIVE": "its interval straddles"}[v["status"]]
        else:
            rel_text = f"it is {rel}"
        # the pair a threshold over every pair is about (audit.json verdicts/i/pair)
        decides = pair_note(v, "; pair {} decides the verdict" if ci else " (at pair {})")
        thr = threshold_text(v["threshold"])
        out.append(Sentence(f"threshold:{key}",
                            f"{key} {op} {thr}: {v['status']}. {what[0].upper() + what[1:]} "
                            f"is {beside(v['estimate'], v['threshold'])}{unit}{ci}{decides}; "
                            f"{rel_text} the threshold {thr}.",
                            tuple(src)))
    dec = doc["decomposition"]
    T = dec["horizon"]
    gname, unit = _unit(doc)
    a, b = _groups(doc)
    if _q(doc, "C") is not None:
        C = _q(doc, "C")["estimate"]
        ahead, behind = (a, b) if C >= 0 else (b, a)
        ci, ci_src = _ci_text(doc, "C", negate=C < 0)
        if float(fmt(C)) == 0.0:  # a gap that prints as 0.0000 favours neither group
            gap = f"{a} and {b} end with the same {gname} to 4 decimals"
            ci, ci_src = _ci_text(doc, "C")
            src: list[tuple[str, float]] = [("quantities/C/estimate", C)]
        else:
            gap = f"{ahead} ends with {fmt(abs(C))} more {gname} than {behind}"
            src = [("-quantities/C/estimate" if C < 0 else "quantities/C/estimate", abs(C)),
                   ("quantities/C/estimate", C)]
        unsettled = ("; its interval contains 0, so the sample does not settle which group "
                     "gains more" if ci and float(fmt(C)) != 0.0 and _straddles_zero(_q(doc, "C"))
                     else "")
        out.append(Sentence(
            "gap",
            f"Over T = {T} decisions, {gap}{ci}, in {unit} (C = {fmt(C)}; positive values "
            f"favour {a}, negative values favour {b}){unsettled}.", (*src, *ci_src)))
        parts, src = [], []
        for key, words in (("DPE", "the direct effect of the decisions"),
                           ("IPE", "their delayed effect through the states the decisions lead to"),
                           ("SPE", "the gap that exists without any decision")):
            q = _q(doc, key)
            if q is None:
                continue
            shown = float(fmt(q["estimate"]))  # the side of the printed value: a -0.0000
            who = a if shown > 0 else b if shown < 0 else "neither group"  # favours no one
            ci, csrc = _ci_text(doc, key)
            if ci and shown != 0 and _straddles_zero(q):
                who += " by its estimate only (its interval contains 0)"
            parts.append(f"{words} ({key}) contributes {fmt(q['estimate'])}{ci}, favouring {who}")
            src += [(f"quantities/{key}/estimate", q["estimate"]), *csrc]
        if parts:
            out.append(Sentence("decomposition", "C = DPE + IPE + SPE: " + "; ".join(parts) + ".",
                                tuple(src)))
    lam = _q(doc, "Lambda")
    if lam is not None:
        ci, src = _ci_text(doc, "Lambda")
        ben = doc.get("benefit") or {}
        eps = (f" It uses eps = {fmt(ben['eps'])} {_unit(doc)[1]} ({ben['eps_source']}): "
               "benefit gaps well below eps count as equal benefit."
               if ben.get("eps") is not None and ben.get("eps_source") else "")
        between = (f" between {a} and {b}" if len(doc["decomposition"].get("groups") or ()) > 2
                   else "")
        out.append(Sentence(
            "benefit", f"Benefit fairness{between}: Lambda = {fmt(lam['estimate'])}{ci} (0 when people "
            "with the same benefit of a decision are treated alike across groups; larger is "
            f"more unequal).{eps}", (("quantities/Lambda/estimate", lam["estimate"]), *src,
                                     *((("benefit/eps", ben["eps"]),) if eps else ()))))
    util = _q(doc, "utility")
    if util is not None:
        reward = (doc.get("system") or {}).get("reward", "reward")
        reward = reward.removeprefix("expected ")  # "expected total expected ...": once
        ci, src = _ci_text(doc, "utility")
        out.append(Sentence(
            "utility", f"The decision maker's expected total {reward} over the T decisions is "
            f"{fmt(util['estimate'])}{ci}.", (("quantities/utility/estimate", util["estimate"]), *src)))
    return out


def _part_text(part: Mapping[str, Any], level: float | None = None, mark: str = "") -> str:
    """An attribution part as "+0.0123" or "+0.0123 (95% interval -0.0010 to +0.0250)";
    ``mark``: :data:`~causalfair._simultaneous.MARK` after "interval" when it is
    simultaneous over the pairs a data-chosen pair was picked from."""
    lo, hi = part.get("interval") or (part["estimate"], part["estimate"])
    name = ("interval" if level is None else f"{level:g}% interval") + mark
    ci = "" if lo == hi else f" ({name} {fmt(lo)} to {fmt(hi)})"
    return f"{fmt(part['estimate'])}{ci}"


def _att_level(att: Mapping[str, Any]) -> float:
    return 100 * (1 - float(att.get("alpha", 0.05)))


def what_changed(att: Mapping[str, Any], against: str = "the baseline policy",
                 unit: str = "gain units") -> list[str]:
    """The "What changed" lines from an attribution (``audit.json``'s ``attribution``,
    :meth:`causalfair.engines.attribution.Attribution.to_dict`): the change in C, its
    split into the direct and the indirect path (SPE is the system's and cancels), the
    step and the cells that carry most of it, in the gain's ``unit``, with the intervals
    (at the attribution's level) of a Monte Carlo attribution."""
    tot, big, level = att["total"], att["largest"], _att_level(att)
    cell_word = "level" if att.get("cells") == "levels" else "cell"
    step = {"estimate": big["step_estimate"], "interval": big.get("step_interval")}
    sim = att.get("simultaneous")  # a data-chosen pair: every interval marked, then the note
    m = int(sim["pairs"]) if sim else 1

    def part(p: Mapping[str, Any]) -> str:
        return _part_text(p, level, MARK if m > 1 else "")

    out = [f"C moved by {part(tot['C'])} from {against} ({att['baseline']}) to "
           f"{att['policy']}: DPE (direct path) {part(tot['DPE'])}, IPE (indirect path) "
           f"{part(tot['IPE'])}; SPE is the system's and cancels (changes in C, in {unit}).",
           f"Largest path: {big['path']}; largest step: t = {big['step']}, {part(step)}.", ]
    if big["cells"]:
        out.append("Cells carrying most of it (group / " + cell_word + ", signed as in C): "
                   + "; ".join(f"{c['group']} / {c['cell']}: {part(c)}" for c in big["cells"])
                   + ".")
    note = mark_note(m, "-".join(att["pair"]), float(att.get("alpha", 0.05)))
    return out + ([note] if note else [])


def change_lines(doc: Mapping[str, Any], heading: str = "##") -> list[str]:
    """The "what changed" section of card.md and annex-iv.md (Markdown lines; none without
    an ``attribution``): :func:`what_changed` of audit.json's ``attribution``."""
    att = doc.get("attribution")
    if not att:
        return []
    return [f"{heading} What changed against the baseline policy", ""] + [  # the mark as text
        "- " + md_escape(t) for t in what_changed(att, unit=_unit(doc)[1])] + [""]


#: The columns of the pairs table of card.md and annex-iv.md: audit.json's ``pairs`` keys.
PAIR_COLUMNS = ("C", "DPE", "IPE", "SPE", "Lambda", "ratio_V", "ratio_selection")


def pairs_lines(doc: Mapping[str, Any], heading: str = "##") -> list[str]:
    """The "Pairs of groups" section of card.md and annex-iv.md (Markdown lines; none
    without audit.json's ``pairs``, i.e. a two-group audit): every pair's C, DPE, IPE, SPE,
    Lambda and ratios with their intervals, the reference group and the worst pair named
    (docs/decomposition.md, "More than two groups")."""
    pairs = doc.get("pairs")
    if not pairs or not pairs.get("values"):
        return []
    values = pairs["values"]
    keys = [k for k in PAIR_COLUMNS if any(k in v for v in values.values())]
    ref = (doc.get("groups") or {}).get("reference")
    level = 100 * (1 - float(((doc.get("spec") or {}).get("resolved") or {}).get("alpha", 0.05)))

    def cell(q: Mapping[str, Any] | None) -> str:
        if q is None or q.get("estimate") is None:
            return "n/a"
        if not has_interval(q):
            return fmt(q["estimate"])
        return f"{fmt(q['estimate'])} [{fmt(q['ci_lower'])}, {fmt(q['ci_upper'])}]"

    compared = pairs.get("compared")
    here = compared_row(compared, values)
    how = md_escape(compared_sentence(pairs, (doc.get("groups") or {}).get("engine")))
    lines = [f"{heading} Pairs of groups", "",
             f"Each pair X-Y of the {len(doc['decomposition'].get('groups') or {})} groups"
             + (f" (reference group {md_escape(ref)})" if ref else "")
             + f"; worst pair: {md_escape(pairs.get('worst'))} (the largest |C|). C, DPE, IPE "
             f"and SPE: group X's value minus group Y's, in {md_escape(_unit(doc)[1])}; Lambda: a "
             "probability (0 to 1); ratio_V and ratio_selection: the smaller of the two "
             "groups' values over the larger (1 is equal; the four-fifths rule reads >= 0.8; "
             "n/a where a value is <= 0, as a mean gain that falls). "
             + (f"In brackets: the {level:g}% CI." if any(
                 has_interval(v[k]) for v in values.values() for k in keys if v.get(k))
                else "Exact values: no sampling error.") + (f" {how}" if how else ""), "",
             "| pair | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for name, v in values.items():
        marks = (["worst"] if name == pairs.get("worst") else []) + (
            [md_escape(compared_mark(name, compared))] if name == here else [])
        mark = f" ({'; '.join(marks)})" if marks else ""
        lines.append(f"| {md_escape(name)}{mark} | "
                     + " | ".join(cell(v.get(k)) for k in keys) + " |")
    return lines + [""]


def about_c(key: str) -> bool:
    """Whether the threshold ``key`` bounds C or one of its parts (abs_C, DPE[B-A],
    max_abs_IPE, SPE vs baseline, ...): what an attribution of C can explain."""
    base = key.removesuffix(" vs baseline").split("[", 1)[0]
    return base.removeprefix("max_").removeprefix("abs_") in ("C", "DPE", "IPE", "SPE")


def inconclusive_steps(doc: Mapping[str, Any]) -> list[str]:
    """What to do about each INCONCLUSIVE verdict (its interval straddles the threshold):
    how far the estimate is from the threshold against the interval's half-width, so how
    many times the sample it needs if the estimate stays (intervals narrow as
    1 / sqrt(n)), and the exact engine where the system has a tabular model."""
    out = []
    dec = doc.get("decomposition") or {}
    res = (doc.get("spec") or {}).get("resolved") or {}
    level = 100 * (1 - float(res.get("alpha", 0.05)))
    exact = "exact" in ((doc.get("system") or {}).get("engines") or ())
    for v in doc.get("verdicts") or []:
        if v["status"] != "INCONCLUSIVE":
            continue
        half, gap = (v["upper"] - v["lower"]) / 2, abs(v["estimate"] - v["threshold"])
        if dec.get("engine") == "logs":
            more = "the interval comes from the bootstrap over the logged individuals: more logs narrow it"
        elif gap > 0:
            times = (half / gap) ** 2
            more = (f"intervals narrow as 1 / sqrt(n), so about {times:.3g} times [engine] n "
                    + (f"(now {size}) " if (size := sample_size_of(dec, doc.get("system"),
                                                                   res.get("n"))) else "")
                    + "would settle it if the estimate stays where it is")
        else:
            more = "the estimate equals the threshold, so no sample size settles it"
        w = widened(doc, v["key"], v.get("pair"))  # a simultaneous one: the label's mark
        its = f"{level:g}% interval" if w == 1 else ci_label(level, w)
        out.append(f"To settle {v['key']} (INCONCLUSIVE): its {its}, "
                   f"{fmt(v['lower'])} to {fmt(v['upper'])} (half-width {fmt(half)}), must lie "
                   f"on one side of the threshold {threshold_text(v['threshold'])}, which the estimate "
                   f"{fmt(v['estimate'])} is {fmt(gap)} from; {more}"
                   + ("; the system has a tabular model, so [engine] kind = \"exact\" gives "
                      "the value without sampling error." if exact and dec.get("engine") == "mc"
                      else "."))
    return out


def _component(key: str) -> str:
    """The part of C a threshold on C bounds: ``C``, ``DPE``, ``IPE`` or ``SPE``."""
    base = key.removesuffix(" vs baseline").split("[", 1)[0]
    return base.removeprefix("max_").removeprefix("abs_")


def _path_largest(att: Mapping[str, Any], path: str) -> dict[str, Any]:
    """:meth:`~causalfair.engines.attribution.Attribution.largest` of one path (DPE or
    IPE) alone, from the attribution's dict: its step and (of the cells it lists) its
    cells of largest absolute change."""
    steps = att["by_step"][path]
    t = max(range(len(steps)), key=lambda i: abs(steps[i]["estimate"]))
    cells = sorted((c for c in att.get("largest_cells") or () if c[path]["estimate"] != 0.0),
                   key=lambda c: -abs(c[path]["estimate"]))[:3]
    return {"path": path, "path_estimate": att["total"][path]["estimate"],
            "path_interval": att["total"][path].get("interval"),
            "step": t, "step_estimate": steps[t]["estimate"],
            "step_interval": steps[t].get("interval"),
            "cells": [{"group": c["group"], "cell": c["cell"], **c[path]} for c in cells]}


def _driver_sentence(doc: Mapping[str, Any], keys: list[str], att: Mapping[str, Any]) -> str:
    """What drives the failure of the thresholds ``keys``: the largest path, step and cells
    of the attribution ``att`` (against pi0: set against C and SPE, exact values); of one
    path alone when every key bounds that path (a failing abs_DPE is the DPE path's, never
    "mostly the IPE path")."""
    paths = {_component(k) for k in keys}
    own = next(iter(paths)) if len(paths) == 1 and paths <= {"DPE", "IPE"} else None
    big = att["largest"] if own is None else _path_largest(att, own)
    word, level = ("level " if att.get("cells") == "levels" else ""), _att_level(att)
    cells = ", ".join(f"{c['group']} / {word}{c['cell']} ({_part_text(c, level)})"
                      for c in big["cells"])
    path = {"estimate": big["path_estimate"], "interval": big.get("path_interval")}
    step = {"estimate": big["step_estimate"], "interval": big.get("step_interval")}
    if att["baseline"] == "pi0":
        dec = doc["decomposition"]
        exact = (doc.get("extra") or {}).get("exact") if dec["engine"] != "exact" else None
        ref = exact or dec  # the attribution is exact: so are the C and SPE it is set against
        note = ("exact values from the tabular model (audit.json extra/exact), not the "
                "Monte Carlo estimates; " if exact else "")
        given = ((doc.get("extra") or {}).get("baseline") or {}).get("policy")
        why = ((f"{'an absolute threshold' if len(keys) == 1 else 'absolute thresholds'}, "
                f"not judged against the [baseline] policy {given}") if given
               else "no [baseline] given")
        against = (f"against the baseline policy pi0 ({why}; {note}C = "
                   f"{fmt(ref['C'])}, of which SPE = {fmt(ref['SPE'])} is the gap without "
                   "any decision, which no policy changes, and DPE + IPE = "
                   f"{_part_text(att['total']['C'], level)} the policy's own part)")
    else:
        against = f"against the baseline policy {att['baseline']}"
    if own is not None:
        return (f"What drives the failure of {', '.join(keys)}, {against}: the {own} path "
                f"itself ({_part_text(path, level)}), mostly step t = {big['step']} "
                f"({_part_text(step, level)})" + (f", cells {cells}" if cells else "")
                + f" (changes in {own}, in {_unit(doc)[1]}).")
    return (f"What drives the failure of {', '.join(keys)}, {against}: "
            f"mostly the {big['path']} path ({_part_text(path, level)}), step t = "
            f"{big['step']} ({_part_text(step, level)})"
            + (f", cells {cells}" if cells else "")
            + f" (changes in C, in {_unit(doc)[1]}).")


def failure_drivers(doc: Mapping[str, Any], att: Mapping[str, Any] | None,
                    pi0: Mapping[str, Any] | None = None) -> list[str]:
    """What a FAIL report opens with: what drives the failing thresholds on C and its parts,
    then the failing thresholds no attribution of C explains (Lambda, the other notions,
    utility), and the repair options. A failing ``vs baseline`` threshold is explained by
    ``att``, the attribution against the [baseline] policy (audit.json's ``attribution``);
    an absolute one (``abs_C``, ``DPE``, ...) by ``pi0``, the exact attribution against pi0
    (a tabular model: C minus SPE, the system's gap, is the policy's own DPE + IPE), or,
    without a tabular model, by ``att`` as well (a change from the baseline policy)."""
    if doc.get("overall") != "FAIL":
        return []
    out = []
    failing = [v["key"] for v in doc.get("verdicts") or [] if v["status"] == "FAIL"]
    # SPE is the gap without any decision: no attribution of a policy explains it
    spe = [k for k in failing if about_c(k) and _component(k) == "SPE"]
    on_c = [k for k in failing if about_c(k) and k not in spe]
    others = [k for k in failing if k not in on_c and k not in spe]
    relative = [k for k in on_c if k.endswith(" vs baseline")]
    absolute = [k for k in on_c if k not in relative]
    explained = ([(absolute, pi0), (relative, att)] if pi0 is not None else [(on_c, att)])
    explained = [(keys, a) for keys, a in explained if keys and a is not None]
    done = [k for keys, _ in explained for k in keys]
    for keys, a in explained:
        out.append(_driver_sentence(doc, keys, a))
    left = [k for k in on_c if k not in done]
    if explained and left:
        out.append(f"Also failing: {', '.join(left)}; no attribution of it here (see Details).")
    if explained and others:
        out.append(f"Also failing: {', '.join(others)}; not a part of C, so the "
                   + ("attributions" if len(explained) > 1 else "attribution")
                   + " above do" + ("" if len(explained) > 1 else "es") + " not explain "
                   + ("it" if len(others) == 1 else "them") + " (see Details).")
    if spe:
        out.append(f"{'Also failing' if explained else 'Failing'}: {', '.join(spe)}; SPE is "
                   "the gap that exists without any decision (the groups' starting levels "
                   "and dynamics), which no policy changes: no attribution of the policy "
                   "explains it, and no retraining repairs it (see Details).")
    if not explained and (on_c or others):
        rest = [k for k in failing if k not in spe]
        out.append(f"{'Also failing' if spe else 'Failing'}: {', '.join(rest)} (no per-step "
                   "and per-cell attribution"
                   + (": it needs a tabular model or a [baseline] policy)." if on_c else
                      " of C: none of these is C or a part of it)."))
    if (doc.get("decomposition") or {}).get("engine") == "logs":  # no system to train on
        out.append(_logs_repair(doc))
        return out
    if (doc.get("policy") or {}).get("checkpoint") is None:  # --retrain refuses it
        out.append("Repair options: the policy is not a checkpoint, so causalfair gate SPEC "
                   "--retrain has no network to warm-start from; set [retrain] init = "
                   "\"scratch\" for it to train a new network from a random init, train one "
                   "on the system yourself (causalfair train; ppo-c and ppo-cb penalise C and "
                   "Lambda) and audit its checkpoint, or compare candidates with [baseline]; "
                   "change [thresholds] only if the limits themselves were wrong.")
        return out
    out.append("Repair options: causalfair gate SPEC --retrain retrains the policy with the "
               "spec's [retrain] algo (ppo-c and ppo-cb penalise C and Lambda; exact, on a "
               "tabular system, solves the constrained repair), or compare candidates with "
               "[baseline]; change [thresholds] only if the limits themselves were wrong.")
    return out


def assumptions(doc: Mapping[str, Any]) -> list[str]:
    """What the numbers rest on, by engine."""
    engine = doc["decomposition"]["engine"]
    out = []
    if engine == "exact":
        diag = (doc["decomposition"].get("diagnostics") or {}).get("residuals") or {}
        worst = max((abs(v) for v in diag.values()), default=0.0)
        out.append("Exact engine: the numbers are computed from the tabular model, with no "
                   "sampling; there is no confidence interval, and a threshold passes when the "
                   "value itself lies within it. The identities "
                   + ", ".join(diag) + f" were checked between two independent computations "
                   f"(largest relative residual {worst:.1e}, tolerance 1e-9).")
        out.append("The model is taken as the truth: the numbers hold for the population and "
                   "dynamics it describes.")
    elif engine == "mc":
        res = doc["spec"]["resolved"]
        size = sample_size_of(doc["decomposition"], doc.get("system"), res.get("n"),
                              simulated=True)
        out.append(f"Monte Carlo engine: {size}, "
                   f"seed {res.get('seed')}; the forks and the baseline policy reuse the same "
                   "random numbers (common random numbers). Intervals are normal "
                   "approximations (estimate +- z * standard error); a threshold passes only "
                   "when its whole interval lies within it.")
        system = doc.get("system") or {}
        named = f"The system {system.get('id') or res.get('system')}" + (
            f" ({system['description']})" if system.get("description") else "")
        out.append(f"{named} is taken as the truth: the numbers hold for the population and "
                   "dynamics its simulator describes. The intervals measure the Monte Carlo "
                   "error only (the randomness of the simulated units, shrinking as 1 / "
                   "sqrt(n): a larger [engine] n narrows them), not an error of the system's "
                   "model.")
    elif _logs_candidate(doc):  # [logs] with a candidate [policy]
        out.append("Log audit of a candidate: the dynamics are fitted from the decision logs "
                   "(a Markov model over the logged states, smoothed) and the candidate policy "
                   f"({doc['policy']['label'].partition(' (candidate')[0]}) is audited on "
                   "them, not the logged policy; intervals come from the bootstrap over "
                   "individuals, with the candidate's decision table fixed. It assumes no "
                   "unobserved confounding given the logged state and group, and that the "
                   "logs cover the states the candidate visits.")
    else:
        out.append("Log audit: the dynamics and the policy are estimated from the decision "
                   "logs (a Markov model over the logged states, smoothed); intervals come "
                   "from the bootstrap over individuals. It assumes no unobserved confounding "
                   "given the logged state and group, and that the logs cover the states the "
                   "policy visits.")
    out.append("C = DPE + IPE + SPE holds by construction for every engine; the baseline "
               "policy pi0 takes the system's baseline decision at every step.")
    return out


def _logs_repair(doc: Mapping[str, Any]) -> str:
    """The repair line of a failing log audit: every route that audits a candidate on the
    model fitted to this log (docs/logs.md, "Auditing a candidate policy"), naming the
    log and the spec, and the route to a retrained policy."""
    log = next((i.get("path") for i in doc.get("inputs") or [] if i.get("role") == "logs"),
               None) or "LOG"
    spec = (doc.get("spec") or {}).get("file")
    where = f"in {spec} " if spec else ""
    what = "another candidate" if _logs_candidate(doc) else "a candidate rule"
    return ("Repair options: a log audit has no system to retrain a policy on or to compare "
            "a [baseline] with (gate --retrain and [baseline] need [system] or [model]); "
            f"audit {what} on the model fitted to the logs before it is deployed "
            "(docs/logs.md, \"Auditing a candidate policy\"): a [policy] table beside "
            f"[logs] {where}(builtin = \"threshold:0.6\", checkpoint = \"ck.pt\" or factory "
            "= \"module:make\"), audited and gated as this audit is; or causalfair decompose "
            f"--logs {log} --audit-policy with --policy threshold:0.6 (a built-in; a threshold "
            "reads p_repay from the log's outcomes), --policy module:make (a factory) or "
            "--checkpoint ck.pt, and the [logs] options as its options; or audit_logs(df, "
            "policy=...) in Python. To retrain, save that model and gate a spec of the "
            "candidate on it with [retrain] (docs/ci-gate.md, --retrain); change [thresholds] "
            "only if the limits themselves were wrong.")


def _logs_candidate(doc: Mapping[str, Any]) -> bool:
    """A log audit of a candidate ``[policy]`` (builtin, checkpoint or factory), not of
    the logged policy."""
    logs = (doc.get("extra") or {}).get("logs") or {}
    return str(logs.get("policy_source", "")).startswith("supplied")
