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


@pytest.mark.xfail(
    strict=False,
    reason="measured over 10 SITL runs since the secant fit: all three intervals held the truth in 7; the misses were "
    "added_mass_kg 1.477 [..., 1.4986], 1.508 [1.5076, ...] and 1.471 [..., 1.4954] for 1.5 (the payload 1.5-2% off "
    "with half widths of 0.7-1%). Three calibrated 95% intervals all hold the truth in only 86% of runs, but these "
    "misses are beyond that: the intervals are still too narrow",
)
def test_quadruped_intervals_contain_the_truth(quadruped_fit):
    """Contacts switch inside a small difference step (a motor_strength interval 1e-7 wide, and added_mass_kg 1.44
    [1.415, 1.465] for 1.5, before the secant steps and the profiled initial states of mjspec_fit)."""
    doc, _, _ = quadruped_fit
    print({n: (round(p["value"], 5), [round(x, 5) for x in p["interval"]]) for n, p in doc["parameters"].items()})
    for name, truth in HIDDEN.items():
        lo, hi = doc["parameters"][name]["interval"]
        assert lo <= truth <= hi, (name, lo, truth, hi)


def test_replay_of_the_quadruped_log_under_nominal_and_fit(
    perturbed_walk, quadruped_fit, trained_quadruped_bundle, tmp_path, capsys
):
    """robot-rl replay of the quadruped's log: the open-loop trunk error table, the fit nearer the log than the
    nominal model, and a replay.json the dashboard's sim-vs-real page reads. Closed loop, the walking policy under
    the logged commands (through the leg safety node's filter) follows the log's trunk closer on the fit, and its
    mean body velocity per command is nearer the robot's."""
    import json

    from sim2real_robot import replay_nominal_and_fit

    _, _, fit_dir = quadruped_fit
    printed, folder, nominal, fitted = replay_nominal_and_fit(
        perturbed_walk, fit_dir / "sysid.yaml", tmp_path / "runs", capsys, bundle=trained_quadruped_bundle
    )
    assert "open-loop |trunk error|" in printed and "median |joint error| (fitted)" in printed, printed
    assert np.linalg.norm(fitted[1]) < 0.8 * np.linalg.norm(nominal[1]), (nominal, fitted)  # after 0.2 s
    assert "closed loop (fitted): RMS sim - log trunk" in printed and "  command (+0.00, +0.30, +0.00)" in printed
    closed = json.loads((folder / "replay.json").read_text())["logs"][0]["closed_loop"]
    assert not closed["fitted"]["crashed"] and not closed["nominal"]["crashed"]
    rms = {label: np.linalg.norm(list(c["rms_m"].values())) for label, c in closed.items()}
    # The trunk's RMS difference is printed, not judged: gaits fall out of phase, and a phase slip integrates into
    # position. Measured on this test's log (joint noise): 5.6 to 20.7 cm on the fit against 25 to 29.5 cm nominal
    # in some runs, and 30.0, 33.4 and 37.8 cm on the fit against 17.5, 22.8 and 26.7 cm nominal in others (two of
    # them clean-clone CI runs). The mean body velocity per command is the comparison that holds.
    gap = {
        label: np.mean([np.abs(np.subtract(g["sim"], g["log"])).max() for g in c["segments"]])
        for label, c in closed.items()
    }
    print("closed loop", rms, gap)
    assert gap["fitted"] < gap["nominal"], (gap, closed)


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
