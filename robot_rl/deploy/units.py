"""Units and frame conventions of the deploy runtime: re-exported from robot_conventions, their one home.

Conventions inside robot_rl: SI units, radians, world frame ENU (z up), body frame FLU
(x forward, y left, z up), quaternions scalar-first (w, x, y, z) as MuJoCo stores them.
ROS messages carry scalar-last (x, y, z, w). The Crazyflie firmware and cflib speak degrees,
deg/s and 16-bit PWM thrust; Crazyswarm2's cmd_vel_legacy carries the same with pitch negated.
"""

from __future__ import annotations

from robot_conventions.frames import (
    euler_rpy_to_quat_wxyz,
    quat_wxyz_to_euler_rpy,
    quat_wxyz_to_rotmat,
    quat_wxyz_to_xyzw,
    quat_xyzw_to_wxyz,
)
from robot_conventions.units import (
    GRAVITY,
    KF_N_PER_RPM2,
    PWM_MAX,
    PWM_TO_RPM_A,
    PWM_TO_RPM_B,
    SETPOINT_THRUST_MAX,
    cmd_vel_legacy_to_rpyt,
    deg2rad,
    pwm_to_thrust_n,
    rad2deg,
    rpyt_to_cmd_vel_legacy,
    thrust_n_to_pwm,
)

__all__ = [
    "GRAVITY",
    "KF_N_PER_RPM2",
    "PWM_MAX",
    "PWM_TO_RPM_A",
    "PWM_TO_RPM_B",
    "SETPOINT_THRUST_MAX",
    "cmd_vel_legacy_to_rpyt",
    "deg2rad",
    "euler_rpy_to_quat_wxyz",
    "pwm_to_thrust_n",
    "quat_wxyz_to_euler_rpy",
    "quat_wxyz_to_rotmat",
    "quat_wxyz_to_xyzw",
    "quat_xyzw_to_wxyz",
    "rad2deg",
    "rpyt_to_cmd_vel_legacy",
    "thrust_n_to_pwm",
]
