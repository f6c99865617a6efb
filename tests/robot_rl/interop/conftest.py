"""Crazyflie LEAPP fixtures: the committed hover checkpoint as a run, exported by `robot-rl export format=leapp`,
and raw states recorded from the simulator flown by its bundle."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parents[2] / "data" / "crazyflie_hover_ppo"


@pytest.fixture(scope="session")
def crazyflie_leapp_run(tmp_path_factory) -> Path:
    """A run directory holding tests/data/crazyflie_hover_ppo (as tests/conftest.py's _export_committed builds
    one), exported by the CLI: run/bundle (ours) and run/leapp/crazyflie_hover/ (traced and validated by leapp)."""
    pytest.importorskip("leapp")
    import shutil

    from robot_rl import commands

    run = tmp_path_factory.mktemp("cf_leapp") / "run"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copy(DATA / "config.yaml", run / "config.yaml")
    shutil.copy(DATA / "model.pt", run / "checkpoints" / "model_300.pt")
    (run / "config.yaml").write_text(
        (run / "config.yaml").read_text().replace("runs_root: runs", f"runs_root: {run.parent}")
    )
    commands.cmd_export([f"run={run}", "format=leapp"])
    return run


@pytest.fixture(scope="session")
def crazyflie_raw_states(crazyflie_leapp_run) -> list[dict]:
    """300 control steps (3 s) of one hover world flown by its bundle from a randomized start, with the training
    run's randomization, latency and sensor noise: the raw state a Crazyflie reports at each step, without what the
    runtime keeps itself (last action, the goal-error integral)."""
    import numpy as np
    import torch
    from omegaconf import OmegaConf

    from robot_rl.deploy import PolicyRuntime
    from robot_rl.envs import make_env

    env = make_env(OmegaConf.load(crazyflie_leapp_run / "config.yaml"), num_worlds=1, seed=11)
    env.reset()
    runtime = PolicyRuntime(crazyflie_leapp_run / "bundle")
    states = []
    for _ in range(300):
        raw = {k: v.numpy()[0].copy() for k, v in env.task.last_raw.items()}
        states.append({k: v for k, v in raw.items() if k not in ("last_action", "goal_error_integral")})
        runtime.act(states[-1])
        env.step(torch.from_numpy(runtime.last_action[None].astype(np.float32)))
    return states
