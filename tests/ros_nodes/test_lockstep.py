"""The lock-step contract of the simulator bridges: one step per command that answers the current state."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import DOMAIN_ID


@pytest.fixture
def arm_bridge():
    import rclpy
    from rclpy.context import Context
    from rclpy.parameter import Parameter
    from robot_rl_ros.arm_sim_bridge import ArmSimBridge

    ctx = Context()
    rclpy.init(context=ctx, domain_id=1 + (DOMAIN_ID + 41) % 101)
    node = ArmSimBridge(context=ctx, namespace="/arm", parameter_overrides=[Parameter("commander", value="")])
    yield node
    node.destroy_node()
    ctx.try_shutdown()


def test_a_command_sent_before_the_current_state_replaces_the_target_without_a_step(arm_bridge):
    """Under load the safety node's keep-alive can step the world before the policy's action for the same state
    arrives; stepping on that action too would leave the policy a step behind for the rest of the run."""
    from std_msgs.msg import Float64MultiArray

    bridge = arm_bridge
    q = bridge.targets.copy()
    bridge._on_cmd(Float64MultiArray(data=list(q)), time.time_ns())  # answers the current state: a step
    assert bridge.steps == 1 and bridge.sim.time > 0.0
    t1 = bridge.sim.time
    late = q + 0.01
    bridge._on_cmd(Float64MultiArray(data=list(late)), time.time_ns() - 10**9)  # sent before state 1 was
    assert bridge.steps == 1 and bridge.sim.time == t1 and bridge.late_commands == 1
    assert np.array_equal(bridge.targets, late)  # the controller holds the newest command all the same
    bridge._on_cmd(Float64MultiArray(data=list(q)), None)  # the middleware did not say when: a step, as before
    assert bridge.steps == 2 and bridge.late_commands == 1
