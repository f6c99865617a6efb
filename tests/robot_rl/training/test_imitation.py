"""Imitation warm start (DAgger): the teacher is in the policy's action units, a tiny run lowers the imitation
loss, and its checkpoint is one that `robot-rl train init_from=` starts PPO from."""

from __future__ import annotations

import json

import pytest
import torch

from robot_rl import commands
from robot_rl.config import ConfigError
from robot_rl.training.checkpoint import load_checkpoint
from robot_rl.training.imitation import DaggerConfig, beta_schedule, dagger_config, teacher_actions
from sim.env import BatchedEnv, EnvConfig
from sim.tasks.crazyflie import CrazyflieSwarm

TINY = ["task=crazyflie_swarm", "algo=ppo_swarm", "task.num_worlds=4", "task.params.num_drones=3",
        "backend.nthread=1", "train.progress=false", "seed=3"]  # fmt: skip


@pytest.mark.parametrize("teacher", ["sensed_safe_command", "safe_command"])
def test_teacher_is_in_the_policy_action_units(teacher):
    task = CrazyflieSwarm(num_drones=2)
    env = BatchedEnv(task, EnvConfig(num_worlds=2, nthread=1))
    a = teacher_actions(task, teacher)
    assert a.shape == (2, env.num_actions) and a.min() >= -1.0 and a.max() <= 1.0
    # the env executes command(a) = 0.5 + 0.5 a: exactly the teacher's motor command
    torch.testing.assert_close(task.command(a.double()), getattr(task, teacher)(), atol=1e-6, rtol=0)
    # one row per drone when each drone is an environment (robot_rl.envs.PerDroneEnv)
    assert torch.equal(teacher_actions(task, teacher, num_actions=4), a.reshape(4, 4))
    env.close()


def test_beta_decays_to_zero_and_settings_are_checked():
    assert [beta_schedule(r, 4, 1.0, 0.5) for r in range(4)] == [1.0, 0.5, 0.25, 0.0]
    assert beta_schedule(0, 1, 0.8, 0.5) == 0.8
    assert dagger_config({"rounds": "3", "beta0": "0.5", "exploration_noise": "false"}) == DaggerConfig(
        rounds=3, beta0=0.5, exploration_noise=False
    )
    for bad in ({"round": "3"}, {"rounds": "many"}, {"beta0": "2"}):
        with pytest.raises(ValueError):
            dagger_config(bad)
    with pytest.raises(ValueError, match="no teacher 'oracle'"):  # the task knows its teachers
        teacher_actions(CrazyflieSwarm(num_drones=2), "oracle")


@pytest.mark.parametrize("per_drone", [False, True], ids=["team", "per_drone"])
def test_tiny_dagger_lowers_the_loss_and_ppo_starts_from_its_checkpoint(tmp_path, per_drone):
    settings = ["imitation.rounds=2", "imitation.steps_per_round=60", "imitation.updates_per_round=150",
                "imitation.batch_size=64", "imitation.critic_iterations=1", f"algo.per_drone={per_drone}"]  # fmt: skip
    run = commands.cmd_imitate([*TINY, *settings, f"runs_root={tmp_path}", "run_name=warm"])
    rounds = json.loads((run / "imitation.json").read_text())["rounds"]
    assert [r["beta"] for r in rounds] == [1.0, 0.0]
    # the untrained student's error on round 0's samples, against the fitted one's
    assert rounds[-1]["train_loss"] < 0.5 * rounds[0]["fresh_loss"]  # measured 0.0008 against 0.03 (6 seeds)

    ckpt = load_checkpoint(run / "checkpoints" / "model_0.pt")
    assert ckpt["iteration"] == 0
    assert ckpt["total_steps"] == 2 * 60 * 4 + 1 * 24 * 4  # DAgger steps + the critic warm-up iteration
    # the normalizer saw every drone sample of both (PPO's update adds the warm-up's)
    assert ckpt["actor_state_dict"]["obs_normalizer.norm.count"] == ckpt["total_steps"] * 3

    (ppo,) = commands.cmd_train([*TINY, f"init_from={run}", "train.iterations=1", f"runs_root={tmp_path}",
                                 "run_name=ppo", f"algo.per_drone={per_drone}"])  # fmt: skip
    meta = json.loads((ppo / "meta.json").read_text())
    assert meta["init_from"].endswith("model_0.pt") and meta["iterations"] == 1
    assert meta["total_steps"] == ckpt["total_steps"] + 24 * 4


def test_imitate_needs_a_task_with_the_teacher(tmp_path):
    with pytest.raises(ConfigError, match="no teacher"):
        commands.cmd_imitate(["task=arm_reach", "task.num_worlds=2", f"runs_root={tmp_path}"])
    assert not any(tmp_path.iterdir())  # nothing half-written


HOVER = ["task=crazyflie_hover", "task.num_worlds=8", "backend.nthread=1", "train.progress=false"]
HOVER_DAGGER = ["train.warm_start=dagger", "imitation.rounds=2", "imitation.steps_per_round=40",
                "imitation.updates_per_round=20", "imitation.batch_size=64",
                "imitation.critic_iterations=0"]  # fmt: skip


def test_a_warm_started_run_imitates_then_trains_in_one_run_directory(tmp_path):
    (run,) = commands.cmd_train([*HOVER, *HOVER_DAGGER, "train.iterations=1", f"runs_root={tmp_path}", "run_name=w"])
    record = json.loads((run / "imitation.json").read_text())
    assert [r["beta"] for r in record["rounds"]] == [1.0, 0.0] and record["config"]["rounds"] == 2
    assert load_checkpoint(run / "checkpoints" / "model_0.pt")["total_steps"] == 2 * 40 * 8  # the student
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "finished" and meta["iterations"] == 1
    assert meta["total_steps"] == 2 * 40 * 8 + 24 * 8  # imitation's env steps, then one PPO iteration's
    assert meta["train_wall_time_s"] >= record["wall_s"]
    # train.iterations=0: the student is the run's policy; without a warm start that trains nothing
    (only,) = commands.cmd_train([*HOVER, *HOVER_DAGGER, "train.iterations=0", f"runs_root={tmp_path}", "run_name=z"])
    assert json.loads((only / "meta.json").read_text())["iterations"] == 0
    with pytest.raises(ConfigError, match="train.iterations=0 trains nothing"):
        commands.cmd_train([*HOVER, "train.iterations=0", f"runs_root={tmp_path}", "run_name=n"])


def teacher_outcomes(env, episodes: int) -> list[float]:
    """The success of the first `episodes` episodes the task's teacher flies in env."""
    outcomes = []
    while len(outcomes) < episodes:
        _, _, _, extras = env.step(teacher_actions(env.task))
        if "final" in extras:
            outcomes += extras["final"]["success"].tolist()
    return outcomes


def test_the_hover_teacher_flies_the_demo_task():
    """The scripted expert DAgger imitates: 64 worlds of the demo's evaluation conditions (DR, noise, latency),
    one 8 s episode each (measured on 1,024 episodes: 0.996 success, median final error 1.2 cm)."""
    from robot_rl.config import load_config
    from robot_rl.envs import make_env

    env = make_env(load_config(HOVER), num_worlds=64, seed=12345, pushes=False)
    env.reset()
    outcomes = teacher_outcomes(env, 64)
    assert sum(outcomes) / len(outcomes) >= 0.9, outcomes


def test_the_hover_teacher_hovers_a_fitted_drone_from_the_fit(tmp_path):
    """With task.params.sysid= the teacher's feed-forward is the fitted drone's hover thrust, so it holds the
    goal on that drone without leaning on its bounded integral: at rest at the goal its thrust command lifts
    exactly the fitted weight, and 64 worlds of the fitted drone (every world that drone, noise, its latency)
    succeed as on the nominal one."""
    import yaml

    from robot_rl.config import load_config
    from robot_rl.envs import make_env
    from sim.tasks.crazyflie.hover_teacher import GRAVITY, hover_pwm

    mass, thrust = 0.027 * 1.15, 0.9  # the sim-to-real tests' hidden robot
    params = {"mass_kg": mass, "thrust_scale": thrust, "motor_tau_s": 0.08, "latency_s": 0.02}
    path = tmp_path / "sysid.yaml"
    fit = {k: {"value": v, "interval": [v, v]} for k, v in params.items()}
    path.write_text(yaml.safe_dump({"robot": "crazyflie_2_1", "parameters": fit}))
    cfg = load_config([*HOVER, f"task.params.sysid={path}"])
    env = make_env(cfg, num_worlds=64, seed=12345, pushes=False, randomization="none")
    env.reset()
    task, b = env.task, env.task.backend
    assert task.teacher_mass_kg == pytest.approx(mass / thrust)
    b.qpos[:, 0:3], b.qpos[:, 3:7], b.qvel[:, :] = task.goal_pos, torch.tensor([1.0, 0, 0, 0]), 0.0
    task.err_int.zero_()
    rpyt = task.act_offset + task.act_scale * task.teacher("position_controller")
    # the PWM whose thrust on the nominal curve, times the fitted coefficient, holds the fitted mass
    expected = hover_pwm(torch.tensor([mass * GRAVITY / thrust], dtype=torch.float64))
    torch.testing.assert_close(rpyt[:, 3], expected.expand(64), atol=1.0, rtol=0)
    env.reset()
    outcomes = teacher_outcomes(env, 64)
    assert sum(outcomes) / len(outcomes) >= 0.9, outcomes
