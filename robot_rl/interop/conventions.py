"""Our raw-state names as the other tools label them: LEAPP semantic kinds, mjlab observation terms, joint names.

A raw input is what robot_rl.deploy's observation layout reads (joint_position, quaternion, ...); these tables
say which LEAPP `kind` (leapp.utils.enums) or mjlab term means the same quantity in the same frame and units.
LEAPP kinds name a quantity, not its frame ("state/body/linear_velocity" is the body's velocity, in the world frame
for our Crazyflie, in the body frame for a legged robot's estimator), so each target robot keeps its own tables, and
an input's frame is read from its `frame` field or an Isaac Lab name suffix (_w, _b) and checked against ours.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.tasks.crazyflie.hover import CrazyflieHover
from sim.tasks.crazyflie.hover_config import ACTION_SPECS as CRAZYFLIE_ACTIONS
from sim.tasks.quadruped import constants as go1
from sim.tasks.quadruped.velocity import QuadrupedVelocity
from sim.tasks.quadruped.velocity_config import COMMAND_NAMES, RAW_INPUTS

# raw input -> LEAPP kind (leapp.InputKindEnum values), as our export labels it
RAW_TO_KIND = {
    "joint_position": "state/joint/position",
    "joint_velocity": "state/joint/velocity",
    "angular_velocity": "state/body/angular_velocity",
    "base_linear_velocity": "state/body/linear_velocity",  # legged: the estimator's, body frame
    "velocity": "state/body/linear_velocity",  # Crazyflie: world frame (the frame field says which)
    "position": "state/body/position",
    "quaternion": "state/body/rotation",
    "command": "command/body/velocity",
    "goal": "command/body/pose",  # a position goal: the pose command's x, y, z (LEAPP has no position command)
}
# the frame each vector input is expressed in (written by our export as the input's `frame`, checked on import)
RAW_FRAMES = {
    "angular_velocity": "body",
    "base_linear_velocity": "body",
    "velocity": "world",
    "position": "world",
    "goal": "world",
    "command": "body",
}
# names other exporters give the same inputs when they carry no kind (Isaac Lab's data properties, mjlab's terms)
ISAAC_NAMES = {
    "joint_pos": "joint_position",
    "joint_vel": "joint_velocity",
    "root_ang_vel_b": "angular_velocity",
    "base_ang_vel": "angular_velocity",
    "root_lin_vel_b": "base_linear_velocity",
    "base_lin_vel": "base_linear_velocity",
    "root_quat_w": "quaternion",
    "root_lin_vel_w": "velocity",
    "root_pos_w": "position",
    "goal_position": "goal",
    "target_position": "goal",
}
NAME_TO_RAW = {**ISAAC_NAMES, **{k: k for k in RAW_TO_KIND}}
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
    """One of our robots as an import target: what a bundle for it must say and what its runtime measures.

    A jointed robot takes joint position targets (joint_names, limits); a robot without joints takes one of
    `commands` (action mode -> our ACTION_SPECS entry: names with units, limits), chosen by the output's names."""

    robot: str
    task: str
    raw_inputs: dict  # raw input -> its units and frame, in words (the bundle's extra.raw_inputs)
    raw_dims: dict  # raw input -> size (joints: len(joint_names))
    joint_names: tuple[str, ...] = ()
    joint_low: tuple[float, ...] = ()
    joint_high: tuple[float, ...] = ()
    torque_limit: tuple[float, ...] = ()
    command_names: tuple[str, ...] = ()
    commands: dict = field(default_factory=dict)
    frame_required: tuple[str, ...] = ()  # raw inputs whose frame an import must state (kind alone is ambiguous)

    @property
    def action_names(self) -> list[str]:
        return [f"{j}_rad" for j in self.joint_names]

    def raw_of_kind(self, kind: str | None) -> str | None:
        """The raw input of this robot a LEAPP kind means (kinds shared by several raws resolve to the one we have)."""
        found = [r for r, k in RAW_TO_KIND.items() if k == kind and r in self.raw_inputs]
        return found[0] if len(found) == 1 else None


GO1_LIKE = TargetRobot(
    robot=QuadrupedVelocity.robot,
    task=QuadrupedVelocity.name,
    raw_inputs=dict(RAW_INPUTS),
    raw_dims={
        "angular_velocity": 3,
        "base_linear_velocity": 3,
        "quaternion": 4,
        "command": 3,
        "joint_position": len(go1.JOINT_NAMES),
        "joint_velocity": len(go1.JOINT_NAMES),
    },
    joint_names=tuple(go1.JOINT_NAMES),
    joint_low=tuple(go1.JOINT_LOW),
    joint_high=tuple(go1.JOINT_HIGH),
    torque_limit=tuple(go1.TORQUE_LIMIT),
    command_names=tuple(COMMAND_NAMES),
)
CRAZYFLIE = TargetRobot(
    robot=CrazyflieHover.robot,
    task=CrazyflieHover.name,
    raw_inputs={
        "position": "world frame (ENU), m (motion capture or the state estimator)",
        "velocity": "world frame (ENU), m/s",
        "quaternion": "attitude, xyzw",
        "angular_velocity": "gyro, body frame, rad/s",
        "goal": "goal position, world frame (ENU), m",
    },
    raw_dims={"position": 3, "velocity": 3, "quaternion": 4, "angular_velocity": 3, "goal": 3},
    # off-board modes only: a real Crazyflie takes attitude + thrust (cflib send_setpoint) or rates + thrust;
    # motor-level policies are for on-board controllers
    commands={m: CRAZYFLIE_ACTIONS[m] for m in ("rpyt", "ctbr")},
    frame_required=("velocity",),
)
# the robots a foreign policy can be imported onto (the arm has no mapping: see docs/interop.md)
TARGETS = {t.robot: t for t in (GO1_LIKE, CRAZYFLIE)}
