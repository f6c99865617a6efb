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


def arm_closed_loop(
    log: ArmLog, bundle_dir: Path, params: ArmParams, layout: int | None = None, layout_seed: int = 0
) -> dict:
    """The bundle moving the simulated arm (`params`) from a logged state, against what the robot did: both TCP
    trajectories at the log's stamps, the per-axis RMS of their difference and the joints' RMS difference.

    A reach bundle starts 1 s after the first command (as the fit's windows start, sysid.SysidOptions.skip_s) and
    is steered by the logged reach targets. A pick-and-place bundle (it observes the object's pose) needs the
    table the robot had: `layout` of the pick-and-place pool (the pool of layout_seed and of as many layouts as a
    plan-guided bundle has plans; its plan `layout` is followed), with the named object put at the pose the log's
    perception reported. Its policy and plan first act on the logged states while the safety node held the arm
    (the first command, repeated), as on the robot; the simulation starts from the first command that moved the
    targets. The object's trajectory and whether it ends in the bowl are compared too.

    The policy's joint targets pass through the arm safety node's filter with its default limits
    (robot_rl.deploy.joint_limits: lead, speed, range, workspace), as on the robot; the policy sees the simulated
    arm's exact state, without the robot's sensor noise."""
    from robot_rl.deploy import PolicyRuntime
    from robot_rl.deploy.arm_ik import IKSpec
    from robot_rl.deploy.arm_ik import forward_kinematics as deploy_fk
    from robot_rl.deploy.joint_limits import arm_limits, filter_targets

    runtime = PolicyRuntime(bundle_dir)
    inputs = observed_inputs(runtime)
    if runtime.arm is None:
        raise ValueError(f"{bundle_dir}: closed-loop replay of an arm's log takes an arm bundle")
    if "object_position" in inputs or runtime.plan is not None:
        sim, k0 = _pick_place_start(log, runtime, params, layout, layout_seed)
    elif "target_position" in inputs:
        sim, k0 = _reach_start(log, params)
    else:
        raise ValueError(f"{bundle_dir}: closed-loop replay takes a reach or a pick-and-place bundle")
    ik = IKSpec.from_dict(runtime.bundle.extra["ik"])
    limits, tcp_of = arm_limits(), lambda q7: deploy_fk(ik, np.asarray(q7)[None]).tcp[0, :3, 3]
    pick_place = sim.scene == "arm_pick_place"
    if pick_place:  # the policy acted on the robot's states while the safety node held it: so here
        for k in range(int(np.argmax(log.commanded)), k0):
            runtime.act({**joint_inputs(log.position[k], log.velocity[k]), **_logged_scene(log, k)})
    sent = log.commands[k0 - 1].copy() if k0 > 0 else None
    sim.place(log.position[k0], log.velocity[k0], sent)
    if pick_place:
        sim.place_object(log.object_position[k0], log.object_quaternion[k0])
    steps = len(log.t) - k0
    tcp, joints, objects = np.empty((steps, 3)), np.empty((steps, ARM_JOINTS)), np.empty((steps, 3))
    for k in range(k0, len(log.t)):
        state = sim.state()
        tcp[k - k0], joints[k - k0] = sim.tcp_position(), state["position"][:ARM_JOINTS]
        raw = joint_inputs(state["position"], state["velocity"])
        if pick_place:
            seen = sim.object_state()
            objects[k - k0] = seen["object_position"]
            raw.update({key: seen[key] for key in ("object_position", "object_quaternion", "goal_position")})
        else:
            sim.set_target(log.target[k])
            raw["target_position"] = log.target[k]
        sent = filter_targets(runtime.act(raw), state["position"], sent, sim.dt, limits, tcp_of)[0]
        sim.step(sent)
    logged_tcp = forward_kinematics(torch.as_tensor(log.position[k0:, :ARM_JOINTS])).tcp[:, :3, 3].numpy()
    out = {
        "t": log.t[k0:].round(4).tolist(),
        "sim_position": tcp.round(5).tolist(),
        "rms_m": _rms(tcp - logged_tcp),
        "joint_rms_rad": float(np.sqrt(np.mean((joints - log.position[k0:, :ARM_JOINTS]) ** 2)).round(6)),
        "crashed": False,
    }
    if pick_place:
        out["object"] = {
            "sim_position": objects.round(5).tolist(),
            "log_position": log.object_position[k0:].round(5).tolist(),  # what perception reported, same steps
            "rms_m": _rms(objects - log.object_position[k0:]),
            "final_m": {"sim": objects[-1].round(4).tolist(), "log": log.object_position[-1].round(4).tolist()},
            "goal": log.goal[-1].round(4).tolist(),
            "sim_in_goal": bool(sim.object_state()["in_goal"]),
        }
    return out


def joint_inputs(position: np.ndarray, velocity: np.ndarray) -> dict[str, np.ndarray]:
    """What an arm bundle reads of a joint state (the 7 joints, then the fingers): the policy node's arm_joints."""
    return {
        "joint_position": position[:ARM_JOINTS],
        "joint_velocity": velocity[:ARM_JOINTS],
        "gripper_width": position[ARM_JOINTS:].sum(keepdims=True),
    }


def _logged_scene(log: ArmLog, k: int) -> dict[str, np.ndarray]:
    return {"object_position": log.object_position[k], "object_quaternion": log.object_quaternion[k],
            "goal_position": log.goal[k]}  # fmt: skip


def _rms(diff: np.ndarray) -> dict[str, float]:
    return dict(zip(AXES, np.sqrt(np.mean(diff**2, axis=0)).round(6).tolist(), strict=True))


def _reach_start(log: ArmLog, params: ArmParams):
    from sim.arm_sitl import ArmSitl

    if log.target is None:
        raise ValueError(f"{log.source}: no reach target (<ns>/target_position) in the log to steer the policy by")
    sim = ArmSitl(physical=params.as_dict())
    sim.reset()
    return sim, closed_loop_start(log, SysidOptions.skip_s)


# the goal the log's perception reported and the layout's may differ by this much (the bowl is where it is)
GOAL_MATCH_M = 0.01


def _pick_place_start(log: ArmLog, runtime, params: ArmParams, layout: int | None, layout_seed: int):
    """The simulated table (layout `layout` of the pool) and the step to start from: the first command that moved
    the targets off the first one (the safety node's hold; the policy acted on the logged states before it)."""
    from sim.arm_sitl import ArmSitl

    if layout is None:
        raise ValueError("a pick-and-place bundle's closed loop needs layout= (the pool's layout the table had)")
    if log.object_position is None or log.goal is None:
        raise ValueError(f"{log.source}: no object pose or goal (<ns>/object_pose, <ns>/goal_position) in the log")
    pool = {"layouts": len(runtime.bundle.plan.plans)} if runtime.plan is not None else {}  # else the SITL's pool
    sim = ArmSitl(physical=params.as_dict(), scene="arm_pick_place", layout_seed=layout_seed, layout=int(layout),
                  **pool)  # fmt: skip
    sim.reset()
    goal = sim.object_state()["goal_position"]
    if np.abs(goal - log.goal[0]).max() > GOAL_MATCH_M:
        raise ValueError(
            f"{log.source}: the logged goal {np.round(log.goal[0], 3).tolist()} is not layout {layout}'s "
            f"{np.round(goal, 3).tolist()} (pool of {sim.task.layouts} layouts, seed {layout_seed}): name the layout "
            "the table had"
        )
    if runtime.plan is not None:
        runtime.start_plan(int(layout))
    commanded = np.flatnonzero(log.commanded)
    if not len(commanded):
        raise ValueError(f"{log.source}: no command to replay closed loop")
    moved = commanded[np.abs(log.commands[commanded] - log.commands[commanded[0]]).max(axis=1) > 1e-6]
    if not len(moved) or moved[0] >= len(log.t) - 1:
        raise ValueError(f"{log.source}: the joint targets never moved off the first command: nothing to replay")
    return sim, int(moved[0])
