"""What the fits of pure-MuJoCo robots (the arm, the quadruped) share: mujoco.sysid's own pipeline on an MjSpec.

Windows of a log become one sysid.ModelSequences (initial state from the logged state, the command in effect held
over each control period's physics steps as controls, logged states as measurements); the residual compares the
rollout's state after each control period with the log's; the fit starts from the best point of a coarse scan
(one batched residual call), runs sysid.optimize, and its intervals are the wider of calculate_intervals' and the
window-clustered ones (fit_common.clustered_half_widths).
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
    progress: Callable[[str], None],
) -> ScanFit:  # fmt: skip
    """Least squares from the best point of the scan grid (one axis of start values per parameter, in `names`
    order), with intervals."""
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
    values = {n: float(opt[n].value[0]) for n in names}
    progress("fitted " + ", ".join(f"{n} {v:.4g}" for n, v in values.items()))
    residuals, jac = jacobian(residual_fn, opt)
    covariance, iid_half = sysid.calculate_intervals(residuals, jac)
    clusters = np.concatenate([np.full(len(r), i) for i, r in enumerate(residuals)])
    half = np.maximum(iid_half, clustered_half_widths(np.concatenate(residuals), jac, clusters))
    return ScanFit(
        values, half, covariance, cost_nominal, cost(opt), list(result.extras.get("objective", [])),
        list(result.extras.get("candidate", [])), initial, opt,
    )  # fmt: skip


def jacobian(residual_fn: Callable, pd) -> tuple[list[np.ndarray], np.ndarray]:
    """Residuals at the optimum (one array per window) and their forward-difference Jacobian, all columns in one
    residual call (sysid builds one model per column)."""
    x = pd.as_vector()
    steps = 1e-6 * np.maximum(np.abs(x), 1e-3)
    cols = np.tile(x[:, None], (1, len(x) + 1))
    cols[np.arange(len(x)), np.arange(1, len(x) + 1)] += steps
    with contextlib.redirect_stdout(io.StringIO()):
        per_window = residual_fn(cols, pd.copy())[0]
    r = np.concatenate(per_window)
    return [w[:, 0] for w in per_window], (r[:, 1:] - r[:, :1]) / steps
