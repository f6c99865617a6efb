"""Where the simulated quadruped and its log part: the logged joint targets played open loop from logged states.

From window starts along the log (quadruped_sysid.window_starts: commanded with the log's usual gains, each state
with its trunk sample), the flat scene with the servos on the logged gains (and a fit's parameters) is rolled out
under the logged targets, held over each control period's 4 physics steps (mjspec_fit.rollout_windows). The trunk's
position is compared with the log's after each horizon, per axis (robot_rl.sim2real.replay.OpenLoopErrors, the
Crazyflie's table and the dashboard's overlay); the joints' median |error| is reported beside it. Open loop on legs
drifts fast (nothing steers the trunk back), which is what the horizons show.
"""

from __future__ import annotations

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
from robot_rl.sim2real.replay import OpenLoopErrors
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
