"""Session fixtures shared across the test tree: one real (tiny) training run, exported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")


# make test runs the tests on 2 pytest-xdist workers. Tests that share a costly fixture go to one worker as one
# unit, so it is built once; all others are spread test by test. Each unit is a tuple of node-id prefixes. Measured
# set-up times (2 cores, -n 2): the Crazyflie's perturbed flight and its fit ~110 s (session fixtures); the arm's and
# the quadruped's SITL recording ~23 s and fit ~20 s each, the swarm SITL run ~20 s, the base-install venv ~11 s
# (module fixtures: each was built on both workers when their tests were spread).
SHARED_FIXTURE_UNITS = (
    (
        "tests/robot_rl/sim2real/test_flight_log.py::",
        "tests/robot_rl/sim2real/test_sysid.py::",
        "tests/robot_rl/dashboard/test_dashboard_browser.py::test_sim_vs_real_page",
    ),
    ("tests/robot_rl/sim2real/test_arm_sysid.py::",),
    ("tests/robot_rl/sim2real/test_quadruped_sysid.py::",),
    ("tests/ros_nodes/test_swarm_sitl.py::",),
    ("tests/robot_rl/deploy/test_base_install_parity.py::",),
    ("tests/robot_rl/training/off_policy/test_prior_data.py::",),
    # MJWarp's kernels compile once (~30-90 s per model), then warp's disk cache serves them
    ("tests/sim/test_mjwarp_backend.py::", "tests/bench/test_gpu_throughput.py::"),
)


def shared_fixture_unit(nodeid: str) -> str:
    """The scheduling unit of a test: its shared-fixture unit's first prefix, else the test itself."""
    for unit in SHARED_FIXTURE_UNITS:
        if nodeid.startswith(unit):
            return unit[0]
    return nodeid


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: absent without xdist
def pytest_xdist_make_scheduler(config, log):
    # xdist's own --dist loadgroup does not group under pytest 9.2 (it renames items through Item._nodeid, which
    # pytest no longer reads): a scope scheduler whose scopes are these units does the same job.
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return shared_fixture_unit(nodeid)

    return SharedFixtureScheduling(config, log)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """`robot-rl train` for 3 iterations on 64 worlds, then eval (32 episodes), export and play.

    Not a good policy: a real run directory with every artifact, built by our own commands.
    """
    from robot_rl import commands

    root = tmp_path_factory.mktemp("runs")
    common = [f"runs_root={root}", "task.num_worlds=64", "eval.episodes=32", "play.seconds=1.5"]
    (run,) = commands.cmd_train([*common, "train.iterations=3", "train.save_every=1", "run_name=tiny", "seed=1"])
    commands.evaluate_run(run)
    commands.export_run(run)
    commands.play_run(run)
    return run


@pytest.fixture(scope="session")
def hover_bundle(tiny_run) -> Path:
    return tiny_run / "bundle"


def _export_committed(name: str, tmp_path_factory) -> Path:
    """A committed checkpoint under tests/data/<name> exported by today's code (layout drift fails)."""
    import shutil

    from omegaconf import OmegaConf

    from robot_rl.commands.common import load_actor
    from robot_rl.export.bundle_export import export_bundle

    data = Path(__file__).parent / "data" / name
    run = tmp_path_factory.mktemp(name) / "run"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copy(data / "config.yaml", run / "config.yaml")
    shutil.copy(data / "model.pt", run / "checkpoints" / "model_300.pt")
    actor, env = load_actor(OmegaConf.load(run / "config.yaml"), run)
    return export_bundle(actor, env.task, run / "bundle", {"run": f"tests/data/{name}"}).path


@pytest.fixture(scope="session")
def trained_bundle(tmp_path_factory) -> Path:
    """The committed hover policy (tests/data/crazyflie_hover_ppo)."""
    return _export_committed("crazyflie_hover_ppo", tmp_path_factory)


@pytest.fixture(scope="session")
def perturbed_flight(trained_bundle, tmp_path_factory) -> Path:
    """A "real" Crazyflie's flight log: the sim bridge with hidden physical parameters
    (tests/robot_rl/sim2real/sim2real_robot.py), flown through the ROS 2 nodes (policy, safety) by the committed
    hover policy through goal steps, recorded to MCAP by the recorder. Shared by the sim2real and dashboard tests."""
    pytest.importorskip("rclpy")
    pytest.importorskip("mcap_ros2")
    import json
    import sys

    from robot_rl_ros.rosenv import apply_local_dds

    from robot_rl.ros_package import ros_function

    here = str(Path(__file__).parent / "robot_rl" / "sim2real")
    if here not in sys.path:
        sys.path.insert(0, here)  # --import-mode=importlib: sim2real_robot is imported by name
    from sim2real_robot import FLIGHT_S, HIDDEN, SENSING

    apply_local_dds()
    out = tmp_path_factory.mktemp("sim2real") / "flight.mcap"
    fly = ros_function("sitl_fly_recorded")
    summary = fly(str(trained_bundle), str(out), seconds=FLIGHT_S, physical_params=json.dumps(HIDDEN), sim=SENSING)
    assert summary["finished"] and summary["mode"] == "ACTIVE", summary
    return out


@pytest.fixture(scope="session")
def flight_fit(perturbed_flight, trained_bundle, tmp_path_factory) -> dict:
    """`robot-rl sysid` then `robot-rl replay` (the fit, and the bundle in closed loop) of the "real" flight, once
    for the session: {"out": the folder both wrote, "sysid": and "replay": what each printed}. The sysid tests
    check the fit, the dashboard's sim-vs-real page shows the folder."""
    import contextlib
    import io

    from sim2real_robot import HIDDEN  # on sys.path since perturbed_flight

    from robot_rl.cli import main

    out = tmp_path_factory.mktemp("s2r_fit") / "flight"
    printed = {}
    for verb, args in (
        ("sysid", [f"mass_kg={HIDDEN['mass_kg']}"]),
        ("replay", [f"params={out / 'sysid.yaml'}", f"bundle={trained_bundle}"]),
    ):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            code = main([verb, f"log={perturbed_flight}", *args, f"out={out}"])
        assert code == 0, buf.getvalue()[-2000:]
        printed[verb] = buf.getvalue()
    return {"out": out, **printed}


@pytest.fixture(scope="session")
def trained_arm_bundle(tmp_path_factory) -> Path:
    """The committed arm reach policy (tests/data/arm_reach_ppo)."""
    return _export_committed("arm_reach_ppo", tmp_path_factory)


@pytest.fixture(scope="session")
def trained_pick_place_bundle(tmp_path_factory) -> Path:
    """The committed plan-guided pick-and-place residual (tests/data/arm_pick_place_td3bc_plan), exported by
    `robot-rl export` with today's code: the bundle carries its plan controller and the pool's 16 plans."""
    import shutil

    import yaml

    from robot_rl.commands.export import export_run

    data = Path(__file__).parent / "data" / "arm_pick_place_td3bc_plan"
    run = tmp_path_factory.mktemp("pick_place") / "run"
    (run / "checkpoints").mkdir(parents=True)
    cfg = yaml.safe_load((data / "config.yaml").read_text())
    cfg["runs_root"] = str(run.parent)
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    shutil.copy(data / "model.pt", run / "checkpoints" / "model_50.pt")
    return export_run(run)


@pytest.fixture(scope="session")
def pick_place_log(trained_pick_place_bundle, tmp_path_factory) -> Path:
    """The committed plan-guided pick-and-place bundle on layout 0 of its pool in lock-step SITL over the ROS 2
    nodes, the recorder on (8 s of robot time, MCAP): joint states, commands, and what perception reported."""
    pytest.importorskip("rclpy")
    pytest.importorskip("mcap_ros2")
    from robot_rl_ros.rosenv import apply_local_dds

    from robot_rl.ros_package import ros_function

    apply_local_dds()
    out = tmp_path_factory.mktemp("pick_place_log") / "pick.mcap"
    summary = ros_function("sitl_pick_place_recorded")(str(trained_pick_place_bundle), str(out), layout=0, seconds=8.0)
    assert summary["finished"] and summary["mode"] == "ACTIVE", summary
    return out


@pytest.fixture(scope="session")
def trained_quadruped_bundle(tmp_path_factory) -> Path:
    """The committed flat-ground quadruped policy (tests/data/quadruped_velocity_ppo)."""
    return _export_committed("quadruped_velocity_ppo", tmp_path_factory)


@pytest.fixture(scope="session")
def quadruped_leapp_run(tmp_path_factory) -> Path:
    """A run directory holding the committed quadruped checkpoint, exported by `robot-rl export format=leapp`:
    run/bundle (ours) and run/leapp/quadruped_velocity/ (the LEAPP pipeline leapp traced and validated)."""
    import shutil

    from robot_rl import commands

    data = Path(__file__).parent / "data" / "quadruped_velocity_ppo"
    run = tmp_path_factory.mktemp("leapp") / "run"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copy(data / "config.yaml", run / "config.yaml")
    shutil.copy(data / "model.pt", run / "checkpoints" / "model_300.pt")
    (run / "config.yaml").write_text(
        (run / "config.yaml").read_text().replace("runs_root: runs", f"runs_root: {run.parent}")
    )
    commands.cmd_export([f"run={run}", "format=leapp"])
    return run


@pytest.fixture(scope="session")
def quadruped_raw_states(quadruped_leapp_run) -> list[dict]:
    """300 control steps of one quadruped world driven by its bundle (commands resampled, pushes and noise as in
    training): the raw state a robot measures at each step, without the inputs the runtime keeps itself."""
    import numpy as np
    import torch
    from omegaconf import OmegaConf

    from robot_rl.deploy import PolicyRuntime
    from robot_rl.envs import make_env

    env = make_env(OmegaConf.load(quadruped_leapp_run / "config.yaml"), num_worlds=1, seed=11)
    env.reset()
    runtime = PolicyRuntime(quadruped_leapp_run / "bundle")
    states = []
    for _ in range(300):
        raw = {k: v.numpy()[0].copy() for k, v in env.task.last_raw.items()}
        states.append({k: v for k, v in raw.items() if k not in ("last_action", "default_joint_position")})
        runtime.act(states[-1])
        env.step(torch.from_numpy(runtime.last_action[None].astype(np.float32)))
    return states
