"""Small argument checks shared by the engines (a leaf module: numpy only)."""

from __future__ import annotations

import difflib
import functools
import inspect
import math
from typing import Any

import numpy as np

from causalfair._simultaneous import pair_z
from causalfair._version import __version__
from causalfair.errors import InputError, ModelError, short

__all__ = ["ENGINES", "WEIGHTS", "check_alpha", "check_gamma", "check_horizon", "check_int",
           "check_keywords", "check_unit", "check_flag", "check_seed", "MAX_SEED",
           "check_lr", "MAX_LR", "finite", "check_policy_name",
           "read_only",
           "check_names", "check_labels", "check_engine", "check_weight", "check_weights",
           "engine_for",
           "z_quantile",
           "did_you_mean", "unknown_key", "check_pair"]

#: The engines of a decomposition: the system's choice, exact or Monte Carlo.
ENGINES = ("auto", "exact", "mc")
#: How Lambda weighs states: by visitation over the horizon, or by the initial distribution.
WEIGHTS = ("visitation", "initial")


def check_horizon(horizon: Any) -> int:
    """The horizon T as an int >= 1, or ModelError naming the bad value."""
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
        whole = isinstance(horizon, (float, np.floating)) and float(horizon).is_integer() \
            and horizon >= 1  # 20.0: a float
        raise ModelError(f"horizon: must be an integer >= 1, got {repr(horizon)[:80]}"
                         + (f"; write {int(horizon)}." if whole else "."))
    return int(horizon)


#: Characters a name printed in reports, JUnit XML and CSV headers may not hold: C0 controls,
#: DEL and the C1 controls (XML 1.0 cannot carry most of them at all; ESC and CSI, 0x9b,
#: start the sequences a terminal acts on).
_CONTROL = {chr(c) for c in range(32)} | {chr(c) for c in range(0x7f, 0xa0)}
#: The bidirectional embeddings, overrides and isolates: they reorder how the text after them
#: is shown (a report's "pair A-B", a verdict line), not only the name.
_BIDI = {chr(c) for c in range(0x202a, 0x202f)} | {chr(c) for c in range(0x2066, 0x206a)}


def bad_name(name: str) -> str | None:
    """Why ``name`` cannot label a group or an action (None when it can)."""
    if not name.strip():
        return "it is empty"
    if len(name) > 200:
        return f"it has {len(name)} characters (at most 200)"
    ctl = next((c for c in name if c in _CONTROL), None)
    if ctl is not None:
        return f"it holds the control character {ctl!r}"
    lone = next((c for c in name if "\ud800" <= c <= "\udfff"), None)
    if lone is not None:  # (a byte that was not UTF-8, as os.fsdecode writes it)
        return f"it holds the lone surrogate {lone!r}, which no UTF-8 file can hold"
    bidi = next((c for c in name if c in _BIDI), None)
    if bidi is not None:
        return (f"it holds the bidirectional control character {bidi!r}, which reorders the "
                "text shown after it (right-to-left letters need none)")
    return None


def check_names(field: str, names: Any, error: type[Exception] = InputError) -> None:
    """Refuse group names that reports, JUnit XML and CSV cannot carry: empty names, names
    over 200 characters, control characters (NUL included) and bidirectional overrides; and
    names whose pairs ``"A-B"`` read two ways (:func:`check_pair_names`)."""
    for name in names:
        why = bad_name(str(name))
        if why is not None:
            raise error(f"{field}: bad name {str(name)[:40]!r}: {why}; use printable names "
                        "(letters, digits, spaces, punctuation).")
    check_pair_names(field, names, error)


def check_labels(field: str, labels: Any, error: type[Exception] = InputError) -> None:
    """Refuse action labels (a system's ``decisions.labels``, a decision log's
    ``decisions``) that reports, ll144.csv and the console cannot carry, as
    :func:`check_names` refuses group names (:func:`bad_name`; no pair check: actions are
    never written as pairs)."""
    for label in labels:
        why = bad_name(str(label))
        if why is not None:
            raise error(f"{field}: bad label {str(label)[:40]!r}: {why}; use printable names "
                        "(letters, digits, spaces, punctuation).")


def check_pair_names(field: str, names: Any, error: type[Exception] = InputError) -> None:
    """Refuse group names two of whose pairs are written alike: a pair is ``"A-B"`` (A
    minus B) in reports, thresholds (``abs_C["B-A"]``), ``pair=`` and audit.json, so with
    groups North, North-East, East-South and South the name "North-East-South" would be two
    pairs. Names with a dash that read one way only (age bands "16-24") pass."""
    names = [str(n) for n in names]
    if not any("-" in n for n in names):
        return
    # "a-b" == "c-d" with a shorter than c means c = a + "-" + m and b = m + "-" + d: find
    # the splits of every name at its dashes (linear in the names, not in their pairs)
    known = set(names)
    tails: dict[str, list[tuple[str, str]]] = {}  # m -> (b, d) with b = m-d, d a name
    for b in names:
        for i, ch in enumerate(b):
            if ch == "-" and b[i + 1:] in known:
                tails.setdefault(b[:i], []).append((b, b[i + 1:]))
    for c in names:
        for i, ch in enumerate(c):
            a, m = c[:i], c[i + 1:]
            if ch != "-" or a not in known:
                continue
            for b, d in tails.get(m, ()):
                if a != b and c != d:
                    raise error(
                        f"{field}: {a + '-' + b!r} names two pairs, {a!r} minus {b!r} and "
                        f"{c!r} minus {d!r} (a pair is written \"A-B\", the first group minus "
                        "the second); rename a group so that no two pairs read alike, e.g. "
                        f"without \"-\" ({c.replace('-', ' ')!r}).")


def check_int(name: str, value: Any, minimum: int,
              error: type[Exception] = InputError) -> int:
    """``value`` as an int >= ``minimum`` (as given: never ``int(value)``, which would read
    2.5 as 2, true as 1 and "3" as 3), or ``error`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        whole = isinstance(value, (float, np.floating)) and float(value).is_integer() \
            and value >= minimum  # 1e4: a float
        raise error(f"{name}: must be an integer >= {minimum}, got {short(value)}"
                         + (f"; write {int(value)} (a number written 1e4 is a float)."
                            if whole else "."))
    return int(value)


def check_gamma(gamma: Any) -> float:
    """The discount ``gamma`` as a float in (0, 1], or a ModelError naming the bad value
    (the one check of every exact door: decompose, value_tables, the torch engine)."""
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.integer, np.floating)) \
            or not 0.0 < gamma <= 1.0:
        raise ModelError(f"gamma: must be a number in (0, 1], got {short(gamma, 40)}; 1 (the "
                         "default) adds the gains undiscounted.")
    return float(gamma)


def check_unit(unit: Any) -> str | None:
    """A figure's ``unit=`` (the gain's unit on an axis): None (the default) or a string,
    else an InputError naming it."""
    if unit is not None and not isinstance(unit, str):
        raise InputError(f"unit: must be the gain's unit as text (e.g. \"FICO points\"), or "
                         f"None for the default, got {short(unit, 40)}.")
    return unit


def check_flag(name: str, value: Any) -> bool:
    """``value`` as a bool, or an InputError naming ``name`` (a string such as "yes" or
    "false" is not a flag: it would be read as true)."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name}: must be True or False, got {short(value, 40)}.")
    return bool(value)


def check_policy_name(value: Any, field: str = "policy_name") -> str:
    """A result's ``policy_name`` (what its summary, report and JSON call the policy) as a
    non-blank string, or an InputError naming it: the one check of every engine's
    :class:`~causalfair.results.Decomposition` (``policy_name=None`` to an engine: the
    policy's own label; ``field``: the argument named, e.g. ``"baseline_name"``)."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{field}: must be the policy's name as non-empty text (e.g. "
                         f"\"ppo\"), or None for the policy's own label, got "
                         f"{short(value, 40)}.")
    return value


def read_only(obj: Any, names: Any) -> None:
    """Replace each array ``obj`` holds under ``names`` (attributes; a frozen dataclass's
    fields too) by a read-only view of it, so that an in-place operation on what a result
    hands out (``v = dec.V; v -= dec.V_0``) raises instead of rewriting the result; a dict
    of arrays (``paired_var``) becomes a new dict of read-only views; what is not an array
    is left as it is."""
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, dict) and any(isinstance(v, np.ndarray) for v in value.values()):
            object.__setattr__(obj, name, {k: _frozen(v) for k, v in value.items()})
        elif isinstance(value, np.ndarray) and value.flags.writeable:
            object.__setattr__(obj, name, _frozen(value))


def _frozen(value: Any) -> Any:
    """A read-only view of an array; anything else as it is."""
    if not isinstance(value, np.ndarray) or not value.flags.writeable:
        return value
    view = value.view()
    view.flags.writeable = False
    return view


def check_weight(value: Any, field: str, error: type[Exception] = InputError) -> float:
    """``value``, the weight of a penalty in a training objective (``beta_c``,
    ``beta_lambda``, ``beta_kl``; ``--beta-c``, ``[retrain] betas C``, named ``field``), as a
    finite float >= 0, else ``error`` naming the field, the value and the fix: a negative
    weight rewards what the penalty should reduce (the disparity, for beta_c). The one check
    of a weight: TrainConfig, the command line's flags and a spec's [retrain] betas."""
    import math

    ok = not isinstance(value, bool) and isinstance(value, (int, float, np.integer,
                                                            np.floating))
    try:
        ok = ok and math.isfinite(float(value)) and float(value) >= 0
    except OverflowError:  # an int too large for a float
        ok = False
    if not ok:
        raise error(f"{field}: bad value {short(value)}; give a finite number >= 0, e.g. 1.0 "
                    "(a penalty's weight: a negative one would reward what it penalises).")
    return float(value)


def finite(value: Any) -> bool:
    """Whether the real number ``value`` is finite as a float (an int too large for a float,
    such as 10**400 from ``--set lr=1000...``, is not)."""
    try:
        return math.isfinite(float(value))
    except (OverflowError, TypeError, ValueError):
        return False


#: The largest training seed: torch.manual_seed takes integers below 2**64.
MAX_SEED = 2**64 - 1


def check_seed(value: Any, field: str = "seed", error: type[Exception] = InputError) -> int:
    """``value``, the seed of a training run (torch's initial weights and numpy's
    sampling), as an int in [0, 2**64), else ``error`` naming ``field``: the one check of
    every trainer's seed (TrainConfig, the population agents' configs, the exact repair)."""
    ok = (not isinstance(value, bool) and isinstance(value, (int, np.integer))
          and 0 <= int(value) <= MAX_SEED)
    if not ok:
        raise error(f"{field}: bad value {short(value)}; must be an integer >= 0 and below "
                    "2**64 (18446744073709551616), e.g. 0.")
    return int(value)


def reset_generator(rng: Any, seed: Any, current: np.random.Generator) -> np.random.Generator:
    """The generator a vectorised environment's ``reset(rng=None, *, seed=None)`` draws from
    (the seeds' ``VecAttentionEnv``, ``VecInfectiousEnv``): ``rng`` (a Generator, or an int
    seed as ``VecLendingEnv.reset(seed)`` takes it first), else a fresh one from ``seed``,
    else ``current``; anything else is an InputError naming the field (an int kept as the
    generator failed at the first step)."""
    if rng is not None and seed is not None:
        raise InputError("reset: give rng (a numpy Generator) or seed (an integer), not both.")
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is not None:
        if isinstance(rng, bool) or not isinstance(rng, (int, np.integer)):
            raise InputError(f"rng: bad value {short(rng)}; give a numpy Generator "
                             "(np.random.default_rng(0)) or an integer seed.")
        seed = rng
    if seed is None:
        return current
    return np.random.default_rng(check_seed(seed))


#: The largest Adam learning rate a trainer takes: Adam moves every weight by about lr per
#: step, so above 1 a step outgrows the weights themselves (and above float32's range the
#: update overflows).
MAX_LR = 1.0


def check_lr(value: Any, field: str = "lr", error: type[Exception] = InputError) -> float:
    """``value``, an Adam learning rate, as a finite float in (0, :data:`MAX_LR`], else
    ``error`` naming ``field``: the one check of every trainer's ``lr`` (TrainConfig,
    RTD3Config)."""
    ok = (not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
          and finite(value) and 0 < float(value) <= MAX_LR)
    if not ok:
        raise error(f"{field}: bad value {short(value)}; must be a number > 0 and <= "
                    f"{MAX_LR:g} (Adam's step size; the default is 3e-3 for PPO, 1e-3 for "
                    "R-TD3).")
    return float(value)


def check_alpha(alpha: Any) -> float:
    """``alpha``, the error level of a (1 - alpha) interval, as a float in (0, 0.5], or an
    InputError naming the bad value (above 0.5 it is the confidence level given for the
    error level: alpha=0.95 asks for 5% intervals)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)) \
            or not 0.0 < alpha < 1.0:
        raise InputError(f"alpha: must be in (0, 1), got {alpha!r}; use e.g. 0.05 for 95% "
                         "intervals.")
    if alpha > 0.5:
        raise InputError(f"alpha: {float(alpha)!r} is the error level of "
                         f"{100 * (1 - alpha):g}% intervals; alpha is the error level, not the "
                         f"confidence level: for {100 * alpha:g}% intervals pass "
                         f"alpha={1 - alpha:.2g} (at most 0.5).")
    return float(alpha)


def z_quantile(alpha: float) -> float:
    """The two-sided normal quantile z_{1 - alpha/2} (:func:`causalfair._simultaneous.pair_z`,
    the one home of the normal quantile, with m = 1), ``alpha`` checked."""
    return pair_z(check_alpha(alpha))


def check_engine(engine: Any, field: str = "engine", error: type[Exception] = InputError) -> str:
    """``engine``, one of :data:`ENGINES`, or ``error`` naming ``field`` and the allowed
    values."""
    if not isinstance(engine, str) or engine not in ENGINES:
        raise error(f"{field}: bad value {short(engine, 40)}; allowed values: "
                    f"{', '.join(ENGINES)}.")
    return engine


def check_weights(weights: Any, engine: str = "exact") -> str:
    """``weights`` (how Lambda weighs states, :data:`WEIGHTS`) for ``engine``, or one
    ModelError naming the value, whichever door it came through (cf.decompose,
    cf.benefit_fairness, its ``horizon_benefit``): by forks (``engine`` "mc") only
    "visitation" applies."""
    if not isinstance(weights, str) or weights not in WEIGHTS:
        raise ModelError(f"weights: unknown value {short(weights, 40)}; allowed values: "
                         f"{', '.join(WEIGHTS)}.")
    if engine == "mc" and weights != "visitation":
        raise ModelError(f"weights: bad value {weights!r}; by forks (the Monte Carlo engine) "
                         "Lambda weighs states by visitation (\"visitation\", the default); "
                         f"{weights!r} needs the exact engine (a tabular model).")
    return weights


def engine_for(system: Any, engine: str = "auto", *, field: str = "engine",
               error: type[Exception] = InputError, check: bool = True) -> str:
    """The engine that computes on ``system`` (a :class:`~causalfair.systems.System`):
    ``"auto"`` is ``"exact"`` when the system has a tabular model of independent units,
    else ``"mc"`` (method.md section 3); ``"exact"`` on a system without one is refused
    (``error`` naming ``field``: ``engine`` in Python, an audit spec's ``[engine] kind``).
    Before the exact engine computes on a System, its simulator is checked against the
    contract (:meth:`~causalfair.systems.System.check_contract`), as the Monte Carlo
    engine's first simulator is: every door refuses a broken simulator alike, whichever
    engine runs. ``check=False``: the caller checks it later itself (an audit spec, whose
    :func:`~causalfair.audit.run.run_prepared` checks it where the audit runs: a gate's
    worker, under the spec's time limit)."""
    check_engine(engine, field, error)
    if engine == "auto":
        engine = "exact" if "exact" in system.engines else "mc"
    elif engine == "exact" and "exact" not in system.engines:
        raise error(f"{field}: bad value 'exact'; system {system.id!r} has no tabular model "
                    "of independent units, so only the Monte Carlo engine applies (use "
                    f"{field.rsplit(' ', 1)[-1]} 'mc' or 'auto').")
    if check and engine == "exact" and callable(getattr(system, "check_contract", None)):
        system.check_contract()
    return engine


def did_you_mean(word: str, names: Any) -> str:
    """``"did you mean 'X'? "`` for the name of ``names`` closest to ``word`` (a near miss:
    difflib ratio >= 0.6), else ``""``."""
    near = difflib.get_close_matches(str(word), [str(n) for n in names], n=1, cutoff=0.6)
    return f"did you mean {near[0]!r}? " if near else ""


def unknown_key(key: str, allowed: Any, listed: str | None = None) -> str:
    """The refusal of ``key``, not one of ``allowed`` in a file causalfair reads (an audit
    spec), from "unknown key" to its final stop: ``"unknown key; allowed keys: LISTED;
    did you mean 'X'?"`` for a near miss of an allowed key, else ``"unknown key (written
    for a newer causalfair? this is causalfair VERSION); allowed keys: LISTED."``: a key
    this version does not know may be one a later version added. ``listed``: how the
    allowed keys are shown (default: ``allowed``, comma-separated)."""
    listed = ", ".join(map(str, allowed)) if listed is None else listed
    near = did_you_mean(key, allowed)
    if near:
        return f"unknown key; allowed keys: {listed}; {near.rstrip()}"
    return (f"unknown key (written for a newer causalfair? this is causalfair {__version__}); "
            f"allowed keys: {listed}.")


def check_keywords(fn: Any = None, *, name: str | None = None) -> Any:
    """``fn`` refusing an unknown keyword argument with one InputError that names it, the
    keyword it most likely means and every keyword ``fn`` takes (instead of Python's bare
    TypeError). The signature, name and docstring stay ``fn``'s. ``name``: what the
    message calls ``fn`` (default its ``__name__``); ``@check_keywords(name="audit")``."""
    if fn is None:
        return functools.partial(check_keywords, name=name)
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return fn
    names = [p.name for p in params if p.name != "self" and p.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
    allowed = frozenset(names)
    label = name or fn.__name__

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        for key in kwargs:
            if key not in allowed:
                raise InputError(f"{label}: unknown keyword argument {key!r}; "
                                 f"{did_you_mean(key, names)}"
                                 f"it takes: {', '.join(names)}.")
        return fn(*args, **kwargs)

    return checked


def check_pair(pair: Any, n_groups: int, V: np.ndarray | None,
               field: str = "pair") -> tuple[int, int]:
    """The audited pair of group indices (s+, s-): ``pair`` checked against ``n_groups``, or
    by default (0, 1) with two groups (or without values ``V``) and (argmax V, argmin V) with
    more (method.md section 2); (0, 1) too when every group has the same V. ``field`` names
    the argument in the error (e.g. ``"pairs[2]"``)."""
    if pair is None:
        if n_groups == 2 or V is None:
            return (0, 1)
        a, b = int(np.argmax(V)), int(np.argmin(V))
        return (a, b) if a != b or n_groups < 2 else (0, 1)
    if isinstance(pair, (str, bytes)) or not isinstance(pair, (tuple, list, np.ndarray)) \
            or len(pair) != 2 or not all(isinstance(i, (int, np.integer))
                                         and not isinstance(i, bool) for i in pair):
        shown = pair.tolist() if callable(getattr(pair, "tolist", None)) else pair
        got = " ".join(repr(shown).split())  # one line, a Series' or array's values
        raise ModelError(f"{field}: expected two group indices (integers), got {got[:80]}; e.g. "
                         "pair=(0, 1), or the two groups' names, which cf.decompose and "
                         "cf.benefit_fairness take (\"A-B\" or (\"A\", \"B\")).")
    a, b = (int(i) for i in pair)
    if not (0 <= a < n_groups and 0 <= b < n_groups) or a == b:
        raise ModelError(f"{field}: expected two distinct group indices in [0, {n_groups}), "
                         f"got {pair!r}.")
    return (a, b)
