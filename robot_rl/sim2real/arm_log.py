"""An arm's MCAP log (our recorder's, or rosbag2's from a ros2_control graph) -> aligned series of joint state and
joint position targets on the robot's clock.

State comes from `<ns>/joint_states` (sensor_msgs/JointState, read by joint name: a broadcaster's order is not
guaranteed; velocities by differences when the message carries none), commands from
`<ns>/forward_position_controller/commands` (std_msgs/Float64MultiArray: 7 joint targets in rad, then the two
fingers in m, as the forward position controller takes them). A Float64MultiArray has no stamp: as for the
Crazyflie (log_common.commands_in_effect), the target in effect over step k is the last one published after state k
and before state k+1, held otherwise, as the controller holds it. Where logged, the reach target
(`<ns>/target_position`) and, for pick-and-place, what perception reported of the named object (`<ns>/object_pose`)
and the goal (`<ns>/goal_position`) are held at each state.

Repaired and reported as for the Crazyflie's log: duplicate stamps, late messages, drops, the clock offset. Steps
in which more than one command was published (which one the robot used, and for how long, is not known; a
lock-stepped simulator even takes a step for each) are kept out of the fit's windows.
Refused with one line (LogError): an unreadable or truncated file, a missing topic or joint, stamps that go back,
non-finite values (states, commands, targets, object poses, goals), commands of the wrong size.
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
)

# What a Franka's joint_state_broadcaster calls the joints, in the model's order (sim.arm_sitl.ARM_JOINT_NAMES).
JOINT_NAMES = [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1", "panda_finger_joint2"]
ARM_JOINTS = 7
COMMAND_SUFFIX = "forward_position_controller/commands"
FINGER_OPEN_M = 0.04  # fingers a log does not report or command are held open


@dataclass
class ArmLog(StepLog):
    """Joint state at the robot's stamps t (seconds from the first), and the joint targets in effect after each."""

    source: str
    namespace: str
    t: np.ndarray  # (T,)
    position: np.ndarray  # (T, 9) rad (7 joints), m (2 fingers)
    velocity: np.ndarray  # (T, 9)
    commands: np.ndarray  # (T, 9) joint position targets in effect over [t_k, t_k+1)
    commanded: np.ndarray  # (T,) bool: some command was in effect (False before the first)
    report: LogReport
    target: np.ndarray | None = None  # (T, 3) the reach target (<ns>/target_position, held), if logged
    # (T,) commands published within each step: where more than one, which the robot used when is not known
    published: np.ndarray | None = None
    # pick-and-place, if logged: what perception reported of the named object (<ns>/object_pose: position (T, 3),
    # quaternion xyzw (T, 4)) and the goal (<ns>/goal_position, (T, 3)), each held
    object_position: np.ndarray | None = None
    object_quaternion: np.ndarray | None = None
    goal: np.ndarray | None = None

    robot = "panda_like"


def is_arm_log(topics: set[str]) -> bool:
    """A log with joint_states and a forward position controller's commands: an arm's."""
    return any(t.endswith("/joint_states") for t in topics) and any(t.endswith(COMMAND_SUFFIX) for t in topics)


def _wanted(topic: str) -> bool:
    return topic.endswith(("/joint_states", COMMAND_SUFFIX, "/target_position", "/object_pose", "/goal_position"))


def _namespace(path: Path, by_topic: dict[str, list], namespace: str | None) -> str:
    if namespace is not None:
        return "/" + namespace.strip("/")
    spaces = sorted({t.rsplit("/", 1)[0] for t in by_topic if t.endswith("/joint_states")})
    if len(spaces) > 1:
        raise LogError(f"{path}: joint_states of several robots ({', '.join(spaces)}): choose one with namespace=")
    if not spaces:
        raise LogError(f"{path}: no <ns>/joint_states topic; topics: {sorted(by_topic)}")
    return spaces[0]


def _commands(topic: str, rows: list, path: Path) -> np.ndarray:
    out = np.zeros((len(rows), len(JOINT_NAMES)))
    out[:, ARM_JOINTS:] = FINGER_OPEN_M
    for i, (_, _, m) in enumerate(rows):
        data = np.asarray(m.data, dtype=np.float64)
        if data.size not in (ARM_JOINTS, len(JOINT_NAMES)):
            raise LogError(
                f"{path}: {topic}: message {i} has {data.size} values (7 joint targets, or 7 and 2 fingers expected)"
            )
        if not np.isfinite(data).all():
            raise LogError(f"{path}: {topic}: a non-finite command in message {i}")
        out[i, : data.size] = data
    return out


def read_arm_log(path: str | Path, namespace: str | None = None) -> ArmLog:
    """Read and align an arm's log; LogError with one line for a log that cannot be used."""
    path = Path(path)
    by_topic, topics = read_messages(path, _wanted)
    ns = _namespace(path, by_topic, namespace)
    state_topic, command_topic = f"{ns}/joint_states", f"{ns}/{COMMAND_SUFFIX}"
    for topic, what in ((state_topic, "the joint states"), (command_topic, "the joint targets to replay")):
        if topic not in by_topic:
            raise LogError(f"{path}: no {topic} topic ({what}); topics: {sorted(topics)}")
    fill = np.r_[np.zeros(ARM_JOINTS), np.full(len(JOINT_NAMES) - ARM_JOINTS, FINGER_OPEN_M)]
    stamps, pub, pos, vel, has_vel = joint_state_rows(state_topic, by_topic[state_topic], path, JOINT_NAMES,
                                                      ARM_JOINTS, fill)  # fmt: skip
    if len(stamps) < 10:
        raise LogError(f"{path}: {state_topic}: {len(stamps)} messages, too few to fit")
    order, duplicates, reordered = order_stamps(state_topic, stamps, path)
    stamps, pub, pos, vel = stamps[order], pub[order], pos[order], vel[order]
    period, gaps = period_and_gaps(state_topic, stamps, path)
    t = stamps - stamps[0]
    if not has_vel:  # positions only: velocities by differences
        vel = np.gradient(pos, t, axis=0)
    cmd_rows = by_topic[command_topic]
    in_effect = commands_in_effect(pub, publish_s(cmd_rows), _commands(command_topic, cmd_rows, path))
    offset = pub - stamps
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
    if not math.isfinite(report.clock_offset_s):
        raise LogError(f"{path}: {state_topic}: no usable publish times")
    held = {
        "target_position": held_points(by_topic.get(f"{ns}/target_position", []), pub),
        "object_pose": held_values(by_topic.get(f"{ns}/object_pose", []), pub, _pose),
        "goal_position": held_points(by_topic.get(f"{ns}/goal_position", []), pub),
    }
    for name, values in held.items():
        if values is not None and not np.isfinite(values).all():
            raise LogError(f"{path}: {ns}/{name}: a non-finite value")
    pose = held["object_pose"]
    return ArmLog(
        source=str(path),
        namespace=ns.strip("/"),
        t=t,
        position=pos,
        velocity=vel,
        commands=in_effect.commands,
        commanded=in_effect.commanded,
        report=report,
        target=held["target_position"],
        published=in_effect.published,
        object_position=None if pose is None else pose[:, :3],
        object_quaternion=None if pose is None else pose[:, 3:],
        goal=held["goal_position"],
    )


def _pose(m) -> tuple[float, ...]:
    """A PoseStamped's position and quaternion (xyzw)."""
    p, q = m.pose.position, m.pose.orientation
    return p.x, p.y, p.z, q.x, q.y, q.z, q.w
