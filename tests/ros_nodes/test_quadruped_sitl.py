"""Quadruped software in the loop: quadruped sim bridge (Go1 driver topics), policy node and leg safety
node as separate processes over DDS, with the committed flat-ground velocity policy
(tests/data/quadruped_velocity_ppo) exported by today's export code.
"""

from __future__ import annotations

import numpy as np
import pytest
from leg_sitl import LegInputs, check_leg_commands, kill_policy_until_damp, safety_parameters
from sitl_report import sitl_report

pytestmark = pytest.mark.slow

COMMAND = (0.5, 0.0, 0.3)  # m/s forward, m/s left, rad/s yaw


def test_quadruped_tracks_a_velocity_command_in_lockstep_sitl(trained_quadruped_bundle):
    from robot_rl_ros.sitl import walk

    r = walk(str(trained_quadruped_bundle), command=COMMAND, seconds=8.0, lockstep=True, settle_s=2.0)
    print(f"\nquadruped SITL: {r}")
    assert r["finished"], sitl_report(r)
    assert r["mode"] == "ACTIVE", sitl_report(r)
    # the goals for the trained policy in simulation, now through DDS and the safety node
    assert r["lin_vel_error"] <= 0.15 and r["yaw_rate_error"] <= 0.2, sitl_report(r)
    assert r["min_trunk_height_m"] > 0.2 and r["distance_m"] > 2.0, sitl_report(r)
    # the stream once walking (start-up includes DDS discovery of the observer itself)
    assert r["commands_nonfinite"] == 0 and r["settled_max_command_gap_s"] <= 0.1, sitl_report(r)


def test_quadruped_policy_killed_damps_then_estop_latches(trained_quadruped_bundle):
    from rclpy.task import Future
    from robot_rl_ros.sitl import Observer, SitlGraph
    from std_srvs.srv import Trigger

    with SitlGraph("go1", lockstep=True) as graph:
        obs = Observer("go1", graph.domain_id, use_sim_time=True, robot="quadruped")
        inputs = LegInputs(obs)
        try:
            graph.start_walk(str(trained_quadruped_bundle), COMMAND)
            p = safety_parameters(obs)
            walking = lambda: obs.states and obs.states[-1][0] - obs.states[0][0] > 2.0  # noqa: E731
            assert obs.spin_until(walking, 60.0), "no walking"
            t_kill, t_damp, _ = kill_policy_until_damp(graph, obs, 20.0)
            obs.spin_until(lambda: obs.states[-1][0] - t_damp > 2.0, 30.0)
            heights = [x[2] for t, x in obs.states if t > t_damp + 1.5]
            damp_cmds = [c for t, _, c in obs.commands if t > t_damp]
            cmd_t = np.array([t for t, _, _ in obs.commands if t >= t_kill])

            def call(name: str) -> Trigger.Response:
                c = obs.node.create_client(Trigger, name)
                assert c.wait_for_service(10.0)
                fut: Future = c.call_async(Trigger.Request())
                assert obs.spin_until(fut.done, 10.0)
                return fut.result()

            assert call("safety/estop").success
            assert obs.spin_until(lambda: any(m.startswith("ESTOP") for _, m in obs.modes), 10.0), obs.modes
            refused = call("safety/arm")
            obs.spin_until(lambda: False, 0.5)
            last = obs.commands[-1][2]
        finally:
            obs.close()
            graph.close()
    print(f"\nDAMP {1e3 * (t_damp - t_kill):.0f} ms (sim) after the policy was killed; trunk at {min(heights):.3f} m")
    # DAMP within 0.15 s of simulated time (command timeout 0.1 s + one 20 ms watchdog period + margin)
    assert t_damp - t_kill <= 0.15, (t_damp - t_kill, obs.modes)
    assert "policy command stale" in next(m for _, m in obs.modes if m.startswith("DAMP"))
    assert damp_cmds and all(np.all(c[12:24] == 0.0) and np.all(c[24:] == 2.0) for c in damp_cmds)  # no stiffness
    assert max(heights) < 0.15  # damping lowered the trunk from ~0.3 m towards the ground
    assert cmd_t.size > 20 and np.diff(cmd_t).max() <= 0.1  # the stream stays >= 10 Hz throughout
    assert not refused.success and "latched" in refused.message
    assert np.all(last[12:24] == 0.0) and np.all(np.isfinite(last))
    assert all(np.all(np.isfinite(c)) for _, _, c in obs.commands)
    # walking, DAMP and the latched e-stop: every command inside what the safety node enforces
    checked = check_leg_commands(obs, inputs, p, trained_quadruped_bundle)
    print(f"commands vs the safety node's limits: {checked}")
    assert checked["n_violations"] == 0 and checked["lead_checked"] > 80, checked
