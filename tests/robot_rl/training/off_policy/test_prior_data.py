"""robot-rl collect records a real run's episodes in the replay ring's layout; algo.prior_data mixes them into
every batch (RLPD's symmetric sampling); a dataset that does not fit is refused in one line."""

import json
import shutil

import numpy as np
import pytest

from robot_rl import commands
from robot_rl.config import load_config
from robot_rl.envs import make_env
from robot_rl.training.off_policy.prior_data import DatasetError, load_prior
from robot_rl.training.off_policy.trainer import OffPolicyTrainer


@pytest.fixture(scope="module")
def dataset(tiny_run, tmp_path_factory):
    """40 episodes of the tiny PPO hover run (with action noise), by robot-rl collect."""
    run = tmp_path_factory.mktemp("collect") / "run"
    shutil.copytree(tiny_run, run)
    meta = commands.cmd_collect([f"run={run}", "episodes=40", "noise=0.1", "task.num_worlds=20"])
    return run / "datasets" / "trained_40.npz", meta


def test_collect_records_labelled_episodes_with_true_next_observations(dataset):
    path, meta = dataset
    assert json.loads(path.with_suffix(".json").read_text()) == meta
    assert meta["task"] == "crazyflie_hover" and meta["source"]["checkpoint"] == "model_3.pt"
    with np.load(path, allow_pickle=False) as f:
        d = {k: f[k] for k in f.files}
    steps, worlds = d["rewards"].shape
    assert worlds == 20 and meta["transitions"] == steps * worlds and meta["episodes"]["finished"] >= 40
    assert d["obs"].shape == (steps, worlds, meta["obs_dim"]) and d["actions"].shape == (steps, worlds, 4)
    assert np.abs(d["actions"]).max() <= 1.0
    assert set(np.unique(d["episode_success"])) <= {-1, 0, 1}
    assert (d["episode_success"] >= 0).sum() == meta["episodes"]["finished"]
    # within an episode the next observation is the next step's; at its end it is the final one, not the reset's
    same = np.all(d["next_obs"][:-1] == d["obs"][1:], axis=-1)
    done = d["done"][:-1]
    assert same[~done].all() and not same[done].any() and done.any()
    # one episode index per world-step, changing exactly after a done
    changes = d["episode"][1:] != d["episode"][:-1]
    assert (changes == done).all()


def test_prior_data_fills_its_share_of_every_batch(dataset, tmp_path, fast_overrides):
    path, meta = dataset
    with np.load(path, allow_pickle=False) as f:
        marked = {k: f[k] for k in f.files}
    marked["rewards"] = np.full_like(marked["rewards"], 1000.0)  # prior transitions are recognisable
    marked_path = tmp_path / "marked.npz"
    np.savez(marked_path, **marked)
    cfg = load_config(
        ["algo=td3", *fast_overrides, "algo.n_step=1", f"algo.prior_data={marked_path}", "algo.prior_ratio=0.25"]
    )
    env = make_env(cfg, final_observation=True)
    from omegaconf import OmegaConf

    trainer = OffPolicyTrainer(env, OmegaConf.to_container(cfg.algo, resolve=True))
    trainer.learn(1, progress=False)  # loads the prior ring and collects online steps
    batch = trainer._sample()
    assert batch["returns"].shape == (128,)
    assert int((batch["returns"] == 1000.0).sum()) == 32  # 0.25 of 128, online rewards are far from 1000


def test_a_run_with_prior_data_trains_and_refuses_data_that_does_not_fit(dataset, tmp_path, capsys, fast_overrides):
    path, _ = dataset
    (run,) = commands.cmd_train(
        [f"runs_root={tmp_path}", "run_name=rlpd", f"algo.prior_data={path}", "algo=td3", *fast_overrides]
    )
    assert "prior data: " in capsys.readouterr().out
    assert json.loads((run / "meta.json").read_text())["status"] == "finished"
    with pytest.raises(DatasetError, match=r"obs is \(\d+, 20, 25\), this run needs \(\d+, 20, 30\)"):
        load_prior(path, 30, None, 4, "cpu")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(DatasetError, match="is not a prior-data file"):
        load_prior(junk, 25, None, 4, "cpu")
