"""Units: SI throughout, angles in radians; the Crazyflie's own units (degrees, 16-bit PWM) and the
PWM -> rotor speed -> thrust identification that sim's firmware model and the deploy runtime share.

The constants are plain floats so torch code (sim) and numpy code (deploy) compute with the same values.
"""

from __future__ import annotations

import numpy as np

# Standard gravity as our models and controllers use it, m/s^2 (the MuJoCo scenes set the same 9.81).
GRAVITY = 9.81

# Legacy setpoint thrust on the wire is a uint16; the firmware saturates commanded motor PWM at this value.
PWM_MAX = 65535.0
# cmd_vel_legacy / send_setpoint accept thrust up to 60000 (Crazyswarm2 clamps there).
SETPOINT_THRUST_MAX = 60000.0

# PWM -> rotor speed -> thrust for the stock Crazyflie 2.x motors and props (safe-control-gym's cf2x
# identification: rpm = 0.2685 pwm + 4070.3; thrust = kf rpm^2 with kf = 3.16e-10 N/rpm^2).
PWM_TO_RPM_A = 0.2685
PWM_TO_RPM_B = 4070.3
KF_N_PER_RPM2 = 3.16e-10

# torch.rad2deg's factor (ATen's M_180_PI): x * RAD2DEG is torch.rad2deg(x) bit for bit
RAD2DEG = float("57.295779513082320876798154814105170332405472466564")


def deg2rad(x):
    return np.asarray(x) * (np.pi / 180.0)


def rad2deg(x):
    return np.asarray(x) * (180.0 / np.pi)


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
