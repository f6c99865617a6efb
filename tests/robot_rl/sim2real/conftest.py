"""A "real" Crazyflie for the sim-to-real tests: the sim bridge with hidden physical parameters, flown through the
ROS 2 nodes (policy, safety) by the committed hover policy through goal steps, recorded to MCAP by the recorder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # --import-mode=importlib: the tests import it by name

from sim2real_robot import FLIGHT_S, HIDDEN, SENSING  # noqa: E402


@pytest.fixture(scope="session")
def perturbed_flight(trained_bundle, tmp_path_factory) -> Path:
    pytest.importorskip("rclpy")
    pytest.importorskip("mcap_ros2")
    from robot_rl_ros.rosenv import apply_local_dds

    from robot_rl.ros_package import ros_function

    apply_local_dds()
    out = tmp_path_factory.mktemp("sim2real") / "flight.mcap"
    fly = ros_function("sitl_fly_recorded")
    summary = fly(str(trained_bundle), str(out), seconds=FLIGHT_S, physical_params=json.dumps(HIDDEN), sim=SENSING)
    assert summary["finished"] and summary["mode"] == "ACTIVE", summary
    return out
