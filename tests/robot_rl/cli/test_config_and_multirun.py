"""Hydra composition behind our CLI: groups, overrides, type checks, sweeps."""

import json

import pytest

from robot_rl.config import ConfigError, expand_sweep, load_config


def test_defaults_and_group_override():
    cfg = load_config([])
    assert cfg.task.name == "crazyflie_hover" and cfg.algo.name == "ppo" and cfg.backend.name == "mujoco"
    cfg = load_config(["task=crazyflie_goto", "seed=4", "algo.learning_rate=3e-4"])
    assert cfg.task.name == "crazyflie_goto" and cfg.seed == 4 and cfg.algo.learning_rate == 3e-4


@pytest.mark.parametrize("bad", ["seed=abc", "train.iterations=1.5", "task.obs_noise=maybe", "task.num_worlds=[1]"])
def test_type_errors(bad):
    with pytest.raises(ConfigError, match=bad.split("=")[0]):
        load_config([bad])


def test_unknown_group_option_lists_the_choices():
    with pytest.raises(ConfigError, match="crazyflie_goto"):
        load_config(["task=nope"])


def test_expand_sweep():
    runs = expand_sweep(["seed=0,1", "task=crazyflie_hover,crazyflie_goto", "train.iterations=3"])
    assert len(runs) == 4 and ["seed=1", "task=crazyflie_goto", "train.iterations=3"] in runs


def test_multirun_trains_one_run_per_value(tmp_path):
    from robot_rl import commands

    runs = commands.cmd_train(
        [
            "-m",
            "seed=0,1",
            f"runs_root={tmp_path}",
            "task.num_worlds=16",
            "train.iterations=1",
            "algo.num_steps_per_env=8",
            "train.progress=false",
        ]  # fmt: skip
    )
    assert len(runs) == 2
    seeds = sorted(json.loads((r / "meta.json").read_text())["seed"] for r in runs)
    assert seeds == [0, 1]
    for r in runs:
        meta = json.loads((r / "meta.json").read_text())
        assert meta["status"] == "finished" and meta["versions"]["torch"].startswith("2.13.0")
        assert (r / "checkpoints" / "model_1.pt").is_file() and list((r / "tb").glob("events.*"))
