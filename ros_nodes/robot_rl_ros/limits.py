"""Limiters and envelope checks for drone commands (rpyt: roll deg, pitch deg, yaw rate deg/s, PWM).

Every limiter returns the changed command and whether it changed anything, so each can be
counted in diagnostics and proven by a test to act on an out-of-range input.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from robot_conventions.frames import quat_wxyz_to_rotmat, quat_xyzw_to_wxyz


@dataclass
class DroneLimits:
    # Command box, in send_setpoint units.
    low: np.ndarray = field(default_factory=lambda: np.array([-20.0, -20.0, -90.0, 0.0]))
    high: np.ndarray = field(default_factory=lambda: np.array([20.0, 20.0, 90.0, 60000.0]))
    # Largest change per second of each command component (deg/s, deg/s, deg/s^2, PWM/s).
    max_rate: np.ndarray = field(default_factory=lambda: np.array([600.0, 600.0, 1800.0, 200000.0]))
    # Combined tilt of the roll/pitch command, degrees.
    max_tilt_deg: float = 20.0
    # Measured attitude: beyond envelope -> hover (level), beyond tumble -> motors off.
    state_tilt_envelope_deg: float = 45.0
    state_tilt_tumble_deg: float = 80.0
    # Geofence box, metres, world ENU.
    fence_low: np.ndarray = field(default_factory=lambda: np.array([-1.5, -1.5, -0.2]))
    fence_high: np.ndarray = field(default_factory=lambda: np.array([1.5, 1.5, 2.0]))
    # Braking the fallbacks can count on (m/s^2, x y z) after a reaction time: the fence trips when
    # the stopping point would cross it, not when the drone already has. Horizontal: g tan(8 deg) of
    # the level-out tilt; vertical: measured in SITL from the land fallback's thrust floor (0.35 of
    # hover), thrust slew limit and motor lag included.
    fence_brake_mps2: np.ndarray = field(default_factory=lambda: np.array([1.3, 1.3, 4.5]))
    fence_reaction_s: float = 0.1
    min_separation_m: float = 0.3

    @staticmethod
    def from_params(p: dict) -> DroneLimits:
        """Build from flat ROS parameters (lists become arrays); unknown keys are ignored."""
        out = DroneLimits()
        for f in fields(DroneLimits):
            if f.name in p and p[f.name] is not None:
                v = p[f.name]
                setattr(
                    out,
                    f.name,
                    np.asarray(v, dtype=np.float64) if isinstance(v, (list, tuple, np.ndarray)) else float(v),
                )
        for name in ("low", "high", "max_rate"):
            if getattr(out, name).shape != (4,):
                raise ValueError(f"limit '{name}' needs 4 values (roll, pitch, yaw rate, thrust)")
        for name in ("fence_low", "fence_high", "fence_brake_mps2"):
            if getattr(out, name).shape != (3,):
                raise ValueError(f"limit '{name}' needs 3 values (x, y, z)")
        if np.any(out.fence_brake_mps2 <= 0):
            raise ValueError("limit 'fence_brake_mps2' must be positive")
        if np.any(out.low > out.high):
            raise ValueError("limit 'low' exceeds 'high'")
        return out


def is_finite(x) -> bool:
    return bool(np.all(np.isfinite(np.asarray(x, dtype=np.float64))))


def clip_box(cmd: np.ndarray, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, bool]:
    out = np.clip(cmd, low, high)
    return out, bool(np.any(out != cmd))


def limit_tilt(cmd: np.ndarray, max_tilt_deg: float) -> tuple[np.ndarray, bool]:
    """Scale roll and pitch together so the combined tilt stays inside the cone."""
    tilt = float(np.hypot(cmd[0], cmd[1]))
    if tilt <= max_tilt_deg:
        return cmd, False
    out = cmd.copy()
    out[:2] *= max_tilt_deg / tilt
    return out, True


def limit_rate(
    cmd: np.ndarray, previous: np.ndarray | None, dt: float, max_rate: np.ndarray
) -> tuple[np.ndarray, bool]:
    """Bound the change from the previously sent command; dt is clamped so a pause cannot open the gate."""
    if previous is None:
        return cmd, False
    step = max_rate * min(max(dt, 0.0), 0.1)
    out = np.clip(cmd, previous - step, previous + step)
    return out, bool(np.any(out != cmd))


def tilt_deg(quat_xyzw) -> float:
    """Angle between body z and world z, degrees."""
    r = quat_wxyz_to_rotmat(quat_xyzw_to_wxyz(np.asarray(quat_xyzw, dtype=np.float64)))
    return float(np.degrees(np.arccos(np.clip(r[2, 2], -1.0, 1.0))))


def yaw_rad(quat_xyzw) -> float:
    x, y, z, w = (float(v) for v in quat_xyzw)
    return float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


def geofence_violation(
    position,
    low: np.ndarray,
    high: np.ndarray,
    velocity=None,
    brake_mps2: np.ndarray | None = None,
    reaction_s: float = 0.0,
) -> str | None:
    """None inside the box, else a one-line reason naming the axis. With velocity and braking, the
    stopping point p + v t_r + v|v| / 2a is checked, so a fast climb trips in time."""
    p = np.asarray(position, dtype=np.float64)
    stop = p.copy()
    if velocity is not None and brake_mps2 is not None:
        v = np.asarray(velocity, dtype=np.float64)
        stop = p + v * reaction_s + v * np.abs(v) / (2.0 * np.asarray(brake_mps2, dtype=np.float64))
    for i, axis in enumerate("xyz"):
        if p[i] < low[i]:
            return f"geofence: {axis} {p[i]:.2f} m < {low[i]:.2f} m"
        if p[i] > high[i]:
            return f"geofence: {axis} {p[i]:.2f} m > {high[i]:.2f} m"
        if stop[i] < low[i] or stop[i] > high[i]:
            bound = low[i] if stop[i] < low[i] else high[i]
            now = f"now {p[i]:.2f} m, {v[i]:+.2f} m/s"
            return f"geofence: {axis} would stop at {stop[i]:.2f} m ({now}), past {bound:.2f} m"
    return None


def separation_violation(position, neighbours: dict[str, np.ndarray], min_dist: float) -> str | None:
    p = np.asarray(position, dtype=np.float64)
    for name, q in neighbours.items():
        d = float(np.linalg.norm(p - np.asarray(q)))
        if d < min_dist:
            return f"separation: {d:.2f} m to {name} < {min_dist:.2f} m"
    return None
