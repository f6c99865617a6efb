"""Arm software in the loop: arm sim bridge (ros2_control topics), policy node (bundle IK) and arm
safety node as separate processes over DDS, with the committed arm reach policy
(tests/data/arm_reach_ppo) exported by today's export code.
"""

from __future__ import annotations

import signal

import numpy as np
import pytest
from sitl_report import sitl_report

pytestmark = pytest.mark.slow

TARGET = (0.55, 0.15, 0.25)


# Lock-step: the task's 2 cm success radius, held. Wall clock: the bridge steps on its own timer and the
# policy acts on each state it publishes, but a loaded 2-core machine stalls processes for 0.1-0.4 s; a
# command that misses its step leaves the previous target for one more period, an excursion it corrects.
# So the wall-clock run is judged by its median error (2 cm) with a 10 cm bound on excursions.
@pytest.mark.parametrize("lockstep", [True, False])
def test_arm_reaches_and_holds(trained_arm_bundle, lockstep):
    from robot_rl_ros.sitl import reach

    safety = None if lockstep else {"command_timeout_s": 0.5, "state_max_age_s": 0.5}  # loaded CI stalls
    r = reach(str(trained_arm_bundle), target=TARGET, seconds=6.0, lockstep=lockstep, hold_s=3.0, safety=safety)
    assert r["finished"], sitl_report(r)
    assert r["mode"] == "ACTIVE", sitl_report(r)
    err_mm, med_mm, gap = 1e3 * r["hold_max_error_m"], 1e3 * r["hold_median_error_m"], r["max_command_gap_s"]
    print(f"\narm SITL (lockstep={lockstep}): hold error max {err_mm:.2f} mm, median {med_mm:.2f} mm, gap {gap:.3f} s")
    if lockstep:
        assert r["hold_max_error_m"] <= 0.02, sitl_report(r)  # held for the last 3 s
    else:
        assert r["hold_median_error_m"] <= 0.02 and r["hold_max_error_m"] <= 0.10, sitl_report(r)
    # the command stream while holding (start-up includes DDS discovery of the observer itself)
    assert r["commands_nonfinite"] == 0 and r["hold_max_command_gap_s"] < (0.1 if lockstep else 0.5), sitl_report(r)


def test_arm_policy_killed_holds_then_estop_latches(trained_arm_bundle):
    from rclpy.task import Future
    from robot_rl_ros.joint_supervisor import arm_limits
    from robot_rl_ros.sitl import Observer, SitlGraph
    from std_srvs.srv import Trigger

    from robot_rl.deploy import load_bundle
    from robot_rl.deploy.arm_ik import IKSpec, forward_kinematics

    spec = IKSpec.from_dict(load_bundle(str(trained_arm_bundle)).extra["ik"])
    tcp = lambda q: forward_kinematics(spec, np.asarray(q)[None, :7]).tcp[0, :3, 3]  # noqa: E731
    with SitlGraph("arm", lockstep=True) as graph:
        obs = Observer("arm", graph.domain_id, use_sim_time=True, robot="arm")
        try:
            graph.start_reach(str(trained_arm_bundle), TARGET)
            near = lambda: obs.states and np.linalg.norm(tcp(obs.states[-1][1]) - TARGET) < 0.02  # noqa: E731
            assert obs.spin_until(near, 60.0), (
                f"the arm never reached the target: {len(obs.states)} states, modes {obs.modes}, {obs.safety}\n"
                f"{graph.log('policy')[-1500:]}\n{graph.log('safety')[-1500:]}\n{graph.log('sim_bridge')[-1500:]}"
            )
            obs.spin_until(lambda: False, 0.5)
            graph.stop("policy", sig=signal.SIGKILL)
            t_kill = obs.now()
            hold = lambda: any(m.startswith("HOLD") for _, m in obs.modes)  # noqa: E731
            assert obs.spin_until(hold, 20.0), obs.modes
            t_hold = next(t for t, m in obs.modes if m.startswith("HOLD"))
            n_before = len(obs.states)
            obs.spin_until(lambda: obs.states[-1][0] - t_hold > 1.0, 30.0)
            after = [q for t, q in obs.states[n_before:]]
            drift = max(np.linalg.norm(tcp(q) - tcp(after[0])) for q in after)
            cmd_t = np.array([t for t, _, _ in obs.commands if t >= t_kill])

            client = obs.node.create_client(Trigger, "safety/estop")
            arm_client = obs.node.create_client(Trigger, "safety/arm")

            def call(c) -> Trigger.Response:
                assert c.wait_for_service(10.0)
                fut: Future = c.call_async(Trigger.Request())
                assert obs.spin_until(fut.done, 10.0)
                return fut.result()

            assert call(client).success
            assert obs.spin_until(lambda: any(m.startswith("ESTOP") for _, m in obs.modes), 10.0), obs.modes
            refused = call(arm_client)
            n_estop = len(obs.states)
            obs.spin_until(lambda: False, 1.0)
            estop_drift = max(np.linalg.norm(tcp(q) - tcp(obs.states[n_estop][1])) for _, q in obs.states[n_estop:])
        finally:
            obs.close()
            graph.close()
    print(f"\nHOLD {1e3 * (t_hold - t_kill):.0f} ms (sim) after the policy was killed; drift {1e3 * drift:.2f} mm")
    # HOLD within 0.3 s of simulated time (command timeout 0.2 s + one 40 ms watchdog period + margin)
    assert t_hold - t_kill <= 0.3, (t_hold - t_kill, obs.modes)
    assert "policy command stale" in next(m for _, m in obs.modes if m.startswith("HOLD")), obs.modes
    assert drift < 0.005, drift  # the hold pose holds
    # >= 10 Hz throughout; commands are timed by the observer's receipt on its own /clock, which can run
    # one 40 ms control period ahead of the sender's
    assert cmd_t.size > 10 and np.diff(cmd_t).max() <= 0.1 + 0.04 + 1e-9, np.diff(cmd_t).max()
    assert not refused.success and "latched" in refused.message
    assert estop_drift < 0.005, estop_drift
    lim = arm_limits()
    cmds = np.array([c for _, _, c in obs.commands])
    assert np.all(np.isfinite(cmds))
    assert np.all(cmds >= lim.q_low - 1e-9) and np.all(cmds <= lim.q_high + 1e-9)  # nothing outside the limits


def test_plan_guided_pick_place_in_sitl(trained_pick_place_bundle, tmp_path):
    """The plan-guided pick-and-place bundle through the nodes (`robot-rl sitl`, which sends an arm bundle with a
    plan there): the bridge reports the object's pose and the goal as perception would, the policy node's runtime
    follows the bundle's plan for the layout on the table."""
    from robot_rl.commands import cmd_sitl

    r = cmd_sitl([f"bundle={trained_pick_place_bundle}", "seconds=8", "layout=0", f"out={tmp_path / 'r.json'}"])
    assert r["finished"] and r["mode"] == "ACTIVE", sitl_report(r)
    moved = np.linalg.norm(np.subtract(r["object_final"], r["object_start"]))
    limits = {k: v for k, v in r["counters"].items() if k.startswith("limit.")}
    print(f"\npick-and-place SITL: object moved {moved:.3f} m, in the bowl from {r['first_in_goal_s']} s; {limits}")
    assert r["in_goal"] and moved > 0.1, sitl_report(r)
    fallbacks = [e for e in r["interventions"] if not e.startswith("event.ACTIVE")]  # armed once, then no fallback
    assert r["commands_nonfinite"] == 0 and not fallbacks, sitl_report(r)


def test_sitl_command_sends_an_arm_bundle_to_the_arm_nodes(trained_arm_bundle, capsys):
    from robot_rl.commands import cmd_sitl
    from robot_rl.config import ConfigError

    r = cmd_sitl([f"bundle={trained_arm_bundle}", "seconds=3"])
    assert r["finished"] and r["mode"] == "ACTIVE", sitl_report(r)
    assert "reach: final TCP" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="not with ros=false"):
        cmd_sitl([f"bundle={trained_arm_bundle}", "ros=false"])
