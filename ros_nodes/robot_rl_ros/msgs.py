"""Conversions between ROS messages and robot_rl raw state / commands (units via robot_conventions.units)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import PointStamped, PoseStamped, Twist, TwistStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Imu, JointState, LaserScan

from robot_conventions.units import cmd_vel_legacy_to_rpyt, rpyt_to_cmd_vel_legacy


def stamp_to_s(stamp: Time) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def s_to_stamp(t: float) -> Time:
    # Round the total first: splitting first turns 3.9999999 s into 3 s + 1e9 ns (mod -> 3.000 s).
    ns = int(round(t * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def odometry_to_raw(msg: Odometry) -> dict[str, np.ndarray]:
    """Crazyswarm2 convention: twist.linear is the world-frame velocity (stateEstimate vx, vy, vz),
    twist.angular the body rates in rad/s; orientation is ROS xyzw."""
    p, q = msg.pose.pose.position, msg.pose.pose.orientation
    v, w = msg.twist.twist.linear, msg.twist.twist.angular
    return {
        "position": np.array([p.x, p.y, p.z]),
        "quaternion": np.array([q.x, q.y, q.z, q.w]),
        "velocity": np.array([v.x, v.y, v.z]),
        "angular_velocity": np.array([w.x, w.y, w.z]),
    }


def raw_to_odometry(raw: dict, stamp: Time, frame_id: str = "world", child_frame_id: str = "") -> Odometry:
    msg = Odometry()
    msg.header.stamp, msg.header.frame_id, msg.child_frame_id = stamp, frame_id, child_frame_id
    p, q = msg.pose.pose.position, msg.pose.pose.orientation
    p.x, p.y, p.z = (float(x) for x in raw["position"])
    q.x, q.y, q.z, q.w = (float(x) for x in raw["quaternion"])
    v, w = msg.twist.twist.linear, msg.twist.twist.angular
    v.x, v.y, v.z = (float(x) for x in raw["velocity"])
    w.x, w.y, w.z = (float(x) for x in raw["angular_velocity"])
    return msg


def rpyt_to_twist(rpyt) -> Twist:
    lx, ly, az, lz = rpyt_to_cmd_vel_legacy(*(float(x) for x in rpyt))
    msg = Twist()
    msg.linear.x, msg.linear.y, msg.linear.z, msg.angular.z = lx, ly, lz, az
    return msg


def twist_to_rpyt(msg: Twist) -> np.ndarray:
    return np.array(cmd_vel_legacy_to_rpyt(msg.linear.x, msg.linear.y, msg.angular.z, msg.linear.z))


def _point(key: str) -> Callable:
    def convert(msg: PointStamped) -> dict[str, np.ndarray]:
        return {key: np.array([msg.point.x, msg.point.y, msg.point.z])}

    return convert


def _object_pose(msg: PoseStamped) -> dict[str, np.ndarray]:
    """Perception's pose of the object an arm task names: position (m) and orientation (quaternion xyzw)."""
    p, q = msg.pose.position, msg.pose.orientation
    return {"object_position": np.array([p.x, p.y, p.z]), "object_quaternion": np.array([q.x, q.y, q.z, q.w])}


def _joint_state(msg: JointState) -> dict[str, np.ndarray]:
    return {
        "joint_pos": np.asarray(msg.position, dtype=np.float64),
        "joint_vel": np.asarray(msg.velocity, dtype=np.float64),
    }


# A Franka's joints as its ros2_control joint_state_broadcaster names them, in the policy's order.
ARM_JOINT_NAMES = [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1", "panda_finger_joint2"]


def arm_joint_arrays(msg: JointState) -> tuple[np.ndarray, np.ndarray]:
    return joint_arrays(msg, ARM_JOINT_NAMES)


def _arm_joints(msg: JointState) -> dict[str, np.ndarray]:
    pos, vel = arm_joint_arrays(msg)
    return {"joint_position": pos[:7], "joint_velocity": vel[:7], "gripper_width": pos[7:9].sum(keepdims=True)}


def arm_joint_state(position, velocity, stamp: Time) -> JointState:
    return joint_state(ARM_JOINT_NAMES, position, velocity, stamp)


# A Go1's joints as its ROS 2 driver names them (FR, FL, RR, RL; hip, thigh, calf): the policy's order.
LEG_JOINT_NAMES = [f"{leg}_{part}_joint" for leg in ("FR", "FL", "RR", "RL") for part in ("hip", "thigh", "calf")]


def joint_arrays(msg: JointState, names: list[str], what: str = "joint_states") -> tuple[np.ndarray, np.ndarray]:
    """Positions and velocities of the named joints in that order (a broadcaster's order is not
    guaranteed). Raises ValueError naming a missing joint (and `what` lacks it)."""
    index = {n: i for i, n in enumerate(msg.name)}
    missing = [n for n in names if n not in index]
    if missing:
        raise ValueError(f"{what} lacks {missing}")
    order = [index[n] for n in names]
    pos = np.asarray(msg.position, dtype=np.float64)
    vel = np.asarray(msg.velocity, dtype=np.float64) if len(msg.velocity) else np.zeros(len(msg.name))
    if pos.size != len(msg.name) or vel.size != len(msg.name):
        raise ValueError(f"{what} has {len(msg.name)} names, {pos.size} positions, {vel.size} velocities")
    return pos[order], vel[order]


def joint_state(names: list[str], position, velocity, stamp: Time) -> JointState:
    msg = JointState(name=list(names))
    msg.header.stamp = stamp
    msg.position = [float(x) for x in position]
    msg.velocity = [float(x) for x in velocity]
    return msg


def _leg_joints(msg: JointState) -> dict[str, np.ndarray]:
    pos, vel = joint_arrays(msg, LEG_JOINT_NAMES)
    return {"joint_position": pos, "joint_velocity": vel}


def _body_velocity(msg: Odometry) -> dict[str, np.ndarray]:
    """A legged robot's state estimator: REP 105 odometry, whose twist is in the body (child) frame."""
    v = msg.twist.twist.linear
    return {"base_linear_velocity": np.array([v.x, v.y, v.z])}


def _velocity_command(msg: TwistStamped) -> dict[str, np.ndarray]:
    t = msg.twist
    return {"command": np.array([t.linear.x, t.linear.y, t.angular.z])}


def _imu(msg: Imu) -> dict[str, np.ndarray]:
    q, w = msg.orientation, msg.angular_velocity
    return {"quaternion": np.array([q.x, q.y, q.z, q.w]), "angular_velocity": np.array([w.x, w.y, w.z])}


def _setpoint(msg: Odometry) -> dict[str, np.ndarray]:
    """A planner setpoint carried as Odometry: pose.position (m) and twist.linear (m/s), world frame."""
    p, v = msg.pose.pose.position, msg.twist.twist.linear
    return {"setpoint_position": np.array([p.x, p.y, p.z]), "setpoint_velocity": np.array([v.x, v.y, v.z])}


def setpoint_odometry(position, velocity, stamp: Time, frame_id: str = "world") -> Odometry:
    msg = Odometry()
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    p, v = msg.pose.pose.position, msg.twist.twist.linear
    p.x, p.y, p.z = (float(x) for x in position)
    v.x, v.y, v.z = (float(x) for x in velocity)
    msg.pose.pose.orientation.w = 1.0
    return msg


def _ranges(key: str) -> Callable:
    def convert(msg: LaserScan) -> dict[str, np.ndarray]:
        return {key: np.asarray(msg.ranges, dtype=np.float64)}

    return convert


def range_zones(ranges, stamp: Time, clip_m: float, frame_id: str = "") -> LaserScan:
    """A drone's ToF zones as one LaserScan: ranges in metres in the bundle's zone order (policy.yaml
    extra.swarm.tof.yaw_deg gives each zone's direction; the zones are not evenly spaced, so angle_increment
    is 0), range_max = the clip value that also means 'nothing seen'."""
    msg = LaserScan()
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.range_min, msg.range_max = 0.0, float(clip_m)
    msg.ranges = [float(x) for x in ranges]
    return msg


# Input kinds the policy node can subscribe:
# kind -> (message type, raw keys it provides, factory(key) -> converter)
ADAPTERS: dict[str, tuple[type, tuple[str, ...] | None, Callable[[str], Callable]]] = {
    "odometry": (
        Odometry,
        ("position", "quaternion", "velocity", "angular_velocity"),
        lambda key: odometry_to_raw,
    ),
    "point": (PointStamped, None, _point),  # provides the raw key named after the topic
    "object_pose": (PoseStamped, ("object_position", "object_quaternion"), lambda key: _object_pose),
    "joint_state": (JointState, ("joint_pos", "joint_vel"), lambda key: _joint_state),
    "imu": (Imu, ("quaternion", "angular_velocity"), lambda key: _imu),
    "arm_joints": (JointState, ("joint_position", "joint_velocity", "gripper_width"), lambda key: _arm_joints),
    "leg_joints": (JointState, ("joint_position", "joint_velocity"), lambda key: _leg_joints),
    "body_velocity": (Odometry, ("base_linear_velocity",), lambda key: _body_velocity),
    "velocity_command": (TwistStamped, ("command",), lambda key: _velocity_command),
    "setpoint": (Odometry, ("setpoint_position", "setpoint_velocity"), lambda key: _setpoint),
    "ranges": (LaserScan, None, _ranges),  # provides the raw key named after the topic (e.g. tof)
}


# The joint-state input kinds and the joints they read, in order: a policy's joint targets go out under these names.
JOINT_INPUT_NAMES = {"arm_joints": ARM_JOINT_NAMES, "leg_joints": LEG_JOINT_NAMES}


def parse_input_spec(spec: str) -> tuple[str, str, tuple[str, ...]]:
    """'odom:odometry' -> (topic, kind, raw keys). Raises ValueError with a one-line reason."""
    topic, sep, kind = spec.partition(":")
    if not sep or kind not in ADAPTERS or not topic:
        raise ValueError(f"input '{spec}' must be 'topic:kind' with kind one of {sorted(ADAPTERS)}")
    keys = ADAPTERS[kind][1] or (topic.rstrip("/").split("/")[-1],)
    return topic, kind, keys
