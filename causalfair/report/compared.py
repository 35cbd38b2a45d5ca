"""The compared pair of an audit's pairs table: its row, its mark and one sentence on how
it was chosen, from audit.json ``pairs``' ``compared`` and ``compared_by``
(:meth:`GroupComparison.compared_by <causalfair.engines.groups.GroupComparison.compared_by>`,
the keys ``causalfair decompose --json`` gives too). Shared by report.html / report.md
(causalfair.report.render) and card.md / annex-iv.md (causalfair.report.explain)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from causalfair._simultaneous import simultaneous_sentence


def compared_row(compared: str | None, values: Mapping[str, Any]) -> str | None:
    """The row of ``values`` holding the compared pair ``"A-B"``: ``"A-B"`` or ``"B-A"``."""
    flips = [f"{compared[i + 1:]}-{compared[:i]}" for i, ch in enumerate(compared or "")
             if ch == "-"]  # every split: group names may hold "-"
    return next((p for p in [compared, *flips] if p and p in values), None)


def compared_mark(row: str, compared: str) -> str:
    """The mark on the compared pair's row of a pairs table: ``compared``, or ``compared as
    B-A`` where the row reads the pair the other way round (its signs flipped)."""
    return "compared" if row == compared else f"compared as {compared}"


def compared_sentence(pairs: Mapping[str, Any], engine: str | None) -> str:
    """How the pair an audit compares was chosen, one sentence (audit.json ``pairs``'
    ``compared`` and ``compared_by``, :meth:`GroupComparison.compared_by
    <causalfair.engines.groups.GroupComparison.compared_by>`; ``engine``: ``groups.engine``);
    "" without them (an audit.json from before these keys). A pair chosen from the data says
    its intervals are simultaneous (``pairs``' ``simultaneous``;
    :func:`causalfair._simultaneous.simultaneous_sentence`, the command line's sentence)."""
    pair, by = pairs.get("compared"), pairs.get("compared_by")
    if not pair or not by:
        return ""
    if by == "named":
        return f"The audit compares {pair}, the pair named in the spec ([engine] pair)."
    if by == "first_minus_second":
        return (f"The audit compares {pair}, the default with two groups (the first minus the "
                "second); [engine] pair names another.")
    sim = pairs.get("simultaneous")
    if engine == "exact" or not isinstance(sim, Mapping):  # no interval (or an older audit.json)
        return (f"The audit compares {pair}, the default: the pair with the largest |C| (the "
                "largest and smallest V^pi); [engine] pair compares another.")
    return (f"The audit compares {pair}, the default: the pair with the largest |C| (the "
            "largest and smallest V^pi). "
            + simultaneous_sentence(pair, int(sim["pairs"]), 1.0 - float(sim["family_level"]))
            + " A pair named in advance ([engine] pair) keeps "
            f"{100 * float(sim['family_level']):g}% intervals.")
