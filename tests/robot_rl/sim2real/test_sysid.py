"""robot-rl sysid on the recorded "real" flight recovers the hidden parameters; task.params.sysid re-centres
domain randomization on the fit."""

from __future__ import annotations

import pytest

from robot_rl.cli import main

pytestmark = pytest.mark.slow


def test_sysid_recovers_hidden_parameters(flight_fit):
    """robot-rl sysid of the "real" flight (the session's flight_fit, which then replays it with the fit)."""
    from sim2real_robot import HIDDEN

    from sim.tasks.crazyflie.physical import load_fit

    out = flight_fit["out"]
    assert "95% interval" in flight_fit["sysid"] and "latency_s" in flight_fit["sysid"]
    fit = load_fit(out / "sysid.yaml")
    truth = {**HIDDEN, "inertia_scale": 1.0}
    for name in ("thrust_scale", "inertia_scale", "motor_tau_s", "latency_s"):
        value, lo, hi = fit[name]
        assert abs(value - truth[name]) <= 0.10 * truth[name], (name, value, truth[name])
        assert lo <= truth[name] <= hi, (name, lo, truth[name], hi)
        # an interval that says something (latency: whole 2 ms substeps, its resolution widens it)
        assert hi - lo < (0.5 if name == "latency_s" else 0.2) * truth[name], (name, lo, hi)
    report = (out / "report.html").read_text()
    assert "thrust_scale" in report and "motor_tau_s" in report

    # replay prints its error table for both models and the fitted one predicts better
    table = flight_fit["replay"]
    assert "|ez| median" in table and "fitted" in table and "nominal" in table
    assert (out / "replay.json").is_file() and (out / "replay.svg").stat().st_size > 1000


def test_training_randomization_recentred_on_a_fit(tmp_path):
    import yaml

    from sim.env import BatchedEnv, EnvConfig
    from sim.tasks.crazyflie import CrazyflieHover
    from sim.tasks.crazyflie.physical import FIT_FLOOR, NOMINAL_MASS_KG

    fit = {
        "robot": "crazyflie_2_1",
        "parameters": {
            "thrust_scale": {"value": 0.9, "interval": [0.89, 0.91]},
            "motor_tau_s": {"value": 0.08, "interval": [0.07, 0.095]},
            "mass_kg": {"value": 0.031, "interval": [0.031, 0.031]},
            "latency_s": {"value": 0.02, "interval": [0.016, 0.024]},
        },
    }
    path = tmp_path / "sysid.yaml"
    path.write_text(yaml.safe_dump(fit))
    env = BatchedEnv(CrazyflieHover(sysid=str(path)), EnvConfig(num_worlds=256, randomization="train"))
    task = env.task
    assert task.dr["kf"] == pytest.approx(
        (0.9 * (1 - FIT_FLOOR["thrust_scale"]), 0.9 * (1 + FIT_FLOOR["thrust_scale"]))
    )
    assert task.dr["motor_tau"] == pytest.approx((0.07, 0.095))
    assert task.dr["latency_substeps"] == (8, 12)  # 16..24 ms
    kf = task.firmware.kf_scale[:, 0]
    assert kf.min() >= 0.9 * 0.97 - 1e-9 and kf.max() <= 0.9 * 1.03 + 1e-9 and kf.std() > 0.005
    mass = env.backend.expand("body_mass")[:, 1] / NOMINAL_MASS_KG
    assert abs(float(mass.mean()) * NOMINAL_MASS_KG - 0.031) < 0.0005
    env.close()
    # randomization=none: every world is the fitted drone
    env = BatchedEnv(CrazyflieHover(sysid=str(path)), EnvConfig(num_worlds=4, randomization="none"))
    assert env.task.firmware.kf_scale[:, 0].tolist() == pytest.approx([0.9] * 4)
    env.close()
    # a file that is not a fit: a clear error naming it
    bad = tmp_path / "bad.yaml"
    bad.write_text("robot: go1\n")
    with pytest.raises(ValueError, match="not a Crazyflie fit"):
        BatchedEnv(CrazyflieHover(sysid=str(bad)), EnvConfig(num_worlds=1))


def test_sitl_physical_file_errors_name_the_key(trained_bundle, tmp_path, capsys):
    bad = tmp_path / "robot.yaml"
    bad.write_text("mass: 0.031\n")
    assert main(["sitl", f"bundle={trained_bundle}", f"record={tmp_path / 'f.mcap'}", f"physical={bad}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'mass'" in err and "mass_kg" in err, err
    assert not (tmp_path / "f.mcap").exists()
