"""Arm kinematics and differential IK for the deploy runtime, in numpy only.

A twin of the simulator's sim/robots/diff_ik.py (same maths, same order of operations), built from
the ik section a policy bundle carries, so a robot turns ee_pose / ee_position / joint actions into
the joint position targets the policy was trained with: what a Franka joint impedance controller or
a ros2_control forward position controller receives. No torch, no simulator: this runs on the robot.

Frames: modified (Craig) DH, T_i = RotX(alpha_{i-1}) TransX(a_{i-1}) RotZ(q_i) TransZ(d_i), robot
base frame; flange = last joint frame + flange_d along z; TCP = flange, RotZ(hand_yaw), tcp_d along z.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ARM_ACTION_MODES = ("ee_pose", "ee_position", "joint")
# What each action mode does with the TCP orientation (the bundle's extra.ik_orientation must agree).
ORIENTATION_BY_MODE = {"ee_pose": "delta", "ee_position": "hold_start", "joint": "none"}
IK_KINDS = ("damped_least_squares",)
INTEGRATE_ON = ("previous_target",)


# -- the ik section -------------------------------------------------------------------------------
def _number(d: dict, key: str, where: str, minimum: float | None = None) -> float:
    if key not in d:
        raise ValueError(f"{where}.{key} is missing")
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{where}.{key} must be a finite number, got {v!r}")
    if minimum is not None and v < minimum:
        raise ValueError(f"{where}.{key} must be >= {minimum}, got {v!r}")
    return float(v)


def _vector(d: dict, key: str, where: str, n: int) -> np.ndarray:
    if key not in d:
        raise ValueError(f"{where}.{key} is missing")
    try:
        v = np.asarray(d[key], dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where}.{key} must be a list of {n} numbers, got {d[key]!r}") from None
    if v.shape != (n,) or not np.all(np.isfinite(v)):
        raise ValueError(f"{where}.{key} must be a list of {n} finite numbers, got {d[key]!r}")
    return v


def _choice(d: dict, key: str, where: str, allowed: tuple[str, ...]) -> str:
    if key not in d:
        raise ValueError(f"{where}.{key} is missing")
    if d[key] not in allowed:
        raise ValueError(f"{where}.{key} is {d[key]!r}; this runtime supports {', '.join(allowed)}")
    return str(d[key])


@dataclass(frozen=True)
class IKSpec:
    """The bundle's ik section (DiffIK.spec() in the simulator), validated."""

    dh: np.ndarray  # (dof, 3): a, d, alpha per joint
    flange_d: float
    hand_yaw: float
    tcp_d: float
    q_low: np.ndarray  # the arm's joint limits, before limit_margin
    q_high: np.ndarray
    q_home: np.ndarray
    damping: float
    max_pos_step: float
    max_rot_step: float
    max_joint_step: float
    null_gain: float
    limit_margin: float
    max_target_lead: float

    @property
    def dof(self) -> int:
        return len(self.dh)

    @staticmethod
    def from_dict(d: object, where: str = "extra.ik") -> IKSpec:
        """Raises ValueError naming the first missing or malformed field (e.g. 'extra.ik.damping is missing')."""
        if not isinstance(d, dict):
            raise ValueError(f"{where} must be a mapping (the simulator's DiffIK.spec()), got {d!r}")
        _choice(d, "kind", where, IK_KINDS)
        _choice(d, "integrate_on", where, INTEGRATE_ON)
        rows = d.get("dh_modified")
        if rows is None:
            raise ValueError(f"{where}.dh_modified is missing")
        try:
            dh = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError):
            dh = None
        if dh is None or dh.ndim != 2 or dh.shape[0] < 1 or dh.shape[1] != 3 or not np.all(np.isfinite(dh)):
            raise ValueError(f"{where}.dh_modified must be a list of [a, d, alpha] rows, got {rows!r}")
        n = len(dh)
        spec = IKSpec(
            dh=dh,
            flange_d=_number(d, "flange_d", where),
            hand_yaw=_number(d, "hand_yaw", where),
            tcp_d=_number(d, "tcp_d", where),
            q_low=_vector(d, "q_low", where, n),
            q_high=_vector(d, "q_high", where, n),
            q_home=_vector(d, "q_home", where, n),
            damping=_number(d, "damping", where, 0.0),
            max_pos_step=_number(d, "max_pos_step", where, 0.0),
            max_rot_step=_number(d, "max_rot_step", where, 0.0),
            max_joint_step=_number(d, "max_joint_step", where, 0.0),
            null_gain=_number(d, "null_gain", where, 0.0),
            limit_margin=_number(d, "limit_margin", where, 0.0),
            max_target_lead=_number(d, "max_target_lead", where, 0.0),
        )
        if np.any(spec.q_low + spec.limit_margin >= spec.q_high - spec.limit_margin):
            raise ValueError(f"{where}.q_low must lie below q_high by more than 2 * limit_margin")
        return spec


# -- kinematics -----------------------------------------------------------------------------------
@dataclass
class Kinematics:
    """Forward kinematics of a batch of configurations, in the robot base frame."""

    joint_origins: np.ndarray  # (n, dof, 3) origin of joint frame i (on its axis)
    joint_axes: np.ndarray  # (n, dof, 3) unit z axis of joint frame i (the rotation axis)
    flange: np.ndarray  # (n, 4, 4)
    tcp: np.ndarray  # (n, 4, 4)


def _dh_transform(a: float, d: float, alpha: float, q: np.ndarray) -> np.ndarray:
    """(n, 4, 4) transforms RotX(alpha) TransX(a) RotZ(q) TransZ(d)."""
    ca, sa = math.cos(alpha), math.sin(alpha)
    cq, sq = np.cos(q), np.sin(q)
    z, o = np.zeros_like(q), np.ones_like(q)
    rows = [
        [cq, -sq, z, z + a],
        [sq * ca, cq * ca, z - sa, z - sa * d],
        [sq * sa, cq * sa, z + ca, z + ca * d],
        [z, z, z, o],
    ]
    return np.stack([np.stack(r, axis=-1) for r in rows], axis=-2)


def _const_transform(d: float, yaw: float = 0.0) -> np.ndarray:
    t = np.eye(4)
    t[0, 0], t[0, 1], t[1, 0], t[1, 1] = math.cos(yaw), -math.sin(yaw), math.sin(yaw), math.cos(yaw)
    t[2, 3] = d
    return t


def forward_kinematics(spec: IKSpec, q: np.ndarray) -> Kinematics:
    """q: (n, dof) joint positions -> joint frames, flange and TCP in the robot base frame."""
    q = np.asarray(q, dtype=np.float64)
    t = np.broadcast_to(np.eye(4), (q.shape[0], 4, 4))
    origins, axes = [], []
    for i, (a, d, alpha) in enumerate(spec.dh):
        t = t @ _dh_transform(float(a), float(d), float(alpha), q[:, i])
        origins.append(t[:, :3, 3])
        axes.append(t[:, :3, 2])
    flange = t @ _const_transform(spec.flange_d)
    tcp = flange @ _const_transform(spec.tcp_d, spec.hand_yaw)
    return Kinematics(np.stack(origins, 1), np.stack(axes, 1), flange, tcp)


def tcp_jacobian(kin: Kinematics) -> np.ndarray:
    """(n, 6, dof) geometric Jacobian of the TCP: rows vx, vy, vz, wx, wy, wz (base frame)."""
    p = kin.tcp[:, None, :3, 3]
    jv = np.cross(kin.joint_axes, p - kin.joint_origins)
    return np.concatenate([jv, kin.joint_axes], axis=-1).transpose(0, 2, 1)


def orientation_error(r_goal: np.ndarray, r_cur: np.ndarray) -> np.ndarray:
    """(n, 3) rotation vector taking r_cur to r_goal for small errors: 0.5 sum_k cur_k x goal_k."""
    return 0.5 * np.cross(r_cur.transpose(0, 2, 1), r_goal.transpose(0, 2, 1)).sum(axis=1)


def quat_xyzw_from_rotmat(r: np.ndarray) -> np.ndarray:
    """(n, 4) unit quaternions, ROS order xyzw, w >= 0 (Shepperd's method, as the simulator reports them)."""
    m = r
    tr = m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2]
    cand = np.stack(
        [
            np.stack([m[:, 2, 1] - m[:, 1, 2], m[:, 0, 2] - m[:, 2, 0], m[:, 1, 0] - m[:, 0, 1], 1 + tr], 1),
            np.stack(
                [
                    1 + m[:, 0, 0] - m[:, 1, 1] - m[:, 2, 2],
                    m[:, 0, 1] + m[:, 1, 0],
                    m[:, 0, 2] + m[:, 2, 0],
                    m[:, 2, 1] - m[:, 1, 2],
                ],
                1,
            ),
            np.stack(
                [
                    m[:, 0, 1] + m[:, 1, 0],
                    1 - m[:, 0, 0] + m[:, 1, 1] - m[:, 2, 2],
                    m[:, 1, 2] + m[:, 2, 1],
                    m[:, 0, 2] - m[:, 2, 0],
                ],
                1,
            ),
            np.stack(
                [
                    m[:, 0, 2] + m[:, 2, 0],
                    m[:, 1, 2] + m[:, 2, 1],
                    1 - m[:, 0, 0] - m[:, 1, 1] + m[:, 2, 2],
                    m[:, 1, 0] - m[:, 0, 1],
                ],
                1,
            ),
        ],
        axis=1,
    )
    diag = np.stack([tr, m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]], 1)
    q = cand[np.arange(len(m)), diag.argmax(axis=1)]
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    return q * np.where(q[:, 3:4] < 0, -1.0, 1.0)


def _clip_norm(v: np.ndarray, max_norm: float) -> np.ndarray:
    norm = np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    return v * np.minimum(max_norm / norm, 1.0)


# -- differential IK ------------------------------------------------------------------------------
class DiffIK:
    """Damped least squares with a null-space pull to q_home, per-step clips and a joint-limit pass.

    Mirrors the simulator's DiffIK step for step; see there for why each piece exists.
    """

    def __init__(self, spec: IKSpec):
        self.spec = spec
        self.q_low = spec.q_low + spec.limit_margin
        self.q_high = spec.q_high - spec.limit_margin
        self.q_home = spec.q_home

    def reference(self, q_target: np.ndarray, q_measured: np.ndarray) -> np.ndarray:
        """Where the next step starts: the previous target, kept within max_target_lead of the measured joints."""
        lead = self.spec.max_target_lead
        return q_measured + np.clip(q_target - q_measured, -lead, lead)

    def solve(self, q: np.ndarray, kin: Kinematics, d_pos: np.ndarray, d_rot: np.ndarray) -> np.ndarray:
        """Joint targets (n, dof) that move the TCP by d_pos (m) and rotate it by d_rot (rad, base frame)."""
        s = self.spec
        jac = tcp_jacobian(kin)
        dp = _clip_norm(d_pos, s.max_pos_step)
        dr = _clip_norm(d_rot, s.max_rot_step)
        err = np.concatenate([dp, dr], axis=1)[:, :, None]
        dq = self._dls(q, jac, err)
        # one clamping pass: freeze the joints that would cross a limit and re-solve with the others
        blocked = ((q + dq > self.q_high) & (dq > 0)) | ((q + dq < self.q_low) & (dq < 0))
        if blocked.any():
            dq = np.where(blocked, 0.0, self._dls(q, jac * (~blocked)[:, None, :], err))
        dq = np.clip(dq, -s.max_joint_step, s.max_joint_step)
        return np.maximum(np.minimum(q + dq, self.q_high), self.q_low)

    def _dls(self, q: np.ndarray, jac: np.ndarray, err: np.ndarray) -> np.ndarray:
        s = self.spec
        jt = jac.transpose(0, 2, 1)
        jjt = jac @ jt + (s.damping**2) * np.eye(6)
        j_pinv = jt @ np.linalg.inv(jjt)  # (n, dof, 6)
        dq = (j_pinv @ err)[:, :, 0]
        null = np.eye(s.dof) - j_pinv @ jac
        return dq + (null @ (s.null_gain * (self.q_home - q))[:, :, None])[:, :, 0]


# -- what the runtime keeps between control steps ---------------------------------------------------
def _batch(x: np.ndarray, width: int, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.shape[-1] != width or x.ndim not in (1, 2):
        raise ValueError(f"{name} must have shape ({width},) or (n, {width}), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} is not finite: {x}")
    return x.reshape(-1, width)


class ArmController:
    """Command (action units) + measured joints -> joint position targets (dof joints, then the fingers).

    Keeps the previous joint target (the IK integrates on it) and, for ee_position, the TCP
    orientation at the start of the episode (held throughout); reset() forgets both, and the next
    step re-anchors on the measured joints, as the simulator does at an episode's start.
    """

    def __init__(self, mode: str, spec: IKSpec, fingers: int, open_m: float):
        if mode not in ARM_ACTION_MODES:
            raise ValueError(f"action mode '{mode}' is not an arm mode ({', '.join(ARM_ACTION_MODES)})")
        self.mode = mode
        self.spec = spec
        self.ik = DiffIK(spec)
        self.fingers = fingers
        self.open_m = open_m
        self.prev_target: np.ndarray | None = None  # (n, dof)
        self.rot_ref: np.ndarray | None = None  # (n, 3, 3)

    @property
    def command_dim(self) -> int:
        return {"ee_pose": 7, "ee_position": 4, "joint": self.spec.dof + 1}[self.mode]

    @staticmethod
    def from_bundle(mode: str, extra: object) -> ArmController:
        """From a bundle's action mode and extra section. Raises ValueError naming the bad field."""
        if not isinstance(extra, dict):
            raise ValueError(f"extra must be a mapping holding the arm's ik and gripper sections, got {extra!r}")
        if extra.get("ik") is None:
            raise ValueError(f"extra.ik is missing: an arm bundle ({mode} actions) needs the IK spec and joint limits")
        spec = IKSpec.from_dict(extra["ik"])
        want = ORIENTATION_BY_MODE[mode]
        got = extra.get("ik_orientation")
        if got != want:
            raise ValueError(f"extra.ik_orientation is {got!r}; {mode} actions need {want!r}")
        grip = extra.get("gripper")
        if not isinstance(grip, dict):
            raise ValueError(f"extra.gripper must be a mapping with fingers and open_m, got {grip!r}")
        fingers = grip.get("fingers")
        if isinstance(fingers, bool) or not isinstance(fingers, int) or fingers < 0:
            raise ValueError(f"extra.gripper.fingers must be a non-negative integer, got {fingers!r}")
        open_m = _number(grip, "open_m", "extra.gripper", 0.0)
        home = extra.get("default_joint_position")
        if home is not None:
            _vector(extra, "default_joint_position", "extra", spec.dof)
        return ArmController(mode, spec, fingers, open_m)

    def reset(self) -> None:
        self.prev_target = None
        self.rot_ref = None

    def joint_targets(self, command: np.ndarray, q_measured: np.ndarray) -> np.ndarray:
        """One control step: (dof + fingers,) or (n, dof + fingers) joint position targets (rad, m per finger)."""
        single = np.ndim(command) == 1
        cmd = _batch(command, self.command_dim, "arm command")
        q_meas = _batch(q_measured, self.spec.dof, "joint_position")
        if len(cmd) != len(q_meas):
            raise ValueError(f"{len(cmd)} commands for {len(q_meas)} measured joint vectors")
        if self.prev_target is None or self.prev_target.shape != q_meas.shape:
            # episode start: the target is where the arm is; the held orientation is its TCP's
            self.prev_target = q_meas.copy()
            self.rot_ref = forward_kinematics(self.spec, q_meas).tcp[:, :3, :3].copy()
        dof, ik = self.spec.dof, self.ik
        q = ik.reference(self.prev_target, q_meas)
        if self.mode == "joint":
            q_des = np.maximum(np.minimum(q + cmd[:, :dof], ik.q_high), ik.q_low)
        else:
            kin = forward_kinematics(self.spec, q)
            if self.mode == "ee_pose":
                d_rot = cmd[:, 3:6]
            else:
                d_rot = orientation_error(self.rot_ref, kin.tcp[:, :3, :3])
            q_des = ik.solve(q, kin, cmd[:, 0:3], d_rot)
        self.prev_target = q_des
        finger = 0.5 * self.open_m * (cmd[:, -1:] + 1.0)
        out = np.concatenate([q_des] + [finger] * self.fingers, axis=1)
        return out[0] if single else out

    def tcp_state(self, q_measured: np.ndarray) -> dict[str, np.ndarray]:
        """ee_position (m) and ee_quaternion (xyzw) from FK of the reported joints, as the simulator reports them."""
        single = np.ndim(q_measured) == 1
        tcp = forward_kinematics(self.spec, _batch(q_measured, self.spec.dof, "joint_position")).tcp
        pos, quat = tcp[:, :3, 3].copy(), quat_xyzw_from_rotmat(tcp[:, :3, :3])
        return {"ee_position": pos[0] if single else pos, "ee_quaternion": quat[0] if single else quat}


__all__ = [
    "ARM_ACTION_MODES",
    "ArmController",
    "DiffIK",
    "IKSpec",
    "Kinematics",
    "forward_kinematics",
    "orientation_error",
    "quat_xyzw_from_rotmat",
    "tcp_jacobian",
]
