"""Joint limits of joint-space robots (arms, legs) and the filter their safety layer puts joint position targets
through: within the joint range, not leading the measured joints by more than max_lead, not moving faster than
max_speed, an arm's TCP inside its workspace. numpy only: the safety nodes (robot_rl_ros.joint_supervisor) run it on
the robot, and replaying a robot's log in simulation (robot_rl.sim2real) runs the same filter."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np


@dataclass
class JointLimits:
    q_low: np.ndarray
    q_high: np.ndarray
    # Largest |target - measured|: a target far from where the joint is means a large torque step.
    max_lead: np.ndarray
    # Largest change of the target per second.
    max_speed: np.ndarray
    # TCP box (m, base frame) for arms: a commanded pose outside it is refused; the measured TCP
    # beyond it by workspace_margin_m -> fallback. None: no workspace (legs).
    workspace_low: np.ndarray | None = None
    workspace_high: np.ndarray | None = None
    workspace_margin_m: float = 0.03

    @property
    def n(self) -> int:
        return len(self.q_low)

    def with_params(self, p: dict) -> JointLimits:
        """These limits with the ones given as flat ROS parameters; checked."""
        out = JointLimits(**{f.name: getattr(self, f.name) for f in fields(JointLimits)})
        for f in fields(JointLimits):
            v = p.get(f.name)
            if v is not None and not (isinstance(v, list) and len(v) == 0):
                setattr(out, f.name, np.asarray(v, dtype=np.float64) if isinstance(v, (list, tuple)) else float(v))
        for name in ("q_low", "q_high", "max_lead", "max_speed"):
            if getattr(out, name).shape != (self.n,):
                raise ValueError(f"limit '{name}' needs {self.n} values (one per joint)")
        if (out.workspace_low is None) != (out.workspace_high is None):
            raise ValueError("give both workspace_low and workspace_high, or neither")
        if out.workspace_low is not None:
            for name in ("workspace_low", "workspace_high"):
                if getattr(out, name).shape != (3,):
                    raise ValueError(f"limit '{name}' needs 3 values (x, y, z)")
            if np.any(out.workspace_low > out.workspace_high):
                raise ValueError("a low limit exceeds its high limit")
        if np.any(out.q_low > out.q_high):
            raise ValueError("a low limit exceeds its high limit")
        if np.any(out.max_lead <= 0) or np.any(out.max_speed <= 0):
            raise ValueError("max_lead and max_speed must be positive")
        return out


def arm_limits() -> JointLimits:
    """A Franka-like arm: joint limits less 0.05 rad, fingers 0..0.04 m; Franka's joint speed limits."""
    return JointLimits(
        q_low=np.array([-2.8473, -1.7128, -2.8473, -3.0218, -2.8473, 0.0325, -2.8473, 0.0, 0.0]),
        q_high=np.array([2.8473, 1.7128, 2.8473, -0.1198, 2.8473, 3.7025, 2.8473, 0.04, 0.04]),
        max_lead=np.array([0.2] * 7 + [0.05, 0.05]),
        max_speed=np.array([2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61, 0.2, 0.2]),
        workspace_low=np.array([0.1, -0.7, 0.005]),
        workspace_high=np.array([0.95, 0.7, 1.0]),
    )


def go1_limits() -> JointLimits:
    """A Go1: the URDF joint limits (hip, thigh, calf per leg, FR FL RR RL); targets may lead the joints
    by 0.6 rad (a trot's swing) and move at 20 rad/s (the motors' no-load speed is ~30 rad/s)."""
    return JointLimits(
        q_low=np.array([-0.863, -0.686, -2.818] * 4),
        q_high=np.array([0.863, 4.501, -0.888] * 4),
        max_lead=np.full(12, 0.6),
        max_speed=np.full(12, 20.0),
    )


# ----- limiters: each returns the changed targets and whether it changed anything -----
def clip_joints(q: np.ndarray, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, bool]:
    out = np.clip(q, low, high)
    return out, bool(np.any(out != q))


def limit_lead(q: np.ndarray, measured: np.ndarray, max_lead: np.ndarray) -> tuple[np.ndarray, bool]:
    out = measured + np.clip(q - measured, -max_lead, max_lead)
    return out, bool(np.any(np.abs(out - q) > 1e-12))


def limit_speed(q: np.ndarray, prev: np.ndarray | None, dt: float, max_speed: np.ndarray) -> tuple[np.ndarray, bool]:
    if prev is None or dt <= 0:
        return q, False
    out = prev + np.clip(q - prev, -max_speed * dt, max_speed * dt)
    return out, bool(np.any(np.abs(out - q) > 1e-12))


def outside_box(p: np.ndarray, low: np.ndarray, high: np.ndarray, margin: float = 0.0) -> str | None:
    for i, axis in enumerate("xyz"):
        if p[i] < low[i] - margin or p[i] > high[i] + margin:
            return f"TCP {axis} = {p[i]:.3f} m outside [{low[i]:.3f}, {high[i]:.3f}] m"
    return None


def filter_targets(
    action: np.ndarray,
    measured: np.ndarray,
    prev: np.ndarray | None,
    dt: float,
    limits: JointLimits,
    tcp_position: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, dict[str, bool], str | None]:
    """A policy's joint targets through the limits, in the safety node's order: (targets sent, which limiter changed
    them: joint, lead, speed, workspace; why the pose was refused, or None). A pose whose TCP (tcp_position of the
    arm joints) leaves the workspace is refused: the previous targets are kept, or the measured joints."""
    cmd, joint = clip_joints(action, limits.q_low, limits.q_high)
    cmd, lead = limit_lead(cmd, measured, limits.max_lead)
    cmd, speed = limit_speed(cmd, prev, dt, limits.max_speed)
    refused = None
    if tcp_position is not None:
        refused = outside_box(tcp_position(cmd[:7]), limits.workspace_low, limits.workspace_high)
        if refused:
            cmd = prev if prev is not None else np.asarray(measured, dtype=np.float64).copy()
    return cmd, {"joint": joint, "lead": lead, "speed": speed, "workspace": refused is not None}, refused
