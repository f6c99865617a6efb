"""Planned exploration with the off-policy learners: the plan-guided env's final observations carry the plan state
of the episode that ended, so TD3/SAC bootstrap its time-outs; TD3 trains on it through the CLI, the critic scores
options for the value_bonus rule, and checkpoints carry what online correction learned."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("pydantic")

from robot_rl import commands  # noqa: E402
from robot_rl.guidance.plan.config import PlanGuidanceConfig  # noqa: E402
from robot_rl.guidance.plan.guided_env import PlanGuidedEnv  # noqa: E402
from robot_rl.training.checkpoint import load_checkpoint  # noqa: E402
from sim.env import BatchedEnv, EnvConfig  # noqa: E402
from sim.tasks.arm import ArmPickPlace  # noqa: E402

WORLDS, LAYOUTS = 8, 2


def plan_env(episode_s: float, final_observation: bool) -> PlanGuidedEnv:
    cfg = EnvConfig(num_worlds=WORLDS, seed=0, randomization="none", obs_noise=False, action_latency=False,
                    pushes=False, nthread=1, episode_length_s=episode_s,
                    final_observation=final_observation)  # fmt: skip
    task = ArmPickPlace(layouts=LAYOUTS, action_mode="ee_position")
    return PlanGuidedEnv(BatchedEnv(task, cfg), PlanGuidanceConfig())


def test_final_observations_carry_the_plan_features_of_the_ended_episode():
    """Two envs in lock step, one whose episodes end after 10 steps: at that step its final observations equal
    what the other (whose episodes go on) observes after the same step, plan features included, while the
    observations it returns are the next episode's."""
    ending, going_on = plan_env(0.4, final_observation=True), plan_env(8.0, final_observation=False)
    assert ending.gives_final_observation and not going_on.gives_final_observation
    assert ending.max_episode_length == 10
    ending.reset(), going_on.reset()
    residual = torch.Generator().manual_seed(1)
    for step in range(10):
        a = 0.3 * torch.randn(WORLDS, ending.num_actions, generator=residual)
        obs, _, dones, extras = ending.step(a)
        seen, _, _, _ = going_on.step(a)
        if step < 9:
            assert not dones.any() and torch.equal(obs["policy"], seen["policy"])
    assert dones.all() and extras["time_outs"].all()
    final = extras["final_observation"]
    assert final["policy"].shape == obs["policy"].shape
    width = ending.plan_features().shape[1]
    assert torch.allclose(final["policy"], seen["policy"], atol=1e-6)
    # the returned observations start new episodes: progress (the last plan feature) is 0 again
    assert (obs["policy"][:, -1] == 0).all() and final["policy"][:, -width:].abs().sum() > 0


@pytest.mark.slow
def test_td3_trains_on_the_plan_guided_env_and_resumes(tmp_path, capsys, fast_overrides):
    overrides = [f"runs_root={tmp_path}", "algo=td3", "run_name=r", "guidance=plan", "task=arm_pick_place",
                 "task.action_mode=ee_position", "task.params.layouts=2", "task.episode_length_s=0.4",
                 "guidance.rule=value_bonus", "guidance.inject_wrong_option=true", *fast_overrides]  # fmt: skip
    (run,) = commands.cmd_train(overrides)
    ckpt = load_checkpoint(run / "checkpoints" / "model_2.pt")
    assert ckpt["total_steps"] == 2 * 8 * 16 and ckpt["updates"] > 0
    # the plan's features are part of what the actor sees, and online correction's record is in the checkpoint
    assert ckpt["guidance"]["selector"] and (run / "checkpoints" / "replay.pt").is_file()
    capsys.readouterr()
    commands.cmd_train([f"runs_root={tmp_path}", f"resume={run}", "train.iterations=3", "resume_finished=true"])
    assert "transitions restored" in capsys.readouterr().out
    assert load_checkpoint(run / "checkpoints" / "model_3.pt")["total_steps"] == 3 * 8 * 16


def test_the_critic_scores_options_for_the_value_bonus_rule():
    from omegaconf import OmegaConf

    from robot_rl.config import load_config
    from robot_rl.envs import make_env
    from robot_rl.training.off_policy.trainer import OffPolicyTrainer

    cfg = load_config(["algo=td3", "guidance=plan", "task=arm_pick_place", "task.action_mode=ee_position",
                       "task.params.layouts=2", "guidance.rule=value_bonus"])  # fmt: skip
    env = make_env(cfg, num_worlds=4, final_observation=True)
    trainer = OffPolicyTrainer(env, OmegaConf.to_container(cfg.algo, resolve=True))
    assert env.value_fn == trainer.state_values
    values = env.value_fn(env.get_observations())
    assert values.shape == (4,) and torch.isfinite(values).all()


@pytest.mark.slow
def test_collect_records_a_plan_guided_runs_zero_residual_with_the_plans_features(tmp_path, fast_overrides):
    """robot-rl collect policy=zero on a plan-guided run: the plan's demonstrations for a plan-guided learner (the
    residual 0 as the action, the plan's features in every observation, ended episodes' next observations from
    the final observation), most of them successful; TD3 pretrains on them."""
    import numpy as np

    (run,) = commands.cmd_train(
        [f"runs_root={tmp_path}", "run_name=p", "algo=td3", "guidance=plan", "task=arm_pick_place",
         "task.action_mode=ee_position", "task.params.layouts=2", *fast_overrides, "task.num_worlds=8",
         "train.iterations=1"]
    )  # fmt: skip
    meta = commands.cmd_collect([f"run={run}", "policy=zero", "episodes=8", f"out={tmp_path / 'demos'}"])
    assert meta["episodes"]["finished"] == 8 and meta["episodes"]["successful"] >= 6  # the plan alone: 0.988
    with np.load(tmp_path / "demos.npz", allow_pickle=False) as f:
        d = {k: f[k] for k in f.files}
    env = plan_env(8.0, final_observation=True)
    width = env.get_observations()["policy"].shape[1]
    assert d["obs"].shape[-1] == d["next_obs"].shape[-1] == width and not d["actions"].any()
    ended = d["done"].astype(bool)
    assert ended.any() and (d["next_obs"][ended][:, -1] > 0).all()  # the ended episode's progress, not a reset's 0
    (tuned,) = commands.cmd_train(
        [f"runs_root={tmp_path}", "run_name=t", "algo=td3", "guidance=plan", "task=arm_pick_place",
         "task.action_mode=ee_position", "task.params.layouts=2", *fast_overrides, "task.num_worlds=8",
         f"algo.prior_data={tmp_path / 'demos.npz'}", "algo.pretrain_updates=20", "algo.bc_weight=10"]
    )  # fmt: skip
    assert load_checkpoint(tuned / "checkpoints" / "model_2.pt")["updates"] > 20
