"""Fit the simulated Crazyflie to flight logs with mujoco.sysid: thrust coefficient, inertia, motor time
constant and command latency, with confidence intervals.

The residual is open-loop prediction error: from window starts along each log, the simulator flies the logged
commands from the logged state (sim.crazyflie_replay) and its positions, velocities and body rates are compared
with the log's over the window. mujoco.sysid's Parameter/ParameterDict hold values and bounds, its optimizer
(mujoco.minimize's least squares, the residual evaluated for all finite-difference columns in one batch of
worlds) fits them, and calculate_intervals gives the intervals from the Jacobian at the optimum.

Mass is not fitted: kinematics alone fix only thrust/mass and thrust/inertia, so the weighed mass (mass_kg=,
the model's 27 g by default) anchors the others. Latency moves in whole 2 ms substeps, which a gradient cannot
see: it is searched over them, the continuous parameters fitted at each (a scan at a first fit, then a local
search with refits), and its interval is the set of latencies a profile test cannot rule out. The other
parameters' intervals are the union of their intervals at those latencies, each the wider of calculate_intervals'
and a window-clustered (sandwich) one: along a window residuals are not independent.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robot_rl.sim2real.fit_common import Estimate, FitResult, clustered_half_widths
from robot_rl.sim2real.flight_log import FlightLog
from sim.crazyflie_replay import CrazyflieReplay
from sim.tasks.crazyflie.physical import MAX_LATENCY_SUBSTEPS, SUBSTEP_S, CrazyflieParams

FITTED = ("thrust_scale", "inertia_scale", "motor_tau_s")
BOUNDS = {"thrust_scale": (0.5, 1.5), "inertia_scale": (0.4, 2.5), "motor_tau_s": (0.01, 0.25)}
# residual units: a prediction error of this size counts 1 (about the sensing noise of a mocap-tracked drone)
SIGNAL_SCALE = {"position": 0.005, "velocity": 0.02, "angular_velocity": 0.2}
MIN_HEIGHT_M = 0.1  # windows start airborne: ground contact is not what is being fitted


@dataclass
class SysidOptions:
    horizon_s: float = 0.5
    stride_s: float = 0.5  # = horizon: windows do not overlap, so their errors are nearly independent
    mass_kg: float = CrazyflieParams().mass_kg
    max_iters: int = 30
    latency_range_s: tuple[float, float] = (0.0, MAX_LATENCY_SUBSTEPS * SUBSTEP_S)


@dataclass
class SysidResult(FitResult):
    latency_costs: dict[float, float] = field(default_factory=dict)  # latency_s -> fitted cost, the search's

    def params(self) -> CrazyflieParams:
        return CrazyflieParams(**{k: e.value for k, e in self.estimates.items()})


def window_starts(log: FlightLog, horizon: int, stride: int) -> np.ndarray:
    """Steps from which a window of `horizon` steps lies in a stretch without drops, airborne and commanded."""
    starts = [
        k
        for k in range(1, len(log.t) - horizon - 1, stride)
        if log.position[k, 2] > MIN_HEIGHT_M and log.contiguous(k, horizon)
    ]
    return np.asarray(starts, dtype=np.int64)


class _Problem:
    """The residual over all logs' windows for parameter columns, at one latency."""

    def __init__(self, logs: Sequence[FlightLog], opts: SysidOptions, replay: CrazyflieReplay):
        self.logs, self.opts, self.replay = logs, opts, replay
        self.horizon = max(1, round(opts.horizon_s / 0.01))
        stride = max(1, round(opts.stride_s / 0.01))
        self.starts = [window_starts(log, self.horizon, stride) for log in logs]
        self.windows = int(sum(len(s) for s in self.starts))
        self.latency_s = 0.0
        self.smoothed = [smoothed_states(log) for log in logs]

    def residual(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        """(m, P) scaled prediction errors for P parameter sets (FITTED names, optionally latency_s -> (P,))."""
        p_count = len(next(iter(columns.values())))
        params = {"mass_kg": np.full(p_count, self.opts.mass_kg), "latency_s": np.full(p_count, self.latency_s)}
        params.update(columns)
        parts = []
        for log, starts, smoothed in zip(self.logs, self.starts, self.smoothed, strict=True):
            if not len(starts):
                continue
            states = log.state(slice(None))
            pred = self.replay.predict(params, smoothed, log.commands, starts, self.horizon)
            idx = starts[:, None] + np.arange(self.horizon)[None, :] + 1
            # rows ordered window-major, so that each window's rows are contiguous (clusters())
            err = [(pred[key] - states[key][idx][None]) / scale for key, scale in SIGNAL_SCALE.items()]
            parts.append(np.concatenate(err, axis=3).reshape(p_count, -1))
        return np.concatenate(parts, axis=1).T

    def clusters(self) -> np.ndarray:
        """The window each residual row belongs to."""
        per_window = self.horizon * 3 * len(SIGNAL_SCALE)
        return np.repeat(np.arange(self.windows), per_window)

    def cost(self, columns: dict[str, np.ndarray]) -> float:
        r = self.residual(columns)
        return float(0.5 * np.sum(r * r) / r.shape[0])


def smoothed_states(log: FlightLog) -> dict[str, np.ndarray]:
    """The log's states with position and velocity smoothed (Savitzky-Golay, 90 ms, cubic), as the windows'
    initial states: a noisy initial velocity would carry its error through the whole window and into the fit
    (errors in variables); the compared states stay raw."""
    from scipy.signal import savgol_filter

    states = log.state(slice(None))
    if len(log.t) < 9:
        return states
    out = dict(states)
    for key in ("position", "velocity"):
        out[key] = savgol_filter(states[key], 9, 3, axis=0)
    return out


def _parameter_dict(start: dict[str, float]):
    from mujoco import sysid

    nominal = CrazyflieParams()
    pd = sysid.ParameterDict()
    for name in FITTED:
        lo, hi = BOUNDS[name]
        p = sysid.Parameter(name, getattr(nominal, name), lo, hi)
        p.value = np.atleast_1d(float(start[name]))
        pd.add(p)
    return pd


def _fit_continuous(problem: _Problem, start: dict[str, float]):
    """mujoco.sysid.optimize of FITTED at the problem's latency: (optimized ParameterDict, result, residual_fn,
    initial ParameterDict)."""
    from mujoco import sysid

    initial = _parameter_dict(start)

    def residual_fn(x, params, **_):
        x2 = np.asarray(x, dtype=np.float64)
        cols = x2.reshape(len(FITTED), -1)
        r = problem.residual({name: cols[i] for i, name in enumerate(FITTED)})
        return [r if x2.ndim > 1 else r[:, 0]], None, None

    opt, result = sysid.optimize(
        initial,
        residual_fn,
        optimizer="mujoco",
        verbose=False,
        max_iters=problem.opts.max_iters,
        x_scale="jac",
        xtol=1e-5,
        output=io.StringIO(),  # mujoco.minimize's per-iteration table; the objective trace stays in result
    )
    return opt, result, residual_fn, initial


def fit_crazyflie(
    logs: Sequence[FlightLog],
    opts: SysidOptions | None = None,
    progress: Callable[[str], None] = lambda s: None,
) -> SysidResult:
    from mujoco import sysid

    opts = opts or SysidOptions()
    replay = CrazyflieReplay()
    problem = _Problem(logs, opts, replay)
    if problem.windows < 4:
        raise ValueError(
            f"only {problem.windows} usable {opts.horizon_s} s windows in the logs (airborne, commanded, no drops); "
            "fly longer or shorten horizon_s"
        )
    nominal = CrazyflieParams()
    start = {name: getattr(nominal, name) for name in FITTED}
    problem.latency_s = 0.0
    cost_nominal = problem.cost({k: np.array([v]) for k, v in start.items()})

    lo = max(0, math.floor(opts.latency_range_s[0] / SUBSTEP_S + 1e-9))
    hi = min(MAX_LATENCY_SUBSTEPS, math.ceil(opts.latency_range_s[1] / SUBSTEP_S - 1e-9))
    candidates = np.arange(lo, hi + 1)
    fits: dict[int, tuple] = {}

    def fit_at(substeps: int, begin: dict[str, float]) -> float:
        """The fitted cost at a latency (fitted once, warm-started)."""
        if substeps not in fits:
            problem.latency_s = substeps * SUBSTEP_S
            opt, result, residual_fn, initial = _fit_continuous(problem, begin)
            values = {n: float(opt[n].value[0]) for n in FITTED}
            cost = problem.cost({k: np.array([v]) for k, v in values.items()})
            fits[substeps] = (values, cost, opt, result, initial)
            progress(f"latency {substeps * SUBSTEP_S * 1000:.0f} ms: cost {cost:.4g}, " + _fmt(values))
        return fits[substeps][1]

    # a first fit at mid range, a scan of every latency at it (one batch), then a local search with refits:
    # latency and motor lag trade off, so the scan alone lands a step or two off
    mid = int(candidates[len(candidates) // 2])
    fit_at(mid, start)
    values = fits[mid][0]
    cols = {n: np.full(len(candidates), v) for n, v in values.items()}
    r = problem.residual({**cols, "latency_s": candidates * SUBSTEP_S})
    best = int(candidates[int(np.argmin(np.sum(r * r, axis=0)))])
    fit_at(best, values)
    while True:
        here = fits[best]
        side = [c for c in (best - 1, best + 1) if lo <= c <= hi]
        costs = {c: fit_at(c, here[0]) for c in side}
        step = min(costs, key=costs.get, default=best)
        if costs.get(step, math.inf) >= here[1]:
            break
        best = step
    # the latencies the logs cannot rule out (profile test at the windows' count, the effective sample
    # size): fitted outward from the best until one is excluded on each side
    plausible = {best}
    for direction in (-1, 1):
        c = best + direction
        while lo <= c <= hi:
            fit_at(c, fits[c - direction][0])
            if not _plausible(fits[c][1], fits[best][1], problem.windows):
                break
            plausible.add(c)
            c += direction
    values, cost, opt, result, initial = fits[best]
    latency_costs = {s * SUBSTEP_S: fits[s][1] for s in sorted(fits)}
    problem.latency_s = best * SUBSTEP_S
    residuals, jac = _jacobian(problem, values)
    covariance, iid_half = sysid.calculate_intervals(residuals, jac)
    bounds = {}  # each parameter's interval: the union of its intervals at every plausible latency
    for c in sorted(plausible):
        problem.latency_s = c * SUBSTEP_S
        residuals, jac = _jacobian(problem, fits[c][0])
        _, iid_half = sysid.calculate_intervals(residuals, jac)
        half = np.maximum(iid_half, clustered_half_widths(np.concatenate(residuals), jac, problem.clusters()))
        if c == best:
            covariance = sysid.calculate_intervals(residuals, jac)[0]
        for i, name in enumerate(FITTED):
            v = fits[c][0][name]
            lo_b, hi_b = bounds.get(name, (math.inf, -math.inf))
            bounds[name] = (min(lo_b, v - half[i]), max(hi_b, v + half[i]))
    estimates = {
        name: Estimate(
            values[name], getattr(nominal, name), *_around(values[name], bounds[name]), True, "least squares"
        )
        for name in FITTED
    }
    estimates["mass_kg"] = Estimate(opts.mass_kg, nominal.mass_kg, 0.0, 0.0, False, "given (weighed), not fitted")
    lat = sorted(plausible)
    estimates["latency_s"] = Estimate(
        best * SUBSTEP_S,
        0.0,
        (best - lat[0] + 1) * SUBSTEP_S,
        (lat[-1] - best + 1) * SUBSTEP_S,
        True,
        "search over 2 ms substeps (profile interval, widened by the resolution)",
    )
    return SysidResult(
        estimates=estimates,
        cost_nominal=cost_nominal,
        cost_fitted=cost,
        windows=problem.windows,
        latency_costs=latency_costs,
        trace=list(result.extras.get("objective", [])),
        candidates=list(result.extras.get("candidate", [])),
        covariance=covariance,
        parameter_dicts=(initial, opt),
    )


def _plausible(cost: float, best: float, windows: int) -> bool:
    """A latency the profile test keeps: windows * relative cost increase below chi-square(1)'s 95% point."""
    return windows * (cost - best) / max(best, 1e-300) <= 3.841


def _around(value: float, bounds: tuple[float, float]) -> tuple[float, float]:
    return value - bounds[0], bounds[1] - value


def _fmt(values: dict[str, float]) -> str:
    return ", ".join(f"{n} {v:.4g}" for n, v in values.items())


def _jacobian(problem: _Problem, values: dict[str, float]) -> tuple[list[np.ndarray], np.ndarray]:
    """Residuals at the optimum and their forward-difference Jacobian, in one batch of worlds."""
    x = np.array([values[n] for n in FITTED])
    steps = 1e-6 * np.maximum(np.abs(x), 1e-3)
    cols = np.tile(x[:, None], (1, len(x) + 1))
    cols[np.arange(len(x)), np.arange(1, len(x) + 1)] += steps
    r = problem.residual({n: cols[i] for i, n in enumerate(FITTED)})
    return [r[:, 0]], (r[:, 1:] - r[:, :1]) / steps


def write_fit(result: SysidResult, out_dir: Path, logs: Sequence[FlightLog], opts: SysidOptions) -> Path:
    """out_dir/sysid.yaml (what task.params.sysid= reads) with the latency search's costs, and report.html."""
    from robot_rl.sim2real.fit_common import write_fit_files

    return write_fit_files(
        result,
        out_dir,
        "crazyflie_2_1",
        [log.source for log in logs],
        opts.horizon_s,
        "Crazyflie system identification",
        FITTED,
        latency_costs={f"{k * 1000:.0f} ms": float(v) for k, v in result.latency_costs.items()},
    )
