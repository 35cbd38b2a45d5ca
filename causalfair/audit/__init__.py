"""Audit specs, verdicts, the CI fairness gate and retrain-on-fail.

An *audit spec* is a TOML file kept under version control next to the policy it audits
(see docs/audit.md for every key)::

    name = "lending-1-ppo"
    horizon = 20

    [system]
    id = "lending-1"                # a registered id (causalfair systems), or
    # factory = "mysim:make"        # module:callable (mysim.py next to the spec), or
    # tabular = "model.npz"         # a tabular model file
    params = { levels = 7 }         # keyword arguments of the system's factory

    [policy]
    checkpoint = "ppo.pt"           # relative to the spec file; or builtin = "threshold:0.5"
                                    # or factory = "mypolicy:make" (+ params = {...})

    [engine]
    kind = "auto"                   # auto (exact when the system has a tabular model) | exact | mc
    alpha = 0.05

    [thresholds]                    # every threshold reads "quantity <= value"
    abs_C = 0.05
    Lambda = 0.1

    [retrain]
    algo = "ppo-cb"
    iterations = 50
    betas = { C = 1.0, Lambda = 0.5 }
    seed = 0

:func:`load_spec` validates a spec and refuses a bad one with an error naming the key,
the bad value and the allowed values. :func:`audit` runs it and returns an
:class:`AuditResult` (pandas tables, matplotlib figures, ``_repr_html_`` for notebooks).

Verdicts follow the CI rule: a threshold ``q <= v`` PASSES only when the whole
(1 - alpha) confidence interval of ``q`` lies inside it (upper bound <= v), FAILS when
the whole interval lies outside (lower bound > v) and is INCONCLUSIVE when the interval
straddles ``v``. Exact results have zero-width intervals, so they are never
inconclusive. ``abs_X`` thresholds use the interval of ``|X|`` implied by that of ``X``.
The overall verdict is FAIL if any threshold fails, else INCONCLUSIVE if any is
inconclusive, else PASS.

The module itself is callable: ``cf.audit(spec, policy=None, system=None, baseline=None,
vecnormalize=None, baseline_vecnormalize=None)`` is :func:`audit` (``policy`` / ``system``
override the spec's, e.g. ``cf.audit("lending-1.toml", policy="blind:0.5")`` to compare
policies under one spec; ``baseline`` adds the attribution of the change from it).

:func:`run_gate` evaluates several specs for CI (exit codes, JSON, JUnit XML) and can
retrain a failing checkpoint (``[retrain]``), warm-started from it, writing the new
checkpoint beside the old one (never overwriting) and re-auditing it.
"""

import sys
import types
from typing import Any

from causalfair._validation import check_keywords
from causalfair.audit.gate import GateEntry, GateResult, run_gate
from causalfair.audit.result import AuditResult, attribution, compare, provenance
from causalfair.audit.retrain import retrained_checkpoint_path
from causalfair.audit.run import audit, build_system, choose_engine, resolve_policy, run_audit
from causalfair.audit.spec import (
    ENGINES,
    METRICS,
    RETRAIN_ALGOS,
    SETTINGS,
    THRESHOLD_KEYS,
    AuditSpec,
    load_spec,
)
from causalfair.errors import SpecError
from causalfair.thresholds import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    Verdict,
    abs_interval,
    judge,
    overall_verdict,
)

__all__ = [
    "AuditSpec",
    "AuditResult",
    "SpecError",
    "Verdict",
    "GateEntry",
    "GateResult",
    "PASS",
    "FAIL",
    "INCONCLUSIVE",
    "THRESHOLD_KEYS",
    "METRICS",
    "ENGINES",
    "SETTINGS",
    "RETRAIN_ALGOS",
    "load_spec",
    "audit",
    "run_audit",
    "build_system",
    "resolve_policy",
    "choose_engine",
    "judge",
    "overall_verdict",
    "abs_interval",
    "compare",
    "attribution",
    "run_gate",
    "retrained_checkpoint_path",
    "provenance",
]


# ``causalfair.audit`` is both this package and, called, :func:`run_audit`:
# ``causalfair.audit("audits/lending-1.toml")`` runs an audit while
# ``causalfair.audit.load_spec`` and ``import causalfair.audit as m`` keep working.
class _CallableModule(types.ModuleType):
    @check_keywords(name="audit")
    def __call__(self, spec_or_path: Any, *, policy: Any = None, system: Any = None,
                 baseline: Any = None, vecnormalize: Any = None,
                 baseline_vecnormalize: Any = None) -> AuditResult:
        return run_audit(spec_or_path, policy=policy, system=system, baseline=baseline,
                         vecnormalize=vecnormalize, baseline_vecnormalize=baseline_vecnormalize)


sys.modules[__name__].__class__ = _CallableModule
