"""What the robots' fits share: window-clustered (sandwich) intervals and mujoco.sysid's HTML report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class Estimate:
    """One parameter of a fit."""

    value: float
    nominal: float
    below: float  # the 95% confidence interval is [value - below, value + above]; inf when the logs cannot tell
    above: float
    fitted: bool = True
    how: str = "least squares (mujoco.sysid)"

    @property
    def interval(self) -> tuple[float, float]:
        return (self.value - self.below, self.value + self.above)


@dataclass
class FitResult:
    """What a robot's fit found; write_fit_files writes it."""

    estimates: dict[str, Estimate]
    cost_nominal: float
    cost_fitted: float
    windows: int
    trace: list[float] = field(default_factory=list)  # optimizer objective (at the chosen latency, Crazyflie)
    candidates: list[np.ndarray] = field(default_factory=list)  # and its iterates
    covariance: np.ndarray | None = None
    parameter_dicts: tuple = ()  # (initial, optimized) mujoco.sysid ParameterDicts, for its report


def clustered_half_widths(r: np.ndarray, jac: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """95% half widths from the window-clustered (sandwich) covariance. calculate_intervals takes residuals as
    independent; along a window they are not (an error at its start carries through it), which makes its
    intervals too narrow. Windows are nearly independent of each other: (J'J)^-1 (sum_w J_w' r_w r_w' J_w) (J'J)^-1."""
    from scipy import stats

    jtj_inv = np.linalg.pinv(jac.T @ jac)
    p = jac.shape[1]
    meat = np.zeros((p, p))
    for w in np.unique(clusters):
        rows = clusters == w
        g = jac[rows].T @ r[rows]
        meat += np.outer(g, g)
    n_w = len(np.unique(clusters))
    cov = jtj_inv @ meat @ jtj_inv * n_w / max(1, n_w - p)
    return np.sqrt(np.maximum(np.diag(cov), 0.0)) * stats.t.ppf(0.975, max(1, n_w - p))


def write_report(
    title: str,
    path: Path,
    initial,
    opt,
    covariance: np.ndarray | None,
    trace: Sequence[float],
    names: Sequence[str],
    candidates: Sequence[np.ndarray] = (),
) -> None:
    """mujoco.sysid's report (parameter table, covariance, optimizer trace) of a fit, as HTML."""
    from mujoco.sysid.report.builder import ReportBuilder
    from mujoco.sysid.report.sections.covariance import Covariance
    from mujoco.sysid.report.sections.optimization_trace import OptimizationTrace
    from mujoco.sysid.report.sections.parameters import ParametersTable

    rb = ReportBuilder(title)
    rb.add_section(ParametersTable("Parameters", opt, initial, anchor="parameters"))
    if covariance is not None and covariance.size:
        rb.add_section(Covariance("Covariance", covariance, opt, anchor="covariance"))
    if len(trace) > 1:
        rb.add_section(
            OptimizationTrace(
                "Optimization trace",
                list(trace),
                list(candidates),
                bounds=opt.get_bounds(),
                param_names=list(names),
                anchor="trace",
            )
        )
    rb.save(str(path))


def write_fit_files(
    result, out_dir: Path, robot: str, logs: Sequence[str], horizon_s: float, title: str, names: Sequence[str], **extra
) -> Path:
    """out_dir/sysid.yaml (what task.params.sysid= reads: robot, logs, each parameter's value, 95% interval,
    nominal and how it was found; extra keys after those) and out_dir/report.html, mujoco.sysid's report.
    result: a robot's fit result (estimates, windows, costs, parameter_dicts, covariance, trace, candidates)."""
    import yaml

    out_dir.mkdir(parents=True, exist_ok=True)
    doc = {
        "robot": robot,
        "logs": list(logs),
        "windows": result.windows,
        "horizon_s": horizon_s,
        "cost": {"nominal": float(result.cost_nominal), "fitted": float(result.cost_fitted)},
        "parameters": {
            name: {
                "value": float(e.value),
                "interval": [float(e.interval[0]), float(e.interval[1])],
                "nominal": float(e.nominal),
                "fitted": e.fitted,
                "how": e.how,
            }
            for name, e in result.estimates.items()
        },
        **extra,
    }
    path = out_dir / "sysid.yaml"
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
    tmp.replace(path)
    initial, opt = result.parameter_dicts
    write_report(
        title, out_dir / "report.html", initial, opt, result.covariance, result.trace, names, result.candidates
    )
    return path
