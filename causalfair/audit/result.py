"""The result of an audit: :class:`AuditResult` (pandas tables, JSON, text summary) and
the provenance it records."""

from __future__ import annotations

import html
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from causalfair._io import AUDIT_SCHEMA_VERSION, fixed
from causalfair._io import to_jsonable as _json_safe
from causalfair._texttable import cell_columns, cell_word
from causalfair._usercode import module_file, module_reads
from causalfair._validation import check_keywords
from causalfair._version import __version__
from causalfair.audit.spec import AuditSpec
from causalfair.engines.attribution import Attribution, attribute_exact, attribute_mc
from causalfair.errors import CausalfairError, InputError
from causalfair.policies.checkpoint import file_sha256
from causalfair.report.explain import sentences
from causalfair.report.figures import THUMBNAIL_DPI, headline_figure
from causalfair.report.render import (
    FIGURES,
    figure_png_base64,
    logs_label,
    make_figures,
    write_report,
)
from causalfair.systems import registry
from causalfair.systems.gym.door import registered_module
from causalfair.thresholds import FAIL, INCONCLUSIVE, PASS, Verdict, overall_verdict

__all__ = ["AuditResult", "AUDIT_SCHEMA_VERSION", "provenance", "compare",
           "attribution", "read_inputs"]


@dataclass(eq=False)
class AuditResult:
    """Everything an audit produced. Tables are pandas DataFrames, figures matplotlib
    Figures (built on first use). ``str(result)`` is a text summary; in Jupyter the
    result renders as HTML."""

    spec: AuditSpec
    decomposition: Any  # causalfair.results.Decomposition
    benefit: Any  # causalfair.results.BenefitResult
    notions: dict[str, Any]
    quantities: dict[str, tuple[float, float, float, float | None]]  # est, lo, hi, se
    verdicts: list[Verdict]
    model: Any = None  # TabularModel (None for log audits without one)
    policy: Any = None
    policy_table: np.ndarray | None = None
    mu_pi: np.ndarray | None = None  # (T+1, G, K)
    mu_0: np.ndarray | None = None
    checkpoint_sha256: str | None = None
    checkpoint_meta: dict[str, Any] | None = None
    system: Any = None  # causalfair.systems.System (None for log audits)
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    attribution: Any = None  # causalfair.engines.attribution.Attribution against the baseline
    #: Selection rates per group and step (share given each non-baseline action, with the
    #: counts behind them where individuals were observed); None where not computed.
    selection: dict[str, Any] | None = None
    #: Every group against the reference and every pair (causalfair.engines.groups), with
    #: more than two groups, a reference named or thresholds over groups; else None.
    group_comparison: Any = None
    #: Every file the audit read besides its checkpoints, hashed when the result is made
    #: (:func:`read_inputs`; audit.json ``inputs``).
    inputs: list[dict[str, Any]] | None = None
    #: When the audit ran, UTC, ISO 8601 to the second (audit.json ``provenance.date``).
    date: str | None = None
    #: audit.json's ``provenance`` as recorded by an earlier run of this audit (a
    #: reproduction renders the report of the machine that audited); None: this process's.
    recorded_provenance: dict[str, Any] | None = field(default=None, repr=False)
    _figures: dict[str, Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.inputs is None:
            self.inputs = read_inputs(self.spec)
        if self.date is None:
            import datetime as dt

            self.date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def overall(self) -> str:
        return overall_verdict([v.status for v in self.verdicts])

    @property
    def passed(self) -> bool:
        return self.overall == PASS

    @property
    def name(self) -> str:
        return self.spec.name

    # ----------------------------------------------------------------- tables
    def verdicts_frame(self) -> Any:
        """One row per threshold (index ``key``): threshold, estimate, ci_lower, ci_upper
        (the interval the verdict read, as every other frame names it), status, and the
        pair of groups it judged when a verdict names one."""
        import pandas as pd

        pair = ["pair"] if any(v.pair for v in self.verdicts) else []  # groups compared
        return pd.DataFrame(
            [v.to_dict() for v in self.verdicts],
            columns=["key", "threshold", "estimate", "lower", "upper", "status", *pair],
        ).set_index("key").rename(columns={"lower": "ci_lower", "upper": "ci_upper"})

    def quantities_frame(self) -> Any:
        """The reported metrics: estimate, se, ci_lower, ci_upper, as
        :meth:`~causalfair.results.Decomposition.to_frame` has them: a point of an exact
        audit has se 0; a value computed exactly inside a Monte Carlo or log audit (Lambda
        from the tabular model, a plug-in value) has no interval, se and bounds NaN (the
        report's ``n/a``, not a zero-width interval); an interval without a standard error
        has se NaN."""
        import pandas as pd

        nan = float("nan")
        exact = self.decomposition.engine == "exact"

        def row(e: float, lo: float, hi: float, s: float | None) -> dict[str, float]:
            if s is not None:
                return {"estimate": e, "se": float(s), "ci_lower": lo, "ci_upper": hi}
            if lo == hi == e:  # computed exactly: a point of an exact audit, else n/a
                return {"estimate": e, "se": 0.0 if exact else nan,
                        "ci_lower": lo if exact else nan, "ci_upper": hi if exact else nan}
            return {"estimate": e, "se": nan, "ci_lower": lo, "ci_upper": hi}

        rows = {k: row(e, lo, hi, s)
                for k, (e, lo, hi, s) in self.quantities.items() if k in self.spec.metrics}
        df = pd.DataFrame.from_dict(rows, orient="index",
                                    columns=["estimate", "se", "ci_lower", "ci_upper"])
        df.index.name = "quantity"
        return df

    def _metrics_html(self) -> str:
        """The metrics table of the notebook view: one number per metric when every one
        is exact (a point), as the decomposition's own view."""
        q = self.quantities_frame()
        if len(q) and (q["se"] == 0).all() and (q["ci_lower"] == q["ci_upper"]).all():
            q = q[["estimate"]].rename(columns={"estimate": "value"})
        return q.to_html(float_format=fixed, na_rep="-")

    def to_frame(self) -> Any:
        """:meth:`quantities_frame`, under the name every other result gives its table
        (estimate, se, ci_lower, ci_upper per quantity)."""
        return self.quantities_frame()

    def decomposition_frame(self) -> Any:
        return self.decomposition.to_frame(self.spec.alpha)

    def groups_frame(self) -> Any:
        return self.decomposition.groups_frame()

    def steps_frame(self) -> Any:
        return self.decomposition.steps_frame()

    @check_keywords(name="AuditResult.worst_pairs")
    def worst_pairs(self, n: int | None = None) -> Any:
        if self.benefit is None:
            import pandas as pd

            return pd.DataFrame()
        return self.benefit.worst_pairs(self.spec.worst if n is None else n)

    # ------------------------------------------- fairlearn's MetricFrame vocabulary
    @property
    def by_group(self) -> Any:
        """Per-group values (one row per group): see ``Decomposition.by_group``. (The
        population's values are ``result.decomposition.overall``: ``result.overall`` is
        the verdict.)"""
        return self.decomposition.by_group

    @check_keywords(name="AuditResult.difference")
    def difference(self, method: str = "between_groups") -> Any:
        """Differences between groups per column of :attr:`by_group`: see
        ``Decomposition.difference`` (``"pair"`` gives C, DPE, IPE, SPE)."""
        return self.decomposition.difference(method)

    def notions_frame(self) -> Any:
        """Other notions (TPR gap, ELBERT bias, W1, DP gap, utility), one row each. A Monte
        Carlo audit of a system with a tabular model computes them on the model, exactly:
        its row ``utility (exact model)`` then differs from the Monte Carlo ``utility`` of
        :meth:`quantities_frame` by sampling error."""
        import pandas as pd

        flat = {k: v for k, v in self.notions.items() if isinstance(v, (int, float)) or v is None}
        if self.decomposition.engine != "exact" and "exact" in (self.extra or {}) \
                and "utility" in flat:
            flat["utility (exact model)"] = flat.pop("utility")
        return pd.Series(flat, name="value", dtype=float).to_frame()

    # ----------------------------------------------------------------- figures
    def figures(self) -> dict[str, Any]:
        """The report's figures, name -> matplotlib Figure (built once, then cached; a new
        dict each call, so that removing a figure from it leaves the result's)."""
        if self._figures is None:
            self._figures = make_figures(self)
        return dict(self._figures)

    @check_keywords(name="AuditResult.write_report")
    def write_report(self, out: str | os.PathLike[str], *,
                     before: AuditResult | None = None) -> Path:
        """Write report.html, report.md, audit.json and the PNGs to the folder ``out``,
        atomically (see :func:`causalfair.report.render.write_report`). Returns the folder."""
        return write_report(self, out, before=before)

    # ----------------------------------------------------------------- serialisation
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe content: spec, verdicts, estimates, decomposition, benefit, notions,
        provenance."""
        spec = self.spec
        return {
            "schema_version": AUDIT_SCHEMA_VERSION,
            "name": spec.name,
            "overall": self.overall,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "quantities": {k: {"estimate": e, "ci_lower": lo, "ci_upper": hi, "se": s}
                           for k, (e, lo, hi, s) in self.quantities.items()},
            "spec": _spec_dict(spec, self.benefit),
            "policy": {
                "label": policy_label(spec),
                "checkpoint": display_path(spec.checkpoint),
                "checkpoint_sha256": self.checkpoint_sha256,
                "checkpoint_metadata": (self.checkpoint_meta or {}).get("metadata"),
            },
            "decomposition": self.decomposition.to_dict(),
            "benefit": (_json_safe(self.benefit.to_dict(n_worst=spec.worst))
                        if self.benefit is not None else None),
            "notions": _json_safe(self.notions),
            **({"attribution": _json_safe(self.attribution.to_dict())}
               if self.attribution is not None else {}),
            "seeds": {"engine": spec.seed if spec.engine == "mc" else None,
                      "logs_bootstrap": spec.logs_seed if spec.source == "logs" else None,
                      "retrain": (spec.retrain or {}).get("seed")},
            **({"inputs": list(self.inputs)} if self.inputs else {}),
            "seconds": self.seconds,
            "provenance": (dict(self.recorded_provenance) if self.recorded_provenance is not None
                           else {**provenance(), **({"date": self.date} if self.date else {})}),
            **({"system": self.system.to_dict()} if self.system is not None else {}),
            **({"selection": _json_safe(self.selection)} if self.selection is not None else {}),
            **(_json_safe(self._groups_dict()) if self.group_comparison is not None else {}),
            **({"extra": _json_safe(self.extra)} if self.extra else {}),
        }

    def _groups_dict(self) -> dict[str, Any]:
        """audit.json's ``groups`` and ``pairs``; ``pairs`` says which pair was compared and
        how it was chosen (``compared``, ``compared_by``: the keys ``decompose --json``
        gives, with two groups too), and for a pair chosen from the data the
        ``simultaneous`` intervals of its row (:meth:`GroupComparison.to_dict
        <causalfair.engines.groups.GroupComparison.to_dict>`)."""
        gc = self.group_comparison
        out = gc.to_dict()
        said = gc.pairs_dict(self.decomposition.pair, named=self.spec.pair is not None)
        out["pairs"].update({k: said[k] for k in ("compared", "compared_by")})
        return out

    def summary(self) -> str:
        spec = self.spec
        lines = [
            f"Audit {spec.name}: {self.overall}",
            f"  source: {spec.system_label if spec.source == 'model' else logs_label(spec)}   policy: "
            f"{spec.policy_label if spec.source == 'model' else policy_label(spec, short=True)}   "
            f"T = {self.decomposition.horizon}   engine: {spec.engine}",
        ]
        if self.checkpoint_sha256:
            lines.append(f"  checkpoint sha256: {self.checkpoint_sha256}")
        lines.append("")
        for v in self.verdicts:
            lines.append(f"  [{v.status:<12}] {v.message(fixed_decimals=True)}")
        if not self.verdicts:
            lines.append("  (no thresholds: nothing to judge)")
        lines.append("")
        for k in spec.metrics:
            if k in self.quantities:
                e, lo, hi, s = self.quantities[k]
                ci = (f"   {100 * (1 - spec.alpha):g}% CI [{fixed(lo, sign=True)}, "
                      f"{fixed(hi, sign=True)}]" if s is not None else "")
                lines.append(f"  {k:<12} {fixed(e, sign=True)}{ci}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"AuditResult(name={self.spec.name!r}, overall={self.overall!r})"

    def _repr_html_(self) -> str:
        colour = {PASS: "#1a7f37", FAIL: "#cf222e", INCONCLUSIVE: "#9a6700"}[self.overall]
        said = [s.text for s in sentences(self.to_dict())]
        worst = None if self.benefit is None else self.benefit.worst_pairs_table(self.spec.worst)
        if worst is not None:  # its cells named as the report names them
            worst.columns = cell_columns(worst.columns, cell_word(self.system))
        parts = [
            f"<div><h3>Audit {html.escape(self.spec.name)}: "
            f"<span style='color:{colour}'>{self.overall}</span></h3>",
            f"<p><strong>{html.escape(said[0])}</strong></p><ul>"
            + "".join(f"<li>{html.escape(t)}</li>" for t in said[1:]) + "</ul>",
            self.verdicts_frame().to_html(float_format=fixed) if self.verdicts
            else "<p>No thresholds.</p>",
            "<h4>Metrics</h4>",
            self._metrics_html(),
            "<h4>Worst benefit pairs</h4>",
            (worst.to_html(index=False) if worst is not None
             else "<p>Benefit fairness not computed.</p>"),
            f"<img alt='waterfall' src='data:image/png;base64,"
            f"{figure_png_base64(headline_figure(self), THUMBNAIL_DPI)}'/>",
            "<p style='font-size:0.85em;color:#57606a'>The other figures ("
            + ", ".join(n for n, _, _ in FIGURES if n != "waterfall")
            + "): <code>result.figures()[NAME]</code>, or the full report with "
              "<code>result.write_report(DIR)</code>.</p>",
        ]
        parts.append("</div>")
        return "\n".join(parts)


def check_row_names(names: Any, n: int) -> None:
    """:func:`compare`'s ``names``: a list or tuple of ``n`` distinct non-empty strings (a
    string is refused, not read as its characters), else an InputError naming them."""
    if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple)):
        raise InputError(f"compare: names: expected a list of names, one per audit, got "
                         f"{type(names).__name__} {str(names)[:40]!r}; e.g. names=[\"before\", "
                         "\"after\"].")
    if len(names) != n:
        raise InputError(f"compare: names: {len(names)} names for {n} audits; "
                         "give one name per audit, in order, or leave names out.")
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"compare: names: bad name {str(name)[:40]!r}; each name is "
                             "non-empty text (the table's row label).")
    if len(set(names)) != n:
        twice = next(x for x in names if names.count(x) > 1)
        raise InputError(f"compare: names: {twice!r} names two audits; give each audit its "
                         "own name (the table's rows are looked up by it).")


def policy_label(spec: AuditSpec, *, short: bool = False) -> str:
    """The policy an audit of ``spec`` audited, as audit.json's ``policy.label`` (and the
    report) names it; ``short``: as :meth:`AuditResult.summary` does. A log audit's
    candidate ``[policy]`` is named, on the model fitted from the log."""
    if spec.source == "model":
        return spec.policy_label
    if spec.logs_candidate:
        return f"{spec.policy_label} (candidate, on the model fitted from logs {spec.logs_path.name})"
    return "from logs" if short else f"logs {logs_label(spec)}"


def display_path(p: str | os.PathLike[str] | None) -> str | None:
    """A path relative to the working directory when it lies below it, else absolute."""
    if p is None:
        return None
    p = Path(p).resolve()
    try:
        return str(p.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def _spec_dict(spec: AuditSpec, benefit: Any = None) -> dict[str, Any]:
    """The spec as parsed and as resolved (Lambda's eps: the number the audit used when
    the spec left it to the system or to "auto"; ``benefit/eps_source`` says which)."""
    return _json_safe({
        "file": display_path(spec.path),
        "parsed": dict(spec.raw),
        "resolved": resolved_spec(spec, benefit),
    })


def resolved_spec(spec: AuditSpec, benefit: Any = None) -> dict[str, Any]:
    """audit.json's ``spec.resolved``: the spec as the audit used it (after defaults, and
    after the ``system=`` / ``policy=`` a Python caller passed to ``cf.audit``)."""
    eps = spec.eps if spec.eps is not None or benefit is None else benefit.eps
    return _json_safe({
        "name": spec.name, "horizon": spec.horizon, "setting": spec.setting,
        "levels": spec.levels, "interest": spec.interest,
        "system": spec.system_label if spec.source == "model" else None,
        "system_params": dict(spec.system_params),
        "policy_factory": spec.policy_factory, "policy_params": dict(spec.policy_params),
        "logs": display_path(spec.logs_path), "logs_options": dict(spec.logs_options),
        "builtin": spec.builtin, "checkpoint": display_path(spec.checkpoint),
        "engine": spec.engine, "n": spec.n, "seed": spec.seed, "alpha": spec.alpha,
        "eps": eps, "weights": spec.weights, "metrics": list(spec.metrics),
        "thresholds": dict(spec.thresholds), "retrain": dict(spec.retrain or {}),
    })


def read_inputs(spec: AuditSpec) -> list[dict[str, Any]]:
    """Every file the audit of ``spec`` reads besides its checkpoints (pinned in
    ``policy.checkpoint_sha256`` and ``extra.baseline``), as audit.json's ``inputs``
    records them, one entry per role: ``{"role", "path", "sha256"}`` (the path in the
    display form of :func:`display_path`), with ``"module"`` for a factory's module; a
    module an installed package provides is ``{"role", "module", "package", "version"}``,
    and causalfair's own modules are left out (``provenance.causalfair`` pins them).
    Roles: ``system.factory`` (``[system] factory``, or the module of a registered
    system), ``system.gym`` (the module of ``[system] gym = "module:callable"`` or
    ``"module:Id-v0"``), ``system.tabular``, ``policy.factory``, ``policy.vecnormalize``,
    ``baseline.vecnormalize`` and ``logs``. After a factory's module, ``ROLE.read``: each
    file of the user's that the module read while it was imported or a factory of it ran
    in this process (:func:`causalfair._usercode.module_reads`: a model file, data, a
    sibling module), with ``module`` and its path relative to the spec's folder
    (:func:`read_path`)."""
    out: list[dict[str, Any]] = []

    def add_file(role: str, p: Any) -> None:
        if isinstance(p, Path):
            out.append({"role": role, "path": display_path(p), "sha256": file_sha256(p)})

    def add_module(role: str, ref: Any) -> None:
        if isinstance(ref, str) and ":" in ref:
            name = ref.partition(":")[0]
            entry = module_input(name, spec.base_dir)
            if entry is None:
                return
            out.append({"role": role, **entry})
            file = module_file(name, spec.base_dir) if "path" in entry else None
            for read in module_reads(file) if file is not None else ():
                out.append({"role": f"{role}.read", "module": name,
                            "path": read_path(read, spec.base_dir), "sha256": file_sha256(read)})

    if spec.source == "logs":
        add_file("logs", spec.logs_path)
        if spec.policy_factory is not None:  # a candidate [policy] (its checkpoint: pinned
            add_module("policy.factory", spec.policy_factory)  # in policy.checkpoint_sha256)
        add_file("policy.vecnormalize", spec.policy_vecnormalize)
        return out
    add_file("system.tabular", spec.system_tabular)
    sid = spec.system_id if spec.system_tabular is None else None
    if sid == "gym":
        env = spec.system_params.get("env")
        if isinstance(env, str) and ":" not in env:  # a bare registered id: the module of
            module = registered_module(env)  # its entry point (gymnasium's own: its version
            env = (f"{module}:{env}" if module and module.split(".")[0] != "gymnasium"
                   else None)  # is in provenance)
        add_module("system.gym", env)
    elif sid is not None and (":" not in sid or sid in registry.registered()):
        try:  # a registered id, or an installed package's entry point
            ep = registry.spec(sid).entry_point
        except CausalfairError:  # a system passed in, under an id of its own
            ep = None
        add_module("system.factory", ep if isinstance(ep, str)
                   else f"{getattr(ep, '__module__', '')}:" if ep is not None else None)
    elif sid is not None and sid.count(":") == 1:  # [system] factory = "module:callable"
        add_module("system.factory", sid)
    if spec.policy_factory is not None:
        add_module("policy.factory", spec.policy_factory)
    add_file("policy.vecnormalize", spec.policy_vecnormalize)
    add_file("baseline.vecnormalize", spec.baseline_vecnormalize)
    return out


def read_path(p: Path, base_dir: Path | None) -> str:
    """How ``inputs`` names a file a factory read: relative to the spec's folder
    (``base_dir``, default the working directory) when it lies below it, else absolute
    (``audit --reproduce`` resolves it against the reproduced spec's folder)."""
    base = Path(base_dir if base_dir is not None else Path.cwd()).resolve()
    try:
        return Path(p).resolve().relative_to(base).as_posix()
    except ValueError:
        return str(Path(p).resolve())


def module_input(name: str, search_path: Path | None) -> dict[str, Any] | None:
    """How ``inputs`` pins the module ``name`` a factory lives in: ``{"module", "path",
    "sha256"}`` of its file (looked up as the audit imports it: in ``search_path``
    first), or ``{"module", "package", "version"}`` when an installed package provides it
    (its file lies in site-packages); None for causalfair's own modules and for a module
    that cannot be found."""
    if not name or name.split(".")[0] == "causalfair":
        return None
    file = module_file(name, search_path)
    if file is None:
        return None
    package = _installed_package(name.split(".")[0], file)
    if package is not None:
        return {"module": name, "package": package[0], "version": package[1]}
    return {"module": name, "path": display_path(file), "sha256": file_sha256(file)}


def _installed_package(top: str, file: Path) -> tuple[str, str | None] | None:
    """(distribution, version) of the installed package whose file ``file`` (of the
    top-level module ``top``) is, when it lies in a site-packages folder; else None."""
    import site
    import sysconfig
    from importlib import metadata

    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    roots |= {*getattr(site, "getsitepackages", list)(), site.getusersitepackages()}
    where = file.resolve()
    if not any(where.is_relative_to(Path(r).resolve()) for r in roots if r):
        return None
    dists = metadata.packages_distributions().get(top) or [top]
    try:
        return dists[0], metadata.version(dists[0])
    except metadata.PackageNotFoundError:
        return dists[0], None


_PROVENANCE_PACKAGES = ("numpy", "pandas", "scipy", "networkx", "matplotlib", "torch",
                        "statsmodels", "gymnasium", "dowhy")


def provenance() -> dict[str, Any]:
    """Python, platform, causalfair and dependency versions (from package metadata,
    without importing the packages). audit.json's ``provenance`` adds the result's
    ``date``."""
    import platform
    from importlib import metadata

    deps = {}
    for pkg in _PROVENANCE_PACKAGES:
        try:
            deps[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            deps[pkg] = None
    return {"causalfair": __version__, "python": sys.version.split()[0],
            "platform": platform.platform(), "dependencies": deps, "kernels": kernels()}


def kernels() -> dict[str, str]:
    """The CPU kernels that round the audit's float products (docs/limits.md,
    "Reproducibility": the numbers are bit-identical on the same kernels, and differ in
    their last bits on others): ``blas``, the BLAS numpy calls as "api version
    core-type" (the core type is what ``OPENBLAS_CORETYPE`` pins), and
    ``torch_cpu_capability`` (what ``ATEN_CPU_CAPABILITY`` pins) when torch is loaded;
    without threadpoolctl, no ``blas``."""
    out: dict[str, str] = {}
    try:
        from threadpoolctl import threadpool_info  # scikit-learn's (dowhy's dependency)
    except ImportError:  # not installed: the BLAS kernel is not recorded
        threadpool_info = list
    blas = sorted((i for i in threadpool_info() if i.get("user_api") == "blas"),
                  key=lambda i: "numpy" not in str(i.get("filepath")))  # numpy's first
    if blas:
        out["blas"] = " ".join(str(blas[0].get(k)) for k in ("internal_api", "version",
                                                           "architecture"))
    if "torch" in sys.modules:
        out["torch_cpu_capability"] = str(sys.modules["torch"].backends.cpu.get_cpu_capability())
    return out



@check_keywords
def attribution(before: AuditResult, after: AuditResult) -> Attribution:
    """Why C moved from the policy of ``before`` to that of ``after``, two audits of the
    same system and horizon (:mod:`causalfair.engines.attribution`): by path, step and
    cell, exactly on a tabular model, else by a paired Monte Carlo run with the second
    audit's n and seed."""
    for i, r in enumerate((before, after), 1):
        if not isinstance(r, AuditResult):
            raise InputError(
                f"attribution: argument {i} ({('before', 'after')[i - 1]}) is a "
                f"{type(r).__name__}; attribution takes two audits (cf.audit(spec, "
                "policy=...) results); for two policies on a system without a spec: "
                "cf.attribute(system, policy, baseline).")
    for r in (before, after):
        if r.system is None or r.policy is None:
            raise InputError(f"attribution: audit {r.name!r} has no system and policy (an "
                             "audit from logs); attribution compares two policies on a system.")
    sa, sb = before.system, after.system
    T = after.decomposition.horizon
    if (sa.id, dict(sa.params), before.decomposition.horizon) != (sb.id, dict(sb.params), T):
        raise InputError(f"attribution: the audits {before.name!r} and {after.name!r} differ in "
                         "system, parameters or horizon; attribution compares two policies on "
                         "the same system.")
    names = dict(policy_name=after.decomposition.policy_name,
                 baseline_name=before.decomposition.policy_name)
    if after.model is not None and after.policy_table is not None \
            and before.policy_table is not None:
        return attribute_exact(after.model, after.policy_table, before.policy_table, T,
                               gamma=after.decomposition.gamma, pair=after.decomposition.pair,
                               **names)
    return attribute_mc(sb, after.policy, before.policy, T, n=after.spec.n,
                        seed=after.spec.seed, alpha=after.spec.alpha,
                        pair=after.decomposition.pair, **names)


@check_keywords
def compare(*results: AuditResult, names: Sequence[str] | None = None) -> Any:
    """Side-by-side table of several audits: one row per audit (index ``audit``: ``names``,
    else each audit's policy when they share a name, else its name), one column per metric
    (float64), then one per verdict (``verdict <label>``: PASS, FAIL or INCONCLUSIVE) and
    ``overall``; with more than two groups a first column ``pair`` names the groups C, DPE,
    IPE, SPE and Lambda compare in each audit (by default each audit's own worst pair).
    Two audits of policies on the same system also get the attribution of the change
    from the first to the second (:func:`attribution`) in ``table.attrs["attribution"]``.
    Takes :func:`causalfair.audit.audit` results only; a decomposition or another result
    is refused naming the fix."""
    import pandas as pd

    for i, r in enumerate(results, 1):
        if not isinstance(r, AuditResult):
            raise InputError(
                f"compare: argument {i} is a {type(r).__name__}; compare takes audits "
                "(cf.audit(spec, policy=...) results, with verdicts). For decompositions "
                "side by side: pd.concat({'a': dec_a.to_frame(), 'b': dec_b.to_frame()}, "
                "axis=1); for why C moved between two policies: cf.attribute(system, "
                "policy, baseline).")
    if not results:
        raise InputError("compare: no audit given; pass the results of cf.audit(...), e.g. "
                         "compare(before, after, names=[\"before\", \"after\"]).")
    if names is not None:
        check_row_names(names, len(results))
    rows, index = [], []
    many = any(len(r.decomposition.groups) > 2 for r in results)  # C's pair may differ
    for i, r in enumerate(results):
        index.append(names[i] if names else (
            r.decomposition.policy_name if len({x.name for x in results}) == 1 else r.name))
        data: dict[str, Any] = {}
        if many:
            a, b = r.decomposition.pair
            data["pair"] = f"{r.decomposition.groups[a]}-{r.decomposition.groups[b]}"
        data.update({k: np.nan if e is None else float(e)
                     for k, (e, _, _, _) in r.quantities.items()})
        for v in r.verdicts:
            data[f"verdict {v.label}"] = v.status
        data["overall"] = r.overall
        rows.append(data)
    table = pd.DataFrame(rows, index=pd.Index(index, name="audit"))
    text = [k for k in table.columns if k in ("pair", "overall") or k.startswith("verdict ")]
    # the metrics as float64 columns (a metric one audit lacks: NaN), the text as text
    table = table.astype({k: float for k in table.columns if k not in text})
    if len(results) == 2 and all(r.system is not None and r.policy is not None
                                 for r in results):
        try:
            table.attrs["attribution"] = attribution(*results)
        except InputError:  # different systems: a table, no attribution
            pass
    return table


