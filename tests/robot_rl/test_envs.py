"""robot_rl.envs: PerDroneEnv, a swarm task's drones as PPO's environments (per-drone credit assignment)."""

from __future__ import annotations

import pytest
import torch

from robot_rl import commands
from robot_rl.config import load_config
from robot_rl.envs import PerDroneEnv, make_env
from robot_rl.policies.swarm_actor import policy_from_checkpoint
from robot_rl.training.checkpoint import latest_checkpoint, load_checkpoint
from robot_rl.training.ppo_trainer import PPOTrainer

TEAM = ["task=crazyflie_swarm", "algo=ppo_swarm", "task.num_worlds=2", "task.params.num_drones=3",
        "train.save_every=1", "train.progress=false"]  # fmt: skip
PER_DRONE = [*TEAM, "algo.per_drone=true"]


def test_each_drone_is_an_environment_with_its_own_reward_and_outcome():
    short = ["task.episode_length_s=0.3"]
    per, team = make_env(load_config([*PER_DRONE, *short])), make_env(load_config([*TEAM, *short]))
    assert isinstance(per, PerDroneEnv) and per.num_envs == 6 and per.num_worlds == 2 and per.num_actions == 4
    W, N = 2, 3
    obs_p, obs_t = per.get_observations(), team.get_observations()
    D = obs_p["policy"].shape[1]
    # same seed, same worlds: a drone's policy input is its block of the team's observation (noise included)
    torch.testing.assert_close(obs_p["policy"], obs_t["policy"].reshape(W * N, D))
    # its critic input: own block, own clearance, then the whole team's critic observation
    team_critic = obs_t["critic"]
    assert obs_p["critic"].shape == (W * N, D + 1 + team_critic.shape[1])
    torch.testing.assert_close(obs_p["critic"][:, D + 1 :], team_critic.repeat_interleave(N, 0))
    torch.testing.assert_close(obs_p["critic"][:, :D], team_critic[:, : N * D].reshape(W * N, D))

    gen = torch.Generator().manual_seed(0)
    finished = None
    for _ in range(per.max_episode_length):
        a = 0.3 * torch.randn(W, N * 4, generator=gen)
        _, r_p, d_p, x_p = per.step(a.reshape(W * N, 4))
        _, r_t, d_t, x_t = team.step(a)
        # the team's reward is the mean of its drones' rewards, and the drones' differ
        torch.testing.assert_close(r_p.reshape(W, N).mean(1), r_t, rtol=1e-5, atol=1e-5)
        assert r_p.reshape(W, N).std(1).min() > 0
        assert torch.equal(d_p, d_t.repeat_interleave(N))
        assert torch.equal(x_p["time_outs"], x_t["time_outs"].repeat_interleave(N))
        if "final" in x_p:
            finished = (x_p["final"], x_t["final"])
            break
    assert finished is not None, "no episode ended"
    drone, world = finished
    assert torch.equal(drone["ids"], (world["ids"].unsqueeze(1) * N + torch.arange(N)).reshape(-1))
    # each drone's own outcome, whose mean over the team is the world's
    for key in ("success", "obstacle_collision", "neighbour_collision", "position_error_m"):
        assert drone[key].shape == drone["ids"].shape
        torch.testing.assert_close(drone[key].reshape(-1, N).mean(1), world[key])
    per.close(), team.close()


def test_per_drone_training_counts_world_steps_and_its_policy_flies_a_team(tmp_path):
    run = commands.train_one(load_config([*PER_DRONE, f"runs_root={tmp_path}", "run_name=pd", "train.iterations=1"]))
    ckpt = latest_checkpoint(run)
    d = load_checkpoint(ckpt)
    assert d["total_steps"] == 24 * 2  # env steps are world steps, not drone steps
    assert d["actor_cfg"]["num_drones"] == 1 and d["actor_state_dict"]["distribution.std_param"].shape == (4,)

    env = make_env(load_config([*PER_DRONE]), num_worlds=4)
    trainer = PPOTrainer(env, dict(d["algo"]))
    trainer.load(ckpt)
    actor = trainer.inference_policy()
    obs = env.get_observations()
    team = policy_from_checkpoint(ckpt, num_drones=3)  # the same weights over a team's (W, N * D) observation
    assert policy_from_checkpoint(ckpt).num_drones == 1
    with torch.no_grad():
        want = actor(obs).reshape(4, 12)
        torch.testing.assert_close(team(obs["policy"].reshape(4, -1)), want, rtol=0, atol=1e-6)
    env.close()


def test_per_drone_needs_a_multi_drone_task():
    with pytest.raises(ValueError, match="per_drone needs a multi-drone task"):
        make_env(load_config(["task=crazyflie_hover", "task.num_worlds=2", "+algo.per_drone=true"]))
