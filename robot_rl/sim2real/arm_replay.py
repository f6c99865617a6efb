"""Where the simulated arm and an arm's log part: the logged joint targets played open loop from logged states.

From window starts along the log (the windows sysid fits, arm_sysid.window_starts), the scene the fit simulates
(arm_sysid.arm_spec: no free objects) is rolled out under the logged targets, held over each control period's
physics steps, by mujoco.rollout (mjspec_fit.rollout_windows), one batch of windows per model. The tool centre
point (the model's `tcp` site, forward kinematics of the joints) is compared with the log's after each horizon, per
axis, so the table and the dashboard's overlay read as the Crazyflie's do (robot_rl.sim2real.replay.OpenLoopErrors).
The joints' own errors are reported beside it: median |joint error| over joints and windows.

Closed loop (arm_closed_loop): a reach bundle moves the simulated arm from a logged state towards the logged
targets, and its TCP is compared with the log's along the way.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import torch

from robot_rl.sim2real.arm_log import ARM_JOINTS, ArmLog
from robot_rl.sim2real.arm_sysid import SUBSTEPS, SysidOptions, arm_spec, window_starts
from robot_rl.sim2real.mjspec_fit import rollout_windows
from robot_rl.sim2real.replay import AXES, OpenLoopErrors, closed_loop_start, observed_inputs
from sim.robots.diff_ik import forward_kinematics
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


def arm_closed_loop(log: ArmLog, bundle_dir: Path, params: ArmParams) -> dict:
    """The bundle moving the simulated arm (`params`) from the log's state 1 s after the first command (as the fit's
    windows start, sysid.SysidOptions.skip_s) towards the logged reach targets, against what the robot did: both
    TCP trajectories at the log's stamps, the per-axis RMS of their difference and the joints' RMS difference.

    The policy's joint targets pass through the arm safety node's filter with its default limits
    (robot_rl.deploy.joint_limits: lead, speed, range, workspace), as on the robot; the policy sees the simulated
    arm's exact state, without the robot's sensor noise."""
    from robot_rl.deploy import PolicyRuntime
    from robot_rl.deploy.arm_ik import IKSpec
    from robot_rl.deploy.arm_ik import forward_kinematics as deploy_fk
    from robot_rl.deploy.joint_limits import arm_limits, filter_targets
    from sim.arm_sitl import ArmSitl

    runtime = PolicyRuntime(bundle_dir)
    inputs = observed_inputs(runtime)
    if runtime.arm is None or runtime.plan is not None or "target_position" not in inputs:
        raise ValueError(f"{bundle_dir}: closed-loop replay of an arm's log takes a reach bundle (target_position)")
    if log.target is None:
        raise ValueError(f"{log.source}: no reach target (<ns>/target_position) in the log to steer the policy by")
    k0 = closed_loop_start(log, SysidOptions.skip_s)
    ik = IKSpec.from_dict(runtime.bundle.extra["ik"])
    limits, tcp_of = arm_limits(), lambda q7: deploy_fk(ik, np.asarray(q7)[None]).tcp[0, :3, 3]
    sent = log.commands[k0 - 1].copy() if k0 > 0 else None
    sim = ArmSitl(physical=params.as_dict())
    sim.reset()
    sim.place(log.position[k0], log.velocity[k0], sent)
    tcp = np.empty((len(log.t) - k0, 3))
    joints = np.empty((len(log.t) - k0, ARM_JOINTS))
    for k in range(k0, len(log.t)):
        state = sim.state()
        tcp[k - k0], joints[k - k0] = sim.tcp_position(), state["position"][:ARM_JOINTS]
        sim.set_target(log.target[k])
        raw = {
            "joint_position": state["position"][:ARM_JOINTS],
            "joint_velocity": state["velocity"][:ARM_JOINTS],
            "gripper_width": state["position"][ARM_JOINTS:].sum(keepdims=True),
            "target_position": log.target[k],
        }
        sent = filter_targets(runtime.act(raw), state["position"], sent, sim.dt, limits, tcp_of)[0]
        sim.step(sent)
    logged_tcp = forward_kinematics(torch.as_tensor(log.position[k0:, :ARM_JOINTS])).tcp[:, :3, 3].numpy()
    diff = tcp - logged_tcp
    return {
        "t": log.t[k0:].round(4).tolist(),
        "sim_position": tcp.round(5).tolist(),
        "rms_m": dict(zip(AXES, np.sqrt(np.mean(diff**2, axis=0)).round(6).tolist(), strict=True)),
        "joint_rms_rad": float(np.sqrt(np.mean((joints - log.position[k0:, :ARM_JOINTS]) ** 2)).round(6)),
        "crashed": False,
    }
