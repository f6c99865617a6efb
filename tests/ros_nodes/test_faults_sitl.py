"""Fault injection with measured bounds.

- e-stop: 20 trials against the safety node alone over DDS (topic and service alternating), in a
  process of its own as on a robot; the robot's state and the policy's action are played by a
  harness, re-arming is a fresh safety node in the same DDS participant. Bound: zero thrust within
  2 control periods, stamp to stamp (system time just before the e-stop is sent -> DDS reception
  stamp of the first zero-thrust command at the watcher), and latched. Bound: median within one
  period, 19 of 20 trials within two, all within five. Why one trial may miss two periods: on this
  2-vCPU machine Fast DDS's publish() sometimes blocks inside the middleware (faulthandler showed
  the node's publish of a command waiting 50-340 ms with ~5 ms of CPU, cf. ros2/rmw_fastrtps#754);
  that is the DDS writer, not the node's e-stop path, and about one run in four had one such trial
  at 20-35 ms against a ~2 ms median.
- geofence breach in lock-step SITL (sim bridge, policy and safety processes, trained hover
  policy): LAND with the geofence reason, then down and motors off.
An independent subscriber (watch.LimitWatcher) checks every command of these tests against the limits.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy")
# reaction times bounded in milliseconds: make test runs these after the others, with no test beside them
pytestmark = pytest.mark.timing

from conftest import DOMAIN_ID, HOVER_PWM  # noqa: E402
from harness import Harness  # noqa: E402
from robot_rl_ros.limits import DroneLimits  # noqa: E402
from watch import LimitWatcher  # noqa: E402

TRIALS = 20


def thrusting(cmd: np.ndarray) -> bool:
    return cmd[3] > 1000.0


def zero_thrust(cmd: np.ndarray) -> bool:
    return cmd[3] == 0.0


RATE_HZ = 100.0  # the PD bundle's control rate


class SafetyHost:
    """The safety node in a process of its own (safety_host.py), one fresh node per trial."""

    def __init__(self, domain_id: int, bundle: str):
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("safety_host.py")), str(domain_id), bundle],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def _say(self, word: str) -> str:
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        assert answer, f"safety host exited (rc {self.proc.poll()}) after {word!r}"
        return answer

    def start(self) -> None:
        assert self._say("start") == "started"

    def stop(self) -> str:
        """Stop the trial's node; returns the mode it was in."""
        return self._say("stop").removeprefix("stopped ")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            try:
                self.proc.wait(10.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def test_estop_zero_thrust_within_two_periods_over_20_trials(pd_bundle, limit_ledger):
    from std_msgs.msg import Bool
    from std_srvs.srv import Trigger

    domain = 1 + (DOMAIN_ID + 53) % 101
    h = Harness(domain)
    watch = LimitWatcher(domain, limit_ledger, label="estop trials")
    safety = SafetyHost(domain, str(pd_bundle))
    h.action = np.array([0.0, 0.0, 0.0, HOVER_PWM])
    h.estop_pub.publish(Bool(data=False))
    latencies, gaps = [], []
    try:
        for trial in range(TRIALS):
            safety.start()
            assert h.estop_client.wait_for_service(timeout_sec=30.0), f"trial {trial}: no e-stop service"
            t_start = watch.now()
            armed = watch.wait_for(lambda t=t_start: watch.first_after(t, thrusting) is not None, 20.0)
            assert armed, f"trial {trial}: safety node never armed: {h.mode()}"
            time.sleep(0.1)  # a stretch of ACTIVE commands before the stop
            t_e = watch.now()
            if trial % 2 == 0:
                h.estop_pub.publish(Bool(data=True))
            else:
                h.estop_client.call_async(Trigger.Request())
            assert watch.wait_for(lambda t=t_e: watch.first_after(t, zero_thrust) is not None, 2.0), (
                f"trial {trial}: no zero thrust after the e-stop"
            )
            t_z = watch.first_after(t_e, zero_thrust)
            latencies.append(t_z - t_e)
            h.estop_pub.publish(Bool(data=False))  # releasing the topic must not release the latch
            time.sleep(0.15)
            after = [c for tc, c in list(watch.commands) if tc >= t_z]
            assert len(after) >= 5 and all(c[3] == 0.0 for c in after), f"trial {trial}: e-stop not latched"
            gaps.append(watch.max_gap(t_start + 0.05, watch.now()))
            assert safety.stop() == "ESTOP"
    finally:
        safety.close()
        h.close()
        watch.close()
    lat = np.array(latencies) * 1e3
    print(
        f"\ne-stop -> zero thrust over {len(lat)} trials: p50 {np.median(lat):.2f} ms, "
        f"max {lat.max():.2f} ms (period {1e3 / RATE_HZ:.0f} ms); max command gap {max(gaps) * 1e3:.1f} ms"
    )
    period_ms = 1e3 / RATE_HZ
    assert len(lat) == TRIALS
    detail = f"e-stop latencies ms: {np.round(lat, 2).tolist()}"
    assert np.median(lat) <= period_ms, detail
    assert np.sum(lat > 2 * period_ms) <= 1, detail  # the middleware's tail, see the module docstring
    assert lat.max() <= 5 * period_ms, detail
    assert max(gaps) < 0.1, "command stream dropped below 10 Hz"
    assert not limit_ledger.violations


def test_diagnostics_report_mode_changes_after_many_interventions(pd_bundle):
    """The event log keeps the latest 1,000; reporting must not stop once it is full, nor drop a mode
    change among a burst of repeated interventions (a geofence LAND went unreported in CI)."""
    import rclpy
    from rclpy.context import Context
    from rclpy.parameter import Parameter
    from robot_rl_ros.safety_node import SafetyNode

    domain = 1 + (DOMAIN_ID + 67) % 101
    h = Harness(domain)
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain)
    node = SafetyNode(context=ctx, namespace="/cf1", parameter_overrides=[Parameter("bundle", value=str(pd_bundle))])
    try:
        # Discovery both ways before the first message: the harness sees the publisher, and the publisher
        # has matched the harness's subscription (a loaded machine can take seconds).
        assert h.wait_for(lambda: h.node.count_publishers("/diagnostics") > 0, 30.0)
        assert h.wait_for(lambda: node.diag_pub.get_subscription_count() > 0, 30.0)
        sup = node.sup
        for i in range(1500):
            sup._note(float(i), "intervention", "repeated")
        node._publish_diagnostics()
        sup._set(1500.0, type(sup.mode)["LAND"], "geofence: test")
        for i in range(50):
            sup._note(1500.0 + i, "intervention", "repeated after the mode change")
        node._publish_diagnostics()
        assert h.wait_for(lambda: any(e.startswith("event.LAND") for e in h.safety_events), 5.0), h.safety_events[-5:]
        land = [e for e in h.safety_events if e.startswith("event.LAND")]
        assert land == ["event.LAND 1500.000 geofence: test"]
        assert sum("after the mode change" in e for e in h.safety_events) == 20  # the latest 20 of the burst
    finally:
        node.destroy_node()
        ctx.try_shutdown()
        h.close()


@pytest.mark.slow
def test_geofence_breach_lands_in_sitl(trained_bundle, limit_ledger, tmp_path):
    from robot_rl_ros.sitl import Observer, SitlGraph

    fence_z = 0.6  # below the 1 m goal: the climb itself breaches it
    lim = DroneLimits()
    fence_high = [float(lim.fence_high[0]), float(lim.fence_high[1]), fence_z]
    domain = 1 + (DOMAIN_ID + 71) % 101
    with SitlGraph("cf1", domain_id=domain, lockstep=True, log_dir=str(tmp_path)) as graph:
        obs = Observer("cf1", domain, use_sim_time=True)
        watch = LimitWatcher(domain, limit_ledger, label="geofence sitl")
        try:
            graph.start_flight(str(trained_bundle), (0.0, 0.0, 1.0), safety={"fence_high": fence_high})

            def motors_off() -> bool:
                return any(m.startswith("MOTORS_OFF") for _, m in obs.modes)

            done = obs.spin_until(motors_off, 150.0)
            # the LAND event comes with the next diagnostics message, which may trail the mode topic
            obs.spin_until(lambda: any(e.startswith("event.LAND") for e in obs.safety_events), 5.0)
        finally:
            watch.close()
            obs.close()
        assert done, f"never reached MOTORS_OFF; modes {obs.modes}\n{graph.log('safety')[-2000:]}"
    modes = [m for _, m in obs.modes]
    land = next((m for m in modes if m.startswith("LAND")), None)
    assert land is not None and "geofence: z" in land, modes
    assert modes.index(land) < next(i for i, m in enumerate(modes) if m.startswith("MOTORS_OFF")), modes
    # The fence counts braking: LAND comes no later than the first state beyond it (usually before,
    # when the climb's stopping point crossed it), and the peak stays near the fence.
    ev = next((e for e in obs.safety_events if e.startswith("event.LAND")), None)
    assert ev is not None, f"no LAND event in the diagnostics: {obs.safety_events[-8:]}"
    t_land = float(ev.split()[1])
    t_breach = next((t for t, p in obs.states if p[2] > fence_z), None)
    assert t_breach is None or t_land <= t_breach + 2.0 / RATE_HZ + 1e-3, (t_breach, t_land)  # events carry ms
    # It came down: the last states are on the ground, and commands flowed at >= 10 Hz (sim time).
    z_end = obs.states[-1][1][2]
    assert z_end < 0.1, f"still at z={z_end:.2f} m"
    t_cmd = np.array([c[0] for c in obs.commands if c[0] >= t_land])
    assert np.max(np.diff(t_cmd)) < 0.1
    peak = max(p[2] for _, p in obs.states)
    print(
        f"\ngeofence z>{fence_z} m: LAND at {t_land:.3f} s, first state beyond the fence "
        f"{'none' if t_breach is None else f'{t_breach:.3f} s'}, peak z {peak:.2f} m, final z {z_end:.3f} m, {land}"
    )
    assert not limit_ledger.violations
    assert peak < fence_z + 0.1, f"the climb overshot the fence to {peak:.2f} m"
