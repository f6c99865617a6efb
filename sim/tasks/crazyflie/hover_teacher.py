"""A scripted hover expert for imitation: a cascaded position controller in rpyt, the firmware's own attitude
and rate loops below it (what cflib's send_setpoint drives on a real Crazyflie).

It reads the true state and the goal error integral the policy observes; the hover thrust is the nominal
drone's (or, with task.params.sysid=, the fitted drone's: the same for every world), corrected by integral
action (so the student, who sees that integral and noisy state, can learn all of it: a teacher given each
world's true mass and motor constant flew 0.93 of episodes with its own help in DAgger, and its student alone
0.17, with altitude off by 10-12 cm). Yaw is steered to zero. The gains were
chosen by flying the teacher on the demo's evaluation (1,024 episodes, DR, noise, latency): integral gain
0.5-0.7 with its correction bounded at 0.45 succeeded 0.996-0.999; 1.0 0.83 and 2.0 0.10 (windup).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from robot_conventions.units import KF_N_PER_RPM2, PWM_MAX, PWM_TO_RPM_A, PWM_TO_RPM_B

GRAVITY = 9.81


@dataclass(frozen=True)
class HoverTeacherGains:
    kp_xy: float = 4.0  # m/s^2 per m
    kd_xy: float = 3.0  # m/s^2 per m/s
    kp_z: float = 6.0
    kd_z: float = 4.0
    max_acc_xy: float = 4.5  # m/s^2 (about 25 degrees of tilt)
    max_acc_z: float = 5.0
    max_tilt_deg: float = 25.0
    yaw_kp: float = 2.0  # deg/s per deg
    ki_z: float = 0.7  # fraction of hover thrust per m s of the goal error integral
    max_integral_z: float = 0.45  # bound on that correction (windup on take-off)


def hover_pwm(force_n: torch.Tensor) -> torch.Tensor:
    """The thrust PWM whose four nominal motors give force_n (N) in total: pwm_to_thrust inverted."""
    rpm = torch.sqrt(force_n.clamp(min=0.0) / (4.0 * KF_N_PER_RPM2))
    return ((rpm - PWM_TO_RPM_B) / PWM_TO_RPM_A).clamp(0.0, PWM_MAX)


def position_command(
    pos: torch.Tensor,
    vel: torch.Tensor,
    quat_wxyz: torch.Tensor,
    goal: torch.Tensor,
    integral: torch.Tensor,
    mass_kg: float,
    gains: HoverTeacherGains = HoverTeacherGains(),
) -> torch.Tensor:
    """(n, 4) roll deg, pitch deg, yaw rate deg/s, thrust PWM that fly each world to its goal and hold it.

    Sign conventions are the firmware's (FLU body axes): positive pitch lowers the nose (accelerates along
    +x of the yaw frame), positive roll lowers the right side (accelerates along -y)."""
    g = gains
    err = goal - pos
    acc = torch.empty_like(err)
    acc[:, 0:2] = g.kp_xy * err[:, 0:2] - g.kd_xy * vel[:, 0:2]
    acc[:, 2] = g.kp_z * err[:, 2] - g.kd_z * vel[:, 2]
    norm = acc[:, 0:2].norm(dim=1, keepdim=True)
    acc[:, 0:2] = acc[:, 0:2] * (g.max_acc_xy / norm.clamp(min=g.max_acc_xy))
    acc[:, 2] = acc[:, 2].clamp(-g.max_acc_z, g.max_acc_z)
    w, x, y, z = quat_wxyz.unbind(1)
    yaw = torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    c, s = torch.cos(yaw), torch.sin(yaw)
    ax = c * acc[:, 0] + s * acc[:, 1]  # horizontal acceleration in the yaw frame
    ay = -s * acc[:, 0] + c * acc[:, 1]
    up = GRAVITY + acc[:, 2]
    up = up + GRAVITY * (g.ki_z * integral[:, 2]).clamp(-g.max_integral_z, g.max_integral_z)
    limit = g.max_tilt_deg
    pitch = torch.rad2deg(torch.atan2(ax, up)).clamp(-limit, limit)
    roll = torch.rad2deg(torch.atan2(-ay, up)).clamp(-limit, limit)
    rzz = (1 - 2 * (x * x + y * y)).clamp(min=math.cos(math.radians(60.0)))  # body z . world z
    force = mass_kg * up / rzz
    yaw_rate = (-g.yaw_kp * torch.rad2deg(yaw)).clamp(-200.0, 200.0)
    return torch.stack([roll, pitch, yaw_rate, hover_pwm(force)], dim=1)
