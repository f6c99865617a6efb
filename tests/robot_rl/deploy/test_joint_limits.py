"""The joint limits and the target filter the joint-space safety layer applies (robot_rl/deploy/joint_limits.py):
every limiter changes an out-of-range input and leaves one in range alone; the filter applies them in order and
refuses a pose outside the workspace."""

from __future__ import annotations

import numpy as np

from robot_rl.deploy.joint_limits import arm_limits, clip_joints, filter_targets, limit_lead, limit_speed, outside_box

HOME = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.04, 0.04])


def test_each_limiter_changes_an_out_of_range_input():
    lim = arm_limits()
    q, hit = clip_joints(HOME + np.r_[0, 5.0, 0, 0, 0, 0, 0, 0, 0], lim.q_low, lim.q_high)
    assert hit and q[1] == lim.q_high[1]
    q, hit = limit_lead(HOME + 0.5, HOME, lim.max_lead)
    assert hit and np.allclose(q - HOME, lim.max_lead)
    q, hit = limit_speed(HOME + 0.5, HOME, 0.04, lim.max_speed)
    assert hit and np.allclose(q - HOME, lim.max_speed * 0.04)
    assert outside_box(np.array([0.5, 0.0, -0.1]), lim.workspace_low, lim.workspace_high).startswith("TCP z")
    for f, args in ((clip_joints, (lim.q_low, lim.q_high)), (limit_lead, (HOME, lim.max_lead))):
        assert not f(HOME, *args)[1]  # in range: unchanged
    assert outside_box(np.array([0.5, 0.0, 0.3]), lim.workspace_low, lim.workspace_high) is None


def test_the_filter_applies_the_limiters_in_order_and_refuses_a_pose_outside_the_workspace():
    lim = arm_limits()
    far = HOME + np.r_[0.5, 0, 0, 0, 0, 0, 0, 0, 0]
    cmd, hits, refused = filter_targets(far, HOME, HOME, 0.04, lim)
    # the lead limit lets 0.2 rad through, then the speed limit 2.175 rad/s over 0.04 s: 0.087 rad
    assert hits == {"joint": False, "lead": True, "speed": True, "workspace": False} and refused is None
    assert np.isclose(cmd[0], lim.max_speed[0] * 0.04) and np.array_equal(cmd[1:], HOME[1:])
    below_table = lambda q7: np.array([0.5, 0.0, -0.1])  # noqa: E731
    cmd, hits, refused = filter_targets(far, HOME, None, 0.0, lim, below_table)
    assert hits["workspace"] and refused.startswith("TCP z") and np.array_equal(cmd, HOME)  # the measured joints
