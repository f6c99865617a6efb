"""SITL flights: sim bridge, policy and safety nodes as separate processes over DDS.

The bundle is ROBOT_RL_HOVER_BUNDLE when set, else the committed trained hover policy
(tests/data/crazyflie_hover_ppo) exported by the training pipeline's export code.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from sitl_report import sitl_report

pytestmark = pytest.mark.slow


@pytest.fixture
def bundle(trained_bundle):
    return os.environ.get("ROBOT_RL_HOVER_BUNDLE") or str(trained_bundle)


# Lock-step: held within 10 cm throughout. Wall clock: a process stalled on a loaded machine misses its control
# periods and the drone drifts until it is back (a clean-clone run of the test command with training alongside
# measured 18 cm at worst), so the wall-clock hold is judged by its median (10 cm) with a 30 cm bound on
# excursions, as the arm's is.
@pytest.mark.parametrize("lockstep,tol", [(True, 0.1), (False, 0.3)])
def test_takeoff_reach_and_hold(bundle, lockstep, tol):
    from robot_rl_ros.sitl import fly

    # On the wall clock a loaded 2-core CI machine can stall a process for 100-400 ms; the watchdog
    # bounds are widened there so the flight measures tracking (the fault tests measure the watchdogs).
    safety = None if lockstep else {"command_timeout_s": 0.5, "state_max_age_s": 0.5}
    r = fly(bundle, seconds=16.0, goal=(0.0, 0.0, 1.0), lockstep=lockstep, hold_s=10.0, safety=safety)
    assert r["finished"], sitl_report(r)
    assert r["mode"] == "ACTIVE", sitl_report(r)
    assert r["hold_max_error_m"] <= tol and r["hold_median_error_m"] <= 0.1, sitl_report(r)
    print(f"\nflight SITL (lockstep={lockstep}): hold error max {r['hold_max_error_m'] * 100:.1f} cm, "
          f"median {r['hold_median_error_m'] * 100:.1f} cm")  # fmt: skip
    # Lock-step measures the stream on simulated time: >= 10 Hz. On the wall clock a loaded CI machine
    # can stall a process for a few hundred ms (the watchdogs above are widened to 0.5 s to match).
    max_gap = 0.1 if lockstep else 0.5
    assert r["commands_nonfinite"] == 0 and r["max_command_gap_s"] < max_gap, sitl_report(r)
    assert np.isfinite(r["final_error_m"])


def test_a_stalled_observer_still_sees_every_command_at_its_simulated_time(bundle):
    """The observer's Python thread stops for 1.5 s of wall time while lock-step flight goes on: its
    command record loses nothing and dates each command by its DDS arrival, so the stall is not
    reported as a gap in the robot's command stream (CI once failed on exactly that)."""
    import time

    from robot_rl_ros.sitl import Observer, SitlGraph
    from robot_rl_ros.sitl_scenarios import _max_gap

    with SitlGraph("cf1", lockstep=True) as graph:
        obs = Observer("cf1", graph.domain_id, use_sim_time=True)
        try:
            graph.start_flight(bundle, (0.0, 0.0, 1.0))
            assert obs.spin_until(lambda: len(obs.commands) > 20, 60.0), "no commands"
            n_before = len(obs.commands)
            time.sleep(1.5)
            obs.spin_until(lambda: False, 1.0)
        finally:
            obs.close()
    callback_t = np.array([c[0] for c in obs.commands])
    arrival_t = obs.arrival_times(obs.command_received_ns)
    # the stall is visible in when the callbacks ran, so the check below is not vacuous
    assert len(obs.commands) > n_before + 50 and _max_gap(callback_t[n_before - 1 :]) > 0.3, callback_t
    assert _max_gap(arrival_t[arrival_t > 0]) <= 0.05, np.diff(arrival_t).max()
    assert np.all(np.diff(arrival_t) >= 0)
