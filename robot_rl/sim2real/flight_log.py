"""A Crazyflie's MCAP log (our recorder's, or rosbag2's from a Crazyswarm2 graph) -> aligned series of state and
commands on the robot's clock.

State comes from `/<cf>/odom` (nav_msgs/Odometry; our sim bridge's twist is in the world frame) or, failing
that, `/<cf>/pose` (PoseStamped: velocities by differences); commands from `/<cf>/cmd_vel_legacy` (Twist,
Crazyswarm2 units, converted to send_setpoint's roll/pitch/yaw-rate/PWM). A Twist has no stamp: each command
is placed between the state messages by publish time (the DDS source timestamp recorders keep), so the command
in effect over step k is the last one published after state k and before state k+1 (held otherwise).

Repaired and reported: duplicate stamps (first kept), messages out of order by less than REORDER_TOLERANCE_S
(sorted), dropped state messages (gaps over 1.5 periods; windows never span them) and the offset between the
recorder's clock and the robot's. Refused with one line (LogError): an unreadable or truncated file, a missing
topic, stamps that go back further (a clock reset), non-finite values, a log of another robot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_conventions.units import cmd_vel_legacy_to_rpyt
from robot_rl.sim2real.log_common import (
    GAP_FACTOR,
    REORDER_TOLERANCE_S,
    LogError,
    LogReport,
    commands_in_effect,
    evenly_spaced,
    held_points,
    order_stamps,
    period_and_gaps,
    publish_s,
    read_messages,
    stamp_s,
)

__all__ = ["GAP_FACTOR", "REORDER_TOLERANCE_S", "FlightLog", "LogError", "LogReport", "read_flight_log"]

OTHER_ROBOTS = {"joint_states": "an arm or quadruped (joint_states)", "joint_commands": "an arm or quadruped"}


@dataclass
class FlightLog:
    """State at the robot's stamps t (seconds from the first), and the command in effect after each."""

    source: str
    namespace: str
    t: np.ndarray  # (T,)
    position: np.ndarray  # (T, 3) world frame
    velocity: np.ndarray  # (T, 3) world frame
    quaternion: np.ndarray  # (T, 4) xyzw
    angular_velocity: np.ndarray  # (T, 3) body frame
    commands: np.ndarray  # (T, 4) roll deg, pitch deg, yaw rate deg/s, thrust PWM, in effect over [t_k, t_k+1)
    commanded: np.ndarray  # (T,) bool: some command was in effect (False before the first)
    report: LogReport
    goal: np.ndarray | None = None  # (T, 3) the goal the policy was given (/<cf>/goal, held), if logged

    @property
    def duration_s(self) -> float:
        return float(self.t[-1] - self.t[0]) if len(self.t) else 0.0

    def state(self, k: np.ndarray | int) -> dict[str, np.ndarray]:
        return {
            "position": self.position[k],
            "velocity": self.velocity[k],
            "quaternion": self.quaternion[k],
            "angular_velocity": self.angular_velocity[k],
        }

    def contiguous(self, k0: int, length: int) -> bool:
        """Whether states k0 .. k0+length are evenly spaced (no drop) and commanded throughout."""
        return evenly_spaced(self.t, self.commanded, self.report.period_s, k0, length)


def _read_messages(path: Path) -> tuple[dict[str, list], set[str]]:
    """topic -> [(publish_ns, log_ns, message)] for the topics a Crazyflie log needs, and all topic names."""
    return read_messages(path, lambda topic: topic.rsplit("/", 1)[-1] in ("odom", "pose", "cmd_vel_legacy", "goal"))


def _namespace(path: Path, by_topic: dict[str, list], topics: set[str], namespace: str | None) -> str:
    if namespace is not None:
        return "/" + namespace.strip("/")
    spaces = sorted({t.rsplit("/", 1)[0] for t in by_topic if t.endswith(("/odom", "/pose"))})
    if len(spaces) == 1:
        return spaces[0]
    if len(spaces) > 1:
        raise LogError(f"{path}: state topics of several drones ({', '.join(spaces)}): choose one with namespace=")
    others = sorted({OTHER_ROBOTS[t.rsplit("/", 1)[-1]] for t in topics if t.rsplit("/", 1)[-1] in OTHER_ROBOTS})
    if others:
        raise LogError(f"{path}: a log of {others[0]}, not of a Crazyflie (no /<cf>/odom or /<cf>/pose topic)")
    raise LogError(f"{path}: no Crazyflie state topic (/<cf>/odom or /<cf>/pose); topics: {sorted(topics)}")


def _state_rows(topic: str, rows: list, path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(stamps, publish times in s, values (n, 13): pos, vel, quat xyzw, angvel; has_twist) in arrival order."""
    has_twist = topic.endswith("/odom")
    stamps = np.empty(len(rows))
    pub = np.empty(len(rows))
    vals = np.zeros((len(rows), 13))
    for i, (publish_ns, log_ns, m) in enumerate(rows):
        stamps[i] = stamp_s(m)
        pub[i] = (publish_ns or log_ns) * 1e-9
        pose = m.pose.pose if has_twist else m.pose
        p, q = pose.position, pose.orientation
        vals[i, 0:3] = (p.x, p.y, p.z)
        vals[i, 6:10] = (q.x, q.y, q.z, q.w)
        if has_twist:
            v, w = m.twist.twist.linear, m.twist.twist.angular
            vals[i, 3:6] = (v.x, v.y, v.z)
            vals[i, 10:13] = (w.x, w.y, w.z)
    bad = ~np.isfinite(vals).all(axis=1) | ~np.isfinite(stamps)
    if bad.any():
        i = int(np.argmax(bad))
        raise LogError(f"{path}: {topic}: a non-finite value in message {i} (stamp {stamps[i]:.3f} s)")
    return stamps, pub, vals, has_twist


def _quat_rates(t: np.ndarray, quat_xyzw: np.ndarray) -> np.ndarray:
    """Body angular velocity from consecutive attitudes (central differences of q* dq)."""
    w = np.zeros((len(t), 3))
    q = quat_xyzw
    for i in range(1, len(t) - 1):
        dt = t[i + 1] - t[i - 1]
        a, b = q[i - 1], q[i + 1]
        # relative rotation a^-1 b in xyzw, to first order 2 * vector part / dt
        ax, ay, az, aw = -a[0], -a[1], -a[2], a[3]
        bx, by, bz, bw = b
        rel = np.array(
            [
                aw * bx + ax * bw + ay * bz - az * by,
                aw * by - ax * bz + ay * bw + az * bx,
                aw * bz + ax * by - ay * bx + az * bw,
                aw * bw - ax * bx - ay * by - az * bz,
            ]
        )
        w[i] = 2.0 * np.sign(rel[3] or 1.0) * rel[:3] / dt
    w[0], w[-1] = w[1], w[-2]
    return w


def read_flight_log(path: str | Path, namespace: str | None = None) -> FlightLog:
    """Read and align a Crazyflie log; LogError with one line for a log that cannot be used."""
    path = Path(path)
    by_topic, topics = _read_messages(path)
    ns = _namespace(path, by_topic, topics, namespace)
    state_topic = f"{ns}/odom" if f"{ns}/odom" in by_topic else f"{ns}/pose"
    command_topic = f"{ns}/cmd_vel_legacy"
    if state_topic not in by_topic:
        raise LogError(f"{path}: no {ns}/odom or {ns}/pose topic; topics: {sorted(topics)}")
    if command_topic not in by_topic:
        raise LogError(f"{path}: no {command_topic} topic (the commands to replay); topics: {sorted(topics)}")
    stamps, pub, vals, has_twist = _state_rows(state_topic, by_topic[state_topic], path)
    if len(stamps) < 10:
        raise LogError(f"{path}: {state_topic}: {len(stamps)} messages, too few to replay")
    order, duplicates, reordered = order_stamps(state_topic, stamps, path)
    stamps, pub, vals = stamps[order], pub[order], vals[order]
    period, gaps = period_and_gaps(state_topic, stamps, path)
    offset = pub - stamps
    t = stamps - stamps[0]
    if not has_twist:  # a pose topic: velocities by differences
        vals[:, 3:6] = np.gradient(vals[:, 0:3], t, axis=0)
        vals[:, 10:13] = _quat_rates(t, vals[:, 6:10])

    cmd_rows = by_topic[command_topic]
    cmd_pub = publish_s(cmd_rows)
    cmd_vals = np.array(
        [cmd_vel_legacy_to_rpyt(m.linear.x, m.linear.y, m.angular.z, m.linear.z) for _, _, m in cmd_rows]
    ).reshape(-1, 4)
    if not np.isfinite(cmd_vals).all():
        i = int(np.argmax(~np.isfinite(cmd_vals).all(axis=1)))
        raise LogError(f"{path}: {command_topic}: a non-finite command in message {i}")
    in_effect = commands_in_effect(pub, cmd_pub, cmd_vals)
    report = LogReport.of(
        state_topic,
        command_topic,
        (len(by_topic[state_topic]), len(cmd_rows)),
        (duplicates, reordered),
        gaps,
        offset,
        period,
        in_effect.superseded,
    )
    goal = held_points(by_topic.get(f"{ns}/goal", []), pub)
    if not math.isfinite(report.clock_offset_s):
        raise LogError(f"{path}: {state_topic}: no usable publish times")
    return FlightLog(
        source=str(path),
        namespace=ns.strip("/"),
        t=t,
        position=vals[:, 0:3],
        velocity=vals[:, 3:6],
        quaternion=vals[:, 6:10],
        angular_velocity=vals[:, 10:13],
        commands=in_effect.commands,
        commanded=in_effect.commanded,
        report=report,
        goal=goal,
    )
