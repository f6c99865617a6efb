"""The one place that owns units and frame conventions.

Conventions inside robot_rl: SI units, radians, world frame ENU (z up), body frame FLU
(x forward, y left, z up), quaternions scalar-first (w, x, y, z) as MuJoCo stores them.
ROS messages carry scalar-last (x, y, z, w). The Crazyflie firmware and cflib speak degrees,
deg/s and 16-bit PWM thrust; Crazyswarm2's cmd_vel_legacy carries the same with pitch negated.
"""

from __future__ import annotations

import numpy as np

# Legacy setpoint thrust on the wire is a uint16; the firmware saturates commanded motor PWM at this value.
PWM_MAX = 65535.0
# cmd_vel_legacy / send_setpoint accept thrust up to 60000 (Crazyswarm2 clamps there).
SETPOINT_THRUST_MAX = 60000.0

# PWM -> rotor speed -> thrust for the stock Crazyflie 2.x motors and props (safe-control-gym's cf2x
# identification: rpm = 0.2685 pwm + 4070.3; thrust = kf rpm^2 with kf = 3.16e-10 N/rpm^2).
PWM_TO_RPM_A = 0.2685
PWM_TO_RPM_B = 4070.3
KF_N_PER_RPM2 = 3.16e-10


def deg2rad(x):
    return np.asarray(x) * (np.pi / 180.0)


def rad2deg(x):
    return np.asarray(x) * (180.0 / np.pi)


def quat_wxyz_to_xyzw(q):
    q = np.asarray(q)
    return np.concatenate([q[..., 1:4], q[..., 0:1]], axis=-1)


def quat_xyzw_to_wxyz(q):
    q = np.asarray(q)
    return np.concatenate([q[..., 3:4], q[..., 0:3]], axis=-1)


def quat_wxyz_to_rotmat(q):
    """Rotation matrix (body to world), (..., 3, 3), from unit quaternions (..., 4) scalar first."""
    q = np.asarray(q, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    r = np.stack(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * z + w * y),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z - w * x),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
            1 - 2 * (x * x + y * y),
        ],
        axis=-1,
    )
    return r.reshape(q.shape[:-1] + (3, 3))


def euler_rpy_to_quat_wxyz(roll, pitch, yaw):
    """Z-Y-X (yaw, pitch, roll) Euler angles in radians to a scalar-first quaternion."""
    cr, sr = np.cos(np.asarray(roll) / 2), np.sin(np.asarray(roll) / 2)
    cp, sp = np.cos(np.asarray(pitch) / 2), np.sin(np.asarray(pitch) / 2)
    cy, sy = np.cos(np.asarray(yaw) / 2), np.sin(np.asarray(yaw) / 2)
    return np.stack(
        [
            cr * cp * cy + sr * sp * sy,
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
        ],
        axis=-1,
    )


def quat_wxyz_to_euler_rpy(q):
    """Scalar-first quaternion to Z-Y-X Euler angles (roll, pitch, yaw) in radians."""
    q = np.asarray(q, dtype=np.float64)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    roll = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = np.arcsin(np.clip(2 * (w * y - z * x), -1.0, 1.0))
    yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return np.stack([roll, pitch, yaw], axis=-1)


def pwm_to_thrust_n(pwm, kf_scale=1.0):
    """Thrust of one motor in newtons for a PWM command in [0, 65535]."""
    pwm = np.clip(np.asarray(pwm, dtype=np.float64), 0.0, PWM_MAX)
    rpm = PWM_TO_RPM_A * pwm + PWM_TO_RPM_B
    return kf_scale * KF_N_PER_RPM2 * rpm * rpm


def thrust_n_to_pwm(thrust, kf_scale=1.0):
    """Inverse of pwm_to_thrust_n (clipped to the PWM range)."""
    rpm = np.sqrt(np.maximum(np.asarray(thrust, dtype=np.float64), 0.0) / (kf_scale * KF_N_PER_RPM2))
    return np.clip((rpm - PWM_TO_RPM_B) / PWM_TO_RPM_A, 0.0, PWM_MAX)


def rpyt_to_cmd_vel_legacy(roll_deg, pitch_deg, yaw_rate_deg_s, thrust_pwm):
    """Our rpyt action (cflib send_setpoint units) -> Crazyswarm2 cmd_vel_legacy Twist fields.

    Our rpyt action is what cflib's send_setpoint takes: roll and pitch in degrees, right-handed
    about the FLU body axes (positive pitch tips the nose down and accelerates forward), yaw rate
    in deg/s, thrust PWM. Crazyswarm2's server reads roll from linear.y and pitch from -linear.x
    (crazyflie_server.cpp, cmd_vel_legacy_changed). Returns (linear.x, linear.y, angular.z, linear.z).
    """
    return (
        float(-pitch_deg),
        float(roll_deg),
        float(yaw_rate_deg_s),
        float(np.clip(thrust_pwm, 0.0, SETPOINT_THRUST_MAX)),
    )


def cmd_vel_legacy_to_rpyt(lin_x, lin_y, ang_z, lin_z):
    """Inverse of rpyt_to_cmd_vel_legacy: (roll deg, pitch deg, yaw rate deg/s, thrust PWM)."""
    return (float(lin_y), float(-lin_x), float(ang_z), float(np.clip(lin_z, 0.0, SETPOINT_THRUST_MAX)))
