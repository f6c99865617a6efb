"""A quadruped's MCAP log (our recorder's, or rosbag2's from a Go1 driver graph) -> aligned series of joint and
trunk state and the low-level motor commands, on the robot's clock.

- Joints from `<ns>/joint_states` (sensor_msgs/JointState, read by name: LEG_JOINT_NAMES, Unitree's order).
- The trunk from `<ns>/odom` (nav_msgs/Odometry as a state estimator reports it: world pose, body-frame twist per
  REP 105), matched to each joint state by stamp (within a quarter period; a state without one is left out of the
  fit's windows, as a drop is).
- Commands from `<ns>/joint_commands` (std_msgs/Float64MultiArray of 36: 12 position targets in rad, then 12 kp,
  then 12 kd, a Go1 low-level command's per-motor fields), placed by publish time as for the arm
  (log_common.commands_in_effect); steps with more than one command are kept out of the windows.

Repaired, reported and refused as the arm's and the Crazyflie's logs are (log_common).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_rl.sim2real.log_common import (
    LogError,
    LogReport,
    StepLog,
    commands_in_effect,
    held_points,
    held_values,
    joint_state_rows,
    order_stamps,
    period_and_gaps,
    publish_s,
    read_messages,
    stamp_s,
)
from sim.tasks.quadruped.constants import JOINT_NAMES

# What a Go1 driver calls the joints: the model's names (Unitree's motor order) with ROS's "_joint" suffix
LEG_JOINT_NAMES = [f"{name}_joint" for name in JOINT_NAMES]
COMMAND_SUFFIX = "joint_commands"
MOTORS = 12


@dataclass
class QuadrupedLog(StepLog):
    source: str
    namespace: str
    t: np.ndarray  # (T,)
    joint_position: np.ndarray  # (T, 12) rad
    joint_velocity: np.ndarray  # (T, 12) rad/s
    base_position: np.ndarray  # (T, 3) m, world
    base_quaternion: np.ndarray  # (T, 4) wxyz, world
    base_velocity: np.ndarray  # (T, 3) m/s, body frame
    base_angular_velocity: np.ndarray  # (T, 3) rad/s, body frame
    targets: np.ndarray  # (T, 12) joint position targets in effect over [t_k, t_k+1)
    kp: np.ndarray  # (T, 12) the gains those commands carried
    kd: np.ndarray  # (T, 12)
    commanded: np.ndarray  # (T,) bool
    has_trunk: np.ndarray  # (T,) bool: an odometry sample matched this state
    report: LogReport
    published: np.ndarray | None = None
    # (T, 3) the velocity command in effect (vx, vy in m/s, yaw rate in rad/s): <ns>/cmd_vel (TwistStamped) or the
    # policy node's <ns>/command (PointStamped), held; None when neither was logged
    velocity_command: np.ndarray | None = None

    robot = "go1_like"

    def contiguous(self, k0: int, length: int) -> bool:
        """StepLog's rule, and every state with its trunk state."""
        return super().contiguous(k0, length) and bool(self.has_trunk[k0 : k0 + length + 1].all())


def is_quadruped_log(topics: set[str]) -> bool:
    """A log with joint_states and a Go1 low-level command topic: a quadruped's."""
    return any(t.endswith("/joint_states") for t in topics) and any(t.endswith("/" + COMMAND_SUFFIX) for t in topics)


def _namespace(path: Path, by_topic: dict[str, list], namespace: str | None) -> str:
    if namespace is not None:
        return "/" + namespace.strip("/")
    spaces = sorted({t.rsplit("/", 1)[0] for t in by_topic if t.endswith("/" + COMMAND_SUFFIX)})
    if len(spaces) != 1:
        raise LogError(f"{path}: joint_commands of {len(spaces)} robots ({', '.join(spaces)}): choose with namespace=")
    return spaces[0]


def _trunk(topic: str, rows: list, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(stamps (n,), values (n, 13): position, quaternion wxyz, body linear and angular velocity)."""
    stamps = np.empty(len(rows))
    vals = np.empty((len(rows), 13))
    for i, (_, _, m) in enumerate(rows):
        stamps[i] = stamp_s(m)
        p, o, v, w = m.pose.pose.position, m.pose.pose.orientation, m.twist.twist.linear, m.twist.twist.angular
        vals[i] = (p.x, p.y, p.z, o.w, o.x, o.y, o.z, v.x, v.y, v.z, w.x, w.y, w.z)
    if not np.isfinite(vals).all() or not np.isfinite(stamps).all():
        i = int(np.argmax(~np.isfinite(vals).all(axis=1) | ~np.isfinite(stamps)))
        raise LogError(f"{path}: {topic}: a non-finite value in message {i}")
    return stamps, vals


def _commands(topic: str, rows: list, path: Path) -> np.ndarray:
    out = np.empty((len(rows), 3 * MOTORS))
    for i, (_, _, m) in enumerate(rows):
        data = np.asarray(m.data, dtype=np.float64)
        if data.size != 3 * MOTORS:
            raise LogError(f"{path}: {topic}: message {i} has {data.size} values (12 targets, 12 kp, 12 kd expected)")
        if not np.isfinite(data).all():
            raise LogError(f"{path}: {topic}: a non-finite command in message {i}")
        out[i] = data
    return out


def read_quadruped_log(path: str | Path, namespace: str | None = None) -> QuadrupedLog:
    """Read and align a quadruped's log; LogError with one line for a log that cannot be used."""
    path = Path(path)
    by_topic, topics = read_messages(
        path, lambda t: t.endswith(("/joint_states", "/odom", "/" + COMMAND_SUFFIX, "/cmd_vel", "/command"))
    )
    ns = _namespace(path, by_topic, namespace)
    state_topic, odom_topic, command_topic = f"{ns}/joint_states", f"{ns}/odom", f"{ns}/{COMMAND_SUFFIX}"
    for topic, what in ((state_topic, "the joint states"), (odom_topic, "the trunk's state"),
                        (command_topic, "the motor commands to replay")):  # fmt: skip
        if topic not in by_topic:
            raise LogError(f"{path}: no {topic} topic ({what}); topics: {sorted(topics)}")
    rows = by_topic[state_topic]
    stamps, pub, pos, vel, has_vel = joint_state_rows(state_topic, rows, path, LEG_JOINT_NAMES, MOTORS, np.zeros(12))
    if len(stamps) < 10:
        raise LogError(f"{path}: {state_topic}: {len(stamps)} messages, too few to fit")
    order, duplicates, reordered = order_stamps(state_topic, stamps, path)
    stamps, pub, pos, vel = stamps[order], pub[order], pos[order], vel[order]
    period, gaps = period_and_gaps(state_topic, stamps, path)
    t = stamps - stamps[0]
    if not has_vel:
        vel = np.gradient(pos, t, axis=0)
    odom_t, odom = _trunk(odom_topic, by_topic[odom_topic], path)
    nearest = np.clip(np.searchsorted(odom_t, stamps), 1, max(1, len(odom_t) - 1))
    nearest = np.where(np.abs(odom_t[nearest - 1] - stamps) <= np.abs(odom_t[nearest] - stamps), nearest - 1, nearest)
    has_trunk = np.abs(odom_t[nearest] - stamps) <= 0.25 * period
    trunk = odom[nearest]
    cmd_rows = by_topic[command_topic]
    in_effect = commands_in_effect(pub, publish_s(cmd_rows), _commands(command_topic, cmd_rows, path))
    report = LogReport.of(
        state_topic,
        command_topic,
        (len(rows), len(cmd_rows)),
        (duplicates, reordered),
        gaps,
        pub - stamps,
        period,
        in_effect.superseded,
    )
    if not math.isfinite(report.clock_offset_s):
        raise LogError(f"{path}: {state_topic}: no usable publish times")
    c = in_effect.commands
    return QuadrupedLog(
        source=str(path),
        namespace=ns.strip("/"),
        t=t,
        joint_position=pos,
        joint_velocity=vel,
        base_position=trunk[:, 0:3],
        base_quaternion=trunk[:, 3:7],
        base_velocity=trunk[:, 7:10],
        base_angular_velocity=trunk[:, 10:13],
        targets=c[:, :MOTORS],
        kp=c[:, MOTORS : 2 * MOTORS],
        kd=c[:, 2 * MOTORS :],
        commanded=in_effect.commanded,
        has_trunk=has_trunk,
        report=report,
        published=in_effect.published,
        velocity_command=_velocity_command(by_topic, ns, pub),
    )


def _velocity_command(by_topic: dict[str, list], ns: str, state_pub: np.ndarray) -> np.ndarray | None:
    twist = held_values(
        by_topic.get(f"{ns}/cmd_vel", []),
        state_pub,
        lambda m: (m.twist.linear.x, m.twist.linear.y, m.twist.angular.z),
    )
    return twist if twist is not None else held_points(by_topic.get(f"{ns}/command", []), state_pub)
