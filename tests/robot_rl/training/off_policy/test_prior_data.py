"""robot-rl collect records a real run's episodes in the replay ring's layout; algo.prior_data mixes them into
every batch (RLPD's symmetric sampling); a dataset that does not fit is refused in one line."""

import json
import shutil

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from robot_rl import commands
from robot_rl.config import ConfigError, load_config
from robot_rl.envs import make_env
from robot_rl.training.off_policy.config import OffPolicyConfig
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


def _actor_mse(trainer: OffPolicyTrainer, path) -> float:
    with np.load(path, allow_pickle=False) as f:
        obs, actions = (torch.from_numpy(f[k]).flatten(0, 1) for k in ("obs", "actions"))
    actor = trainer.agent.actor
    with torch.no_grad():
        return float((actor.mlp(actor.obs_normalizer(obs)) - actions).pow(2).mean())


def test_offline_pretraining_with_the_bc_term_imitates_the_data_and_is_not_repeated_on_resume(
    dataset, tmp_path, fast_overrides
):
    path, _ = dataset
    (run,) = commands.cmd_train(
        [f"runs_root={tmp_path}", "run_name=td3bc", f"algo.prior_data={path}", "algo=td3", *fast_overrides,
         "algo.pretrain_updates=300", "algo.bc_weight=10", "algo.policy_delay=1", "train.save_every=1"]
    )  # fmt: skip
    cfg = load_config([f"algo.prior_data={path}", "algo=td3", *fast_overrides, "algo.policy_delay=1"])
    fresh = OffPolicyTrainer(make_env(cfg, final_observation=True), OmegaConf.to_container(cfg.algo, resolve=True))
    fresh._load_prior()  # the same observation statistics as the run's start, untrained networks
    pretrained = OffPolicyTrainer(make_env(cfg, final_observation=True), OmegaConf.to_container(cfg.algo))
    pretrained.load(run / "checkpoints" / "model_0.pt")
    assert pretrained.agent.updates == 300 and pretrained.total_steps == 0  # offline: no env step yet
    # the behaviour-cloning term pulled the actor toward the recorded actions
    assert _actor_mse(pretrained, path) < 0.5 * _actor_mse(fresh, path)
    finished = OffPolicyTrainer(make_env(cfg, final_observation=True), OmegaConf.to_container(cfg.algo))
    finished.load(run / "checkpoints" / "model_2.pt")
    updates = finished.agent.updates
    assert updates > 300
    finished.cfg.pretrain_updates = 300
    finished.pretrain(progress=False)  # a resumed run: online steps taken, nothing more offline
    assert finished.agent.updates == updates


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["algo=td3", "algo.bc_weight=1"], "algo.bc_weight learns from prior data"),
        (["algo=td3", "algo.pretrain_updates=10"], "algo.pretrain_updates learns from prior data"),
        (["algo=sac", "algo.bc_weight=1", "algo.prior_data=x.npz"], "TD3\\+BC's term: algo=td3, not algo=sac"),
    ],
)
def test_pretraining_options_without_prior_data_or_on_sac_are_refused(overrides, message):
    cfg = load_config(overrides)
    with pytest.raises(ValueError, match=message):
        OffPolicyConfig.from_dict(OmegaConf.to_container(cfg.algo, resolve=True))


def test_plan_demonstrations_are_the_actions_the_env_took_labelled_with_the_runs_keypoint_reward(
    tmp_path, fast_overrides
):
    """collect policy=plan records what the plan controller applied: the same controller from the same seed steps
    a plain env of the run (no plan) in lock step with its applied actions, and that env's observations, keypoint
    rewards and ends are the dataset's; the controller picks and places most blocks. (The dataset's float32 actions
    alone do not replay the episode: a 1e-8 rounding grows to 1e-3 rad/s in the joints within 15 steps.)"""
    from robot_rl.commands.collect import plan_demonstrator
    from robot_rl.commands.common import run_config
    from robot_rl.commands.train import attach_guidance

    (run,) = commands.cmd_train(
        [f"runs_root={tmp_path}", "run_name=kp", "task=arm_pick_place", "task.action_mode=ee_position",
         "task.params.layouts=2", "guidance=keypoint", "algo=td3", *fast_overrides, "task.num_worlds=8",
         "train.iterations=1"]
    )  # fmt: skip
    meta = commands.cmd_collect([f"run={run}", "policy=plan", "episodes=8", f"out={tmp_path / 'demos'}"])
    assert meta["source"]["policy"] == "plan" and meta["action_mode"] == "ee_position" and meta["num_actions"] == 4
    assert meta["episodes"]["finished"] == 8 and meta["episodes"]["successful"] >= 6  # the plan alone: 0.988
    with np.load(tmp_path / "demos.npz", allow_pickle=False) as f:
        d = {k: f[k] for k in f.files}
    cfg = run_config(run, [])
    controlled, plain = (make_env(cfg, num_worlds=8, seed=meta["seed"], final_observation=True) for _ in range(2))
    for env in (controlled, plain):  # as collect does: the run's keypoint reward labels the transitions
        attach_guidance(cfg, env, None)
    plan = plan_demonstrator(controlled)
    for t in range(d["rewards"].shape[0]):
        obs = plain.get_observations()["policy"]
        assert torch.equal(obs, controlled.get_observations()["policy"])
        np.testing.assert_allclose(d["obs"][t], obs.numpy(), rtol=1e-6, atol=1e-6)
        plan.step(torch.zeros(8, plan.num_actions))
        np.testing.assert_allclose(d["actions"][t], plan.last_action.numpy(), rtol=1e-6, atol=1e-7)
        _, rewards, dones, _ = plain.step(plan.last_action)
        np.testing.assert_allclose(d["rewards"][t], rewards.numpy(), rtol=1e-5, atol=1e-6)
        assert (dones.numpy() == d["done"][t]).all()
    # plan_reads=perceived: the controller reads the noisy state the learner observes, from the same start
    seen = commands.cmd_collect([f"run={run}", "policy=plan", "episodes=8", "plan_reads=perceived",
                                 f"out={tmp_path / 'seen'}"])  # fmt: skip
    assert seen["source"]["plan"]["reads"] == "perceived" and seen["episodes"]["successful"] >= 6
    with np.load(tmp_path / "seen.npz", allow_pickle=False) as f:
        assert np.array_equal(f["obs"][0], d["obs"][0])
        # the first actions may agree (far from the block both saturate); the episodes do not
        assert not (f["actions"].shape == d["actions"].shape and np.allclose(f["actions"], d["actions"]))
    with pytest.raises(ConfigError, match="plan_reads= is the plan controller's: policy=plan, not policy=zero"):
        commands.cmd_collect([f"run={run}", "policy=zero", "plan_reads=perceived"])


@pytest.mark.parametrize("held", [True, False])
def test_online_steps_leave_the_prior_datas_observation_statistics_unless_told(dataset, fast_overrides, held):
    path, _ = dataset
    cfg = load_config(["algo=td3", *fast_overrides, f"algo.prior_data={path}", f"algo.hold_prior_normalization={held}"])
    algo = OmegaConf.to_container(cfg.algo, resolve=True)
    prior_only = OffPolicyTrainer(make_env(cfg, final_observation=True), algo)
    prior_only._load_prior()
    trained = OffPolicyTrainer(make_env(cfg, final_observation=True), algo)
    trained.learn(2, progress=False)
    for part in ("actor", "critic"):
        before = getattr(prior_only.agent, part).obs_normalizer.state_dict()
        after = getattr(trained.agent, part).obs_normalizer.state_dict()
        same = all(torch.equal(before[k], after[k]) for k in before)
        assert same == held, part
