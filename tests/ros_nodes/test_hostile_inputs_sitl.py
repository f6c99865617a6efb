"""Hostile inputs against the whole SITL graph (sim bridge, policy and safety nodes as processes over DDS).

- One state message stamped 5 s in the future (a clock glitch), then one stamped 5 s in the past, while the
  trained policy hovers (Crazyflie) or holds its target (arm): the robot stays where it was, both messages are
  rejected on their own and counted on /diagnostics. Before, the future stamp became the reference and every
  real state for the next 5 s was dropped as out of order: the drone flew off.
- A second publisher on the robot's command topic (30 degrees of roll at 100 Hz for 1 s): the sim bridge takes
  none of its commands, the safety node reports the fault on /diagnostics within 0.5 s and lands.
"""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from sitl_report import sitl_report

pytest.importorskip("rclpy")

pytestmark = pytest.mark.slow

GOAL = np.array([0.0, 0.0, 1.0])
ARM_TARGET = (0.55, 0.15, 0.25)
GLITCH_S = 5.0


def _counter(obs, key: str) -> int:
    return int(obs.safety.get(key, "0"))


def _spin_sim_seconds(obs, seconds: float, wall_timeout_s: float = 60.0) -> None:
    t0 = obs.now()  # simulated time (the observer is on /clock); state stamps include the fakes
    assert obs.spin_until(lambda: obs.now() - t0 >= seconds, wall_timeout_s), "simulated time stopped"


def _publish_until_counted(obs, publish, counted, tries: int = 40) -> None:
    """Best-effort QoS (as a robot's state topic is) may drop a sample while discovery settles: offer the
    glitched message again, 0.3 s of wall time apart, until the nodes have counted a rejection."""
    for _ in range(tries):
        publish()
        if obs.spin_until(counted, 0.3):
            return
    raise AssertionError(f"no rejection counted after {tries} glitched messages: {obs.safety} {obs.policy}")


def _glitch_then_watch(obs, publish_glitch, counter_prefix: str, policy_skips=None) -> tuple[float, float]:
    """Publish a +5 s and a -5 s stamped state (1 s of simulated time apart), then watch 1.5 s more.
    policy_skips() (optional): the policy node's count of rejected states, which must count each glitch
    too before the next is sent (its diagnostics come once a simulated second).
    Returns the simulated time of the first glitch and of the end of the watch."""
    t_glitch = obs.now()
    skips0 = policy_skips() if policy_skips else 0
    policy_counted = lambda n: policy_skips is None or policy_skips() - skips0 >= n  # noqa: E731
    future = f"{counter_prefix}.dropped_future"
    _publish_until_counted(
        obs, lambda: publish_glitch(obs.now() + GLITCH_S), lambda: _counter(obs, future) >= 1 and policy_counted(1)
    )
    _spin_sim_seconds(obs, 1.0)
    # 5 s in the past is both older than the last accepted stamp and stale: counted as out of order
    back = (f"{counter_prefix}.dropped_out_of_order", f"{counter_prefix}.dropped_stale")
    _publish_until_counted(
        obs,
        lambda: publish_glitch(obs.now() - GLITCH_S),
        lambda: sum(_counter(obs, k) for k in back) >= 1 and policy_counted(2),
    )
    _spin_sim_seconds(obs, 1.5)
    return t_glitch, obs.now()


def test_glitched_odometry_stamps_do_not_move_a_hovering_drone(trained_bundle, tmp_path):
    from nav_msgs.msg import Odometry
    from robot_rl_ros import qos
    from robot_rl_ros.msgs import raw_to_odometry, s_to_stamp
    from robot_rl_ros.sitl import Observer, SitlGraph

    with SitlGraph("cf1", lockstep=True, log_dir=str(tmp_path)) as graph:
        obs = Observer("cf1", graph.domain_id, use_sim_time=True)
        glitch_pub = obs.node.create_publisher(Odometry, "odom", qos.SENSOR)
        try:
            graph.start_flight(str(trained_bundle), tuple(GOAL))
            hovering = lambda: (  # noqa: E731
                len(obs.states) > 100 and obs.states[-1][0] - obs.states[0][0] > 6.0
                and max(np.linalg.norm(p - GOAL) for _, p in obs.states[-100:]) < 0.05
            )  # fmt: skip
            assert obs.spin_until(hovering, 120.0), f"never hovered: {obs.safety}\n{graph.log('safety')[-1500:]}"
            # both nodes read odometry from the glitching publisher before it publishes (best effort, once)
            assert obs.spin_until(lambda: glitch_pub.get_subscription_count() >= 3, 30.0)
            hover = np.median([p for _, p in obs.states[-50:]], axis=0)
            policy_skips = lambda: int(obs.policy.get("skipped.stale", "0"))  # noqa: E731
            skips_before = policy_skips()
            fake = {"position": hover + [2.0, 0.0, 0.5], "quaternion": np.array([0.0, 0.0, 0.0, 1.0]),
                    "velocity": np.zeros(3), "angular_velocity": np.zeros(3)}  # fmt: skip
            t0, t1 = _glitch_then_watch(
                obs,
                lambda stamp: glitch_pub.publish(raw_to_odometry(fake, s_to_stamp(stamp), "world", "cf1")),
                "state",
                policy_skips,
            )
            obs.spin_until(lambda: False, 0.3)  # the last diagnostics
        finally:
            obs.close()
        log = graph.log("safety")
    # the observer hears the two fakes too: judge the real states, those near the hover point or not
    real = [p for t, p in obs.states if t0 <= t <= t1 and not np.allclose(p, fake["position"])]
    dev = max(np.linalg.norm(p - hover) for p in real)
    mode = obs.safety.get("mode")
    counts = {k: _counter(obs, f"state.dropped_{k}") for k in ("future", "out_of_order", "stale")}
    print(f"\nglitched odometry stamps (+/-{GLITCH_S:.0f} s): max deviation from the hover point {dev * 100:.1f} cm, "
          f"mode {mode}, safety node drops {counts}")  # fmt: skip
    assert mode == "ACTIVE", f"{obs.safety}\n{log[-2000:]}"
    assert dev <= 0.1, f"drifted {dev:.3f} m from the hover point\n{obs.safety}\n{log[-2000:]}"
    # the policy node rejected both glitches too
    assert int(obs.policy.get("skipped.stale", "0")) - skips_before >= 2, obs.policy


def test_glitched_joint_state_stamps_do_not_move_a_holding_arm(trained_arm_bundle, tmp_path):
    from robot_rl_ros import qos
    from robot_rl_ros.msgs import arm_joint_state, s_to_stamp
    from robot_rl_ros.sitl import Observer, SitlGraph
    from sensor_msgs.msg import JointState

    from robot_rl.deploy import load_bundle
    from robot_rl.deploy.arm_ik import IKSpec, forward_kinematics

    spec = IKSpec.from_dict(load_bundle(str(trained_arm_bundle)).extra["ik"])
    tcp = lambda q: forward_kinematics(spec, np.asarray(q)[None, :7]).tcp[0, :3, 3]  # noqa: E731
    with SitlGraph("arm", lockstep=True, log_dir=str(tmp_path)) as graph:
        obs = Observer("arm", graph.domain_id, use_sim_time=True, robot="arm")
        glitch_pub = obs.node.create_publisher(JointState, "joint_states", qos.SENSOR)
        try:
            graph.start_reach(str(trained_arm_bundle), ARM_TARGET)

            def held() -> bool:
                recent = obs.states[-50:]
                return len(obs.states) > 50 and max(np.linalg.norm(tcp(q) - ARM_TARGET) for _, q in recent) < 0.02

            assert obs.spin_until(held, 120.0), f"never reached the target: {obs.safety}\n{graph.log('safety')[-1500:]}"
            assert obs.spin_until(lambda: glitch_pub.get_subscription_count() >= 3, 30.0)
            hold = tcp(obs.states[-1][1])
            fake_q = obs.states[-1][1] + 0.5  # half a radian off on every joint
            t0, t1 = _glitch_then_watch(
                obs,
                lambda stamp: glitch_pub.publish(arm_joint_state(fake_q, np.zeros_like(fake_q), s_to_stamp(stamp))),
                "joint_states",
            )
            obs.spin_until(lambda: False, 0.3)
        finally:
            obs.close()
        log = graph.log("safety")
    real = [q for t, q in obs.states if t0 <= t <= t1 and not np.allclose(q, fake_q)]
    dev = max(np.linalg.norm(tcp(q) - hold) for q in real)
    print(
        f"\nglitched joint_states stamps (+/-{GLITCH_S:.0f} s): max TCP deviation {dev * 1e3:.1f} mm, "
        f"mode {obs.safety.get('mode')}"
    )
    assert obs.safety.get("mode") == "ACTIVE", f"{obs.safety}\n{log[-2000:]}"
    assert dev <= 0.02, f"TCP moved {dev:.3f} m\n{obs.safety}\n{log[-2000:]}"


def test_a_second_commander_is_refused_reported_and_lands(trained_bundle, tmp_path):
    """Wall clock, so that 0.5 s means real time. The intruder is its own DDS participant."""
    import rclpy
    from geometry_msgs.msg import Twist
    from rclpy.context import Context
    from robot_rl_ros import qos
    from robot_rl_ros.msgs import rpyt_to_twist
    from robot_rl_ros.sitl import Observer, SitlGraph

    safety = {"command_timeout_s": 0.5, "state_max_age_s": 0.5}  # a loaded 2-core machine stalls processes
    with SitlGraph("cf1", lockstep=False, log_dir=str(tmp_path)) as graph:
        obs = Observer("cf1", graph.domain_id, use_sim_time=False)
        ctx = Context()
        rclpy.init(context=ctx, domain_id=graph.domain_id)
        intruder = rclpy.create_node("intruder", namespace="/cf1", context=ctx)
        try:
            graph.start_flight(str(trained_bundle), tuple(GOAL), safety=safety)
            flying = lambda: (  # noqa: E731
                obs.safety.get("mode") == "ACTIVE" and len(obs.states) > 200
                and max(np.linalg.norm(p - GOAL) for _, p in obs.states[-50:]) < 0.1
            )  # fmt: skip
            assert obs.spin_until(flying, 120.0), f"never hovered: {obs.safety}\n{graph.log('safety')[-1500:]}"
            n_states = len(obs.states)
            pub = intruder.create_publisher(Twist, "cmd_vel_legacy", qos.COMMAND)
            roll = rpyt_to_twist([30.0, 0.0, 0.0, 45000.0])
            t_first = None
            t_end = time.monotonic() + 1.0
            while time.monotonic() < t_end:  # 100 Hz for 1 s
                pub.publish(roll)
                t_first = t_first if t_first is not None else obs.now()
                obs.spin_until(lambda: False, 0.01)
            pub.destroy()
            obs.spin_until(lambda: any("second publisher" in e for e in obs.safety_events), 5.0)
            obs.spin_until(lambda: False, 0.5)
        finally:
            intruder.destroy_node()
            ctx.try_shutdown()
            obs.close()
        bridge_log, safety_log = graph.log("sim_bridge"), graph.log("safety")
    faults = [e for e in obs.safety_events if "second publisher" in e]
    assert faults, f"no second-publisher fault on /diagnostics: {obs.safety_events[-10:]}\n{safety_log[-2000:]}"
    t_fault = float(re.match(r"event\.\w+ ([0-9.]+) ", faults[0]).group(1))
    assert faults[0].startswith("event.LAND"), faults
    positions = np.array([p for _, p in obs.states[n_states:]])
    lateral = float(np.abs(positions[:, :2] - GOAL[:2]).max())
    print(f"\nsecond commander: fault on /diagnostics {(t_fault - t_first) * 1e3:.0f} ms after its first command, "
          f"lateral excursion {lateral * 100:.1f} cm during and after 1 s of 30 deg roll commands")  # fmt: skip
    assert t_fault - t_first <= 0.5, faults
    assert "refused" in bridge_log, bridge_log[-2000:]
    # 30 degrees of roll for 1 s, obeyed, would carry the drone metres sideways
    assert lateral < 0.3, sitl_report({"lateral": lateral, "events": obs.safety_events[-20:]})
