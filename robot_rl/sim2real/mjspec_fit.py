"""What the fits of pure-MuJoCo robots (the arm, the quadruped) share: mujoco.sysid's own pipeline on an MjSpec.

Windows of a log become one sysid.ModelSequences (initial state from the logged state, the command in effect held
over each control period's physics steps as controls, logged states as measurements); the residual compares the
rollout's state after each control period with the log's. The fit:
1. starts from the best point of a coarse scan (one batched residual call) and runs sysid.optimize;
2. goes on with Gauss-Newton on secant Jacobians (secant_gauss_newton), the windows' initial states profiled out
   (initial_state_bases);
3. gives intervals: the widest over secant steps of the wider of calculate_intervals' and the window-clustered ones
   (fit_common.clustered_half_widths), with a systematic part added (SYSTEMATIC_HALF_WIDTH).

Why step 2. Rollouts of these robots are not smooth in the parameters. A servo at its torque limit drops out of
implicitfast's implicit damping, so the physics step at which it leaves the limit changes a joint's velocity by a
jump (measured on the arm's wrist: 0.97 against 0.80 rad/s, for parameters 10% of the way closer to the truth);
contacts switch the same way. sysid.optimize stops on such a cliff: a noise-free arm fit ended 1.2% off the truth,
outside its intervals. A wide secant spans the cliffs and sees the trend beneath them, so the steps shrink from 3%
to 0.1% of each value; the same noise-free fit then ends within 1e-6 of the truth. And each window starts from a
logged state that carries the sensor's noise, which least squares otherwise puts partly into the parameters.
"""

from __future__ import annotations

import contextlib
import io
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from robot_rl.sim2real.fit_common import Estimate, FitResult, clustered_half_widths


@dataclass
class Window:
    """One window of a log: its label, initial qpos and qvel, controls per physics step (steps, nu), and the
    measured values (control periods + 1, signals) whose first row is the initial state's."""

    label: str
    qpos: np.ndarray
    qvel: np.ndarray
    controls: np.ndarray
    measured: np.ndarray


@dataclass
class Shooting:
    """The windows as the fit's rollouts start them, for profiling their initial states out (initial_state_bases):
    the spec the parameters modify, the windows, physics steps per control period, the columns of a period-end
    state the residual compares (as period_end_residual's), their scale, and the central-difference steps of an
    initial position and velocity."""

    spec: mujoco.MjSpec
    windows: Sequence[Window]
    substeps: int
    columns: Callable[[np.ndarray, mujoco.MjModel], np.ndarray]
    scale: np.ndarray
    state_steps: tuple[float, float]


def model_sequences(
    name: str, spec: mujoco.MjSpec, windows: Sequence[Window], signals: list[str] | dict[str, int], substeps: int
):
    """A sysid.ModelSequences of the windows (control periods of `substeps` physics steps); `signals` name the
    measured columns: model state names (mujoco.sysid resolves them), or name -> width for state it resolves to
    one column only (a free joint's 7 qpos and 6 qvel), each name ending in _qpos or _qvel."""
    from absl import logging as absl_logging
    from mujoco import sysid

    model = spec.compile()
    dt = model.opt.timestep
    states, controls, measured = [], [], []
    for w in windows:
        states.append(sysid.create_initial_state(model, w.qpos, w.qvel))
        ctrl = np.vstack([w.controls, w.controls[-1:]])  # sysid drops the last control (no measurement after it)
        controls.append(sysid.TimeSeries(np.arange(len(ctrl)) * dt, ctrl))
        times = np.arange(len(w.measured)) * dt * substeps
        if isinstance(signals, dict):
            measured.append(sysid.TimeSeries(times, w.measured, _mapping(signals)))
        else:
            measured.append(sysid.TimeSeries.from_names(times, w.measured, model, signals))
    verbosity = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.ERROR)  # no sensors in the model: the measurements are states
    try:
        return sysid.ModelSequences(
            name, spec, [w.label for w in windows], states, controls, measured, allow_missing_sensors=True
        )
    finally:
        absl_logging.set_verbosity(verbosity)


class ModelCache:
    """A build_model for sysid.build_residual_fn that compiles once per parameter point: sysid's own compiles the
    spec for every window of every column (measured on a quadruped fit: 11,118 compiles of 27 ms, 297 of its
    360 s). The modifiers write every parameter's fields from its value, so one point is one model."""

    def __init__(self, size: int = 128):
        self.models: OrderedDict = OrderedDict()
        self.size = size

    def __call__(self, params, spec: mujoco.MjSpec) -> mujoco.MjModel:
        from mujoco.sysid import apply_param_modifiers

        key = (id(spec), params.as_vector().tobytes())
        model = self.models.get(key)
        if model is None:
            model = self.models[key] = apply_param_modifiers(params, spec)
            if len(self.models) > self.size:
                self.models.popitem(last=False)
        return model


def residual_function(seqs: list, modify: Callable) -> Callable:
    """sysid's residual over the sequences, with modify_residual and one compile per parameter point."""
    from mujoco import sysid

    return sysid.build_residual_fn(
        models_sequences=seqs, modify_residual=modify, build_model=ModelCache(), resample_true=False, n_threads=1
    )


def rollout_windows(model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray, controls: np.ndarray) -> np.ndarray:
    """Open-loop rollouts by mujoco.rollout, one per window: from qpos (K, nq') and qvel (K, nv') (the first
    columns of the model's; the rest at the model's defaults) under controls (K, steps, nu) -> states (K, steps,
    1 + nstate), the time column first (mjSTATE_FULLPHYSICS)."""
    from mujoco import rollout

    data = mujoco.MjData(model)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    initial = np.empty((len(qpos), mujoco.mj_stateSize(model, spec)))
    for i in range(len(qpos)):
        mujoco.mj_resetData(model, data)
        data.qpos[: qpos.shape[1]] = qpos[i]
        data.qvel[: qvel.shape[1]] = qvel[i]
        mujoco.mj_getState(model, data, initial[i], spec)
    state, _ = rollout.rollout(model, data, initial, controls)
    return state


def initial_state_bases(shooting: Shooting, pd) -> list[np.ndarray]:
    """Per window, an orthonormal basis (rows, k) of how its residual moves with the window's initial state, at pd's
    parameters. A window starts from the logged state, which carries the sensor's noise, and that error runs
    through the window's rollout: least squares then puts part of it into the parameters (errors in the
    variables: measured on a SITL arm log, damping 0.4% off with a 95% interval 0.4% wide). Projecting these
    directions out of the residual and the Jacobian fits the parameters as if every window's initial state were
    fitted too (to first order), and the intervals widen by what the initial states could explain."""
    from mujoco import sysid

    model = sysid.apply_param_modifiers(pd, shooting.spec)
    w0 = shooting.windows[0]
    nq, nv = len(w0.qpos), len(w0.qvel)
    dims = nq + nv
    step = np.r_[np.full(nq, shooting.state_steps[0]), np.full(nv, shooting.state_steps[1])]
    delta = np.vstack([np.diag(step), -np.diag(step)])  # (2 dims, dims): + then - each initial-state entry
    x0 = np.stack([np.r_[w.qpos, w.qvel] for w in shooting.windows])  # (W, dims)
    starts = (x0[:, None, :] + delta[None]).reshape(-1, dims)
    controls = np.repeat(np.stack([w.controls for w in shooting.windows]), 2 * dims, axis=0)
    states = rollout_windows(model, starts[:, :nq], starts[:, nq:], controls)
    after = states[:, shooting.substeps - 1 :: shooting.substeps]
    pred = np.stack([shooting.columns(a, model) for a in after]) / shooting.scale  # (W * 2 dims, H, signals)
    pred = pred.reshape(len(shooting.windows), 2, dims, -1)
    bases = []
    for sens in (pred[:, 0] - pred[:, 1]) / (2 * step[None, :, None]):  # (dims, rows) per window
        u, sv, _ = np.linalg.svd(sens.T, full_matrices=False)
        bases.append(u[:, sv > 1e-9 * max(sv[0], 1e-300)])
    return bases


def _project(per_window: list[np.ndarray], bases: list[np.ndarray] | None) -> list[np.ndarray]:
    """Each window's residual columns with its basis' directions taken out (unchanged without bases)."""
    if bases is None:
        return per_window
    return [r - q @ (q.T @ r) for r, q in zip(per_window, bases, strict=True)]


def _mapping(widths: dict[str, int]) -> dict:
    from mujoco.sysid import SignalType

    kinds = {"_qpos": SignalType.MjStateQPos, "_qvel": SignalType.MjStateQVel}
    out, at = {}, 0
    for name, width in widths.items():
        out[name] = (kinds[name[-5:]], np.arange(at, at + width))
        at += width
    return out


def period_end_residual(substeps: int, columns: Callable[[np.ndarray, mujoco.MjModel], np.ndarray], scale: np.ndarray):
    """A sysid modify_residual: columns(states after each control period (H, 1 + nstate), model) -> (H, signals)
    against the measurements after the first row, in `scale` units."""

    def modify(params, pred_sensordata, measured_sensordata, model, return_pred_all, state=None, **_):
        from mujoco import sysid

        pred = columns(state[substeps - 1 :: substeps], model)  # time column first
        meas = measured_sensordata.data[1:]
        mapping, times = measured_sensordata.signal_mapping, measured_sensordata.times[1:]
        res = (meas - pred) / scale
        return res, sysid.TimeSeries(times, pred, mapping), sysid.TimeSeries(times, meas, mapping)

    return modify


# Added in quadrature to every statistical half width, as a fraction of the value (a robot's fit may give its own):
# the simulated "robots" of the tests are not exactly the fit's model, while the statistical intervals of a long log
# narrow to +-0.02% (quadruped motor strength, 0.03% off). The size is a choice made after seeing those runs; a real
# robot's mismatch is larger, and shows in the residuals' spread.
SYSTEMATIC_HALF_WIDTH = 0.005


@dataclass
class ScanFit:
    values: dict[str, float]
    half_widths: np.ndarray
    covariance: np.ndarray
    cost_nominal: float
    cost_fitted: float
    trace: list
    candidates: list
    initial: object  # sysid ParameterDicts, for the report
    optimized: object

    def result(self, cls: type[FitResult], nominal: dict[str, float], windows: int) -> FitResult:
        """The robot's FitResult (cls) of this fit; nominal: each parameter's model value."""
        h = self.half_widths
        estimates = {
            n: Estimate(v, nominal[n], float(h[i]), float(h[i])) for i, (n, v) in enumerate(self.values.items())
        }
        return cls(
            estimates=estimates, cost_nominal=self.cost_nominal, cost_fitted=self.cost_fitted, windows=windows,
            trace=self.trace, candidates=self.candidates, covariance=self.covariance,
            parameter_dicts=(self.initial, self.optimized),
        )  # fmt: skip


def scan_and_fit(
    initial, residual_fn: Callable, names: Sequence[str], grid: Sequence[np.ndarray], max_iters: int,
    progress: Callable[[str], None], shooting: Shooting | None = None, systematic: float = SYSTEMATIC_HALF_WIDTH,
) -> ScanFit:  # fmt: skip
    """Least squares from the best point of the scan grid (one axis of start values per parameter, in `names`
    order), then secant Gauss-Newton with the windows' initial states profiled out (when `shooting` is given),
    with intervals (the statistical half widths and `systematic`, a fraction of each value, in quadrature)."""
    from mujoco import sysid

    def cost(pd) -> float:
        r = np.concatenate(residual_fn(pd.as_vector(), pd)[0])
        return float(0.5 * np.sum(r * r) / r.size)

    cost_nominal = cost(initial.copy())
    points = np.array(np.meshgrid(*grid, indexing="ij")).reshape(len(names), -1)
    r = np.concatenate(residual_fn(points, initial.copy())[0])
    start = points[:, int(np.argmin(np.sum(r * r, axis=0)))]
    progress("start " + ", ".join(f"{n} {v:.3g}" for n, v in zip(names, start, strict=True)))
    initial_start = initial.copy()
    initial_start.update_from_vector(start)
    opt, result = sysid.optimize(
        initial_start, residual_fn, optimizer="mujoco", verbose=False, max_iters=max_iters, x_scale="jac",
        output=io.StringIO(),
    )  # fmt: skip
    bases = initial_state_bases(shooting, opt) if shooting is not None else None
    opt.update_from_vector(secant_gauss_newton(residual_fn, opt, bases))
    values = {n: float(opt[n].value[0]) for n in names}
    progress("fitted " + ", ".join(f"{n} {v:.4g}" for n, v in values.items()))
    covariance, half = intervals(residual_fn, opt, initial_state_bases(shooting, opt) if shooting else None)
    half = np.hypot(half, systematic * np.abs(opt.as_vector()))
    return ScanFit(
        values, half, covariance, cost_nominal, cost(opt), list(result.extras.get("objective", [])),
        list(result.extras.get("candidate", [])), initial, opt,
    )  # fmt: skip


SECANT_STEPS = (0.03, 0.01, 0.003, 0.001)  # relative central-difference steps of secant_gauss_newton, widest first
INTERVAL_STEPS = (0.01, 0.003, 0.001)  # those of the intervals, the first the covariance's


def jacobian(
    residual_fn: Callable, pd, relative_step: float, bases: list[np.ndarray] | None = None
) -> tuple[list[np.ndarray], np.ndarray]:
    """Residuals at pd's point (one array per window) and their central-difference Jacobian over +-relative_step of
    each value, all columns in one residual call (sysid builds one model per column); projected when bases are
    given (initial_state_bases)."""
    x = pd.as_vector()
    p = len(x)
    steps = relative_step * np.maximum(np.abs(x), 1e-3)
    cols = np.tile(x[:, None], (1, 2 * p + 1))
    cols[np.arange(p), 1 + np.arange(p)] += steps
    cols[np.arange(p), 1 + p + np.arange(p)] -= steps
    per_window = _project(_residual_columns(residual_fn, pd, cols), bases)
    r = np.concatenate(per_window)
    return [w[:, 0] for w in per_window], (r[:, 1 : p + 1] - r[:, p + 1 :]) / (2 * steps)


def intervals(residual_fn: Callable, pd, bases: list[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(covariance, 95% half widths) at pd's point. A rollout's derivative is not unique at a cliff, so the half
    widths are the widest of those from secants over 1%, 0.3% and 0.1% of each value (measured on noisy arm logs:
    each one alone narrowed some parameter's interval fivefold on some log, leaving out the truth), each the wider of
    calculate_intervals' and the window-clustered one. The covariance (for the report) is the 1% secant's."""
    from mujoco import sysid

    covariance, half = None, None
    for relative_step in INTERVAL_STEPS:
        residuals, jac = jacobian(residual_fn, pd, relative_step, bases)
        cov, iid_half = sysid.calculate_intervals(residuals, jac)
        clusters = np.concatenate([np.full(len(r), i) for i, r in enumerate(residuals)])
        h = np.maximum(iid_half, clustered_half_widths(np.concatenate(residuals), jac, clusters))
        covariance = cov if covariance is None else covariance
        half = h if half is None else np.maximum(half, h)
    return covariance, half


def secant_gauss_newton(residual_fn: Callable, pd, bases: list[np.ndarray] | None = None, iters: int = 5) -> np.ndarray:
    """Gauss-Newton from pd's point on central-difference Jacobians over each of SECANT_STEPS in turn (iters steps
    each at most, the next scale once a step moves no value by 1e-6 of it), a step taken only if it lowers the cost
    (halved up to four times); within the parameters' bounds; residuals projected when bases are given. Returns the
    parameter vector."""
    x = pd.as_vector().astype(float)
    lo, hi = pd.get_bounds()
    fractions = 0.5 ** np.arange(5)
    for relative_step in SECANT_STEPS:
        for _ in range(iters):
            at = pd.copy()
            at.update_from_vector(x)
            per_window, jac = jacobian(residual_fn, at, relative_step, bases)
            r = np.concatenate(per_window)
            dx = np.linalg.lstsq(jac, -r, rcond=None)[0]
            trials = np.clip(x[:, None] + dx[:, None] * fractions, lo[:, None], hi[:, None])
            costs = np.sum(np.concatenate(_project(_residual_columns(residual_fn, pd, trials), bases)) ** 2, axis=0)
            best = int(np.argmin(costs))
            if costs[best] >= r @ r:
                break
            step, x = trials[:, best] - x, trials[:, best]
            if np.max(np.abs(step) / np.maximum(np.abs(x), 1e-3)) < 1e-6:  # settled at this secant's scale
                break
    return x


def _residual_columns(residual_fn: Callable, pd, cols: np.ndarray) -> list[np.ndarray]:
    """The residuals (per window: rows, columns) at each column of parameter vectors, in one call."""
    with contextlib.redirect_stdout(io.StringIO()):
        return residual_fn(cols, pd.copy())[0]
