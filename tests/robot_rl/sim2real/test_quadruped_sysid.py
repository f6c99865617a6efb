"""The quadruped's loop: a "real" Go1-like robot in lock-step SITL (the quadruped sim bridge hiding its motor
strength, friction and payload) walked by the committed policy through velocity commands over the ROS 2 nodes,
the recorder writing MCAP; the log reads back aligned, `robot-rl sysid` recovers the hidden parameters, and
task.params.sysid= re-centres the quadruped's training randomization on the fit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robot_rl.cli import main

pytestmark = pytest.mark.slow

# the "real" robot: motors 15% weak, a slippery floor, a 1.5 kg payload; encoder-like joint noise
HIDDEN = {"motor_strength": 0.85, "friction": 0.6, "added_mass_kg": 1.5}
SENSING = {"position_noise_rad": 5e-4, "velocity_noise_rads": 5e-3}
RUN_S = 10.0  # five velocity commands of 2 s


@pytest.fixture(scope="module")
def perturbed_walk(trained_quadruped_bundle, tmp_path_factory):
    pytest.importorskip("rclpy")
    pytest.importorskip("mcap_ros2")
    from robot_rl_ros.rosenv import apply_local_dds

    from robot_rl.ros_package import ros_function

    apply_local_dds()
    out = tmp_path_factory.mktemp("sim2real_quadruped") / "walk.mcap"
    walk = ros_function("sitl_walk_recorded")
    summary = walk(str(trained_quadruped_bundle), str(out), seconds=RUN_S, physical_params=json.dumps(HIDDEN),
                   sim=SENSING)  # fmt: skip
    assert summary["finished"] and summary["mode"] == "ACTIVE", summary
    return out


def test_quadruped_log_aligns_joints_trunk_and_commands(perturbed_walk):
    from robot_rl.sim2real.quadruped_log import read_quadruped_log

    log = read_quadruped_log(perturbed_walk)
    assert log.namespace == "go1" and log.report.state_topic == "/go1/joint_states"
    assert abs(log.report.period_s - 0.02) < 1e-6 and not log.report.gaps and log.report.duplicates == 0
    assert log.duration_s >= RUN_S - 0.1 and log.has_trunk.all()
    # the policy node sends the bundle's gains with every target
    assert np.allclose(log.kp[log.commanded], 30.0) and np.allclose(log.kd[log.commanded], 0.75)
    # it walked: the trunk moved forward and turned
    assert log.base_position[-1, 0] - log.base_position[0, 0] > 1.0, log.base_position[[0, -1]]
    assert np.ptp(log.base_angular_velocity[:, 2]) > 0.5


@pytest.fixture(scope="module")
def quadruped_fit(perturbed_walk, tmp_path_factory):
    import contextlib
    import io

    import yaml

    out = tmp_path_factory.mktemp("quadruped_fit")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["sysid", f"log={perturbed_walk}", f"out={out}"]) == 0
    return yaml.safe_load((out / "sysid.yaml").read_text()), printed.getvalue(), out


def test_sysid_recovers_hidden_quadruped_parameters(quadruped_fit):
    doc, printed, out = quadruped_fit
    assert doc["robot"] == "go1_like" and doc["windows"] >= 20, doc["windows"]
    assert doc["cost"]["fitted"] < 0.1 * doc["cost"]["nominal"], doc["cost"]
    for name, truth in HIDDEN.items():
        entry = doc["parameters"][name]
        value, (lo, hi) = entry["value"], entry["interval"]
        assert abs(value - truth) <= 0.10 * truth, (name, value, truth)
        assert hi - lo < 0.3 * truth, (name, lo, hi)
    assert "motor_strength" in (out / "report.html").read_text() and "95% interval" in printed


def test_quadruped_intervals_contain_the_truth(quadruped_fit):
    """Contacts switch inside a small difference step (a motor_strength interval 1e-7 wide, and added_mass_kg 1.44
    [1.415, 1.465] for 1.5, before the secant steps and the profiled initial states of mjspec_fit)."""
    doc, _, _ = quadruped_fit
    print({n: (round(p["value"], 5), [round(x, 5) for x in p["interval"]]) for n, p in doc["parameters"].items()})
    for name, truth in HIDDEN.items():
        lo, hi = doc["parameters"][name]["interval"]
        assert lo <= truth <= hi, (name, lo, truth, hi)


def test_replay_of_the_quadruped_log_under_nominal_and_fit(perturbed_walk, quadruped_fit, tmp_path, capsys):
    """robot-rl replay of the quadruped's log: the open-loop trunk error table, the fit nearer the log than the
    nominal model, and a replay.json the dashboard's sim-vs-real page reads."""
    from sim2real_robot import replay_nominal_and_fit

    _, _, fit_dir = quadruped_fit
    printed, _, nominal, fitted = replay_nominal_and_fit(
        perturbed_walk, fit_dir / "sysid.yaml", tmp_path / "runs", capsys
    )
    assert "open-loop |trunk error|" in printed and "median |joint error| (fitted)" in printed, printed
    assert np.linalg.norm(fitted[1]) < 0.8 * np.linalg.norm(nominal[1]), (nominal, fitted)  # after 0.2 s


def test_quadruped_randomization_recentred_on_the_fit(quadruped_fit):
    from sim.env import BatchedEnv, EnvConfig
    from sim.tasks.quadruped import QuadrupedVelocity
    from sim.tasks.quadruped.physical import FIT_FLOOR

    doc, _, out = quadruped_fit
    env = BatchedEnv(QuadrupedVelocity(terrain="flat", sysid=str(out / "sysid.yaml")), EnvConfig(num_worlds=64))
    task = env.task
    for name, draws in (("motor_strength", task.strength[:, 0]), ("friction", task.friction_world),
                        ("added_mass_kg", task.added_mass)):  # fmt: skip
        value, (lo, hi) = doc["parameters"][name]["value"], doc["parameters"][name]["interval"]
        floor = FIT_FLOOR[name]
        lo, hi = min(lo, value - floor), max(hi, value + floor)
        assert lo - 1e-9 <= float(draws.min()) and float(draws.max()) <= hi + 1e-9, (name, draws.min(), draws.max())
    env.close()
    env = BatchedEnv(QuadrupedVelocity(terrain="flat", sysid=str(out / "sysid.yaml")),
                     EnvConfig(num_worlds=2, randomization="none"))  # fmt: skip
    assert env.task.strength.flatten().tolist() == pytest.approx([doc["parameters"]["motor_strength"]["value"]] * 24)
    env.close()
