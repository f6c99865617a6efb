"""The hover and go-to tasks' configuration: observation layout, integrators, action modes, domain
randomization, latency, noise and reward weights."""

from dataclasses import dataclass

from sim.robots import crazyflie_firmware_native as native

OBS_LAYOUT = [
    # goal error and velocity in the body frame, the frame the tilt commands act in: the network need
    # not learn the yaw rotation itself (a short comparison run learned faster than world-frame inputs)
    {
        "name": "goal_error_body",
        "op": "body_frame_difference",
        "inputs": ["goal", "position", "quaternion"],
        "dim": 3,
        "scale": 1.0,
        "clip": 2.0,
    },
    {
        "name": "velocity_body",
        "op": "body_frame",
        "inputs": ["velocity", "quaternion"],
        "dim": 3,
        "scale": 0.5,
        "clip": 5.0,
    },
    {"name": "rotation", "op": "rotmat_from_quat_xyzw", "inputs": ["quaternion"], "dim": 9, "scale": 1.0, "clip": 1.0},
    {
        "name": "angular_velocity",
        "op": "identity",
        "inputs": ["angular_velocity"],
        "dim": 3,
        "scale": 0.1,
        "clip": 10.0,
    },
    {"name": "last_action", "op": "identity", "inputs": ["last_action"], "dim": 4, "scale": 1.0, "clip": 1.0},
    {
        "name": "goal_error_integral",
        "op": "identity",
        "inputs": ["goal_error_integral"],
        "dim": 3,
        "scale": 1.0,
        "clip": 1.0,
    },
]

# Integral action for a memoryless policy: hover thrust depends on mass and motors, which DR varies by
# +-25%. Kept per world here and by the deploy runtime on the robot, with the same update.
INTEGRATORS = [{"name": "goal_error_integral", "inputs": ["goal", "position"], "dim": 3, "leak_s": 10.0, "clip": 1.0}]

# policy action in [-1, 1] -> command units: raw = offset + scale * a, then clipped to [low, high]
ACTION_SPECS = {
    "rpyt": {
        "names": ["roll_deg", "pitch_deg", "yaw_rate_deg_s", "thrust_pwm"],
        "offset": [0.0, 0.0, 0.0, 39000.0],  # about the nominal hover PWM
        "scale": [30.0, 30.0, 200.0, 21000.0],
        "low": [-30.0, -30.0, -200.0, 0.0],
        "high": [30.0, 30.0, 200.0, 60000.0],
    },
    "ctbr": {  # collective thrust (N) and body rates (deg/s) through the firmware's rate loop
        "names": ["thrust_n", "roll_rate_deg_s", "pitch_rate_deg_s", "yaw_rate_deg_s"],
        "offset": [0.33, 0.0, 0.0, 0.0],
        "scale": [0.27, 400.0, 400.0, 200.0],
        "low": [0.0, -400.0, -400.0, -200.0],
        "high": [0.6, 400.0, 400.0, 200.0],
    },
    "motors": {  # normalized motor thrusts; only an on-board controller can fly this
        "names": ["m1", "m2", "m3", "m4"],
        "offset": [0.5, 0.5, 0.5, 0.5],
        "scale": [0.5, 0.5, 0.5, 0.5],
        "low": [0.0, 0.0, 0.0, 0.0],
        "high": [1.0, 1.0, 1.0, 1.0],
    },
}

# Domain randomization ranges, as multipliers of the nominal value unless noted. "max" spans the
# published sources (docs/crazyflie_model.md): mass 0.027..0.0325 kg and more, inertia 1.4e-5..2.6e-5,
# max thrust 0.12..0.18 N, torque ratio 0.005..0.008 m, motor lag 30..150 ms.
DR_LEVELS = {
    "none": {},
    "train": {
        "mass": (0.9, 1.2),
        "inertia": (0.8, 1.3),
        "kf": (0.85, 1.2),
        "torque_ratio": (0.005, 0.008),
        "motor_tau": (0.03, 0.08),
        "pid_gain": (0.85, 1.15),
        "latency_substeps": (0, 15),
    },
    "max": {
        "mass": (0.9, 1.25),
        "inertia": (0.7, 1.5),
        "kf": (0.8, 1.25),
        "torque_ratio": (0.005, 0.008),
        "motor_tau": (0.03, 0.15),
        "pid_gain": (0.8, 1.2),
        "latency_substeps": (0, 15),
    },
}

LATENCY_HISTORY = 4  # commands kept in flight: enough for 15 substeps (30 ms) of latency
assert LATENCY_HISTORY == native.HISTORY
FIRMWARE_IMPLS = ("native", "torch")

OBS_NOISE_STD = {"position": 0.005, "velocity": 0.02, "quaternion": 0.005, "angular_velocity": 0.05}


@dataclass
class RewardWeights:
    position: float = 1.0
    near: float = 1.0
    precision: float = 0.5
    velocity: float = -0.01
    angular_velocity: float = -0.005
    action_rate: float = -0.05
    tilt: float = -0.2
    crash: float = -10.0
