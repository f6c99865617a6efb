"""Policy and safety nodes as real processes over DDS on loopback; the test plays the robot.

Fault injection: state stops, NaN state, out-of-order stamps, e-stop (topic, latched, late
subscriber), policy killed, bad bundle. Every command seen is checked against the limits.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("rclpy")
# reaction times bounded in milliseconds: make test runs these after the others, with no test beside them
pytestmark = pytest.mark.timing

from conftest import DOMAIN_ID  # noqa: E402
from harness import Harness  # noqa: E402
from robot_rl_ros.limits import DroneLimits  # noqa: E402
from robot_rl_ros.sitl import SitlGraph  # noqa: E402
from watch import LimitWatcher  # noqa: E402

LIM = DroneLimits()
_counter = [0]


@pytest.fixture
def graph_and_harness(pd_bundle, tmp_path, limit_ledger, request):
    # A fresh domain per test so latched e-stops and stale publishers of one test never reach another.
    _counter[0] += 1
    domain = 1 + (DOMAIN_ID + 17 * _counter[0]) % 101
    graph = SitlGraph("cf1", domain_id=domain, lockstep=False, log_dir=str(tmp_path))
    h = Harness(domain)
    watcher = LimitWatcher(domain, limit_ledger, label=request.node.name)  # independent of the harness
    graph.start("policy", "policy_node", {"bundle": str(pd_bundle), "goal": [0.0, 0.0, 1.0]})
    graph.start("safety", "safety_node", {"bundle": str(pd_bundle)})
    try:
        ok = h.wait_for(lambda: h.mode().startswith("ACTIVE"), 30.0)
        assert ok, f"never armed: modes {h.modes}\n{graph.log('safety')}\n{graph.log('policy')}"
        # The watcher is a separate DDS participant: a short test can end before discovery pairs it with the
        # safety node on a loaded machine (a CI run saw none), so the test starts once it hears commands too.
        heard = watcher.wait_for(lambda: len(watcher.commands) > 0, 30.0)
        assert heard, f"the independent watcher heard no commands in 30 s\n{graph.log('safety')}"
        yield graph, h
    finally:
        h.close()
        graph.close()
        watcher.close()
    assert_all_commands_within_limits(h)


def assert_all_commands_within_limits(h: Harness) -> None:
    cmds = np.array([c[1] for c in h.commands])
    assert cmds.size and np.all(np.isfinite(cmds)), "a non-finite command left the safety node"
    assert np.all(cmds >= LIM.low - 1e-9) and np.all(cmds <= LIM.high + 1e-9)
    assert np.all(np.hypot(cmds[:, 0], cmds[:, 1]) <= LIM.max_tilt_deg + 1e-6)


def test_commands_flow_and_state_loss_falls_back(graph_and_harness):
    graph, h = graph_and_harness
    time.sleep(0.5)
    t0 = time.monotonic()
    h.stream = False
    assert h.wait_for(lambda: h.mode().startswith("HOVER"), 2.0)
    t_fallback = next(t for t, m in h.modes if m.startswith("HOVER"))
    assert t_fallback - t0 <= 0.5, f"fallback after {t_fallback - t0:.3f} s"
    assert "state stale" in h.mode()
    time.sleep(0.5)
    assert h.max_gap(t0 - 0.5) < 0.1, "command stream dropped below 10 Hz"


def test_nonfinite_state_never_gives_nonfinite_command(graph_and_harness):
    graph, h = graph_and_harness
    h.corrupt = lambda raw, stamp: ({**raw, "position": np.array([np.nan, 0.0, 1.0])}, stamp)
    assert h.wait_for(lambda: h.mode().startswith("HOVER"), 2.0)
    assert h.wait_for(lambda: int(h.safety_diag.get("state.dropped_nonfinite", "0")) > 5, 2.0)


def test_out_of_order_stamps_dropped_and_counted(graph_and_harness):
    graph, h = graph_and_harness
    n = [0]

    def shuffle(raw, stamp):
        n[0] += 1
        return raw, stamp - (0.05 if n[0] % 2 else 0.0)  # every other sample goes back in time

    h.corrupt = shuffle
    assert h.wait_for(lambda: int(h.safety_diag.get("state.dropped_out_of_order", "0")) >= 10, 3.0)
    assert h.mode().startswith("ACTIVE")  # newest samples still fresh: observation age stays bounded


def test_estop_zero_thrust_fast_latched_and_seen_late(graph_and_harness, pd_bundle):
    graph, h = graph_and_harness
    from std_msgs.msg import Bool

    time.sleep(0.3)
    t0 = time.monotonic()
    h.estop_pub.publish(Bool(data=True))
    assert h.wait_for(lambda: any(t >= t0 and c[3] == 0.0 for t, c in h.commands), 1.0)
    t_zero = next(t for t, c in h.commands if t >= t0 and c[3] == 0.0)
    assert t_zero - t0 <= 0.02, f"zero thrust after {(t_zero - t0) * 1e3:.1f} ms (> 2 control periods)"
    assert h.wait_for(lambda: h.mode().startswith("ESTOP"), 1.0)
    time.sleep(0.3)
    assert all(c[3] == 0.0 for t, c in h.commands if t >= t_zero)  # latched
    late = Harness(graph.domain_id)  # a subscriber that starts after the e-stop still sees the mode
    try:
        assert late.wait_for(lambda: late.mode().startswith("ESTOP"), 30.0)  # discovery alone can take seconds
    finally:
        late.close()


def test_policy_killed_falls_back_fast(graph_and_harness):
    graph, h = graph_and_harness
    time.sleep(0.3)
    t0 = time.monotonic()
    graph.procs["policy"].send_signal(signal.SIGKILL)
    graph.procs["policy"].wait()
    assert h.wait_for(lambda: h.mode().startswith("HOVER"), 2.0)
    t_fb = next(t for t, m in h.modes if m.startswith("HOVER"))
    assert t_fb - t0 <= 0.2, f"fallback {t_fb - t0:.3f} s after the policy died"
    assert "policy command stale" in h.mode()
    time.sleep(0.3)
    assert h.max_gap(t0) < 0.1


def test_bad_bundle_exits_with_one_line_reason(tmp_path):
    from robot_rl_ros.rosenv import local_dds_env
    from robot_rl_ros.sitl_graph import _pythonpath

    env = local_dds_env(DOMAIN_ID)
    env["PYTHONPATH"] = _pythonpath()
    out = subprocess.run(
        [sys.executable, "-m", "robot_rl_ros.policy_node", "--ros-args", "-p", f"bundle:={tmp_path}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].startswith("PolicyNode: no policy.yaml in")


def test_a_second_commander_blocks_arming_until_it_leaves(pd_bundle, tmp_path):
    from geometry_msgs.msg import Twist
    from robot_rl_ros import qos

    _counter[0] += 1
    domain = 1 + (DOMAIN_ID + 17 * _counter[0]) % 101
    graph = SitlGraph("cf1", domain_id=domain, lockstep=False, log_dir=str(tmp_path))
    h = Harness(domain)
    intruder = h.node.create_publisher(Twist, "cmd_vel_legacy", qos.COMMAND)  # publishes nothing: being there is enough
    try:
        graph.start("policy", "policy_node", {"bundle": str(pd_bundle), "goal": [0.0, 0.0, 1.0]})
        # The node watches the graph this long before it may arm. The default (1 s) was shorter than DDS
        # discovery once in CI on a loaded machine: it armed, then saw the intruder and landed.
        settle_s = 5.0
        t_started = time.monotonic()
        graph.start("safety", "safety_node", {"bundle": str(pd_bundle), "discovery_settle_s": settle_s})
        fault = "second publisher on /cf1/cmd_vel_legacy: /cf1/harness"
        assert h.wait_for(lambda: any(fault in e for e in h.safety_events), 30.0), h.safety_events
        # state and actions flow and the unlock setpoints go out past the settle window, yet it does not arm
        assert h.wait_for(lambda: len(h.commands) > 50 and time.monotonic() > t_started + settle_s + 1.0, 30.0)
        assert not any(m.startswith("ACTIVE") for _, m in h.modes), h.modes
        assert int(h.safety_diag.get("command.second_publisher", "0")) > 0, h.safety_diag
        h.node.destroy_publisher(intruder)
        assert h.wait_for(lambda: h.mode().startswith("ACTIVE"), 30.0), f"{h.modes}\n{graph.log('safety')}"
    finally:
        h.close()
        graph.close()


def test_policy_holds_its_integrators_until_the_safety_node_is_active(trained_bundle, tmp_path):
    """A drone held on the ground by pre-arm checks must not arm with its goal error integral wound up: until
    safety/mode says ACTIVE the policy node restarts the bundle's integrators each step; from then on they
    integrate (here the drone sits 0.7 m under its goal, so the integral's z grows)."""
    from robot_rl_ros import qos
    from std_msgs.msg import Float32MultiArray, String

    from robot_rl.deploy import load_bundle

    bundle = load_bundle(trained_bundle)
    at, term = 0, None
    for t in bundle.observation:
        if "goal_error_integral" in t.inputs:
            term = t
            break
        at += t.dim
    assert term is not None and term.dim == 3
    _counter[0] += 1
    domain = 1 + (DOMAIN_ID + 17 * _counter[0]) % 101
    graph = SitlGraph("cf1", domain_id=domain, lockstep=False, log_dir=str(tmp_path))
    h = Harness(domain)
    h.position = np.array([0.0, 0.0, 0.3])
    integral_z: list[float] = []
    mode_pub = h.node.create_publisher(String, "safety/mode", qos.LATCHED)
    h.node.create_subscription(
        Float32MultiArray, "policy/observation", lambda m: integral_z.append(m.data[at + 2] / term.scale), qos.RECORD
    )
    try:
        mode_pub.publish(String(data="DISARMED: waiting for pre-arm checks (test)"))
        graph.start("policy", "policy_node", {"bundle": str(trained_bundle), "goal": [0.0, 0.0, 1.0],
                                              "publish_observation": True})  # fmt: skip
        assert h.wait_for(lambda: len(integral_z) >= 150, 30.0), graph.log("policy")
        # each step restarts it, so it shows only that step's error x dt (0.7 m x 0.01 s); integrating, the last
        # second alone would add 0.7 m s (steps before the node heard the mode may have integrated: not judged)
        assert max(abs(z) for z in integral_z[-100:]) <= 0.0071, integral_z[-5:]
        held = len(integral_z)
        mode_pub.publish(String(data="ACTIVE: armed (test)"))
        assert h.wait_for(lambda: len(integral_z) >= held + 100, 30.0)
        assert integral_z[-1] > 0.3, integral_z[held:][-5:]
    finally:
        h.close()
        graph.close()
