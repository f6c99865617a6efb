"""Fit the simulated arm to joint logs with mujoco.sysid: the joints' viscous damping, armature and servo stiffness
(sim.tasks.arm.physical), with confidence intervals.

A pure-MuJoCo robot, so mujoco.sysid's own pipeline does the work: the model is an MjSpec (the arm's scene without
the free objects, whose places an arm's log does not hold), each parameter a sysid.Parameter whose modifier writes
it into the spec (sysid.apply_pgain / apply_dgain for the servos, the joints' damping and armature), the log becomes
one sysid.ModelSequences of windows (SystemTrajectory: initial state from the logged joint state, the joint targets
in effect as controls at the physics step, the logged joint positions and velocities as measurements),
build_residual_fn + optimize fit them, and calculate_intervals gives the intervals.

Windows (multiple shooting): the servos hold the arm on the logged targets, so an open-loop rollout does not drift,
but a window from each logged state bounds what an error early in a long log (a contact, a drop) can do. Residuals
along a window are not independent (an initial-state error carries through it), so each interval is the wider of
calculate_intervals' and a window-clustered (sandwich) one, as for the Crazyflie (fit_common).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from robot_rl.sim2real.arm_log import ARM_JOINTS, ArmLog
from robot_rl.sim2real.fit_common import Estimate, FitResult, clustered_half_widths
from sim.tasks.arm import MODEL_PATH, OBJECTS, body_name
from sim.tasks.arm.physical import ARM_JOINTS as JOINT_NAMES
from sim.tasks.arm.physical import ROBOT, ArmParams, nominal_values

FITTED = ("damping_scale", "armature_scale", "kp_scale")
BOUNDS = {"damping_scale": (0.2, 5.0), "armature_scale": (0.2, 5.0), "kp_scale": (0.2, 5.0)}
# residual units: an error of this size counts 1 (about a joint encoder's and its differentiated velocity's noise)
SIGNAL_SCALE = {"position": 1e-3, "velocity": 1e-2}
START_GRID = (0.7, 0.85, 1.0, 1.2, 1.45, 1.75)  # the scan of start points, per parameter
SUBSTEPS = 10  # physics steps per logged control period (the arm task's 4 ms in 40 ms)


@dataclass
class SysidOptions:
    horizon_s: float = 0.4  # = stride: windows do not overlap
    max_iters: int = 30
    # Windows start this long after the first command: while the safety node holds the arm before arming, its
    # hold commands come on its own timer, so which command a step used is not known (a lock-stepped SITL bridge
    # even steps once per command; measured: the first 7 steps of a SITL log matched no one-command-per-step
    # assignment, every later step matched exactly).
    skip_s: float = 1.0


@dataclass
class SysidResult(FitResult):
    def params(self) -> ArmParams:
        return ArmParams(**{k: e.value for k, e in self.estimates.items()})


def arm_spec() -> mujoco.MjSpec:
    """The arm's scene as the fit simulates it: the free objects removed (their places are not in the log)."""
    spec = mujoco.MjSpec.from_file(str(MODEL_PATH))
    for o in OBJECTS:
        spec.delete(spec.body(body_name(*o)))
    return spec


def parameter_dict(spec: mujoco.MjSpec):
    """FITTED as sysid.Parameters (scales of the spec's own values) with modifiers that write them into a spec."""
    from mujoco import sysid

    nominal = nominal_values(spec.compile())

    def damping(s: mujoco.MjSpec, p) -> None:
        for i, name in enumerate(JOINT_NAMES):
            s.joint(name).damping[0] = nominal["damping"][i] * p.value[0]
            sysid.apply_dgain(s, name, nominal["kv"][i] * p.value[0])

    def armature(s: mujoco.MjSpec, p) -> None:
        for i, name in enumerate(JOINT_NAMES):
            s.joint(name).armature = nominal["armature"][i] * p.value[0]

    def kp(s: mujoco.MjSpec, p) -> None:
        for i, name in enumerate(JOINT_NAMES):
            sysid.apply_pgain(s, name, nominal["kp"][i] * p.value[0])

    pd = sysid.ParameterDict()
    for name, modifier in (("damping_scale", damping), ("armature_scale", armature), ("kp_scale", kp)):
        pd.add(sysid.Parameter(name, 1.0, *BOUNDS[name], modifier=modifier))
    return pd


def window_starts(log: ArmLog, horizon: int, skip_s: float = 0.0) -> np.ndarray:
    """Steps from which a window of `horizon` steps lies in a commanded stretch without drops (non-overlapping),
    from skip_s after the first command on."""
    first = int(np.argmax(log.commanded)) if log.commanded.any() else len(log.t)
    starts, k = [], int(np.searchsorted(log.t, log.t[min(first, len(log.t) - 1)] + skip_s - 1e-9))
    while k + horizon < len(log.t):
        if log.contiguous(k, horizon):
            starts.append(k)
            k += horizon
        else:
            k += 1
    return np.asarray(starts, dtype=np.int64)


def model_sequences(logs: Sequence[ArmLog], spec: mujoco.MjSpec, horizon: int, skip_s: float = 0.0) -> list:
    """One sysid.ModelSequences per log: its windows as measured trajectories."""
    from absl import logging as absl_logging
    from mujoco import sysid

    model = spec.compile()
    dt = model.opt.timestep
    names = [f"{j}_qpos" for j in JOINT_NAMES] + [f"{j}_qvel" for j in JOINT_NAMES]
    out = []
    for log in logs:
        starts = window_starts(log, horizon, skip_s)
        if not len(starts):
            continue
        states, controls, measured = [], [], []
        for k in starts:
            states.append(sysid.create_initial_state(model, log.position[k], log.velocity[k]))
            ctrl = np.repeat(log.commands[k : k + horizon], SUBSTEPS, axis=0)
            ctrl = np.vstack([ctrl, ctrl[-1:]])  # sysid drops the last control (no measurement after it)
            controls.append(sysid.TimeSeries(np.arange(len(ctrl)) * dt, ctrl))
            rows = slice(k, k + horizon + 1)
            data = np.hstack([log.position[rows, :ARM_JOINTS], log.velocity[rows, :ARM_JOINTS]])
            times = np.arange(horizon + 1) * dt * SUBSTEPS
            measured.append(sysid.TimeSeries.from_names(times, data, model, names))
        verbosity = absl_logging.get_verbosity()
        absl_logging.set_verbosity(absl_logging.ERROR)  # no sensors in the model: the measurements are states
        try:
            seqs = sysid.ModelSequences(
                Path(log.source).stem,
                spec,
                [f"t={log.t[k]:.2f}s" for k in starts],
                states,
                controls,
                measured,
                allow_missing_sensors=True,
            )
        finally:
            absl_logging.set_verbosity(verbosity)
        out.append(seqs)
    return out


def _modify_residual(params, pred_sensordata, measured_sensordata, model, return_pred_all, state=None, **_):
    """The rollout's joint positions and velocities after each logged control period against the log's, in
    SIGNAL_SCALE units: (H, 14) rows of one window."""
    from mujoco import sysid

    after = state[SUBSTEPS - 1 :: SUBSTEPS]  # the rollout's states after each control period (time column first)
    q = after[:, 1 : 1 + ARM_JOINTS]
    v = after[:, 1 + model.nq : 1 + model.nq + ARM_JOINTS]
    pred = np.hstack([q, v])
    meas = measured_sensordata.data[1:]
    scale = np.repeat([SIGNAL_SCALE["position"], SIGNAL_SCALE["velocity"]], ARM_JOINTS)
    res = (meas - pred) / scale
    mapping = measured_sensordata.signal_mapping
    pred_ts = sysid.TimeSeries(measured_sensordata.times[1:], pred, mapping)
    meas_ts = sysid.TimeSeries(measured_sensordata.times[1:], meas, mapping)
    return res, pred_ts, meas_ts


def residual_function(seqs: list) -> Callable:
    from mujoco import sysid

    return sysid.build_residual_fn(
        models_sequences=seqs, modify_residual=_modify_residual, resample_true=False, n_threads=1
    )


def fit_arm(
    logs: Sequence[ArmLog], opts: SysidOptions | None = None, progress: Callable[[str], None] = lambda s: None
) -> SysidResult:
    from mujoco import sysid

    opts = opts or SysidOptions()
    horizon = max(1, round(opts.horizon_s / (logs[0].report.period_s or 0.04)))
    spec = arm_spec()
    seqs = model_sequences(logs, spec, horizon, opts.skip_s)
    windows = sum(len(s.measured_rollout) for s in seqs)
    if windows < 4:
        raise ValueError(
            f"only {windows} usable {opts.horizon_s} s windows in the logs (commanded, no drops); "
            "record longer or shorten horizon_s"
        )
    residual_fn = residual_function(seqs)
    initial = parameter_dict(spec)

    def cost(pd) -> float:
        r = np.concatenate(residual_fn(pd.as_vector(), pd)[0])
        return float(0.5 * np.sum(r * r) / r.size)

    cost_nominal = cost(initial.copy())
    progress(f"{windows} windows of {opts.horizon_s} s; nominal cost {cost_nominal:.4g}")
    # Servo torque limits bind during the transients after each new target (measured: 12 of 22 windows of a SITL
    # reach), which puts kinks into the cost where least squares from the nominal model stopped (armature 1.40
    # for a true 1.30, noise free). So it starts from the best point of a coarse scan (one batched residual call).
    grid = np.array(np.meshgrid(*[START_GRID] * len(FITTED), indexing="ij")).reshape(len(FITTED), -1)
    r = np.concatenate(residual_fn(grid, initial.copy())[0])
    start = grid[:, int(np.argmin(np.sum(r * r, axis=0)))]
    progress("start " + ", ".join(f"{n} {v:.3g}" for n, v in zip(FITTED, start, strict=True)))
    initial_start = initial.copy()
    initial_start.update_from_vector(start)
    opt, result = sysid.optimize(
        initial_start,
        residual_fn,
        optimizer="mujoco",
        verbose=False,
        max_iters=opts.max_iters,
        x_scale="jac",
        output=io.StringIO(),
    )
    values = {n: float(opt[n].value[0]) for n in FITTED}
    progress("fitted " + ", ".join(f"{n} {v:.4g}" for n, v in values.items()))
    residuals, jac = _jacobian(residual_fn, opt)
    covariance, iid_half = sysid.calculate_intervals(residuals, jac)
    clusters = np.concatenate([np.full(len(r), i) for i, r in enumerate(residuals)])
    half = np.maximum(iid_half, clustered_half_widths(np.concatenate(residuals), jac, clusters))
    estimates = {n: Estimate(values[n], 1.0, float(half[i]), float(half[i])) for i, n in enumerate(FITTED)}
    return SysidResult(
        estimates=estimates,
        cost_nominal=cost_nominal,
        cost_fitted=cost(opt),
        windows=windows,
        trace=list(result.extras.get("objective", [])),
        candidates=list(result.extras.get("candidate", [])),
        covariance=covariance,
        parameter_dicts=(initial, opt),
    )


def _jacobian(residual_fn: Callable, pd) -> tuple[list[np.ndarray], np.ndarray]:
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


def write_fit(result: SysidResult, out_dir: Path, logs: Sequence[ArmLog], opts: SysidOptions) -> Path:
    """out_dir/sysid.yaml (the Crazyflie fit's layout) and out_dir/report.html, mujoco.sysid's report."""
    from robot_rl.sim2real.fit_common import write_fit_files

    return write_fit_files(
        result, out_dir, ROBOT, [log.source for log in logs], opts.horizon_s, "Arm system identification", FITTED
    )
