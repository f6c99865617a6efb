"""The velocity task's configuration: command names, observation layout, noise, domain randomization and
reward weights."""

from dataclasses import dataclass

COMMAND_NAMES = ["vx_m_s", "vy_m_s", "yaw_rate_rad_s"]


def obs_layout(observe_lin_vel: bool) -> list[dict]:
    """legged_gym's observation (scales included), minus the base velocity when the robot has no estimator."""
    terms = [
        {"name": "angular_velocity", "op": "identity", "inputs": ["angular_velocity"], "dim": 3, "scale": 0.25,
         "clip": 5.0},
        # gravity in the body frame: the attitude without yaw, which a velocity task must not depend on
        {"name": "projected_gravity", "op": "body_frame", "inputs": ["gravity_direction", "quaternion"], "dim": 3,
         "scale": 1.0, "clip": 1.0},
        {"name": "command", "op": "identity", "inputs": ["command"], "dim": 3, "scale": 1.0, "clip": 2.0},
        {"name": "joint_position", "op": "difference", "inputs": ["joint_position", "default_joint_position"],
         "dim": 12, "scale": 1.0, "clip": 4.0},
        {"name": "joint_velocity", "op": "identity", "inputs": ["joint_velocity"], "dim": 12, "scale": 0.05,
         "clip": 5.0},
        {"name": "last_action", "op": "identity", "inputs": ["last_action"], "dim": 12, "scale": 1.0, "clip": 1.0},
    ]  # fmt: skip
    if observe_lin_vel:
        lin = {"name": "base_linear_velocity", "op": "identity", "inputs": ["base_linear_velocity"], "dim": 3,
               "scale": 2.0, "clip": 5.0}  # fmt: skip
        terms.insert(0, lin)
    return terms


# the raw inputs obs_layout reads that the robot measures (the bundle's description of each)
RAW_INPUTS = {
    "base_linear_velocity": "trunk velocity in the body frame, m/s (state estimator)",
    "angular_velocity": "gyro, body frame, rad/s",
    "quaternion": "trunk attitude, xyzw",
    "joint_position": "rad, joint_names order",
    "joint_velocity": "rad/s",
    "command": "vx, vy (m/s, body frame), yaw rate (rad/s)",
}

# raw-state noise (std, raw units), legged_gym's noise scales: joints 0.01 rad and 1.5 rad/s, gyro 0.2 rad/s,
# velocity 0.1 m/s; 0.025 on each quaternion component gives ~0.05 on projected gravity
OBS_NOISE_STD = {
    "joint_position": 0.01,
    "joint_velocity": 1.5,
    "angular_velocity": 0.2,
    "base_linear_velocity": 0.1,
    "quaternion": 0.025,
}

# Domain randomization. friction: sliding friction of every geom (ground and feet alike, so the contact's
# max-combined value is the sample); added_mass: kg on the trunk; motor_strength: multiplier of kp and kv per
# motor; latency in 5 ms substeps; pushes set a random horizontal velocity change every push_interval_s.
# "train" is legged_gym's ranges (friction 0.5-1.25, added mass +-1 kg, pushes up to 1 m/s every 15 s, motor
# strength 0.9-1.1 as in walk-these-ways); "max" widens each.
DR_LEVELS = {
    "none": {},
    "train": {
        "friction": (0.5, 1.25),
        "added_mass": (-1.0, 1.0),
        "motor_strength": (0.9, 1.1),
        "latency_substeps": (0, 2),
        "push_speed": 0.5,
        "start_joint_noise": 0.1,
        "start_speed": 0.3,
    },
    "max": {
        "friction": (0.3, 1.5),
        "added_mass": (-1.0, 3.0),
        "motor_strength": (0.8, 1.2),
        "latency_substeps": (0, 3),
        "push_speed": 1.0,
        "start_joint_noise": 0.2,
        "start_speed": 0.5,
    },
}


@dataclass
class RewardWeights:
    """legged_gym's reward scales, per second (each term is weight * value * control_dt per step, as there)."""

    tracking_lin_vel: float = 1.0
    tracking_ang_vel: float = 0.5
    lin_vel_z: float = -2.0
    ang_vel_xy: float = -0.05
    orientation: float = -1.0
    torques: float = -0.0002
    joint_acc: float = -2.5e-7
    action_rate: float = -0.01
    feet_air_time: float = 1.0
    collision: float = -1.0
    joint_limits: float = -10.0
    fall: float = -2.0  # once, when the episode ends in a fall (not per second)
