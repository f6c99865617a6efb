"""Firmware commander emulation, and the cflib setpoint streamer against a fake at the cflib boundary."""

from __future__ import annotations

import numpy as np
from robot_rl_ros.cflib_link import SetpointStreamer
from robot_rl_ros.crazyflie_commander import CommanderEmulator
from robot_rl_ros.latency import LatencyStats


def test_thrust_lock_watchdog_and_emergency():
    fw = CommanderEmulator()
    fw.on_setpoint([5, 5, 0, 40000], 0.0)
    assert fw.output(0.0)[3] == 0.0  # locked until a zero-thrust setpoint
    fw.on_setpoint([0, 0, 0, 0], 0.0)
    fw.on_setpoint([5, 5, 0, 40000], 0.01)
    assert np.allclose(fw.output(0.02), [5, 5, 0, 40000])
    assert np.allclose(fw.output(0.6), [0, 0, 0, 40000])  # levelled after 0.5 s
    assert np.allclose(fw.output(2.1), 0.0)  # motors off after 2 s
    fw.on_setpoint([0, 0, 0, 30000], 3.0)
    fw.emergency_stop()
    assert np.allclose(fw.output(3.0), 0.0)


class FakeCommander:
    def __init__(self, log):
        self.log = log

    def send_setpoint(self, roll, pitch, yawrate, thrust):
        assert isinstance(thrust, int) and 0 <= thrust <= 60000
        self.log.append(("setpoint", roll, pitch, yawrate, thrust))

    def send_notify_setpoint_stop(self, remain_valid_milliseconds=0):
        self.log.append(("notify_stop",))


class FakeCf:
    """Stands in for cflib's Crazyflie object: records what our code asks cflib to send."""

    def __init__(self):
        self.log = []
        self.commander = FakeCommander(self.log)
        outer = self

        class HL:
            def land(self, height, duration, yaw=0.0):
                outer.log.append(("land", height, duration, yaw))

        class Sup:
            def send_emergency_stop(self):
                outer.log.append(("emergency",))

        self.high_level_commander, self.supervisor = HL(), Sup()


def test_streamer_unlocks_first_clamps_and_hands_back():
    now = [0.0]
    cf = FakeCf()
    s = SetpointStreamer(cf, command_loss_s=0.3, clock=lambda: now[0])
    assert s.send([2.0, -3.0, 10.0, 70000.0])
    assert cf.log[0] == ("setpoint", 0.0, 0.0, 0.0, 0)  # zero-thrust unlock first
    assert cf.log[1] == ("setpoint", 2.0, -3.0, 10.0, 60000)
    assert not s.send([np.nan, 0, 0, 1000])
    now[0] = 0.2
    assert not s.check()
    now[0] = 0.5
    assert s.check() and cf.log[-2:] == [("notify_stop",), ("land", 0.0, 2.0, None)]
    s.send([0, 0, 0, 1000])
    assert cf.log[-2] == ("setpoint", 0.0, 0.0, 0.0, 0)  # unlock again after a hand-back
    s.emergency_stop()
    assert cf.log[-1] == ("emergency",)
    s.release()
    assert cf.log[-1] == ("notify_stop",)


def test_latency_stats_counts_missed_deadlines():
    st = LatencyStats(0.01)
    st._last_entry = 0.0
    st._per[:3] = [0.01, 0.02, 0.01]
    st._n_per = 3
    st.missed = 1
    t = st.enter()
    st.exit(t)
    s = st.summary()
    assert s["missed_deadlines"] >= 1 and "latency_p99_ms" in s and "jitter_p99_ms" in s
