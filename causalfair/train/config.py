"""Training configuration: one dataclass, one docstring per field.

Every default says where it comes from:

- **anchor**: the anchors' published code (lending.md section C, digests 000 and 001);
- **PPO paper**: Schulman et al. 2017 (adaptive KL penalty);
- **spec**: method.md / lending.md;
- **ours**: tuned by us for this package's scale (episodes of T = 20 decision epochs
  for a batch of individuals; a few seconds to minutes of CPU per run). Where an
  anchor value exists and we do not use it, the field says why.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field
from typing import Any

from causalfair._limits import check_memory
from causalfair._names import PPO_ALGORITHMS
from causalfair._validation import check_lr, check_seed, check_weight, finite
from causalfair.engines._mc_base import check_work
from causalfair.engines.groups import resolve_pair
from causalfair.errors import ConfigError, InputError, short
from causalfair.systems.lending.settings import SETTINGS
from causalfair.thresholds import PPO_LAG_KEYS, is_repair_key, parse_constraint
from causalfair.train.algorithms import REGISTRY, names

__all__ = ["TrainConfig", "ALGORITHMS", "ENVIRONMENTS", "ConfigError", "LENDING_FIELDS",
           "KL_FIELDS", "check_lending_fields",
           "UNRECORDED_NONE", "resolved_pair"]

#: The objectives the PPO trainers implement (causalfair.train.objectives), from the
#: registry of :mod:`causalfair.train.algorithms` (defined in causalfair._names: --help lists it).
ALGORITHMS = PPO_ALGORITHMS
#: ``individual``: the individual-level MDP (paper's MDP, what the exact audit measures);
#: ``population``: the population-level lending environment (the anchors' setting).
ENVIRONMENTS = ("individual", "population")
#: Fields only the lending trainer reads (:mod:`causalfair.train.core`): the setting and
#: its parameters, the population environment, the one-hot input, the exact C_hat and
#: F-PPO's action massaging. A run on another system does not record them.
LENDING_FIELDS = ("setting", "n_levels", "interest", "env", "pop_steps", "pop_max_steps",
                  "pop_mass", "encoding", "c_estimator", "gain_q", "massage_tau_s",
                  "massage_start", "massage_decay")
#: Fields :meth:`TrainConfig.to_dict` records only when set (not None): a config that does
#: not set them (every checkpoint and config.json written before they existed) keeps its
#: bytes, and :meth:`TrainConfig.from_dict` reads them back as None.
UNRECORDED_NONE = ("audit_bins", "audit_alpha", "start_pair")




#: Where an algorithm of the registry that TrainConfig does not run is called in Python.
_ELSEWHERE = {
    "repair": " (the constrained exact repair is causalfair.train.exact.repair_checkpoint("
              "system, horizon, constraints, init=...), or causalfair train --algo exact)",
    "population": " (the population agents are causalfair.train.population.train_rtd3 and "
                  "train_lucbfair)",
}


#: The KL penalty's fields: the lending trainer's KL-penalty PPO reads them; the generic
#: trainer's clipped PPO does not (recorded in its config.json all the same).
KL_FIELDS = ("beta_kl", "kl_target")
#: The flag of ``causalfair train`` that sets a lending-only field, where there is one.
_LENDING_FLAGS = {"setting": "--setting", "n_levels": "--levels", "env": "--env"}


def check_lending_fields(config: Any, system_id: str) -> None:
    """Refuse a config that sets a field of :data:`LENDING_FIELDS` or :data:`KL_FIELDS`
    away from its default for a run on ``system_id``, which the generic trainer trains: it
    reads none of them (its ``config.json`` does not even record the former), so ``--env
    population``, ``--levels 5`` or ``--set beta_kl=5`` on ``attention-1`` trained as if
    they were not given."""
    default = TrainConfig()
    for name in (*LENDING_FIELDS, *KL_FIELDS):
        value = getattr(config, name)
        if value == getattr(default, name):
            continue
        if name in KL_FIELDS:
            raise ConfigError(
                f"{name}: bad value {value!r}; the KL penalty's, which the trainer of system "
                f"{system_id!r} has not: it uses PPO's clipped surrogate (clip_range), the "
                "KL-penalty PPO being the lending trainer's (lending-1, lending-2, "
                "lending-3); leave it out.")
        flag = f" ({_LENDING_FLAGS[name]})" if name in _LENDING_FLAGS else ""
        fix = ("its levels are the system's own: a factory parameter (--param), if it takes "
               "one" if name == "n_levels" else "it trains on the system's own simulator"
               if name == "env" else "leave it out")
        raise ConfigError(
            f"{name}{flag}: bad value {value!r}; a field of the lending trainer only "
            f"(lending-1, lending-2, lending-3), which system {system_id!r} does not train "
            f"with: {fix}.")


def _check_field_types(cfg: Any, bad: Any) -> None:
    """Every number, flag and text field of ``cfg`` of its declared type (``int`` an
    integer, ``float`` a finite real number, ``bool`` true or false, ``str`` a text; each
    may be None where the type allows it), before the per-field range checks: a value from
    ``--set FIELD=VALUE`` or a JSON config of the wrong type is one line naming the field."""
    for f in dataclasses.fields(cfg):
        kind, _, rest = str(f.type).partition(" | ")
        v = getattr(cfg, f.name)
        if v is None and rest == "None":
            continue
        if kind == "bool" and not isinstance(v, bool):
            raise bad(f.name, v, "must be true or false")
        if kind == "int" and (isinstance(v, bool) or not isinstance(v, numbers.Integral)):
            raise bad(f.name, v, "must be an integer")
        if kind == "float" and (isinstance(v, bool) or not isinstance(v, numbers.Real)
                                or not finite(v)):
            raise bad(f.name, v, "must be a finite number")
        if kind == "str" and not isinstance(v, str):
            raise bad(f.name, v, "must be a text")
    check_seed(cfg.seed, "seed", ConfigError)


def _check_pair_shape(pair: Any, bad: Any, name: str = "pair") -> None:
    """``pair`` (the field ``name``): None, ``"A-B"`` or two group names (which groups:
    :func:`resolved_pair`)."""
    if pair is None or (isinstance(pair, str) and pair):
        return
    if (isinstance(pair, (list, tuple)) and len(pair) == 2
            and all(isinstance(g, str) and g for g in pair)):
        return
    raise bad(name, pair, 'give two group names, e.g. ["B", "A"] or "B-A" (the first '
              "minus the second), or leave it out for each audit's own pair")


def resolved_pair(config: Any, groups: Any, name: str = "pair") -> tuple[int, int] | None:
    """``config.pair`` (or the pair field ``name``, e.g. ``start_pair``) as group indices of
    ``groups`` (None stays None), by the one check of a compared pair
    (:func:`causalfair.engines.groups.resolve_pair`): a name that is not one of ``groups``
    is a one-line :class:`ConfigError` naming them."""
    try:
        return resolve_pair(getattr(config, name), groups, name)
    except InputError as exc:
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a training run (same config + seed -> same weights)."""

    # ------------------------------------------------------------------ problem
    algo: str = "ppo"
    """Objective: one of ALGORITHMS (ppo, ppo-c, ppo-cb, a-ppo, f-ppo-l, f-ppo, elbert-po;
    which systems each trains on: :mod:`causalfair.train.algorithms`)."""
    setting: str = "lending-1"
    """Lending setting (lending.md section A): lending-1, lending-2 or lending-3."""
    n_levels: int = 7
    """Qualification levels K (spec default 7)."""
    interest: float = 1.0
    """Bank profit on a repaid loan (spec default 1.0)."""
    horizon: int | None = None
    """Decision epochs T of one episode, and the audit horizon; None: the system's own
    (``System.horizon``; 20 for the lending settings, lending.md)."""
    env: str = "individual"
    """Environment: ``individual`` (episodes of T epochs for a batch of individuals of both
    groups: the paper's MDP, what the exact audit measures) or ``population`` (the
    vectorised population-level lending environment of lending.md section B)."""
    seed: int = 0
    """Seeds torch (initial weights) and the numpy Generator (all sampling)."""
    system: str = ""
    """A system id or ``module:callable`` to train on (``causalfair systems``); empty: the
    lending ``setting`` above. Non-lending systems use the generic trainer
    (:mod:`causalfair.train.generic`: ppo, ppo-c, ppo-cb). Ours."""
    system_params: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the system's factory. Ours."""
    threads: int = 1
    """Torch threads during training. Results are bit-identical for the same config and
    seed whatever the machine's OMP/MKL settings, because training always uses exactly
    this many threads (and 1 keeps every reduction in one order). Ours: 1 (small networks;
    more threads cost 5-12x on a busy 2-core machine)."""

    # ---------------------------------------------------------------- budget
    iterations: int = 100
    """Policy iterations (rollout + update). Ours: 100 takes a few seconds here."""
    n_individuals: int = 512
    """Individuals per rollout (individual env), split over the groups by P(s) (largest
    remainder). Batch = n_individuals x horizon transitions. Ours: 512 x 20 = 10,240
    transitions; close to the anchors' 2000-4096 per rollout while giving each group
    enough samples for the group means in C_hat. Population env: number of parallel
    environments."""
    pop_steps: int = 64
    """Population env only: steps per environment per rollout (batch = n_individuals x
    pop_steps). Ours."""
    pop_max_steps: int = 2000
    """Population env only: episode truncation (anchor: 2000 for training)."""
    pop_mass: float = 0.01
    """Population env only: mass moved per decision (anchor DelayedImpactEnv: 0.01)."""

    # ----------------------------------------------------------------- network
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layers of the policy and value MLPs. Ours: the input is 9 one-hot bits, so
    the anchors' [256, 128] only costs time (the benchmark uses the same net for SB3)."""
    activation: str = "tanh"
    """Activation of both MLPs (tanh or relu). Ours (SB3's default for MlpPolicy is tanh;
    the anchors pass ReLU)."""
    encoding: str = "onehot"
    """Policy input: ``onehot`` = one-hot level then one-hot group (FeatureEncoding), so
    the trained policy is a table the exact audit reads. The value network additionally
    sees a one-hot of the epoch t (the MDP has a finite horizon)."""

    # ---------------------------------------------------------------- optimiser
    lr: float = 3e-3
    """Adam learning rate, in (0, 1]. Ours: the anchors' 1e-5 needs 1e6-1e7 steps."""
    n_epochs: int = 10
    """Passes over each rollout (anchor: 10)."""
    n_minibatches: int = 4
    """Minibatches per epoch (ours: few large ones; the anchors use batches of 64)."""
    max_grad_norm: float = 0.5
    """Gradient clipping: the largest norm of an update's gradient, > 0 (anchor: 0.5)."""
    vf_coef: float = 0.5
    """Weight of the value loss, >= 0 (anchor: 0.5)."""
    ent_coef: float = 0.0
    """Entropy bonus (anchor: 0)."""
    gamma: float = 0.99
    """Discount of the utility return used for GAE (anchor: 0.99). Gain action values
    (PPO-C) are undiscounted, as the audit is."""
    gae_lambda: float = 0.95
    """GAE lambda (anchor: 0.95)."""
    normalize_advantage: bool = True
    """Normalise advantages to mean 0, std 1 over the rollout (anchor: SB3 default)."""

    # ------------------------------------------------------------- surrogate
    surrogate: str = "kl"
    """``kl``: KL-penalty PPO as in the paper, with adaptive beta_KL; ``clip``: clipped PPO."""
    kl_target: float = 0.01
    """Target KL for the adaptive rule (PPO paper: d_targ in {0.003, 0.01, 0.03})."""
    beta_kl: float = 1.0
    """Initial beta_KL (PPO paper: 1). Rule after each update: KL > 1.5 target -> x2;
    KL < target / 1.5 -> /2 (PPO paper section 4)."""
    clip_range: float = 0.2
    """Clip range of the clipped surrogate (anchor: 0.2)."""

    # --------------------------------------------------------------- PPO-C / Cb
    beta_c: float = 2.0
    """PPO-C weight of C_hat^2 (paper gives none; ours)."""
    c_estimator: str = "anchored"
    """``paper``: C_hat = mean_{s+}[ratio Q_g] - mean_{s-}[ratio Q_g] as printed (method.md
    section 5); ``anchored`` (default, ours): the same estimator rescaled by T and
    re-centred on the batch's Monte Carlo C (objectives.c_hat_anchored), because the
    printed one averages Q over epochs and its value can have the opposite sign of C
    (measured on lending-1: C_hat ~ -0.03 while C ~ +0.15, so PPO-C overshot). The
    population env always uses ``paper`` (no individual trajectories)."""
    gain_q: str = "exact"
    """Q_g in C_hat: ``return`` = the individual's undiscounted gain-to-go under pi_old and
    the batch's Monte Carlo C (general, model-free), or ``exact`` (default, ours) =
    Q_pi - V_pi from causalfair.engines.effects.value_tables for pi_old and the exact C of pi_old
    (tabular models; the lending model always has one). Why the default: with 256
    individuals per group the Monte Carlo C has a standard error of about 0.15 on
    lending-1, as large as |C| itself, so the square's sign is a coin toss and PPO-C
    wanders (measured); the exact tables remove that noise."""
    beta_lambda: float = 0.5
    """PPO-Cb weight of Lambda (paper gives none; ours)."""
    constraints: tuple[str, ...] = ()
    """PPO-Lagrangian (any objective of the generic trainer on a non-lending system; ours):
    thresholds such as ``"abs_C<=0.05"`` (any key of ``causalfair.thresholds.PPO_LAG_KEYS``:
    C, DPE, IPE, SPE, their ``abs_`` forms, Lambda; one pair's ``abs_C[A-B]``; every
    pair's ``max_abs_C``), each with its own Lagrange multiplier on top of the objective's
    own penalty (betas), moved at every audit on the audit's value of that key (the far end
    of its CI, 95% unless ``audit_alpha`` says otherwise): lambda <- max(0, lambda + lagrange_lr * (q / |bound| - bound / |bound|)).
    C and Lambda also enter the loss through their surrogates (lambda * q / |bound|); the
    others only through the selection: a constraint counts as met on the audit's numbers
    (exact, or the Monte Carlo CI rule of the gate), never on the batch, and the run
    keeps the best-utility audited policy that meets every constraint
    (docs/training.md). Tabular systems: ``causalfair train --algo exact`` instead."""
    lagrange_lr: float = 0.5
    """Step of the multiplier update at each audit (on the violation relative to the bound)."""
    audit_n: int = 2_000
    """Units per group of the Monte Carlo audit the generic trainer runs every
    ``eval_every`` iterations on a system without a tabular model. With ``constraints``
    its 95% CI must be narrower than the bound to pass (about 0.07 for C on the clinic
    example at 2,000, 0.024 at 20,000)."""
    pair: tuple[str, str] | str | None = None
    """The two groups the run compares (method.md section 3: C is the first's gain minus the
    second's): two group names, or ``"A-B"`` as thresholds name a pair; checked against the
    system's groups when the trainer is built (:func:`resolved_pair`). The generic trainer's
    audits, its C and Lambda penalties and its constraints on plain keys (``abs_C<=...``)
    are of this pair; None: each audit's own (with more than two groups the largest and
    smallest V^pi, else the first minus the second). ``gate --retrain`` sets it to the
    spec's ``[engine] pair``. The lending trainer has two groups and penalties symmetric in
    them (C^2, Lambda): it takes its two groups in either order and trains the same policy
    (its history's C stays s+ minus s-). Ours."""
    lambda_eps: float | None = None
    """Lambda's eps in the gain's units (None: what the system declares, 0.1 on the lending
    settings, else "auto" resolved once when training starts; engines.benefit.eps_for)."""
    audit_bins: int | None = None
    """Quantile bins per feature of the cells that pair units in the generic trainer's
    Lambda by forks: its Monte Carlo audits' and PPO-Cb's (or a Lambda constraint's) batch
    cells. None: 4, the engines' default. ``gate --retrain`` sets the spec's
    ``[benefit] bins``. Recorded only when set. Ours."""
    audit_alpha: float | None = None
    """The generic trainer's Monte Carlo audits report 1 - ``audit_alpha`` intervals (C, DPE,
    IPE, SPE, Lambda, every pair's), and a constraint is judged and its multiplier moved on
    the far end of that interval. None: 0.05 (95%). ``gate --retrain`` sets the spec's
    ``[engine] alpha``. Recorded only when set. Ours."""
    start_pair: tuple[str, str] | str | None = None
    """With ``pair`` None: the pair of groups (as ``pair`` names one) the generic trainer's
    C and Lambda penalties compare until its first audit picks the audit's own pair (None:
    the first and second group). ``gate --retrain`` sets the pair the gate's audit of the
    failing policy compared when the spec names no ``[engine] pair`` and the system has
    more than two groups. Recorded only when set. Ours."""

    # ------------------------------------------------------------------ A-PPO
    appo_beta0: float = 1.0
    """A-PPO weight of the utility advantage (anchor: 1)."""
    appo_beta1: float = 0.25
    """A-PPO weight of the gap term min(0, omega - Delta) (anchor: 0.25)."""
    appo_beta2: float = 0.25
    """A-PPO weight of the gap-change term (anchor: 0.25)."""
    appo_omega: float = 0.005
    """A-PPO tolerance on the TPR gap (anchor: 0.005)."""
    appo_gap: str = "before"
    """Which short-term gap A-PPO's two fairness terms read, ``"before"`` the step (Delta_t;
    ours) or ``"after"`` it (Delta_{t+1}; both published codes, which store the gap after
    ``env.step``): on the lending trainer the gap of the epochs before (through) the
    decision's, or the population environment's running gap before (after) the step.
    ``attention-central`` sets "after"."""

    # ---------------------------------------------------------- F-PPO-L / F-PPO
    fppo_beta0: float = 1.0
    """F-PPO-L weight of the utility advantage (anchor: 1)."""
    fppo_beta3: float = 1.12
    """F-PPO-L weight of the violated branch (anchor: 1.12)."""
    fppo_beta4: float = 1.0
    """F-PPO-L weight of the satisfied branch (anchor: 1.0)."""
    fppo_omega: float = 0.005
    """F-PPO-L tolerance on the short-term TPR gap (anchor: 0.005)."""
    massage_tau_s: float = 0.5
    """F-PPO action massaging: initial tau (anchor: 0.5)."""
    massage_start: int = 3
    """F-PPO: massaging starts after this iteration. Ours: the anchors start after 17 of
    350 iterations (5%); our runs are 60-150 iterations and the policy is confident (no
    action in the band) by iteration 17."""
    massage_decay: float = 0.985
    """F-PPO: per-iteration decay of tau (anchor: 0.985)."""

    # -------------------------------------------------------------- ELBERT-PO
    elbert_alpha: float = 20.0
    """ELBERT-PO bias coefficient. Ours: the anchor's 2e5 is for ratios of sums over
    2000-step episodes (eta^D ~ 500); per-individual episodes of T = 20 have eta^D ~ 5 and
    the normalised advantages make 2e5 swamp the utility completely."""

    elbert_beta: float = 20.0
    """ELBERT-PO soft-bias temperature for more than two groups (Xu et al. ICML 2024, Eq. 6; its
    attention runs use 20). Two groups use the hard bias, as the released code."""

    # ------------------------------------------------------------ bookkeeping
    eval_every: int = 5
    """Exact audit (C, DPE, IPE, SPE, Lambda, other notions) every this many iterations
    (and at the last one). Ours."""
    checkpoint_every: int = 10
    """Atomic checkpoint + resume state every this many iterations (and at the end): the
    lending trainer's (lending-1/2/3). The generic trainer writes its checkpoint once, at the
    end, and refuses any other value (:func:`causalfair.train.train`). Ours."""
    name: str = ""
    """Free-form run name stored in the checkpoint metadata."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form metadata stored with the run (not used by the trainer)."""

    def __post_init__(self) -> None:
        def bad(name: str, value: Any, fix: str) -> ConfigError:
            return ConfigError(f"{name}: bad value {short(value)}; {fix}.")

        _check_field_types(self, bad)
        if self.algo not in ALGORITHMS:
            raise bad("algo", self.algo, f"allowed values: {', '.join(ALGORITHMS)}"
                      + _ELSEWHERE.get(getattr(REGISTRY.get(self.algo), "trainer", ""), "")
                      + (f" ({self.algo!r} is {REGISTRY[self.algo].runs_as!r} with beta_c=0, "
                         "beta_lambda=0 and the thresholds as constraints=(...))"
                         if self.algo in REGISTRY and REGISTRY[self.algo].runs_as else ""))
        if self.setting not in SETTINGS:
            raise bad("setting", self.setting, f"allowed values: {', '.join(SETTINGS)}")
        if self.env not in ENVIRONMENTS:
            raise bad("env", self.env, f"allowed values: {', '.join(ENVIRONMENTS)}")
        if self.surrogate not in ("kl", "clip"):
            raise bad("surrogate", self.surrogate, "allowed values: kl, clip")
        if self.c_estimator not in ("paper", "anchored"):
            raise bad("c_estimator", self.c_estimator, "allowed values: paper, anchored")
        if self.gain_q not in ("return", "exact"):
            raise bad("gain_q", self.gain_q, "allowed values: return, exact")
        if self.encoding != "onehot":
            raise bad("encoding", self.encoding, "the lending trainer supports onehot")
        if self.appo_gap not in ("before", "after"):
            raise bad("appo_gap", self.appo_gap, "allowed values: before, after")
        if self.activation not in ("tanh", "relu"):
            raise bad("activation", self.activation, "allowed values: tanh, relu")
        if self.horizon is not None and (isinstance(self.horizon, bool)
                                         or not isinstance(self.horizon, int) or self.horizon < 1):
            raise bad("horizon", self.horizon, "must be an integer >= 1, or None for the "
                      "system's own horizon")
        for name in ("iterations", "n_individuals", "n_epochs", "n_minibatches",
                     "eval_every", "checkpoint_every", "pop_steps", "pop_max_steps", "threads",
                     "audit_n"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise bad(name, v, "must be an integer >= 1")
        if self.n_individuals < 2 * 2:
            raise bad("n_individuals", self.n_individuals, "needs at least 4 (both groups)")
        if self.n_minibatches > self.n_individuals:
            raise bad("n_minibatches", self.n_minibatches, "must be <= n_individuals")
        check_lr(self.lr, "lr", ConfigError)
        if not self.max_grad_norm > 0:  # <= 0 zeroes (0) or flips (< 0) every gradient
            raise bad("max_grad_norm", self.max_grad_norm, "must be a number > 0 (the largest "
                      "gradient norm an update keeps; 0 would zero every gradient and a "
                      "negative one flip it)")
        if not self.vf_coef >= 0:
            raise bad("vf_coef", self.vf_coef, "must be a number >= 0 (the value loss's "
                      "weight: a negative one maximises the value network's error)")
        for name in ("kl_target", "lambda_eps", "clip_range"):
            v = getattr(self, name)
            if name == "lambda_eps" and v is None:
                continue
            if not (isinstance(v, (int, float)) and v > 0):
                raise bad(name, v, "must be a number > 0")
        for name in ("beta_c", "beta_lambda", "beta_kl"):  # the spec's [retrain] betas' check
            check_weight(getattr(self, name), name, ConfigError)
        # the published methods' weights, and the entropy bonus's, by the same check: a
        # negative one rewards what it weighs against (elbert_alpha=-1 trained for bias)
        for name in ("ent_coef", "appo_beta0", "appo_beta1", "appo_beta2", "fppo_beta0",
                     "fppo_beta3", "fppo_beta4", "elbert_alpha"):
            check_weight(getattr(self, name), name, ConfigError)
        for name in ("appo_omega", "fppo_omega"):
            if not getattr(self, name) >= 0:
                raise bad(name, getattr(self, name), "must be a number >= 0 (a tolerance on a "
                          "gap, which is >= 0: a negative one is always exceeded)")
        if not self.elbert_beta > 0:
            raise bad("elbert_beta", self.elbert_beta, "must be a number > 0 (the soft bias's "
                      "temperature: a negative one swaps the soft max and min)")
        if not 0 <= self.massage_tau_s <= 0.5:
            raise bad("massage_tau_s", self.massage_tau_s, "must be in [0, 0.5] (F-PPO flips "
                      "actions whose probability is within [tau, 1 - tau])")
        if not 0 < self.massage_decay <= 1:
            raise bad("massage_decay", self.massage_decay, "must be in (0, 1] (tau shrinks "
                      "by it every iteration; above 1 tau grows past 0.5 and nothing flips)")
        if self.massage_start < 0:
            raise bad("massage_start", self.massage_start, "must be an integer >= 0 (the "
                      "iteration after which F-PPO massages)")
        for name in ("gamma", "gae_lambda"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 <= v <= 1):
                raise bad(name, v, "must be in [0, 1]")
        if not 0 < self.pop_mass <= 1:
            raise bad("pop_mass", self.pop_mass, "must be in (0, 1]")
        hidden = self.hidden
        if (isinstance(hidden, (str, bytes)) or not hasattr(hidden, "__iter__")
                or not all(isinstance(h, numbers.Integral) and not isinstance(h, bool) and h >= 1
                           for h in hidden)):
            raise bad("hidden", hidden, "must be a list of layer widths, integers >= 1, "
                      "e.g. [64, 64]")
        object.__setattr__(self, "hidden", tuple(int(h) for h in hidden))
        if isinstance(self.constraints, str):
            object.__setattr__(self, "constraints", (self.constraints,))
        object.__setattr__(self, "constraints", tuple(str(c) for c in self.constraints))
        if self.constraints:
            for text in self.constraints:
                try:
                    key = parse_constraint(text).key
                except Exception as exc:  # noqa: BLE001 - re-raised as a config error
                    raise ConfigError(f"constraints: {exc}") from None
                if not is_repair_key(key):
                    raise bad("constraints", text, f"the sampled trainer imposes "
                              f"{', '.join(PPO_LAG_KEYS)} (also key[A-B], max_key); {key!r} "
                              "is not among them")
            if self.algo not in names(generic=True):
                raise bad("algo", self.algo, "constraints are imposed by PPO-Lagrangian on "
                          f"top of one of {', '.join(names(generic=True))}")
        if not (isinstance(self.lagrange_lr, (int, float)) and self.lagrange_lr > 0):
            raise bad("lagrange_lr", self.lagrange_lr, "must be a number > 0")
        for name in ("pair", "start_pair"):
            _check_pair_shape(getattr(self, name), bad, name)
            if isinstance(getattr(self, name), (list, tuple)):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.start_pair is not None and self.pair is not None:
            raise bad("start_pair", self.start_pair, f"pair {self.pair!r} already fixes every "
                      "audit's and penalty's pair; leave start_pair out")
        if self.audit_bins is not None and self.audit_bins < 1:
            raise bad("audit_bins", self.audit_bins, "must be an integer >= 1, or None for 4")
        if self.audit_alpha is not None and not 0 < self.audit_alpha < 1:
            raise bad("audit_alpha", self.audit_alpha, "must be a number in (0, 1), e.g. 0.05 "
                      "for 95% intervals, or None for 0.05")
        if not isinstance(self.system, str) or not isinstance(self.system_params, dict):
            raise bad("system", self.system, "give a system id string and a params dict")

        # its rollouts' unit-steps, against the Monte Carlo work limit (about a day of one
        # core's simulation; training costs far more a step): `--iterations 1e11` ran,
        # its progress line saying 4e10 s left (the system's own horizon: at least 1 step)
        steps = self.pop_steps if self.env == "population" else (self.horizon or 1)
        check_work(self.iterations * self.n_individuals * steps,
                   f"training of {self.iterations} iterations x {self.n_individuals} "
                   + (f"environments x {steps} steps" if self.env == "population" else
                      f"individuals x {self.horizon} epochs" if self.horizon else
                      "individuals x the system's horizon (counted as 1)"),
                   "lower iterations (--iterations) or n_individuals")
        if self.horizon is not None:
            check_memory(8.0 * self.horizon * self.n_individuals * (sum(self.hidden) + 64),
                         f"training over {self.horizon} epochs x {self.n_individuals} individuals",
                         "use a shorter horizon or fewer individuals")

    def to_dict(self, *, lending: bool = True) -> dict[str, Any]:
        """The fields as JSON stores them; ``lending=False`` leaves out
        :data:`LENDING_FIELDS` (a run on another system records only what applies)."""
        d = dataclasses.asdict(self)
        if not lending:
            for name in LENDING_FIELDS:
                del d[name]
        d["hidden"] = list(self.hidden)
        d["constraints"] = list(self.constraints)  # as JSON stores it
        for name in ("pair", "start_pair"):
            if isinstance(d[name], tuple):
                d[name] = list(d[name])
        for name in UNRECORDED_NONE:  # configs written before them keep their bytes
            if d[name] is None:
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ConfigError(f"config: unknown fields {unknown}; allowed: {sorted(names)}.")
        kw = dict(d)
        if "hidden" in kw:
            kw["hidden"] = tuple(kw["hidden"])
        return cls(**kw)

    def replace(self, **changes: Any) -> TrainConfig:
        return dataclasses.replace(self, **changes)
