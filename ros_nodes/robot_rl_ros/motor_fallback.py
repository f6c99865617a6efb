"""Fallback commands for a drone flown at motor level (a swarm policy's `motors` mode): hover, land, off.

A motor-level drone has no firmware attitude loop under the policy, so a fallback must close the attitude
loop itself: a geometric controller (desired acceleration -> thrust direction -> attitude error -> torques ->
the X-frame mixer) in numpy, the same law as the simulator's planner controller
(sim.robots.goto_planner.accel_to_motors; a test holds them equal). Hover damps horizontal velocity and
holds the height it fell back at; land descends at land_speed_mps. Commands are fractions [0, 1] of each
motor's maximum thrust (motor_max_n), m1..m4 as in the Crazyflie MJCF.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from robot_conventions.frames import quat_wxyz_to_rotmat, quat_xyzw_to_wxyz
from robot_conventions.units import GRAVITY


@dataclass
class MotorFallbackGains:
    mass_kg: float = 0.027  # assets/crazyflie/crazyflie.xml
    arm_m: float = 0.0325  # motor offset from the centre, per axis
    torque_ratio: tuple[float, float, float, float] = (-0.006, 0.006, -0.006, 0.006)  # yaw N m per N, m1..m4
    motor_max_n: float = 0.15  # thrust of a command of 1
    kp_z: float = 6.0  # 1/s^2
    kd: float = 4.0  # 1/s, velocity damping on every axis
    max_acc: float = 6.0  # m/s^2
    k_att: float = 7e-3  # N m / rad
    k_rate: float = 5e-4  # N m s / rad
    land_speed_mps: float = 0.3
    open_loop_land_ratio: float = 0.85  # of hover thrust, without state
    mixer_inverse: np.ndarray = field(init=False)

    def __post_init__(self):
        a = self.arm_m
        x = np.array([a, -a, -a, a])
        y = np.array([-a, -a, a, a])
        mix = np.stack([np.ones(4), y, -x, np.asarray(self.torque_ratio, dtype=np.float64)])
        self.mixer_inverse = np.linalg.inv(mix)  # [thrust, tau_x, tau_y, tau_z] -> motor newtons


def accel_to_motors(acc: np.ndarray, rot: np.ndarray, omega: np.ndarray, g: MotorFallbackGains) -> np.ndarray:
    """Desired world acceleration (3), attitude (3, 3) body to world, body rates (3) -> motor commands in [0, 1];
    yaw is held at zero."""
    acc = np.clip(acc, -g.max_acc, g.max_acc)
    force = g.mass_kg * (acc + np.array([0.0, 0.0, GRAVITY]))
    b3 = force / max(np.linalg.norm(force), 1e-6)
    b2 = np.cross(b3, np.array([1.0, 0.0, 0.0]))
    b2 = b2 / max(np.linalg.norm(b2), 1e-6)
    rd = np.stack([np.cross(b2, b3), b2, b3], axis=-1)  # columns b1, b2, b3
    e = 0.5 * (rd.T @ rot - rot.T @ rd)
    torque = -g.k_att * np.array([e[2, 1], e[0, 2], e[1, 0]]) - g.k_rate * omega
    wrench = np.concatenate([[force @ rot[:, 2]], torque])
    return np.clip(g.mixer_inverse @ wrench / g.motor_max_n, 0.0, 1.0)


class MotorFallback:
    """hover(state, z_ref) and land(state), as robot_rl_ros.fallback.FallbackController offers them to the
    supervisor, in motor commands."""

    def __init__(self, gains: MotorFallbackGains | None = None):
        self.g = gains or MotorFallbackGains()
        self.hover_ratio = self.g.mass_kg * GRAVITY / (4 * self.g.motor_max_n)

    def _fly(self, state: dict, acc: np.ndarray) -> np.ndarray:
        rot = quat_wxyz_to_rotmat(quat_xyzw_to_wxyz(np.asarray(state["quaternion"], dtype=np.float64)))
        return accel_to_motors(acc, rot, np.asarray(state["angular_velocity"], dtype=np.float64), self.g)

    def hover(self, state: dict | None, z_ref: float | None) -> np.ndarray:
        if state is None:  # blind: level thrust at hover, the best a drone without state can do
            return np.full(4, self.hover_ratio)
        p, v = np.asarray(state["position"]), np.asarray(state["velocity"], dtype=np.float64)
        acc = -self.g.kd * v
        acc[2] += self.g.kp_z * ((p[2] if z_ref is None else z_ref) - p[2])
        return self._fly(state, acc)

    def land(self, state: dict | None) -> np.ndarray:
        if state is None:
            return np.full(4, self.g.open_loop_land_ratio * self.hover_ratio)
        v = np.asarray(state["velocity"], dtype=np.float64)
        acc = -self.g.kd * v
        acc[2] = self.g.kd * (-self.g.land_speed_mps - v[2])
        return self._fly(state, acc)
