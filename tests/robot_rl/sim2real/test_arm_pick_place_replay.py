"""Closed-loop replay of a pick-and-place log: the committed plan-guided bundle picks and places on layout 0 of its
pool in lock-step SITL over the ROS 2 nodes with the recorder on; `robot-rl replay ... bundle= layout=0` runs the
same bundle on the same table in simulation from the log's start, the object where the log's perception saw it."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from robot_rl.cli import main

pytestmark = pytest.mark.slow

LAYOUT = 0  # the layout tests/conftest.py's pick_place_log was recorded on


def _replay(args: list[str]) -> tuple[int, str]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = main(["replay", *args])
    return code, printed.getvalue()


def test_the_log_holds_what_perception_reported(pick_place_log):
    from robot_rl.sim2real.arm_log import read_arm_log

    log = read_arm_log(pick_place_log)
    assert log.object_position.shape == (len(log.t), 3) and log.object_quaternion.shape == (len(log.t), 4)
    assert np.allclose(np.linalg.norm(log.object_quaternion, axis=1), 1.0, atol=1e-6)
    assert np.ptp(log.goal, axis=0).max() == 0.0  # the bowl does not move
    assert log.object_position[:, 2].max() > log.object_position[0, 2] + 0.05  # the object was lifted


def test_closed_loop_replays_a_noise_free_log_exactly_and_ends_where_it_did(
    pick_place_log, trained_pick_place_bundle, tmp_path
):
    """The simulator is the SITL's own plant with the same parameters and no sensor noise, so the replay must
    follow the log exactly while the lock-stepped bridge stepped once per policy action (the comparison ends at the
    first period where it did not), and put the object where the log did."""
    import torch

    from robot_rl.sim2real.arm_log import read_arm_log
    from sim.robots.diff_ik import forward_kinematics

    code, printed = _replay([f"log={pick_place_log}", f"bundle={trained_pick_place_bundle}", f"layout={LAYOUT}",
                             f"out={tmp_path}"])  # fmt: skip
    assert code == 0, printed
    assert "object: RMS sim - log" in printed and "in the bowl in sim: True" in printed, printed
    log = read_arm_log(pick_place_log)
    closed = json.loads((tmp_path / "replay.json").read_text())["logs"][0]["closed_loop"]["nominal"]
    sim_tcp = np.array(closed["sim_position"])
    k0 = len(log.t) - len(sim_tcp)
    log_tcp = forward_kinematics(torch.as_tensor(log.position[k0:, :7])).tcp[:, :3, 3].numpy()
    # A late command (sent before the state it would have answered) replaces the target without a step: two commands
    # in one step, none in the next, the robot having stepped once each time. Anything else is irregular.
    n = log.published
    late = np.r_[False, (n[:-1] == 2) & (n[1:] == 0)]
    late |= np.r_[late[1:], False]
    irregular = np.flatnonzero(((n != 1) & ~late)[k0:])
    regular = int(irregular[0]) if len(irregular) else len(sim_tcp)
    assert regular >= 50, f"the lock-step was irregular from step {k0 + regular} on: nothing long to compare"
    apart = np.abs(sim_tcp[:regular] - log_tcp[:regular]).max()
    assert apart < 1e-4, f"the replay left the log by {apart * 1000:.3f} mm within {regular} regular steps"
    obj = closed["object"]
    assert np.linalg.norm(np.subtract(obj["final_m"]["sim"], obj["final_m"]["log"])) < 0.01, obj["final_m"]
    assert obj["sim_in_goal"]


def test_a_pick_and_place_replay_names_what_it_lacks(pick_place_log, trained_pick_place_bundle, tmp_path):
    """Without layout=, with the wrong layout (its bowl is not the logged goal) and with a non-finite object pose,
    one line and exit code 2."""
    from geometry_msgs.msg import PoseStamped
    from rclpy.serialization import deserialize_message, serialize_message
    from sim2real_robot import copy_mcap

    bundle = f"bundle={trained_pick_place_bundle}"
    code, printed = _replay([f"log={pick_place_log}", bundle, f"out={tmp_path / 'a'}"])
    assert code == 2 and "needs layout=" in printed, printed
    code, printed = _replay([f"log={pick_place_log}", bundle, "layout=1", f"out={tmp_path / 'b'}"])
    assert code == 2 and "is not layout 1's" in printed, printed

    bad = tmp_path / "nan_pose.mcap"

    def nan_pose(i, channel, message):
        if channel.topic != "/arm/object_pose" or i % 7:
            return message.data
        pose = deserialize_message(message.data, PoseStamped)
        pose.pose.position.x = float("nan")
        return serialize_message(pose)

    copy_mcap(pick_place_log, bad, payload=nan_pose)
    code, printed = _replay([f"log={bad}", bundle, f"layout={LAYOUT}", f"out={tmp_path / 'c'}"])
    assert code == 2 and "/arm/object_pose: a non-finite value" in printed, printed
