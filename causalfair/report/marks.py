"""The mark on the report's interval labels (:func:`causalfair._simultaneous.ci_label`):
which intervals are simultaneous over the pairs a data-chosen pair was picked from, and the
sentence the mark stands for; from an AuditResult's numbers (the tables) or from audit.json
(the sentences and the card). Numpy-free (the report's text reads it)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from causalfair._simultaneous import MARK, METHOD, WIDENED, pair_alpha, simultaneous_sentence

__all__ = ["chosen_pairs", "mark_note", "simultaneous_note", "widened", "widened_by",
           "yaml_simultaneous", "yaml_string"]

_EFFECTS = ("C", "DPE", "IPE", "SPE")


def widened_by(m: int, compared: str, key: str, pair: str | None = None) -> int:
    """``m`` when the interval of quantity or threshold ``key`` (``C``, ``abs_C vs
    baseline``, ``abs_C[A-B]``, ``max_abs_C`` deciding at ``pair``) is one of the
    ``compared`` pair's simultaneous ones (C, DPE, IPE, SPE; ratio_V in its row), else 1:
    the m of :func:`causalfair._simultaneous.ci_label`."""
    if m == 1:
        return 1
    plain = key.removesuffix(" vs baseline").removeprefix("max_").removeprefix("min_")
    core, _, named = plain.removeprefix("abs_").partition("[")
    if core not in WIDENED:
        return 1
    at = named.rstrip("]") or pair  # a pair's row: widened only when it is the compared one
    if at is None and (key.startswith(("max_", "min_")) or core not in _EFFECTS):
        return 1  # no pair to tell (ratio_V is widened in the compared pair's row only)
    # the compared pair read either way round (a max_abs_C decided at B-A when A-B is
    # compared: the same row, its interval as widened); group names may hold "-"
    flips = {f"{compared[i + 1:]}-{compared[:i]}" for i, ch in enumerate(compared) if ch == "-"}
    return m if at is None or at == compared or at in flips else 1


def mark_note(m: int, compared: str, alpha: float) -> str:
    """What the mark stands for where a label carries it: the mark, then the one sentence
    (:func:`causalfair._simultaneous.simultaneous_sentence`); "" when m = 1."""
    return "" if m == 1 else f"{MARK} {simultaneous_sentence(compared, m, alpha)}"


def chosen_pairs(doc: Mapping[str, Any]) -> int:
    """m, the pairs audit.json's compared pair was chosen from (its decomposition's
    ``simultaneous``): > 1 when its intervals of C, DPE, IPE and SPE are simultaneous; 1 for
    a named pair, two groups, the exact engine and an audit.json without the key."""
    sim = (doc.get("decomposition") or {}).get("simultaneous")
    return int(sim["pairs"]) if isinstance(sim, Mapping) and sim.get("pairs") else 1


def _compared(doc: Mapping[str, Any]) -> str:
    return "-".join(str(g) for g in (doc.get("decomposition") or {}).get("pair") or ())


def simultaneous_note(doc: Mapping[str, Any]) -> str:
    """:func:`mark_note` of audit.json ``doc``, at its spec's alpha."""
    alpha = float(((doc.get("spec") or {}).get("resolved") or {}).get("alpha", 0.05))
    return mark_note(chosen_pairs(doc), _compared(doc), alpha)


def widened(doc: Mapping[str, Any], key: str, pair: str | None = None) -> int:
    """:func:`widened_by` of audit.json ``doc``."""
    return widened_by(chosen_pairs(doc), _compared(doc), key, pair)


def _yaml_escape(c: str) -> str:
    return f"\\U{ord(c):08x}" if ord(c) > 0xFFFF else f"\\u{ord(c):04x}"


def yaml_string(text: Any) -> str:
    """``text`` as a YAML double-quoted scalar, the one writer of card.md's strings: a JSON
    string in ASCII (its escapes are YAML's), but a character beyond U+FFFF (an emoji) as
    YAML's ``\\UXXXXXXXX``, not as JSON's surrogate pair ``\\ud83d\\ude00``, which YAML
    readers (PyYAML, the Hugging Face Hub's) read as two lone surrogates, not the
    character."""
    return "".join(c if c.isascii() else _yaml_escape(c)
                   for c in json.dumps(str(text), ensure_ascii=False))


def yaml_simultaneous(doc: Mapping[str, Any], indent: str = "") -> list[str]:
    """card.md's YAML ``simultaneous`` line (pairs, method, each interval's level, the
    family's level, the pair) next to ``ci_level`` when audit.json ``doc``'s compared pair
    was chosen from the data (:func:`chosen_pairs` m > 1); none otherwise (the card's bytes
    as before: a named pair, two groups, the exact engine)."""
    m = chosen_pairs(doc)
    if m == 1:
        return []
    alpha = float(((doc.get("spec") or {}).get("resolved") or {}).get("alpha", 0.05))
    return [f"{indent}simultaneous: {{pairs: {m}, method: {json.dumps(METHOD)}, "
            f"level: {1 - pair_alpha(alpha, m)!r}, family_level: {1 - alpha!r}, "
            f"pair: {yaml_string(_compared(doc))}}}"]
