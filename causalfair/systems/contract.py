"""The simulator contract as checks on what one call returns (docs/simulators.md): an
observation's shapes, dtypes and finite values, a step result's gains and rewards
(numpy arrays of numbers, one per unit, finite), probabilities named ``p_*``/``prob*``
inside [0, 1], one noise row per unit. :func:`check_protocol`
applies them (with reproducibility, determinism and no in-place change) on a sampled
batch; :func:`guard_simulator` applies them on every call of a user's simulator (the
protocol itself: :mod:`causalfair.systems.simulator`). Every check is a few vectorised
numpy operations."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from causalfair._usercode import MEANWHILE, Guard, call_watching_np, guard_as, is_own
from causalfair.errors import SimulatorContractError
from causalfair.model import empty_group_message
from causalfair.types import Observation, StepResult

__all__ = ["check_observation", "check_step_result", "check_noise", "same", "frozen",
           "seeded_rng", "check_protocol", "guard_simulator", "attribute_prints",
           "check_shared_state"]


def _leaves(obj: Any, prefix: str = "", _within: frozenset[int] = frozenset()
            ) -> list[tuple[str, np.ndarray]]:
    """Every array-like leaf of a state / noise / observation object, with a path; a
    container met again inside itself (a cycle, e.g. a dict holding itself or a tree
    with parent links) is not walked again."""
    if obj is None or id(obj) in _within:
        return []
    if isinstance(obj, np.ndarray) or np.isscalar(obj):
        return [(prefix or "value", np.asarray(obj))]
    inside = _within | {id(obj)}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = []
        for f in dataclasses.fields(obj):
            out += _leaves(getattr(obj, f.name), f"{prefix}.{f.name}" if prefix else f.name,
                           inside)
        return out
    if isinstance(obj, Mapping):
        out = []
        for k in obj:
            out += _leaves(obj[k], f"{prefix}[{k!r}]", inside)
        return out
    if isinstance(obj, (tuple, list)):
        out = []
        for i, v in enumerate(obj):
            out += _leaves(v, f"{prefix}[{i}]", inside)
        return out
    try:
        return [(prefix or "value", np.asarray(obj))]
    except Exception:  # noqa: BLE001 - opaque object: nothing to compare
        return []


def same(a: Any, b: Any) -> str | None:
    """None when a and b hold the same arrays, else the path of the first difference."""
    la, lb = _leaves(a), _leaves(b)
    if [p for p, _ in la] != [p for p, _ in lb]:
        return "structure"
    for (path, x), (_, y) in zip(la, lb, strict=True):
        if x.shape != y.shape:
            return path
        if x.dtype.kind in "fc":
            if not np.array_equal(x, y, equal_nan=True):
                return path
        elif x.dtype.kind in "biu":
            if not np.array_equal(x, y):
                return path
    return None


def frozen(obj: Any) -> dict[str, np.ndarray]:
    """Copies of every array leaf (so later in-place changes show up as differences)."""
    return {path: np.array(arr, copy=True) for path, arr in _leaves(obj)}


def _is_prob_name(name: str) -> bool:
    low = str(name).lower()
    return low.startswith("p_") or low.startswith("prob")


def check_observation(sim: Any, obs: Any, n: int, where: str,
                      n_levels: int | None = None) -> None:
    """``n_levels``: the system's level count, which the levels must lie below (else the
    simulator's own ``n_levels``, if it declares one)."""
    w = f"simulator {type(sim).__name__}.{where}"
    if not isinstance(obs, Observation):
        raise SimulatorContractError(
            f"{w}: returned {type(obs).__name__}; expected a causalfair.policies.core.Observation."
        )
    group = np.asarray(obs.group)
    if group.shape != (n,):
        raise SimulatorContractError(
            f"{w}: wrong shape: Observation.group has shape {group.shape}, expected "
            + (f"({n},) for a batch of {n}." if n >= 0 else "(n,), one group index per unit."))
    if group.dtype.kind in "USO" and n:
        kind = "objects" if group.dtype.kind == "O" else "strings"
        raise SimulatorContractError(
            f"{w}: Observation.group holds {kind} (e.g. {group.reshape(-1).tolist()[0]!r}); "
            "groups are integer indices 0..n_groups-1, as reset(n, group, rng) receives them: "
            "keep the index in the state and the names in group_names (or "
            "System(groups=...)).")
    if obs.level is not None:
        level = np.asarray(obs.level)
        if level.shape != (n,):
            raise SimulatorContractError(
                f"{w}: wrong shape: Observation.level has shape {level.shape}, expected ({n},).")
        if level.dtype.kind == "f" and not np.isfinite(level).all():
            raise SimulatorContractError(f"{w}: NaN states: Observation.level has NaN or inf.")
        if level.dtype.kind not in "iub":
            raise SimulatorContractError(
                f"{w}: Observation.level has dtype {level.dtype}; levels are integer indices "
                "(use features for continuous states).")
        K = n_levels if n_levels is not None else getattr(sim, "n_levels", None)
        if K is not None and n and (level.min() < 0 or level.max() >= K):
            raise SimulatorContractError(
                f"{w}: Observation.level outside [0, {K}) (min {level.min()}, max {level.max()}).")
    if obs.features is not None:
        feats = obs.features
        if not isinstance(feats, np.ndarray) or feats.dtype.kind not in "biuf":
            what = (f"a {type(feats).__name__}" if not isinstance(feats, np.ndarray) else
                    f"an array of dtype {feats.dtype}")
            raise SimulatorContractError(
                f"{w}: Observation.features is {what}; return a numpy array of numbers, "
                f"shape ({n if n >= 0 else 'n'}, F) (np.asarray(..., dtype=float)): a policy "
                "reads it with array operations.")
        if feats.ndim != 2 or feats.shape[0] != n:
            raise SimulatorContractError(
                f"{w}: wrong shape: Observation.features has shape {feats.shape}, expected "
                f"({n}, F).")
        if not np.isfinite(feats).all():
            raise SimulatorContractError(
                f"{w}: NaN states: Observation.features contains NaN or inf "
                f"({int((~np.isfinite(feats)).sum())} entries).")
    _check_named_arrays(sim, obs.extras, n, f"{where} (Observation.extras)")


def _check_named_arrays(sim: Any, arrays: Mapping[str, Any], n: int, where: str) -> None:
    w = f"simulator {type(sim).__name__}.{where}"
    for key in arrays:
        arr = np.asarray(arrays[key])
        if arr.ndim == 0 or arr.shape[0] != n:
            raise SimulatorContractError(
                f"{w}: wrong shape: {key!r} has shape {arr.shape}, expected ({n}, ...).")
        if _is_prob_name(key) and arr.dtype.kind in "fiub":
            a = arr.astype(np.float64)
            if not np.isfinite(a).all() or (a < 0).any() or (a > 1).any():
                bad = a[~(np.isfinite(a) & (a >= 0) & (a <= 1))][0]
                raise SimulatorContractError(
                    f"{w}: probability {key!r} outside [0, 1] (e.g. {float(bad)!r}); entries named "
                    "p_* or prob* are probabilities.")


#: The largest |gain| or |reward| a step may return: the Monte Carlo engine squares sums of
#: them over units and epochs (its standard errors), which overflow float64 near 1e154.
MAX_ABS_GAIN = 1e100


def check_step_result(sim: Any, res: Any, n: int) -> None:
    w = f"simulator {type(sim).__name__}.step"
    if not isinstance(res, StepResult):
        raise SimulatorContractError(
            f"{w}: returned {type(res).__name__}; expected causalfair.systems.simulator.StepResult.")
    for field_name in ("gain", "reward"):
        arr = getattr(res, field_name)
        if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "fiub":
            what = f"a {type(arr).__name__}" if not isinstance(arr, np.ndarray) else \
                f"an array of dtype {arr.dtype}"
            raise SimulatorContractError(
                f"{w}: StepResult.{field_name} is {what}; return a numpy array of numbers "
                f"(np.asarray(..., dtype=float)) with one entry per unit.")
        if arr.shape != (n,):
            raise SimulatorContractError(
                f"{w}: wrong shape: StepResult.{field_name} has shape {arr.shape}, expected ({n},).")
        if not np.isfinite(arr).all():
            raise SimulatorContractError(
                f"{w}: StepResult.{field_name} contains NaN or inf "
                f"({int((~np.isfinite(arr)).sum())} of {n}).")
        big = float(np.abs(arr).max()) if arr.size and arr.dtype.kind == "f" else 0.0
        if big > MAX_ABS_GAIN:
            raise SimulatorContractError(
                f"{w}: StepResult.{field_name} holds {big:.3g}, beyond {MAX_ABS_GAIN:.0e} in "
                "absolute value: the audit sums its squares (standard errors, intervals), "
                f"which would overflow to inf; give it in larger units (divided by "
                f"1e{int(np.log10(big)) - 10}, say).")
    _check_named_arrays(sim, res.info, n, "step (StepResult.info)")


def check_noise(sim: Any, noise: Any, n: int) -> None:
    for path, arr in _leaves(noise):
        if arr.ndim >= 1 and arr.shape[0] != n:
            raise SimulatorContractError(
                f"simulator {type(sim).__name__}.draw_noise: wrong shape: {path} has shape {arr.shape}, "
                f"expected {n} rows.")


# ------------------------------------------------------------ a sampled batch
def seeded_rng(seed: int, *key: int) -> np.random.Generator:
    """The random stream ``key`` of ``seed`` (``PCG64(SeedSequence(seed, spawn_key=key))``):
    the seeding of the contract check and of the Monte Carlo engines."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def _check_feature_width(name: str, obs: Any, features: tuple[str, ...]) -> None:
    """Refuse observations whose feature columns are not the declared feature names, one
    column per name (a policy and the report read them by name)."""
    got = None if obs.features is None else np.shape(obs.features)
    width = None if got is None else (got[1] if len(got) == 2 else 1)
    if width != len(features):
        have = "no features" if got is None else f"{width} feature columns"
        raise SimulatorContractError(
            f"simulator {name}.observe: gave {have}, but the system declares "
            f"{len(features)} features ({', '.join(features)}); give one column per name "
            "(feature_names, or System(features=...)) in that order.")


def _check_tabular_features(name: str, obs: Any, tabular: Any, t: int) -> None:
    """Refuse observations whose features differ from the tabular model's ``features``
    table at their (group, level): the engines would audit two different policies."""
    table = getattr(tabular, "features", None)
    if table is None or obs.level is None or obs.features is None:
        return
    got = np.asarray(obs.features, dtype=np.float64).reshape(len(obs.level), -1)
    g, x = np.asarray(obs.group, dtype=np.intp), np.asarray(obs.level, dtype=np.intp)
    if got.shape[1] != table.shape[2] or x.min() < 0 or x.max() >= table.shape[1]:
        return  # the width and level checks name these
    want = table[g, x]
    bad = ~np.isclose(got, want, rtol=1e-6, atol=1e-6)  # float32 features pass
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        col = (tabular.feature_names or [f"column {k}" for k in range(table.shape[2])])[j]
        raise SimulatorContractError(
            f"simulator {name}.observe: at t = {t} a unit of group {int(g[i])} at level "
            f"{int(x[i])} shows {col} = {got[i, j]:.6g}, but the tabular model's features "
            f"table says {want[i, j]:.6g}; the exact engine evaluates policies on the table "
            "and Monte Carlo on the observations, so make them agree (features a function of "
            "(group, level) only), or leave features out of the tabular model.")


def attribute_prints(sim: Any) -> dict[str, tuple[Any, ...]] | None:
    """A fingerprint of each array leaf of a user simulator's (or policy's) own
    attributes (shape, dtype and a hash of the bytes; no copy of large tables), keyed by
    path; None for causalfair's own objects, those that declare ``thread_safe = False``
    and policies with ``start_batch`` (both run on one thread)."""
    import hashlib

    inner = sim._obj if isinstance(sim, Guard) else sim
    if is_own(type(inner)) or getattr(inner, "thread_safe", True) is False \
            or callable(getattr(inner, "start_batch", None)):  # run on one thread anyway
        return None
    attrs = getattr(inner, "__dict__", None)
    if not isinstance(attrs, dict):
        return None
    out = {}
    for path, arr in _leaves({k: v for k, v in attrs.items() if not callable(v)}):
        if arr.dtype.kind not in "biufc":
            continue
        data = np.ascontiguousarray(arr)
        out[path] = (arr.shape, arr.dtype.str, hashlib.blake2b(memoryview(data).cast("B"),
                                                                 digest_size=16).digest())
    return out


def check_shared_state(name: str, sim: Any, base: dict[str, tuple[Any, ...]] | None) -> None:
    """Refuse a simulator (or policy, ``name`` says which) whose calls changed its own
    attributes since ``base`` (:func:`attribute_prints` after its first call): the engine
    steps several batches at once on threads that share it, so such state is overwritten
    under another batch (wrong numbers)."""
    if base is None:
        return
    now = attribute_prints(sim) or {}
    changed = sorted({k.split("[")[1].split("]")[0].strip("'\"") for k in set(base) | set(now)
                      if base.get(k) != now.get(k)})
    if changed:
        raise SimulatorContractError(
            f"{name}: its methods change its own attributes between calls "
            f"({', '.join(changed[:5])}), and the engine steps several batches at once on "
            "threads that share it, so one batch would overwrite another's; keep "
            "per-call data in local variables, or declare thread_safe = False (one thread, "
            "or worker processes; the same numbers).")


def _check_departed_step(name: str, obs: Any, after: Any, gain: Any, d: Any,
                         departed: tuple[int, ...] | None, t: int) -> None:
    """Refuse a step that moves a unit observed at a departed level, or gives it a gain."""
    if not departed or getattr(obs, "level", None) is None:
        return
    x0 = np.asarray(obs.level)
    x1 = np.asarray(after.level) if getattr(after, "level", None) is not None else x0
    gone = np.isin(x0, departed)
    bad = gone & ((x1 != x0) | (np.abs(np.asarray(gain, dtype=float)) > 1e-12))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise SimulatorContractError(
            f"simulator {name}.step: departed={tuple(departed)!r} declares level {int(x0[i])} "
            f"absorbing with gain 0, but at step {t} a unit there under action "
            f"{int(np.asarray(d)[i])} went to level {int(x1[i])} with gain "
            f"{float(np.asarray(gain, dtype=float)[i]):.6g}; declare only levels that every "
            "action keeps, with gain 0 (docs/own-system.md, \"Individuals who leave\"), or "
            "leave departed out.")


def _check_arguments_kept(name: str, given: dict[str, np.ndarray], decisions: Any,
                          noise: Any) -> None:
    """Refuse a step that changed its ``decisions`` or ``noise`` argument in place
    (``given``: :func:`frozen` copies of both taken before the call): the engine steps pi,
    the pi^PS fork and pi0 of an epoch with the same noise array and counts the decisions
    after the step, so a change made by one call silently alters the next. Entries the
    step adds (a cache of what it derives from the noise, which forks reuse) are fine."""
    now = frozen((decisions, noise))
    diff = next((path for path, arr in given.items() if path in now and same(arr, now[path])),
                None)
    if diff:
        arg, fix = (("decisions", "d = np.array(decisions)") if diff.startswith("[0]")
                    else ("noise", "noise = noise * c, not noise *= c"))
        raise SimulatorContractError(
            f"simulator {name}.step: modified its {arg} argument in place; the "
            "engine steps pi, the pi^PS fork and pi0 with the same decisions and noise "
            f"arrays, so the next call would see the change: copy before changing it ({fix}).")


def _check_reads_rng(name: str, method: str, drawn: Any, other: Any) -> None:
    """Refuse a ``draw_noise`` (or ``reset``) whose noise (initial states) ``drawn`` varies
    between units but is the same, ``other``, under a different seed: it draws from a
    generator of its own (``default_rng(0)`` inside it, a seeded global), so every batch of
    every group gets the same numbers and the intervals treat them as independent. What is
    the same for every unit (no noise at all, everyone starting alike) passes."""
    if same(drawn, other) is not None:
        return
    if not any(a.ndim >= 1 and a.shape[0] > 1 and a.dtype.kind in "biufc"
               and not np.array_equal(a, np.broadcast_to(a[:1], a.shape), equal_nan=True)
               for _, a in _leaves(drawn)):
        return
    raise SimulatorContractError(_ignores_rng(name, method))


def _ignores_rng(name: str, method: str) -> str:
    what, fix = (("noise", "") if method == "draw_noise" else
                 ("initial states", "; units whose initial states are fixed by design get "
                  "them from rng too (which unit gets which: rng.choice)"))
    return (f"simulator {name}.{method}: ignores its rng: two different seeds gave the same "
            f"{what}, so every batch and group would share the same random numbers; draw every "
            "random number from the rng argument (rng.random(n), not np.random.default_rng(0) "
            f"or a generator kept in the simulator){fix}.")


def _check_reads_rng_worlds(name: str, method: str, drawn: Any, other: Any, worlds: int,
                            units: int) -> None:
    """:func:`_check_reads_rng` for coupled units: units of one replica may differ by design
    (a site's rate, a member's place in the graph), so what must differ is the replicas:
    refuse when they differ from one another but two seeds give the same."""
    if same(drawn, other) is not None:
        return
    for _, a in _leaves(drawn):
        if a.ndim < 1 or a.dtype.kind not in "biufc" or a.shape[0] not in (worlds, worlds * units):
            continue
        rows = a.reshape(worlds, -1)
        if worlds > 1 and not np.array_equal(rows, np.broadcast_to(rows[:1], rows.shape),
                                             equal_nan=True):
            raise SimulatorContractError(_ignores_rng(name, method))


def _check_group_kept(name: str, after: Any, g: int, t: int) -> None:
    """Refuse a step after which a unit reset in group ``g`` is observed in another: the
    engines count each unit in the group it was reset in, and a policy reading
    ``Observation.group`` would see another."""
    got = np.asarray(after.group)
    if got.shape and np.any(got != g):
        other = got[got != g].reshape(-1)[0].item()
        raise SimulatorContractError(
            f"simulator {name}.step: Observation.group changed over time: units reset in "
            f"group {g} show group {other!r} after step {t}; a unit's group is fixed (the "
            "engines count it in the group it was reset in): keep the group the state got in "
            "reset unchanged, and put what changes into features.")


#: Units reset to confirm that a group starts with nobody present when the contract's
#: sample held nobody present (a group with a small present share is legal).
EMPTY_CONFIRM = 4096


def _starts_empty(sim: Any, g: int, departed: tuple[int, ...], tabular: Any, seed: int) -> bool:
    """Whether group ``g``, of whose contract sample nobody was present, starts with nobody
    present: from the tabular model's initial distribution when the system has one (exact),
    else from :data:`EMPTY_CONFIRM` more units (a group 0.2% present is absent from 64
    units with probability 0.88, from 4,096 with probability 0.998^4096 < 3e-4)."""
    initial = getattr(tabular, "initial", None)
    if initial is not None:
        return bool(np.delete(np.asarray(initial, dtype=float)[g], list(departed)).sum() <= 0)
    more = sim.observe(sim.reset(EMPTY_CONFIRM, g, seeded_rng(seed, g, 4)))
    return more.level is None or bool(np.isin(more.level, departed).all())


def check_protocol(sim: Any, *, n: int = 64, horizon: int = 3, seed: int = 0,
                   n_actions: int | None = None,
                   features: tuple[str, ...] | None = None, tabular: Any = None,
                   departed: tuple[int, ...] | None = None) -> None:
    """Check that the simulator ``sim`` honours the protocol
    (:mod:`causalfair.systems.simulator`) on a sampled batch; raise SimulatorContractError
    naming the method that broke it. :func:`causalfair.engines.montecarlo.check_simulator`
    is this check for anything the Monte Carlo engine accepts.

    Checked for every group: shapes (observations, gains, rewards: n rows), no NaN or
    inf in observed states, gains and rewards, arrays named ``p_*`` / ``prob*`` in
    ``Observation.extras`` and ``StepResult.info`` inside [0, 1], ``reset`` and
    ``draw_noise`` reproducible from their ``rng`` (same seed, same result), ``step``
    deterministic given (state, decisions, noise) and leaving its input state unchanged
    (both needed for forks), over ``horizon`` steps with random decisions; with
    ``features`` (the system's feature names), observations with one column per name;
    with ``tabular`` (the system's tabular model, when it has a ``features`` table),
    observations that carry levels show the table's features of their (group, level) at
    every step (the exact engine evaluates policies on the table, Monte Carlo on the
    observations: a difference would make the two disagree silently); a
    user's simulator that does not declare ``thread_safe = False`` leaves its own
    attributes as its first step left them (:func:`check_shared_state`); with ``departed``
    (the system's departed levels), a unit observed at one of them stays there with gain
    0 under the random decisions (:func:`_check_departed_step`).
    """
    name = type(sim).__name__
    G = int(sim.n_groups)
    A = int(n_actions if n_actions is not None else getattr(sim, "n_actions", 2))
    if G < 1:
        raise SimulatorContractError(f"simulator {name}: n_groups must be >= 1, got {G}.")
    prints = None
    for g in range(G):
        s1 = sim.reset(n, g, seeded_rng(seed, g, 0))
        s2 = sim.reset(n, g, seeded_rng(seed, g, 0))
        o1 = sim.observe(s1)
        check_observation(sim, o1, n, "observe")
        if features is not None:
            _check_feature_width(name, o1, features)
        _check_tabular_features(name, o1, tabular, 0)
        if np.any(np.asarray(o1.group) != g):
            raise SimulatorContractError(
                f"simulator {name}.reset: reset(n, group={g}, rng) gave observations of other "
                "groups (Observation.group differs from the group asked for).")
        if departed and o1.level is not None and n and np.isin(o1.level, departed).all() \
                and _starts_empty(sim, g, departed, tabular, seed):
            names = getattr(sim, "group_names", None)
            raise SimulatorContractError(empty_group_message(
                f"simulator {name}.reset", names[g] if names is not None else g, departed))
        _check_reset_seeded(name, (s1, o1), s2, sim)
        s3 = sim.reset(n, g, seeded_rng(seed, g, 5))  # another seed: other initial states
        _check_reads_rng(name, "reset", (s1, o1), (s3, sim.observe(s3)))
        rng_d = seeded_rng(seed, g, 1)
        state = s1
        for t in range(horizon):
            n1, n2 = _seeded_noise(sim, name, n, (seed, g, 2, t))
            if t == 0:
                _check_reads_rng(name, "draw_noise", n1,
                                 sim.draw_noise(n, seeded_rng(seed, g, 3)))
            d = rng_d.random(n) < 0.5 if A == 2 else rng_d.integers(A, size=n)
            r1, after, first = _checked_step(sim, name, state, d, (n1, n2), n, t)
            if g == 0 and t == 0:  # what a first call sets up (a cache) may stay
                prints = first
            _check_group_kept(name, after, g, t)
            _check_tabular_features(name, after, tabular, t + 1)
            _check_departed_step(name, sim.observe(state), after, r1.gain, d, departed, t)
            state = r1.state
    check_shared_state(f"simulator {name}", sim, prints)


def _check_reset_seeded(name: str, first: tuple[Any, Any], again: Any, sim: Any) -> None:
    """Refuse a ``reset`` whose second call with the same seed (state ``again``) differs
    from the first (``first``: its state and observation), for independent and coupled
    units alike."""
    diff = same(first[1], sim.observe(again)) or same(first[0], again)
    if diff:
        raise SimulatorContractError(
            f"simulator {name}.reset: does not honour its seed: two calls with the same "
            f"seed gave different states (first difference at {diff}); draw every random "
            "number from the rng argument.")


def _seeded_noise(sim: Any, name: str, n: int, key: tuple[int, ...]) -> tuple[Any, Any]:
    """``draw_noise(n, rng)`` twice from the stream ``key``: the two draws, refused unless
    equal (the seed honoured) and of the contract's shape (independent units: ``n`` rows;
    coupled: one per unit)."""
    n1 = sim.draw_noise(n, seeded_rng(*key))
    n2 = sim.draw_noise(n, seeded_rng(*key))
    diff = same(n1, n2)
    if diff:
        raise SimulatorContractError(
            f"simulator {name}.draw_noise: does not honour its seed: two calls with the "
            f"same seed gave different noise (first difference at {diff}); draw every "
            "random number from the rng argument.")
    check_noise(sim, n1, n)
    return n1, n2


def _checked_step(sim: Any, name: str, state: Any, d: Any, noise: tuple[Any, Any], n: int,
                  t: int) -> tuple[Any, Any, Any]:
    """``step(state, d, noise)`` as the contract checks it, for independent and coupled
    units alike: its result's shapes, the state, decisions and noise left unchanged (the
    engine steps pi, the pi^PS fork and pi0 from the same state with the same noise), a
    second call with equal noise giving the same gains, rewards and next observation, and
    the next observation itself. Returns the step's result, that observation and the
    attributes the simulator holds after its first call (:func:`attribute_prints`)."""
    n1, n2 = noise
    before = frozen((sim.observe(state), state))
    given = frozen((d, n1))
    r1 = sim.step(state, d, n1)
    check_step_result(sim, r1, n)
    prints = attribute_prints(sim)
    diff = same(before, frozen((sim.observe(state), state)))
    if diff:
        raise SimulatorContractError(
            f"simulator {name}.step: modified its input state in place (at {diff}); forks "
            "need the state unchanged (the engine steps pi, the pi^PS fork and pi0 from it): "
            "return a new state instead.")
    _check_arguments_kept(name, given, d, n1)
    r2 = sim.step(state, d, n2)
    diff = same((r1.gain, r1.reward), (r2.gain, r2.reward)) or same(
        sim.observe(r1.state), sim.observe(r2.state))
    if diff:
        raise SimulatorContractError(
            f"simulator {name}.step: not a deterministic function of (state, decisions, "
            f"noise): two calls with the same arguments differ (at {diff}); draw random "
            "numbers in draw_noise, not in step, so that forks share them.")
    after = sim.observe(r1.state)
    check_observation(sim, after, n, f"step (observe after step {t})")
    return r1, after, prints


def check_protocol_coupled(sim: Any, *, units: int, worlds: int = 8, horizon: int = 3,
                           seed: int = 0, n_actions: int = 2, baseline: int = 0,
                           budget: int | None = None,
                           features: tuple[str, ...] | None = None,
                           departed: tuple[int, ...] | None = None) -> None:
    """:func:`check_protocol` for a simulator of coupled units (``units`` per replica,
    docs/simulators.md "Coupled units"): ``reset(worlds, None, rng)`` gives ``worlds``
    replicas, ``observe`` one row per unit (replica-major), ``draw_noise`` and ``step`` one
    row per unit. Checked as for independent units: shapes, finite values, ``reset`` and
    ``draw_noise`` reproducible from their ``rng`` and reading it, ``step`` deterministic
    and leaving its state, decisions and noise unchanged (the engine steps pi, the pi^PS
    fork and pi0 from the same state with the same noise), every unit keeping its group,
    the feature columns, departed levels, and no attributes changed between calls."""
    name = type(sim).__name__
    m = worlds * units
    s1 = sim.reset(worlds, None, seeded_rng(seed, 0, 0))
    o1 = sim.observe(s1)
    check_observation(sim, o1, m, "observe (a batch of "
                      f"{worlds} replicas of {units} units: one row per unit)")
    if features is not None:
        _check_feature_width(name, o1, features)
    _check_reset_seeded(name, (s1, o1), sim.reset(worlds, None, seeded_rng(seed, 0, 0)), sim)
    s3 = sim.reset(worlds, None, seeded_rng(seed, 0, 5))
    _check_reads_rng_worlds(name, "reset", (s1, o1.features, o1.level),
                            (s3, (o3 := sim.observe(s3)).features, o3.level), worlds, units)
    groups = np.asarray(o1.group).copy()
    rng_d = seeded_rng(seed, 0, 1)
    prints = None
    state = s1
    for t in range(horizon):
        n1, n2 = _seeded_noise(sim, name, m, (seed, 0, 2, t))
        if t == 0:
            _check_reads_rng_worlds(name, "draw_noise", n1,
                                    sim.draw_noise(m, seeded_rng(seed, 0, 3)), worlds, units)
        d = rng_d.integers(n_actions, size=m)
        if budget == 1:  # at most one unit of a replica takes a non-baseline action
            d = np.full(m, baseline, dtype=np.int64)
            pick = np.arange(worlds) * units + rng_d.integers(units, size=worlds)
            d[pick] = rng_d.integers(n_actions, size=worlds)
        if n_actions == 2 and baseline == 0:
            d = d.astype(bool)
        r1, after, first = _checked_step(sim, name, state, d, (n1, n2), m, t)
        if t == 0:
            prints = first
        got = np.asarray(after.group)
        if got.shape == groups.shape and np.any(got != groups):
            i = int(np.flatnonzero(got != groups)[0])
            raise SimulatorContractError(
                f"simulator {name}.step: Observation.group changed over time: unit {i % units} "
                f"of replica {i // units} was in group {groups[i].item()!r} at reset and shows "
                f"group {got[i].item()!r} after step {t}; a unit's group is fixed (the engines "
                "count it in the group it was reset in): keep the groups reset gave unchanged, "
                "and put what changes into features.")
        _check_departed_step(name, sim.observe(state), after, r1.gain, d, departed, t)
        state = r1.state
    check_shared_state(f"simulator {name}", sim, prints)


# ------------------------------------------------------------ every call, guarded
class _GuardedSimulator(Guard):
    """A user's simulator as the engines see it: the four protocol methods are called
    through :func:`~causalfair.errors.call_user` (anything they raise or exit with is a
    one-line error naming the method), and what each call returns is checked with the
    rules of :func:`check_protocol` (shapes, dtypes, finite
    values, probabilities in [0, 1]) by vectorised numpy checks: O(1) Python calls per
    step, whatever the batch size. Everything else is the wrapped simulator's. ``_levels``:
    the system's level count, which observed levels must lie below (None: the
    simulator's own ``n_levels``); ``_features``: the system's feature names, one column
    of every observation's features per name (None: not checked), at every call, not only
    in the contract check's first steps."""

    __slots__ = ("_levels", "_features")

    def __reduce__(self) -> tuple[Any, tuple[Any, Any, Any]]:
        return guard_simulator, (self._obj, self._levels, self._features)

    def _call(self, method: str, *args: Any) -> Any:
        what = f"simulator {type(self._obj).__name__}.{method}"
        out, moved = call_watching_np(what, getattr(self._obj, method), *args)
        if moved:
            kind = ("does not honour its seed" if method in ("reset", "draw_noise") else
                    "not a deterministic function of its arguments")
            raise SimulatorContractError(
                f"{what}: {kind}: it drew from numpy's global generator (np.random.random, "
                f"np.random.normal, ...: its state moved during the call; {MEANWHILE}), so "
                "its numbers are not reproducible and forks would not share them; draw "
                "every random number from the rng argument (rng.random(n)) that reset and "
                "draw_noise get; step and observe draw none.")
        return out

    def reset(self, n: int, group: Any, rng: Any) -> Any:
        return self._call("reset", n, group, rng)

    def observe(self, state: Any) -> Any:
        obs = self._call("observe", state)
        group = getattr(obs, "group", None)
        check_observation(self._obj, obs, np.shape(group)[0] if np.ndim(group) >= 1 else -1,
                          "observe", self._levels)
        if self._features is not None:
            _check_feature_width(type(self._obj).__name__, obs, self._features)
        return obs

    def draw_noise(self, n: int, rng: Any) -> Any:
        noise = self._call("draw_noise", n, rng)
        check_noise(self._obj, noise, n)
        return noise

    def step(self, state: Any, decisions: Any, noise: Any) -> Any:
        res = self._call("step", state, decisions, noise)
        check_step_result(self._obj, res, np.shape(decisions)[0])
        return res


def guard_simulator(sim: Any, n_levels: int | None = None,
                    features: tuple[str, ...] | None = None) -> Any:
    """``sim`` behind a guard that calls and checks every protocol method (see
    :class:`_GuardedSimulator`); causalfair's own simulators are returned as they are.
    ``n_levels``: the system's level count (observed levels must lie below it);
    ``features``: the system's feature names (every observation gives one column each)."""
    if isinstance(sim, _GuardedSimulator):  # guarded again with this level count
        if n_levels is None and features is None:
            return sim
        n_levels = sim._levels if n_levels is None else n_levels
        features = sim._features if features is None else features
        sim = sim._obj
    if isinstance(sim, Guard) or is_own(type(sim)):
        return sim
    guarded = guard_as(_GuardedSimulator, sim)
    object.__setattr__(guarded, "_levels", None if n_levels is None else int(n_levels))
    object.__setattr__(guarded, "_features", None if features is None else tuple(features))
    return guarded
