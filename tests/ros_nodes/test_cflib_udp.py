"""The cflib mode end to end on cflib's UDP link: our CflibLink, SetpointStreamer and CrazyflieBridge
talk real CRTP to a firmware stand-in (crtp_endpoint.py), the only stand-in, at the radio boundary.

What the endpoint must see: the zero-thrust unlock first, setpoints in the firmware's units at
>= 10 Hz, the e-stop packet, and the stop notification before the link is handed back.
"""

from __future__ import annotations

import threading
import time

import cflib  # noqa: F401  (fails loudly where cflib is missing, like the other node tests)
import numpy as np
import pytest
import rclpy
from conftest import DOMAIN_ID
from crtp_endpoint import DEFAULT_STATE, CrtpEndpoint, EmergencyStop, Land, NotifyStop, Setpoint
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from robot_rl_ros import qos
from robot_rl_ros.cflib_link import CflibLink, SetpointStreamer
from robot_rl_ros.msgs import odometry_to_raw
from robot_rl_ros.sitl import SitlGraph
from std_srvs.srv import Empty

F32 = np.float32


def expected_raw(state: dict) -> dict[str, np.ndarray]:
    """What our link must deliver for the endpoint's state: float32 on the wire, FP16 gyro deg/s -> rad/s."""

    def f32(*names):
        return np.array([F32(state[n]) for n in names], dtype=np.float64)

    gyro_deg = np.array([np.float16(state[f"gyro.{a}"]) for a in "xyz"], dtype=np.float64)
    return {
        "position": f32("stateEstimate.x", "stateEstimate.y", "stateEstimate.z"),
        "velocity": f32("stateEstimate.vx", "stateEstimate.vy", "stateEstimate.vz"),
        "quaternion": f32("stateEstimate.qx", "stateEstimate.qy", "stateEstimate.qz", "stateEstimate.qw"),
        "angular_velocity": np.radians(gyro_deg),
    }


def assert_raw_equal(raw: dict, expected: dict) -> None:
    for key, want in expected.items():
        np.testing.assert_allclose(raw[key], want, rtol=0, atol=1e-9, err_msg=key)


def windows_min_count(times: list[float], start: float, end: float, width: float = 0.5) -> int:
    """The fewest events in any `width`-long window (sliding by 0.1 s) within [start, end]."""
    t = np.asarray(times)
    starts = np.arange(start, max(start, end - width) + 1e-9, 0.1)
    return int(min(np.count_nonzero((t >= s) & (t < s + width)) for s in starts))


def rate_hz(times: list[float]) -> float:
    return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0


def same_setpoint(sp: Setpoint, roll: float, pitch_wire: float, yawrate: float, thrust: int) -> bool:
    return (sp.roll, sp.pitch, sp.yawrate, sp.thrust) == (F32(roll), F32(pitch_wire), F32(yawrate), thrust)


@pytest.fixture
def endpoint():
    ep = CrtpEndpoint()
    try:
        yield ep
    finally:
        ep.close()
    ep.assert_clean()


def test_link_and_streamer_on_the_wire(endpoint):
    ep = endpoint
    states: list[tuple[float, dict]] = []
    link = CflibLink(ep.uri, lambda raw: states.append((time.monotonic(), raw)), period_ms=10)
    t0 = time.monotonic()
    link.open(timeout_s=20.0)
    connect_s = time.monotonic() - t0
    try:
        # State: ~100 Hz, equal to the endpoint's, and fresh (a change shows up in the next samples).
        assert ep.wait_for(lambda: len(states) >= 5, 10.0), "no state from the log blocks"
        time.sleep(1.0)
        t_window = time.monotonic()
        recent = [t for t, _ in states if t >= t_window - 1.0]
        assert len(recent) >= 50, f"only {len(recent)} states in 1 s (log period 10 ms)"
        assert_raw_equal(states[-1][1], expected_raw(DEFAULT_STATE))
        ep.state["stateEstimate.x"] = -1.5
        assert ep.wait_for(lambda: states[-1][1]["position"][0] == -1.5, 2.0), "state not fresh"

        # Setpoints at 50 Hz for 1 s, then the e-stop.
        streamer = SetpointStreamer(link.cf, command_loss_s=0.3)
        cmds = [(2.0 + 0.05 * i, -3.0 + 0.05 * i, 10.0 - 0.25 * i, 30000.4 + 100 * i) for i in range(50)]
        t_stream = time.monotonic()
        for i, cmd in enumerate(cmds):
            assert streamer.send(cmd)
            time.sleep(max(0.0, t_stream + 0.02 * (i + 1) - time.monotonic()))
        assert ep.wait_for(lambda: len(ep.of(Setpoint)) >= 51, 2.0)
        streamer.emergency_stop()
        assert ep.wait_for(lambda: ep.of(EmergencyStop), 2.0), "no e-stop packet"

        # Command loss: checking at 20 Hz (as the bridge does) hands back with notify-stop, then land.
        t_last_send = streamer.last_send
        while not streamer.check():
            assert time.monotonic() - t_last_send < 3.0, "no hand-back after commands stopped"
            time.sleep(0.05)
        assert ep.wait_for(lambda: ep.of(Land), 2.0), "no land after the hand-back"

        # A new stream unlocks again; release() puts the notify-stop on the wire before the link closes.
        assert streamer.send((1.0, 1.0, 0.0, 20000.0))
        streamer.release()
        t_release = time.monotonic()
    finally:
        link.close()
    t_closed = time.monotonic()
    time.sleep(0.2)  # let the last datagrams land

    ev = ep.events
    kinds = [type(e).__name__ for e in ev]
    # Nothing after the release's stop notification: cflib's close_link would send a zero setpoint,
    # which outranks the high-level commander (a landing drone would drop); CflibLink.close() avoids it.
    want = ["Setpoint"] * 51 + ["EmergencyStop", "NotifyStop", "Land", "Setpoint", "Setpoint", "NotifyStop"]
    assert kinds == want, kinds
    assert same_setpoint(ev[0], 0.0, 0.0, 0.0, 0), f"first setpoint is not the zero-thrust unlock: {ev[0]}"
    for sp, (r, p, y, th) in zip(ev[1:51], cmds, strict=True):
        # cflib's send_setpoint puts -pitch on the wire; thrust goes as a rounded uint16 PWM.
        assert same_setpoint(sp, r, -p, y, int(round(th))), (sp, (r, p, y, th))
    notify_loss, land = ev[52], ev[53]
    assert notify_loss.remain_valid_ms == 0
    assert (land.height, land.duration, land.use_current_yaw) == (0.0, 2.0, True)  # lands at its heading
    assert same_setpoint(ev[54], 0.0, 0.0, 0.0, 0) and same_setpoint(ev[55], 1.0, -1.0, 0.0, 20000)
    notify_release = ev[56]
    assert notify_release.t <= t_closed
    late = [p for p in ep.packets if p.t > notify_release.t and p.port != 15]
    assert not late, f"packets after the link closed: {late}"

    stream_t = [e.t for e in ev[1:51]]
    assert rate_hz(stream_t) >= 10.0
    assert windows_min_count(stream_t, stream_t[0], stream_t[-1]) >= 5, "below 10 Hz in some 0.5 s window"
    loss_s = notify_loss.t - t_last_send
    assert 0.3 <= loss_s <= 1.5, f"hand-back {loss_s:.3f} s after the last command"
    print(
        f"\nconnect {connect_s * 1e3:.0f} ms, state {len(recent)} Hz, setpoints {rate_hz(stream_t):.1f} Hz at the"
        f" endpoint (min {windows_min_count(stream_t, stream_t[0], stream_t[-1])} per 0.5 s),"
        f" e-stop {1e3 * (ev[51].t - stream_t[-1]):.1f} ms after the last setpoint, hand-back {loss_s * 1e3:.0f} ms"
        f" after the last command, land {1e3 * (land.t - notify_loss.t):.2f} ms after notify-stop,"
        f" close {1e3 * (t_closed - t_release):.0f} ms"
    )


def test_emergency_stop_reaches_older_firmware():
    ep = CrtpEndpoint(protocol_version=10)  # no supervisor port: cflib falls back to the localization port
    link = CflibLink(ep.uri, lambda raw: None)
    try:
        link.open(timeout_s=20.0)
        with pytest.warns(UserWarning, match="protocol version 12"):
            SetpointStreamer(link.cf).emergency_stop()
        assert ep.wait_for(lambda: ep.of(EmergencyStop), 2.0)
    finally:
        link.close()
        ep.close()
    assert [e.via for e in ep.of(EmergencyStop)] == ["localization"]
    ep.assert_clean()


def test_endpoint_flags_what_the_firmware_would_reject():
    """The decoder is not vacuous: raw cflib calls that skip our streamer's rules are caught."""
    ep = CrtpEndpoint()
    link = CflibLink(ep.uri, lambda raw: None)
    try:
        link.open(timeout_s=20.0)
        commander = link.cf.commander
        commander.send_setpoint(0.0, 0.0, 0.0, 40000)  # no zero-thrust unlock first
        commander.send_setpoint(0.0, 0.0, 0.0, 0)
        commander.send_setpoint(float("nan"), 0.0, 0.0, 30000)
        commander.send_setpoint(0.0, 0.0, 0.0, 65000)  # a uint16, but above the 60000 ceiling
        commander.send_setpoint(0.0, 120.0, 0.0, 30000)  # not an attitude in degrees
        assert ep.wait_for(lambda: len(ep.of(Setpoint)) >= 5, 2.0)
    finally:
        link.close()
        ep.close()
    reasons = "\n".join(ep.errors)
    for reason in ("before a zero-thrust unlock", "non-finite", "above 60000", "not deg"):
        assert reason in reasons, reasons
    with pytest.raises(AssertionError):
        ep.assert_clean()


class Pilot:
    """The test's ROS side: publishes Twist on cmd_vel_legacy at 20 Hz, records odom, calls `emergency`."""

    def __init__(self, domain_id: int, namespace: str = "cf1"):
        self.ctx = Context()
        rclpy.init(context=self.ctx, domain_id=domain_id)
        self.node = rclpy.create_node("cflib_pilot", namespace=f"/{namespace}", context=self.ctx)
        self.cmd_pub = self.node.create_publisher(Twist, "cmd_vel_legacy", qos.COMMAND)
        self.estop = self.node.create_client(Empty, "emergency")
        self.odom: list[tuple[float, dict]] = []
        self.node.create_subscription(Odometry, "odom", self._on_odom, qos.SENSOR)
        self.twist: Twist | None = None  # published at 20 Hz while set
        self.published: list[float] = []
        self.node.create_timer(0.05, self._tick)
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)
        self._stop = False
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        while not self._stop and self.ctx.ok():
            self.ex.spin_once(timeout_sec=0.01)

    def _tick(self) -> None:
        if self.twist is not None:
            self.cmd_pub.publish(self.twist)
            self.published.append(time.monotonic())

    def _on_odom(self, msg: Odometry) -> None:
        self.odom.append((time.monotonic(), odometry_to_raw(msg)))

    def call_emergency(self, timeout: float) -> bool:
        if not self.estop.wait_for_service(timeout_sec=timeout):
            return False
        future = self.estop.call_async(Empty.Request())
        end = time.monotonic() + timeout
        while not future.done() and time.monotonic() < end:
            time.sleep(0.01)
        return future.done()

    def close(self) -> None:
        self._stop = True
        self.thread.join(2.0)
        self.ex.shutdown()
        self.node.destroy_node()
        self.ctx.try_shutdown()


def test_bridge_node_in_cflib_mode(endpoint, tmp_path):
    ep = endpoint
    domain = 1 + (DOMAIN_ID + 29) % 101  # a domain no other test module uses
    graph = SitlGraph("cf1", domain_id=domain, lockstep=False, log_dir=str(tmp_path))
    pilot = Pilot(domain)
    # Crazyswarm2 legacy units: linear.y roll deg, linear.x = -pitch deg, angular.z yaw rate deg/s, linear.z PWM.
    twist = Twist()
    twist.linear.x, twist.linear.y, twist.angular.z, twist.linear.z = 4.0, -2.5, 15.0, 36000.4
    try:
        graph.start("bridge", "crazyflie_bridge", {"uri": ep.uri, "commander": "cflib_pilot"})
        assert ep.wait_for(lambda: pilot.odom, 60.0), f"no odom from the bridge\n{graph.log('bridge')}"
        assert_raw_equal(pilot.odom[-1][1], expected_raw(DEFAULT_STATE))
        ep.state["stateEstimate.z"] = 0.75
        assert ep.wait_for(lambda: pilot.odom[-1][1]["position"][2] == 0.75, 5.0), "odom not following the robot"

        pilot.twist = twist
        assert ep.wait_for(lambda: len(ep.of(Setpoint)) >= 3, 30.0), f"no setpoints\n{graph.log('bridge')}"
        time.sleep(1.5)
        t_estop = time.monotonic()
        assert pilot.call_emergency(20.0), "the emergency service did not answer"
        assert ep.wait_for(lambda: ep.of(EmergencyStop), 2.0), "no e-stop packet"
        time.sleep(0.3)
        t_sigint = time.monotonic()
        graph.stop("bridge", timeout=30.0)  # SIGINT while commands still flow
        t_exit = time.monotonic()
        assert graph.procs["bridge"].returncode == 0, graph.log("bridge")
    finally:
        pilot.twist = None
        pilot.close()
        graph.close()
    time.sleep(0.2)

    sps = ep.of(Setpoint)
    assert same_setpoint(sps[0], 0.0, 0.0, 0.0, 0), f"first setpoint is not the zero-thrust unlock: {sps[0]}"
    flying = [s for s in sps if s.thrust]
    # Wire pitch: twist_to_rpyt gives pitch = -linear.x, cflib then sends -pitch = linear.x.
    assert all(same_setpoint(s, -2.5, 4.0, 15.0, 36000) for s in flying), flying[:3]
    assert all(same_setpoint(s, 0.0, 0.0, 0.0, 0) for s in sps if not s.thrust)
    stream_t = [s.t for s in flying if s.t <= t_sigint]
    assert rate_hz(stream_t) >= 10.0
    min_per_window = windows_min_count(stream_t, stream_t[0], stream_t[-1])
    assert min_per_window >= 5, "setpoints below 10 Hz in some 0.5 s window"
    (estop,) = ep.of(EmergencyStop)
    assert estop.via == "supervisor" and estop.t >= t_estop
    # Shutdown: the last command is followed by the stop notification before the process exits, and
    # nothing after it (no zero setpoint that would outrank the high-level commander).
    notify = [e for e in ep.of(NotifyStop) if e.t >= flying[-1].t]
    assert notify and notify[0].t <= t_exit, ep.events[-5:]
    assert not ep.of(Setpoint, since=notify[0].t), ep.events[-5:]
    assert not ep.of(Land, since=t_sigint), "release() must not land"
    odom_t = [t for t, _ in pilot.odom if stream_t[0] <= t <= stream_t[-1]]
    assert rate_hz(odom_t) >= 20.0, f"odom at {rate_hz(odom_t):.1f} Hz (log period 10 ms)"
    print(
        f"\nbridge: setpoints {rate_hz(stream_t):.1f} Hz at the endpoint for Twist at"
        f" {rate_hz([t for t in pilot.published if t <= t_sigint]):.1f} Hz (min {min_per_window} per 0.5 s),"
        f" e-stop {1e3 * (estop.t - t_estop):.1f} ms after the service call,"
        f" notify-stop {1e3 * (notify[0].t - t_sigint):.0f} ms after SIGINT, exit {1e3 * (t_exit - t_sigint):.0f} ms"
        f" after SIGINT, odom {rate_hz(odom_t):.1f} Hz"
    )
