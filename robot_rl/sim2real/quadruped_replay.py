"""Where the simulated quadruped and its log part: the logged joint targets played open loop from logged states.

From window starts along the log (quadruped_sysid.window_starts: commanded with the log's usual gains, each state
with its trunk sample), the flat scene with the servos on the logged gains (and a fit's parameters) is rolled out
under the logged targets, held over each control period's 4 physics steps (mjspec_fit.rollout_windows). The trunk's
position is compared with the log's after each horizon, per axis (robot_rl.sim2real.replay.OpenLoopErrors, the
Crazyflie's table and the dashboard's overlay); the joints' median |error| is reported beside it. Open loop on legs
drifts fast (nothing steers the trunk back), which is what the horizons show.

Closed loop (quadruped_closed_loop): a velocity-command bundle walks the simulated robot from a logged state under
the logged commands, and its trunk is compared with the log's along the way.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robot_rl.sim2real.mjspec_fit import rollout_windows
from robot_rl.sim2real.quadruped_log import QuadrupedLog
from robot_rl.sim2real.quadruped_sysid import (
    SUBSTEPS,
    SysidOptions,
    logged_state,
    scene_spec,
    usual_gains,
    window_starts,
)
from robot_rl.sim2real.replay import AXES, OpenLoopErrors, closed_loop_start, observed_inputs
from sim.tasks.quadruped.physical import QuadrupedParams, apply_to_spec

HORIZONS_S = (0.1, 0.2, 0.5)  # whole 20 ms control periods


def quadruped_open_loop_errors(
    log: QuadrupedLog, params: QuadrupedParams, label: str, horizons_s: tuple[float, ...] = HORIZONS_S
) -> tuple[OpenLoopErrors, np.ndarray]:
    """Trunk position errors per horizon and axis (OpenLoopErrors, with the predicted trunk positions), and the
    median |joint error| (rad) per horizon over the 12 joints and the windows."""
    period = log.report.period_s or 0.02
    steps = [max(1, round(h / period)) for h in horizons_s]
    horizon = max(steps)
    gains = usual_gains(log)
    starts = window_starts(log, horizon, SysidOptions.skip_s, gains)
    if not len(starts):
        raise ValueError(f"{log.source}: no {horizon * period:.1f} s commanded stretch without drops to replay")
    spec = scene_spec(*gains)
    apply_to_spec(spec, params.as_dict(), *gains)
    model = spec.compile()
    qpos, qvel = logged_state(log)
    control = np.repeat(log.targets[starts[:, None] + np.arange(horizon)[None, :]], SUBSTEPS, axis=1)
    state = rollout_windows(model, qpos[starts], qvel[starts], control)
    pred = state[:, SUBSTEPS - 1 :: SUBSTEPS, 1 : 1 + model.nq]  # after each control period (time column first)
    logged = qpos[starts[:, None] + np.arange(1, horizon + 1)[None, :]]
    trunk = pred[..., 0:3]
    result = OpenLoopErrors.of(label, horizons_s, steps, np.abs(trunk - logged[..., 0:3]), log.t[starts], trunk)
    at = np.array(steps) - 1
    joint_err = np.abs(pred[..., 7:] - logged[..., 7:])[:, at]  # (K, horizons, 12)
    return result, np.median(joint_err.transpose(1, 0, 2).reshape(len(at), -1), axis=1)


def quadruped_closed_loop(log: QuadrupedLog, bundle_dir: Path, params: QuadrupedParams) -> dict:
    """The bundle walking the simulated robot (`params`) from the log's state 1 s after the first command under the
    logged velocity commands, against what the robot did: the trunk's positions at the log's stamps, the per-axis
    RMS of the position difference, the joints' RMS difference, and per velocity command the mean body velocity of
    both (command_segments).

    The policy's joint targets pass through the leg safety node's filter with its default limits
    (robot_rl.deploy.joint_limits), as on the robot; the policy sees the simulated robot's exact state. Legs drift
    and gaits fall out of phase, so the trunk's difference grows with the log's length; the means per command are
    the steadier figures."""
    from robot_rl.deploy import PolicyRuntime
    from robot_rl.deploy.joint_limits import filter_targets, go1_limits
    from sim.quadruped_sitl import QuadrupedSitl

    runtime = PolicyRuntime(bundle_dir)
    inputs = observed_inputs(runtime)
    if "command" not in inputs:
        raise ValueError(f"{bundle_dir}: closed-loop replay of a quadruped's log takes a velocity-command bundle")
    if log.velocity_command is None:
        raise ValueError(f"{log.source}: no velocity command (<ns>/cmd_vel or <ns>/command) in the log")
    k0 = closed_loop_start(log, SysidOptions.skip_s)
    kp, kd = runtime.bundle.servo_gains(12)
    qpos, qvel = logged_state(log)
    sent = log.targets[k0 - 1].copy() if k0 > 0 else None
    sim = QuadrupedSitl(physical=params.as_dict())
    sim.reset()
    sim.place(qpos[k0], qvel[k0], sent)
    limits = go1_limits()
    n = len(log.t) - k0
    trunk, velocity, joints = np.empty((n, 3)), np.empty((n, 3)), np.empty((n, 12))
    for k in range(k0, len(log.t)):
        state = sim.state()
        trunk[k - k0], joints[k - k0] = state["position"], state["joint_position"]
        velocity[k - k0] = (*state["base_linear_velocity"][:2], state["angular_velocity"][2])
        raw = {key: state[key] for key in ("joint_position", "joint_velocity", "quaternion", "angular_velocity",
                                           "base_linear_velocity")}  # fmt: skip
        raw["command"] = log.velocity_command[k]
        sent = filter_targets(runtime.act(raw), state["joint_position"], sent, sim.dt, limits)[0]
        sim.step(sent, kp, kd)
    rms = lambda d: np.sqrt(np.mean(d**2, axis=0))  # noqa: E731
    return {
        "t": log.t[k0:].round(4).tolist(),
        "sim_position": trunk.round(5).tolist(),
        "rms_m": dict(zip(AXES, rms(trunk - log.base_position[k0:]).round(6).tolist(), strict=True)),
        "segments": command_segments(log, k0, velocity),
        "joint_rms_rad": float(np.sqrt(np.mean((joints - log.joint_position[k0:]) ** 2)).round(6)),
        "crashed": bool(sim.fell),
    }


def command_segments(log: QuadrupedLog, k0: int, simulated: np.ndarray, settle_s: float = 0.5) -> list[dict]:
    """Per stretch of one velocity command from k0 on (its first settle_s left out): the command, and the mean
    body-frame velocity (vx, vy, yaw rate) of the log and of the simulation (simulated: (T - k0, 3) from k0)."""
    logged = np.column_stack([log.base_velocity[k0:, :2], log.base_angular_velocity[k0:, 2]])
    command = log.velocity_command[k0:]
    edges = np.r_[0, np.flatnonzero(np.any(np.diff(command, axis=0) != 0, axis=1)) + 1, len(command)]
    skip = int(round(settle_s / (log.report.period_s or 0.02)))
    out = []
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        if b - a > skip + 1:
            out.append({
                "command": command[a].round(4).tolist(),
                "log": logged[a + skip : b].mean(axis=0).round(4).tolist(),
                "sim": simulated[a + skip : b].mean(axis=0).round(4).tolist(),
            })  # fmt: skip
    return out
