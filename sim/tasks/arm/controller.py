"""How arm actions become servo targets: the action modes, the differential IK step and what a deploy
runtime needs to repeat it (the same maths from joint positions, sim.robots.diff_ik)."""

from __future__ import annotations

import torch

from sim.robots.diff_ik import PANDA_Q_HOME, DiffIK, forward_kinematics, orientation_error
from sim.tasks.arm.scene import ARM_DOF, FINGER_OPEN

# policy action in [-1, 1] -> command units: raw = offset + scale * a, clipped to [low, high].
# The gripper command is absolute: -1 closed, +1 open (each finger at 0.02 * (g + 1) m).
ACTION_SPECS = {
    "ee_pose": {  # TCP translation (m) and rotation vector (rad) per control step, base frame
        "names": ["dx_m", "dy_m", "dz_m", "drx_rad", "dry_rad", "drz_rad", "gripper"],
        "offset": [0.0] * 7,
        "scale": [0.03, 0.03, 0.03, 0.15, 0.15, 0.15, 1.0],
        "low": [-0.03, -0.03, -0.03, -0.15, -0.15, -0.15, -1.0],
        "high": [0.03, 0.03, 0.03, 0.15, 0.15, 0.15, 1.0],
    },
    "ee_position": {  # TCP translation only; the IK holds the orientation the episode started with
        "names": ["dx_m", "dy_m", "dz_m", "gripper"],
        "offset": [0.0] * 4,
        "scale": [0.03, 0.03, 0.03, 1.0],
        "low": [-0.03, -0.03, -0.03, -1.0],
        "high": [0.03, 0.03, 0.03, 1.0],
    },
    "joint": {  # joint position deltas (rad) per control step
        "names": [f"dq{i + 1}_rad" for i in range(ARM_DOF)] + ["gripper"],
        "offset": [0.0] * 8,
        "scale": [0.1] * 7 + [1.0],
        "low": [-0.1] * 7 + [-1.0],
        "high": [0.1] * 7 + [1.0],
    },
}


def servo_targets(
    ik: DiffIK,
    action_mode: str,
    prev_target: torch.Tensor,
    q_measured: torch.Tensor,
    rot_ref: torch.Tensor,
    cmd: torch.Tensor,
) -> torch.Tensor:
    """Servo targets (n, 9) from commands (n, num_actions): 7 joints from the IK (or joint deltas), then
    the two fingers.

    Commands integrate on the previous joint targets prev_target (n, 7), re-anchored to within
    ik.max_target_lead of the measured joints, so a command means the same displacement whatever the
    servo lag (DiffIK.reference). rot_ref (n, 3, 3) is the orientation ee_position mode holds."""
    q = ik.reference(prev_target, q_measured)
    if action_mode == "joint":
        q_des = torch.maximum(torch.minimum(q + cmd[:, :ARM_DOF], ik.q_high), ik.q_low)
    else:
        kin = forward_kinematics(q)
        rot = kin.tcp[:, :3, :3]
        if action_mode == "ee_pose":
            d_rot = cmd[:, 3:6]
        else:  # hold the episode's start orientation
            d_rot = orientation_error(rot_ref, rot)
        q_des = ik.solve(q, kin, cmd[:, 0:3], d_rot)
    finger = 0.5 * FINGER_OPEN * (cmd[:, -1:] + 1.0)
    return torch.cat([q_des, finger, finger], dim=1)


def deploy_spec(ik: DiffIK, action_mode: str) -> dict:
    """What a deploy runtime needs beyond the observation layout: the IK that turns ee_* actions into joint
    targets (same DH table and damping), the start pose and the gripper mapping."""
    return {
        "ik": ik.spec(),  # joint mode too: the runtime integrates joint deltas within its limits
        "ik_orientation": {"ee_pose": "delta", "ee_position": "hold_start"}.get(action_mode, "none"),
        "default_joint_position": list(PANDA_Q_HOME),
        "gripper": {"command": "finger_m = 0.02 * (gripper + 1)", "fingers": 2, "open_m": FINGER_OPEN},
        "servo": "joint position targets q_des = IK(q_ref, action), integrated on the previous target: "
        "q_ref = q_measured + clip(q_des_prev - q_measured, +-ik.max_target_lead) (joint mode: "
        "q_des = q_ref + action); Franka joint impedance or ros2_control forward position controller",
    }
