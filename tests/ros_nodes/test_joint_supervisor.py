"""The joint-space safety supervisor without ROS: every limiter changes an out-of-range input; the arm's
fallbacks (HOLD, latched ESTOP) hold a fixed pose, the legs' (DAMP) damp, and neither ever emits a
non-finite target."""

from __future__ import annotations

import numpy as np
import pytest
from robot_rl_ros.joint_supervisor import JointMode, JointSupervisor, JointSupervisorConfig

from robot_rl.deploy.joint_limits import arm_limits, go1_limits, limit_lead

HOME = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.04, 0.04])


def panda_tcp(q7: np.ndarray) -> np.ndarray:
    """The real deploy-side FK of the Panda-like arm (DH table), as the node builds it from a bundle."""
    from robot_rl.deploy.arm_ik import IKSpec, forward_kinematics
    from sim.robots.diff_ik import DiffIK

    spec = IKSpec.from_dict(DiffIK().spec())
    return forward_kinematics(spec, np.asarray(q7)[None]).tcp[0, :3, 3]


def armed(tcp=None) -> JointSupervisor:
    sup = JointSupervisor(JointSupervisorConfig(), [], tcp)
    sup.on_state(HOME, 0.0, 0.0)
    sup.on_action(HOME, 0.0)
    sup.step(0.0)
    assert sup.mode == JointMode.ACTIVE
    return sup


def test_active_commands_pass_through_the_limiters_and_are_counted():
    sup = armed()
    sup.on_state(HOME, 0.01, 0.04)
    sup.on_action(HOME + np.r_[0.5, 0, 0, 0, 0, 0, 0, 0, 0], 0.04)
    cmd = sup.step(0.04)
    assert cmd[0] == pytest.approx(min(0.2, 2.175 * 0.04))  # lead 0.2 rad, then speed 2.175 rad/s x 40 ms
    assert sup.counts["limit.lead"] == 1 and sup.counts["limit.speed"] == 1


def test_workspace_refuses_a_commanded_pose_and_holds_when_the_arm_is_outside():
    sup = armed(panda_tcp)
    down = HOME.copy()
    down[3] = -0.3  # elbow straight: the TCP swings far forward and down, out of the box
    sup.on_state(HOME, 0.01, 0.04)
    sup.cfg.limits.max_lead[:] = 10.0
    sup.cfg.limits.max_speed[:] = 100.0
    sup.on_action(down, 0.04)
    cmd = sup.step(0.04)
    assert sup.counts["limit.workspace"] == 1 and np.allclose(cmd, HOME)
    sup.on_state(down, 0.02, 0.05)  # the arm is there anyway (pushed): HOLD
    assert sup.mode == JointMode.HOLD and "workspace" in sup.reason


def test_nan_action_stale_state_out_of_order_and_estop():
    sup = armed()
    sup.on_action(np.full(9, np.nan), 0.01)
    assert sup.mode == JointMode.HOLD and sup.counts["action.nonfinite"] == 1
    cmd = sup.step(0.02)
    assert np.all(np.isfinite(cmd)) and np.allclose(cmd, HOME)

    sup = armed()
    assert sup.on_state(HOME, -0.5, 0.01).startswith("joint_states: out-of-order")
    assert sup.on_state(np.r_[HOME[:8], np.inf], 0.02, 0.02).endswith("non-finite values rejected")
    sup.on_action(HOME, 0.15)
    sup.step(0.15)  # no fresh state for 150 ms > 100 ms
    assert sup.mode == JointMode.HOLD and "joint_states stale" in sup.reason

    sup = armed()
    sup.on_state(HOME, 0.25, 0.25)
    sup.step(0.25)  # fresh state, no policy action for 250 ms > 200 ms
    assert sup.mode == JointMode.HOLD and "policy command stale" in sup.reason
    sup.estop(0.26, "test")
    assert sup.mode == JointMode.ESTOP and np.allclose(sup.step(0.27), HOME)
    assert "latched" in sup.arm(0.28)


def test_limits_reject_malformed_parameters():
    with pytest.raises(ValueError, match="needs 9 values"):
        arm_limits().with_params({"q_low": [0.0] * 7})
    with pytest.raises(ValueError, match="exceeds"):
        arm_limits().with_params({"workspace_low": [1.0, 1.0, 1.0], "workspace_high": [0.0, 0.0, 0.0]})
    with pytest.raises(ValueError, match="'hold' or 'damp'"):
        JointSupervisorConfig(fallback="brake")


STAND = np.array([-0.1, 0.8, -1.5, 0.1, 0.8, -1.5, -0.1, 1.0, -1.5, 0.1, 1.0, -1.5])
LEVEL = np.array([0.0, 0.0, 0.0, 1.0])


def test_legs_damp_on_stale_commands_tilt_and_estop():
    cfg = JointSupervisorConfig(limits=go1_limits(), fallback="damp", max_tilt_deg=60.0, command_timeout_s=0.1)
    sup = JointSupervisor(cfg, [])
    sup.on_state(STAND, 0.0, 0.0)
    sup.on_action(STAND + 0.05, 0.0)
    assert np.allclose(sup.step(0.0), STAND + 0.05) and sup.mode == JointMode.ACTIVE and not sup.damping
    sup.on_attitude(LEVEL, 0.01)
    assert sup.mode == JointMode.ACTIVE
    fallen = np.array([np.sin(np.radians(35)), 0.0, 0.0, np.cos(np.radians(35))])  # 70 deg roll
    sup.on_attitude(fallen, 0.02)
    assert sup.mode == JointMode.DAMP and "tilt 70" in sup.reason and sup.damping
    sup.on_state(STAND - 0.3, 0.03, 0.03)
    assert np.allclose(sup.step(0.03), STAND - 0.3)  # damping: targets follow the joints, no stiffness

    sup = JointSupervisor(cfg, [])
    sup.on_state(STAND, 0.0, 0.0)
    sup.on_action(STAND, 0.0)
    sup.step(0.0)
    sup.on_state(STAND, 0.15, 0.15)
    sup.step(0.15)
    assert sup.mode == JointMode.DAMP and "policy command stale" in sup.reason
    sup.estop(0.2, "test")
    assert sup.mode == JointMode.ESTOP and sup.damping and "latched" in sup.arm(0.3)
    big, hit = limit_lead(STAND + 2.0, STAND, go1_limits().max_lead)
    assert hit and np.allclose(big - STAND, 0.6)
