"""Session fixtures shared across the test tree: one real (tiny) training run, exported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")


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
