"""Drone fallback commands (hover, land, motors off), flown with the same rpyt setpoints as the policy.

With fresh state the commands close small loops on altitude and velocity; without state they are
open loop (level attitude, thrust near hover), which is what a blind drone can still do safely.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot_conventions.units import GRAVITY as G
from robot_rl_ros.limits import yaw_rad

MOTORS_OFF = np.zeros(4)


@dataclass
class FallbackGains:
    hover_pwm: float = 38000.0
    kp_z_pwm_per_m: float = 12000.0
    kd_z_pwm_per_mps: float = 9000.0
    kd_xy: float = 0.5  # desired horizontal deceleration per m/s of velocity, in g... scaled below
    max_tilt_deg: float = 8.0
    land_speed_mps: float = 0.3
    # Still climbing when LAND starts (e.g. a geofence breach on the way up): brake harder, but keep
    # enough thrust for the attitude loop to hold the drone level.
    kd_brake_pwm_per_mps: float = 25000.0
    brake_min_thrust_ratio: float = 0.35
    open_loop_land_thrust_ratio: float = 0.85
    thrust_max: float = 60000.0


class FallbackController:
    def __init__(self, gains: FallbackGains | None = None):
        self.g = gains or FallbackGains()

    def _level_tilt(self, state: dict) -> tuple[float, float]:
        """Roll/pitch (deg) that decelerate the horizontal world velocity, rotated into the yaw frame."""
        v = np.asarray(state["velocity"], dtype=np.float64)
        yaw = yaw_rad(state["quaternion"])
        # Desired world acceleration opposes velocity; express it in the heading frame.
        ax, ay = -self.g.kd_xy * v[0] * G, -self.g.kd_xy * v[1] * G
        c, s = np.cos(yaw), np.sin(yaw)
        a_fwd, a_left = c * ax + s * ay, -s * ax + c * ay
        # Positive pitch (nose down) accelerates forward; positive roll accelerates to the right (-y).
        pitch = np.degrees(np.arctan2(a_fwd, G))
        roll = -np.degrees(np.arctan2(a_left, G))
        m = self.g.max_tilt_deg
        return float(np.clip(roll, -m, m)), float(np.clip(pitch, -m, m))

    def hover(self, state: dict | None, z_ref: float | None) -> np.ndarray:
        if state is None:
            return np.array([0.0, 0.0, 0.0, self.g.hover_pwm])
        z, vz = float(state["position"][2]), float(state["velocity"][2])
        z_ref = z if z_ref is None else z_ref
        thrust = self.g.hover_pwm + self.g.kp_z_pwm_per_m * (z_ref - z) - self.g.kd_z_pwm_per_mps * vz
        roll, pitch = self._level_tilt(state)
        return np.array([roll, pitch, 0.0, float(np.clip(thrust, 0.0, self.g.thrust_max))])

    def land(self, state: dict | None) -> np.ndarray:
        if state is None:
            return np.array([0.0, 0.0, 0.0, self.g.open_loop_land_thrust_ratio * self.g.hover_pwm])
        vz = float(state["velocity"][2])
        thrust = self.g.hover_pwm + self.g.kd_z_pwm_per_mps * (-self.g.land_speed_mps - vz)
        if vz > 0.0:
            brake = self.g.hover_pwm - self.g.kd_brake_pwm_per_mps * vz
            thrust = max(min(thrust, brake), self.g.brake_min_thrust_ratio * self.g.hover_pwm)
        roll, pitch = self._level_tilt(state)
        return np.array([roll, pitch, 0.0, float(np.clip(thrust, 0.0, self.g.thrust_max))])
