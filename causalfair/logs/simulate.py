"""Simulated decision logs: a policy deployed on a system's simulator, written in the
log format of :mod:`causalfair.logs.schema` (one row per decision)."""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair._limits import check_memory
from causalfair._validation import check_horizon, check_int, check_keywords
from causalfair.errors import short
from causalfair.logs.errors import LogError
from causalfair.policies.grid import d1_probs, engine_policy
from causalfair.policies.resolver import resolve
from causalfair.systems import System, as_system, make
from causalfair.systems.lending.settings import lending_potential

__all__ = ["simulate_logs", "potential_note"]

#: Memory one row of a simulated log needs (its columns, the DataFrame and its CSV text).
_LOG_ROW_BYTES = 256


@check_keywords
def simulate_logs(system: Any, policy: Any, n_individuals: int, horizon: int,
                  seed: int = 0, *, groups: Any = None) -> Any:
    """Decision logs of ``policy`` deployed on a system's simulator (vectorised).

    ``system``: a :class:`~causalfair.systems.System` with discrete levels and two
    actions, a registered id such as ``"lending-1"``, a
    :class:`~causalfair.systems.lending.settings.LendingModel` or a
    :class:`~causalfair.model.TabularModel` (simulated from its kernel). When the
    system names a ``qualified`` role (lending: ``repay``), the log has an ``outcome``
    column (that info for d1 rows, NaN for d0 rows); otherwise it has none.
    ``policy``: any :class:`~causalfair.policies.core.Policy` (or a built-in spec such as
    ``"random:0.5"``), evaluated with the simulator's observations. Groups are drawn
    i.i.d. from the system's ``group_weights`` unless ``groups`` (an int array of length
    ``n_individuals``) is given. Returns a DataFrame in the log format, sorted by
    (t, id). Same seed, same log.
    """
    import pandas as pd

    system = make(system) if isinstance(system, str) else (
        system if isinstance(system, System) else as_system(system))
    if system.n_levels is None or system.n_actions != 2:
        raise LogError(
            f"simulate_logs: system {system.id!r} needs discrete levels and two actions for the "
            f"log format (it has {system.n_actions} actions and "
            f"{'no' if system.n_levels is None else system.n_levels} levels); audit the system "
            f"itself instead (causalfair decompose --system {system.id}), or log your own "
            "decisions in the log format (docs/logs.md).")
    n = check_int("n_individuals", n_individuals, 1)
    T = check_horizon(horizon)
    # the one rule of every door (a table's cells checked against the system's), and a
    # time-indexed table must cover the T epochs, as every engine asks (no last row reused)
    policy = engine_policy(resolve(policy, system, where="policy").policy, system, 2,
                           tabulate=False, horizon=T)
    seed = check_int("seed", seed, 0)  # None would draw the OS's entropy: another log each call

    check_memory(_LOG_ROW_BYTES * n * T, f"simulate_logs: a log of {n} individuals x {T} "
                 "epochs", "lower n_individuals (--n) or the horizon")
    rng = np.random.default_rng(seed)
    sim = system.make_simulator()
    qualified = system.roles.get("qualified")
    if groups is None:
        g = rng.choice(system.n_groups, size=n, p=system.group_weights)
    else:
        g = _group_indices(groups, n, system.n_groups)
    state = sim.reset(n, g, rng)
    cols = {k: np.empty((T, n), dtype=dt) for k, dt in (
        ("level", np.int64), ("decision", np.int64), ("next_level", np.int64),
        ("reward", np.float64), ("outcome", np.float64))}
    if qualified is None:
        del cols["outcome"]
    for t in range(T):
        obs = sim.observe(state)
        p = d1_probs(policy, obs)
        d = (rng.random(n) < p).astype(np.int64)
        res = sim.step(state, d, sim.draw_noise(n, rng))
        cols["level"][t] = obs.level
        cols["decision"][t] = d
        cols["next_level"][t] = sim.observe(res.state).level
        cols["reward"][t] = res.reward
        if qualified is not None:
            cols["outcome"][t] = np.where(d == 1, np.asarray(res.info[qualified], dtype=np.float64),
                                          np.nan)
        state = res.state
    names = np.asarray(system.groups)
    return pd.DataFrame({
        "id": np.tile(np.arange(n), T),
        "t": np.repeat(np.arange(T), n),
        "group": pd.Categorical.from_codes(np.tile(g, T), categories=list(names)),
        **{k: v.reshape(-1) for k, v in cols.items()},
    })


def _group_indices(groups: Any, n: int, G: int) -> np.ndarray:
    """``groups`` (each individual's group index) as an int array of length ``n`` with
    values in [0, ``G``), else a LogError naming what is wrong (-1 was numpy's last group,
    logged as a missing group; a short array was broadcast)."""
    g = np.asarray(groups)
    if g.shape != (n,) or not np.issubdtype(g.dtype, np.integer):
        raise LogError(f"simulate_logs: groups must be {n} integer group indices (one per "
                       f"individual, 0 to {G - 1}), got {short(groups, 60)} of shape {g.shape}; "
                       "leave it out to draw the groups from the system's group_weights.")
    bad = (g < 0) | (g >= G)
    if bad.any():
        i = int(np.argmax(bad))
        raise LogError(f"simulate_logs: groups[{i}] = {int(g[i])} is not a group index (0 to "
                       f"{G - 1}).")
    return g.astype(np.int64)


def potential_note(system: Any) -> str | None:
    """What an audit of ``system``'s simulated log needs to measure the system's own gain:
    a log holds levels, not gains, and ``decompose --logs`` / ``audit_logs`` compute the gain
    from a potential of the levels, by default the lending potential. None where that
    default is the system's potential (the lending systems); else one sentence naming
    ``--potential`` (``potential=``) with the system's values where its tabular model has
    them."""
    system = make(system) if isinstance(system, str) else (
        system if isinstance(system, System) else as_system(system))
    K = system.n_levels
    tab = system.tabular
    if K is None:
        return None
    if tab is not None:
        f = np.asarray(tab.potential, dtype=np.float64).reshape(-1, K)
        if np.allclose(f, lending_potential(K), rtol=0, atol=1e-12):
            return None
        rows = [f[0]] if np.allclose(f, f[0], rtol=0, atol=0) else list(f)
        given = ";".join(",".join(f"{v:.12g}" for v in row) for row in rows)
        # as a shell line: quoted when it holds ';' (a shell's command separator), joined by
        # "=" when it starts with "-" (argparse would read it as an option)
        value = f"'{given}'" if ";" in given else given
        flag = f"--potential={value}" if given.startswith("-") else f"--potential {value}"
        return (f"a log holds levels, not gains: audit it with {flag} "
                f"(audit_logs(potential=...), [logs] potential), {system.id}'s gain potential; "
                "without it decompose --logs measures the gain with the lending potential.")
    return (f"a log holds levels, not gains: decompose --logs measures the gain with the "
            f"lending potential of the levels unless given --potential f(0),...,f({K - 1}) "
            f"(audit_logs(potential=...), [logs] potential); give the one {system.id}'s gain "
            f"is the change of (e.g. {','.join(str(k) for k in range(K))} for the change of "
            "level).")
