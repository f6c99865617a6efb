"""Where the simulated arm and an arm's log part: the logged joint targets played open loop from logged states.

From window starts along the log (the windows sysid fits, arm_sysid.window_starts), the scene the fit simulates
(arm_sysid.arm_spec: no free objects) is rolled out under the logged targets, held over each control period's
physics steps, by mujoco.rollout (mjspec_fit.rollout_windows), one batch of windows per model. The tool centre
point (the model's `tcp` site, forward kinematics of the joints) is compared with the log's after each horizon, per
axis, so the table and the dashboard's overlay read as the Crazyflie's do (robot_rl.sim2real.replay.OpenLoopErrors).
The joints' own errors are reported beside it: median |joint error| over joints and windows.
"""

from __future__ import annotations

import mujoco
import numpy as np

from robot_rl.sim2real.arm_log import ARM_JOINTS, ArmLog
from robot_rl.sim2real.arm_sysid import SUBSTEPS, SysidOptions, arm_spec, window_starts
from robot_rl.sim2real.mjspec_fit import rollout_windows
from robot_rl.sim2real.replay import OpenLoopErrors
from sim.tasks.arm.physical import ArmParams, apply_to_spec, nominal_values

HORIZONS_S = (0.2, 0.4, 1.0)  # whole control periods of 0.04 s


def arm_model(params: ArmParams) -> mujoco.MjModel:
    """The fit's scene with `params` written into it (the same modifiers as the sysid parameters)."""
    spec = arm_spec()
    apply_to_spec(spec, nominal_values(spec.compile()), params.as_dict())
    return spec.compile()


def tcp_positions(model: mujoco.MjModel, qpos: np.ndarray) -> np.ndarray:
    """(..., 3) world positions of the `tcp` site for joint positions (..., nq)."""
    data = mujoco.MjData(model)
    site = model.site("tcp").id
    flat = qpos.reshape(-1, model.nq)
    out = np.empty((len(flat), 3))
    for i, q in enumerate(flat):
        data.qpos[:] = q
        mujoco.mj_kinematics(model, data)
        out[i] = data.site_xpos[site]
    return out.reshape(*qpos.shape[:-1], 3)


def arm_open_loop_errors(
    log: ArmLog, params: ArmParams, label: str, horizons_s: tuple[float, ...] = HORIZONS_S
) -> tuple[OpenLoopErrors, np.ndarray]:
    """TCP errors per horizon and axis (OpenLoopErrors, predicted TCP positions for the overlay), and the median
    |joint error| (rad) per horizon over the seven joints and the windows."""
    period = log.report.period_s or 0.04
    steps = [max(1, round(h / period)) for h in horizons_s]
    horizon = max(steps)
    starts = window_starts(log, horizon, SysidOptions.skip_s)
    if not len(starts):
        raise ValueError(f"{log.source}: no {horizon * period:.1f} s commanded stretch without drops to replay")
    model = arm_model(params)
    control = np.repeat(log.commands[starts[:, None] + np.arange(horizon)[None, :]], SUBSTEPS, axis=1)
    state = rollout_windows(model, log.position[starts], log.velocity[starts], control)
    qpos = state[:, SUBSTEPS - 1 :: SUBSTEPS, 1 : 1 + model.nq]  # after each control period (time column first)
    logged = log.position[starts[:, None] + np.arange(1, horizon + 1)[None, :]]
    q_true = np.zeros_like(qpos)
    q_true[..., : logged.shape[-1]] = logged
    pred_tcp, true_tcp = tcp_positions(model, qpos), tcp_positions(model, q_true)
    result = OpenLoopErrors.of(label, horizons_s, steps, np.abs(pred_tcp - true_tcp), log.t[starts], pred_tcp)
    at = np.array(steps) - 1
    joint_err = np.abs(qpos[..., :ARM_JOINTS] - logged[..., :ARM_JOINTS])[:, at]  # (K, horizons, 7)
    return result, np.median(joint_err.transpose(1, 0, 2).reshape(len(at), -1), axis=1)
