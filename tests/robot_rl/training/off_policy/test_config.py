"""The algo section is refused with a ValueError naming the key (a ConfigError through make_trainer and the CLI)."""

import pytest

from robot_rl.config import ConfigError
from robot_rl.training.off_policy.config import OffPolicyConfig


def test_yaml_defaults_build(tmp_path):
    from omegaconf import OmegaConf

    from robot_rl.config import load_config

    for name in ("td3", "sac"):
        cfg = OffPolicyConfig.from_dict(OmegaConf.to_container(load_config([f"algo={name}"]).algo, resolve=True))
        assert cfg.name == name and cfg.n_step == 3


@pytest.mark.parametrize(
    "key, value",
    [
        ("gamma", 1.5),
        ("batch_size", 0),
        ("n_step", 2.5),
        ("updates_per_step", 0),
        ("tau", -0.1),
        ("device", "tpu"),
        ("critic_hidden_dims", []),
        ("learning_starts", -1),
        ("log_std_min", 3.0),
        ("asymmetric", "yes"),
    ],
)
def test_bad_values_name_the_key(key, value):
    with pytest.raises(ValueError, match=f"algo.{key}="):
        OffPolicyConfig.from_dict({"name": "td3", key: value})


def test_unknown_key_is_named():
    with pytest.raises(ValueError, match="unknown key algo.batchsize"):
        OffPolicyConfig.from_dict({"name": "td3", "batchsize": 256})


def test_cli_turns_it_into_a_config_error(tmp_path):
    from robot_rl import commands

    with pytest.raises(ConfigError, match="algo.batch_size"):
        commands.cmd_train(
            [f"runs_root={tmp_path}", "algo=td3", "algo.batch_size=0", "task.num_worlds=4", "train.iterations=1"]
        )
    assert not any(tmp_path.iterdir())  # refused before a run directory was made
