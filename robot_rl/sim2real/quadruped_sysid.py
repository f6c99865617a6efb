"""Fit the simulated quadruped to its logs with mujoco.sysid: motor strength, contact friction and trunk payload
(sim.tasks.quadruped.physical, the three its training randomization draws), with confidence intervals.

mujoco.sysid's own pipeline on the flat scene's MjSpec (robot_rl.sim2real.mjspec_fit): each window starts from the
logged state (trunk pose from odometry, its world velocity from the body-frame twist, the joints), the logged joint
targets are held over each control period's 4 physics steps, and the whole state after each period (trunk pose and
velocity, joints) is compared with the log's. The servos run the gains the commands carried (a Go1 low-level
command sends kp and kd per motor): the fit takes them from the log, and windows whose gains differ from the
log's usual ones (the safety node's damping mode, the stand before the policy starts) are left out.

Identifiability: the motor strength shows in every stance (the servos' sag under the trunk's weight, their
response to each new target); the payload with it, through gravity and the trunk's inertia; friction only when a
foot slips, so on a log that never slips its interval is wide and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from robot_rl.sim2real import mjspec_fit
from robot_rl.sim2real.fit_common import FitResult
from robot_rl.sim2real.mjspec_fit import Window
from robot_rl.sim2real.quadruped_log import QuadrupedLog
from sim.tasks.quadruped.constants import FLAT_SCENE, JOINT_NAMES
from sim.tasks.quadruped.physical import ROBOT, QuadrupedParams, apply_to_spec

FITTED = ("motor_strength", "friction", "added_mass_kg")
BOUNDS = {"motor_strength": (0.3, 3.0), "friction": (0.05, 3.0), "added_mass_kg": (-2.0, 10.0)}
START_GRID = {
    "motor_strength": (0.7, 0.85, 1.0, 1.2),
    "friction": (0.4, 0.8, 1.2),
    "added_mass_kg": (-1.0, 0.0, 1.5, 3.0),
}
# residual units: an error of this size counts 1 (trunk position m and quaternion, joints rad; velocities)
SIGNAL_SCALE = {"position": 1e-3, "velocity": 3e-2}
SUBSTEPS = 4  # physics steps per control period (the task's 5 ms in 20 ms)


@dataclass
class SysidOptions:
    horizon_s: float = 0.2  # = stride: windows do not overlap; contacts make long open-loop rollouts diverge
    max_iters: int = 30
    skip_s: float = 1.0  # after the first command: the stand and the policy's first steps (as for the arm)


@dataclass
class SysidResult(FitResult):
    def params(self) -> QuadrupedParams:
        return QuadrupedParams(**{k: e.value for k, e in self.estimates.items()})


def usual_gains(log: QuadrupedLog) -> tuple[float, float]:
    """The kp and kd most of the log's commanded steps carry (every motor alike); ValueError when none do."""
    rows = np.round(np.hstack([log.kp, log.kd])[log.commanded], 6)
    uniform = rows[(rows[:, :12] == rows[:, :1]).all(axis=1) & (rows[:, 12:] == rows[:, 12:13]).all(axis=1)]
    if not len(uniform):
        raise ValueError(f"{log.source}: no command gives every motor the same gains")
    pairs, counts = np.unique(uniform[:, [0, 12]], axis=0, return_counts=True)
    kp, kd = pairs[int(np.argmax(counts))]
    return float(kp), float(kd)


def window_starts(log: QuadrupedLog, horizon: int, skip_s: float, gains: tuple[float, float]) -> np.ndarray:
    """Non-overlapping windows of `horizon` steps from skip_s after the first command on: contiguous (log's own
    rule) and every step with the usual gains."""
    same = np.isclose(log.kp, gains[0]).all(axis=1) & np.isclose(log.kd, gains[1]).all(axis=1)
    first = int(np.argmax(log.commanded)) if log.commanded.any() else len(log.t)
    k = int(np.searchsorted(log.t, log.t[min(first, len(log.t) - 1)] + skip_s - 1e-9))
    starts = []
    while k + horizon < len(log.t):
        if log.contiguous(k, horizon) and same[k : k + horizon].all():
            starts.append(k)
            k += horizon
        else:
            k += 1
    return np.asarray(starts, dtype=np.int64)


def logged_state(log: QuadrupedLog) -> tuple[np.ndarray, np.ndarray]:
    """(qpos (T, 19), qvel (T, 18)) of the model from the log: the free joint's linear velocity is world-frame,
    its angular velocity body-frame (MuJoCo's convention), the joints in the model's order."""
    w, x, y, z = log.base_quaternion.T
    rot = np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], 1)  # fmt: skip
    v_world = np.einsum("tij,tj->ti", rot, log.base_velocity)
    qpos = np.hstack([log.base_position, log.base_quaternion, log.joint_position])
    qvel = np.hstack([v_world, log.base_angular_velocity, log.joint_velocity])
    return qpos, qvel


def scene_spec(kp: float, kd: float) -> mujoco.MjSpec:
    """The flat scene with the servos on the logged gains."""
    spec = mujoco.MjSpec.from_file(str(FLAT_SCENE))
    apply_to_spec(spec, {"motor_strength": 1.0}, kp, kd)
    return spec


def parameter_dict(kp: float, kd: float):
    """FITTED as sysid.Parameters with modifiers that write them into a spec (physical.apply_to_spec)."""
    from mujoco import sysid

    pd = sysid.ParameterDict()
    nominal = QuadrupedParams()
    for name in FITTED:

        def modifier(s: mujoco.MjSpec, p, name=name) -> None:
            apply_to_spec(s, {name: float(p.value[0])}, kp, kd)

        pd.add(sysid.Parameter(name, getattr(nominal, name), *BOUNDS[name], modifier=modifier))
    return pd


def _state_columns(after: np.ndarray, model: mujoco.MjModel) -> np.ndarray:
    return after[:, 1 : 1 + model.nq + model.nv]


def fit_quadruped(
    logs: Sequence[QuadrupedLog], opts: SysidOptions | None = None, progress: Callable[[str], None] = lambda s: None
) -> SysidResult:
    opts = opts or SysidOptions()
    gains = usual_gains(logs[0])
    horizon = max(1, round(opts.horizon_s / (logs[0].report.period_s or 0.02)))
    spec = scene_spec(*gains)
    joints = {f"{j}_qpos": 1 for j in JOINT_NAMES}, {f"{j}_qvel": 1 for j in JOINT_NAMES}
    names = {"root_qpos": 7, **joints[0], "root_qvel": 6, **joints[1]}  # the whole state, the model's order
    seqs, every_window = [], []
    for log in logs:
        qpos, qvel = logged_state(log)
        measured = np.hstack([qpos, qvel])
        windows = [
            Window(f"t={log.t[k]:.2f}s", qpos[k], qvel[k], np.repeat(log.targets[k : k + horizon], SUBSTEPS, axis=0),
                   measured[k : k + horizon + 1])
            for k in window_starts(log, horizon, opts.skip_s, gains)
        ]  # fmt: skip
        if windows:
            seqs.append(mjspec_fit.model_sequences(Path(log.source).stem, spec, windows, names, SUBSTEPS))
            every_window += windows
    count = len(every_window)
    if count < 4:
        raise ValueError(
            f"only {count} usable {opts.horizon_s} s windows in the logs (commanded with kp {gains[0]:g}, kd "
            f"{gains[1]:g}, no drops); record longer or shorten horizon_s"
        )
    model = spec.compile()
    scale = np.r_[np.full(model.nq, SIGNAL_SCALE["position"]), np.full(model.nv, SIGNAL_SCALE["velocity"])]
    residual_fn = mjspec_fit.residual_function(seqs, mjspec_fit.period_end_residual(SUBSTEPS, _state_columns, scale))
    progress(f"{count} windows of {opts.horizon_s} s; servos kp {gains[0]:g}, kd {gains[1]:g}")
    grid = [START_GRID[n] for n in FITTED]
    steps = (SIGNAL_SCALE["position"], SIGNAL_SCALE["velocity"])
    shooting = mjspec_fit.Shooting(spec, every_window, SUBSTEPS, _state_columns, scale, steps)
    fit = mjspec_fit.scan_and_fit(parameter_dict(*gains), residual_fn, FITTED, grid, opts.max_iters, progress, shooting)
    nominal = QuadrupedParams().as_dict()
    return fit.result(SysidResult, {n: nominal[n] for n in FITTED}, count)


def write_fit(result: SysidResult, out_dir: Path, logs: Sequence[QuadrupedLog], opts: SysidOptions) -> Path:
    """out_dir/sysid.yaml (the other robots' layout) and out_dir/report.html, mujoco.sysid's report."""
    from robot_rl.sim2real.fit_common import write_fit_files

    return write_fit_files(
        result, out_dir, ROBOT, [log.source for log in logs], opts.horizon_s, "Quadruped system identification", FITTED
    )
