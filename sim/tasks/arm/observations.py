"""Observation terms of the arm tasks, their noise and the camera images.

Raw state (what a real arm + perception report): joint_position, joint_velocity (rad, rad/s),
gripper_width (m), ee_position (m) and ee_quaternion (xyzw) from FK of the reported joints,
target_position / object_position / object_quaternion / goal_position (m, base frame), last_action.
Each task's obs_layout is ARM_TERMS + its own terms + last_action_term; the layout is written into the
policy bundle, so the deploy runtime builds the same vector.
"""

from __future__ import annotations

import torch

ARM_TERMS = [
    {"name": "joint_position", "op": "identity", "inputs": ["joint_position"], "dim": 7, "scale": 1.0, "clip": 4.0},
    {"name": "joint_velocity", "op": "identity", "inputs": ["joint_velocity"], "dim": 7, "scale": 0.2, "clip": 5.0},
    {"name": "gripper_width", "op": "identity", "inputs": ["gripper_width"], "dim": 1, "scale": 10.0, "clip": 1.0},
    {"name": "ee_position", "op": "identity", "inputs": ["ee_position"], "dim": 3, "scale": 1.0, "clip": 2.0},
    {"name": "ee_rotation", "op": "rotmat_from_quat_xyzw", "inputs": ["ee_quaternion"], "dim": 9, "scale": 1.0,
     "clip": 1.0},
]  # fmt: skip

# the push and pick-and-place tasks' terms (reach has its own, in reach.py)
OBJECT_TERMS = [
    {"name": "object_error", "op": "difference", "inputs": ["object_position", "ee_position"], "dim": 3,
     "scale": 5.0, "clip": 3.0},
    {"name": "goal_error", "op": "difference", "inputs": ["goal_position", "object_position"], "dim": 3,
     "scale": 3.0, "clip": 3.0},
    {"name": "object_position", "op": "identity", "inputs": ["object_position"], "dim": 3, "scale": 1.0, "clip": 2.0},
    {"name": "object_rotation", "op": "rotmat_from_quat_xyzw", "inputs": ["object_quaternion"], "dim": 9,
     "scale": 1.0, "clip": 1.0},
]  # fmt: skip

# drawn in this order (it fixes the random stream)
OBS_NOISE_STD = {
    "joint_position": 0.001,  # rad; encoders are better, this covers calibration
    "joint_velocity": 0.02,
    "object_position": 0.004,  # m; a tag / pose estimator's noise
    "object_quaternion": 0.01,
    "target_position": 0.0,  # the commanded goal is known exactly
    "goal_position": 0.004,
}


def last_action_term(dim: int) -> dict:
    return {"name": "last_action", "op": "identity", "inputs": ["last_action"], "dim": dim, "scale": 1.0, "clip": 1.0}


def add_noise(raw: dict[str, torch.Tensor], rng: torch.Generator) -> None:
    """Add the sensors' Gaussian noise (OBS_NOISE_STD) to the raw state in place."""
    for key, std in OBS_NOISE_STD.items():
        if std > 0:
            x = raw[key]
            raw[key] = x + std * torch.randn(x.shape, generator=rng, dtype=torch.float64, device=x.device)


def render_images(backend, camera: str, size: int, kind: str) -> torch.Tensor:
    """(n, C, size, size) float32 images of every world from one camera (the backend's render_all): RGB in [0, 1],
    or depth in metres / 2 clipped to [0, 1]."""
    x = backend.render_all(camera, size, size, kind)
    if kind == "rgb":
        return x.permute(0, 3, 1, 2)
    return (x / 2.0).clamp(0.0, 1.0).unsqueeze(1)
