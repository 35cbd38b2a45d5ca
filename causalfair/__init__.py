"""causalfair: audit decision policies for long-term fairness, and repair them.

The core objects:

- :class:`System` and the registry (``causalfair.systems``: ``make``, ``register``) - the
  decision process to audit (a simulator, optionally an exact tabular model);
- :class:`TabularModel` (``causalfair.model``) - a finite model of the decision process;
- :func:`lending_setting` (``causalfair.sim.lending``) - the reference lending settings;
- policies (``causalfair.policy``) - built-ins, torch adapters, checkpoints, pi0 / pi^PS;
- :func:`decompose` (``causalfair.effects``) - C = DPE + IPE + SPE, exactly;
- :func:`benefit_fairness` (``causalfair.benefit``) - Delta, Lambda, worst pairs;
- :func:`temporal_graph` (``causalfair.graph``) - the temporal causal graph.

Heavy dependencies (torch, pandas, matplotlib, dowhy) are imported only when used.
``import causalfair`` registers the Gymnasium environments (``causalfair/Lending-v0``).
"""

from causalfair import audit, systems
from causalfair.benefit import BenefitResult, lambda_metric
from causalfair.effects import Decomposition, value_tables
from causalfair.engine_choice import benefit_fairness, decompose
from causalfair.errors import CausalfairError, SpecError, SystemError_
from causalfair.model import CausalStructure, ModelError, TabularModel, potential_from_gain
from causalfair.policy import (
    ActionPolicy,
    BaselinePolicy,
    CallablePolicy,
    CheckpointError,
    ConstantPolicy,
    FeatureEncoding,
    Observation,
    PathSpecificPolicy,
    Policy,
    PolicyError,
    TablePolicy,
    TorchPolicy,
    hypothetical_policies,
    load_checkpoint,
    parse_policy,
    policy_table,
    save_checkpoint,
)
from causalfair.sim.base import Simulator, StepResult
from causalfair.sim.lending import SETTINGS, LendingModel, lending_setting
from causalfair.systems import DecisionSet, Gain, System, as_system

__version__ = "0.1.0"

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
    "decompose",
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
    "temporal_graph": "causalfair.graph",
    "hypothetical_graphs": "causalfair.graph",
    "TemporalGraph": "causalfair.graph",
    "decompose_mc": "causalfair.montecarlo",
    "fair_lp": "causalfair.occupancy",
    "audit_logs": "causalfair.logs",
    "as_policy": "causalfair.adapters",
    "other_notions": "causalfair.metrics",
    "LendingSimulator": "causalfair.sim.individual",
    "TabularSimulator": "causalfair.sim.individual",
}


def __getattr__(name: str):
    # Entry points of modules with heavier imports, loaded on first use.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "examples":  # the shipped example files (causalfair.examples)
        import importlib

        return importlib.import_module("causalfair.examples")
    raise AttributeError(f"module 'causalfair' has no attribute {name!r}")


def _register_gymnasium() -> None:
    """Register causalfair's Gymnasium environments (the highway-env / minigrid
    convention: importing the package makes ``gymnasium.make("causalfair/...")`` work).
    The environment modules themselves are imported only by ``gymnasium.make``."""
    try:
        from gymnasium.envs.registration import register, registry
    except ImportError:  # pragma: no cover - gymnasium is a dependency
        return
    for env_id, entry, kwargs in (
            ("causalfair/Lending-v0", "causalfair.sim.env:LendingEnv", {}),
            ("causalfair/System-v0", "causalfair.sim.system_env:SystemEnv", {}),
            ("causalfair/LendingHarder-v0", "causalfair.sim.system_env:SystemEnv",
             {"system": "lending-harder"}),
            ("causalfair/Replicator-v0", "causalfair.sim.system_env:SystemEnv",
             {"system": "replicator-1"}),
            ("causalfair/Attention-v0", "causalfair.sim.attention_env:AttentionEnv", {}),
            ("causalfair/AttentionHarder-v0", "causalfair.sim.attention_env:AttentionEnv",
             {"harder": True}),
            ("causalfair/Infectious-v0", "causalfair.sim.infectious_env:InfectiousEnv", {}),
            ("causalfair/InfectiousHarder-v0", "causalfair.sim.infectious_env:InfectiousEnv",
             {"harder": True})):
        if env_id not in registry:
            register(id=env_id, entry_point=entry, kwargs=kwargs)


_register_gymnasium()
