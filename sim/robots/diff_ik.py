"""Panda kinematics from the published modified DH table, and batched differential IK in torch.

Independent of the MJCF on purpose: assets/arm/panda.xml is written from the same table, and the
tests check the two agree (flange and TCP within 1 mm). Working from joint positions alone also
keeps the IK backend-agnostic and lets the deploy runtime run the same maths on a real arm, whose
controller reports joint positions (franka_ros: /joint_states).

Frames: modified (Craig) DH, T_i = RotX(alpha_{i-1}) TransX(a_{i-1}) RotZ(q_i) TransZ(d_i); robot
base at the world origin (the scene bolts it there); the TCP is the Franka hand's: flange, then
RotZ(-pi/4), then 0.1034 m along z.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from robot_conventions.options import NONNEG, POSITIVE, option

# Franka Emika "Robot and interface specifications": (a, d, alpha) per joint, then the flange.
PANDA_DH = (
    (0.0, 0.333, 0.0),
    (0.0, 0.0, -math.pi / 2),
    (0.0, 0.316, math.pi / 2),
    (0.0825, 0.0, math.pi / 2),
    (-0.0825, 0.384, -math.pi / 2),
    (0.0, 0.0, math.pi / 2),
    (0.088, 0.0, math.pi / 2),
)
PANDA_FLANGE_D = 0.107
PANDA_HAND_YAW = -math.pi / 4
PANDA_TCP_D = 0.1034
PANDA_Q_LOW = (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973)
PANDA_Q_HIGH = (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973)
PANDA_Q_HOME = (0.0, -math.pi / 4, 0.0, -3 * math.pi / 4, 0.0, math.pi / 2, math.pi / 4)  # Franka "ready"


def _dh_transform(a: float, d: float, alpha: float, q: torch.Tensor) -> torch.Tensor:
    """(n, 4, 4) transforms RotX(alpha) TransX(a) RotZ(q) TransZ(d)."""
    ca, sa = math.cos(alpha), math.sin(alpha)
    cq, sq = torch.cos(q), torch.sin(q)
    z, o = torch.zeros_like(q), torch.ones_like(q)
    rows = [
        [cq, -sq, z, z + a],
        [sq * ca, cq * ca, z - sa, z - sa * d],
        [sq * sa, cq * sa, z + ca, z + ca * d],
        [z, z, z, o],
    ]
    return torch.stack([torch.stack(r, dim=-1) for r in rows], dim=-2)


def _const_transform(n: int, d: float, yaw: float = 0.0, dtype=torch.float64, device=None) -> torch.Tensor:
    t = torch.eye(4, dtype=dtype, device=device)
    t[0, 0], t[0, 1], t[1, 0], t[1, 1] = math.cos(yaw), -math.sin(yaw), math.sin(yaw), math.cos(yaw)
    t[2, 3] = d
    return t.expand(n, 4, 4)


@dataclass
class Kinematics:
    """Forward kinematics of a batch of configurations: joint frames, flange and TCP."""

    joint_origins: torch.Tensor  # (n, 7, 3) origin of joint frame i (on its axis)
    joint_axes: torch.Tensor  # (n, 7, 3) unit z axis of joint frame i (the rotation axis)
    flange: torch.Tensor  # (n, 4, 4)
    tcp: torch.Tensor  # (n, 4, 4)


def forward_kinematics(q: torch.Tensor) -> Kinematics:
    """q: (n, 7) joint positions -> frames in the robot base frame."""
    n = q.shape[0]
    t = torch.eye(4, dtype=q.dtype, device=q.device).expand(n, 4, 4)
    origins, axes = [], []
    for i, (a, d, alpha) in enumerate(PANDA_DH):
        t = t @ _dh_transform(a, d, alpha, q[:, i])
        origins.append(t[:, :3, 3])
        axes.append(t[:, :3, 2])
    flange = t @ _const_transform(n, PANDA_FLANGE_D, dtype=q.dtype, device=q.device)
    tcp = flange @ _const_transform(n, PANDA_TCP_D, PANDA_HAND_YAW, dtype=q.dtype, device=q.device)
    return Kinematics(torch.stack(origins, 1), torch.stack(axes, 1), flange, tcp)


def tcp_jacobian(kin: Kinematics) -> torch.Tensor:
    """(n, 6, 7) geometric Jacobian of the TCP: rows vx, vy, vz, wx, wy, wz (base frame)."""
    p = kin.tcp[:, :3, 3].unsqueeze(1)
    jv = torch.cross(kin.joint_axes, p - kin.joint_origins, dim=-1)
    return torch.cat([jv, kin.joint_axes], dim=-1).transpose(1, 2)


def orientation_error(r_goal: torch.Tensor, r_cur: torch.Tensor) -> torch.Tensor:
    """(n, 3) rotation vector taking r_cur to r_goal for small errors: 0.5 sum_k cur_k x goal_k.

    Siciliano et al., Robotics (2009), eq. 3.85; correct in direction for errors below 90 degrees,
    which per-step deltas never approach, and free of the branches of an exact log map.
    """
    return 0.5 * torch.cross(r_cur.transpose(1, 2), r_goal.transpose(1, 2), dim=-1).sum(dim=1)


def rotation_from_vector(w: torch.Tensor) -> torch.Tensor:
    """(n, 3, 3) rotation matrices from rotation vectors (Rodrigues)."""
    angle = w.norm(dim=1).clamp(min=1e-12)
    k = w / angle.unsqueeze(1)
    kx, ky, kz = k.unbind(1)
    z = torch.zeros_like(kx)
    kmat = torch.stack([z, -kz, ky, kz, z, -kx, -ky, kx, z], dim=1).reshape(-1, 3, 3)
    s, c = torch.sin(angle)[:, None, None], torch.cos(angle)[:, None, None]
    eye = torch.eye(3, dtype=w.dtype, device=w.device).expand_as(kmat)
    return eye + s * kmat + (1 - c) * kmat @ kmat


def quat_xyzw_from_rotmat(r: torch.Tensor) -> torch.Tensor:
    """(n, 4) unit quaternions, ROS order xyzw, w >= 0 (Shepperd's method, branch by largest term)."""
    m = r
    tr = m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2]
    cand = torch.stack(
        [
            torch.stack([m[:, 2, 1] - m[:, 1, 2], m[:, 0, 2] - m[:, 2, 0], m[:, 1, 0] - m[:, 0, 1], 1 + tr], 1),
            torch.stack(
                [
                    1 + m[:, 0, 0] - m[:, 1, 1] - m[:, 2, 2],
                    m[:, 0, 1] + m[:, 1, 0],
                    m[:, 0, 2] + m[:, 2, 0],
                    m[:, 2, 1] - m[:, 1, 2],
                ],
                1,
            ),
            torch.stack(
                [
                    m[:, 0, 1] + m[:, 1, 0],
                    1 - m[:, 0, 0] + m[:, 1, 1] - m[:, 2, 2],
                    m[:, 1, 2] + m[:, 2, 1],
                    m[:, 0, 2] - m[:, 2, 0],
                ],
                1,
            ),
            torch.stack(
                [
                    m[:, 0, 2] + m[:, 2, 0],
                    m[:, 1, 2] + m[:, 2, 1],
                    1 - m[:, 0, 0] - m[:, 1, 1] + m[:, 2, 2],
                    m[:, 1, 0] - m[:, 0, 1],
                ],
                1,
            ),
        ],
        dim=1,
    )
    diag = torch.stack([tr, m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]], 1)
    q = cand[torch.arange(len(m), device=m.device), diag.argmax(dim=1)]
    q = q / q.norm(dim=1, keepdim=True)
    return q * torch.where(q[:, 3:4] < 0, -1.0, 1.0)


@dataclass
class DiffIK:
    """Damped least squares: dq = J^T (J J^T + lambda^2 I)^-1 e, plus a null-space pull to q_home.

    The pose error e is clipped per step, and the joint step too, so a large action never asks for
    a jump the servos cannot follow. These numbers travel in the policy bundle (ik section).

    Each step integrates on the previous joint target, not on the measured joints (see reference()):
    servos lag their targets by a few tens of ms, and an IK that re-aims from the measured joints
    every control step throws the lagging part of each command away (measured: a 1 cm TCP command
    then moves the TCP 0.34 cm).
    """

    damping: float = option(0.05, NONNEG)  # lambda: keeps steps bounded near singularities (stretched arm, q5 ~ 0)
    max_pos_step: float = option(0.05, POSITIVE)  # m per call
    max_rot_step: float = option(0.3, POSITIVE)  # rad per call
    max_joint_step: float = option(0.25, POSITIVE)  # rad per call
    null_gain: float = option(0.05, NONNEG)  # fraction of (q_home - q) per call, projected into the null space
    limit_margin: float = option(0.02, NONNEG)  # rad kept from each joint limit
    # rad: the integrated target stays within this of the measured joints
    max_target_lead: float = option(0.1, POSITIVE)

    def __post_init__(self):
        cpu = torch.device("cpu")  # a task moves them to its backend's device when attached (to_device)
        self.q_low = torch.tensor(PANDA_Q_LOW, dtype=torch.float64, device=cpu) + self.limit_margin
        self.q_high = torch.tensor(PANDA_Q_HIGH, dtype=torch.float64, device=cpu) - self.limit_margin
        self.q_home = torch.tensor(PANDA_Q_HOME, dtype=torch.float64, device=cpu)

    def to_device(self, device: torch.device) -> DiffIK:
        """Move the joint limits and home pose to `device` (in place; returns self)."""
        self.q_low, self.q_high, self.q_home = (t.to(device) for t in (self.q_low, self.q_high, self.q_home))
        return self

    def reference(self, q_target: torch.Tensor, q_measured: torch.Tensor) -> torch.Tensor:
        """The configuration the next step starts from: the previous joint target, so that a command
        means the same TCP displacement however far the servos lag; clamped per joint to within
        max_target_lead of the measured joints, so an arm that is blocked or pushed away re-anchors
        to where it is instead of winding its target up."""
        lead = self.max_target_lead
        return q_measured + (q_target - q_measured).clamp(-lead, lead)

    def solve(self, q: torch.Tensor, kin: Kinematics, d_pos: torch.Tensor, d_rot: torch.Tensor) -> torch.Tensor:
        """Joint targets (n, 7) that move the TCP by d_pos (m) and rotate it by d_rot (rad, base frame)."""
        jac = tcp_jacobian(kin)
        dp = _clip_norm(d_pos, self.max_pos_step)
        dr = _clip_norm(d_rot, self.max_rot_step)
        err = torch.cat([dp, dr], dim=1).unsqueeze(2)
        dq = self._dls(q, jac, err)
        # Clamping loop (one pass): a joint that would cross its limit is frozen and the others
        # re-solved without it; otherwise the saturated joint's share of the motion is silently
        # lost and the arm folds into its limits near the base.
        blocked = ((q + dq > self.q_high) & (dq > 0)) | ((q + dq < self.q_low) & (dq < 0))
        if bool(blocked.any()):
            dq = torch.where(blocked, 0.0, self._dls(q, jac * (~blocked).unsqueeze(1), err))
        dq = dq.clamp(-self.max_joint_step, self.max_joint_step)
        return torch.maximum(torch.minimum(q + dq, self.q_high), self.q_low)

    def _dls(self, q: torch.Tensor, jac: torch.Tensor, err: torch.Tensor) -> torch.Tensor:
        jjt = jac @ jac.transpose(1, 2) + (self.damping**2) * torch.eye(6, dtype=q.dtype, device=q.device)
        j_pinv = jac.transpose(1, 2) @ torch.linalg.inv(jjt)  # (n, 7, 6)
        dq = (j_pinv @ err).squeeze(2)
        null = torch.eye(7, dtype=q.dtype, device=q.device) - j_pinv @ jac
        return dq + (null @ (self.null_gain * (self.q_home - q)).unsqueeze(2)).squeeze(2)

    def spec(self) -> dict:
        """What a deploy runtime needs to run the same IK (written into the policy bundle)."""
        return {
            "kind": "damped_least_squares",
            "dh_modified": [list(r) for r in PANDA_DH],
            "flange_d": PANDA_FLANGE_D,
            "hand_yaw": PANDA_HAND_YAW,
            "tcp_d": PANDA_TCP_D,
            "q_low": list(PANDA_Q_LOW),
            "q_high": list(PANDA_Q_HIGH),
            "q_home": list(PANDA_Q_HOME),
            "damping": self.damping,
            "max_pos_step": self.max_pos_step,
            "max_rot_step": self.max_rot_step,
            "max_joint_step": self.max_joint_step,
            "null_gain": self.null_gain,
            "limit_margin": self.limit_margin,
            # q_ref = q_measured + clip(q_des_prev - q_measured, +-max_target_lead); q_des = step(q_ref)
            "integrate_on": "previous_target",
            "max_target_lead": self.max_target_lead,
        }


def _clip_norm(v: torch.Tensor, max_norm: float) -> torch.Tensor:
    norm = v.norm(dim=1, keepdim=True).clamp(min=1e-12)
    return v * (max_norm / norm).clamp(max=1.0)


__all__ = [
    "PANDA_DH",
    "PANDA_Q_HOME",
    "PANDA_Q_LOW",
    "PANDA_Q_HIGH",
    "DiffIK",
    "Kinematics",
    "forward_kinematics",
    "tcp_jacobian",
    "orientation_error",
    "rotation_from_vector",
    "quat_xyzw_from_rotmat",
]
