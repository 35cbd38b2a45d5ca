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

import sys

from causalfair._version import __version__

#: Public name -> the module that defines it, imported on first use (PEP 562), so that
#: ``import causalfair`` and ``causalfair --help`` stay instant (no numpy, pandas, torch).
_FACE = {
    "audit": "causalfair.audit",
    "systems": "causalfair.systems",
    "lambda_metric": "causalfair.engines.benefit",
    **dict.fromkeys(("benefit_fairness", "compare_groups", "decompose", "temporal_graph"),
                    "causalfair.engines.choice"),
    "value_tables": "causalfair.engines.effects",
    **dict.fromkeys(("CausalfairError", "SpecError", "SystemError_"), "causalfair.errors"),
    **dict.fromkeys(("CausalStructure", "ModelError", "TabularModel", "potential_from_gain"),
                    "causalfair.model"),
    **dict.fromkeys(("ActionPolicy", "BaselinePolicy", "CallablePolicy", "CheckpointError",
                     "ConstantPolicy", "FeatureEncoding", "Observation", "Policy",
                     "PolicyError", "TablePolicy", "TorchPolicy", "load_checkpoint",
                     "parse_policy", "save_checkpoint"), "causalfair.policies.core"),
    **dict.fromkeys(("PathSpecificPolicy", "hypothetical_policies", "policy_table"),
                    "causalfair.policies.grid"),
    **dict.fromkeys(("BenefitResult", "Decomposition"), "causalfair.results"),
    **dict.fromkeys(("DecisionSet", "Gain", "System", "as_system"), "causalfair.systems"),
    **dict.fromkeys(("SETTINGS", "LendingModel", "lending_setting"),
                    "causalfair.systems.lending.settings"),
    **dict.fromkeys(("Simulator", "StepResult"), "causalfair.systems.simulator"),
}

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
    # Every public name is loaded on first use: from its module (the two tables above),
    # or a submodule of the package (``cf.model``, ``cf.examples``: the shipped examples).
    import importlib

    module = _FACE.get(name) or _LAZY.get(name)
    if module is not None:
        value = importlib.import_module(module)
        if module != f"{__name__}.{name}":  # (a subpackage named like the attribute: itself)
            value = getattr(value, name)
        globals()[name] = value  # (looked up once)
        return value
    if not name.startswith("__"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":  # a submodule that failed to import
                raise
    raise AttributeError(f"module 'causalfair' has no attribute {name!r}")


def __dir__() -> list[str]:
    # what tab completion lists: every public name, loaded or not, and the subpackages
    return sorted(set(globals()) | set(_FACE) | set(_LAZY) | _SUBMODULES)


#: The submodules ``dir(causalfair)`` lists (they load on first use).
_SUBMODULES = {"audit", "backends", "engines", "errors", "examples", "graph", "logs", "model",
               "policies", "report", "results", "systems", "thresholds", "train", "types"}


#: causalfair's Gymnasium environments: id, entry point, keyword arguments.
_GYM_ENVS = (
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
     {"harder": True}),
)
_GYM_REGISTRATION = "gymnasium.envs.registration"


def _register_into(registration) -> None:
    """Register :data:`_GYM_ENVS` in Gymnasium's registry (the module
    ``gymnasium.envs.registration``); the environment modules themselves are imported only
    by ``gymnasium.make``."""
    for env_id, entry, kwargs in _GYM_ENVS:
        if env_id not in registration.registry:
            registration.register(id=env_id, entry_point=entry, kwargs=kwargs)


class _RegisterWhenGymnasiumLoads:
    """A finder on ``sys.meta_path`` that waits for Gymnasium's registry to be imported and
    registers causalfair's environments into it as soon as its module has run (importing
    Gymnasium itself costs numpy and ~50 ms: ``causalfair --help`` does without it)."""

    def find_spec(self, name, path=None, target=None):
        if name != _GYM_REGISTRATION:
            return None
        if self in sys.meta_path:  # once: the next finders find the module itself
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None and spec.loader is not None:
                break
        else:
            return None
        run = spec.loader.exec_module

        def exec_module(module) -> None:
            run(module)
            _register_into(module)

        spec.loader.exec_module = exec_module
        return spec


def _register_gymnasium() -> None:
    """Make ``import causalfair`` register causalfair's Gymnasium environments (the
    highway-env / minigrid convention: then ``gymnasium.make("causalfair/...")`` works): at
    once where Gymnasium's registry is loaded already, else the moment it loads."""
    if _GYM_REGISTRATION in sys.modules:
        _register_into(sys.modules[_GYM_REGISTRATION])
    elif not any(isinstance(f, _RegisterWhenGymnasiumLoads) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterWhenGymnasiumLoads())


_register_gymnasium()
