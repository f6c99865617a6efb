"""A joint safety node judges each policy action against the joint state it answers (the arm's node, in process,
on a simulated clock this test sets)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import DOMAIN_ID

HOME = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.04, 0.04])  # a Franka's ready pose, fingers open
JOINT2 = np.eye(9)[1]


class ArmSafetyOnSimClock:
    def __init__(self, bundle):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.parameter import Parameter
        from robot_rl_ros.arm_safety_node import ArmSafetyNode
        from rosgraph_msgs.msg import Clock

        self.ctx = Context()
        rclpy.init(context=self.ctx, domain_id=1 + (DOMAIN_ID + 47) % 101)
        params = [
            Parameter("bundle", value=str(bundle)),
            Parameter("use_sim_time", value=True),
            Parameter("discovery_settle_s", value=0.0),
            Parameter("max_speed", value=[100.0] * 9),  # the lead limit is what these tests watch
        ]
        self.node = ArmSafetyNode(context=self.ctx, namespace="/arm", parameter_overrides=params)
        self.clock_node = rclpy.create_node("clock", context=self.ctx)
        self.clock_pub = self.clock_node.create_publisher(Clock, "/clock", 10)
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)
        self.ex.add_node(self.clock_node)

    def close(self) -> None:
        self.ex.shutdown()
        self.node.destroy_node()
        self.clock_node.destroy_node()
        self.ctx.try_shutdown()

    def spin_until(self, cond, timeout_s: float = 10.0) -> bool:
        end = time.monotonic() + timeout_s
        while not cond() and time.monotonic() < end:
            self.ex.spin_once(timeout_sec=0.01)
        return bool(cond())

    def set_clock(self, t: float) -> None:
        from rclpy.time import Time
        from rosgraph_msgs.msg import Clock

        stamp = Time(nanoseconds=round(t * 1e9)).to_msg()
        assert self.spin_until(lambda: self.clock_pub.publish(Clock(clock=stamp)) or abs(self.node.now() - t) < 1e-9)

    def state(self, q: np.ndarray, t: float) -> None:
        from robot_rl_ros.msgs import ARM_JOINT_NAMES, joint_state, s_to_stamp

        self.node._on_joints(joint_state(ARM_JOINT_NAMES, q, np.zeros(9), s_to_stamp(t)))

    def action(self, targets: np.ndarray, answers: float, names: list[str] | None = None) -> None:
        from robot_rl_ros.msgs import ARM_JOINT_NAMES, joint_state, s_to_stamp

        self.node._on_joint_action(joint_state(names or ARM_JOINT_NAMES, targets, [], s_to_stamp(answers)))

    @property
    def sent(self) -> int:
        return self.node.sup.counts["commands"]


@pytest.fixture
def arm_safety(trained_arm_bundle):
    node = ArmSafetyOnSimClock(trained_arm_bundle)
    node.set_clock(1.0)
    node.state(HOME, 1.0)
    node.action(HOME, answers=1.0)
    assert node.node.sup.mode.name == "ACTIVE", node.node.sup.reason
    yield node
    node.close()


def test_an_action_that_overtook_its_state_waits_for_it(arm_safety):
    """Seen under load in SITL: the policy's action reached the safety node before the joint state it answered, so
    its lead limit acted on the pose one period back and the command differed from the one a replay computes."""
    node = arm_safety
    moved = HOME + 0.1 * JOINT2  # state 1.04: joint 2 moved on
    wanted = moved + 0.15 * JOINT2  # 0.15 rad ahead of that pose, 0.25 ahead of the pose before: within the lead
    node.set_clock(1.04)
    sent = node.sent
    node.action(wanted, answers=1.04)
    assert node.sent == sent  # nothing judged yet: the state it answers is not here
    node.state(moved, 1.04)
    assert node.sent == sent + 1
    np.testing.assert_allclose(node.node.sup.last_cmd, wanted, atol=1e-12)  # the old rule sent HOME + 0.2


def test_an_action_whose_state_never_comes_is_judged_against_the_newest_after_the_wait(arm_safety):
    node = arm_safety
    sent = node.sent
    node.set_clock(1.04)
    node.action(HOME + 0.3 * JOINT2, answers=1.04)
    t0 = time.monotonic()
    assert node.spin_until(lambda: node.sent > sent)
    waited = time.monotonic() - t0
    assert waited >= 0.09, waited  # state_max_age_s of the arm's node: 0.1 s of wall time
    np.testing.assert_allclose(node.node.sup.last_cmd, HOME + 0.2 * JOINT2, atol=1e-12)  # lead from HOME


def test_an_action_for_an_old_state_is_dropped_and_counted(arm_safety):
    node = arm_safety
    for t in (1.08, 1.16):
        node.set_clock(t)
        node.state(HOME, t)
    node.action(HOME + 0.1 * JOINT2, answers=1.04)  # 120 ms old > 100 ms
    assert node.node.sup.counts["action.stale"] == 1
    assert node.node.sup.mode.name == "ACTIVE", node.node.sup.reason
    assert "answers a state 120 ms old > 100 ms" in node.node.sup.events.since(0)[-1].reason


def test_an_action_for_other_joints_takes_the_fallback(arm_safety):
    node = arm_safety
    names = [f"joint{i}" for i in range(9)]
    node.action(HOME, answers=1.0, names=names)
    assert node.node.sup.mode.name == "HOLD"
    assert node.node.sup.reason.startswith("policy action lacks ['panda_joint1'"), node.node.sup.reason


def test_disarmed_it_holds_the_arm_only_once_the_policy_stayed_silent(trained_arm_bundle):
    """A hold sent at the first state would race the policy's first action for that state; in lock-step SITL the
    bridge stepped on the hold and the policy ran a step behind from the start."""
    node = ArmSafetyOnSimClock(trained_arm_bundle)
    try:
        node.set_clock(1.0)
        node.state(HOME, 1.0)
        node.set_clock(1.12)  # the keep-alive timer fires on the way: within command_timeout_s (0.2 s) of the state
        node.spin_until(lambda: node.sent > 0, timeout_s=0.3)
        assert node.sent == 0 and node.node.sup.mode.name == "DISARMED"
        node.set_clock(1.24)
        assert node.spin_until(lambda: node.sent > 0)
        np.testing.assert_allclose(node.node.sup.last_cmd, HOME)
    finally:
        node.close()
