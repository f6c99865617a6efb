"""The Crazyflie firmware's low-level path, batched in torch: an rpyt setpoint means the same here as on a drone.

Modelled after crazyflie-firmware's PID controller (controller_pid.c, attitude_pid_controller.c)
and legacy power distribution (power_distribution_quadrotor.c), cf2 defaults from
platform_defaults_cf2.h: attitude PID at 500 Hz (angle -> rate, KP 6, KI 3), rate PID at 500 Hz
(rate -> motor PWM offsets; roll/pitch KP 250, KI 500, KD 2.5; yaw KP 120, KI 16.7), thrust PWM
plus half the roll/pitch outputs per motor, motor PWM saturated at 65535, then PWM -> newtons
(sim.robots.crazyflie_firmware.pwm_to_thrust). Angles and rates are in degrees inside the PID,
as in the firmware. A zero thrust setpoint stops the motors and resets the integrators, as the
firmware does, which is why a drone resting on the ground does not wind up.

Sign conventions: right-handed about FLU body axes (positive roll lowers the right side, positive
pitch lowers the nose). Motor layout and spin senses follow assets/crazyflie/crazyflie.xml.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PWM_MAX = 65535.0
PWM_TO_RPM_A = 0.2685  # same identification as robot_rl.deploy.units (sim may not import it)
PWM_TO_RPM_B = 4070.3
KF_N_PER_RPM2 = 3.16e-10

# Per motor: +1/-1 multipliers of (roll, pitch, yaw) outputs; from positions (+x,-y), (-x,-y), (-x,+y), (+x,+y):
# roll torque = y f, pitch torque = -x f, yaw from the actuator gear signs (-, +, -, +).
MIX_ROLL = (-1.0, -1.0, 1.0, 1.0)
MIX_PITCH = (-1.0, 1.0, 1.0, -1.0)
MIX_YAW = (-1.0, 1.0, -1.0, 1.0)


@dataclass
class PidGains:
    att_kp: float = 6.0
    att_ki: float = 3.0
    att_ilimit: float = 20.0
    rate_rp_kp: float = 250.0
    rate_rp_ki: float = 500.0
    rate_rp_kd: float = 2.5
    rate_rp_ilimit: float = 33.3
    rate_y_kp: float = 120.0
    rate_y_ki: float = 16.7
    rate_y_ilimit: float = 166.7


def pwm_to_thrust(pwm: torch.Tensor, kf_scale: torch.Tensor | float = 1.0) -> torch.Tensor:
    """Newtons per motor; a motor at PWM 0 is stopped."""
    pwm = pwm.clamp(0.0, PWM_MAX)
    rpm = PWM_TO_RPM_A * pwm + PWM_TO_RPM_B
    return torch.where(pwm > 0.5, kf_scale * KF_N_PER_RPM2 * rpm * rpm, torch.zeros_like(pwm))


def quat_wxyz_to_rpy_deg(q: torch.Tensor) -> torch.Tensor:
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    roll = torch.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = torch.asin((2 * (w * y - z * x)).clamp(-1.0, 1.0))
    yaw = torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return torch.rad2deg(torch.stack([roll, pitch, yaw], dim=1))


class CrazyflieFirmware:
    """Batched attitude + rate PID and mixer. State: integrators and last rate errors per world."""

    def __init__(self, num_worlds: int, dt: float, gains: PidGains | None = None, dtype=torch.float64):
        self.n = num_worlds
        self.dt = dt
        g = gains or PidGains()
        self.gains = g
        z = lambda k: torch.zeros(num_worlds, k, dtype=dtype)  # noqa: E731
        # per-world gain multipliers (domain randomization): attitude, rate roll/pitch, rate yaw
        self.gain_scale = torch.ones(num_worlds, 3, dtype=dtype)
        self.kf_scale = torch.ones(num_worlds, 1, dtype=dtype)
        self.att_int = z(2)
        self.rate_int = z(3)
        self.rate_prev_err = z(3)
        self.mix = torch.tensor([MIX_ROLL, MIX_PITCH, MIX_YAW], dtype=dtype)  # (3, 4)
        # constant gain vectors built once: tensor creation per 500 Hz tick is measurable overhead
        self.rate_ilimit = torch.tensor([g.rate_rp_ilimit, g.rate_rp_ilimit, g.rate_y_ilimit], dtype=dtype)
        self.rate_kp = torch.tensor([g.rate_rp_kp, g.rate_rp_kp, g.rate_y_kp], dtype=dtype)
        self.rate_ki = torch.tensor([g.rate_rp_ki, g.rate_rp_ki, g.rate_y_ki], dtype=dtype)
        self.rate_kd = torch.tensor([g.rate_rp_kd, g.rate_rp_kd, 0.0], dtype=dtype)

    def reset(self, ids: torch.Tensor) -> None:
        self.att_int[ids] = 0.0
        self.rate_int[ids] = 0.0
        self.rate_prev_err[ids] = 0.0

    def state(self) -> list[torch.Tensor]:
        return [self.att_int, self.rate_int, self.rate_prev_err]

    def motor_thrust(self, rpyt: torch.Tensor, quat_wxyz: torch.Tensor, gyro_body: torch.Tensor) -> torch.Tensor:
        """One 500 Hz controller tick.

        rpyt: (n, 4) roll deg, pitch deg, yaw rate deg/s, thrust PWM (send_setpoint units).
        quat_wxyz: (n, 4) attitude; gyro_body: (n, 3) rad/s. Returns (n, 4) motor thrusts in N.
        """
        g, dt, s = self.gains, self.dt, self.gain_scale
        att = quat_wxyz_to_rpy_deg(quat_wxyz)
        rate = torch.rad2deg(gyro_body)
        thrust = rpyt[:, 3:4].clamp(0.0, PWM_MAX)
        armed = thrust > 0.5

        # attitude loop: roll/pitch angle -> desired rates; yaw is commanded as a rate directly
        att_err = rpyt[:, 0:2] - att[:, 0:2]
        self.att_int = torch.where(armed, (self.att_int + att_err * dt).clamp(-g.att_ilimit, g.att_ilimit), 0.0)
        rate_des_rp = s[:, 0:1] * (g.att_kp * att_err + g.att_ki * self.att_int)
        rate_des = torch.cat([rate_des_rp, rpyt[:, 2:3]], dim=1)

        return self._rate_loop_and_mix(rate_des, rate, thrust, armed)

    def motor_thrust_ctbr(self, ctbr: torch.Tensor, gyro_body: torch.Tensor) -> torch.Tensor:
        """Collective thrust (N) + body rates (deg/s) through the rate loop only."""
        per_motor = (ctbr[:, 0:1] / 4.0).clamp(min=0.0)
        rpm = torch.sqrt(per_motor / KF_N_PER_RPM2)  # nominal curve: the firmware does not know the DR scale
        thrust = ((rpm - PWM_TO_RPM_B) / PWM_TO_RPM_A).clamp(0.0, PWM_MAX) * (per_motor > 0)
        return self._rate_loop_and_mix(ctbr[:, 1:4], torch.rad2deg(gyro_body), thrust, thrust > 0.5)

    def _rate_loop_and_mix(self, rate_des, rate, thrust, armed) -> torch.Tensor:
        dt, s = self.dt, self.gain_scale
        # rate loop
        err = rate_des - rate
        limits = self.rate_ilimit
        self.rate_int = torch.where(armed, torch.maximum(torch.minimum(self.rate_int + err * dt, limits), -limits), 0.0)
        deriv = (err - self.rate_prev_err) / dt
        self.rate_prev_err = torch.where(armed, err, 0.0)
        scale = s[:, (1, 1, 2)]
        out = scale * (self.rate_kp * err + self.rate_ki * self.rate_int + self.rate_kd * deriv)  # PWM units
        out = out.clamp(-32767.0, 32767.0)

        # legacy power distribution: thrust + roll/2 + pitch/2 + yaw, per motor
        half = torch.cat([out[:, 0:2] * 0.5, out[:, 2:3]], dim=1)
        pwm = thrust + half @ self.mix
        pwm = torch.where(armed, pwm.clamp(0.0, PWM_MAX), 0.0)
        return pwm_to_thrust(pwm, self.kf_scale)
