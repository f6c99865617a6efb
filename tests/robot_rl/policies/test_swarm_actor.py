"""The swarm policies as rsl_rl actors (issue 8): train, resume, fine-tune, extract for C export."""

from __future__ import annotations

import torch

from robot_rl import commands
from robot_rl.config import load_config
from robot_rl.envs import make_env
from robot_rl.export.c_export import OneDrone, export_c
from robot_rl.policies.swarm_actor import SwarmActorModel, extract_policy, policy_from_checkpoint
from robot_rl.policies.swarm_attention import SwarmAttentionPolicy, SwarmMlpPolicy
from robot_rl.training.checkpoint import latest_checkpoint, load_checkpoint
from robot_rl.training.ppo_trainer import PPOTrainer

TINY = ["task=crazyflie_swarm", "algo=ppo_swarm", "task.num_worlds=2", "task.params.num_drones=3",
        "train.save_every=1", "train.progress=false"]  # fmt: skip


def test_swarm_actor_trains_resumes_fine_tunes_and_exports(tmp_path):
    common = [*TINY, f"runs_root={tmp_path}"]
    stage1 = commands.train_one(load_config([*common, "run_name=s1", "train.iterations=2",
                                             "task.params.rewards.safety_guide=0.25"]))  # fmt: skip
    ckpt = load_checkpoint(latest_checkpoint(stage1))
    assert ckpt["iteration"] == 2 and ckpt["actor_cfg"]["policy"] == "swarm_attention"
    assert "actor_state_dict" in ckpt and any(k.startswith("mlp.policy.head") for k in ckpt["actor_state_dict"])

    # stage 2: a new run initialised from stage 1, guide off; then interrupted and resumed
    stage2 = commands.train_one(load_config([*common, "run_name=s2", "train.iterations=3",
                                             f"init_from={stage1}"]))  # fmt: skip
    assert latest_checkpoint(stage2).name == "model_3.pt"
    commands.train_one(load_config([f"resume={stage2}", "train.iterations=4", "resume_finished=true"]))
    assert latest_checkpoint(stage2).name == "model_4.pt"
    # a fine-tune with its own fixed learning rate starts from it, not from the rate stage 1 had adapted to
    stage2b = commands.train_one(load_config([*common, "run_name=s2b", "train.iterations=3", f"init_from={stage1}",
                                              "algo.schedule=fixed", "algo.learning_rate=2.5e-5"]))  # fmt: skip
    assert load_checkpoint(latest_checkpoint(stage2b))["learning_rate"] == 2.5e-5
    assert load_checkpoint(latest_checkpoint(stage1))["learning_rate"] != 2.5e-5

    # the checkpoint's actor, rebuilt by our trainer, and the extracted stand-alone policy agree exactly
    cfg = load_config([*common])
    env = make_env(cfg, num_worlds=5)
    trainer = PPOTrainer(env, dict(load_checkpoint(latest_checkpoint(stage2))["algo"]))
    trainer.load(latest_checkpoint(stage2))
    actor = trainer.inference_policy()
    assert isinstance(actor, SwarmActorModel)
    policy = policy_from_checkpoint(latest_checkpoint(stage2))
    assert type(policy) is SwarmAttentionPolicy and policy.num_drones == 3
    obs = env.get_observations()
    obs["policy"] = obs["policy"] + torch.randn(obs["policy"].shape)  # away from the trained distribution, too
    with torch.no_grad():
        want = actor(obs)
        torch.testing.assert_close(policy(obs["policy"]), want, rtol=0, atol=1e-6)
        torch.testing.assert_close(extract_policy(actor)(obs["policy"]), want, rtol=0, atol=1e-6)
        one = OneDrone(policy)(obs["policy"].reshape(5, 3, -1))  # what the generated C computes per drone
        torch.testing.assert_close(one.flatten(-2), want, rtol=0, atol=1e-6)
    assert not torch.equal(policy.obs_std, torch.ones_like(policy.obs_std))  # the normalization came along
    assert export_c(policy, tmp_path / "c")["parameters"] == 2948
    env.close()

    # a wider attention policy (algo.swarm_hidden) trains, and its checkpoint rebuilds at that width
    wide = commands.train_one(load_config([*common, "run_name=wide", "train.iterations=1", "algo.swarm_hidden=24"]))
    policy = policy_from_checkpoint(latest_checkpoint(wide))
    assert policy.wq.in_features == 24 and export_c(policy, tmp_path / "c24")["parameters"] > 2948


def test_mlp_option_and_shared_normalization():
    cfg = load_config([*TINY, "algo.actor=swarm_mlp"])
    env = make_env(cfg)
    trainer = PPOTrainer(env, dict(cfg.algo))
    actor = trainer.alg.actor
    assert isinstance(actor.mlp.policy, SwarmMlpPolicy)
    # one std per action (rsl_rl's Gaussian), one normalizer for all drones (D statistics, not N x D)
    assert actor.distribution.std_param.shape == (12,)
    assert actor.obs_normalizer.norm._mean.shape[-1] == env.task.per_drone_obs_dim
    obs = env.get_observations()
    perm = torch.tensor([2, 0, 1])
    swapped = obs.clone()
    swapped["policy"] = obs["policy"].reshape(2, 3, -1)[:, perm].reshape(2, -1)
    with torch.no_grad():
        torch.testing.assert_close(actor(swapped).reshape(2, 3, 4), actor(obs).reshape(2, 3, 4)[:, perm])
    env.close()
