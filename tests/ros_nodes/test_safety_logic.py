"""The safety layer's pure logic, without ROS: every limiter acts, the fallback chain escalates."""

from __future__ import annotations

import numpy as np
import pytest
from robot_rl_ros import limits as L
from robot_rl_ros.fallback import FallbackController
from robot_rl_ros.monitor import InputMonitor
from robot_rl_ros.prearm import RobotSpec, check_bundle
from robot_rl_ros.supervisor import Mode, SafetySupervisor, SupervisorConfig

LEVEL = np.array([0.0, 0.0, 0.0, 1.0])


def state(pos=(0.0, 0.0, 1.0), vel=(0.0, 0.0, 0.0), quat=LEVEL):
    return {
        "position": np.array(pos, float),
        "velocity": np.array(vel, float),
        "quaternion": np.array(quat, float),
        "angular_velocity": np.zeros(3),
    }


def tilted_quat(deg):
    a = np.radians(deg) / 2
    return np.array([np.sin(a), 0.0, 0.0, np.cos(a)])


# ----- every limiter changes an out-of-range input -----
def test_clip_box_changes_out_of_range():
    lim = L.DroneLimits()
    out, hit = L.clip_box(np.array([50.0, -50.0, 500.0, 70000.0]), lim.low, lim.high)
    assert hit and np.allclose(out, [20.0, -20.0, 90.0, 60000.0])
    out, hit = L.clip_box(np.array([1.0, 1.0, 1.0, 1.0]), lim.low, lim.high)
    assert not hit


def test_tilt_limit_scales_roll_and_pitch_together():
    out, hit = L.limit_tilt(np.array([15.0, 15.0, 5.0, 30000.0]), 20.0)
    assert hit and np.hypot(out[0], out[1]) == pytest.approx(20.0) and out[0] == pytest.approx(out[1])
    assert out[2] == 5.0 and out[3] == 30000.0


def test_rate_limit_bounds_step_and_caps_dt():
    prev = np.array([0.0, 0.0, 0.0, 30000.0])
    out, hit = L.limit_rate(np.array([20.0, 0.0, 0.0, 60000.0]), prev, 0.01, np.array([600.0, 600.0, 1800.0, 200000.0]))
    assert hit and out[0] == pytest.approx(6.0) and out[3] == pytest.approx(32000.0)
    out, _ = L.limit_rate(np.array([20.0, 0, 0, 30000.0]), prev, 100.0, np.array([600.0, 600, 1800, 200000]))
    assert out[0] == pytest.approx(20.0)  # dt capped at 0.1 s: 60 deg allowed, 20 asked


def test_geofence_and_separation_report_reasons():
    lim = L.DroneLimits()
    assert L.geofence_violation([0, 0, 1], lim.fence_low, lim.fence_high) is None
    assert "z 2.50" in L.geofence_violation([0, 0, 2.5], lim.fence_low, lim.fence_high)
    assert "cf2" in L.separation_violation([0, 0, 1], {"cf2": np.array([0.1, 0, 1])}, 0.3)
    # Braking-aware: 1.5 m, climbing at 2 m/s with 4.5 m/s^2 and 0.1 s reaction stops at 2.14 m > 2.0 m.
    fence = (lim.fence_low, lim.fence_high, [0, 0, 2.0], lim.fence_brake_mps2, lim.fence_reaction_s)
    reason = L.geofence_violation([0, 0, 1.5], *fence)
    assert reason is not None and "would stop at 2.14" in reason
    assert (
        L.geofence_violation(
            [0, 0, 1.5], lim.fence_low, lim.fence_high, [0, 0, -2.0], lim.fence_brake_mps2, lim.fence_reaction_s
        )
        is None
    )  # fmt: skip  (moving away from the ceiling)
    assert L.geofence_violation([0, 0, 1.0], *fence) is None  # 1.64 m: room to stop


def test_limits_from_params_reject_bad_sizes():
    with pytest.raises(ValueError, match="low"):
        L.DroneLimits.from_params({"low": [0.0, 1.0]})


# ----- input monitor -----
def test_monitor_drops_out_of_order_and_stale():
    m = InputMonitor("state", 0.2)
    assert m.accept(10.0, 10.01) is None
    assert "out-of-order" in m.accept(9.99, 10.02)
    assert "old" in m.accept(10.5, 10.9)
    assert (m.accepted, m.dropped_out_of_order, m.dropped_stale) == (1, 1, 1)
    assert not m.fresh(10.3)


def test_monitor_a_future_stamp_is_rejected_and_never_the_reference():
    """A clock glitch (one message stamped 5 s ahead) must not make the following real states look out
    of order: that made the nodes drop about 500 states in a row while the drone flew off."""
    m = InputMonitor("state", 0.2, max_future_s=0.05)
    assert m.accept(10.00, 10.00) is None
    assert "ahead" in m.accept(15.01, 10.01)
    assert m.last_stamp == 10.00
    for k in range(1, 50):  # the real states go on being accepted
        t = 10.01 + 0.01 * k
        assert m.accept(t, t) is None
    assert (m.accepted, m.dropped_future, m.dropped_out_of_order, m.rejected_in_row) == (50, 1, 0, 0)
    assert m.accept(10.52, 10.5) is None  # within the tolerance: skew, or lock-step delivery order


def test_monitor_a_run_of_rejected_states_is_stale_by_the_receivers_clock():
    m = InputMonitor("state", 0.2, max_future_s=0.05)
    assert m.accept(10.0, 10.0) is None
    for k in range(1, 40):  # every later state 5 s in the past: rejected, and the input goes stale
        assert m.accept(5.0 + 0.01 * k, 10.0 + 0.01 * k) is not None
    assert m.rejected_in_row == 39 and m.fresh(10.19) and not m.fresh(10.21)
    # a stamp that is fresh on its face but received long after the last accepted message: age by receipt
    m2 = InputMonitor("state", 0.2)
    assert m2.accept(10.0, 9.96) is None
    assert m2.age(10.2) == pytest.approx(0.24)


def test_future_and_past_state_glitches_never_move_the_geofence_or_the_hold():
    sup = armed()
    sup.step(0.01)
    assert sup.mode == Mode.ACTIVE
    # stamped 5 s ahead and 5 s behind, far outside the fence: both rejected, the fence never judges them
    far = state(pos=(50.0, 0.0, 30.0))
    assert "ahead" in sup.on_state(far, 5.02, 0.02)
    assert "out-of-order" in sup.on_state(far, -4.98, 0.02)
    assert sup.mode == Mode.ACTIVE and sup.state["position"][0] == 0.0
    for k in range(3, 20):
        t = 0.01 * k
        assert sup.on_state(state(), t, t) is None
        sup.on_action(np.array([0.0, 0.0, 0.0, 38000.0]), t)
        sup.step(t)
    assert sup.mode == Mode.ACTIVE
    assert sup.counters()["state.dropped_future"] == 1 and sup.counters()["state.dropped_out_of_order"] == 1


def test_state_that_only_glitches_falls_back_within_the_state_age():
    sup = armed()
    sup.step(0.01)
    t = 0.01
    while sup.mode == Mode.ACTIVE and t < 1.0:
        t += 0.01
        sup.on_state(state(), t + 5.0, t)  # every state from a clock 5 s ahead
        sup.on_action(np.array([0.0, 0.0, 0.0, 38000.0]), t)
        sup.step(t)
    assert sup.mode == Mode.HOVER and "state stale" in sup.reason and t <= 0.21 + 1e-9


@pytest.mark.parametrize("quat", [(0.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 2.0), (0.5, 0.5, 0.0, 0.1)])
def test_non_unit_quaternion_is_rejected(quat):
    sup = armed()
    assert "quaternion norm" in sup.on_state(state(quat=quat), 0.01, 0.01)
    assert sup.counters()["state.bad_quaternion"] == 1 and sup.state_in.last_stamp == 0.0


# ----- supervisor -----
def armed(now=0.0, **cfg):
    sup = SafetySupervisor(SupervisorConfig(**cfg), [])
    sup.on_state(state(), now, now)
    sup.on_action(np.array([0.0, 0.0, 0.0, 38000.0]), now)
    for _ in range(sup.cfg.unlock_setpoints):  # the thrust-unlock setpoints, delivered
        assert np.all(sup.step(now) == 0.0) and sup.mode == Mode.DISARMED
        sup.note_unlock_delivered(now)
    sup.step(now)
    assert sup.mode == Mode.ACTIVE
    return sup


def test_first_command_is_the_zero_thrust_unlock_even_with_fresh_inputs():
    sup = SafetySupervisor(SupervisorConfig(), [])
    sup.on_state(state(), 0.0, 0.0)
    sup.on_action(np.array([0.0, 0.0, 0.0, 38000.0]), 0.0)
    assert "unlock" in sup.arm(0.0)
    for _ in range(20):  # nobody listening yet: zero thrust, never armed
        assert sup.step(0.0)[3] == 0.0 and sup.mode == Mode.DISARMED
    stale = SafetySupervisor(SupervisorConfig(), [])
    stale.note_unlock_delivered(0.0)  # no state from the robot yet: not counted
    assert stale.unlock_sent == 0
    for _ in range(sup.cfg.unlock_setpoints):
        assert sup.step(0.0)[3] == 0.0 and sup.mode == Mode.DISARMED
        sup.note_unlock_delivered(0.0)
    assert sup.step(0.01)[3] > 0.0 and sup.mode == Mode.ACTIVE


def test_prearm_gate_blocks_until_inputs_fresh_and_problems_clear():
    sup = SafetySupervisor(SupervisorConfig(), ["bundle: hash mismatch"])
    sup.on_state(state(), 0.0, 0.0)
    sup.on_action(np.zeros(4), 0.0)
    assert np.all(sup.step(0.0) == 0.0) and sup.mode == Mode.DISARMED
    assert "hash" in sup.arm(0.0)
    fresh = SafetySupervisor(SupervisorConfig(), [])
    assert "state not fresh" in fresh.arm(0.0)


def test_active_filters_policy_commands():
    sup = armed()
    sup.on_action(np.array([80.0, 0.0, 0.0, 38000.0]), 0.01)
    cmd = sup.step(0.01)
    assert cmd[0] <= 20.0 and sup.counts["limit.clip"] >= 1 and sup.counts["limit.rate"] >= 1


def test_nonfinite_action_goes_to_hover_and_never_out():
    sup = armed()
    sup.on_action(np.array([np.nan, 0.0, 0.0, 38000.0]), 0.01)
    cmd = sup.step(0.01)
    assert sup.mode == Mode.HOVER and np.all(np.isfinite(cmd)) and sup.counts["action.nonfinite"] == 1


def test_nonfinite_state_is_rejected():
    sup = armed()
    assert "non-finite" in sup.on_state(state(pos=(np.inf, 0, 1)), 0.01, 0.01)
    assert sup.state_in.dropped_nonfinite == 1


def test_policy_stale_hover_then_land_then_motors_off():
    sup = armed(hover_timeout_s=1.0, land_timeout_s=2.0)
    t = 0.0
    for _ in range(15):  # state keeps coming, the policy stops
        t += 0.01
        sup.on_state(state(), t, t)
        sup.step(t)
    assert sup.mode == Mode.HOVER and "policy command stale" in sup.reason
    for _ in range(110):
        t += 0.01
        sup.on_state(state(), t, t)
        sup.step(t)
    assert sup.mode == Mode.LAND
    for _ in range(210):
        t += 0.01
        sup.on_state(state(), t, t)
        cmd = sup.step(t)
    assert sup.mode == Mode.MOTORS_OFF and cmd[3] == 0.0


def test_state_stale_falls_back_and_lands_when_low():
    sup = armed()
    sup.on_action(np.zeros(4) + [0, 0, 0, 38000], 0.25)
    sup.step(0.25)
    assert sup.mode == Mode.HOVER and "state stale" in sup.reason
    sup2 = armed()
    sup2._set(0.0, Mode.LAND, "test")
    sup2.on_state(state(pos=(0, 0, 0.02)), 0.05, 0.05)
    sup2.step(0.05)
    assert sup2.mode == Mode.MOTORS_OFF and sup2.reason == "landed"


def test_geofence_lands_tumble_cuts_envelope_hovers_separation_hovers():
    sup = armed()
    sup.on_state(state(pos=(0, 0, 2.3)), 0.01, 0.01)
    assert sup.mode == Mode.LAND and "geofence" in sup.reason
    sup = armed()
    sup.on_state(state(quat=tilted_quat(90)), 0.01, 0.01)
    assert sup.mode == Mode.MOTORS_OFF and "tumble" in sup.reason
    sup = armed()
    sup.on_state(state(quat=tilted_quat(50)), 0.01, 0.01)
    assert sup.mode == Mode.HOVER and "envelope" in sup.reason
    sup = armed()
    sup.on_neighbour("cf2", [0.1, 0.0, 1.0], 0.01, 0.01)
    sup.on_state(state(), 0.02, 0.02)
    assert sup.mode == Mode.HOVER and "separation" in sup.reason


def test_estop_latched_zero_thrust_and_refuses_arm():
    sup = armed()
    sup.estop(0.01, "test")
    assert sup.step(0.01)[3] == 0.0
    sup.on_action(np.array([0, 0, 0, 40000.0]), 0.02)
    assert sup.step(0.02)[3] == 0.0 and "latched" in sup.arm(0.02) and sup.mode == Mode.ESTOP


def test_fallback_hover_levels_and_corrects_altitude():
    fb = FallbackController()
    cmd = fb.hover(state(pos=(0, 0, 0.8), vel=(1.0, 0.0, 0.0)), 1.0)
    assert cmd[1] < 0  # moving +x: pitch up (negative) to brake
    assert cmd[3] > fb.g.hover_pwm  # below the hold height: more thrust
    assert fb.land(None)[3] < fb.g.hover_pwm


# ----- pre-arm checks of the bundle -----
def test_prearm_reports_bundle_problems(pd_bundle, tmp_path):
    from conftest import write_pd_bundle

    _, problems = check_bundle(str(pd_bundle), RobotSpec())
    assert problems == []
    _, problems = check_bundle(str(tmp_path / "none"), RobotSpec())
    assert problems and problems[0].startswith("bundle: no policy.yaml")
    other = write_pd_bundle(tmp_path / "arm", robot="arm", mode="joint_position")
    _, problems = check_bundle(str(other), RobotSpec())
    assert any("robot 'arm'" in p for p in problems) and any("action mode" in p for p in problems)
    (other / "policy.onnx").write_bytes(b"tampered")
    _, problems = check_bundle(str(other), RobotSpec())
    assert "sha256" in problems[0]


def test_a_second_commander_blocks_arming_and_lands_once_armed():
    sup = SafetySupervisor(SupervisorConfig(unlock_setpoints=0), [])
    sup.on_state(state(), 0.0, 0.0)
    sup.on_action(np.array([0.0, 0.0, 0.0, 38000.0]), 0.0)
    sup.on_command_publishers(0.0, "/cf1/cmd_vel_legacy", ["/cf1/intruder"])
    assert "second publisher on /cf1/cmd_vel_legacy: /cf1/intruder" in sup.arm(0.0)
    # gone from one graph query is not gone: arming waits for clear_checks clean checks in a row
    for k in range(sup.commanders.clear_checks - 1):
        sup.on_command_publishers(0.001 * k, "/cf1/cmd_vel_legacy", [])
        assert "not seen for" in sup.arm(0.001 * k) and sup.mode != Mode.ACTIVE
    sup.on_command_publishers(0.01, "/cf1/cmd_vel_legacy", ["/cf1/intruder"])  # back: the count starts again
    for _ in range(sup.commanders.clear_checks - 1):
        sup.on_command_publishers(0.01, "/cf1/cmd_vel_legacy", [])
    assert sup.arm(0.01) is not None
    sup.on_command_publishers(0.01, "/cf1/cmd_vel_legacy", [])
    assert sup.arm(0.01) is None and sup.mode == Mode.ACTIVE
    for k in range(3):
        sup.on_command_publishers(0.02 + k * 0.1, "/cf1/cmd_vel_legacy", ["/cf1/intruder"])
    assert sup.mode == Mode.LAND and "second publisher" in sup.reason
    assert sup.counters()["command.second_publisher"] == 5
    assert sum(e.kind == "LAND" for e in sup.events.since(0)) == 1  # one event per conflict, not per check


def test_arming_waits_until_the_graph_has_settled():
    """A commander that was there before the safety node started may not be discovered yet: the node reports
    the graph as settling for its first discovery_settle_s, and that blocks arming like a second commander."""
    sup = SafetySupervisor(SupervisorConfig(unlock_setpoints=0), [])
    sup.on_state(state(), 0.0, 0.0)
    sup.on_action(np.array([0.0, 0.0, 0.0, 38000.0]), 0.0)
    settling = "discovery: watching the graph for other commanders (0.3 s of 1)"
    sup.on_command_publishers(0.0, "/cf1/cmd_vel_legacy", [], settling)
    assert sup.arm(0.0) == settling and sup.mode == Mode.DISARMED
    sup.on_command_publishers(0.01, "/cf1/cmd_vel_legacy", [])
    assert sup.arm(0.01) is None and sup.mode == Mode.ACTIVE
