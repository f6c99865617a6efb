"""robot_conventions.units: sim and the deploy runtime use its constants (the same objects), and the package
imports neither torch nor mujoco nor any package of ours."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from robot_conventions import units

NAMES = ("PWM_MAX", "PWM_TO_RPM_A", "PWM_TO_RPM_B", "KF_N_PER_RPM2")


@pytest.mark.parametrize("name", NAMES)
def test_sim_firmware_and_deploy_share_the_identification(name):
    from robot_rl.deploy import units as deploy_units
    from sim.robots import crazyflie_firmware

    assert getattr(crazyflie_firmware, name) is getattr(units, name)
    assert getattr(deploy_units, name) is getattr(units, name)


def test_the_values_are_the_identified_ones():
    """Bit for bit the literals sim and deploy kept before they moved here."""
    assert (units.PWM_MAX, units.SETPOINT_THRUST_MAX) == (65535.0, 60000.0)
    assert (units.PWM_TO_RPM_A, units.PWM_TO_RPM_B, units.KF_N_PER_RPM2) == (0.2685, 4070.3, 3.16e-10)
    assert units.GRAVITY == 9.81
    x = torch.linspace(-10.0, 10.0, 1001, dtype=torch.float64)
    assert torch.equal(x * units.RAD2DEG, torch.rad2deg(x))


def test_gravity_is_shared():
    from robot_rl.deploy import units as deploy_units
    from sim.robots import goto_planner

    assert goto_planner.GRAVITY is units.GRAVITY
    assert deploy_units.GRAVITY is units.GRAVITY


def test_far_neighbour_padding_is_shared():
    from robot_conventions.observation_ops import FAR_NEIGHBOUR_M
    from robot_rl.deploy import observation
    from sim.tasks.crazyflie import swarm_config

    assert swarm_config.FAR is FAR_NEIGHBOUR_M
    assert observation.FAR_NEIGHBOUR_M is FAR_NEIGHBOUR_M


def test_sim_and_deploy_thrust_curves_agree():
    from sim.robots.crazyflie_firmware import pwm_to_thrust

    pwm = np.linspace(1.0, 70000.0, 500)
    got = pwm_to_thrust(torch.from_numpy(pwm)).numpy()
    np.testing.assert_array_equal(got, units.pwm_to_thrust_n(pwm))
    np.testing.assert_allclose(units.thrust_n_to_pwm(units.pwm_to_thrust_n(pwm[pwm < 65535])), pwm[pwm < 65535])


def test_degrees_radians_round_trip():
    x = np.linspace(-720, 720, 50)
    np.testing.assert_allclose(units.rad2deg(units.deg2rad(x)), x)


def test_cmd_vel_legacy_round_trip():
    rpyt = (3.0, -4.0, 20.0, 41000.0)
    assert units.cmd_vel_legacy_to_rpyt(*units.rpyt_to_cmd_vel_legacy(*rpyt)) == rpyt
    assert units.rpyt_to_cmd_vel_legacy(*rpyt)[0] == 4.0  # pitch negated on the wire


def test_the_package_imports_only_numpy_and_the_standard_library():
    code = (
        "import sys, robot_conventions, robot_conventions.frames, robot_conventions.units,"
        " robot_conventions.observation_ops\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'mujoco', 'sim', 'robot_rl',"
        " 'robot_rl_ros', 'onnxruntime', 'yaml'})\n"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
