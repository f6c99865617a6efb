"""Flight logs in: the recorder's MCAP of a SITL flight aligned into series, and bad logs refused in one line.

The bad logs are made from the recorded file with the mcap library (cut, a topic left out, two payloads
swapped so that stamps go back) and, for another robot's log, mcap_ros2's writer with a JointState schema."""

from __future__ import annotations

import numpy as np
import pytest
from sim2real_robot import copy_mcap

from robot_rl.cli import main
from robot_rl.sim2real.flight_log import LogError, read_flight_log

pytestmark = pytest.mark.slow


def test_log_aligns_states_and_commands(perturbed_flight):
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    from robot_conventions.units import cmd_vel_legacy_to_rpyt

    log = read_flight_log(perturbed_flight)
    assert log.namespace == "cf1" and log.report.state_topic == "/cf1/odom"
    assert abs(log.report.period_s - 0.01) < 1e-6 and not log.report.gaps and log.report.duplicates == 0
    assert np.all(np.diff(log.t) > 0) and log.duration_s >= 9.9
    assert log.goal is not None and {tuple(g) for g in log.goal.round(3)} >= {(0.5, 0.0, 1.2), (0.5, 0.5, 0.8)}
    # every distinct command the safety node sent is in effect for some step, in the order sent
    with open(perturbed_flight, "rb") as f:
        sent = [
            (m.linear.x, m.linear.y, m.angular.z, m.linear.z)
            for _, c, _, m in make_reader(f, decoder_factories=[DecoderFactory()]).iter_decoded_messages()
            if c.topic == "/cf1/cmd_vel_legacy"
        ]
    sent_rpyt = {tuple(np.round(cmd_vel_legacy_to_rpyt(*m), 9)) for m in sent}
    used = {tuple(row) for row in np.round(log.commands[log.commanded], 9)}
    assert used <= sent_rpyt  # nothing invented
    # a command is in effect for no step only when a newer one came before the next state (the report counts
    # those). The policy acts on each odometry message, so nearly every step has one command: measured 4-6 of
    # ~1,000 superseded, beside two busy loops too (33-49 when the policy acted on a timer of simulated time)
    assert len(sent_rpyt) - len(used) <= log.report.superseded, (len(used), len(sent_rpyt), log.report.superseded)
    assert log.report.superseded <= 0.02 * len(sent), log.report.superseded
    assert f"({log.report.superseded} superseded within a state step)" in "\n".join(log.report.lines())


def test_replay_under_the_hidden_parameters_matches_the_log(perturbed_flight):
    """The alignment is right if the simulator with the robot's true parameters predicts the log to sensing
    noise, and the nominal model does not."""
    from sim2real_robot import HIDDEN

    from robot_rl.sim2real.replay import open_loop_errors
    from sim.tasks.crazyflie.physical import CrazyflieParams

    log = read_flight_log(perturbed_flight)
    true = open_loop_errors(log, CrazyflieParams(**HIDDEN), "true")
    nominal = open_loop_errors(log, CrazyflieParams(), "nominal")
    half_s = true.horizons_s.index(0.5)
    assert true.median_m[half_s].max() < 0.006, true.median_m
    assert nominal.median_m[half_s, 2] > 5 * true.median_m[half_s, 2], (nominal.median_m, true.median_m)


def _bad_logs(src, tmp_path):
    """(file, what the one error line must name) for each kind of bad log."""
    from sim2real_robot import write_joint_state_log

    cut = tmp_path / "truncated.mcap"
    data = src.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    no_cmd = tmp_path / "no_commands.mcap"
    copy_mcap(src, no_cmd, keep=lambda c: c.topic != "/cf1/cmd_vel_legacy")
    # odometry payloads 300 and 800 swapped: stamps jump forward 5 s, then back
    jumped = tmp_path / "stamps_back.mcap"
    odom = []

    def collect(i, channel, message):
        if channel.topic == "/cf1/odom":
            odom.append(message.data)
        return message.data

    copy_mcap(src, tmp_path / "scratch.mcap", payload=collect)
    count = {"n": 0}

    def swap(i, channel, message):
        if channel.topic != "/cf1/odom":
            return message.data
        k = count["n"]
        count["n"] += 1
        return odom[800] if k == 300 else odom[300] if k == 800 else message.data

    copy_mcap(src, jumped, payload=swap)
    arm = tmp_path / "arm.mcap"
    write_joint_state_log(arm)
    return [
        (cut, "truncated or damaged MCAP"),
        (no_cmd, "/cf1/cmd_vel_legacy"),
        (jumped, "/cf1/odom: stamps go back"),
        (arm, "not of a Crazyflie"),
    ]


def test_bad_logs_end_with_one_line_and_exit_2(perturbed_flight, tmp_path, capsys):
    for path, needle in _bad_logs(perturbed_flight, tmp_path):
        with pytest.raises(LogError, match=needle.replace("(", r"\(")):
            read_flight_log(path)
        for verb in ("sysid", "replay"):
            capsys.readouterr()
            assert main([verb, f"log={path}", f"out={tmp_path / verb}"]) == 2
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and needle in err and str(path) in err, err
    assert not (tmp_path / "sysid").exists() and not (tmp_path / "replay").exists()


def test_replay_writes_under_the_runs_root_by_default(perturbed_flight, tmp_path, capsys):
    """Without out=, replay (and sysid, through the same helper) write <runs_root>/sim2real/<log name>/, where
    the dashboard of that runs root looks."""
    assert main(["replay", f"log={perturbed_flight}", f"runs_root={tmp_path}"]) == 0
    folder = tmp_path / "sim2real" / perturbed_flight.stem
    assert (folder / "replay.json").is_file() and (folder / "replay.svg").is_file(), sorted(tmp_path.rglob("*"))


def test_a_pose_topic_gives_velocities_by_differences(perturbed_flight, tmp_path):
    """Crazyswarm2 users may record /<cf>/pose (PoseStamped) instead of odometry: the same flight rewritten so by
    mcap_ros2's writer reads back with velocities and body rates close to the odometry's."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory
    from mcap_ros2.writer import Writer

    pose_log = tmp_path / "pose.mcap"
    header = (
        "================================================================================\n"
        "MSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n"
        "================================================================================\n"
        "MSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n"
    )
    pose_def = (
        "std_msgs/Header header\ngeometry_msgs/Pose pose\n"
        + header
        + "================================================================================\n"
        "MSG: geometry_msgs/Pose\nPoint position\nQuaternion orientation\n"
        "================================================================================\n"
        "MSG: geometry_msgs/Point\nfloat64 x\nfloat64 y\nfloat64 z\n"
        "================================================================================\n"
        "MSG: geometry_msgs/Quaternion\nfloat64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1\n"
    )
    twist_def = (
        "Vector3 linear\nVector3 angular\n"
        "================================================================================\n"
        "MSG: geometry_msgs/Vector3\nfloat64 x\nfloat64 y\nfloat64 z\n"
    )
    with open(perturbed_flight, "rb") as f, open(pose_log, "wb") as g:
        w = Writer(g)
        pose_schema = w.register_msgdef("geometry_msgs/msg/PoseStamped", pose_def)
        twist_schema = w.register_msgdef("geometry_msgs/msg/Twist", twist_def)
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for _, channel, message, m in reader.iter_decoded_messages():
            t = dict(log_time=message.log_time, publish_time=message.publish_time)
            if channel.topic == "/cf1/odom":
                p, q = m.pose.pose.position, m.pose.pose.orientation
                stamp = {"sec": m.header.stamp.sec, "nanosec": m.header.stamp.nanosec}
                msg = {
                    "header": {"stamp": stamp, "frame_id": "world"},
                    "pose": {
                        "position": {"x": p.x, "y": p.y, "z": p.z},
                        "orientation": {"x": q.x, "y": q.y, "z": q.z, "w": q.w},
                    },
                }
                w.write_message("/cf1/pose", pose_schema, msg, **t)
            elif channel.topic == "/cf1/cmd_vel_legacy":
                msg = {
                    "linear": {"x": m.linear.x, "y": m.linear.y, "z": m.linear.z},
                    "angular": {"x": m.angular.x, "y": m.angular.y, "z": m.angular.z},
                }
                w.write_message("/cf1/cmd_vel_legacy", twist_schema, msg, **t)
        w.finish()
    odom, pose = read_flight_log(perturbed_flight), read_flight_log(pose_log)
    assert pose.report.state_topic == "/cf1/pose" and len(pose.t) == len(odom.t)
    assert np.array_equal(pose.commands, odom.commands)
    flying = slice(200, len(odom.t) - 10)
    # differences of 2 mm position noise over 20 ms: a few cm/s of noise on velocities up to ~1 m/s
    assert np.median(np.abs(pose.velocity[flying] - odom.velocity[flying])) < 0.1
    assert np.median(np.abs(pose.angular_velocity[flying] - odom.angular_velocity[flying])) < 0.05
    assert np.abs(odom.angular_velocity[flying]).max() > 0.5  # body rates that a wrong sign or frame would miss
