"""Joint-space message conversions: joints are matched by name (a broadcaster's order is not
guaranteed), a missing joint is a clear error, and setpoint messages map to their raw keys."""

from __future__ import annotations

import numpy as np
import pytest
from geometry_msgs.msg import TwistStamped
from robot_rl_ros.msgs import ADAPTERS, LEG_JOINT_NAMES, joint_arrays, joint_state, s_to_stamp
from sensor_msgs.msg import JointState


def test_joints_are_reordered_by_name_and_a_missing_one_is_named():
    q = np.arange(12, dtype=float)
    msg = joint_state(LEG_JOINT_NAMES, q, -q, s_to_stamp(1.0))
    order = np.random.default_rng(0).permutation(12)
    shuffled = JointState(name=[msg.name[i] for i in order], position=list(q[order]), velocity=list(-q[order]))
    pos, vel = joint_arrays(shuffled, LEG_JOINT_NAMES)
    assert np.array_equal(pos, q) and np.array_equal(vel, -q)
    shuffled.name[0] = "FR_hip"
    with pytest.raises(ValueError, match=f"lacks \\['{LEG_JOINT_NAMES[order[0]]}'\\]"):
        joint_arrays(shuffled, LEG_JOINT_NAMES)


def test_arm_and_leg_adapters_give_the_bundle_raw_keys():
    arm = ADAPTERS["arm_joints"][2]("")
    names = [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1", "panda_finger_joint2"]
    raw = arm(JointState(name=names, position=[0.1] * 7 + [0.02, 0.03], velocity=[0.0] * 9))
    assert raw["gripper_width"] == pytest.approx([0.05]) and raw["joint_position"].shape == (7,)
    cmd = TwistStamped()
    cmd.twist.linear.x, cmd.twist.linear.y, cmd.twist.angular.z = 0.5, -0.2, 0.3
    assert np.allclose(ADAPTERS["velocity_command"][2]("command")(cmd)["command"], [0.5, -0.2, 0.3])
