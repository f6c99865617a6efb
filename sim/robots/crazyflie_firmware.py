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

# the PWM range and PWM -> rpm -> thrust identification the deploy runtime uses too; x * RAD2DEG is
# torch.rad2deg(x) bit for bit, in one call instead of three
from robot_conventions.units import KF_N_PER_RPM2, PWM_MAX, PWM_TO_RPM_A, PWM_TO_RPM_B, RAD2DEG

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


def written_key(*tensors: torch.Tensor) -> tuple | None:
    """Identity and write count of tensors, to keep values derived from them until one is replaced or written
    to in place (a tensor's _version counts its in-place writes); None for inference tensors, which count none:
    recompute then."""
    try:
        return tuple((id(t), t._version) for t in tensors)
    except RuntimeError:
        return None


def quat_wxyz_to_rpy_deg(q: torch.Tensor) -> torch.Tensor:
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    roll = torch.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = torch.asin((2 * (w * y - z * x)).clamp(-1.0, 1.0))
    yaw = torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return torch.rad2deg(torch.stack([roll, pitch, yaw], dim=1))


class CrazyflieFirmware:
    """Batched attitude + rate PID and mixer. State: integrators and last rate errors per world."""

    def __init__(
        self,
        num_worlds: int,
        dt: float,
        gains: PidGains | None = None,
        dtype=torch.float64,
        device: torch.device | str = "cpu",
    ):
        self.n = num_worlds
        self.dt = dt
        g = gains or PidGains()
        self.gains = g
        z = lambda k: torch.zeros(num_worlds, k, dtype=dtype, device=device)  # noqa: E731
        # per-world gain multipliers (domain randomization): attitude, rate roll/pitch, rate yaw
        self.gain_scale = torch.ones(num_worlds, 3, dtype=dtype, device=device)
        self.kf_scale = torch.ones(num_worlds, 1, dtype=dtype, device=device)
        self.att_int = z(2)
        self.rate_int = z(3)
        self.rate_prev_err = z(3)
        self.mix = torch.tensor([MIX_ROLL, MIX_PITCH, MIX_YAW], dtype=dtype, device=device)  # (3, 4)
        # constant gain vectors built once: tensor creation per 500 Hz tick is measurable overhead
        self.rate_ilimit = torch.tensor(
            [g.rate_rp_ilimit, g.rate_rp_ilimit, g.rate_y_ilimit], dtype=dtype, device=device
        )
        self.rate_kp = torch.tensor([g.rate_rp_kp, g.rate_rp_kp, g.rate_y_kp], dtype=dtype, device=device)
        self.rate_ki = torch.tensor([g.rate_rp_ki, g.rate_rp_ki, g.rate_y_ki], dtype=dtype, device=device)
        self.rate_kd = torch.tensor([g.rate_rp_kd, g.rate_rp_kd, 0.0], dtype=dtype, device=device)
        # For the 500 Hz tick, run between physics substeps, where every torch call costs microseconds whatever
        # its size: constants built once, the mixer with the halving of roll and pitch folded in (exact: entries
        # +-0.5 and +-1), and buffers written in place.
        self.mix_half = torch.tensor(
            [[0.5 * m for m in MIX_ROLL], [0.5 * m for m in MIX_PITCH], MIX_YAW], dtype=dtype, device=device
        )
        self._mix_rows = self.mix_half.unbind(0)
        self._rate_scale_cols = torch.tensor([1, 1, 2], device=device)
        self._neg_rate_ilimit = -self.rate_ilimit
        self._quat_sign2 = torch.tensor([[2.0], [2.0], [2.0], [-2.0]], dtype=dtype, device=device)
        self._scale_key = None  # which gain_scale and kf_scale values _rate_scale and _kf were made from
        self._rate_des = z(3)
        self._att = torch.zeros(2, num_worlds, dtype=dtype, device=device)

    def reset(self, ids: torch.Tensor) -> None:
        self.att_int[ids] = 0.0
        self.rate_int[ids] = 0.0
        self.rate_prev_err[ids] = 0.0

    def state(self) -> list[torch.Tensor]:
        return [self.att_int, self.rate_int, self.rate_prev_err]

    def motor_thrust(
        self, rpyt: torch.Tensor, quat_wxyz: torch.Tensor, gyro_body: torch.Tensor, may_idle: bool = True
    ) -> torch.Tensor:
        """One 500 Hz controller tick.

        rpyt: (n, 4) roll deg, pitch deg, yaw rate deg/s, thrust PWM (send_setpoint units).
        quat_wxyz: (n, 4) attitude; gyro_body: (n, 3) rad/s. Returns (n, 4) motor thrusts in N.
        may_idle=False promises that every world's thrust setpoint is above 0.5 PWM (all armed): the masking
        of stopped motors is then skipped, which leaves every value as it is.
        """
        g, dt = self.gains, self.dt
        att = self._roll_pitch_deg(quat_wxyz)
        rate = gyro_body * RAD2DEG
        thrust = rpyt[:, 3:4].clamp(0.0, PWM_MAX)
        idle = thrust <= 0.5 if may_idle else None  # not armed (a finite command: exactly ~(thrust > 0.5))

        # attitude loop: roll/pitch angle -> desired rates; yaw is commanded as a rate directly
        att_err = rpyt[:, 0:2] - att
        self.att_int = (self.att_int + att_err * dt).clamp_(-g.att_ilimit, g.att_ilimit)
        if may_idle:
            self.att_int.masked_fill_(idle, 0.0)
        rate_des = self._rate_des  # written in place: one call less than torch.cat
        torch.mul(self.gain_scale[:, 0:1], g.att_kp * att_err + g.att_ki * self.att_int, out=rate_des[:, 0:2])
        rate_des[:, 2:3].copy_(rpyt[:, 2:3])
        return self._rate_loop_and_mix(rate_des - rate, thrust, idle)

    def _roll_pitch_deg(self, quat_wxyz: torch.Tensor) -> torch.Tensor:
        """(n, 2) roll and pitch in degrees, bit for bit those of quat_wxyz_to_rpy_deg (atan2 and asin see the
        same contiguous inputs), without the yaw that the rate-commanded yaw axis never uses."""
        q = quat_wxyz.t()  # rows w, x, y, z
        q2 = q * self._quat_sign2  # 2w, 2x, 2y, -2z: with them each sum below is 2 (a b + c d), rounded alike
        roll_yx = q2[0::2] * q[1::2]  # 2wx, 2yz
        pitch_yx = q2[2:4] * q[0:2]  # 2yw, -2zx
        den = q2[1:3] * q[1:3]  # 2xx, 2yy
        att = self._att  # (2, n): each angle written into a contiguous row, as into a fresh tensor
        torch.atan2(roll_yx[0] + roll_yx[1], 1 - (den[0] + den[1]), out=att[0])
        torch.asin((pitch_yx[0] + pitch_yx[1]).clamp(-1.0, 1.0), out=att[1])
        return att.t() * RAD2DEG

    def motor_thrust_ctbr(self, ctbr: torch.Tensor, gyro_body: torch.Tensor) -> torch.Tensor:
        """Collective thrust (N) + body rates (deg/s) through the rate loop only."""
        per_motor = (ctbr[:, 0:1] / 4.0).clamp(min=0.0)
        rpm = torch.sqrt(per_motor / KF_N_PER_RPM2)  # nominal curve: the firmware does not know the DR scale
        thrust = ((rpm - PWM_TO_RPM_B) / PWM_TO_RPM_A).clamp(0.0, PWM_MAX) * (per_motor > 0)
        return self._rate_loop_and_mix(ctbr[:, 1:4] - gyro_body * RAD2DEG, thrust, thrust <= 0.5)

    def _rate_loop_and_mix(self, err, thrust, idle) -> torch.Tensor:
        """err: desired minus measured body rates (deg/s); idle: (n, 1) worlds whose motors are stopped, or None
        when there are none."""
        dt = self.dt
        # rate loop; clamp(-limit, limit) is the firmware's max(min(x, limit), -limit), in one call, and
        # masked_fill_ is torch.where(armed, x, 0.0) at half the cost
        self.rate_int = (self.rate_int + err * dt).clamp_(self._neg_rate_ilimit, self.rate_ilimit)
        deriv = (err - self.rate_prev_err) / dt
        self.rate_prev_err = err
        if idle is not None:
            self.rate_int.masked_fill_(idle, 0.0)
            self.rate_prev_err = err.masked_fill(idle, 0.0)
        # per-world factors of the randomized gains and motor constant, recomputed after a write to them (resets)
        key = written_key(self.gain_scale, self.kf_scale)
        if key is None or self._scale_key != key:
            self._rate_scale = torch.index_select(self.gain_scale, 1, self._rate_scale_cols)
            self._kf = self.kf_scale * KF_N_PER_RPM2
            self._scale_key = key
        out = self._rate_scale * (self.rate_kp * err + self.rate_ki * self.rate_int + self.rate_kd * deriv)  # PWM
        out = out.clamp_(-32767.0, 32767.0)

        # legacy power distribution: thrust + roll/2 + pitch/2 + yaw, per motor
        # out @ mix_half written out (the same sums in the same order; cheaper than a BLAS call for 3 x 4)
        m_r, m_p, m_y = self._mix_rows
        pwm = (thrust + ((out[:, 0:1] * m_r + out[:, 1:2] * m_p) + out[:, 2:3] * m_y)).clamp_(0.0, PWM_MAX)
        if idle is not None:
            pwm.masked_fill_(idle, 0.0)
        # pwm_to_thrust, without its clamp: pwm is in range already
        rpm = PWM_TO_RPM_A * pwm + PWM_TO_RPM_B
        return (self._kf * rpm * rpm).masked_fill_(pwm <= 0.5, 0.0)
