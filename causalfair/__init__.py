"""causalfair: audit decision policies for long-term fairness, and repair them.

The core objects:

- :class:`System` and the registry (``causalfair.systems``: ``make``, ``register``) - the
  decision process to audit (a simulator, optionally an exact tabular model);
- :class:`TabularModel` (``causalfair.model``) - a finite model of the decision process;
- :func:`lending_setting` (``causalfair.systems.lending.settings``) - the reference lending settings;
- policies (``causalfair.policies.core``) - built-ins, torch adapters, checkpoints, pi0;
  their tables and pi^PS (``causalfair.policies.grid``);
- :func:`decompose` (``causalfair.engines.choice``) - C = DPE + IPE + SPE by the engine the
  system supports (exact with a tabular model, else Monte Carlo);
- :func:`benefit_fairness` (``causalfair.engines.choice``) - Delta, Lambda, worst pairs;
- :func:`compare_groups` (``causalfair.engines.choice``) - every group against a reference,
  every pair, the worst pair;
- :func:`temporal_graph` (``causalfair.engines.choice``, over ``causalfair.graph``) - the
  temporal causal graph, under a policy;
- ``audit(spec, policy=...)`` (``causalfair.audit``) - an audit spec (TOML file or dict) run
  to an ``AuditResult`` with verdicts, pandas tables and figures; :func:`compare` puts
  several side by side;
- :func:`audit_logs` (``causalfair.logs``) - the same figures estimated from a DataFrame of
  decision logs;
- :func:`decompose_mc` (``causalfair.engines.montecarlo``) - the Monte Carlo engine on any
  simulator; ``systems.from_gym`` - a System over a Gymnasium env.

Results are :class:`Decomposition` and :class:`BenefitResult` objects with pandas views
(``to_frame``, ``by_group``, ``steps_frame``, ``worst_pairs``), a ``summary()``, ``plot()``
and a notebook rendering. A mistyped keyword, a bad value or a policy that does not
return probabilities raises a :class:`CausalfairError` naming the argument and the fix.

Heavy dependencies (torch, pandas, matplotlib, dowhy) are imported only when used.
``import causalfair`` registers the Gymnasium environments (``causalfair/Lending-v0``).
"""

from causalfair import audit, systems
from causalfair._version import __version__
from causalfair.engines.benefit import lambda_metric
from causalfair.engines.choice import benefit_fairness, compare_groups, decompose, temporal_graph
from causalfair.engines.effects import value_tables
from causalfair.errors import CausalfairError, SpecError, SystemError_
from causalfair.model import CausalStructure, ModelError, TabularModel, potential_from_gain
from causalfair.policies.core import (
    ActionPolicy,
    BaselinePolicy,
    CallablePolicy,
    CheckpointError,
    ConstantPolicy,
    FeatureEncoding,
    Observation,
    Policy,
    PolicyError,
    TablePolicy,
    TorchPolicy,
    load_checkpoint,
    parse_policy,
    save_checkpoint,
)
from causalfair.policies.grid import PathSpecificPolicy, hypothetical_policies, policy_table
from causalfair.results import BenefitResult, Decomposition
from causalfair.systems import DecisionSet, Gain, System, as_system
from causalfair.systems.lending.settings import SETTINGS, LendingModel, lending_setting
from causalfair.systems.simulator import Simulator, StepResult

__all__ = [
    # systems
    "System",
    "DecisionSet",
    "Gain",
    "as_system",
    "systems",
    "Simulator",
    "StepResult",
    "CausalfairError",
    "SpecError",
    "SystemError_",
    "ActionPolicy",
    "BaselinePolicy",
    "BenefitResult",
    "CallablePolicy",
    "CausalStructure",
    "CheckpointError",
    "ConstantPolicy",
    "Decomposition",
    "FeatureEncoding",
    "LendingModel",
    "ModelError",
    "Observation",
    "PathSpecificPolicy",
    "Policy",
    "PolicyError",
    "SETTINGS",
    "TablePolicy",
    "TabularModel",
    "TorchPolicy",
    "audit",
    "benefit_fairness",
    "compare_groups",
    "decompose",
    "temporal_graph",
    "hypothetical_policies",
    "lambda_metric",
    "lending_setting",
    "load_checkpoint",
    "parse_policy",
    "policy_table",
    "potential_from_gain",
    "save_checkpoint",
    "value_tables",
    "__version__",
]


_LAZY = {
    "hypothetical_graphs": "causalfair.graph",
    "TemporalGraph": "causalfair.graph",
    "decompose_mc": "causalfair.engines.montecarlo",
    "fair_lp": "causalfair.engines.occupancy",
    "audit_logs": "causalfair.logs",
    "as_policy": "causalfair.policies.adapters",
    "other_notions": "causalfair.engines.notions",
    "LendingSimulator": "causalfair.systems.lending.settings",
    "TabularSimulator": "causalfair.systems.tabular_sim",
    "compare": "causalfair.audit.result",
    "attribute": "causalfair.engines.attribution",
}
__all__ += list(_LAZY)  # (``from causalfair import *`` loads their modules)


def __getattr__(name: str):
    # Entry points of modules with heavier imports, loaded on first use.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "examples":  # the shipped example files (causalfair.examples)
        import importlib

        return importlib.import_module("causalfair.examples")
    raise AttributeError(f"module 'causalfair' has no attribute {name!r}")


def __dir__() -> list[str]:
    # what tab completion lists: the names above and the lazily loaded entry points
    return sorted(set(globals()) | set(_LAZY) | {"examples"})


def _register_gymnasium() -> None:
    """Register causalfair's Gymnasium environments (the highway-env / minigrid
    convention: importing the package makes ``gymnasium.make("causalfair/...")`` work).
    The environment modules themselves are imported only by ``gymnasium.make``."""
    try:
        from gymnasium.envs.registration import register, registry
    except ImportError:  # pragma: no cover - gymnasium is a dependency
        return
    for env_id, entry, kwargs in (
            ("causalfair/Lending-v0", "causalfair.systems.gym.lending:LendingEnv", {}),
            ("causalfair/System-v0", "causalfair.systems.gym.system:SystemEnv", {}),
            ("causalfair/LendingHarder-v0", "causalfair.systems.gym.system:SystemEnv",
             {"system": "lending-harder"}),
            ("causalfair/Replicator-v0", "causalfair.systems.gym.system:SystemEnv",
             {"system": "replicator-1"}),
            ("causalfair/Attention-v0", "causalfair.systems.gym.attention:AttentionEnv", {}),
            ("causalfair/AttentionHarder-v0", "causalfair.systems.gym.attention:AttentionEnv",
             {"harder": True}),
            ("causalfair/Infectious-v0", "causalfair.systems.gym.infectious:InfectiousEnv", {}),
            ("causalfair/InfectiousHarder-v0", "causalfair.systems.gym.infectious:InfectiousEnv",
             {"harder": True})):
        if env_id not in registry:
            register(id=env_id, entry_point=entry, kwargs=kwargs)


_register_gymnasium()
