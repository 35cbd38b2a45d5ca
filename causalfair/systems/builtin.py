"""The built-in systems: the lending settings of the reference paper (lending.md).

Registered at ``import causalfair.systems``:

- ``lending-1``, ``lending-2``, ``lending-3``: the paper's Appendix C settings
  (parameters ``levels`` (K, default 7), ``interest`` (1.0), ``group_weights``);
- ``delayed-impact``: setting 1's curves without drift (ml-fairness-gym's
  DelayedImpactEnv);
- ``replicator-1``: the replicator dynamics of Yin et al. (NeurIPS 2023)
  (:mod:`causalfair.systems.replicator`); ``replicator-binding``: the same dynamics
  where the fairness constraint binds.
- ``lending-harder``: ELBERT's harder lending (Xu et al. ICML 2024;
  :mod:`causalfair.systems.lending.harder`).
- ``attention-1``, ``attention-harder``: ml-fairness-gym's attention allocation as
  Xu et al. (ICML 2024) and Hu et al. (BigData 2023) run it
  (:mod:`causalfair.systems.attention`); ``attention-central``: either with the
  published central policy over all sites.
- ``infectious-1``, ``infectious-harder``: the SIR epidemic on the karate-club graph, as
  Xu et al. and Hu et al. run it (:mod:`causalfair.systems.infectious`).
- ``gym``: a Gymnasium env of your own, ``env="module:make_env"`` (or a registered env id)
  and ``groups=[...]`` (:func:`causalfair.systems.gym.door.gym_system`).

A new built-in system is one entry of :data:`BUILTINS` (its factory in
a module of this package) and its id in the list above (tests/test_contributor.py checks
both, and that every built-in is made and passes the contract check); every door reaches
it by its id (docs/contributing.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from causalfair._validation import check_int
from causalfair.errors import InputError, ModelError
from causalfair.systems.lending.settings import (
    LENDING_DESCRIPTIONS,
    SETTINGS,
    lending_setting,
    lending_system,
)
from causalfair.systems.registry import register
from causalfair.systems.system import System

__all__ = ["lending_system", "make_lending", "make_delayed_impact", "BUILTINS", "builtin_ids",
           "register_builtin"]

def _levels(levels: int) -> int:
    """The factories' ``levels`` (K >= 3), refused by that name (``--param levels=K``,
    ``[system] params``), not by the model's ``n_levels``."""
    try:
        return check_int("levels", levels, 3)
    except InputError as exc:
        raise ModelError(str(exc)) from None


def make_lending(setting: str = "lending-1", levels: int = 7, interest: float = 1.0,
                 group_weights: Sequence[float] = (0.5, 0.5)) -> System:
    """A lending setting as a :class:`System` (``levels`` = K)."""
    model = lending_setting(setting, n_levels=_levels(levels), interest=interest,
                            group_weights=group_weights)
    return lending_system(model, id=setting, params={
        "levels": levels, "interest": interest, "group_weights": list(group_weights)})


def make_delayed_impact(levels: int = 7, interest: float = 1.0) -> System:
    from causalfair.systems.gym.lending import delayed_impact_model

    return lending_system(delayed_impact_model(_levels(levels), interest), id="delayed-impact",
                          params={"levels": levels, "interest": interest})


def _lending_factory(setting: str):
    def factory(levels: int = 7, interest: float = 1.0,
                group_weights: Sequence[float] = (0.5, 0.5)) -> System:
        return make_lending(setting, levels, interest, group_weights)

    factory.__name__ = factory.__qualname__ = f"make_{setting.replace('-', '_')}"
    factory.__module__ = __name__
    return factory


make_lending_1 = _lending_factory("lending-1")
make_lending_2 = _lending_factory("lending-2")
make_lending_3 = _lending_factory("lending-3")


#: The built-in systems beside the lending settings: (id, ``"module:callable"`` factory,
#: description for ``causalfair systems``). A new built-in is one entry here (and its id in
#: the module docstring's list); the factory's module is imported on first ``make``.
BUILTINS: tuple[tuple[str, str, str], ...] = (
    ("delayed-impact", "causalfair.systems.builtin:make_delayed_impact",
     LENDING_DESCRIPTIONS["delayed-impact"]),
    ("lending-harder", "causalfair.systems.lending.harder:make_lending_harder",
     "ELBERT's harder lending (Xu et al., ICML 2024): non-adjacent credit jumps, "
     "rejected applicants move too; tabular"),
    ("attention-1", "causalfair.systems.attention:make_attention",
     "attention allocation over 5 sites, 6 units per step "
     "(ml-fairness-gym; seeds 000, 001); coupled units, Monte Carlo"),
    ("attention-harder", "causalfair.systems.attention:make_attention_harder",
     "attention allocation, ELBERT's harder parameters (30 units, "
     "per-site rates); coupled units, Monte Carlo"),
    ("attention-central", "causalfair.systems.attention:make_attention_central",
     "attention allocation with the published central policy (whole "
     "8-step history, one logit per site, softmax + greedy placement), "
     "200 steps; harder=true for ELBERT's harder parameters; Monte Carlo"),
    ("infectious-1", "causalfair.systems.infectious:make_infectious",
     "SIR epidemic on the karate-club graph, one vaccine per step "
     "(ml-fairness-gym; seeds 000, 001); coupled units, Monte Carlo"),
    ("infectious-harder", "causalfair.systems.infectious:make_infectious_harder",
     "infectious-1 with loss of immunity R -> S at 0.2 (ELBERT); "
     "coupled units, Monte Carlo"),
    ("gym", "causalfair.systems.gym.door:gym_system",
     "a Gymnasium env of your own (env='module:make_env' or a registered "
     "id, groups=[...]); Monte Carlo"),
    ("replicator-1", "causalfair.systems.replicator:make_replicator",
     "replicator dynamics of two groups' qualification rates under "
     "per-group thresholds (Yin et al., NeurIPS 2023); coupled units, Monte Carlo"),
    ("replicator-binding", "causalfair.systems.replicator:make_replicator_binding",
     "replicator-1 from q0 = (0.9, 0.1) over H = 15, where seed 002's parity "
     "constraint binds (Myopic-Fair differs from Myopic); coupled units, "
     "Monte Carlo"),
)


def builtin_ids() -> tuple[str, ...]:
    """The ids :func:`register_builtin` registers: the lending settings, then
    :data:`BUILTINS`."""
    return (*SETTINGS, *(sid for sid, _, _ in BUILTINS))


def register_builtin() -> None:
    """Register the built-in systems (the module docstring lists them) under their ids."""
    for sid in SETTINGS:
        register(sid, f"causalfair.systems.builtin:make_{sid.replace('-', '_')}",
                 description=LENDING_DESCRIPTIONS[sid], override=True)
    for sid, entry_point, description in BUILTINS:
        register(sid, entry_point, description=description, override=True)
