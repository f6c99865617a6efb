"""Our raw-state names as the other tools label them: LEAPP semantic kinds, mjlab observation terms, joint names.

A raw input is what robot_rl.deploy's observation layout reads (joint_position, quaternion, ...); these tables
say which LEAPP `kind` (leapp.utils.enums) or mjlab term means the same quantity in the same frame and units.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.tasks.quadruped import constants as go1
from sim.tasks.quadruped.velocity import QuadrupedVelocity
from sim.tasks.quadruped.velocity_config import COMMAND_NAMES, RAW_INPUTS

# raw input -> LEAPP kind (leapp.InputKindEnum values); the body-frame velocities of a legged robot's estimator
RAW_TO_KIND = {
    "joint_position": "state/joint/position",
    "joint_velocity": "state/joint/velocity",
    "angular_velocity": "state/body/angular_velocity",
    "base_linear_velocity": "state/body/linear_velocity",
    "quaternion": "state/body/rotation",
    "command": "command/body/velocity",
}
KIND_TO_RAW = {v: k for k, v in RAW_TO_KIND.items()}
# names other exporters give the same inputs when they carry no kind (Isaac Lab's data properties, mjlab's terms)
NAME_TO_RAW = {
    "joint_pos": "joint_position",
    "joint_vel": "joint_velocity",
    "root_ang_vel_b": "angular_velocity",
    "base_ang_vel": "angular_velocity",
    "root_lin_vel_b": "base_linear_velocity",
    "base_lin_vel": "base_linear_velocity",
    "root_quat_w": "quaternion",
    **{k: k for k in RAW_TO_KIND},
}
PROJECTED_GRAVITY = ("projected_gravity", "projected_gravity_b")  # computed from the attitude, not measured
TARGET_JOINT_POSITION = "target/joint/position"  # leapp.OutputKindEnum.JOINT_POSITION
QUAT_XYZW = ("x", "y", "z", "w")  # our raw order (robot_conventions.frames); MuJoCo and Isaac Lab write w first


def joint_key(name: str) -> str:
    """A joint name without the suffixes exporters add: FR_hip_joint (mjlab, URDF), FR_hip_rad (our action names)."""
    for suffix in ("_joint", "_rad"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


@dataclass(frozen=True)
class TargetRobot:
    """One of our robots as an import target: what a bundle for it must say and what its runtime measures."""

    robot: str
    task: str
    joint_names: tuple[str, ...]
    joint_low: tuple[float, ...]
    joint_high: tuple[float, ...]
    torque_limit: tuple[float, ...]
    command_names: tuple[str, ...]
    raw_inputs: dict

    @property
    def action_names(self) -> list[str]:
        return [f"{j}_rad" for j in self.joint_names]


GO1_LIKE = TargetRobot(
    robot=QuadrupedVelocity.robot,
    task=QuadrupedVelocity.name,
    joint_names=tuple(go1.JOINT_NAMES),
    joint_low=tuple(go1.JOINT_LOW),
    joint_high=tuple(go1.JOINT_HIGH),
    torque_limit=tuple(go1.TORQUE_LIMIT),
    command_names=tuple(COMMAND_NAMES),
    raw_inputs=dict(RAW_INPUTS),
)
# the robots a foreign policy can be imported onto today (the arm and the Crazyflie have no mapping yet)
TARGETS = {GO1_LIKE.robot: GO1_LIKE}
