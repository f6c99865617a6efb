"""The arm half of the sim-to-real loop: a "real" arm (the arm sim bridge hiding joint damping, armature and servo
stiffness), moved by the committed reach policy through target steps over the ROS 2 nodes (policy, arm safety,
lock-step) with the recorder on; `robot-rl sysid` on that MCAP recovers each hidden parameter and its intervals
contain the truth."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robot_rl.cli import main

pytestmark = pytest.mark.slow

# the "real" arm: viscous damping x1.5, armature x1.3, servo stiffness x0.8; encoder-like joint noise
HIDDEN = {"damping_scale": 1.5, "armature_scale": 1.3, "kp_scale": 0.8}
SENSING = {"position_noise_rad": 5e-4, "velocity_noise_rads": 5e-3}
RUN_S = 14.0  # 35 windows of 0.4 s; a loaded machine loses up to half (see below)


@pytest.fixture(scope="module")
def perturbed_reach(trained_arm_bundle, tmp_path_factory):
    pytest.importorskip("rclpy")
    pytest.importorskip("mcap_ros2")
    from robot_rl_ros.rosenv import apply_local_dds

    from robot_rl.ros_package import ros_function

    apply_local_dds()
    out = tmp_path_factory.mktemp("sim2real_arm") / "reach.mcap"
    reach = ros_function("sitl_reach_recorded")
    summary = reach(str(trained_arm_bundle), str(out), seconds=RUN_S, physical_params=json.dumps(HIDDEN), sim=SENSING)
    assert summary["finished"] and summary["mode"] == "ACTIVE", summary
    return out


def test_arm_log_aligns_states_and_commands(perturbed_reach):
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    from robot_rl.sim2real.arm_log import read_arm_log
    from sim.tasks.arm.scene import ARM_DOF

    log = read_arm_log(perturbed_reach)
    assert log.namespace == "arm" and log.report.state_topic == "/arm/joint_states"
    assert abs(log.report.period_s - 0.04) < 1e-6 and not log.report.gaps and log.report.duplicates == 0
    assert np.all(np.diff(log.t) > 0) and log.duration_s >= RUN_S - 0.1
    assert log.target is not None and len({tuple(p) for p in log.target.round(3)}) >= 4  # the targets moved
    with open(perturbed_reach, "rb") as f:
        sent = {
            tuple(np.round(m.data, 9))
            for _, c, _, m in make_reader(f, decoder_factories=[DecoderFactory()]).iter_decoded_messages()
            if c.topic == "/arm/forward_position_controller/commands"
        }
    used = {tuple(row) for row in np.round(log.commands[log.commanded], 9)}
    assert used <= sent  # nothing invented; one in effect for no step only when superseded within its step
    assert len(sent) - len(used) <= log.report.superseded <= 0.2 * len(sent), (len(used), len(sent), log.report)
    # the arm moved: every joint's range over the run is well above the encoder noise
    assert (np.ptp(log.position[:, :ARM_DOF], axis=0) > 0.02).all(), np.ptp(log.position, axis=0)


@pytest.fixture(scope="module")
def arm_fit(perturbed_reach, tmp_path_factory):
    """robot-rl sysid on the recorded log: (sysid.yaml as a dict, what it printed, the output folder)."""
    import contextlib
    import io

    import yaml

    out = tmp_path_factory.mktemp("arm_fit")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["sysid", f"log={perturbed_reach}", f"out={out}"]) == 0
    return yaml.safe_load((out / "sysid.yaml").read_text()), printed.getvalue(), out


def test_sysid_recovers_hidden_arm_parameters(arm_fit):
    doc, printed, out = arm_fit
    assert "95% interval" in printed and "kp_scale" in printed
    # Windows with a step of two commands are left out. Before the lock-step bridges took no step for a late command,
    # 22 of 25 windows of a 10 s run were kept on an idle machine, 11 in a CI run of a slow day; since, 32 of 35 of a
    # 14 s run in each of 12 runs (5 beside other CPU load). 12 leave the three parameters well determined.
    assert doc["robot"] == "panda_like" and doc["windows"] >= 12
    assert doc["cost"]["fitted"] < 0.1 * doc["cost"]["nominal"], doc["cost"]
    for name, truth in HIDDEN.items():
        entry = doc["parameters"][name]
        value, (lo, hi) = entry["value"], entry["interval"]
        assert abs(value - truth) <= 0.10 * truth, (name, value, truth)
        # an interval that says something: widths of 1-11% of the truth measured (CI: damping [1.402, 1.560]),
        # and 15.8% in a later CI run (damping [1.410, 1.648], 29 windows): the clustered intervals widen when the
        # windows that fell out are the informative ones
        assert hi - lo < 0.20 * truth, (name, lo, hi)
    report = (out / "report.html").read_text()
    assert "kp_scale" in report and "armature_scale" in report


def test_arm_intervals_contain_the_truth(arm_fit):
    """Servo torque limits put cliffs into the cost (robot_rl/sim2real/mjspec_fit.py): the secant Gauss-Newton and
    the profiled initial states keep the fit off them, and the arm's systematic part (robot_rl/sim2real/arm_sysid.py,
    2%) covers where the smooth trend beneath them bottoms out: 1.0-1.1% off on a noise-free SITL log, armature 1.3%
    off on this test's noisy one. The lock-stepped log is the same from run to run (6 runs, 3 beside two busy loops:
    1.49401, 1.31708, 0.79687). Before, with 0.5%, armature's interval [1.3095, 1.3247] left out 1.3 in every run
    (a non-strict xfail)."""
    doc, _, _ = arm_fit
    print({n: (round(p["value"], 5), [round(x, 5) for x in p["interval"]]) for n, p in doc["parameters"].items()})
    for name, truth in HIDDEN.items():
        lo, hi = doc["parameters"][name]["interval"]
        assert lo <= truth <= hi, (name, lo, truth, hi)


def test_replay_of_the_arm_log_shows_the_fit_closing_the_gap(
    perturbed_reach, arm_fit, trained_arm_bundle, tmp_path, capsys
):
    """robot-rl replay of the arm's log, nominal model and the fit, open and closed loop: the open-loop TCP error
    table is printed and the fit's errors are a fraction of the nominal model's; the reach bundle, run in simulation
    through the safety node's filter towards the logged targets, follows the log's TCP far closer on the fit; the
    dashboard's sim-vs-real page reads replay.json."""
    import json

    from sim2real_robot import replay_nominal_and_fit

    _, _, fit_dir = arm_fit
    runs_root = tmp_path / "runs"
    printed, folder, nominal, fitted = replay_nominal_and_fit(
        perturbed_reach, fit_dir / "sysid.yaml", runs_root, capsys, bundle=trained_arm_bundle
    )
    assert "open-loop |TCP error|" in printed and "median |joint error| (fitted)" in printed, printed
    # after 0.2 and 0.4 s the fit is nearer the log (measured median |TCP error| 0.33 against 0.70 mm after 0.2 s:
    # most windows start settled, and the encoder noise, 0.5 mrad, is about 0.3 mm at the TCP)
    for h in (0, 1):
        assert np.linalg.norm(fitted[h]) < 0.8 * np.linalg.norm(nominal[h]), (h, nominal, fitted)
    assert "closed loop (fitted): RMS sim - log TCP" in printed, printed
    closed = json.loads((folder / "replay.json").read_text())["logs"][0]["closed_loop"]
    rms = {label: np.linalg.norm(list(c["rms_m"].values())) for label, c in closed.items()}
    # measured on a SITL log with this noise: nominal 5.4, 6.5, 7.9 mm, the truth 0.3, 0.5, 0.7 mm (the policy there
    # saw noisy joints, here exact ones; on a noise-free log the truth's was 4-12 micrometres); in one test run the
    # fit 3.2, 5.9, 5.0 mm against 7.5, 11.3, 11.8 nominal: SITL runs differ in which periods the lock-stepped bridge
    # stepped twice or on a held command, and the replay keeps to one policy step a period
    assert rms["fitted"] < 0.7 * rms["nominal"] and rms["nominal"] > 2e-3, {k: c["rms_m"] for k, c in closed.items()}
    assert (folder / "replay.svg").is_file()
    assert main(["replay", f"log={perturbed_reach}", "bundle=x", f"runs_root={runs_root}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no policy.yaml in x" in err, err


def scripted_log(sim, steps: int = 150):
    """An ArmLog of the in-process "real" arm (sim.arm_sitl.ArmSitl) under scripted joint-target steps: noise free,
    one command per step."""
    from robot_rl.sim2real.arm_log import ArmLog
    from robot_rl.sim2real.log_common import LogReport

    rng = np.random.default_rng(0)
    home = sim.state()["position"].copy()
    target, q, v, cmd = home.copy(), [], [], []
    for k in range(steps + 1):
        if k % 25 == 0:
            goal = home + np.r_[rng.uniform(-0.3, 0.3, 7), 0.0, 0.0]
        st = sim.state()
        q.append(st["position"].copy())
        v.append(st["velocity"].copy())
        target = target + np.clip(goal - target, -0.03, 0.03)
        cmd.append(target.copy())
        sim.step(target)
    t = np.arange(steps + 1) * 0.04
    report = LogReport("joint_states", "commands", steps + 1, steps + 1, period_s=0.04)
    log = ArmLog("scripted", "arm", t, np.array(q), np.array(v), np.array(cmd), np.ones(steps + 1, bool), report)
    return log


def test_noise_free_fit_is_exact_and_parameters_reach_the_model(tmp_path):
    """Identifiability without noise: an in-process run of the "real" arm under scripted joint-target steps is fitted
    back to the truth within 1e-4 (the residual at the truth is exactly 0; servo torque limits put cliffs into the
    cost where sysid.optimize stopped 1.2% off, measured damping_scale 1.504 for 1.5 and armature_scale 1.315 for
    1.3; the secant Gauss-Newton after it ends within 1e-6); and the sysid
    modifiers (mujoco.sysid.apply_pgain/apply_dgain on the MjSpec) write the same model fields as the SITL robot's
    per-world ones."""
    import torch

    from robot_rl.sim2real.arm_sysid import SysidOptions, arm_spec, fit_arm, parameter_dict
    from sim.arm_sitl import ArmSitl
    from sim.tasks.arm.physical import nominal_values

    torch.set_num_threads(1)
    sim = ArmSitl(physical=HIDDEN)
    sim.reset()
    spec = arm_spec()
    pd = parameter_dict(spec)
    for name, value in HIDDEN.items():
        pd[name].value[:] = value
    for p in pd.values():
        p.apply_modifier(spec)
    fitted, real = nominal_values(spec.compile()), nominal_values(sim.env.backend.model)
    b = sim.env.backend
    assert np.array_equal(fitted["kp"], b.expand("actuator_gainprm")[0, real["actuator"], 0].numpy())
    assert np.array_equal(fitted["kv"], -b.expand("actuator_biasprm")[0, real["actuator"], 2].numpy())
    assert np.array_equal(fitted["damping"], b.expand("dof_damping")[0, real["dof"]].numpy())
    assert np.array_equal(fitted["armature"], b.expand("dof_armature")[0, real["dof"]].numpy())

    log = scripted_log(sim)
    result = fit_arm([log], SysidOptions(skip_s=0.0))
    for name, truth in HIDDEN.items():
        assert abs(result.estimates[name].value - truth) < 1e-4 * truth, (name, result.estimates[name].value)
    assert result.cost_fitted < 1e-3 * result.cost_nominal
    # replay under the truth predicts the noise-free log exactly; the nominal model does not
    from robot_rl.sim2real.arm_replay import arm_open_loop_errors
    from sim.tasks.arm.physical import ArmParams

    truth, joint_truth = arm_open_loop_errors(log, ArmParams(**HIDDEN), "truth")
    nominal, joint_nominal = arm_open_loop_errors(log, ArmParams(), "nominal")
    assert truth.windows == 5 and truth.predicted.shape == (5, 25, 3)  # 1 s windows from 1 s on
    assert truth.median_m.max() < 1e-9 and joint_truth.max() < 1e-9, (truth.median_m, joint_truth)
    # after 0.2 s, mid-transient (measured 5.6 and 7.1 mm in x and y, 7.4 mrad); by 1 s both have settled
    assert nominal.median_m[0].max() > 2e-3 and joint_nominal[0] > 2e-3, (nominal.median_m, joint_nominal)


def test_crazyflie_reader_still_refuses_an_arm_log_without_commands(tmp_path, capsys):
    """A log with joint_states but no forward controller commands is not an arm log the fit can use: it takes the
    Crazyflie path, which names it as another robot's log in one line (exit 2)."""
    from sim2real_robot import write_joint_state_log

    path = tmp_path / "arm.mcap"
    write_joint_state_log(path)
    assert main(["sysid", f"log={path}", f"out={tmp_path / 'fit'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not of a Crazyflie" in err, err
